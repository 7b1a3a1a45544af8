// Package replay implements the ESP anti-replay window: the bitmap of
// RFC 6479 (a ring of 64-bit words in which a sequence number's bit position
// depends only on the number itself, so advancing the window clears whole
// words and never shifts) and the inference of the high 32 bits of an
// extended sequence number (ESN) from the low 32 bits that travel in the
// packet (RFC 4303 Appendix A2.2).
//
// It owns one thing, the Window of one inbound SA. It does not allocate after
// Init. Check is lock-free and may run concurrently with everything else;
// Advance must be serialised by the caller (the SA's lock), which is the
// shape of lesson 1 in docs/design.md: peek before decrypting, decrypt with no
// lock, then re-check and advance once under the lock after the ICV verified
// (RFC 4303 §3.4.3).
package replay

import (
	"strconv"
	"sync/atomic"
)

// MaxSize is the largest window Init accepts, in packets. Linux caps its
// window at 4096; this is larger so that a fast, heavily reordered link can
// still be served. Callers validate configured sizes against it.
const MaxSize = 1 << 16

// offWindowESN is the W of the ESN inference when anti-replay is off. With
// the window off, late packets are to be accepted, so the inference places
// seql at the 64-bit number nearest Top (up to 2^31 behind it, or up to 2^31
// ahead), as serial-number arithmetic does. W = 1 would read any packet
// that arrives after a later one as belonging to the next 2^32 epoch, and
// it would then fail its ICV. (Linux refuses ESN on an inbound SA with
// window 0 altogether.)
const offWindowESN = 1 << 31

const (
	wordBitsLog = 6 // a word is a uint64
	wordBits    = 1 << wordBitsLog
	bitMask     = wordBits - 1
)

// Verdict is what the window says about a sequence number.
type Verdict uint8

const (
	// OK: the sequence number is new and inside (or ahead of) the window.
	OK Verdict = iota
	// Duplicate: the sequence number is inside the window and was already
	// accepted. Linux counts it as "replay".
	Duplicate
	// TooOld: the sequence number is left of the window, or is not a valid
	// sequence number at all (0, or an ESN that would lie before the first
	// or after the last 64-bit sequence number). Linux counts it as
	// "replay-window".
	TooOld
)

// String returns the constant's name.
func (v Verdict) String() string {
	switch v {
	case OK:
		return "OK"
	case Duplicate:
		return "Duplicate"
	case TooOld:
		return "TooOld"
	}
	return "Verdict(" + strconv.Itoa(int(v)) + ")"
}

// Window is the anti-replay state of one inbound SA.
//
// The zero value is a window of size 0 without ESN: it accepts every
// sequence number except 0, and only tracks the highest. Call Init before
// first use to choose the size and ESN; Init must happen before any
// concurrent use.
//
// Sequence numbers start at 1 (RFC 4303 §3.3.3): 0 is never accepted, with
// or without ESN. With ESN, a low half of 0 is valid once the high half is
// above 0 (the wrap across 2^32). Without ESN the sequence number is the
// 32-bit counter of the packet and never wraps.
//
// Concurrency: Check and Top are safe to call from any number of goroutines,
// at the same time as Advance. Advance must not run concurrently with
// another Advance or with Init; the caller serialises it (the SA's lock).
// A Check that races with Advance may answer from a slightly stale window;
// that is harmless because Advance re-checks.
type Window struct {
	// top is the highest accepted sequence number (0 before any). Written
	// only by Advance, read by anyone.
	top atomic.Uint64
	// ring is the RFC 6479 bitmap: bit seq&63 of word (seq>>6)&mask is set
	// once seq was accepted. Its length is a power of two, large enough
	// that every sequence number inside the window has a word of its own.
	// Words are written only by Advance, read by anyone.
	ring []atomic.Uint64

	// Set by Init, read-only afterwards.
	mask   uint64 // len(ring) - 1
	size   uint32 // accepted window, in packets; 0 = anti-replay off
	inferW uint32 // W of the ESN inference: size, or offWindowESN when size is 0
	esn    bool
}

// Init resets w to an empty window of size packets, with ESN inference if
// esn is set. A size of 0 turns anti-replay off: every sequence number but 0
// is accepted, duplicates included, while the highest is still tracked so
// that ESN inference works. The inference then uses W = 2^31 (see
// offWindowESN), not the size.
//
// The window accepts exactly the sequence numbers in [Top()-size+1, Top()]
// that it has not accepted before, and anything above Top(). The bitmap
// behind it is rounded up to a power of two of 64-bit words, as RFC 6479
// does (size 64: 2 words, 1024: 32, 4096: 128).
//
// Init allocates the bitmap, reusing the previous one when it is the same
// length. It panics if size is larger than MaxSize. It must not run
// concurrently with any other method.
func (w *Window) Init(size uint32, esn bool) {
	if size > MaxSize {
		panic("replay: window size " + strconv.FormatUint(uint64(size), 10) +
			" is larger than MaxSize " + strconv.Itoa(MaxSize))
	}
	w.size = size
	w.esn = esn
	w.inferW = size
	w.top.Store(0)
	if size == 0 {
		w.inferW = offWindowESN
		w.ring = nil
		w.mask = 0
		return
	}
	// A run of size consecutive numbers touches at most
	// ceil((size-1)/64)+1 words; the ring must hold them all.
	n := 1
	for need := (int(size)-1+bitMask)/wordBits + 1; n < need; {
		n <<= 1
	}
	if len(w.ring) == n {
		for i := range w.ring {
			w.ring[i].Store(0)
		}
	} else {
		w.ring = make([]atomic.Uint64, n)
	}
	w.mask = uint64(n - 1)
}

// Size returns the window size Init was given, in packets (0 = off).
func (w *Window) Size() uint32 { return w.size }

// ESN reports whether w infers extended sequence numbers.
func (w *Window) ESN() bool { return w.esn }

// Top returns the highest accepted sequence number, 0 before any.
func (w *Window) Top() uint64 { return w.top.Load() }

// Check infers the full sequence number of a packet whose header carries
// seql, and says whether Advance would accept it now. It changes nothing.
//
// Without ESN, seq is seql. With ESN, seq carries the high 32 bits inferred
// as RFC 4303 Appendix A2.2 does, from Top and the window size; the caller
// authenticates them (they are part of the ICV) before calling Advance.
// When v is not OK, seq is only informative, and 0 when no valid 64-bit
// sequence number has these low bits (before the first, or past 2^64-1).
//
// Check is lock-free, does not allocate and is safe for concurrent use with
// Advance and other Checks. The caller must call Advance only with a seq
// for which Check returned OK.
func (w *Window) Check(seql uint32) (seq uint64, v Verdict) {
	top := w.top.Load()
	seq = uint64(seql)
	if w.esn {
		var ok bool
		if seq, ok = inferESN(top, seql, w.inferW); !ok {
			return 0, TooOld
		}
	}
	return seq, w.verdict(top, seq)
}

// inferESN returns the 64-bit sequence number with low half seql that lies
// in [top-W+1, top-W+1+2^32), using the case split of RFC 4303 Appendix
// A2.2 with Bl = Tl - W + 1. It reports false when that number would be
// below 0 or above 2^64-1.
func inferESN(top uint64, seql, W uint32) (uint64, bool) {
	th, tl := uint32(top>>32), uint32(top)
	bl := tl - W + 1 // wraps when the window reaches into epoch th-1
	seqh := th
	if tl >= W-1 {
		// Window entirely in epoch th: below it means the next epoch.
		if seql < bl {
			if th == ^uint32(0) {
				return 0, false
			}
			seqh = th + 1
		}
	} else {
		// Window straddles epochs th-1 and th: at or above Bl is the
		// tail of the previous epoch.
		if seql >= bl {
			if th == 0 {
				return 0, false
			}
			seqh = th - 1
		}
	}
	return uint64(seqh)<<32 | uint64(seql), true
}

// verdict says whether seq would be accepted by a window whose top is top.
// It reads the bitmap but writes nothing.
func (w *Window) verdict(top, seq uint64) Verdict {
	switch {
	case seq == 0:
		return TooOld
	case seq > top:
		return OK
	case w.size == 0:
		return OK
	case top-seq >= uint64(w.size):
		return TooOld
	}
	if w.ring[(seq>>wordBitsLog)&w.mask].Load()&(1<<(seq&bitMask)) != 0 {
		return Duplicate
	}
	return OK
}

// Advance re-checks seq against the window and, if it is acceptable, marks
// it seen and moves Top up to it. It returns OK only if this call accepted
// seq. Call it once the packet's ICV verified, with the seq Check returned.
//
// Jumping ahead clears the words that slide into the window; a jump of more
// than the bitmap clears it all. Advance does not allocate.
//
// Advance must not run concurrently with another Advance (the caller holds
// the SA's lock); Checks may run at the same time.
func (w *Window) Advance(seq uint64) Verdict {
	if seq == 0 {
		return TooOld
	}
	top := w.top.Load()
	if w.size == 0 {
		if seq > top {
			w.top.Store(seq)
		}
		return OK
	}
	bit := uint64(1) << (seq & bitMask)
	if seq > top {
		// Clear the words between the old top's and the new top's before
		// publishing the new top: a Check that sees the new top must not
		// see bits left over from an earlier lap of the ring.
		cur, next := top>>wordBitsLog, seq>>wordBitsLog
		diff := min(next-cur, w.mask+1)
		for i := cur + 1; i <= cur+diff; i++ {
			w.ring[i&w.mask].Store(0)
		}
		w.ring[next&w.mask].Or(bit)
		w.top.Store(seq)
		return OK
	}
	if top-seq >= uint64(w.size) {
		return TooOld
	}
	if w.ring[(seq>>wordBitsLog)&w.mask].Or(bit)&bit != 0 {
		return Duplicate
	}
	return OK
}

// Resume sets the window's top to top and counts every sequence number at
// or below it as seen, as if each had been accepted: an inbound SA that
// restarts from a persisted top refuses the previous run's packets as
// replays (Duplicate inside the window, TooOld left of it) and accepts
// anything above top at once. Bits above top in top's own word stay
// clear, so that numbers between top and a later top are still taken.
// With ESN, top carries the high 32 bits, from which inference goes on.
//
// Resume must not run concurrently with any other method; it does not
// allocate.
func (w *Window) Resume(top uint64) {
	w.top.Store(top)
	if w.size == 0 {
		return
	}
	for i := range w.ring {
		w.ring[i].Store(^uint64(0))
	}
	// Bits 0..top&63 of top's word: at or below top.
	w.ring[(top>>wordBitsLog)&w.mask].Store(^uint64(0) >> (bitMask - top&bitMask))
}
