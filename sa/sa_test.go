package sa

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/internal/iphdr"
	"github.com/ipsecd/ipsecd/sa/esp"
)

func TestNewValidation(t *testing.T) {
	base := func() Config {
		return Config{Src: outer4a, Dst: outer4b, SPI: 0x1001, Dir: DirOut, Mode: ModeTunnel,
			AEAD: &Algorithm{Name: AlgGCM, Key: seqKey(20, 0)}}
	}
	tests := []struct {
		name  string
		edit  func(c *Config)
		field string // "" = accepted
		msg   string
	}{
		{"ok", func(c *Config) {}, "", ""},
		{"spi 255", func(c *Config) { c.SPI = 255 }, "spi", "reserved"},
		{"spi 0", func(c *Config) { c.SPI = 0 }, "spi", "reserved"},
		{"no dir", func(c *Config) { c.Dir = 0 }, "dir", ""},
		{"no mode", func(c *Config) { c.Mode = 0 }, "mode", ""},
		{"no src", func(c *Config) { c.Src = netip.Addr{} }, "src", ""},
		{"mixed families", func(c *Config) { c.Dst = outer6b }, "dst", "is IPv6 but src"},
		{"gcm key 17", func(c *Config) { c.AEAD.Key = seqKey(17, 0) }, "aead.key", "rfc4106(gcm(aes)) wants 20 or 36 bytes, got 17"},
		{"gcm 256", func(c *Config) { c.AEAD.Key = seqKey(36, 0) }, "", ""},
		{"gcm icv 64", func(c *Config) { c.AEAD.Bits = 64 }, "", ""},
		{"gcm icv 96", func(c *Config) { c.AEAD.Bits = 96 }, "", ""},
		{"gcm icv 32", func(c *Config) { c.AEAD.Bits = 32 }, "aead.icv_bits", "got 32"},
		{"chacha", func(c *Config) { c.AEAD = &Algorithm{Name: AlgChaCha, Key: seqKey(36, 0)} }, "", ""},
		{"chacha key 32", func(c *Config) { c.AEAD = &Algorithm{Name: AlgChaCha, Key: seqKey(32, 0)} }, "aead.key", "got 32"},
		{"chacha icv 96", func(c *Config) { c.AEAD = &Algorithm{Name: AlgChaCha, Key: seqKey(36, 0), Bits: 96} }, "aead.icv_bits", ""},
		{"unknown aead", func(c *Config) { c.AEAD.Name = "rfc4309(ccm(aes))" }, "aead.name", ""},
		{"aead and enc", func(c *Config) { c.Enc = &Algorithm{Name: AlgCBC, Key: seqKey(16, 0)} }, "aead", ""},
		{"nothing", func(c *Config) { c.AEAD = nil }, "aead", "missing"},
		{"cbc", func(c *Config) { c.AEAD = nil; cbcAlgs(c) }, "", ""},
		{"cbc key 15", func(c *Config) { c.AEAD = nil; cbcAlgs(c); c.Enc.Key = c.Enc.Key[:15] }, "enc.key", "got 15"},
		{"cbc without auth", func(c *Config) { c.AEAD = nil; cbcAlgs(c); c.Auth = nil }, "auth", "without integrity"},
		{"null without auth", func(c *Config) { c.AEAD = nil; c.Enc = &Algorithm{Name: AlgNull} }, "auth", "without integrity"},
		{"null with auth", func(c *Config) {
			c.AEAD = nil
			c.Enc = &Algorithm{Name: AlgNull}
			c.Auth = &Algorithm{Name: AlgHMACSHA2, Key: seqKey(32, 0)}
		}, "", ""},
		{"hmac key 20", func(c *Config) { c.AEAD = nil; cbcAlgs(c); c.Auth.Key = seqKey(20, 0) }, "auth.key", "got 20"},
		{"hmac trunc 96", func(c *Config) { c.AEAD = nil; cbcAlgs(c); c.Auth.Bits = 96 }, "auth.trunc_bits", ""},
		{"md5", func(c *Config) { c.AEAD = nil; cbcAlgs(c); c.Auth.Name = "hmac(md5)" }, "auth.name", ""},
		{"sha1 key 32", func(c *Config) { c.AEAD = nil; cbcAlgs(c); c.Auth.Name = AlgHMACSHA1 }, "auth.key", "hmac(sha1) wants 20 bytes, got 32"},
		{"sha1 trunc 128", func(c *Config) {
			c.AEAD = nil
			cbcAlgs(c)
			c.Auth = &Algorithm{Name: AlgHMACSHA1, Key: seqKey(20, 0), Bits: 128}
		}, "auth.trunc_bits", "hmac(sha1) allows 96, got 128"},
		{"sha512 trunc 128", func(c *Config) {
			c.AEAD = nil
			cbcAlgs(c)
			c.Auth = &Algorithm{Name: AlgHMACSHA512, Key: seqKey(64, 0), Bits: 128}
		}, "auth.trunc_bits", "hmac(sha512) allows 256, got 128"},
		{"window too big", func(c *Config) { c.ReplayWindow = MaxReplayWindow + 1 }, "replay_window", ""},
		{"soft over hard", func(c *Config) { c.Lifetime.SoftPackets, c.Lifetime.HardPackets = 10, 5 }, "lifetime.soft_packets", ""},
		{"encap port 0", func(c *Config) { c.Encap = &Encap{SrcPort: 4500} }, "encap.dport", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := base()
			tt.edit(&c)
			_, err := New(c, nil)
			if tt.field == "" {
				if err != nil {
					t.Fatalf("New: %v, want success", err)
				}
				return
			}
			var fe *FieldError
			if !errors.As(err, &fe) || !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("New: %v, want a FieldError for %q", err, tt.field)
			}
			if fe.Field != tt.field || !strings.Contains(fe.Msg, tt.msg) {
				t.Errorf("New: %q, want field %q and a message with %q", err, tt.field, tt.msg)
			}
		})
	}
}

func TestConfigIsACopy(t *testing.T) {
	key := seqKey(20, 0)
	s, err := New(Config{Src: outer4a, Dst: outer4b, SPI: 0x1001, Dir: DirOut, Mode: ModeTunnel,
		AEAD: &Algorithm{Name: AlgGCM, Key: key}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	key[0] ^= 0xff
	c := s.Config()
	c.AEAD.Key[1] ^= 0xff
	if got := s.Config().AEAD.Key; got[0] != 0 || got[1] != 1 {
		t.Errorf("SA key changed through a caller's slice: %x", got)
	}
}

// TestRoundTrip runs every suite in every mode, inner and outer family,
// with and without ESN, at several sizes.
func TestRoundTrip(t *testing.T) {
	for _, su := range suites {
		for _, mode := range []Mode{ModeTunnel, ModeTransport} {
			for _, outer6 := range []bool{false, true} {
				for _, esn := range []bool{false, true} {
					name := su.name + "/" + mode.String()
					name += map[bool]string{false: "/outer4", true: "/outer6"}[outer6]
					name += map[bool]string{false: "", true: "/esn"}[esn]
					t.Run(name, func(t *testing.T) {
						out, in := pair(t, mode, outer6, esn, 64, su.set)
						for _, inner6 := range []bool{false, true} {
							for _, n := range []int{0, 1, 2, 3, 13, 100, 1400} {
								var pkt []byte
								if inner6 {
									pkt = ipv6Packet(n)
								} else {
									pkt = ipv4Packet(n)
								}
								if mode == ModeTransport && inner6 != outer6 {
									// The peer would rebuild a header of
									// the other family: refused.
									ps := []Packet{mkPacket(pkt)}
									out.SealBatch(ps)
									if ps[0].Drop != XfrmOutStateModeError {
										t.Fatalf("inner6=%v: Drop = %v, want XfrmOutStateModeError", inner6, ps[0].Drop)
									}
									continue
								}
								roundTrip(t, out, in, mode, pkt)
							}
						}
					})
				}
			}
		}
	}
}

func roundTrip(t *testing.T, out, in *SA, mode Mode, pkt []byte) {
	t.Helper()
	e := sealOne(t, out, pkt)
	b := esp.ESP(e.Data())
	if b.SPI() != out.SPI() {
		t.Fatalf("SPI %#x, want %#x", b.SPI(), out.SPI())
	}
	if want := uint32(out.Stats().Seq); b.Seq() != want {
		t.Fatalf("seq %d, want %d", b.Seq(), want)
	}
	if len(b) != out.Overhead(len(pkt))+len(pkt) && mode == ModeTunnel {
		t.Errorf("ESP length %d, Overhead says %d", len(b), out.Overhead(len(pkt))+len(pkt))
	}
	p := openOne(in, e)
	if p.Drop != CounterNone {
		t.Fatalf("open: dropped as %v", p.Drop)
	}
	if mode == ModeTunnel {
		if !bytes.Equal(p.Data(), pkt) {
			t.Fatalf("open: got %x, want %x", p.Data(), pkt)
		}
		return
	}
	// Transport: the payload is intact behind a rebuilt header that uses
	// the outer addresses.
	hl, proto, _ := transportHeader(pkt)
	got := p.Data()
	ghl, gproto, ok := transportHeader(got)
	if !ok || gproto != proto || p.Proto != proto || !bytes.Equal(got[ghl:], pkt[hl:]) {
		t.Fatalf("open: got %x, want payload %x (proto %d)", got, pkt[hl:], proto)
	}
	src, dst, _ := innerAddrs(got)
	if src != in.cfg.Src || dst != in.cfg.Dst {
		t.Errorf("rebuilt header %v -> %v, want %v -> %v", src, dst, in.cfg.Src, in.cfg.Dst)
	}
	if iphdr.Version(got) == 4 && !iphdr.IPv4(got).ChecksumValid() {
		t.Errorf("rebuilt IPv4 header checksum is wrong: %x", got[:20])
	}
}

func TestTransportIPv4Options(t *testing.T) {
	out, in := pair(t, ModeTransport, false, false, 64, suites[0].set)
	pkt := ipv4Packet(10)
	// Insert 4 bytes of options (NOP NOP NOP EOL): IHL 6.
	opt := append(append(append([]byte{}, pkt[:20]...), 1, 1, 1, 0), pkt[20:]...)
	opt[0] = 0x46
	binary.BigEndian.PutUint16(opt[2:], uint16(len(opt)))
	p := openOne(in, sealOne(t, out, opt))
	if p.Drop != CounterNone || !bytes.Equal(p.Data()[20:], pkt[20:]) {
		t.Errorf("drop %v, payload %x, want %x", p.Drop, p.Data()[20:], pkt[20:])
	}
}

func TestSealDrops(t *testing.T) {
	out, _ := pair(t, ModeTunnel, false, false, 64, suites[0].set)
	pkt := ipv4Packet(20)
	tests := []struct {
		name string
		p    Packet
		want Counter
	}{
		{"not IP", func() Packet { p := mkPacket(pkt); p.Buf[p.Off] = 0x20; return p }(), XfrmOutStateModeError},
		{"empty", mkPacket(nil), XfrmOutStateModeError},
		{"no headroom", func() Packet {
			buf := make([]byte, len(pkt)+Tailroom)
			copy(buf, pkt)
			return Packet{Buf: buf, Len: len(pkt)}
		}(), XfrmOutError},
		{"no tailroom", func() Packet {
			buf := make([]byte, Headroom+len(pkt)+3)
			copy(buf[Headroom:], pkt)
			return Packet{Buf: buf, Off: Headroom, Len: len(pkt)}
		}(), XfrmOutError},
		{"bad bounds", Packet{Buf: make([]byte, 10), Off: 5, Len: 10}, XfrmOutError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := out.counters.Get(tt.want)
			ps := []Packet{tt.p}
			out.SealBatch(ps)
			if ps[0].Drop != tt.want {
				t.Errorf("Drop = %v, want %v", ps[0].Drop, tt.want)
			}
			if got := out.counters.Get(tt.want) - before; got != 1 {
				t.Errorf("%v counted %d times, want 1", tt.want, got)
			}
		})
	}
	_, in := pair(t, ModeTunnel, false, false, 64, suites[0].set)
	ps := []Packet{mkPacket(pkt)}
	in.SealBatch(ps)
	if ps[0].Drop != XfrmOutStateDirError {
		t.Errorf("seal on an inbound SA: Drop = %v, want XfrmOutStateDirError", ps[0].Drop)
	}
}

func TestSeqWrap(t *testing.T) {
	for _, esn := range []bool{false, true} {
		out, in := pair(t, ModeTunnel, false, esn, 64, suites[0].set)
		out.seq.Store(math.MaxUint32 - 1)
		ps := []Packet{mkPacket(ipv4Packet(8)), mkPacket(ipv4Packet(8)), mkPacket(ipv4Packet(8))}
		out.SealBatch(ps)
		if ps[0].Drop != CounterNone {
			t.Fatalf("esn=%v: seq 2^32-1 dropped as %v", esn, ps[0].Drop)
		}
		want := XfrmOutStateSeqError
		if esn {
			want = CounterNone
		}
		for _, p := range ps[1:] {
			if p.Drop != want {
				t.Errorf("esn=%v: seq past 2^32-1: Drop = %v, want %v", esn, p.Drop, want)
			}
		}
		if !esn {
			if got := out.counters.Get(XfrmOutStateSeqError); got != 2 {
				t.Errorf("XfrmOutStateSeqError = %d, want 2", got)
			}
			if st := out.Stats(); st.Seq != math.MaxUint32 || st.Packets != 1 || !st.SoftExpired {
				t.Errorf("stats %+v: want seq 2^32-1, 1 packet, soft expired", st)
			}
			continue
		}
		// ESN: the receiver follows across 2^32.
		in.mu.Lock()
		in.window.Advance(math.MaxUint32 - 2)
		in.mu.Unlock()
		for i, p := range ps {
			if q := openOne(in, p); q.Drop != CounterNone {
				t.Errorf("open of packet %d across 2^32: %v", i, q.Drop)
			}
		}
		if top := in.Stats().Seq; top != 1<<32+1 {
			t.Errorf("inbound top %#x, want 0x100000001", top)
		}
	}
}

// TestESNHighBitsInHMAC: RFC 4303 §2.2.1 puts the high 32 bits of an ESN
// into the ICV, not onto the wire: the same packet sealed with and without
// ESN differs only in its ICV, and opening it with the wrong high bits
// fails.
func TestESNHighBitsInHMAC(t *testing.T) {
	for _, su := range suites {
		t.Run(su.name, func(t *testing.T) {
			out, _ := pair(t, ModeTunnel, false, true, 64, su.set)
			out.ivHook = func(_ uint64, iv []byte) { clear(iv) }
			out.seq.Store(1<<32 + 6)
			a := sealOne(t, out, ipv4Packet(30))
			out.seq.Store(6)
			b := sealOne(t, out, ipv4Packet(30))
			icv := out.t.icvLen
			if bytes.Equal(a.Data(), b.Data()) || !bytes.Equal(a.Data()[:a.Len-icv], b.Data()[:b.Len-icv]) && out.t.kind != suiteAEAD && out.t.kind != suiteGCM8 {
				t.Errorf("high bits: %x vs %x", a.Data(), b.Data())
			}
		})
	}
}

// craft seals an ESP packet around an arbitrary plaintext (payload and
// trailer, aligned by the caller) with the SA's keys.
func craft(s *SA, seq uint64, plain []byte) Packet {
	t := s.t
	b := make(esp.ESP, 8+t.ivLen+len(plain)+t.icvWrite)
	b.SetSPI(s.cfg.SPI)
	b.SetSeq(uint32(seq))
	copy(b[8+t.ivLen:], plain)
	b = b[:len(b)-t.icvWrite+t.icvLen]
	var scratch scratch
	t.seal(&scratch, b, b.Encrypted(t.ivLen, t.icvLen), seq, s.esn)
	return Packet{Buf: b, Len: len(b)}
}

func TestOpenDrops(t *testing.T) {
	out, in := pair(t, ModeTunnel, false, false, 64, suites[0].set)
	inner := ipv4Packet(22) // 50 bytes
	good := func(pad []byte, nh byte) []byte {
		return append(append(append([]byte{}, inner...), pad...), byte(len(pad)), nh)
	}
	tests := []struct {
		name                                  string
		p                                     Packet
		want                                  Counter
		wantIntegrity, wantReplay, wantWindow uint64
	}{
		{"ok", craft(out, 1, good(nil, 4)), CounterNone, 0, 0, 0},
		{"duplicate", craft(out, 1, good(nil, 4)), XfrmInStateSeqError, 0, 1, 0},
		{"bad pad bytes", craft(out, 2, good([]byte{1, 3, 3, 4}, 4)), XfrmInStateProtoError, 0, 0, 0},
		{"pad length past payload", craft(out, 3, append(make([]byte, 2), 200, 4)), XfrmInStateProtoError, 0, 0, 0},
		// Bad padding did not move the window (as Linux): seq 2 still fits.
		{"seq of the bad padding, well formed", craft(out, 2, good(nil, 4)), CounterNone, 0, 0, 0},
		{"bad icv", func() Packet { p := craft(out, 4, good(nil, 4)); p.Buf[20] ^= 1; return p }(), XfrmInStateProtoError, 1, 0, 0},
		{"wrong next header", craft(out, 5, good(nil, 41)), XfrmInStateModeError, 0, 0, 0},
		{"next header 17 in tunnel mode", craft(out, 6, good(nil, 17)), XfrmInStateModeError, 0, 0, 0},
		{"dummy", craft(out, 7, good([]byte{1, 2, 3, 4}, 59)), DroppedDummy, 0, 0, 0},
		{"dummy replayed", craft(out, 7, good([]byte{1, 2, 3, 4}, 59)), XfrmInStateSeqError, 0, 1, 0},
		{"short", Packet{Buf: make([]byte, 20), Len: 20}, XfrmInHdrError, 0, 0, 0},
		{"unaligned", func() Packet { p := craft(out, 8, good(nil, 4)); p.Len--; return p }(), XfrmInHdrError, 0, 0, 0},
		{"far ahead", craft(out, 1000, good(nil, 4)), CounterNone, 0, 0, 0},
		{"left of the window", craft(out, 1000-64, good(nil, 4)), XfrmInStateSeqError, 0, 0, 1},
		{"left edge of the window", craft(out, 1000-63, good(nil, 4)), CounterNone, 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := in.Stats()
			cBefore := in.counters.Get(tt.want)
			p := openOne(in, tt.p)
			if p.Drop != tt.want {
				t.Fatalf("Drop = %v, want %v", p.Drop, tt.want)
			}
			if tt.want != CounterNone && tt.want != DroppedDummy {
				if got := in.counters.Get(tt.want) - cBefore; got != 1 {
					t.Errorf("%v counted %d times, want 1", tt.want, got)
				}
			}
			after := in.Stats()
			if d := after.IntegrityFailed - before.IntegrityFailed; d != tt.wantIntegrity {
				t.Errorf("IntegrityFailed +%d, want +%d", d, tt.wantIntegrity)
			}
			if d := after.Replay - before.Replay; d != tt.wantReplay {
				t.Errorf("Replay +%d, want +%d", d, tt.wantReplay)
			}
			if d := after.ReplayWindow - before.ReplayWindow; d != tt.wantWindow {
				t.Errorf("ReplayWindow +%d, want +%d", d, tt.wantWindow)
			}
		})
	}
}

func TestWindowZero(t *testing.T) {
	out, in := pair(t, ModeTunnel, false, false, 0, suites[0].set)
	e := sealOne(t, out, ipv4Packet(10))
	for i := 0; i < 3; i++ {
		if p := openOne(in, e); p.Drop != CounterNone {
			t.Fatalf("replay %d with window 0: %v", i, p.Drop)
		}
	}
}

func TestLifetimes(t *testing.T) {
	tests := []struct {
		name    string
		lt      Lifetime
		pktLen  int
		softAt  int // packet number (1-based) after which soft fired; 0 never
		hardAt  int // first packet refused
		reason  string
		maxPkts int
	}{
		{"packets", Lifetime{SoftPackets: 3, HardPackets: 5}, 40, 3, 6, ReasonPackets, 8},
		{"bytes", Lifetime{SoftBytes: 100, HardBytes: 200}, 40, 3, 6, ReasonBytes, 8},
	}
	for _, tt := range tests {
		for _, dir := range []Dir{DirOut, DirIn} {
			t.Run(tt.name+"/"+dir.String(), func(t *testing.T) {
				var events []Event
				d := NewSAD(nil)
				d.SetEventHandler(func(e Event) { events = append(events, e) })
				out, in := pair(t, ModeTunnel, false, false, 64, func(c *Config) {
					suites[0].set(c)
					c.Lifetime = tt.lt
				})
				if err := d.Replace([]*SA{out, in}, nil); err != nil {
					t.Fatal(err)
				}
				s := out
				if dir == DirIn {
					s = in
					out.SetLifetime(Lifetime{}) // only the inbound SA has limits
				}
				for i := 1; i <= tt.maxPkts; i++ {
					ps := []Packet{mkPacket(ipv4Packet(tt.pktLen - 28))}
					out.SealBatch(ps)
					if dir == DirIn {
						ps[0] = reseat(ps[0])
						in.OpenBatch(ps)
					}
					wantDrop := CounterNone
					if i >= tt.hardAt {
						wantDrop = map[Dir]Counter{DirOut: XfrmOutStateExpired, DirIn: XfrmInStateExpired}[dir]
					}
					if ps[0].Drop != wantDrop {
						t.Fatalf("packet %d: Drop = %v, want %v", i, ps[0].Drop, wantDrop)
					}
					if got := s.Stats().SoftExpired; got != (i >= tt.softAt) {
						t.Fatalf("packet %d: soft expired %v", i, got)
					}
				}
				if len(events) != 2 || events[0].Kind != SoftExpire || events[1].Kind != HardExpire || events[0].SA != s || events[1].Reason != tt.reason {
					t.Errorf("events %+v, want soft then hard (%s) of %v", events, tt.reason, s)
				}
				if st := s.Stats(); st.Packets != uint64(tt.hardAt-1) || !st.HardExpired {
					t.Errorf("stats %+v, want %d packets, hard expired", st, tt.hardAt-1)
				}
			})
		}
	}
	t.Run("add time", func(t *testing.T) {
		var events []Event
		d := NewSAD(nil)
		d.SetEventHandler(func(e Event) { events = append(events, e) })
		out, _ := pair(t, ModeTunnel, false, false, 64, func(c *Config) {
			suites[0].set(c)
			c.Lifetime = Lifetime{SoftAdd: time.Minute, HardAdd: 2 * time.Minute}
		})
		if err := d.Add(out); err != nil {
			t.Fatal(err)
		}
		now := out.Added()
		for _, step := range []struct {
			at     time.Duration
			events int
		}{{59 * time.Second, 0}, {time.Minute, 1}, {90 * time.Second, 1}, {2 * time.Minute, 2}, {3 * time.Minute, 2}} {
			d.Tick(now.Add(step.at))
			if len(events) != step.events {
				t.Fatalf("at %v: %d events, want %d", step.at, len(events), step.events)
			}
		}
		ps := []Packet{mkPacket(ipv4Packet(1))}
		out.SealBatch(ps)
		if ps[0].Drop != XfrmOutStateExpired {
			t.Errorf("seal after hard add time: %v, want XfrmOutStateExpired", ps[0].Drop)
		}
	})
}

// TestConcurrentOpen: many goroutines open packets of one SA, including
// every packet twice; each must be accepted exactly once.
func TestConcurrentOpen(t *testing.T) {
	const n = 4000
	out, in := pair(t, ModeTunnel, false, true, 4096, suites[0].set)
	var wire [][]byte
	for i := 0; i < n; i++ {
		p := sealOne(t, out, ipv4Packet(i%50))
		wire = append(wire, append([]byte{}, p.Data()...))
	}
	const workers = 8
	var wg sync.WaitGroup
	var mu sync.Mutex
	accepted := make([]int, n)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			batch := make([]Packet, 0, 16)
			idx := make([]int, 0, 16)
			flush := func() {
				in.OpenBatch(batch)
				mu.Lock()
				for k, p := range batch {
					if p.Drop == CounterNone {
						accepted[idx[k]]++
					}
				}
				mu.Unlock()
				batch, idx = batch[:0], idx[:0]
			}
			// Every worker sends every packet whose index is w or w+1
			// mod workers: each packet goes twice, from two goroutines.
			for i := 0; i < n; i++ {
				if i%workers != w && (i+1)%workers != w {
					continue
				}
				batch = append(batch, mkPacket(wire[i]))
				idx = append(idx, i)
				if len(batch) == cap(batch) {
					flush()
				}
			}
			flush()
		}(w)
	}
	wg.Wait()
	for i, c := range accepted {
		if c != 1 {
			t.Errorf("packet %d accepted %d times, want 1", i, c)
		}
	}
	if st := in.Stats(); st.Packets != n || st.Replay+st.ReplayWindow != n {
		t.Errorf("stats %+v: want %d packets and %d replays", st, n, n)
	}
}
