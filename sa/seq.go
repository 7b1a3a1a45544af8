package sa

// Sequence numbers across restarts, and the end of the counter.
//
// AES-GCM and ChaCha20-Poly1305 take their IV from the outbound sequence
// number, and RFC 4106 §3.1 forbids using one IV twice under a key. A
// process that restarts with the same static key must therefore not start
// at 1 again: an outbound SA may carry a SeqReserver, which durably
// records how far the SA may count before the SA uses a number (package
// seqstate keeps these records in the state directory). The SA then
// starts above the last reservation of the previous run (ResumeOutbound).
//
// The cost on the data path is one atomic load and compare per batch: the
// batch's last number against reserved. Only a batch that crosses the
// reservation takes seqMu and calls the reserver, which writes and syncs
// a new mark a block ahead (one file write per block, not per packet).
// With no reserver, reserved is the end of the counter, and the compare
// fails only there.
//
// The end of the counter: without ESN the SA stops at 2^32-1 (RFC 4303
// §3.3.3: the counter must not cycle). With ESN it stops at 2^64-2^32,
// not 2^64-1: the counter is taken with one atomic add per batch before
// any check, so batches that raced past the end before the exhausted
// flag was set keep adding; the 2^32 numbers left in reserve mean that
// would take 2^32 packets in flight at once to wrap the 64-bit counter
// round to numbers already used. Once exhausted, the SA refuses every
// later batch for good (XfrmOutStateSeqError), checked at batch entry, so
// that the counter stops moving.

import (
	"fmt"
	"math"
)

// SeqReserver durably records how far an outbound SA may count, so that
// the next run of the process starts above it. Reserve records that every
// sequence number up to at least upto may have been used, and returns the
// new limit (at least upto); it must not return before the record is on
// stable storage. It is called with the SA's reservation lock held, at
// most once per batch and only when a batch crosses the previous limit,
// so it may block for a write and an fsync. An error means the numbers
// above the previous limit may not be used.
type SeqReserver interface {
	Reserve(upto uint64) (reserved uint64, err error)
}

// seqEndESN is the last sequence number of an ESN SA (see the top of this
// file for why 2^32 short of 2^64).
const seqEndESN = math.MaxUint64 - 1<<32

// seqEnd returns the last sequence number the SA may use.
func (s *SA) seqEnd() uint64 {
	if s.esn {
		return seqEndESN
	}
	return math.MaxUint32
}

// ResumeOutbound makes an outbound SA continue after sequence number
// last (its first packet carries last+1) and reserve its numbers through
// r from then on (r may be nil: no reservation). The first block is
// reserved by the first batch, not here: a daemon that brings up
// thousands of SAs does not wait for a synced write per SA before it
// runs, and an SA that never seals writes nothing. Call it after New and
// before the SA seals anything or joins a SAD; it must not run
// concurrently with any other method of the SA.
func (s *SA) ResumeOutbound(last uint64, r SeqReserver) error {
	if s.cfg.Dir != DirOut {
		return fmt.Errorf("sa: ResumeOutbound on %s", s)
	}
	end := s.seqEnd()
	s.seq.Store(last)
	s.reserver = r
	if last >= end {
		// Nothing left: the previous run used it all.
		s.exhausted.Store(true)
		s.reserved.Store(end)
		return nil
	}
	if r == nil {
		s.reserved.Store(end)
		return nil
	}
	s.reserved.Store(last) // nothing reserved yet: the first batch reserves
	return nil
}

// ResumeInbound makes an inbound SA's replay window start at top, with
// every sequence number at or below top counted as seen: packets of the
// previous run are refused as replays, and the peer's next packets (above
// top) are accepted at once. With ESN, top carries the high 32 bits.
// Call it after New and before the SA opens anything or joins a SAD.
func (s *SA) ResumeInbound(top uint64) error {
	if s.cfg.Dir != DirIn {
		return fmt.Errorf("sa: ResumeInbound on %s", s)
	}
	s.window.Resume(top)
	return nil
}

// Top returns, for an outbound SA, the last sequence number handed out
// (up to the end of the counter); for an inbound SA, the highest
// sequence number its replay window accepted. It does not allocate.
func (s *SA) Top() uint64 {
	if s.cfg.Dir == DirOut {
		if s.exhausted.Load() {
			return s.seqEnd()
		}
		return min(s.seq.Load(), s.seqEnd())
	}
	return s.window.Top()
}

// usableUpTo is SealBatch's slow path, for a batch whose last number is
// beyond the reservation: it returns the highest number of the batch that
// may be used. It extends the reservation when there is a reserver, and
// marks the SA exhausted when the batch reaches the end of the counter.
// A failed reservation leaves the old limit: the numbers above it are
// refused (and lost, as the counter has moved past them), and the next
// batch tries again. n is the batch's count of numbers: last < n means the
// add wrapped the 64-bit counter, and then the whole batch lies past the
// end (the end is 2^32 short of the wrap).
func (s *SA) usableUpTo(last, n uint64) uint64 {
	s.seqMu.Lock()
	defer s.seqMu.Unlock()
	end := s.seqEnd()
	if last < n {
		s.exhausted.Store(true)
		return 0
	}
	if last >= end {
		s.exhausted.Store(true)
		last = end
	}
	res := s.reserved.Load()
	if last <= res || s.reserver == nil {
		return min(last, res)
	}
	got, err := s.reserver.Reserve(last)
	if err != nil || got < last {
		return res
	}
	got = min(got, end)
	s.reserved.Store(got)
	return last
}
