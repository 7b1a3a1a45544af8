//go:build race

package sa

const raceEnabled = true
