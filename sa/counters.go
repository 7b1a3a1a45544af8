package sa

import "sync/atomic"

// Counter names one global counter, as /proc/net/xfrm_stat names it.
type Counter uint8

// The counters, in the order of /proc/net/xfrm_stat.
const (
	CounterNone Counter = iota // not a counter: the packet passed
	XfrmInError
	XfrmInBufferError
	XfrmInHdrError
	XfrmInNoStates
	XfrmInStateProtoError
	XfrmInStateModeError
	XfrmInStateSeqError
	XfrmInStateExpired
	XfrmInStateMismatch
	XfrmInStateInvalid
	XfrmInTmplMismatch
	XfrmInNoPols
	XfrmInPolBlock
	XfrmInPolError
	XfrmOutError
	XfrmOutBundleGenError
	XfrmOutBundleCheckError
	XfrmOutNoStates
	XfrmOutStateProtoError
	XfrmOutStateModeError
	XfrmOutStateSeqError
	XfrmOutStateExpired
	XfrmOutPolBlock
	XfrmOutPolDead
	XfrmOutPolError
	XfrmFwdHdrError
	XfrmOutStateInvalid
	XfrmAcquireError
	XfrmOutStateDirError
	XfrmInStateDirError
	numLinuxCounters

	// DroppedDummy marks a packet with next header 59 (RFC 4303 §2.6,
	// traffic flow confidentiality): dropped silently, counted nowhere.
	DroppedDummy Counter = 255
)

var counterNames = [numLinuxCounters]string{
	XfrmInError:             "XfrmInError",
	XfrmInBufferError:       "XfrmInBufferError",
	XfrmInHdrError:          "XfrmInHdrError",
	XfrmInNoStates:          "XfrmInNoStates",
	XfrmInStateProtoError:   "XfrmInStateProtoError",
	XfrmInStateModeError:    "XfrmInStateModeError",
	XfrmInStateSeqError:     "XfrmInStateSeqError",
	XfrmInStateExpired:      "XfrmInStateExpired",
	XfrmInStateMismatch:     "XfrmInStateMismatch",
	XfrmInStateInvalid:      "XfrmInStateInvalid",
	XfrmInTmplMismatch:      "XfrmInTmplMismatch",
	XfrmInNoPols:            "XfrmInNoPols",
	XfrmInPolBlock:          "XfrmInPolBlock",
	XfrmInPolError:          "XfrmInPolError",
	XfrmOutError:            "XfrmOutError",
	XfrmOutBundleGenError:   "XfrmOutBundleGenError",
	XfrmOutBundleCheckError: "XfrmOutBundleCheckError",
	XfrmOutNoStates:         "XfrmOutNoStates",
	XfrmOutStateProtoError:  "XfrmOutStateProtoError",
	XfrmOutStateModeError:   "XfrmOutStateModeError",
	XfrmOutStateSeqError:    "XfrmOutStateSeqError",
	XfrmOutStateExpired:     "XfrmOutStateExpired",
	XfrmOutPolBlock:         "XfrmOutPolBlock",
	XfrmOutPolDead:          "XfrmOutPolDead",
	XfrmOutPolError:         "XfrmOutPolError",
	XfrmFwdHdrError:         "XfrmFwdHdrError",
	XfrmOutStateInvalid:     "XfrmOutStateInvalid",
	XfrmAcquireError:        "XfrmAcquireError",
	XfrmOutStateDirError:    "XfrmOutStateDirError",
	XfrmInStateDirError:     "XfrmInStateDirError",
}

// String returns the Linux name of c.
func (c Counter) String() string {
	switch {
	case c == CounterNone:
		return "none"
	case c == DroppedDummy:
		return "dummy"
	case c < numLinuxCounters:
		return counterNames[c]
	}
	return "invalid"
}

// Counters are the global xfrm counters. The zero value is ready to use and
// safe for concurrent use.
type Counters struct {
	v [numLinuxCounters]atomic.Uint64
}

// Inc adds one to c. CounterNone and DroppedDummy are not counted.
func (cs *Counters) Inc(c Counter) {
	if c > CounterNone && c < numLinuxCounters {
		cs.v[c].Add(1)
	}
}

// add adds n to c, as n calls of Inc would.
func (cs *Counters) add(c Counter, n uint64) {
	if c > CounterNone && c < numLinuxCounters {
		cs.v[c].Add(n)
	}
}

// Get returns the value of c.
func (cs *Counters) Get(c Counter) uint64 {
	if c > CounterNone && c < numLinuxCounters {
		return cs.v[c].Load()
	}
	return 0
}

// Each calls fn for every counter in /proc/net/xfrm_stat order.
func (cs *Counters) Each(fn func(name string, value uint64)) {
	for c := CounterNone + 1; c < numLinuxCounters; c++ {
		fn(counterNames[c], cs.v[c].Load())
	}
}

// CounterByName returns the counter with the Linux name, and false if there
// is none.
func CounterByName(name string) (Counter, bool) {
	for c := CounterNone + 1; c < numLinuxCounters; c++ {
		if counterNames[c] == name {
			return c, true
		}
	}
	return CounterNone, false
}
