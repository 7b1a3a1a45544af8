package ike

import (
	"fmt"
	"strings"
	"testing"
)

func TestKeylogFormats(t *testing.T) {
	ci, cr := pairConfigs(t, []string{"aes256-sha256-x25519"}, []string{"aes256-sha256"})
	ini, _, errI, errR := run(t, ci, cr)
	if errI != nil || errR != nil {
		t.Fatal(errI, errR)
	}
	line, ok := ini.KeylogIKE()
	ispi, rspi := ini.SPIs()
	k := ini.Keys()
	want := fmt.Sprintf(`%016x,%016x,%x,%x,"AES-CBC-256 [RFC3602]",%x,%x,"HMAC_SHA2_256_128 [RFC4868]"`, ispi, rspi, k.EI, k.ER, k.AI, k.AR)
	if !ok || line != want {
		t.Fatalf("got %q, want %q", line, want)
	}
	c := ini.Children()[0]
	esp, ok := c.KeylogESP()
	wantIn := fmt.Sprintf(`"IPv4","192.0.2.2","192.0.2.1","0x%08x","AES-CBC [RFC3602]","0x%x","HMAC-SHA-256-128 [RFC4868]","0x%x"`, c.InSPI, c.In.Enc, c.In.Integ)
	if !ok || len(esp) != 2 || esp[0] != wantIn || !strings.Contains(esp[1], fmt.Sprintf(`"192.0.2.1","192.0.2.2","0x%08x"`, c.OutSPI)) {
		t.Fatalf("got %q, want the inbound line %q first", esp, wantIn)
	}
	ci, cr = pairConfigs(t, []string{"chacha20poly1305-prfsha256-x25519"}, []string{"chacha20poly1305"})
	ini, _, _, _ = run(t, ci, cr)
	if _, ok := ini.KeylogIKE(); ok {
		t.Fatal("a ChaCha20 IKE line, which Wireshark 4.0 cannot use")
	}
	if _, ok := ini.Children()[0].KeylogESP(); ok {
		t.Fatal("a ChaCha20 ESP line, which Wireshark 4.0 cannot use")
	}
}
