//go:build !race

package underlay

const raceEnabled = false
