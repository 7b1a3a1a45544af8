package ike

import (
	"errors"
	"slices"
	"testing"

	"github.com/ipsecd/ipsecd/ike/message"
)

// TestEstablishMultiKE runs IKE_SA_INIT, one IKE_INTERMEDIATE per
// additional key exchange (RFC 9370) and IKE_AUTH between the two state
// machines, and checks what each exchange carried: the KE payloads of
// the negotiated methods in order, fragmented where ML-KEM's keys exceed
// a datagram, and the keys updated after each.
func TestEstablishMultiKE(t *testing.T) {
	for _, tt := range []struct {
		ike           string
		intermediates []uint16 // the KE methods of IKE_INTERMEDIATE, in order
		suite         string
	}{
		{"aes256-sha384-x25519-ke1_mlkem768", []uint16{36}, "aes256-sha384-prfsha384-x25519-ke1_mlkem768"},
		{"aes256-sha384-ecp384-ke1_mlkem1024", []uint16{37}, "aes256-sha384-prfsha384-ecp384-ke1_mlkem1024"},
		{"aes256gcm16-prfsha256-x25519-ke1_mlkem768-ke2_mlkem1024", []uint16{36, 37}, "aes256gcm16-prfsha256-x25519-ke1_mlkem768-ke2_mlkem1024"},
		{"aes128-sha256-ecp256-ke1_x25519-ke3_mlkem768", []uint16{31, 36}, "aes128-sha256-prfsha256-ecp256-ke1_x25519-ke3_mlkem768"},
		{"aes256-sha384-mlkem768", nil, "aes256-sha384-prfsha384-mlkem768"},
		{"aes256-sha384-mlkem1024", nil, "aes256-sha384-prfsha384-mlkem1024"},
		{"aes256-sha384-x25519-ke1_mlkem768-ke1_none", []uint16{36}, "aes256-sha384-prfsha384-x25519-ke1_mlkem768"},
	} {
		t.Run(tt.ike, func(t *testing.T) {
			ci, cr := pairConfigs(t, []string{tt.ike}, []string{"aes256gcm16"})
			ci.Keylog = true
			var methods []uint16
			frags := 0
			ini, res, errI, errR := runWatched(t, ci, cr, func(m *message.Message, ps []message.Payload) {
				if m.Exchange == message.IKEIntermediate && !m.IsResponse() {
					methods = append(methods, message.KE(message.Get(ps, message.TypeKE)).Group())
				}
			}, func(m *message.Message) {
				if m.Exchange == message.IKEIntermediate && isFragment(m) {
					frags++
				}
			})
			if errI != nil || errR != nil {
				t.Fatalf("initiator: %v; responder: %v", errI, errR)
			}
			checkPair(t, ini, res)
			if got := ini.Suite().String(); got != tt.suite || res.Suite().String() != tt.suite {
				t.Errorf("suites %q and %q, want %q", got, res.Suite(), tt.suite)
			}
			if !slices.Equal(methods, tt.intermediates) {
				t.Errorf("IKE_INTERMEDIATE requests carried methods %v, want %v", methods, tt.intermediates)
			}
			if len(tt.intermediates) > 0 && frags == 0 {
				t.Error("no IKE_INTERMEDIATE message was fragmented (RFC 7383)")
			}
			if got := len(ini.TakeKeylog()); got != len(tt.intermediates) {
				t.Errorf("%d earlier keylog lines, want one per IKE_INTERMEDIATE (%d)", got, len(tt.intermediates))
			}
			if ini.hs != nil || res.hs != nil {
				t.Error("the handshake outlived IKE_AUTH")
			}
		})
	}
}

// runWatched is run with a look at each message on the way: sent is
// called with each whole message a side sealed (its payloads, decrypted
// by the receiver), raw with each datagram.
func runWatched(t *testing.T, ci, cr *Config, sent func(*message.Message, []message.Payload), raw func(*message.Message)) (ini, res *SA, errI, errR error) {
	t.Helper()
	ini, msg, err := Initiate(ci, addrA, addrB, t0)
	if err != nil {
		t.Fatal(err)
	}
	msgs := ini.Packets(msg)
	for n := 0; len(msgs) > 0 && n < 12; n++ {
		var out [][]byte
		for _, d := range msgs {
			m, err := message.Parse(d)
			if err != nil {
				t.Fatal(err)
			}
			raw(m)
			var reply []byte
			to := ini
			if n%2 == 0 {
				to = res
			}
			if to == nil {
				res, reply, errR = Respond(cr, addrB, addrA, d, t0)
				to = res
			} else if n%2 == 0 {
				reply, errR = res.Handle(d, t0)
			} else {
				reply, errI = ini.Handle(d, t0)
			}
			if to != nil && to.hs != nil && to.hs.lastPlain != nil && (!isFragment(m) || to.reasm == nil) {
				if ps, err := message.ParsePayloads(to.hs.lastInner, to.hs.lastPlain); err == nil {
					sent(m, ps)
				}
				to.hs.lastPlain = nil
			}
			if reply != nil {
				if to != nil {
					out = append(out, to.Packets(reply)...)
				} else {
					out = append(out, reply)
				}
			}
		}
		msgs = out
	}
	return
}

// TestIntermediateBadKE: a truncated, oversized or mislabelled KE in an
// IKE_INTERMEDIATE request gets INVALID_SYNTAX and ends the responder's
// SA, never a panic; the initiator fails on that answer.
func TestIntermediateBadKE(t *testing.T) {
	for _, tt := range []struct {
		name  string
		forge func(ke []byte) []byte // the KE payload body sent
	}{
		{"truncated", func(ke []byte) []byte { return ke[:len(ke)-1] }},
		{"oversized", func(ke []byte) []byte { return append(ke, 0) }},
		{"method header only", func(ke []byte) []byte { return ke[:4] }},
		{"another method", func(ke []byte) []byte { ke[1] = 37; return ke }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ci, cr := pairConfigs(t, []string{"aes256-sha384-x25519-ke1_mlkem768"}, []string{"aes256gcm16"})
			ini, res := untilIntermediate(t, ci, cr)
			// The request again, with the forged KE, as the initiator's
			// next message (same ID, same keys).
			ke := message.AppendKE(nil, 36, ini.hs.priv.Public())
			ini.pending = nil
			ini.nextID--
			forged, err := ini.request(message.IKEIntermediate, []message.Payload{{Type: message.TypeKE, Body: tt.forge(ke)}}, t0)
			if err != nil {
				t.Fatal(err)
			}
			var reply []byte
			for _, d := range ini.Packets(forged) {
				reply, err = res.Handle(d, t0)
			}
			if !errors.Is(err, ErrProtocol) || res.State() != StateFailed {
				t.Fatalf("responder: %v, state %v; want ErrProtocol and failed", err, res.State())
			}
			rm, _ := message.Parse(reply)
			ps, err := ini.decrypt(rm, reply)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := notifyOf(ps, message.InvalidSyntax); !ok {
				t.Fatalf("answer %v, want INVALID_SYNTAX", ps)
			}
			if _, err := ini.Handle(reply, t0); err == nil || ini.State() != StateFailed {
				t.Fatalf("initiator: %v, state %v; want failed", err, ini.State())
			}
		})
	}
}

// TestIntAuthBinds: AUTH covers the IKE_INTERMEDIATE messages (RFC 9242
// §3.3.2): a responder whose IntAuth chain differs (here: one byte of
// its record of the initiator's message) refuses the initiator's AUTH.
func TestIntAuthBinds(t *testing.T) {
	ci, cr := pairConfigs(t, []string{"aes256-sha384-x25519-ke1_mlkem768"}, []string{"aes256gcm16"})
	ini, msg, _ := Initiate(ci, addrA, addrB, t0)
	res, answer, _ := Respond(cr, addrB, addrA, msg, t0)
	req, _ := ini.Handle(answer, t0)
	var reply []byte
	for _, d := range ini.Packets(req) {
		reply, _ = res.Handle(d, t0)
	}
	res.hs.intAuthI[0] ^= 1
	auth, err := ini.Handle(reply, t0)
	if err != nil {
		t.Fatal(err)
	}
	var last []byte
	for _, d := range ini.Packets(auth) {
		last, err = res.Handle(d, t0)
	}
	if !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("responder: %v, want ErrAuthFailed", err)
	}
	if _, err := ini.Handle(last, t0); !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("initiator: %v, want ErrAuthFailed", err)
	}
}

// FuzzIntermediate sends authenticated IKE_INTERMEDIATE messages of
// arbitrary payloads: as the request to a responder that waits for the
// additional key exchange (ML-KEM-768), and as the response to the
// initiator that sent it. Each side answers or fails; none panics.
func FuzzIntermediate(f *testing.F) {
	ci, cr := pairConfigs(f, []string{"aes256-sha384-x25519-ke1_mlkem768"}, []string{"aes256gcm16"})
	ke, _ := message.AppendPayloads(nil, []message.Payload{{Type: message.TypeKE, Body: message.AppendKE(nil, 36, make([]byte, 1184))}})
	f.Add(false, uint8(message.TypeKE), ke)
	f.Add(true, uint8(message.TypeKE), ke[:100])
	f.Add(true, uint8(message.TypeN), []byte{0, 0, 0, 8, 0, 0, 0, 7})
	f.Fuzz(func(t *testing.T, response bool, first uint8, chain []byte) {
		ini, res := untilIntermediate(t, ci, cr)
		if response {
			h := res.header(message.IKEIntermediate, ini.nextID-1, true)
			if m, err := res.seal.Seal(h, message.PayloadType(first), chain); err == nil {
				ini.Handle(m, t0)
			}
			return
		}
		h := ini.header(message.IKEIntermediate, ini.nextID-1, false)
		if m, err := ini.seal.Seal(h, message.PayloadType(first), chain); err == nil {
			res.Handle(m, t0)
		}
	})
}

// untilIntermediate runs IKE_SA_INIT between ci and cr: the initiator
// has sent its first IKE_INTERMEDIATE request (not delivered), the
// responder waits for it.
func untilIntermediate(t testing.TB, ci, cr *Config) (ini, res *SA) {
	t.Helper()
	ini, msg, _ := Initiate(ci, addrA, addrB, t0)
	res, answer, err := Respond(cr, addrB, addrA, msg, t0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ini.Handle(answer, t0); err != nil {
		t.Fatal(err)
	}
	return ini, res
}

// BenchmarkChainIntAuth is what adding one IKE_INTERMEDIATE message of
// ML-KEM-768's size (its encapsulation key) to the IntAuth chain costs.
func BenchmarkChainIntAuth(b *testing.B) {
	ci, cr := pairConfigs(b, []string{"aes256-sha256-x25519-ke1_mlkem768"}, []string{"aes128gcm16"})
	ini, _ := untilIntermediate(b, ci, cr)
	plain, inner := message.AppendPayloads(nil, []message.Payload{{Type: message.TypeKE, Body: message.AppendKE(nil, 36, make([]byte, 1184))}})
	hf := ini.header(message.IKEIntermediate, 1, false)
	b.ReportAllocs()
	for b.Loop() {
		ini.chainIntAuth(true, hf, inner, plain)
	}
}
