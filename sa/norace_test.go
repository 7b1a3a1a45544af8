//go:build !race

package sa

const raceEnabled = false
