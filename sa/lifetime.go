package sa

import "time"

// EventKind is what happened to an SA.
type EventKind uint8

const (
	// SoftExpire: a soft limit was reached; the SA is dying. It keeps
	// working, but a fresh SA with the same selector takes over from it
	// (LookupOut). Time to rekey.
	SoftExpire EventKind = 1
	// HardExpire: a hard limit was reached; the SA seals and opens nothing
	// more (XfrmOutStateExpired / XfrmInStateExpired) and LookupOut no
	// longer picks it. Remove it: RemoveExpired.
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

// emit hands ev to the SAD's handler. A retired SA (one that has left its
// SAD, retire.go) raises nothing: a batch that was still running on it
// must not report an SA that is gone.
func (s *SA) emit(ev Event) {
	if s.Retired() {
		return
	}
	if d := s.sad.Load(); d != nil {
		if h := d.handler.Load(); h != nil {
			(*h)(ev)
		}
	}
}

// countLimits applies the byte and packet limits to the totals before and
// after a packet was counted. It reports whether that packet was within the
// hard limits and which soft and hard limits were reached ("" for none);
// see hardLimit and softLimit. The events are for the caller to raise,
// outside any lock.
func (s *SA) countLimits(bytesBefore, bytesAfter, pktsBefore, pktsAfter uint64) (ok bool, soft, hard string) {
	hard = s.hardLimit(bytesBefore, pktsBefore)
	return hard == "", s.softLimit(bytesAfter, pktsAfter), hard
}

// hardLimit applies the hard byte and packet limits to the totals before a
// packet, as Linux's xfrm_state_check_expire (net/xfrm/xfrm_state.c) does:
// a packet passes while they are below the limits; the first packet that
// finds a total at its limit is refused (XfrmOutStateExpired /
// XfrmInStateExpired, counted by the caller) and expires the SA, which
// stops at once. It returns the limit reached, or "". So an SA that has
// carried exactly hard_packets packets is still valid until one more
// comes, as in Linux, and an SA that dies of a byte or packet limit counts
// one expired packet (plus any that race with its removal); the packets
// after its removal find no SA.
func (s *SA) hardLimit(bytes, pkts uint64) string {
	l := s.lifetime.Load()
	var hard string
	switch {
	case l.HardBytes != 0 && bytes >= l.HardBytes:
		hard = ReasonBytes
	case l.HardPackets != 0 && pkts >= l.HardPackets:
		hard = ReasonPackets
	default:
		return ""
	}
	s.hardExpired.Store(true)
	return hard
}

// softLimit applies the soft limits to the totals after a packet was
// counted: the packet that reaches a limit marks the SA dying, one packet
// earlier than Linux, which notices it on the packet after. It returns the
// limit reached, or "".
func (s *SA) softLimit(bytes, pkts uint64) string {
	l := s.lifetime.Load()
	switch {
	case l.SoftBytes != 0 && bytes >= l.SoftBytes:
		return ReasonBytes
	case l.SoftPackets != 0 && pkts >= l.SoftPackets:
		return ReasonPackets
	}
	return ""
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
	l := s.lifetime.Load()
	return l.HardBytes|l.HardPackets|l.SoftBytes|l.SoftPackets != 0
}

// SetLifetime changes the SA's limits in place, as ip xfrm state update
// does; it keeps everything else (keys, sequence numbers, replay window,
// counters, add time). A limit the SA has already passed takes effect
// with its next packet, or the next Tick for the add-time limits. An
// expiry already raised stays raised: a soft- or hard-expired SA is not
// revived by a higher limit. The error, if any, is a *FieldError
// wrapping ErrInvalidConfig, and nothing changes.
func (s *SA) SetLifetime(l Lifetime) error {
	if err := validateLifetime(l); err != nil {
		return err
	}
	s.lifetime.Store(&l)
	return nil
}

// Lifetime returns the SA's limits.
func (s *SA) Lifetime() Lifetime { return *s.lifetime.Load() }

// validateLifetime applies Check's lifetime rules.
func validateLifetime(l Lifetime) error {
	var errs FieldErrors
	checkLifetime(l, &errs)
	return errs.err()
}

// noteUse records now as the SA's last use when it has counted packets
// since the last call. The node's ticker calls it (through SAD.Tick) once
// a second, so the data path pays nothing for the use time: it is the
// second in which the ticker saw the packet counter move, as coarse as
// the add and use times ip -s xfrm state shows.
func (s *SA) noteUse(now time.Time) {
	if p := s.packets.Load(); p != s.usedPackets.Load() {
		s.usedPackets.Store(p)
		s.lastUsed.Store(now.UnixNano())
	}
}

// tick applies the add-time limits at now.
func (s *SA) tick(now time.Time) {
	l := s.lifetime.Load()
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
