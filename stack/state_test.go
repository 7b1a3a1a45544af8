package stack

import (
	"errors"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ipsecd/ipsecd/sa"
	"github.com/ipsecd/ipsecd/seqstate"
)

func stateTestConfig(t *testing.T) Config {
	return Config{
		Underlay:  netip.AddrPortFrom(lo4[0], 0),
		Addresses: []netip.Prefix{netip.MustParsePrefix("192.0.2.1/24")},
	}
}

func stateTestSA(spi uint32) sa.Config {
	return sa.Config{
		Src: lo4[0], Dst: lo4[1], SPI: spi, Dir: sa.DirOut, Mode: sa.ModeTunnel, ESN: true,
		AEAD:  &sa.Algorithm{Name: sa.AlgGCM, Key: []byte("0123456789abcdefsalt")},
		Encap: &sa.Encap{SrcPort: 4500, DstPort: 4500},
	}
}

// TestNewRefusesAEADWithoutState: static AEAD keys need a StateDir, in
// Config.States and in AddState, unless the caller says its keys are
// ephemeral; CBC runs without.
func TestNewRefusesAEADWithoutState(t *testing.T) {
	cfg := stateTestConfig(t)
	cfg.States = []sa.Config{stateTestSA(0x1001)}
	if n, err := New(cfg); err == nil {
		n.Close()
		t.Fatal("New took a GCM key without StateDir or EphemeralKeys")
	} else if !errors.Is(err, seqstate.ErrNoState) || !strings.Contains(err.Error(), "EphemeralKeys") || !strings.Contains(err.Error(), "States[0]") {
		t.Errorf("New: %v", err)
	}
	cfg.States = nil
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if err := n.AddState(stateTestSA(0x1001)); !errors.Is(err, seqstate.ErrNoState) {
		t.Errorf("AddState of a GCM key without state: %v", err)
	}
	cbc := stateTestSA(0x1002)
	cbc.AEAD = nil
	cbc.Enc = &sa.Algorithm{Name: sa.AlgCBC, Key: make([]byte, 16)}
	cbc.Auth = &sa.Algorithm{Name: sa.AlgHMACSHA2, Key: make([]byte, 32)}
	if err := n.AddState(cbc); err != nil {
		t.Errorf("AddState of CBC without state: %v", err)
	}
	cfg.EphemeralKeys = true
	cfg.States = []sa.Config{stateTestSA(0x1001)}
	n2, err := New(cfg)
	if err != nil {
		t.Fatalf("New with EphemeralKeys: %v", err)
	}
	n2.Close()
}

// TestStateDirRestart: a Net made again with the same StateDir continues
// a key's sequence numbers above the previous reservation, for states of
// Config and of AddState.
func TestStateDirRestart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	for run := range 2 {
		cfg := stateTestConfig(t)
		cfg.StateDir = dir
		cfg.States = []sa.Config{stateTestSA(0x1001)}
		n, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		added := stateTestSA(0x1002)
		added.AEAD.Key = []byte("fedcba9876543210tlas")
		if err := n.AddState(added); err != nil {
			t.Fatal(err)
		}
		for _, s := range n.SAD().States() {
			if got, want := s.Stats().Seq, uint64(run*seqstate.ESNBlock); got != want {
				t.Errorf("run %d: %v continues after %d, want %d", run, s, got, want)
			}
			sealInner(t, s)
		}
		n.Close()
	}
}

// sealInner seals one small inner IPv4 packet with s: the first batch of
// an outbound SA writes its first reservation.
func sealInner(t *testing.T, s *sa.SA) {
	t.Helper()
	inner := make([]byte, 40)
	inner[0], inner[3], inner[8], inner[9] = 0x45, 40, 64, 17
	buf := make([]byte, sa.Headroom+len(inner)+sa.Tailroom)
	copy(buf[sa.Headroom:], inner)
	ps := []sa.Packet{{Buf: buf, Off: sa.Headroom, Len: len(inner)}}
	s.SealBatch(ps)
	if ps[0].Drop != sa.CounterNone {
		t.Fatalf("seal: %v", ps[0].Drop)
	}
}
