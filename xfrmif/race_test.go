//go:build race

package xfrmif

const raceEnabled = true
