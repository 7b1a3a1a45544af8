package profile

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ipsecd/ipsecd/config"
)

// plistJSON parses a property list with Python's plistlib, as a tool
// other than our writer reads it, and returns it as JSON (data as
// base64). It skips the test without python3.
func plistJSON(t *testing.T, data []byte) map[string]any {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed; scripts/test.sh installs it")
	}
	path := filepath.Join(t.TempDir(), "p.mobileconfig")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	const script = `import base64, json, plistlib, sys
d = plistlib.load(open(sys.argv[1], 'rb'))
print(json.dumps(d, default=lambda b: base64.b64encode(b).decode()))`
	out, err := exec.Command(py, "-c", script, path).Output()
	if err != nil {
		t.Fatalf("plistlib: %v\n%s", err, out)
	}
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

// at walks m by keys (strings) and array indexes (ints).
func at(m any, path ...any) any {
	for _, p := range path {
		switch p := p.(type) {
		case string:
			d, _ := m.(map[string]any)
			m = d[p]
		case int:
			a, _ := m.([]any)
			if p >= len(a) {
				return nil
			}
			m = a[p]
		}
	}
	if n, ok := m.(json.Number); ok {
		return n.String()
	}
	return m
}

// TestApplePlist: Python's plistlib reads each kind of Apple profile back
// with the values of the gateway's config: addresses, identities, the
// first suite Apple can make of the proposals, PFS, DPD and lifetimes,
// the CA's DER, the user's PKCS#12, a PSK with quotes, and a user name
// with XML's special characters.
func TestApplePlist(t *testing.T) {
	p := newPKI(t, t.TempDir())
	c := loadGateway(t, p)
	// A user with XML's special characters: the connection's eap_id.
	evil := `x<y>&'"z@example.net`
	eap := loadGateway(t, p, "eap_id: alice", "eap_id: '"+strings.ReplaceAll(evil, "'", "''")+"'", "ids: [alice]", "ids: ['"+strings.ReplaceAll(evil, "'", "''")+"']")
	vpn := []any{"PayloadContent", 0}
	ikev2 := append(vpn[:2:2], "IKEv2")
	for _, tc := range []struct {
		name string
		c    *config.IKEConfig
		o    Options
		want map[string][]any // value: path
	}{
		{"certificate", &c.IKEConfig, Options{Connection: "rw", User: "b.test", P12: []byte("0 the p12")}, map[string][]any{
			"Configuration":             {"PayloadType"},
			"com.apple.vpn.managed":     append(vpn[:2:2], "PayloadType"),
			"IKEv2":                     append(vpn[:2:2], "VPNType"),
			"192.0.2.1":                 append(ikev2[:3:3], "RemoteAddress"),
			"gw.example.net":            append(ikev2[:3:3], "RemoteIdentifier"),
			"b.test":                    append(ikev2[:3:3], "LocalIdentifier"),
			"Certificate":               append(ikev2[:3:3], "AuthenticationMethod"),
			"Profile Test CA":           append(ikev2[:3:3], "ServerCertificateIssuerCommonName"),
			"High":                      append(ikev2[:3:3], "DeadPeerDetectionRate"), // dpd_delay 30s
			"1":                         append(ikev2[:3:3], "EnablePFS"),             // aes256gcm16-ecp384
			"AES-256-GCM":               append(ikev2[:3:3], "IKESecurityAssociationParameters", "EncryptionAlgorithm"),
			"SHA2-384":                  append(ikev2[:3:3], "IKESecurityAssociationParameters", "IntegrityAlgorithm"),
			"20":                        append(ikev2[:3:3], "IKESecurityAssociationParameters", "DiffieHellmanGroup"),
			"240":                       append(ikev2[:3:3], "IKESecurityAssociationParameters", "LifeTimeInMinutes"),
			"60":                        append(ikev2[:3:3], "ChildSecurityAssociationParameters", "LifeTimeInMinutes"),
			"com.apple.security.pkcs12": {"PayloadContent", 1, "PayloadType"},
			"MCB0aGUgcDEy":              {"PayloadContent", 1, "PayloadContent"},
			"com.apple.security.root":   {"PayloadContent", 2, "PayloadType"},
		}},
		{"psk", &c.IKEConfig, Options{Connection: "psk", User: "b.test"}, map[string][]any{
			"SharedSecret":      append(ikev2[:3:3], "AuthenticationMethod"),
			`it's a "test" psk`: append(ikev2[:3:3], "SharedSecret"),
			"a.test":            append(ikev2[:3:3], "RemoteIdentifier"),
			"AES-256":           append(ikev2[:3:3], "ChildSecurityAssociationParameters", "EncryptionAlgorithm"),
			"SHA2-256":          append(ikev2[:3:3], "ChildSecurityAssociationParameters", "IntegrityAlgorithm"),
			"14":                append(ikev2[:3:3], "ChildSecurityAssociationParameters", "DiffieHellmanGroup"),
			"0":                 append(ikev2[:3:3], "EnablePFS"),
			"None":              append(ikev2[:3:3], "DeadPeerDetectionRate"),
		}},
		{"eap", &eap.IKEConfig, Options{Connection: "eap", User: evil, CA: p.ca}, map[string][]any{
			"None":        append(ikev2[:3:3], "AuthenticationMethod"),
			"1":           append(ikev2[:3:3], "ExtendedAuthEnabled"),
			evil:          append(ikev2[:3:3], "AuthName"),
			"AES-256-GCM": append(ikev2[:3:3], "IKESecurityAssociationParameters", "EncryptionAlgorithm"), // the apple preset's first
			"19":          append(ikev2[:3:3], "IKESecurityAssociationParameters", "DiffieHellmanGroup"),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files, err := Apple(tc.c, tc.o)
			if err != nil {
				t.Fatal(err)
			}
			m := plistJSON(t, files[0].Data)
			for want, path := range tc.want {
				if got := at(m, path...); got != want {
					t.Errorf("%v: got %v, want %q", path, got, want)
				}
			}
			if got := at(m, append(ikev2[:3:3], "LocalIdentifier")...); got != tc.o.User {
				t.Errorf("LocalIdentifier %v, want %q", got, tc.o.User)
			}
			// The CA payload, when the gateway has a certificate, is its
			// CA's DER; the UUIDs are distinct and the same next time.
			payloads := at(m, "PayloadContent").([]any)
			last := payloads[len(payloads)-1].(map[string]any)
			if tc.o.Connection != "psk" {
				if last["PayloadType"] != "com.apple.security.root" || last["PayloadContent"] != b64(p.ca.Raw) {
					t.Errorf("last payload %v, want the CA", last["PayloadType"])
				}
			} else if len(payloads) != 1 {
				t.Errorf("%d payloads with a PSK, want the VPN alone", len(payloads))
			}
			uuids := map[any]bool{at(m, "PayloadUUID"): true}
			for _, pl := range payloads {
				uuids[pl.(map[string]any)["PayloadUUID"]] = true
			}
			if len(uuids) != len(payloads)+1 {
				t.Errorf("PayloadUUIDs %v are not distinct", uuids)
			}
			again, _ := Apple(tc.c, tc.o)
			if !bytes.Equal(again[0].Data, files[0].Data) {
				t.Error("a second profile differs from the first")
			}
		})
	}
}
