package sa

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ipsecd/ipsecd/sa/replay"
)

// Errors New, and the SAD's changes, return. Test with errors.Is.
var (
	// ErrInvalidConfig: a Config or Policy is refused; the FieldErrors
	// that wrap it name the fields. Fix the configuration.
	ErrInvalidConfig = errors.New("invalid SA config")
	// ErrExists: an SA with the same direction, SPI and destination, or a
	// policy with the same direction, if_id and selector, is already in the
	// SAD. Delete it first, or pick another SPI.
	ErrExists = errors.New("already exists")
	// ErrNotFound: nothing to delete.
	ErrNotFound = errors.New("not found")
	// ErrRetired: the SA has left a SAD (deleted, replaced or expired) and
	// its keys are wiped or about to be; it cannot join a SAD again. Make
	// a new SA with New.
	ErrRetired = errors.New("SA was removed from its SAD")
)

// SA is a security association: one direction of ESP traffic with its keys,
// sequence numbers, replay window, lifetimes and counters. Make one with
// New. It is safe for concurrent use: any number of goroutines may seal (or
// open) batches of one SA at once.
type SA struct {
	cfg      Config // keys copied; never changed after New
	t        *transform
	counters *Counters
	added    time.Time
	esn      bool

	// ivHook, when set (tests only), writes the IV instead of the normal
	// source: RFC 7634 Appendix A and the GCM draft use IVs other than the
	// sequence number.
	ivHook func(seq uint64, iv []byte)

	// sad receives this SA's events; set when the SA joins a SAD.
	sad atomic.Pointer[SAD]
	// peer, once set (SetPeer), is where an outbound SA's packets go
	// instead of cfg's destination: the peer moved behind its NAT.
	peer atomic.Pointer[netip.AddrPort]

	// Outbound: the last sequence number handed out. Inbound: unused (the
	// window's Top is the highest accepted).
	seq atomic.Uint64
	// reserved: outbound, the highest sequence number a batch may use
	// without entering the slow path (seq.go): the SeqReserver's limit,
	// or the end of the counter when there is none. Next to seq, as every
	// seal reads it right after the add.
	reserved atomic.Uint64
	// use counts the SealBatch and OpenBatch calls inside the SA's crypto,
	// with the retiredBit and wipedBit flags on top (retire.go). Next to
	// seq: a seal touches both.
	use atomic.Uint64

	bytes, packets  atomic.Uint64
	replayWindow    atomic.Uint64 // too old: left of the window
	replay          atomic.Uint64 // duplicate
	integrityFailed atomic.Uint64

	// lifetime holds the limits: cfg.Lifetime at first, replaced whole by
	// SetLifetime (ip xfrm state update), so that a batch reads one
	// consistent set with one atomic load.
	lifetime atomic.Pointer[Lifetime]
	// lastUsed is when the ticker last saw packets counted (unix ns; 0:
	// never), usedPackets the packet count it saw then (noteUse).
	lastUsed    atomic.Int64
	usedPackets atomic.Uint64

	hardExpired atomic.Bool
	softFired   atomic.Bool
	hardFired   atomic.Bool
	// exhausted: the outbound counter reached its end; the SA seals
	// nothing more, ever (seq.go).
	exhausted atomic.Bool

	seqMu sync.Mutex
	// seqMu guards: calls of reserver and stores to reserved after New
	// (seq.go). reserver is set before the SA is used.
	reserver SeqReserver

	mu sync.Mutex
	// mu guards: window.Advance (window.Check is lock-free and may run
	// concurrently with Advance).
	window replay.Window
}

// Stats is a snapshot of an SA's counters, as `ip -s xfrm state` shows them.
type Stats struct {
	Bytes, Packets  uint64
	ReplayWindow    uint64 // dropped: left of the window (too old)
	Replay          uint64 // dropped: seen before (duplicate)
	IntegrityFailed uint64 // dropped: ICV did not verify
	// Seq is, outbound, the last sequence number sent (before the first
	// packet of a resumed SA, the mark it continues after); inbound, the
	// highest one accepted (or the top it resumed at).
	Seq                      uint64
	SoftExpired, HardExpired bool
	Added                    time.Time
	// LastUsed is the second in which the SA was last seen counting
	// packets (noteUse); zero if never.
	LastUsed time.Time
}

// New checks cfg and makes an SA from it. counters receives the SA's drops;
// nil gives the SA counters of its own. The SA keeps copies of the keys,
// and zeroes them once it has left its SAD and no batch uses it any more
// (retire.go says what cannot be zeroed); cfg's own keys stay the
// caller's to zero.
// The error, if any, is FieldErrors (Check's rules but the if_id, which
// may be 0 here), and errors.Is(err, ErrInvalidConfig).
func New(cfg Config, counters *Counters) (*SA, error) {
	if errs := check(&cfg, false); errs != nil {
		return nil, errs
	}
	cfg = cloneConfig(cfg)
	t, err := newTransform(&cfg)
	if err != nil {
		return nil, FieldErrors{{Field: "key", Msg: err.Error()}}
	}
	if counters == nil {
		counters = new(Counters)
	}
	s := &SA{cfg: cfg, t: t, counters: counters, added: time.Now(), esn: cfg.ESN}
	s.lifetime.Store(&cfg.Lifetime)
	if cfg.Dir == DirIn {
		s.window.Init(cfg.ReplayWindow, cfg.ESN)
	}
	s.reserved.Store(s.seqEnd()) // no reserver: only the end of the counter stops a batch
	return s, nil
}

func cloneConfig(c Config) Config {
	cp := func(a *Algorithm) *Algorithm {
		if a == nil {
			return nil
		}
		b := *a
		b.Key = append([]byte(nil), a.Key...)
		return &b
	}
	c.AEAD, c.Enc, c.Auth = cp(c.AEAD), cp(c.Enc), cp(c.Auth)
	if c.Encap != nil {
		e := *c.Encap
		c.Encap = &e
	}
	return c
}

// Config returns a copy of the SA's configuration, keys included: redact
// them before showing it. Once the SA has left its SAD and its keys are
// wiped (see Retired), the copy's keys are nil.
func (s *SA) Config() Config {
	// Counted in like a batch, so that the keys are not wiped while
	// they are being copied.
	if !s.enter() {
		c := s.cfg.Redacted()
		c.Lifetime = s.Lifetime()
		return cloneConfig(c)
	}
	defer s.exit()
	c := cloneConfig(s.cfg)
	c.Lifetime = s.Lifetime()
	return c
}

// SPI returns the SA's SPI.
func (s *SA) SPI() uint32 { return s.cfg.SPI }

// Dir returns the SA's direction.
func (s *SA) Dir() Dir { return s.cfg.Dir }

// IfID returns the SA's xfrm interface id.
func (s *SA) IfID() uint32 { return s.cfg.IfID }

// Mode returns the SA's mode.
func (s *SA) Mode() Mode { return s.cfg.Mode }

// Src and Dst return the SA's outer addresses.
func (s *SA) Src() netip.Addr { return s.cfg.Src }
func (s *SA) Dst() netip.Addr { return s.cfg.Dst }

// Peer returns where packets sealed by an outbound SA go: its outer
// destination, with the encapsulation's destination port for ESP in UDP
// and port 0 for raw ESP; or where SetPeer moved it. It does not
// allocate.
func (s *SA) Peer() netip.AddrPort {
	if p := s.peer.Load(); p != nil {
		return *p
	}
	var port uint16
	if s.cfg.Encap != nil {
		port = s.cfg.Encap.DstPort
	}
	return netip.AddrPortFrom(s.cfg.Dst, port)
}

// ReplayWindow returns the SA's replay window in packets; 0 when anti-replay
// is off.
func (s *SA) ReplayWindow() uint32 { return s.cfg.ReplayWindow }

// RawESP reports whether the SA uses raw ESP (IP protocol 50) rather than
// ESP in UDP.
func (s *SA) RawESP() bool { return s.cfg.Encap == nil }

// Added returns when the SA was made; add-time lifetimes count from it.
func (s *SA) Added() time.Time { return s.added }

// Overhead returns how many bytes sealing adds to a cleartext of n bytes in
// tunnel mode (ESP header, IV, padding, trailer, ICV), not counting the
// outer IP and UDP headers. Interfaces size their MTU with it.
func (s *SA) Overhead(n int) int {
	t := s.t
	return 8 + t.ivLen + padFor(t, n) + 2 + t.icvLen
}

func padFor(t *transform, n int) int {
	a := t.align
	return (a - (n+2)%a) % a
}

// Stats returns a snapshot of the SA's counters.
func (s *SA) Stats() Stats {
	st := Stats{
		Bytes:           s.bytes.Load(),
		Packets:         s.packets.Load(),
		ReplayWindow:    s.replayWindow.Load(),
		Replay:          s.replay.Load(),
		IntegrityFailed: s.integrityFailed.Load(),
		SoftExpired:     s.softFired.Load(),
		HardExpired:     s.hardExpired.Load(),
		Added:           s.added,
	}
	if ns := s.lastUsed.Load(); ns != 0 {
		st.LastUsed = time.Unix(0, ns)
	}
	st.Seq = s.Top()
	return st
}

// String names the SA for logs, without keys, as every message names an
// SA (spi, dir, dst) and then its source and if_id.
func (s *SA) String() string {
	return fmt.Sprintf("spi %#x dir %s dst %v src %v if_id %d", s.cfg.SPI, s.cfg.Dir, s.cfg.Dst, s.cfg.Src, s.cfg.IfID)
}

// covers reports whether the outbound SA may seal pkt, a packet from src
// to dst: its selector matches (a TSSet's with the packet's protocol and
// ports) and, in transport mode, the packet's own addresses are the SA's,
// since the peer rebuilds the IP header from them (an IPv4 transport SA
// must not seal the kernel's IPv6 router solicitations).
func (s *SA) covers(pkt []byte, src, dst netip.Addr) bool {
	if s.cfg.Mode == ModeTransport && (src != s.cfg.Src || dst != s.cfg.Dst) {
		return false
	}
	if ts := s.cfg.Selector.TS; ts != nil {
		f := flowOf(pkt, src, dst)
		return ts.admits(&f)
	}
	return s.cfg.Selector.match(src, dst)
}

// matchDst reports whether the SA's outer destination is dst; an invalid
// dst matches any.
func (s *SA) matchDst(dst netip.Addr) bool {
	return !dst.IsValid() || s.cfg.Dst == dst
}
