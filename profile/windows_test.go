package profile

import (
	"bytes"
	"encoding/pem"
	"flag"
	"os"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := "testdata/" + name
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (go test -update rewrites it):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// TestWindowsGolden: the PowerShell script's lines, line by line, for a
// certificate connection (the CA imported; a split tunnel's route; the
// first suite Windows can make: GCMAES256, SHA384 as PRF, ECP384, PFS
// ECP384), an EAP connection whose first proposal Windows cannot make
// (x25519, chacha20poly1305: the second is taken) and a full tunnel.
// The CA's PEM, fresh each run, is replaced by CA-PEM.
func TestWindowsGolden(t *testing.T) {
	p := newPKI(t, t.TempDir())
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.ca.Raw})
	for _, tc := range []struct {
		name  string
		edits []string
		eap   bool
	}{
		{"windows-cert.ps1", nil, false},
		{"windows-eap.ps1", []string{
			"proposals: [aes256gcm16-prfsha384-ecp384, aes256-sha256-x25519]", "proposals: [aes256-sha256-x25519, aes128-aes256-sha512-sha256-ecp256-modp2048]",
			"esp_proposals: [aes256gcm16-ecp384, aes128-sha256]", "esp_proposals: [chacha20poly1305, aes128-sha256]",
			"local_ts: [198.51.100.0/24], remote_ts: [dynamic]", "local_ts: [0.0.0.0/0], remote_ts: [dynamic]",
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := loadGateway(t, p, tc.edits...)
			if tc.eap {
				c.Connections[0].Remote.Auth = "eap-mschapv2"
			}
			files, err := Windows(&c.IKEConfig, Options{Connection: "rw", User: "o'brien@example.net", Address: "gw.example.net"})
			if err != nil {
				t.Fatal(err)
			}
			golden(t, tc.name, bytes.Replace(files[0].Data, caPEM, []byte("CA-PEM\n"), 1))
		})
	}
}

// TestWindowsEAPTLS: an EAP-TLS connection takes New-EapConfiguration's
// TLS XML.
func TestWindowsEAPTLS(t *testing.T) {
	p := newPKI(t, t.TempDir())
	c := loadGateway(t, p)
	c.Connections[0].Remote.Auth = "eap-tls"
	files, err := Windows(&c.IKEConfig, Options{Connection: "rw", User: "b.test", Address: "a.test"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []byte("-AuthenticationMethod Eap -EapConfigXmlStream (New-EapConfiguration -Tls -UserCertificate).EapConfigXmlStream"); !bytes.Contains(files[0].Data, want) {
		t.Errorf("got\n%s\nwant a line with %s", files[0].Data, want)
	}
}

// TestPSQuote: every quote PowerShell ends a literal string with is
// doubled.
func TestPSQuote(t *testing.T) {
	for in, want := range map[string]string{
		"rw": "'rw'", "o'brien": "'o''brien'", "a\u2019b": "'a\u2019\u2019b'", `"$x"`: `'"$x"'`,
	} {
		if got := psQuote(in); got != want {
			t.Errorf("psQuote(%q) = %q, want %q", in, got, want)
		}
	}
}
