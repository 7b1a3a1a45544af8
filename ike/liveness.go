package ike

import (
	"time"

	"github.com/ipsecd/ipsecd/ike/message"
)

// A liveness check (RFC 7296 §1.4, §2.4) is an empty INFORMATIONAL
// request; any authenticated answer proves the peer alive (LastHeard).
// The peer's empty request gets an empty answer (answerInformational).

// liveness is our liveness check.
type liveness struct{}

// Ping starts a liveness check (an empty INFORMATIONAL request, §1.4),
// queued while a request of ours is outstanding (see Next).
func (s *SA) Ping(now time.Time) ([]byte, error) {
	if s.state != StateEstablished {
		return nil, ErrNotEstablished
	}
	return s.startOrQueue(work{op: workPing}, func() (task, error) { return liveness{}, nil }, now)
}

func (liveness) request(*SA) (message.ExchangeType, []message.Payload, error) {
	return message.Informational, nil, nil
}

func (liveness) response(*SA, []message.Payload, time.Time) ([]byte, error) { return nil, nil }

func (liveness) drop(*SA) {}
