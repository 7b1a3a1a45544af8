package ike

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/ike/message"
)

// responder is the daemon's side of cookies in miniature: requests for
// no known SA go through Cookies.Check, then Respond; half-open SAs are
// those waiting for IKE_AUTH.
type responder struct {
	cfg     *Config
	cookies *Cookies
	sas     map[uint64]*SA
}

func (r *responder) halfOpen() int {
	n := 0
	for _, sa := range r.sas {
		if sa.State() == StateInitDone {
			n++
		}
	}
	return n
}

// receive handles one message from remote and returns the answer.
func (r *responder) receive(t testing.TB, raw []byte, remote netip.AddrPort, now time.Time) []byte {
	h := message.Header(raw)
	if sa, ok := r.sas[h.ISPI()]; ok && h.RSPI() != 0 {
		out, _ := sa.HandleFrom(raw, addrB, remote, now)
		if out != nil && len(sa.Packets(out)) != 1 {
			t.Fatal("a fragmented answer; this test passes one datagram a message")
		}
		return out
	}
	if reply, pass := r.cookies.Check(raw, remote, r.halfOpen(), now); !pass {
		return reply
	}
	sa, out, _ := Respond(r.cfg, addrB, remote, raw, now)
	if sa != nil {
		r.sas[h.ISPI()] = sa
	}
	return out
}

// bogusInit returns an IKE_SA_INIT request as a flooder would replay it:
// a real one, with a fresh SPI each time.
func bogusInit(t testing.TB, cfg *Config) func(i int) []byte {
	_, tmpl, err := Initiate(cfg, addrA, addrB, t0)
	if err != nil {
		t.Fatal(err)
	}
	return func(i int) []byte {
		b := bytes.Clone(tmpl)
		binary.BigEndian.PutUint64(b, uint64(i)<<8|0x5a)
		return b
	}
}

func spoofed(i int) netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 500)
}

// TestCookieFlood: a flood of IKE_SA_INIT requests from many spoofed
// addresses leaves at most Threshold half-open SAs, gets COOKIE answers
// once they exist, keeps memory bounded, and a legitimate initiator still
// comes up through the cookie round trip.
func TestCookieFlood(t *testing.T) {
	ci, cr := pairConfigs(t, []string{"aes256-sha256-x25519"}, []string{"aes128gcm16"})
	r := &responder{cfg: cr, cookies: &Cookies{}, sas: map[uint64]*SA{}}
	bogus := bogusInit(t, ci)
	const n = 20000
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	cookies := 0
	start := time.Now()
	for i := 1; i <= n; i++ {
		out := r.receive(t, bogus(i), spoofed(i), t0.Add(time.Duration(i)*time.Millisecond))
		m, err := message.Parse(out)
		if err != nil {
			t.Fatalf("request %d: answer does not parse: %v", i, err)
		}
		if _, ok := notifyOf(m.Payloads, message.Cookie); ok {
			cookies++
			if m.RSPI != 0 {
				t.Fatal("a COOKIE answer with a responder SPI: state was kept")
			}
		}
	}
	elapsed := time.Since(start)
	runtime.GC()
	runtime.ReadMemStats(&after)
	if len(r.sas) != DefaultCookieThreshold || cookies != n-DefaultCookieThreshold {
		t.Fatalf("%d SAs and %d COOKIE answers after %d requests, want %d and %d", len(r.sas), cookies, n, DefaultCookieThreshold, n-DefaultCookieThreshold)
	}
	grown := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("%d bogus requests in %v (%v each, with the half-open SAs' key exchanges); heap grew %d bytes", n, elapsed, elapsed/n, grown)
	if grown > 1<<20 {
		t.Errorf("heap grew %d bytes over the flood; want it bounded by the %d half-open SAs", grown, DefaultCookieThreshold)
	}

	// A legitimate initiator during the flood: COOKIE, retry, IKE_AUTH.
	now := t0.Add(n * time.Millisecond)
	ini, msg, err := Initiate(ci, addrA, addrB, now)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; msg != nil && i < 6; i++ {
		if i%2 == 0 {
			msg = r.receive(t, msg, addrA, now)
		} else {
			msg, err = ini.Handle(msg, now)
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	ispi, _ := ini.SPIs()
	res := r.sas[ispi]
	if res == nil || ini.State() != StateEstablished {
		t.Fatalf("legitimate initiator: state %v, responder SA %v", ini.State(), res)
	}
	checkPair(t, ini, res)
}

// TestCookieValidity: a cookie is bound to the initiator's address, SPI
// and nonce, survives one secret rotation and not two.
func TestCookieValidity(t *testing.T) {
	ci, _ := pairConfigs(t, []string{"aes256-sha256-x25519"}, []string{"aes128gcm16"})
	c := &Cookies{Threshold: -1}
	ini, req, err := Initiate(ci, addrA, addrB, t0)
	if err != nil {
		t.Fatal(err)
	}
	reply, pass := c.Check(req, addrA, 0, t0)
	if pass || reply == nil {
		t.Fatal("threshold -1: a request without a cookie passed")
	}
	withCookie, err := ini.Handle(reply, t0)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name   string
		msg    []byte
		from   netip.AddrPort
		at     time.Time
		passes bool
	}{
		{"echoed", withCookie, addrA, t0, true},
		{"from another address", withCookie, netip.MustParseAddrPort("192.0.2.99:500"), t0, false},
		{"with another SPI", func() []byte { b := bytes.Clone(withCookie); b[0] ^= 1; return b }(), addrA, t0, false},
		{"after one rotation", withCookie, addrA, t0.Add(CookieRotation + time.Second), true},
		{"after two rotations", withCookie, addrA, t0.Add(2*CookieRotation + 2*time.Second), false},
	} {
		if _, pass := c.Check(tt.msg, tt.from, 0, tt.at); pass != tt.passes {
			t.Errorf("%s: passes %v, want %v", tt.name, pass, tt.passes)
		}
	}
	if _, pass := (&Cookies{}).Check(req, addrA, DefaultCookieThreshold-1, t0); !pass {
		t.Error("below the threshold a request without a cookie was stopped")
	}
}

// BenchmarkCookieBogus is the responder's cost of one bogus IKE_SA_INIT
// request once cookies are asked: parse, HMAC, COOKIE answer.
func BenchmarkCookieBogus(b *testing.B) {
	ci, _ := pairConfigs(b, []string{"aes256-sha256-x25519"}, []string{"aes128gcm16"})
	bogus := bogusInit(b, ci)
	c := &Cookies{}
	reqs := make([][]byte, 1024)
	for i := range reqs {
		reqs[i] = bogus(i + 1)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, pass := c.Check(reqs[i%len(reqs)], spoofed(i), DefaultCookieThreshold, t0); pass {
			b.Fatal("passed")
		}
	}
}

// BenchmarkRespondHalfOpen is what one bogus request costs without
// cookies: a half-open SA with its key exchange (x25519).
func BenchmarkRespondHalfOpen(b *testing.B) {
	ci, cr := pairConfigs(b, []string{"aes256-sha256-x25519"}, []string{"aes128gcm16"})
	bogus := bogusInit(b, ci)
	req := bogus(1)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if sa, _, err := Respond(cr, addrB, spoofed(i), req, t0); sa == nil {
			b.Fatal(err)
		}
	}
}
