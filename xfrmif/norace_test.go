//go:build !race

package xfrmif

const raceEnabled = false
