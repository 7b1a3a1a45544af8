//go:build !race

package datapath

const raceEnabled = false
