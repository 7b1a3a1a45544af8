package sa

import "time"

// EventKind is what happened to an SA.
type EventKind uint8

const (
	// SoftExpire: a soft limit was reached; the SA keeps working. Time to
	// rekey.
	SoftExpire EventKind = 1
	// HardExpire: a hard limit was reached; the SA seals and opens nothing
	// more (XfrmOutStateExpired / XfrmInStateExpired). Remove it.
	HardExpire EventKind = 2
)

func (k EventKind) String() string {
	switch k {
	case SoftExpire:
		return "soft"
	case HardExpire:
		return "hard"
	}
	return "invalid"
}

// Event reports an SA's expiry. Reason says which limit ("bytes",
// "packets", "add time", "sequence number").
type Event struct {
	SA     *SA
	Kind   EventKind
	Reason string
}

// Reasons of events.
const (
	ReasonBytes   = "bytes"
	ReasonPackets = "packets"
	ReasonAddTime = "add time"
	ReasonSeq     = "sequence number"
)

// seqSoftLimit: without ESN, an outbound SA raises a soft expiry when its
// sequence number passes this, so that it is rekeyed before 2^32 (where it
// stops, RFC 4303 §3.3.3).
const seqSoftLimit = 1<<32 - 1<<24

// softExpire raises the soft event once.
func (s *SA) softExpire(reason string) {
	if s.softFired.CompareAndSwap(false, true) {
		s.emit(Event{SA: s, Kind: SoftExpire, Reason: reason})
	}
}

// hardExpire stops the SA and raises the hard event once.
func (s *SA) hardExpire(reason string) {
	s.hardExpired.Store(true)
	if s.hardFired.CompareAndSwap(false, true) {
		s.emit(Event{SA: s, Kind: HardExpire, Reason: reason})
	}
}

func (s *SA) emit(ev Event) {
	if d := s.sad.Load(); d != nil {
		if h := d.handler.Load(); h != nil {
			(*h)(ev)
		}
	}
}

// countLimits applies the byte and packet limits to the totals before and
// after a packet was counted. It reports whether that packet was within the
// hard limits (a packet passes while the totals before it are below them,
// as in Linux's xfrm_state_check_expire) and which soft and hard limits were
// reached ("" for none). A hard limit stops the SA at once; the events are
// for the caller to raise, outside any lock.
func (s *SA) countLimits(bytesBefore, bytesAfter, pktsBefore, pktsAfter uint64) (ok bool, soft, hard string) {
	l := &s.cfg.Lifetime
	ok = true
	switch {
	case l.HardBytes != 0 && bytesBefore >= l.HardBytes:
		ok, hard = false, ReasonBytes
	case l.HardPackets != 0 && pktsBefore >= l.HardPackets:
		ok, hard = false, ReasonPackets
	case l.HardBytes != 0 && bytesAfter >= l.HardBytes:
		hard = ReasonBytes
	case l.HardPackets != 0 && pktsAfter >= l.HardPackets:
		hard = ReasonPackets
	}
	if hard != "" {
		s.hardExpired.Store(true)
	}
	switch {
	case l.SoftBytes != 0 && bytesAfter >= l.SoftBytes:
		soft = ReasonBytes
	case l.SoftPackets != 0 && pktsAfter >= l.SoftPackets:
		soft = ReasonPackets
	}
	return ok, soft, hard
}

// raise delivers the events countLimits found.
func (s *SA) raise(soft, hard string) {
	if soft != "" {
		s.softExpire(soft)
	}
	if hard != "" {
		s.hardExpire(hard)
	}
}

func (s *SA) hasCountLimits() bool {
	l := &s.cfg.Lifetime
	return l.HardBytes|l.HardPackets|l.SoftBytes|l.SoftPackets != 0
}

// tick applies the add-time limits at now.
func (s *SA) tick(now time.Time) {
	l := &s.cfg.Lifetime
	if l.SoftAdd == 0 && l.HardAdd == 0 {
		return
	}
	age := now.Sub(s.added)
	if l.HardAdd != 0 && age >= l.HardAdd {
		s.hardExpire(ReasonAddTime)
		return
	}
	if l.SoftAdd != 0 && age >= l.SoftAdd {
		s.softExpire(ReasonAddTime)
	}
}
