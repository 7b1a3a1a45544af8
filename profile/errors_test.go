package profile

import (
	"crypto/x509"
	"strings"
	"testing"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/ike"
)

// TestRefusals: what a client cannot express, and what the config does
// not say, is an error naming it, for each kind of profile.
func TestRefusals(t *testing.T) {
	p := newPKI(t, t.TempDir())
	c0 := loadGateway(t, p)
	userCert, err := x509.ParseCertificate(p.userCertDER) // clientAuth only
	if err != nil {
		t.Fatal(err)
	}
	type writer func(*config.IKEConfig, Options) ([]File, error)
	for _, tc := range []struct {
		name   string
		write  writer
		edits  []string
		change func(*config.IKEConfig)
		o      Options
		want   string
	}{
		{"unknown connection", Swanctl, nil, nil, Options{Connection: "nope", User: "b.test"},
			`no connection "nope" in the config (connections: rw, psk, eap)`},
		{"user not the eap_id", Apple, nil, nil, Options{Connection: "eap", User: "bob"},
			"connection eap: remote.eap_id is alice, which user bob is not"},
		{"user not the remote id", Swanctl, nil, nil, Options{Connection: "psk", User: "c.test"},
			"connection psk: remote.id is b.test, which user c.test is not"},
		{"no address", Apple, nil, func(c *config.IKEConfig) {
			c.Connections[0].LocalAddrs, c.Connections[0].Local.Identity = nil, ike.MustParseIdentity("gw@example.net")
		}, Options{Connection: "rw", User: "b.test", P12: []byte("0")},
			"connection rw: no address that clients reach the gateway at: set local_addrs, a local.id that is a DNS name, or --address"},
		{"bad address", Windows, nil, nil, Options{Connection: "rw", User: "b.test", Address: "a b"},
			"connection rw: address a b is no host name or IP address"},
		{"windows x25519 only", Windows, []string{"proposals: [aes256gcm16-prfsha384-ecp384, aes256-sha256-x25519]", "proposals: [aes256-sha512-x25519, chacha20poly1305-prfsha256-ecp256]"}, nil, Options{Connection: "rw", User: "b.test"},
			"windows: connection rw: Windows' IKEv2 client cannot express any of proposals: proposals[0] aes256-sha512-x25519-prfsha512: no integrity algorithm it knows with the PRF of its hash (it lacks sha512, x25519, prfsha512); proposals[1] chacha20poly1305-prfsha256-ecp256: no cipher it knows (it lacks chacha20poly1305)"},
		{"windows chacha ESP", Windows, []string{"esp_proposals: [aes256gcm16-ecp384, aes128-sha256]", "esp_proposals: [chacha20poly1305-x25519]"}, nil, Options{Connection: "rw", User: "b.test"},
			"windows: connection rw: Windows' IKEv2 client cannot express any of children[net].esp_proposals: children[net].esp_proposals[0] chacha20poly1305-x25519-noesn: no cipher it knows (it lacks chacha20poly1305, x25519)"},
		{"windows psk", Windows, nil, nil, Options{Connection: "psk", User: "b.test"},
			"windows: connection psk: local.auth psk: Windows' IKEv2 client checks the gateway's certificate (pubkey); it takes no pre-shared key"},
		{"windows eap-md5", Windows, nil, func(c *config.IKEConfig) { c.Connections[0].Remote.Auth = "eap-md5" }, Options{Connection: "rw", User: "b.test", Address: "gw.example.net"},
			"windows: connection rw: remote.auth eap-md5 is nothing Windows' IKEv2 client does"},
		{"windows to an address the certificate lacks", Windows, nil, nil, Options{Connection: "rw", User: "b.test"},
			"windows: connection rw: Windows connects to 192.0.2.1, which the gateway's certificate names neither as a DNS subjectAltName nor as its CN (it has gw.example.net, a.test, CN=gw.example.net): give --address one of those, or issue the certificate with DNS:192.0.2.1"},
		{"windows without serverAuth", Windows, nil, func(c *config.IKEConfig) { c.Connections[0].Local.Certs = []*x509.Certificate{userCert} }, Options{Connection: "rw", User: "b.test"},
			"windows: connection rw: the gateway's certificate (CN=b.test) has no serverAuth extended key usage, without which Windows' client refuses it"},
		{"apple id not in the SAN", Apple, nil, func(c *config.IKEConfig) {
			c.Connections[0].Local.Identity = ike.MustParseIdentity("fqdn:other.example")
		}, Options{Connection: "rw", User: "b.test", P12: []byte("0")},
			"apple: connection rw: the gateway's identity other.example is not a subjectAltName of its certificate, which Apple's client requires (a CN is not enough)"},
		{"apple with a PEM p12", Apple, nil, nil, Options{Connection: "rw", User: "b.test", P12: []byte("-----BEGIN CERTIFICATE-----")},
			"apple: connection rw: --p12: not a PKCS#12 file (DER); openssl pkcs12 -export -legacy makes one Apple's client reads"},
		{"apple without p12", Apple, nil, nil, Options{Connection: "rw", User: "b.test"},
			"apple: connection rw: remote.auth pubkey: the user authenticates with a certificate; give the user's certificate and key as PKCS#12 (--p12 FILE)"},
		{"apple DN", Apple, []string{"id: gw.example.net", `id: "CN=gw.example.net"`}, nil, Options{Connection: "rw", User: "b.test", P12: []byte("0")},
			"apple: connection rw: local.id: the gateway's identity CN=gw.example.net is no DNS name, email or IP address"},
		{"apple additional KE", Apple, []string{"proposals: [aes256gcm16-prfsha384-ecp384, aes256-sha256-x25519]", "proposals: [aes256-sha256-x25519-ke1_mlkem768]"}, nil, Options{Connection: "rw", User: "b.test", P12: []byte("0")},
			"ke1_mlkem768 (an additional key exchange)"},
		{"apple binary psk", Apple, nil, func(c *config.IKEConfig) { c.Connections[1].PSK = config.Key{0, 1, 2} }, Options{Connection: "psk", User: "b.test"},
			"apple: connection psk: the pre-shared key is not text, and Apple's SharedSecret is"},
		{"strongswan odd child name", Swanctl, nil, func(c *config.IKEConfig) { c.Connections[0].Children[0].Name = "a b" }, Options{Connection: "rw", User: "b.test"},
			`"a b" is no name swanctl.conf takes as a section`},
		{"gateway CA unknown", Swanctl, nil, func(c *config.IKEConfig) { c.Connections[0].Remote.CACertList = nil }, Options{Connection: "rw", User: "b.test"},
			"connection rw: the issuer of local.cert (CN=Profile Test CA,O=ipsecd) is in neither local.cert's file nor remote.cacerts; clients need it to trust the gateway: append it to local.cert's file, or give it with --ca FILE"},
		{"--ca not the issuer", Swanctl, nil, nil, Options{Connection: "eap", User: "alice", CA: c0.Connections[0].Local.Certs[0]},
			"connection eap: the CA given (CN=gw.example.net) did not issue local.cert (issuer CN=Profile Test CA,O=ipsecd)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := loadGateway(t, p, tc.edits...)
			if tc.change != nil {
				tc.change(&c.IKEConfig)
			}
			_, err := tc.write(&c.IKEConfig, tc.o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v\nwant an error with %s", err, tc.want)
			}
		})
	}
}
