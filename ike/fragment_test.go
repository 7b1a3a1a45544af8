package ike

import (
	"bytes"
	"crypto/x509"
	"errors"
	"testing"

	"github.com/ipsecd/ipsecd/ike/message"
)

// bigChainConfigs is certPairConfigs with RSA-4096 keys and a chain of
// three (root, intermediate, leaf), so that IKE_AUTH is some 4 KB, more
// than one 1280-byte datagram.
func bigChainConfigs(t testing.TB) (a, b *Config) {
	t.Helper()
	root := makeCert(t, testKey(t, "rsa4096", "ca"), certOpts{CN: "ipsecd test root", CA: true}, nil)
	inter := makeCert(t, testKey(t, "rsa4096", "inter"), certOpts{CN: "ipsecd test intermediate", CA: true}, root)
	a, b, _ = certPairConfigs(t, "p256")
	for _, c := range []struct {
		cfg  *Config
		name string
	}{{a, "a.test"}, {b, "b.test"}} {
		leaf := makeCert(t, testKey(t, "rsa4096", c.name), certOpts{CN: c.name, DNS: []string{c.name}}, inter)
		c.cfg.LocalCerts = []*x509.Certificate{leaf.Cert, inter.Cert}
		c.cfg.PrivateKey = leaf.Key
		c.cfg.CACerts = []*x509.Certificate{root.Cert}
	}
	return a, b
}

// exchangeAuth runs IKE_SA_INIT and returns both SAs with the
// initiator's IKE_AUTH request in datagrams.
func exchangeAuth(t *testing.T, ci, cr *Config) (ini, res *SA, auth [][]byte) {
	t.Helper()
	ini, msg, err := Initiate(ci, addrA, addrB, t0)
	if err != nil {
		t.Fatal(err)
	}
	res, msg, err = Respond(cr, addrB, addrA, msg, t0)
	if err != nil {
		t.Fatal(err)
	}
	msg, err = ini.Handle(msg, t0)
	if err != nil {
		t.Fatal(err)
	}
	return ini, res, ini.Packets(msg)
}

// TestFragmentation: with RFC 7383 negotiated, an IKE_AUTH carrying an
// RSA-4096 chain of three goes in fragments that each fit a 1280-byte
// IPv4 datagram, both ways, and the SAs come up; without it (either side
// not announcing) the message goes whole.
func TestFragmentation(t *testing.T) {
	ci, cr := bigChainConfigs(t)
	ini, res, auth := exchangeAuth(t, ci, cr)
	if !ini.fragOK || !res.fragOK {
		t.Fatal("fragmentation not negotiated")
	}
	if len(auth) < 3 {
		t.Fatalf("IKE_AUTH request in %d datagrams, want at least 3", len(auth))
	}
	limit := DefaultFragmentSize - 20 - 8 // IPv4 and UDP headers
	total := 0
	for i, f := range auth {
		if len(f) > limit {
			t.Fatalf("fragment %d is %d bytes, more than %d", i+1, len(f), limit)
		}
		m, err := message.Parse(f)
		if err != nil || len(m.Payloads) != 1 || m.Payloads[0].Type != message.TypeSKF {
			t.Fatalf("fragment %d: %v %v", i+1, err, m)
		}
		total += len(f)
	}
	var reply []byte
	for i, f := range auth {
		out, err := res.Handle(f, t0)
		if err != nil {
			t.Fatalf("fragment %d: %v", i+1, err)
		}
		if out != nil && i != len(auth)-1 {
			t.Fatalf("an answer after fragment %d of %d", i+1, len(auth))
		}
		reply = out
	}
	answer := res.Packets(reply)
	if len(answer) < 3 {
		t.Fatalf("IKE_AUTH response in %d datagrams, want fragments", len(answer))
	}
	for _, f := range answer {
		if _, err := ini.Handle(f, t0); err != nil {
			t.Fatal(err)
		}
	}
	checkPair(t, ini, res)
	t.Logf("IKE_AUTH request: %d fragments, %d bytes; response: %d fragments", len(auth), total, len(answer))

	// A retransmitted request gets the whole answer again, once: on
	// its first fragment.
	for i, f := range auth {
		out, _ := res.Handle(f, t0)
		if (out != nil) != (i == 0) {
			t.Fatalf("repeated fragment %d: answer %v", i+1, out != nil)
		}
		if i == 0 && len(res.Packets(out)) != len(answer) {
			t.Fatalf("repeated request: %d datagrams, want %d", len(res.Packets(out)), len(answer))
		}
	}

	for _, side := range []string{"initiator", "responder"} {
		t.Run("disabled by the "+side, func(t *testing.T) {
			ci, cr := bigChainConfigs(t)
			if side == "initiator" {
				ci.DisableFragmentation = true
			} else {
				cr.DisableFragmentation = true
			}
			_, _, auth := exchangeAuth(t, ci, cr)
			if len(auth) != 1 {
				t.Fatalf("%d datagrams without fragmentation, want 1", len(auth))
			}
			ini, res, errI, errR := run(t, ci, cr)
			if errI != nil || errR != nil {
				t.Fatal(errI, errR)
			}
			checkPair(t, ini, res)
		})
	}
}

// TestReassembly: fragments out of order and repeated are put together;
// a forged fragment (one bit flipped) is dropped and disturbs nothing;
// fragments numbered beyond their total or MaxFragments are dropped.
func TestReassembly(t *testing.T) {
	ci, cr := bigChainConfigs(t)
	_, res, auth := exchangeAuth(t, ci, cr)
	n := len(auth)
	forged := bytes.Clone(auth[1])
	forged[len(forged)-1] ^= 1
	order := [][]byte{auth[n-1], forged, auth[n-1]}
	for i := n - 2; i >= 0; i-- {
		order = append(order, auth[i])
	}
	for i, f := range order {
		out, err := res.Handle(f, t0)
		switch {
		case i == 1:
			if !errors.Is(err, ErrDropped) {
				t.Fatalf("forged fragment: %v, want ErrDropped", err)
			}
		case i == len(order)-1:
			if err != nil || out == nil {
				t.Fatalf("last fragment: %v, answer %v", err, out != nil)
			}
		case err != nil || out != nil:
			t.Fatalf("fragment %d in order: %v, answer %v", i, err, out != nil)
		}
	}
	if res.State() != StateEstablished {
		t.Fatalf("responder %v after reassembly", res.State())
	}

	for _, tt := range []struct {
		name       string
		num, total uint16
	}{{"number beyond total", 3, 2}, {"number zero", 0, 2}, {"too many", 1, MaxFragments + 1}} {
		f := message.SKF([]byte{byte(tt.num >> 8), byte(tt.num), byte(tt.total >> 8), byte(tt.total), 0})
		if f.IsValid() && f.Total() <= MaxFragments {
			t.Fatalf("%s: fragment fields accepted", tt.name)
		}
	}
}

// TestFragmentSizes: the fragment size bounds every datagram, less the
// IPv6 header and the non-ESP marker where they apply.
func TestFragmentSizes(t *testing.T) {
	ci, cr := bigChainConfigs(t)
	for _, size := range []int{576, 1000, 1280, 1500} {
		ci.FragmentSize = size
		_, _, auth := exchangeAuth(t, ci, cr)
		for _, f := range auth {
			if len(f)+20+8 > size {
				t.Fatalf("fragment_size %d: a %d-byte fragment", size, len(f))
			}
		}
	}
}
