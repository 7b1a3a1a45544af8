package daemon

import (
	"bytes"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"

	"github.com/ipsecd/ipsecd/config"
	ipnode "github.com/ipsecd/ipsecd/node"
	"github.com/ipsecd/ipsecd/sa"
	"github.com/ipsecd/ipsecd/sa/satest"
	"github.com/ipsecd/ipsecd/seqstate"
)

// unusableStateDir returns a state_dir that cannot be created, for root
// too: a path under a regular file.
func unusableStateDir(t *testing.T) string {
	f := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(f, "state")
}

// TestStartRefusesAEADWithoutState: where state_dir cannot be used,
// `ipsecd run` refuses static AES-GCM keys with FILE:LINE, naming
// state_dir and why, before it makes any interface or socket.
func TestStartRefusesAEADWithoutState(t *testing.T) {
	text := "state_dir: " + unusableStateDir(t) + "\n" +
		"interfaces:\n  - {name: ipsec1, if_id: 1}\nstates:\n" +
		"  - {src: 192.0.2.1, dst: 192.0.2.2, spi: 0x1001, dir: out, mode: tunnel, if_id: 1, encap: {type: espinudp}, aead: {name: \"rfc4106(gcm(aes))\", key: \"0x" + key1 + "\"}}\n"
	cfg, err := config.Parse("test.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	log := logrus.New()
	var out bytes.Buffer
	log.SetOutput(&out)
	n, err := startNode(cfg, log)
	if err == nil {
		n.stop()
		t.Fatal("started with a GCM key and no usable state_dir")
	}
	msg := err.Error()
	for _, want := range []string{"test.yaml:5: states[0]", "state_dir", "not a directory", "start again at 1"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error does not say %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, key1) {
		t.Errorf("error holds the key: %s", msg)
	}
}

// TestCBCWithoutStateWarns: a CBC SA runs without a state directory, with
// a warning.
func TestCBCWithoutStateWarns(t *testing.T) {
	var out bytes.Buffer
	log := logrus.New()
	log.SetOutput(&out)
	n := testNode(t, log, false, ipnode.Config{StateDir: unusableStateDir(t)})
	cfg, err := config.Parse("test.yaml", []byte("interfaces:\n  - {name: ipsec1, if_id: 1}\nstates:\n"+
		"  - {src: 192.0.2.1, dst: 192.0.2.2, spi: 0x1001, dir: out, mode: tunnel, if_id: 1, encap: {type: espinudp}, enc: {name: \"cbc(aes)\", key: \"0x"+strings.Repeat("11", 16)+"\"},"+
		" auth: {name: \"hmac(sha256)\", key: \"0x"+strings.Repeat("22", 32)+"\"}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := n.buildStates(cfg)
	if err != nil {
		t.Fatalf("CBC without state_dir: %v", err)
	}
	b.Discard()
	if !strings.Contains(out.String(), "state_dir cannot be used") {
		t.Errorf("no warning:\n%s", out.String())
	}
}

// TestStateAddReserves: an SA added over the control socket reserves its
// sequence numbers too: after a restart with the same state_dir, the same
// key (even under another SPI) continues above the reservation.
func TestStateAddReserves(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	c := sa.Config{
		Src: netip.MustParseAddr("192.0.2.1"), Dst: netip.MustParseAddr("192.0.2.2"), SPI: 0x1001, Dir: sa.DirOut,
		Mode: sa.ModeTunnel, IfID: 1, ESN: true, AEAD: &sa.Algorithm{Name: sa.AlgGCM, Key: []byte(key1[:20])}, Encap: &sa.Encap{SrcPort: 4500, DstPort: 4500},
	}
	for run, spi := range []uint32{0x1001, 0x1002} {
		log := logrus.New()
		log.SetOutput(io.Discard)
		n := testNode(t, log, true, ipnode.Config{StateDir: dir})
		addInterface(t, n, "ipsec1", 1, 1)
		cc := c
		cc.SPI = spi
		cc.AEAD = &sa.Algorithm{Name: sa.AlgGCM, Key: []byte(key1[:20])}
		if err := (*backend)(n).AddState(cc); err != nil {
			t.Fatal(err)
		}
		s := n.sad.States()[0]
		if got, want := s.Stats().Seq, uint64(run*seqstate.ESNBlock); got != want {
			t.Errorf("run %d: state add's SA continues after %d, want %d", run, got, want)
		}
		// The first batch of an outbound SA writes its first
		// reservation.
		satest.Seal(t, s, satest.IPv4UDP(netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"), 40))
		n.stop()
		n.sad.Replace(nil, nil)
	}
}
