package sa

import (
	"net/netip"
	"sync/atomic"
	"time"
)

// Acquire asks for an SA, as Linux's XFRM_MSG_ACQUIRE asks the key
// manager: a packet routed into interface Policy.IfID was let through by
// the out policy Policy, and no SA serves it. That is how an on-demand
// tunnel starts (swanctl's start_action = trap): the daemon installs the
// child's out policy with no SA, and the first packet routed into it
// asks IKE to negotiate the child. The packet itself was dropped and
// counted as XfrmOutNoStates, as Linux counts a packet that finds no
// state for its policy. Src and Dst are its inner addresses.
type Acquire struct {
	Policy   Policy
	Src, Dst netip.Addr
}

// DefaultAcquireInterval is how often, at most, one out policy raises an
// Acquire while packets keep finding no SA. A packet rate, however high,
// costs the handler one call a second per policy; a negotiation that
// failed is asked for again a second later. (Linux holds a larval state
// for xfrm_acq_expires, 30 s, but its key manager is asked by the kernel
// for every flow; the daemon drops acquires for a child it is already
// negotiating.)
const DefaultAcquireInterval = time.Second

// acquireHandler is what SetAcquireHandler installed.
type acquireHandler struct {
	fn    func(Acquire)
	every time.Duration
	epoch time.Time // the origin of acquireState.last
}

// acquireState is one out policy's rate limit: when it last raised an
// Acquire, in nanoseconds after the handler's epoch plus one (0: never).
type acquireState struct {
	last atomic.Int64
}

// SetAcquireHandler sets the function that receives Acquires (nil: none),
// at most one per out policy every interval (0 means
// DefaultAcquireInterval). It is called synchronously by the data-path
// worker whose packet found no SA, so it must not block: hand the Acquire
// to another goroutine (a buffered channel with a non-blocking send) and
// return. Setting a handler starts every policy's interval afresh.
func (d *SAD) SetAcquireHandler(fn func(Acquire), interval time.Duration) {
	if fn == nil {
		d.acquire.Store(nil)
		return
	}
	if interval <= 0 {
		interval = DefaultAcquireInterval
	}
	d.acquire.Store(&acquireHandler{fn: fn, every: interval, epoch: time.Now()})
}

// acquireFor raises an Acquire for the out policy i of f, unless that
// policy raised one less than the interval ago. Concurrent workers race
// for one compare-and-swap: one of them calls the handler. It allocates
// nothing when it does not call it.
func (d *SAD) acquireFor(f *iface, i int, src, dst netip.Addr) {
	h := d.acquire.Load()
	if h == nil || i >= len(f.outAcq) {
		return
	}
	st := f.outAcq[i]
	now := int64(time.Since(h.epoch)) + 1
	last := st.last.Load()
	if last != 0 && last >= now-int64(h.every) && last <= now {
		return
	}
	if !st.last.CompareAndSwap(last, now) {
		return
	}
	h.fn(Acquire{Policy: f.outPol[i], Src: src, Dst: dst})
}
