package dh

import (
	"bufio"
	"bytes"
	"crypto/mlkem"
	"crypto/mlkem/mlkemtest"
	"errors"
	"os"
	"strings"
	"testing"
)

// readVector reads "name = hex" lines of a file under testdata.
func readVector(t *testing.T, file string) map[string][]byte {
	t.Helper()
	f, err := os.Open("testdata/" + file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	v := map[string][]byte{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<16)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " = ")
		if ok && !strings.HasPrefix(name, "#") {
			v[name] = unhex(val)
		}
	}
	return v
}

// TestMLKEMVector runs the responder's side of an ML-KEM-768 exchange
// on a published vector (testdata/mlkem768-encap.txt: NIST's ACVP
// ML-KEM-encapDecap-FIPS203, tcId 26): the initiator's encapsulation key
// in, the ciphertext and shared key out, with the vector's randomness
// injected through crypto/mlkem/mlkemtest.
func TestMLKEMVector(t *testing.T) {
	v := readVector(t, "mlkem768-encap.txt")
	p, err := New(MLKEM768, nil)
	if err != nil {
		t.Fatal(err)
	}
	p.kem.encapsulate768 = func(ek *mlkem.EncapsulationKey768) ([]byte, []byte, error) {
		return mlkemtest.Encapsulate768(ek, v["m"])
	}
	k, err := p.Shared(v["ek"])
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(k, v["k"]) {
		t.Errorf("shared key: got %x, want %x", k, v["k"])
	}
	if !bytes.Equal(p.Public(), v["c"]) {
		t.Errorf("ciphertext: got %x..., want %x...", p.Public()[:16], v["c"][:16])
	}
}

// TestKEMExchange runs both roles of each ML-KEM through the calls the
// engine makes (New, Public, Shared), and checks the KE data sizes of
// FIPS 203 Table 3.
func TestKEMExchange(t *testing.T) {
	for _, tt := range []struct {
		name   string
		group  uint16
		ek, ct int
	}{
		{"mlkem768", MLKEM768, 1184, 1088},
		{"mlkem1024", MLKEM1024, 1568, 1568},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if !Supported(tt.group) || !IsKEM(tt.group) {
				t.Fatal("not supported as a KEM")
			}
			i, _ := New(tt.group, nil)
			r, _ := New(tt.group, nil)
			ek := i.Public()
			if len(ek) != tt.ek {
				t.Fatalf("encapsulation key: %d bytes, want %d", len(ek), tt.ek)
			}
			if !bytes.Equal(i.Public(), ek) {
				t.Fatal("a second Public gave another key")
			}
			kr, err := r.Shared(ek)
			if err != nil {
				t.Fatal(err)
			}
			ct := r.Public()
			if len(ct) != tt.ct {
				t.Fatalf("ciphertext: %d bytes, want %d", len(ct), tt.ct)
			}
			ki, err := i.Shared(ct)
			if err != nil || !bytes.Equal(ki, kr) || len(ki) != 32 {
				t.Fatalf("initiator's key %x (%v), responder's %x", ki, err, kr)
			}
			if _, err := i.Shared(ct); !errors.Is(err, ErrRole) {
				t.Errorf("a second decapsulation: got %v, want ErrRole", err)
			}
			if _, err := r.Shared(ek); !errors.Is(err, ErrRole) {
				t.Errorf("a second encapsulation: got %v, want ErrRole", err)
			}
			r.Clear()
			if r.Public() != nil {
				t.Error("the ciphertext outlived Clear")
			}
			if _, err := i.Shared(ct); !errors.Is(err, ErrRole) && !errors.Is(err, ErrCleared) {
				t.Errorf("after use: %v", err)
			}
		})
	}
}

// TestKEMBadKE: KE data of the wrong length, or an encapsulation key
// whose coefficients are not reduced mod q, is ErrBadPublic (INVALID_SYNTAX
// in the exchange), never a panic.
func TestKEMBadKE(t *testing.T) {
	for _, g := range []uint16{MLKEM768, MLKEM1024} {
		i, _ := New(g, nil)
		ek := i.Public()
		ct := func() []byte { r, _ := New(g, nil); r.Shared(ek); return r.Public() }()
		bad := bytes.Repeat([]byte{0xff}, len(ek)) // every coefficient 4095 > q
		for _, tt := range []struct {
			name      string
			initiator bool
			data      []byte
		}{
			{"empty key", false, nil},
			{"truncated key", false, ek[:len(ek)-1]},
			{"oversized key", false, append(append([]byte(nil), ek...), 0)},
			{"unreduced key", false, bad},
			{"truncated ciphertext", true, ct[:len(ct)-1]},
			{"oversized ciphertext", true, append(append([]byte(nil), ct...), 0)},
		} {
			p, _ := New(g, nil)
			if tt.initiator {
				p.Public()
			}
			if _, err := p.Shared(tt.data); !errors.Is(err, ErrBadPublic) {
				t.Errorf("group %d, %s: got %v, want ErrBadPublic", g, tt.name, err)
			}
		}
	}
	if Supported(MLKEM512) {
		t.Error("ML-KEM-512 claims support without an implementation")
	}
}

// FuzzShared feeds arbitrary KE data to each group, in both roles of a
// KEM: an error or a shared secret, never a panic.
func FuzzShared(f *testing.F) {
	i, _ := New(MLKEM768, nil)
	f.Add(uint8(0), i.Public())
	f.Add(uint8(1), make([]byte, mlkem768CiphertextSize))
	f.Add(uint8(2), make([]byte, 32))
	groups := []uint16{MLKEM768, MLKEM1024, X25519, ECP256, ECP384}
	f.Fuzz(func(t *testing.T, sel uint8, data []byte) {
		g := groups[int(sel>>1)%len(groups)]
		p, err := New(g, nil)
		if err != nil {
			t.Fatal(err)
		}
		if sel&1 == 1 {
			p.Public() // the initiator's role
		}
		if s, err := p.Shared(data); err == nil && len(s) == 0 {
			t.Fatal("no error and no secret")
		}
	})
}
