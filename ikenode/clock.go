package ikenode

import "time"

// Clock is the IKE daemon's time: the now handed to the engine and the
// ticks that drive retransmissions, rekeys, liveness checks and
// lingering SAs. The zero Config's is the system clock; tests step a
// manual one instead of waiting out real timers.
type Clock interface {
	Now() time.Time
	// NewTicker returns a channel that receives the time every d, and a
	// function that stops it (it does not close the channel).
	NewTicker(d time.Duration) (c <-chan time.Time, stop func())
}

// systemClock is time.Now and time.NewTicker.
type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) NewTicker(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTicker(d)
	return t.C, t.Stop
}
