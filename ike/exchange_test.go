package ike

import (
	"bytes"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/ike/message"
	"github.com/ipsecd/ipsecd/ike/proposal"
)

var (
	addrA = netip.MustParseAddrPort("192.0.2.1:500")
	addrB = netip.MustParseAddrPort("192.0.2.2:500")
	t0    = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
)

func mustProposals(t testing.TB, proto message.ProtocolID, ss ...string) []proposal.Proposal {
	t.Helper()
	ps, err := proposal.ParseList(proto, ss)
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

// pairConfigs returns the configs of an initiator (a.test, 198.51.100.0/24
// behind it) and a responder (b.test, 203.0.113.0/24), with the same
// proposals on both sides.
func pairConfigs(t testing.TB, ike, esp []string) (a, b *Config) {
	a = &Config{LocalID: MustParseIdentity("a.test"), RemoteID: MustParseIdentity("b.test"), PSK: []byte("a-test-psk-not-a-secret"),
		Proposals: mustProposals(t, message.ProtoIKE, ike...),
		Child: ChildConfig{Proposals: mustProposals(t, message.ProtoESP, esp...),
			LocalTS:  []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")},
			RemoteTS: []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")}}}
	bb := *a
	bb.LocalID, bb.RemoteID = a.RemoteID, a.LocalID
	bb.Child.LocalTS, bb.Child.RemoteTS = a.Child.RemoteTS, a.Child.LocalTS
	return a, &bb
}

// run takes an IKE_SA_INIT request from the initiator through the
// responder and then passes messages between the two SAs until neither
// has anything to send (at most 16 messages, EAP-MSCHAPv2 needs 12, each in as many datagrams
// as Packets says).
func run(t *testing.T, ci, cr *Config) (ini, res *SA, errI, errR error) {
	t.Helper()
	return runUnchecked(t, ci, cr, func(*SA) {})
}

// establishedSides runs a whole IKE_SA_INIT and IKE_AUTH between ci and
// cr, drains the events of both SAs, and returns them as (acting, other):
// the initiator first, or the responder when fromResp.
func establishedSides(t *testing.T, ci, cr *Config, fromResp bool) (a, b *SA) {
	t.Helper()
	ini, res, errI, errR := run(t, ci, cr)
	if errI != nil || errR != nil {
		t.Fatal(errI, errR)
	}
	ini.TakeEvents()
	res.TakeEvents()
	if fromResp {
		return res, ini
	}
	return ini, res
}

// finishAuth takes the responder's IKE_SA_INIT answer to ini and runs
// IKE_AUTH between ini and res to the end, then checks the pair.
func finishAuth(t *testing.T, ini, res *SA, initAnswer []byte) {
	t.Helper()
	auth, err := ini.Handle(initAnswer, t0)
	if err != nil {
		t.Fatal(err)
	}
	last, err := res.Handle(auth, t0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ini.Handle(last, t0); err != nil {
		t.Fatal(err)
	}
	checkPair(t, ini, res)
}

// runUnchecked is run with forge called after Initiate validated ci: it
// may change ci into what Validate would refuse, to see the peer refuse
// it.
func runUnchecked(t *testing.T, ci, cr *Config, forge func(ini *SA)) (ini, res *SA, errI, errR error) {
	t.Helper()
	ini, msg, err := Initiate(ci, addrA, addrB, t0)
	if err != nil {
		t.Fatal(err)
	}
	forge(ini)
	msgs := ini.Packets(msg)
	for n := 0; len(msgs) > 0 && n < 64; n++ { // EAP-TLS takes a dozen rounds
		var out [][]byte
		for _, m := range msgs {
			var reply []byte
			var from *SA
			if n%2 == 0 { // towards the responder
				if res == nil {
					res, reply, errR = Respond(cr, addrB, addrA, m, t0)
				} else {
					reply, errR = res.Handle(m, t0)
				}
				from = res
			} else {
				reply, errI = ini.Handle(m, t0)
				from = ini
			}
			if reply != nil && from != nil {
				out = append(out, from.Packets(reply)...)
			} else if reply != nil {
				out = append(out, reply)
			}
		}
		msgs = out
	}
	return
}

// TestEstablish runs both state machines against each other for every
// IKE proposal and every ESP proposal the issue names.
func TestEstablish(t *testing.T) {
	ikes := []string{"aes256-sha256-x25519", "aes128-sha384-ecp256", "aes256-sha512-ecp384", "aes128-sha256-modp2048",
		"aes128gcm16-prfsha256-ecp256", "aes256gcm16-prfsha384-ecp384", "chacha20poly1305-prfsha512-x25519"}
	esps := []string{"aes128gcm16", "aes256gcm16-esn", "chacha20poly1305-x25519", "aes128-sha256", "aes256-sha256-modp2048"}
	for i, ike := range ikes {
		for j, esp := range esps {
			if testing.Short() && i != j%len(ikes) {
				continue
			}
			t.Run(ike+"/"+esp, func(t *testing.T) {
				ci, cr := pairConfigs(t, []string{ike}, []string{esp})
				ini, res, errI, errR := run(t, ci, cr)
				if errI != nil || errR != nil {
					t.Fatalf("initiator: %v; responder: %v", errI, errR)
				}
				checkPair(t, ini, res)
			})
		}
	}
}

func checkPair(t *testing.T, ini, res *SA) {
	t.Helper()
	if ini.State() != StateEstablished || res.State() != StateEstablished {
		t.Fatalf("states: initiator %v, responder %v", ini.State(), res.State())
	}
	if len(ini.Children()) != 1 || len(res.Children()) != 1 {
		t.Fatalf("children: %d and %d, want 1 each", len(ini.Children()), len(res.Children()))
	}
	ci, cr := ini.Children()[0], res.Children()[0]
	if ci.OutSPI != cr.InSPI || ci.InSPI != cr.OutSPI || ci.InSPI < 256 || ci.OutSPI < 256 {
		t.Fatalf("SPIs: initiator in %x out %x, responder in %x out %x", ci.InSPI, ci.OutSPI, cr.InSPI, cr.OutSPI)
	}
	if !bytes.Equal(ci.Out.Enc, cr.In.Enc) || !bytes.Equal(ci.In.Enc, cr.Out.Enc) || !bytes.Equal(ci.Out.Integ, cr.In.Integ) {
		t.Fatal("keys differ between the sides")
	}
	if bytes.Equal(ci.Out.Enc, ci.In.Enc) {
		t.Fatal("both directions have one key")
	}
	if want := ci.Suite.Encr.KeySize(); len(ci.Out.Enc) != want {
		t.Fatalf("key size %d, want %d", len(ci.Out.Enc), want)
	}
	if ci.Suite.String() != cr.Suite.String() || ci.ESN != cr.ESN {
		t.Fatalf("suites: %q esn %v and %q esn %v", ci.Suite, ci.ESN, cr.Suite, cr.ESN)
	}
	ka, kb := ini.Keys(), res.Keys()
	if !bytes.Equal(ka.D, kb.D) || !bytes.Equal(ka.EI, kb.EI) {
		t.Fatal("IKE keys differ")
	}
}

func TestInvalidKERetry(t *testing.T) {
	ci, cr := pairConfigs(t, []string{"aes256-sha256-x25519-ecp256"}, []string{"aes128gcm16"})
	cr.Proposals = mustProposals(t, message.ProtoIKE, "aes256-sha256-ecp256")
	ini, msg, _ := Initiate(ci, addrA, addrB, t0)
	res, reply, err := Respond(cr, addrB, addrA, msg, t0)
	if res != nil || !errors.Is(err, ErrDropped) {
		t.Fatalf("first request: got SA %v, %v; want a refusal", res, err)
	}
	m, _ := message.Parse(reply)
	if n, ok := notifyOf(m.Payloads, message.InvalidKEPayload); !ok || !bytes.Equal(n.Data(), []byte{0, 19}) {
		t.Fatalf("reply %v, want INVALID_KE_PAYLOAD(19)", m.Payloads)
	}
	retry, err := ini.Handle(reply, t0)
	if err != nil {
		t.Fatal(err)
	}
	rm, _ := message.Parse(retry)
	if ke := message.KE(rm.Get(message.TypeKE)); ke.Group() != 19 || rm.ISPI != m.ISPI {
		t.Fatalf("retry: group %d SPI %x, want 19 and the same SPI", ke.Group(), rm.ISPI)
	}
	res, reply, err = Respond(cr, addrB, addrA, retry, t0)
	if err != nil {
		t.Fatal(err)
	}
	finishAuth(t, ini, res, reply)
	if ini.Suite().DH.Name != "ecp256" {
		t.Fatalf("group %q, want ecp256", ini.Suite().DH.Name)
	}
}

func TestFailures(t *testing.T) {
	for _, tt := range []struct {
		name      string
		edit      func(ci, cr *Config)
		wantI     error
		wantR     error
		iState    State
		childOnly bool
	}{
		{"disjoint IKE proposals", func(ci, cr *Config) {
			cr.Proposals = mustProposals(t, message.ProtoIKE, "aes128gcm16-prfsha256-ecp384")
		}, ErrNoProposalChosen, ErrNoProposalChosen, StateFailed, false},
		{"wrong PSK", func(ci, cr *Config) { cr.PSK = []byte("another") }, ErrAuthFailed, ErrAuthFailed, StateFailed, false},
		{"wrong identity", func(ci, cr *Config) { cr.RemoteID = MustParseIdentity("c.test") }, ErrAuthFailed, ErrAuthFailed, StateFailed, false},
		{"disjoint ESP proposals", func(ci, cr *Config) {
			cr.Child.Proposals = mustProposals(t, message.ProtoESP, "chacha20poly1305")
		}, ErrChildFailed, ErrChildFailed, StateEstablished, true},
		{"disjoint selectors", func(ci, cr *Config) {
			cr.Child.LocalTS = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
		}, ErrChildFailed, ErrChildFailed, StateEstablished, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ci, cr := pairConfigs(t, []string{"aes256-sha256-x25519"}, []string{"aes128gcm16"})
			tt.edit(ci, cr)
			ini, res, errI, errR := run(t, ci, cr)
			if !errors.Is(errI, tt.wantI) || !errors.Is(errR, tt.wantR) {
				t.Fatalf("got initiator %v, responder %v; want %v, %v", errI, errR, tt.wantI, tt.wantR)
			}
			if ini.State() != tt.iState || len(ini.Children()) != 0 || res != nil && len(res.Children()) != 0 {
				t.Fatalf("initiator %v with %d children, want %v and none", ini.State(), len(ini.Children()), tt.iState)
			}
		})
	}
}

func TestNarrowing(t *testing.T) {
	ci, cr := pairConfigs(t, []string{"aes256-sha256-x25519"}, []string{"aes128gcm16"})
	ci.Child.LocalTS = []netip.Prefix{netip.MustParsePrefix("198.51.100.0/23")}
	cr.Child.RemoteTS = []netip.Prefix{netip.MustParsePrefix("198.51.100.128/25")}
	ini, res, errI, errR := run(t, ci, cr)
	if errI != nil || errR != nil {
		t.Fatal(errI, errR)
	}
	checkPair(t, ini, res)
	want := message.Selector{EndPort: 65535, Start: netip.MustParseAddr("198.51.100.128"), End: netip.MustParseAddr("198.51.100.255")}
	if got := ini.Children()[0].LocalTS; len(got) != 1 || got[0] != want {
		t.Fatalf("initiator's local_ts: got %+v, want %+v", got, want)
	}
	if got := res.Children()[0].RemoteTS; len(got) != 1 || got[0] != want {
		t.Fatalf("responder's remote_ts: got %+v, want %+v", got, want)
	}
}

func TestNATDetection(t *testing.T) {
	for _, tt := range []struct {
		name     string
		seenFrom netip.AddrPort // the initiator's address as the responder sees it
		force    bool
		want     bool
	}{
		{"no NAT", addrA, false, false},
		{"NAT rewrites the initiator", netip.MustParseAddrPort("203.0.113.9:4711"), false, true},
		{"forced encapsulation", addrA, true, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ci, cr := pairConfigs(t, []string{"aes256-sha256-x25519"}, []string{"aes128gcm16"})
			ci.ForceEncap = tt.force
			ini, msg, _ := Initiate(ci, addrA, addrB, t0)
			res, reply, err := Respond(cr, addrB, tt.seenFrom, msg, t0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ini.Handle(reply, t0); err != nil {
				t.Fatal(err)
			}
			if ini.NAT() != tt.want || res.NAT() != tt.want {
				t.Fatalf("NAT seen: initiator %v, responder %v; want %v", ini.NAT(), res.NAT(), tt.want)
			}
			// Behind a NAT the initiator sends IKE_AUTH to port 4500.
			l, r := ini.Addrs()
			if want := map[bool]uint16{false: 500, true: NATTPort}[tt.want]; l.Port() != want || r.Port() != want {
				t.Fatalf("initiator's addresses %v -> %v, want port %d", l, r, want)
			}
		})
	}
}

// TestRetransmission: the responder answers a repeated request with the
// same bytes, the initiator resends on its schedule and gives up after
// the last try.
func TestRetransmission(t *testing.T) {
	ci, cr := pairConfigs(t, []string{"aes256-sha256-x25519"}, []string{"aes128gcm16"})
	ini, msg, _ := Initiate(ci, addrA, addrB, t0)
	res, reply, _ := Respond(cr, addrB, addrA, msg, t0)
	again, err := res.Handle(msg, t0)
	if err != nil || !bytes.Equal(again, reply) {
		t.Fatalf("repeated IKE_SA_INIT: got %v, want the cached answer", err)
	}
	auth, _ := ini.Handle(reply, t0)
	if out, _ := ini.Tick(t0.Add(3 * time.Second)); out != nil {
		t.Fatal("retransmitted before 4 s")
	}
	if out, _ := ini.Tick(t0.Add(4 * time.Second)); !bytes.Equal(out, auth) {
		t.Fatal("no retransmission at 4 s")
	}
	answer, err := res.Handle(auth, t0)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := res.Handle(auth, t0); !bytes.Equal(again, answer) {
		t.Fatal("repeated IKE_AUTH: not the cached answer")
	}
	if _, err := ini.Handle(answer, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := ini.Handle(answer, t0); !errors.Is(err, ErrDropped) {
		t.Fatalf("a response twice: got %v, want dropped", err)
	}
	// A liveness check nobody answers: 4, 7.2, 12.96, 23.3, 42 s, then
	// the SA fails.
	ping, _ := ini.Ping(t0)
	now, sends := t0, 0
	for i := 0; i < 20 && ini.State() == StateEstablished; i++ {
		now = ini.NextTimeout()
		out, err := ini.Tick(now)
		if out != nil {
			if !bytes.Equal(out, ping) {
				t.Fatal("retransmission differs")
			}
			sends++
		}
		if err != nil && !errors.Is(err, ErrTimeout) {
			t.Fatal(err)
		}
	}
	if sends != 5 || ini.State() != StateFailed || !errors.Is(ini.Err(), ErrTimeout) {
		t.Fatalf("got %d retransmissions, state %v (%v); want 5 and failed", sends, ini.State(), ini.Err())
	}
	if total := now.Sub(t0).Seconds(); total < 4+7.2+12.96+23.3+41.9 || total > 4+7.2+12.96+23.4+42.1+76 {
		t.Fatalf("gave up after %.1f s", total)
	}
}

func TestInformational(t *testing.T) {
	ci, cr := pairConfigs(t, []string{"aes128gcm16-prfsha256-x25519"}, []string{"aes128gcm16"})
	ini, res, errI, errR := run(t, ci, cr)
	if errI != nil || errR != nil {
		t.Fatal(errI, errR)
	}
	ini.TakeEvents()
	// A liveness check from the responder's side (the peer's request IDs
	// are counted apart from ours).
	ping, err := res.Ping(t0)
	if err != nil {
		t.Fatal(err)
	}
	pong, err := ini.Handle(ping, t0)
	if err != nil || pong == nil {
		t.Fatalf("DPD: got %v", err)
	}
	if _, err := res.Handle(pong, t0); err != nil || res.NextTimeout() != (time.Time{}) {
		t.Fatalf("DPD answer: %v, still pending %v", err, res.NextTimeout())
	}
	// An unknown critical payload inside SK is answered.
	plain, first := message.AppendPayloads(nil, []message.Payload{{Type: 222, Critical: true, Body: []byte{1}}})
	bad, _ := res.seal.Seal(res.header(message.Informational, res.nextID, false), first, plain)
	res.nextID++
	res.startRequest(bad, message.Informational, t0)
	ans, err := ini.Handle(bad, t0)
	if err != nil {
		t.Fatal(err)
	}
	am, _ := message.Parse(ans)
	inner, _ := res.open.Open(ans, am.Get(message.TypeSK))
	ps, _ := message.ParsePayloads(am.Payloads[0].Inner, inner)
	if n, ok := notifyOf(ps, message.UnsupportedCriticalPayload); !ok || !bytes.Equal(n.Data(), []byte{222}) {
		t.Fatalf("answer %v, want UNSUPPORTED_CRITICAL_PAYLOAD(222)", ps)
	}
	res.Handle(ans, t0)
	// Delete of the IKE SA.
	del, err := ini.Delete(t0)
	if err != nil {
		t.Fatal(err)
	}
	ack, err := res.Handle(del, t0)
	if err != nil || res.State() != StateDeleted {
		t.Fatalf("delete: %v, responder %v", err, res.State())
	}
	// The delete's answer was lost: a retransmission still gets it.
	if again, err := res.Handle(del, t0); err != nil || !bytes.Equal(again, ack) {
		t.Fatalf("retransmitted delete: %v, same answer %v", err, bytes.Equal(again, ack))
	}
	ev := res.TakeEvents()
	if len(ev) < 2 || ev[len(ev)-2].Kind != EventChildDown || ev[len(ev)-1].Kind != EventIKEDown {
		t.Fatalf("events %+v, want ChildDown then IKEDown", ev)
	}
}

// TestDropsForeign: messages with other SPIs, our own, or out of the
// window change nothing.
func TestDropsForeign(t *testing.T) {
	ci, cr := pairConfigs(t, []string{"aes256-sha256-x25519"}, []string{"aes128gcm16"})
	ini, res, _, _ := run(t, ci, cr)
	ping, _ := ini.Ping(t0)
	for _, tt := range []struct {
		name string
		msg  []byte
	}{
		{"own message", ping},
		{"truncated", ping[:40]},
		{"flipped", func() []byte { b := bytes.Clone(ping); b[len(b)-1] ^= 1; return b }()},
		{"other SPI", func() []byte { b := bytes.Clone(ping); b[0] ^= 1; return b }()},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sa := res
			if tt.name == "own message" {
				sa = ini
			}
			if out, err := sa.Handle(tt.msg, t0); out != nil || !errors.Is(err, ErrDropped) {
				t.Fatalf("got %x, %v; want dropped", out, err)
			}
		})
	}
	if out, err := res.Handle(ping, t0); err != nil || out == nil {
		t.Fatalf("the real message after the garbage: %v", err)
	}
}

// TestRespondRefusals: IKE_SA_INIT requests the responder answers with a
// notify and no state, and messages it drops without an answer.
func TestRespondRefusals(t *testing.T) {
	ci, cr := pairConfigs(t, []string{"aes256-sha256-x25519"}, []string{"aes128gcm16"})
	_, req, _ := Initiate(ci, addrA, addrB, t0)
	m, _ := message.Parse(req)
	critical := *m
	critical.Payloads = append(append([]message.Payload(nil), m.Payloads...), message.Payload{Type: 200, Critical: true, Body: []byte{1}})
	noKE := *m
	noKE.Payloads = nil
	for _, p := range m.Payloads {
		if p.Type != message.TypeKE {
			noKE.Payloads = append(noKE.Payloads, p)
		}
	}
	asResponse := *m
	asResponse.Flags |= message.FlagResponse
	for _, tt := range []struct {
		name   string
		msg    []byte
		notify message.NotifyType // 0: no answer
	}{
		{"unknown critical payload", message.Encode(&critical), message.UnsupportedCriticalPayload},
		{"no KE", message.Encode(&noKE), message.InvalidSyntax},
		{"a response", message.Encode(&asResponse), 0},
		{"truncated", req[:len(req)-3], 0},
		{"empty", nil, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sa, out, err := Respond(cr, addrB, addrA, tt.msg, t0)
			if sa != nil || err == nil {
				t.Fatalf("got an SA (%v), want a refusal", err)
			}
			if tt.notify == 0 {
				if out != nil {
					t.Fatalf("answered %x, want silence", out)
				}
				return
			}
			am, err := message.Parse(out)
			if err != nil {
				t.Fatal(err)
			}
			if n, ok := notifyOf(am.Payloads, tt.notify); !ok || am.RSPI != 0 || !am.IsResponse() {
				t.Fatalf("answer %+v, want notify %d with no responder SPI", am, tt.notify)
			} else if tt.notify == message.UnsupportedCriticalPayload && !bytes.Equal(n.Data(), []byte{200}) {
				t.Fatalf("notify data %x, want the payload type 200", n.Data())
			}
		})
	}
}

// FuzzHandle feeds arbitrary messages to a responder waiting for IKE_SA_INIT
// and to both sides of an established IKE SA: nothing panics, and
// garbage never takes the SA down.
func FuzzHandle(f *testing.F) {
	ci, cr := pairConfigs(f, []string{"aes128gcm16-prfsha256-x25519"}, []string{"aes128gcm16"})
	ini, req, _ := Initiate(ci, addrA, addrB, t0)
	res, resp, _ := Respond(cr, addrB, addrA, req, t0)
	auth, _ := ini.Handle(resp, t0)
	authResp, _ := res.Handle(auth, t0)
	ini.Handle(authResp, t0)
	ping, _ := ini.Ping(t0)
	for _, s := range [][]byte{req, resp, auth, authResp, ping} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		Respond(cr, addrB, addrA, b, t0)
		for _, sa := range []*SA{ini, res} {
			sa.Handle(b, t0)
			if sa.State() != StateEstablished {
				t.Fatalf("a fuzzed message took the SA to %v (%v)", sa.State(), sa.Err())
			}
		}
	})
}

// TestResponderAuthFails: an IKE_AUTH answer whose AUTH does not verify
// fails the initiator, which tells the responder with an INFORMATIONAL
// AUTHENTICATION_FAILED (RFC 7296 §2.21.2).
func TestResponderAuthFails(t *testing.T) {
	ci, cr := pairConfigs(t, []string{"aes256-sha256-x25519"}, []string{"aes128gcm16"})
	ini, req, _ := Initiate(ci, addrA, addrB, t0)
	res, resp, _ := Respond(cr, addrB, addrA, req, t0)
	if _, err := ini.Handle(resp, t0); err != nil {
		t.Fatal(err)
	}
	forged, err := res.sealed(res.header(message.IKEAuth, 1, true), []message.Payload{
		{Type: message.TypeIDr, Body: MustParseIdentity("b.test").payload()},
		{Type: message.TypeAUTH, Body: message.AppendAuth(nil, message.AuthSharedKey, make([]byte, 32))},
	})
	if err != nil {
		t.Fatal(err)
	}
	info, err := ini.Handle(forged, t0)
	if !errors.Is(err, ErrAuthFailed) || ini.State() != StateFailed || len(ini.Children()) != 0 {
		t.Fatalf("got %v, state %v; want authentication failed", err, ini.State())
	}
	m, err := message.Parse(info)
	if err != nil || m.Exchange != message.Informational || m.IsResponse() {
		t.Fatalf("got %v (%v), want an INFORMATIONAL request", m, err)
	}
	plain, err := res.open.Open(info, m.Get(message.TypeSK))
	if err != nil {
		t.Fatal(err)
	}
	ps, _ := message.ParsePayloads(m.Payloads[0].Inner, plain)
	if _, ok := notifyOf(ps, message.AuthenticationFailed); !ok {
		t.Fatalf("payloads %v, want AUTHENTICATION_FAILED", ps)
	}
}

// TestHalfOpenTimeout: a responder that answered IKE_SA_INIT gives up
// when IKE_AUTH does not come, and LastHeard follows authenticated
// messages only.
func TestHalfOpenTimeout(t *testing.T) {
	ci, cr := pairConfigs(t, []string{"aes256-sha256-x25519"}, []string{"aes128gcm16"})
	ini, req, _ := Initiate(ci, addrA, addrB, t0)
	res, resp, _ := Respond(cr, addrB, addrA, req, t0)
	if got := res.NextTimeout(); !got.Equal(t0.Add(HalfOpenTimeout)) {
		t.Fatalf("NextTimeout %v, want %v", got, t0.Add(HalfOpenTimeout))
	}
	if _, err := res.Tick(t0.Add(HalfOpenTimeout - time.Second)); err != nil || res.State() != StateInitDone {
		t.Fatalf("gave up early: %v", err)
	}
	if _, err := res.Tick(t0.Add(HalfOpenTimeout)); !errors.Is(err, ErrTimeout) || res.State() != StateFailed {
		t.Fatalf("got %v, state %v; want a timeout", err, res.State())
	}

	// A fresh responder, and a message an hour later.
	res, resp, _ = Respond(cr, addrB, addrA, req, t0)
	later := t0.Add(time.Hour)
	auth, _ := ini.Handle(resp, t0)
	if _, err := res.Handle(auth, later); err != nil {
		t.Fatal(err)
	}
	if !res.LastHeard().Equal(later) {
		t.Fatalf("LastHeard %v, want %v", res.LastHeard(), later)
	}
	garbage := bytes.Clone(auth)
	garbage[len(garbage)-1] ^= 1
	res.Handle(garbage, later.Add(time.Hour))
	if !res.LastHeard().Equal(later) {
		t.Fatal("a message that did not authenticate moved LastHeard")
	}
}

// TestResponderUsesKEGroup: when a proposal the responder accepts has the
// group of the initiator's KE, it is taken, even if the responder would
// prefer another: no INVALID_KE_PAYLOAD round trip.
func TestResponderUsesKEGroup(t *testing.T) {
	ci, cr := pairConfigs(t, []string{"aes256-sha256-ecp256", "aes256-sha256-x25519"}, []string{"aes128gcm16"})
	cr.Proposals = mustProposals(t, message.ProtoIKE, "aes256-sha256-x25519", "aes256-sha256-ecp256")
	_, req, _ := Initiate(ci, addrA, addrB, t0)
	res, _, err := Respond(cr, addrB, addrA, req, t0)
	if err != nil || res == nil {
		t.Fatalf("got %v, want the SA in the KE's group", err)
	}
	if g := res.Suite().DH.Name; g != "ecp256" {
		t.Fatalf("group %q, want ecp256 (the KE's)", g)
	}
}

// TestAuthFailedNotifyEndsSA: an INFORMATIONAL AUTHENTICATION_FAILED from
// the initiator after IKE_AUTH ends the responder's IKE SA and children.
func TestAuthFailedNotifyEndsSA(t *testing.T) {
	ci, cr := pairConfigs(t, []string{"aes256-sha256-x25519"}, []string{"aes128gcm16"})
	ini, res, errI, errR := run(t, ci, cr)
	if errI != nil || errR != nil {
		t.Fatal(errI, errR)
	}
	res.TakeEvents()
	req, err := ini.request(message.Informational, []message.Payload{notify(message.AuthenticationFailed, nil)}, t0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := res.Handle(req, t0); err != nil {
		t.Fatal(err)
	}
	if res.State() != StateDeleted || !errors.Is(res.Err(), ErrAuthFailed) || len(res.Children()) != 0 {
		t.Fatalf("responder %v (%v) with %d children, want deleted for AUTHENTICATION_FAILED", res.State(), res.Err(), len(res.Children()))
	}
	ev := res.TakeEvents()
	if len(ev) != 2 || ev[0].Kind != EventChildDown || ev[1].Kind != EventIKEDown {
		t.Fatalf("events %+v, want ChildDown, IKEDown", ev)
	}
}

// TestDeleteChild: either side deletes the child; both report it down
// and keep the IKE SA; then the other side creates it anew.
func TestDeleteChild(t *testing.T) {
	for _, fromResp := range []bool{false, true} {
		ci, cr := pairConfigs(t, []string{"aes256-sha256-x25519"}, []string{"aes128gcm16-x25519"})
		a, b := establishedSides(t, ci, cr, fromResp)
		c := a.Children()[0]
		req, err := a.DeleteChild(c, t0)
		if err != nil {
			t.Fatal(err)
		}
		ack, err := b.Handle(req, t0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.Handle(ack, t0); err != nil {
			t.Fatal(err)
		}
		for _, s := range []*SA{a, b} {
			ev := s.TakeEvents()
			if len(ev) != 1 || ev[0].Kind != EventChildDown || len(s.Children()) != 0 || s.State() != StateEstablished {
				t.Fatalf("events %+v, %d children, %v; want one ChildDown, none left, IKE SA up", ev, len(s.Children()), s.State())
			}
		}
		// The other side brings the child up again (with PFS, as the
		// ESP proposal names a group).
		req, err = b.CreateChild("", t0)
		if err != nil {
			t.Fatal(err)
		}
		if next := exchange(t, b, a, req); next != nil {
			t.Fatal("a request after creating a child")
		}
		if len(a.Children()) != 1 || len(b.Children()) != 1 {
			t.Fatalf("%d and %d children after CREATE_CHILD_SA, want 1 each", len(a.Children()), len(b.Children()))
		}
		na, nb := a.Children()[0], b.Children()[0]
		if na.OutSPI != nb.InSPI || !bytes.Equal(na.Out.Enc, nb.In.Enc) || na.Replaces != nil || na.Suite.DH.Name != "x25519" {
			t.Fatalf("the new child differs between the sides, replaces something, or has no PFS (%q)", na.Suite.DH.Name)
		}
		// A child the connection does not have is refused.
		if _, err := b.CreateChild("nope", t0); err == nil {
			t.Fatal("CreateChild of a child not configured succeeded")
		}
	}
}

// TestCookieEcho: asked for a cookie (RFC 7296 §2.6), the initiator sends
// IKE_SA_INIT again with the COOKIE notify first, the same SPI, nonce and
// KE, and the exchange completes.
func TestCookieEcho(t *testing.T) {
	ci, cr := pairConfigs(t, []string{"aes256-sha256-x25519"}, []string{"aes128gcm16"})
	ini, req, _ := Initiate(ci, addrA, addrB, t0)
	m, _ := message.Parse(req)
	cookie := []byte("a-responder-cookie")
	again, err := ini.Handle(refusal(m.HeaderFields, notify(message.Cookie, cookie)), t0)
	if err != nil {
		t.Fatal(err)
	}
	am, err := message.Parse(again)
	if err != nil {
		t.Fatal(err)
	}
	if n, ok := notifyOf(am.Payloads[:1], message.Cookie); !ok || !bytes.Equal(n.Data(), cookie) {
		t.Fatalf("first payload %v, want the COOKIE notify", am.Payloads[0].Type)
	}
	if am.ISPI != m.ISPI || !bytes.Equal(am.Get(message.TypeNONC), m.Get(message.TypeNONC)) || !bytes.Equal(am.Get(message.TypeKE), m.Get(message.TypeKE)) {
		t.Fatal("the retry changed SPI, nonce or KE")
	}
	res, resp, err := Respond(cr, addrB, addrA, again, t0)
	if err != nil {
		t.Fatal(err)
	}
	finishAuth(t, ini, res, resp)
}
