package eap

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"runtime"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/ike/message"
)

type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(t testing.TB, cn string) testCA {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(c)
	return testCA{c, key, pool}
}

// issue makes an RSA-3072 certificate (big enough that a flight takes
// several EAP-TLS fragments) naming cn and the e-mail address.
func (ca testCA) issue(t testing.TB, cn, email string, serial int64) tls.Certificate {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 3072)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames: []string{cn}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth}}
	if email != "" {
		tmpl.EmailAddresses = []string{email}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// converseTLS runs s against c and returns both statuses, the packets
// exchanged and the largest EAP-TLS packet.
func converseTLS(t *testing.T, s *TLSServer, c *TLSClient) (Status, Status, error, error, int, int) {
	t.Helper()
	req, err := s.Start()
	if err != nil {
		t.Fatal(err)
	}
	packets, largest := 1, 0
	for range 100 {
		largest = max(largest, len(req))
		resp, cst, cerr := c.Handle(req)
		if cst != Continue {
			return Succeeded, cst, nil, cerr, packets, largest
		}
		packets++
		largest = max(largest, len(resp))
		var sst Status
		req, sst, err = s.Handle(resp)
		packets++
		if sst == Failed {
			_, cst, cerr = c.Handle(req)
			return sst, cst, err, cerr, packets, largest
		}
		if sst == Succeeded {
			_, cst, cerr = c.Handle(req)
			return sst, cst, nil, cerr, packets, largest
		}
	}
	t.Fatal("conversation did not end in 100 rounds")
	return 0, 0, nil, nil, 0, 0
}

func TestEAPTLS(t *testing.T) {
	ca := newTestCA(t, "test CA")
	gw := ca.issue(t, "gw.example", "", 2)
	carol := ca.issue(t, "carol", "carol@example", 3)
	for _, v := range []struct {
		name string
		ver  uint16
	}{{"TLS1.2", tls.VersionTLS12}, {"TLS1.3", tls.VersionTLS13}} {
		t.Run(v.name, func(t *testing.T) {
			before := runtime.NumGoroutine()
			s := NewTLSServer(TLSServerConfig{Certificate: gw, ClientCAs: ca.pool, EAPID: "carol@example", MaxVersion: v.ver})
			c := NewTLSClient(TLSClientConfig{Identity: "carol@example", Certificate: carol, RootCAs: ca.pool, ServerID: "gw.example", MaxVersion: v.ver})
			sst, cst, serr, cerr, packets, largest := converseTLS(t, s, c)
			if sst != Succeeded || cst != Succeeded {
				t.Fatalf("server %v (%v), client %v (%v)", sst, serr, cst, cerr)
			}
			if s.Identity() != "carol@example" {
				t.Errorf("identity %q", s.Identity())
			}
			if msk := s.MSK(); len(msk) != 64 || !bytes.Equal(msk, c.MSK()) || bytes.Equal(msk, make([]byte, 64)) {
				t.Errorf("MSKs %x, %x", msk, c.MSK())
			}
			if cs := s.pipe.conn.ConnectionState(); cs.Version == tls.VersionTLS12 {
				// crypto/tls exports RFC 5216's key when the Extended
				// Master Secret was negotiated, as both ends here do:
				// the same as ours, made without it (tls12msk.go).
				km, err := cs.ExportKeyingMaterial("client EAP encryption", nil, 128)
				if err != nil || !bytes.Equal(km[:64], s.MSK()) {
					t.Errorf("crypto/tls exports %x (%v); our MSK is %x", km, err, s.MSK())
				}
			}
			if largest > 4+1+4+TLSFragmentSize+1 {
				t.Errorf("a packet of %d bytes; fragments are at most %d", largest, TLSFragmentSize)
			}
			t.Logf("%s: %d EAP packets, largest %d bytes", v.name, packets, largest)
			if runtime.NumGoroutine() > before {
				time.Sleep(10 * time.Millisecond)
				if n := runtime.NumGoroutine(); n > before {
					t.Errorf("%d goroutines after, %d before", n, before)
				}
			}
		})
	}
}

func TestEAPTLSRefuses(t *testing.T) {
	ca := newTestCA(t, "test CA")
	other := newTestCA(t, "other CA")
	gw := ca.issue(t, "gw.example", "", 2)
	carol := ca.issue(t, "carol", "carol@example", 3)
	mallory := other.issue(t, "carol", "carol@example", 4)
	for _, tc := range []struct {
		name       string
		cert       tls.Certificate
		eapID      string
		serverID   string
		serverFail bool
	}{
		{"client cert of another CA", mallory, "", "gw.example", true},
		{"certificate not naming eap_id", carol, "dave@example", "gw.example", true},
		{"server not named", carol, "", "other.example", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewTLSServer(TLSServerConfig{Certificate: gw, ClientCAs: ca.pool, EAPID: tc.eapID})
			c := NewTLSClient(TLSClientConfig{Identity: "carol@example", Certificate: tc.cert, RootCAs: ca.pool, ServerID: tc.serverID})
			sst, cst, serr, cerr, _, _ := converseTLS(t, s, c)
			if cst != Failed {
				t.Fatalf("client %v", cst)
			}
			if tc.serverFail && (sst != Failed || !errors.Is(serr, ErrAuthFailed)) {
				t.Fatalf("server %v, %v", sst, serr)
			}
			if !errors.Is(cerr, ErrAuthFailed) {
				t.Fatalf("client error %v", cerr)
			}
			s.Wipe()
			t.Logf("server: %v; client: %v", serr, cerr)
		})
	}
}

func TestEAPTLSFragments(t *testing.T) {
	msg := bytes.Repeat([]byte{7}, 2*TLSFragmentSize+10)
	var snd, rcv tlsFrag
	snd.send = msg
	n := 0
	for {
		d := snd.next()
		n++
		got, ack, err := rcv.receive(d)
		if err != nil {
			t.Fatal(err)
		}
		if !ack {
			if !bytes.Equal(got, msg) || n != 3 {
				t.Fatalf("%d fragments, %d bytes", n, len(got))
			}
			return
		}
	}
}

func FuzzEAPTLSReassembly(f *testing.F) {
	f.Add([]byte{0x80 | 0x40, 0, 0, 0, 4, 1, 2}, []byte{0, 3, 4})
	f.Add([]byte{0x40, 1}, []byte{0x80, 0, 0, 0, 2, 9})
	f.Add([]byte{0xc0, 0xff, 0xff, 0xff, 0xff, 1}, []byte{})
	f.Fuzz(func(t *testing.T, a, b []byte) {
		var fr tlsFrag
		for _, d := range [][]byte{a, b, a} {
			msg, _, err := fr.receive(d)
			if err == nil && len(msg) > maxTLSMessage {
				t.Fatalf("message of %d bytes", len(msg))
			}
		}
	})
}

func FuzzEAPTLSServer(f *testing.F) {
	f.Add([]byte{0, 1, 0, 6, byte(message.EAPTLS), 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		ca := fuzzCA(t)
		s := NewTLSServer(TLSServerConfig{Certificate: ca.gw, ClientCAs: ca.pool})
		defer s.Wipe()
		req, _ := s.Start()
		id := message.EAP(req).Identifier()
		resp := message.AppendEAP(nil, message.EAPResponse, id, message.EAPIdentity, []byte("x"))
		req, _, _ = s.Handle(resp)
		if len(in) >= 2 {
			in[1] = message.EAP(req).Identifier()
		}
		s.Handle(in)
	})
}

var fuzzCAs struct {
	pool *x509.CertPool
	gw   tls.Certificate
}

func fuzzCA(t testing.TB) struct {
	pool *x509.CertPool
	gw   tls.Certificate
} {
	if fuzzCAs.pool == nil {
		ca := newTestCA(t, "fuzz CA")
		fuzzCAs.pool, fuzzCAs.gw = ca.pool, ca.issue(t, "gw", "", 2)
	}
	return fuzzCAs
}
