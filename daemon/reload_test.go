package daemon

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"

	"github.com/ipsecd/ipsecd/config"
	ipnode "github.com/ipsecd/ipsecd/node"
	"github.com/ipsecd/ipsecd/sa"
)

// reloadState is one state of reloadConfig.
type reloadState struct {
	spi   int
	dir   string
	key   string // 20 bytes of hex, without 0x
	extra string // more keys of the state, e.g. "lifetime: {hard_packets: 9}"
}

// reloadConfig is a config with one interface and states, parsed.
func reloadConfig(t *testing.T, states ...reloadState) *config.Config {
	t.Helper()
	var sb strings.Builder
	sb.WriteString("interfaces:\n  - {name: ipsec1, if_id: 1}\nstates:\n")
	for _, s := range states {
		src, dst := "192.0.2.1", "192.0.2.2"
		if s.dir == "in" {
			src, dst = dst, src
		}
		fmt.Fprintf(&sb, "  - {src: %s, dst: %s, spi: 0x%x, dir: %s, mode: tunnel, if_id: 1, aead: {name: \"rfc4106(gcm(aes))\", key: \"0x%s\"}, encap: {type: espinudp}", src, dst, s.spi, s.dir, s.key)
		if s.extra != "" {
			sb.WriteString(", " + s.extra)
		}
		sb.WriteString("}\n")
	}
	cfg, err := config.Parse("test.yaml", []byte(sb.String()))
	if err != nil {
		t.Fatalf("config:\n%s\n%v", sb.String(), err)
	}
	return cfg
}

const (
	key1 = "0102030405060708090a0b0c0d0e0f1011121314"
	key2 = "a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4"
)

// reloadNode is a node without an underlay or interfaces: what building
// and syncing the file's SAs needs.
func reloadNode(t *testing.T) *Daemon {
	t.Helper()
	log := logrus.New()
	log.SetOutput(io.Discard)
	return testNode(t, log, false, ipnode.Config{EphemeralKeys: true})
}

// load builds cfg's SAs and makes them the file's, as a reload does.
func (n *Daemon) load(t *testing.T, cfg *config.Config) []*sa.SA {
	t.Helper()
	b, err := n.buildStates(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.core.Sync(b, cfg.Policies); err != nil {
		t.Fatal(err)
	}
	return b.States
}

// TestBuildStatesKeepsRunningSAs: a reload keeps the running SA objects
// whose config did not change, so their sequence numbers survive.
func TestBuildStatesKeepsRunningSAs(t *testing.T) {
	n := reloadNode(t)
	first := n.load(t, reloadConfig(t, reloadState{0x1001, "out", key1, ""}, reloadState{0x2001, "in", key2, ""}))
	next := n.load(t, reloadConfig(t, reloadState{0x1001, "out", key1, ""}, reloadState{0x2001, "in", key2, ""}, reloadState{0x2002, "in", key3, ""}))
	if len(next) != 3 || next[0] != first[0] || next[1] != first[1] {
		t.Errorf("reload gave %v, want the running %v kept first, then the new SA", next, first)
	}
}

// TestBuildStatesRefusesInPlaceChange: a file that gives a running SPI
// another key, or any other change, is refused with the state's line and
// field, and a message that asks for a new SPI and holds no key.
func TestBuildStatesRefusesInPlaceChange(t *testing.T) {
	n := reloadNode(t)
	n.load(t, reloadConfig(t, reloadState{0x1001, "out", key1, ""}, reloadState{0x2001, "in", key2, ""}))
	tests := []struct {
		name      string
		states    []reloadState
		wantField string
		wantLine  int
	}{
		{"new key on the out SA", []reloadState{{0x1001, "out", key3, ""}, {0x2001, "in", key2, ""}}, "states[0].aead.key", 4},
		{"new key on the in SA", []reloadState{{0x1001, "out", key1, ""}, {0x2001, "in", key3, ""}}, "states[1].aead.key", 5},
		{"new replay window", []reloadState{{0x1001, "out", key1, ""}, {0x2001, "in", key2, "replay_window: 128"}}, "states[1].replay_window", 5},
		{"ESN switched on", []reloadState{{0x1001, "out", key1, ""}, {0x2001, "in", key2, "esn: true"}}, "states[1].esn", 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			states, err := n.buildStates(reloadConfig(t, tt.states...))
			var list config.ErrorList
			if !errors.As(err, &list) || len(list) != 1 {
				t.Fatalf("got states %v, error %v; want one config error", states, err)
			}
			e := list[0]
			if e.File != "test.yaml" || e.Line != tt.wantLine || e.Field != tt.wantField {
				t.Errorf("error at %s:%d field %q, want test.yaml:%d field %q", e.File, e.Line, e.Field, tt.wantLine, tt.wantField)
			}
			if !strings.Contains(e.Msg, "new SPI") || !strings.Contains(e.Msg, "spi 0x") {
				t.Errorf("message %q does not name the SA and ask for a new SPI", e.Msg)
			}
			if strings.Contains(e.Msg, key1) || strings.Contains(e.Msg, key2) || strings.Contains(e.Msg, key3) {
				t.Errorf("message %q holds key material", e.Msg)
			}
		})
	}
}

// TestReloadChangesLifetimeInPlace: a reload that gives a running SA new
// limits changes them in place (as state update does), keeping the SA,
// its sequence number and counters, and counts it as updated.
func TestReloadChangesLifetimeInPlace(t *testing.T) {
	n := reloadNode(t)
	first := n.load(t, reloadConfig(t, reloadState{0x1001, "out", key1, ""}))
	b, err := n.buildStates(reloadConfig(t, reloadState{0x1001, "out", key1, "lifetime: {hard_packets: 9}"}))
	if err != nil {
		t.Fatal(err)
	}
	ch, err := n.core.Sync(b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b.States[0] != first[0] || ch.StatesKept != 1 || ch.StatesUpdated != 1 {
		t.Errorf("kept the SA: %v, change %+v; want the same SA, kept 1, updated 1", b.States[0] == first[0], ch)
	}
	if got := first[0].Lifetime(); got != (sa.Lifetime{HardPackets: 9}) {
		t.Errorf("running SA's lifetime %+v, want hard_packets 9", got)
	}
}

// TestBuildStatesNewOutSAWins: an outbound SA a reload adds seals from
// then on even when the file lists it before the running one, as the
// control socket's newest SA does; a later reload that adds nothing keeps
// that choice.
func TestBuildStatesNewOutSAWins(t *testing.T) {
	n := reloadNode(t)
	sad := n.sad
	load := func(_ []*sa.SA, states ...reloadState) []*sa.SA {
		t.Helper()
		return n.load(t, reloadConfig(t, states...))
	}
	// An IPv4 header from 198.51.100.1 to 203.0.113.1.
	pkt := []byte{0x45, 0, 0, 20, 0, 0, 0, 0, 64, 17, 0, 0, 198, 51, 100, 1, 203, 0, 113, 1}
	seals := func() uint32 {
		t.Helper()
		s, c := sad.LookupOut(1, pkt)
		if s == nil {
			t.Fatalf("no outbound SA: %v", c)
		}
		return s.SPI()
	}

	old := load(nil, reloadState{0x1001, "out", key1, ""})
	old = load(old, reloadState{0x1002, "out", key2, ""}, reloadState{0x1001, "out", key1, ""})
	if got := seals(); got != 0x1002 {
		t.Errorf("after the reload that added 0x1002 (listed first), SPI 0x%x seals, want 0x1002", got)
	}
	load(old, reloadState{0x1001, "out", key1, ""}, reloadState{0x1002, "out", key2, ""})
	if got := seals(); got != 0x1002 {
		t.Errorf("after a reload that only reordered the file, SPI 0x%x seals, want 0x1002", got)
	}
}

// TestBuildStatesRefusesKeyReuse: a reload may not start an SA with key
// material that an SA of either direction had, running or removed: its
// sequence numbers, the AEADs' nonces, would start again at 1.
func TestBuildStatesRefusesKeyReuse(t *testing.T) {
	n := reloadNode(t)
	apply := func(states ...reloadState) error {
		t.Helper()
		cfg := reloadConfig(t, states...)
		b, err := n.buildStates(cfg)
		if err == nil {
			_, err = n.core.Sync(b, cfg.Policies)
		}
		return err
	}
	if err := apply(reloadState{0x1001, "out", key1, ""}, reloadState{0x2001, "in", key2, ""}); err != nil {
		t.Fatal(err)
	}
	// A rotation: 0x1001 goes, 0x1002 comes with a new key.
	if err := apply(reloadState{0x1002, "out", key3, ""}, reloadState{0x2001, "in", key2, ""}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		states  []reloadState
		wantErr string // "" for none; else the field, then the old SPI
	}{
		{"removed SA back with its key", []reloadState{{0x1002, "out", key3, ""}, {0x2001, "in", key2, ""}, {0x1001, "out", key1, ""}}, "states[2].aead.key 0x1001"},
		// (A file naming the running SA beside the new one is refused by
		// config.Parse itself: one key twice in a file.)
		{"running key under a new SPI", []reloadState{{0x2001, "in", key2, ""}, {0x1003, "out", key3, ""}}, "states[1].aead.key 0x1002"},
		{"removed SPI with a new key", []reloadState{{0x1002, "out", key3, ""}, {0x2001, "in", key2, ""}, {0x1001, "out", "d1d2d3d4d5d6d7d8d9dadbdcdddedfe0e1e2e3e4", ""}}, ""},
		{"a removed outbound SA's key, inbound", []reloadState{{0x1002, "out", key3, ""}, {0x2001, "in", key2, ""}, {0x2002, "in", key1, ""}}, "states[2].aead.key 0x1001"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := n.buildStates(reloadConfig(t, tt.states...))
			if err == nil {
				b.Discard() // a check, not a reload
			}
			if tt.wantErr == "" {
				if err != nil {
					t.Errorf("refused: %v", err)
				}
				return
			}
			var list config.ErrorList
			if !errors.As(err, &list) || len(list) != 1 {
				t.Fatalf("error %v, want one config error", err)
			}
			field, spi, _ := strings.Cut(tt.wantErr, " ")
			if e := list[0]; e.Field != field || !strings.Contains(e.Msg, spi) || !strings.Contains(e.Msg, "new key") {
				t.Errorf("error %v, want field %s naming SA %s and asking for a new key", e, field, spi)
			}
		})
	}
}
