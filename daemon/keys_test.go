package daemon

import (
	"bytes"
	"encoding/hex"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/control"
	"github.com/ipsecd/ipsecd/internal/syncbuf"
	ipnode "github.com/ipsecd/ipsecd/node"
	"github.com/ipsecd/ipsecd/sa"
	"github.com/ipsecd/ipsecd/underlay"
	"github.com/ipsecd/ipsecd/xfrmif"
)

const (
	key3 = "c1c2c3c4c5c6c7c8c9cacbcccdcecfd0d1d2d3d4"
	key4 = "e1e2e3e4e5e6e7e8e9eaebecedeeeff0f1f2f3f4"
	key5 = "f1f2f3f4f5f6f7f8f9fafbfcfdfeff0001020304"
)

// keysNode is a node that reloads and takes control changes without TUN
// devices: metricsNode's SAD and loopback underlay, interfaces made over
// idle links by the registry's Create hook, and cfg brought up as
// startNode does (SAD, used keys, running config). made collects every SA
// the node makes from then on, for buildStates or AddState.
type keysNode struct {
	*Daemon
	out  *syncbuf.Buffer
	made []*sa.SA
}

func newKeysNode(t *testing.T, cfg *config.Config) *keysNode { return newKeysNodeRaw(t, cfg, false) }

// newKeysNodeRaw is newKeysNode whose underlay has raw ESP sockets, or
// not, as rawESP says.
func newKeysNodeRaw(t *testing.T, cfg *config.Config, rawESP bool) *keysNode {
	t.Helper()
	k := &keysNode{out: &syncbuf.Buffer{}}
	log := logrus.New()
	log.SetOutput(k.out)
	log.SetLevel(logrus.InfoLevel)
	log.SetFormatter(&logrus.TextFormatter{DisableTimestamp: true})
	k.Daemon = testNode(t, log, true, ipnode.Config{
		EphemeralKeys: true,
		Underlay:      underlay.Config{RawESP: rawESP},
		NewSA: func(c sa.Config, counters *sa.Counters) (*sa.SA, error) {
			s, err := sa.New(c, counters)
			if err == nil {
				k.made = append(k.made, s)
			}
			return s, err
		},
	})
	n := k.Daemon
	n.reg.Create = func(c xfrmif.Config) (*xfrmif.Interface, error) {
		return xfrmif.NewInterface(c, newIdleLink(c.Queues))
	}
	if _, err := n.core.SyncInterfaces(interfaceConfigs(cfg)); err != nil {
		t.Fatal(err)
	}
	b, err := n.buildStates(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.core.Sync(b, cfg.Policies); err != nil {
		t.Fatal(err)
	}
	n.cfg = cfg
	k.made = nil // from here on
	return k
}

// stateConfig is the sa.Config of reloadConfig's state, with keys of its
// own, as the control socket hands one to AddState.
func stateConfig(t *testing.T, st reloadState) sa.Config {
	t.Helper()
	c := reloadConfig(t, st).States[0].Config
	a := *c.AEAD
	a.Key = bytes.Clone(a.Key)
	c.AEAD = &a
	return c
}

// keysOf returns copies of the key bytes of every state of cfg.
func keysOf(cfg *config.Config) [][]byte {
	var out [][]byte
	for _, st := range cfg.States {
		for _, a := range []*sa.Algorithm{st.AEAD, st.Enc, st.Auth} {
			if a != nil {
				out = append(out, bytes.Clone(a.Key))
			}
		}
	}
	return out
}

func allZero(b []byte) bool { return !slices.ContainsFunc(b, func(c byte) bool { return c != 0 }) }

// checkRunning checks that the SAD holds exactly want, in use: neither
// retired nor wiped, with the keys they were made with (keys, by SPI).
func checkRunning(t *testing.T, n *Daemon, want []*sa.SA, keys map[uint32]string) {
	t.Helper()
	got := n.sad.States()
	if len(got) != len(want) {
		t.Fatalf("SAD holds %v, want the running %v", got, want)
	}
	for _, s := range want {
		if !slices.Contains(got, s) {
			t.Errorf("running SA %v is no longer in the SAD", s)
		}
		if s.Retired() || s.Wiped() {
			t.Errorf("running SA %v: retired %v, wiped %v; want neither", s, s.Retired(), s.Wiped())
		}
		c := s.Config()
		if hex.EncodeToString(c.AEAD.Key) != keys[s.SPI()] {
			t.Errorf("running SA %v has key %x, want %s", s, c.AEAD.Key, keys[s.SPI()])
		}
	}
}

// TestRefusedReloadZeroesItsKeys: a reload refused for any reason zeroes
// the keys of the SAs made for it and of its config, and leaves the
// running SAs, their keys and the running config as they were. An applied
// reload zeroes neither its new SAs nor its config.
func TestRefusedReloadZeroesItsKeys(t *testing.T) {
	running := []reloadState{{0x1001, "out", key1, ""}, {0x2001, "in", key2, ""}}
	runKeys := map[uint32]string{0x1001: key1, 0x2001: key2}
	tests := []struct {
		name   string
		states []reloadState
		want   string // in the log
	}{
		{"a running SA changed in place", []reloadState{{0x1001, "out", key1, ""}, {0x2001, "in", key2, "replay_window: 128"},
			{0x1002, "out", key3, ""}, {0x2002, "in", key4, ""}, {0x1003, "out", key5, ""}},
			"states[1].replay_window"},
		// The running SA 0x1001 leaves the file, and its key comes back
		// under a new SPI. (The same key twice in one file is refused by
		// config.Parse already.)
		{"a running key reused under a new SPI", append(slices.Clone(running[1:]), reloadState{0x1002, "out", key3, ""}, reloadState{0x1004, "out", key1, ""}),
			"states[2].aead.key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runCfg := reloadConfig(t, running...)
			k := newKeysNode(t, runCfg)
			live := k.sad.States()
			cfg := reloadConfig(t, tt.states...)
			keys := keysOf(cfg)
			if k.apply(cfg) {
				t.Fatal("the reload was applied, want it refused")
			}
			if len(k.made) == 0 {
				t.Fatal("no SA was made for the reload: the test proves nothing")
			}
			for _, s := range k.made {
				if !s.Wiped() {
					t.Errorf("SA %v, made for the refused reload, still has its keys", s)
				}
			}
			for i, st := range cfg.States {
				if !allZero(st.AEAD.Key) || allZero(keys[i]) {
					t.Errorf("refused config's states[%d] key is %x (was %x), want it zeroed", i, st.AEAD.Key, keys[i])
				}
			}
			checkRunning(t, k.Daemon, live, runKeys)
			if k.cfg != runCfg || hex.EncodeToString(runCfg.States[0].AEAD.Key) != key1 {
				t.Errorf("the running config was replaced or wiped")
			}
			if log := k.out.String(); !strings.Contains(log, "reload refused") || !strings.Contains(log, tt.want) {
				t.Errorf("log does not say the reload was refused for %s:\n%s", tt.want, log)
			}
		})
	}

	t.Run("interfaces that cannot be made", func(t *testing.T) {
		runCfg, err := config.Parse("empty.yaml", nil)
		if err != nil {
			t.Fatal(err)
		}
		k := newKeysNode(t, runCfg)
		k.reg.Create = func(c xfrmif.Config) (*xfrmif.Interface, error) {
			return nil, errors.New("no TUN here")
		}
		cfg := reloadConfig(t, reloadState{0x1001, "out", key1, ""})
		if k.apply(cfg) {
			t.Fatal("the reload was applied, want it refused")
		}
		if len(k.made) != 1 || !k.made[0].Wiped() {
			t.Errorf("SAs made for the refused reload: %v, want one, wiped", k.made)
		}
		if !allZero(cfg.States[0].AEAD.Key) {
			t.Errorf("refused config's key is %x, want it zeroed", cfg.States[0].AEAD.Key)
		}
		if k.sad.States() != nil && len(k.sad.States()) != 0 {
			t.Errorf("SAD holds %v, want nothing", k.sad.States())
		}
	})

	t.Run("a file refused by reload", func(t *testing.T) {
		k := newKeysNode(t, reloadConfig(t, running...))
		live := k.sad.States()
		path := filepath.Join(t.TempDir(), "ipsecd.yaml")
		// A new SA, then the key of the running 0x2001, which leaves the
		// file, under a new SPI: the file parses, the SAs are made, and
		// the file is refused.
		data := "interfaces:\n  - {name: ipsec1, if_id: 1}\nstates:\n" +
			"  - {src: 192.0.2.1, dst: 192.0.2.2, spi: 0x1001, dir: out, mode: tunnel, if_id: 1, aead: {name: \"rfc4106(gcm(aes))\", key: \"0x" + key1 + "\"}, encap: {type: espinudp}}\n" +
			"  - {src: 192.0.2.1, dst: 192.0.2.2, spi: 0x1002, dir: out, mode: tunnel, if_id: 1, aead: {name: \"rfc4106(gcm(aes))\", key: \"0x" + key3 + "\"}, encap: {type: espinudp}}\n" +
			"  - {src: 192.0.2.2, dst: 192.0.2.1, spi: 0x2002, dir: in, mode: tunnel, if_id: 1, aead: {name: \"rfc4106(gcm(aes))\", key: \"0x" + key2 + "\"}, encap: {type: espinudp}}\n"
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		k.reload(path)
		if len(k.made) != 1 || !k.made[0].Wiped() || k.made[0].SPI() != 0x1002 {
			t.Errorf("SAs made for the refused reload: %v, want 0x1002, wiped", k.made)
		}
		checkRunning(t, k.Daemon, live, runKeys)
		if log := k.out.String(); !strings.Contains(log, "reload refused") || !strings.Contains(log, "states[2].aead.key") {
			t.Errorf("log does not say the reload was refused for states[2].aead.key:\n%s", log)
		}
	})

	t.Run("applied", func(t *testing.T) {
		runCfg := reloadConfig(t, running...)
		k := newKeysNode(t, runCfg)
		live := k.sad.States()
		cfg := reloadConfig(t, append(slices.Clone(running), reloadState{0x1002, "out", key3, ""})...)
		if !k.apply(cfg) {
			t.Fatalf("the reload was refused:\n%s", k.out.String())
		}
		if len(k.made) != 1 || k.made[0].Wiped() || k.made[0].Retired() {
			t.Errorf("SAs made for the applied reload: %v, want one, in use", k.made)
		}
		checkRunning(t, k.Daemon, append(live, k.made...), map[uint32]string{0x1001: key1, 0x2001: key2, 0x1002: key3})
		if k.cfg != cfg || allZero(cfg.States[2].AEAD.Key) || allZero(runCfg.States[0].AEAD.Key) {
			t.Errorf("applied: running config %p (want %p), keys new %x old %x: want the new one running, neither zeroed by apply",
				k.cfg, cfg, cfg.States[2].AEAD.Key, runCfg.States[0].AEAD.Key)
		}
	})
}

// TestAddStateDuplicateDiscards: a `state add` that the SAD refuses (the
// SPI runs already) zeroes the SA it made and the request's key, leaves
// the running SA alone, and does not count the key as used.
func TestAddStateDuplicateDiscards(t *testing.T) {
	k := newKeysNode(t, reloadConfig(t, reloadState{0x1001, "out", key1, ""}, reloadState{0x2001, "in", key2, ""}))
	live := k.sad.States()
	c := stateConfig(t, reloadState{0x1001, "out", key3, ""})
	reqKey := c.AEAD.Key
	err := (*backend)(k.Daemon).AddState(c)
	if !errors.Is(err, control.ErrExists) {
		t.Fatalf("AddState of a running SPI: %v, want ErrExists", err)
	}
	if len(k.made) != 1 || !k.made[0].Wiped() {
		t.Errorf("SAs made for the refused add: %v, want one, wiped", k.made)
	}
	if !allZero(reqKey) {
		t.Errorf("request key after the refused add: %x, want zeroed", reqKey)
	}
	checkRunning(t, k.Daemon, live, map[uint32]string{0x1001: key1, 0x2001: key2})
	// The refused SA sealed nothing: its key may still be used.
	if err := (*backend)(k.Daemon).AddState(stateConfig(t, reloadState{0x1005, "out", key3, ""})); err != nil {
		t.Errorf("AddState with the key of a refused add: %v", err)
	}
}

// TestAddStateRefusesKeyReuse: `state add` refuses key material that any
// SA had, of either direction, from the file or an earlier add, running
// or deleted, with an error that names the field and the earlier SA,
// says what to do and holds no key.
func TestAddStateRefusesKeyReuse(t *testing.T) {
	k := newKeysNode(t, reloadConfig(t, reloadState{0x1001, "out", key1, ""}, reloadState{0x2001, "in", key2, ""}))
	b := (*backend)(k.Daemon)
	add := func(st reloadState) error {
		t.Helper()
		c := stateConfig(t, st)
		reqKey := c.AEAD.Key
		err := b.AddState(c)
		if !allZero(reqKey) {
			t.Errorf("AddState(0x%x): request key %x left, want zeroed", st.spi, reqKey)
		}
		return err
	}
	if err := add(reloadState{0x3001, "out", key3, ""}); err != nil {
		t.Fatal(err)
	}
	if err := b.DeleteState(control.StateID{Dir: sa.DirOut, SPI: 0x3001, Dst: k.made[0].Dst()}); err != nil {
		t.Fatal(err)
	}
	made := len(k.made)
	tests := []struct {
		name    string
		st      reloadState
		wantSPI string // the earlier SA; "" when the add must succeed
	}{
		{"deleted SA back with its key", reloadState{0x3001, "out", key3, ""}, "0x3001"},
		{"deleted SA's key under a new SPI", reloadState{0x3002, "out", key3, ""}, "0x3001"},
		{"the file's running key", reloadState{0x3003, "out", key1, ""}, "0x1001"},
		{"the file's inbound key, inbound", reloadState{0x3004, "in", key2, ""}, "0x2001"},
		{"the deleted SA's key in the other direction", reloadState{0x3005, "in", key3, ""}, "0x3001"},
		{"the file's outbound key, inbound", reloadState{0x3006, "in", key1, ""}, "0x1001"},
		{"the file's inbound key, outbound", reloadState{0x3007, "out", key2, ""}, "0x2001"},
		{"a fresh key", reloadState{0x3008, "in", key4, ""}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := add(tt.st)
			if tt.wantSPI == "" {
				if err != nil {
					t.Errorf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, control.ErrInvalid) {
				t.Fatalf("error %v, want ErrInvalid", err)
			}
			msg := err.Error()
			for _, want := range []string{"aead.key: ", "key material already used by an earlier SA (spi " + tt.wantSPI, "generate a new key with ipsecd genkey"} {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q lacks %q", msg, want)
				}
			}
			for _, key := range []string{key1, key2, key3, key4} {
				if strings.Contains(msg, key) || strings.Contains(msg, key[:8]) {
					t.Errorf("error %q holds key material", msg)
				}
			}
		})
	}
	if len(k.made) != made+1 {
		t.Errorf("%d SAs made for the refused adds, want none (the key is checked first)", len(k.made)-made-1)
	}
	// A duplicate of a running SA with its own key is still ErrExists.
	if err := add(reloadState{0x3008, "in", key4, ""}); !errors.Is(err, control.ErrExists) {
		t.Errorf("re-adding the running SA 0x3008: %v, want ErrExists", err)
	}
}

// TestReloadRefusesControlAddedKey: a key added over the control socket
// counts as used for later reloads: a file that puts it under another SPI
// is refused, naming the field and the control-added SA, and changes
// nothing; a file that names the control-added SA as it runs keeps it.
func TestReloadRefusesControlAddedKey(t *testing.T) {
	running := []reloadState{{0x1001, "out", key1, ""}, {0x2001, "in", key2, ""}}
	k := newKeysNode(t, reloadConfig(t, running...))
	b := (*backend)(k.Daemon)
	ctlState := reloadState{0x3001, "out", key3, ""}
	if err := b.AddState(stateConfig(t, ctlState)); err != nil {
		t.Fatal(err)
	}
	live := k.sad.States()
	ctlSA := k.made[0]
	runCfg := k.cfg

	// A file that puts the control-added SA's key under a new SPI.
	cfg := reloadConfig(t, append(slices.Clone(running), reloadState{0x3005, "out", key3, ""})...)
	if k.apply(cfg) {
		t.Fatal("a reload that reuses a control-added key was applied")
	}
	log := k.out.String()
	if !strings.Contains(log, "reload refused") || !strings.Contains(log, "states[2].aead.key") || !strings.Contains(log, "spi 0x3001") {
		t.Errorf("log does not refuse states[2].aead.key for the key of SA 0x3001:\n%s", log)
	}
	if strings.Contains(log, key3) {
		t.Errorf("log holds key material:\n%s", log)
	}
	checkRunning(t, k.Daemon, live, map[uint32]string{0x1001: key1, 0x2001: key2, 0x3001: key3})
	if k.cfg != runCfg {
		t.Error("the running config was replaced")
	}

	// Without the reuse, the file applies and keeps the control-added SA.
	if !k.apply(reloadConfig(t, append(slices.Clone(running), ctlState)...)) {
		t.Fatalf("reload naming the control-added SA as it runs was refused:\n%s", k.out.String())
	}
	if !slices.Contains(k.sad.States(), ctlSA) || ctlSA.Retired() {
		t.Errorf("the control-added SA was not kept by the reload that names it")
	}
}

// TestReloadKeepsControlOwned: a reload changes only what the config
// file owns: an SA and a policy added over the control socket stay
// through reloads that do not name them, and the reload log counts what
// it added, removed and kept of the file's SAs and policies.
func TestReloadKeepsControlOwned(t *testing.T) {
	running := []reloadState{{0x1001, "out", key1, ""}, {0x2001, "in", key2, ""}}
	k := newKeysNode(t, reloadConfig(t, running...))
	b := (*backend)(k.Daemon)
	if err := b.AddState(stateConfig(t, reloadState{0x3001, "out", key3, ""})); err != nil {
		t.Fatal(err)
	}
	pol := sa.Policy{Dir: sa.DirOut, IfID: 1, Action: sa.ActionBlock,
		Selector: sa.Selector{Src: netip.MustParsePrefix("198.51.100.0/24"), Dst: netip.MustParsePrefix("203.0.113.0/24")}}
	if err := b.AddPolicy(pol); err != nil {
		t.Fatal(err)
	}
	var ctlSA *sa.SA
	for _, s := range k.sad.States() {
		if s.SPI() == 0x3001 {
			ctlSA = s
		}
	}
	if ctlSA == nil {
		t.Fatal("the control-added SA is not in the SAD")
	}
	// The file drops 0x1001 and adds 0x1002.
	if !k.apply(reloadConfig(t, running[1], reloadState{0x1002, "out", key4, ""})) {
		t.Fatalf("reload refused:\n%s", k.out.String())
	}
	if !slices.Contains(k.sad.States(), ctlSA) || ctlSA.Retired() {
		t.Errorf("the reload removed the SA added over the control socket; SAD: %v", k.sad.States())
	}
	if !slices.Contains(k.sad.Policies(), pol) {
		t.Errorf("the reload removed the policy added over the control socket; policies: %v", k.sad.Policies())
	}
	var spis []uint32
	for _, s := range k.sad.States() {
		spis = append(spis, s.SPI())
	}
	slices.Sort(spis)
	if want := []uint32{0x1002, 0x2001, 0x3001}; !slices.Equal(spis, want) {
		t.Errorf("SAs after the reload: %x, want %x", spis, want)
	}
	if log := k.out.String(); !strings.Contains(log, "states_added=1") || !strings.Contains(log, "states_removed=1") || !strings.Contains(log, "states_kept=1") {
		t.Errorf("reload log does not count the file's SAs added, removed and kept:\n%s", log)
	}
	// `state delete` still removes it, whoever added it.
	if err := b.DeleteState(control.StateID{Dir: sa.DirOut, SPI: 0x3001, Dst: ctlSA.Dst()}); err != nil {
		t.Errorf("state delete of the control-added SA: %v", err)
	}
}

// TestReloadRefusesKeyOfOtherDirection: a reload that gives a new inbound
// SA the key of an outbound SA that ran (and the reverse) is refused,
// naming the field and the earlier SA: the peer's outbound SA with that
// key would seal the same sequence numbers, the same nonces, as ours did.
func TestReloadRefusesKeyOfOtherDirection(t *testing.T) {
	running := []reloadState{{0x1001, "out", key1, ""}, {0x2001, "in", key2, ""}}
	for _, tt := range []struct {
		name   string
		states []reloadState
		want   string
	}{
		{"outbound key inbound", []reloadState{running[1], {0x2002, "in", key1, ""}}, "states[1].aead.key: SA spi 0x2002 dir in dst 192.0.2.1: this key was already used by an earlier SA (spi 0x1001 dir out dst 192.0.2.2, aead.key)"},
		{"inbound key outbound", []reloadState{running[0], {0x1002, "out", key2, ""}}, "states[1].aead.key: SA spi 0x1002 dir out dst 192.0.2.2: this key was already used by an earlier SA (spi 0x2001 dir in dst 192.0.2.1, aead.key)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			k := newKeysNode(t, reloadConfig(t, running...))
			live := k.sad.States()
			if k.apply(reloadConfig(t, tt.states...)) {
				t.Fatal("the reload was applied, want it refused")
			}
			log := k.out.String()
			if !strings.Contains(log, "reload refused") || !strings.Contains(log, tt.want) {
				t.Errorf("log does not refuse the reload with %q:\n%s", tt.want, log)
			}
			for _, key := range []string{key1, key2, key1[:8], key2[:8]} {
				if strings.Contains(log, key) {
					t.Errorf("log holds key material:\n%s", log)
				}
			}
			checkRunning(t, k.Daemon, live, map[uint32]string{0x1001: key1, 0x2001: key2})
		})
	}
}

// TestReloadLogHidesPastedKey: a reload refused for a key pasted into
// key_file or into an algorithm name logs the field, never the key.
func TestReloadLogHidesPastedKey(t *testing.T) {
	const pasted = "5f5e5d5c5b5a595857565554535251504f4e4d4c"
	for _, alg := range []string{
		`aead: {name: "rfc4106(gcm(aes))", key_file: "0x` + pasted + `"}`,
		`aead: {name: "0x` + pasted + `", key: "0x` + key3 + `"}`,
	} {
		k := newKeysNode(t, reloadConfig(t, reloadState{0x1001, "out", key1, ""}))
		path := filepath.Join(t.TempDir(), "ipsecd.yaml")
		data := "interfaces:\n  - {name: ipsec1, if_id: 1}\nstates:\n" +
			"  - {src: 192.0.2.1, dst: 192.0.2.2, spi: 0x1002, dir: out, mode: tunnel, if_id: 1, encap: {type: espinudp}, " + alg + "}\n"
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		k.reload(path)
		log := k.out.String()
		if !strings.Contains(log, "reload refused") || !strings.Contains(log, "states[0].aead.") {
			t.Errorf("log does not refuse the reload naming the field:\n%s", log)
		}
		if strings.Contains(log, pasted[:16]) || strings.Contains(log, pasted[24:]) {
			t.Errorf("log shows the pasted key:\n%s", log)
		}
	}
}

// TestRawESPNeedsRunningRawSocket: without raw ESP sockets in the running
// underlay (underlay.raw_esp off at start), `state add` of an SA without
// encap is refused with a message that says why and what to do, and so is
// a reload whose file turns raw_esp on and adds one (underlay changes wait
// for a restart). A daemon started with raw_esp takes both.
func TestRawESPNeedsRunningRawSocket(t *testing.T) {
	raw := func(st reloadState) sa.Config {
		c := stateConfig(t, st)
		c.Encap = nil
		return c
	}
	file := "underlay: {raw_esp: true}\ninterfaces:\n  - {name: ipsec1, if_id: 1}\nstates:\n" +
		"  - {src: 192.0.2.1, dst: 192.0.2.2, spi: 0x1001, dir: out, mode: tunnel, if_id: 1, aead: {name: \"rfc4106(gcm(aes))\", key: \"0x" + key1 + "\"}, encap: {type: espinudp}}\n" +
		"  - {src: 192.0.2.1, dst: 192.0.2.2, spi: 0x1005, dir: out, mode: tunnel, if_id: 1, aead: {name: \"rfc4106(gcm(aes))\", key: \"0x" + key5 + "\"}}\n"

	t.Run("raw_esp off at start", func(t *testing.T) {
		k := newKeysNode(t, reloadConfig(t, reloadState{0x1001, "out", key1, ""}))
		err := (*backend)(k.Daemon).AddState(raw(reloadState{0x1002, "out", key3, ""}))
		if !errors.Is(err, control.ErrInvalid) || !strings.Contains(err.Error(), "encap: missing, and this daemon's underlay has no raw ESP socket") ||
			!strings.Contains(err.Error(), "--encap espinudp") {
			t.Errorf("state add without encap: %v, want ErrInvalid naming encap and what to do", err)
		}
		if err := (*backend)(k.Daemon).AddState(stateConfig(t, reloadState{0x1003, "out", key4, ""})); err != nil {
			t.Errorf("state add with encap: %v", err)
		}
		cfg, err := config.Parse("test.yaml", []byte(file))
		if err != nil {
			t.Fatal(err)
		}
		if k.apply(cfg) {
			t.Fatal("a reload adding a raw ESP SA to a daemon without raw ESP sockets was applied")
		}
		if log := k.out.String(); !strings.Contains(log, "test.yaml:6: states[1].encap: missing, and the running underlay has no raw ESP socket") {
			t.Errorf("log does not refuse states[1].encap:\n%s", log)
		}
	})
	t.Run("raw_esp on at start", func(t *testing.T) {
		k := newKeysNodeRaw(t, reloadConfig(t, reloadState{0x1001, "out", key1, ""}), true)
		if err := (*backend)(k.Daemon).AddState(raw(reloadState{0x1002, "out", key3, ""})); err != nil {
			t.Errorf("state add without encap: %v", err)
		}
		cfg, err := config.Parse("test.yaml", []byte(file))
		if err != nil {
			t.Fatal(err)
		}
		if !k.apply(cfg) {
			t.Errorf("reload refused:\n%s", k.out.String())
		}
	})
}
