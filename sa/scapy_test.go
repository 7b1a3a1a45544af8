package sa

import (
	"bytes"
	"crypto/hmac"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/netip"
	"os/exec"
	"testing"
)

// scapyPython is the interpreter that has Debian's python3-scapy.
const scapyPython = "/usr/bin/python3"

// TestScapyIntegrity runs every HMAC of the table with aes-cbc against
// scapy's ESP (testdata/scapy_esp.py), both ways: scapy opens and
// verifies what ipsecd sealed, ipsecd opens what scapy sealed; each ICV
// is the HMAC of SPI..next header truncated to the table's length (as
// crypto/hmac computes it here), and a changed ICV byte is refused.
func TestScapyIntegrity(t *testing.T) {
	if out, err := exec.Command(scapyPython, "-c", "import scapy.layers.ipsec").CombinedOutput(); err != nil {
		t.Skipf("scapy not available in %s (Debian python3-scapy, installed by scripts/test.sh): %v\n%s", scapyPython, err, out)
	}
	for _, tt := range []struct {
		auth, scapy string
		encKey      int
		icv         int
	}{
		{AlgHMACSHA1, "HMAC-SHA1-96", 16, 12},
		{AlgHMACSHA1, "HMAC-SHA1-96", 24, 12},
		{AlgHMACSHA2, "SHA2-256-128", 16, 16},
		{AlgHMACSHA384, "SHA2-384-192", 32, 24},
		{AlgHMACSHA512, "SHA2-512-256", 32, 32},
		{AlgHMACSHA512, "SHA2-512-256", 24, 32},
	} {
		info, _ := LookupAlgorithm(tt.auth)
		enc, auth := seqKey(tt.encKey, 0x40), seqKey(info.KeyBytes[0], 0x80)
		t.Run(fmt.Sprintf("aes%d-%s", 8*tt.encKey, tt.auth), func(t *testing.T) {
			c := Config{Src: netip.MustParseAddr("203.0.113.1"), Dst: netip.MustParseAddr("203.0.113.2"),
				SPI: 0x4242, Dir: DirOut, Mode: ModeTunnel, ReplayWindow: 64,
				Enc: &Algorithm{Name: AlgCBC, Key: enc}, Auth: &Algorithm{Name: tt.auth, Key: auth}}
			out, err := New(c, nil)
			if err != nil {
				t.Fatal(err)
			}
			c.Dir = DirIn
			in, err := New(c, nil)
			if err != nil {
				t.Fatal(err)
			}
			var inners, ours []string
			for _, size := range []int{0, 1, 100, 1372} {
				inner := ipv4Packet(size)
				inners = append(inners, hex.EncodeToString(inner))
				p := sealOne(t, out, inner)
				e := p.Data()
				if want := 8 + 16 + (len(inner)+2+15)/16*16 + tt.icv; len(e) != want {
					t.Errorf("sealed %d bytes of cleartext into %d bytes, want %d (ICV %d)", len(inner), len(e), want, tt.icv)
				}
				full := hmac.New(info.hash, auth)
				full.Write(e[:len(e)-tt.icv])
				if sum := full.Sum(nil); !bytes.Equal(e[len(e)-tt.icv:], sum[:tt.icv]) {
					t.Errorf("ICV %x, want the first %d bytes of the HMAC %x", e[len(e)-tt.icv:], tt.icv, sum)
				}
				ours = append(ours, hex.EncodeToString(e))
			}
			req, _ := json.Marshal(map[string]any{
				"crypt_algo": "AES-CBC", "crypt_key": hex.EncodeToString(enc),
				"auth_algo": tt.scapy, "auth_key": hex.EncodeToString(auth),
				"spi": c.SPI, "src": c.Src.String(), "dst": c.Dst.String(),
				"open": ours, "seal": inners, "seq": 1, "iv": "000102030405060708090a0b0c0d0e0f",
			})
			cmd := exec.Command(scapyPython, "testdata/scapy_esp.py")
			cmd.Stdin = bytes.NewReader(req)
			stdout, err := cmd.Output()
			if err != nil {
				t.Fatalf("scapy: %v\n%s", err, err.(*exec.ExitError).Stderr)
			}
			var res struct {
				Opened, Sealed []string
				ICVSize        int `json:"icv_size"`
			}
			if err := json.Unmarshal(stdout, &res); err != nil {
				t.Fatalf("scapy's answer %q: %v", stdout, err)
			}
			if res.ICVSize != tt.icv || len(res.Opened) != len(inners) || len(res.Sealed) != len(inners) {
				t.Fatalf("scapy: ICV %d bytes, opened %d, sealed %d; want %d, %d, %d", res.ICVSize, len(res.Opened), len(res.Sealed), tt.icv, len(inners), len(inners))
			}
			for i := range inners {
				if res.Opened[i] != inners[i] {
					t.Errorf("packet %d: scapy opened %s, want %s", i, res.Opened[i], inners[i])
				}
				wire, _ := hex.DecodeString(res.Sealed[i])
				p := openOne(in, Packet{Buf: wire, Len: len(wire)})
				if p.Drop != CounterNone || hex.EncodeToString(p.Data()) != inners[i] {
					t.Errorf("packet %d sealed by scapy: drop %v, opened %x, want %s", i, p.Drop, p.Data(), inners[i])
				}
			}
			// A changed ICV byte (the last the truncation keeps) fails.
			wire, _ := hex.DecodeString(res.Sealed[0])
			wire[len(wire)-1] ^= 1
			in2, _ := New(c, nil)
			if p := openOne(in2, Packet{Buf: wire, Len: len(wire)}); p.Drop != XfrmInStateProtoError {
				t.Errorf("changed ICV: drop %v, want %v", p.Drop, XfrmInStateProtoError)
			}
		})
	}
}
