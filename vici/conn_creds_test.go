package vici_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"strings"
	"testing"

	govici "github.com/strongswan/govici/vici"

	"github.com/ipsecd/ipsecd/config"
)

// pubkeyConn edits swanctlConn to local { auth = pubkey; certs } and
// remote { auth = pubkey; cacerts }, nil leaving a list out.
func pubkeyConn(t *testing.T, certs, cacerts []string) *govici.Message {
	return swanctlConn(t, func(c, _ *govici.Message) {
		l, r := govici.NewMessage(), govici.NewMessage()
		l.Set("auth", "pubkey")
		if certs != nil {
			l.Set("certs", certs)
		}
		r.Set("auth", "pubkey")
		r.Set("id", "b.test")
		if cacerts != nil {
			r.Set("cacerts", cacerts)
		}
		c.Set("local", l)
		c.Set("remote", r)
	})
}

// A connection's certs (the certificate's bytes, as swanctl sends a
// file of x509/) reach config as files in memory with the key of
// load-key whose public key is the certificate's; remote without
// cacerts trusts every CA of load-cert, as charon does.
func TestLoadConnCerts(t *testing.T) {
	f := &fakeLoader{}
	_, sess := serve(t, f, nil)
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	gwKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	otherKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ca, gw := selfSigned(t, caKey, true), selfSigned(t, gwKey, false)
	caPEM := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw}))
	ecDER := func(k *ecdsa.PrivateKey) string { b, _ := x509.MarshalECPrivateKey(k); return string(b) }

	// No key for the certificate yet, no CA: refused by name.
	for _, c := range []struct {
		certs, cacerts []string
		want           string
	}{
		{[]string{string(gw.Raw)}, []string{caPEM}, "local.certs: no private key loaded for certificate"},
		{nil, nil, "remote.cacerts: none given and no CA certificate loaded"},
	} {
		resp, err := sess.Call(context.Background(), "load-conn", pubkeyConn(t, c.certs, c.cacerts))
		if err == nil || !strings.Contains(fmt.Sprint(resp.Get("errmsg")), c.want) {
			t.Errorf("load-conn: %v %v, want an errmsg with %q", resp, err, c.want)
		}
	}
	for _, k := range []string{ecDER(otherKey), ecDER(gwKey)} {
		if resp, err := call(t, sess, "load-key", "type", "ecdsa", "data", k); err != nil {
			t.Fatalf("load-key: %v %v", resp, err)
		}
	}
	resp, err := sess.Call(context.Background(), "load-conn", pubkeyConn(t, []string{string(gw.Raw)}, nil))
	if err == nil || !strings.Contains(fmt.Sprint(resp.Get("errmsg")), "remote.cacerts: none given and no CA certificate loaded") {
		t.Errorf("load-conn without a CA: %v %v", resp, err)
	}
	if resp, err := call(t, sess, "load-cert", "type", "X509", "flag", "CA", "data", caPEM); err != nil {
		t.Fatalf("load-cert: %v %v", resp, err)
	}
	for _, cacerts := range [][]string{{caPEM}, nil} {
		if resp, err := sess.Call(context.Background(), "load-conn", pubkeyConn(t, []string{string(gw.Raw)}, cacerts)); err != nil {
			t.Fatalf("load-conn (cacerts %d): %v %v", len(cacerts), resp, err)
		}
		item := f.conns["gw"]
		for _, want := range []string{`local: {auth: "pubkey", cert: "vici-creds/local.crt", key: "vici-creds/local.key"}`,
			`remote: {auth: "pubkey", id: "b.test", cacerts: ["vici-creds/ca0.crt"]}`} {
			if !strings.Contains(item, want) {
				t.Fatalf("item %s\nwithout %s", item, want)
			}
		}
		// The item and its files parse as the daemon parses them, with
		// the file path's checks.
		doc := "interfaces: [{name: ipsec1, if_id: 1}]\nconnections:\n  - " + item + "\n"
		cfg, err := config.ParseMem("vici", []byte(doc), f.files)
		if err != nil {
			t.Fatalf("the item does not parse: %v", err)
		}
		c := cfg.Connections[0]
		if !c.Local.Certs[0].Equal(gw) || !c.Remote.CACertList[0].Equal(ca) || !gwKey.PublicKey.Equal(c.Local.PrivateKey.Public()) {
			t.Errorf("parsed local %+v remote %+v: not the certificates and key loaded", c.Local, c.Remote)
		}
	}
	// The file path's checks: a certificate file in memory that is no
	// certificate is refused as a file's.
	f.files["vici-creds/ca0.crt"] = []byte("junk")
	doc := "interfaces: [{name: ipsec1, if_id: 1}]\nconnections:\n  - " + f.conns["gw"] + "\n"
	if _, err := config.ParseMem("vici", []byte(doc), f.files); err == nil || !strings.Contains(err.Error(), "remote.cacerts[0]: vici-creds/ca0.crt: no PEM CERTIFICATE block") {
		t.Errorf("junk CA: %v", err)
	}
}

// TestLoadConnPinned: remote.certs pins the peer's certificate: it
// reaches config as certs: (the engine's PeerCerts), without the CAs of
// load-cert (a pinned certificate is its own anchor, as charon's);
// local.cacerts is taken when our certificate chains to one of them,
// and refused by name when it does not.
func TestLoadConnPinned(t *testing.T) {
	f := &fakeLoader{}
	_, sess := serve(t, f, nil)
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ca := selfSigned(t, caKey, true)
	ours, ourKey := issued(t, ca, caKey, "a.test")
	peer, _ := issued(t, ca, caKey, "b.test")
	stranger := selfSigned(t, caKey, false)
	keyDER, _ := x509.MarshalECPrivateKey(ourKey)
	for _, c := range [][]string{
		{"load-key", "type", "ecdsa", "data", string(keyDER)},
		{"load-cert", "type", "X509", "flag", "CA", "data", string(ca.Raw)},
	} {
		if resp, err := call(t, sess, c[0], c[1:]...); err != nil {
			t.Fatalf("%s: %v %v", c[0], resp, err)
		}
	}
	conn := func(localCAs []string) *govici.Message {
		return swanctlConn(t, func(c, _ *govici.Message) {
			l, r := govici.NewMessage(), govici.NewMessage()
			l.Set("auth", "pubkey")
			l.Set("certs", []string{string(ours.Raw)})
			if localCAs != nil {
				l.Set("cacerts", localCAs)
			}
			r.Set("auth", "pubkey")
			r.Set("id", "b.test")
			r.Set("certs", []string{string(peer.Raw)})
			c.Set("local", l)
			c.Set("remote", r)
		})
	}
	if resp, err := sess.Call(context.Background(), "load-conn", conn([]string{string(ca.Raw)})); err != nil {
		t.Fatalf("load-conn: %v %v", resp, err)
	}
	item := f.conns["gw"]
	if want := `remote: {auth: "pubkey", id: "b.test", certs: ["vici-creds/peer0.crt"]}`; !strings.Contains(item, want) {
		t.Fatalf("item %s\nwithout %s", item, want)
	}
	doc := "interfaces: [{name: ipsec1, if_id: 1}]\nconnections:\n  - " + item + "\n"
	cfg, err := config.ParseMem("vici", []byte(doc), f.files)
	if err != nil {
		t.Fatalf("the item does not parse: %v", err)
	}
	ec, err := cfg.EngineConfig("gw", "net")
	if err != nil || len(ec.PeerCerts) != 1 || !ec.PeerCerts[0].Equal(peer) || len(ec.CACerts) != 0 {
		t.Errorf("engine config: %v; pinned %d, CAs %d; want the peer's certificate alone", err, len(ec.PeerCerts), len(ec.CACerts))
	}
	resp, err := sess.Call(context.Background(), "load-conn", conn([]string{string(stranger.Raw)}))
	if err == nil || !strings.Contains(fmt.Sprint(resp.Get("errmsg")), `local.cacerts: our certificate "CN=a.test" does not chain to them`) {
		t.Errorf("local.cacerts of another CA: %v %v", resp, err)
	}
}
