package ikenode

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/ipsecd/ipsecd/config"
)

// TestReloadConns: ReloadConns builds and compares only the connections
// it names (added, changed, unchanged, or removed when the config has
// them no more), and leaves the others as they run, however the config
// differs for them or lacks them; a new connection comes last, a changed
// one keeps its place.
func TestReloadConns(t *testing.T) {
	parse := func(y string) *config.IKEConfig {
		t.Helper()
		cfg, err := config.Parse("a.yaml", []byte(y))
		if err != nil {
			t.Fatal(err)
		}
		cfg.IKE.Port = 0
		return &cfg.IKEConfig
	}
	e := startDaemon(t, newTestNet(), Config{IKE: parse(manyConnsYAML(3)), RawESP: true, Listen: []netip.Addr{netip.MustParseAddr("127.0.0.1")}}, 0x1000)
	// p1's child changed, p3 new.
	changedP1 := strings.Replace(manyConnsYAML(4), "remote_ts: [10.2.0.1/32], esp_proposals: [aes128gcm16]", "remote_ts: [10.2.0.1/32], esp_proposals: [aes256gcm16]", 1)
	running := func() (order []string, p1 *conn) {
		t.Helper()
		if err := e.m.do(func() { order, p1 = slices.Clone(e.m.connOrder), e.m.conns["p1"] }); err != nil {
			t.Fatal(err)
		}
		return order, p1
	}
	_, p1 := running()
	for _, step := range []struct {
		config, name string
		want         ReloadResult
		order        string
		p1Replaced   bool
	}{
		{changedP1, "p3", ReloadResult{Added: 1}, "p0 p1 p2 p3", false}, // p1 unexamined
		{changedP1, "p1", ReloadResult{Changed: 1}, "p0 p1 p2 p3", true},
		{changedP1, "p0", ReloadResult{Unchanged: 1}, "p0 p1 p2 p3", false},
		// p0 gone (named); p2 and p3 not named, so kept, though gone too.
		{strings.Replace(manyConnsYAML(2), "name: p0\n", "name: q0\n", 1), "p0", ReloadResult{Removed: 1}, "p1 p2 p3", false},
		{manyConnsYAML(1), "p0", ReloadResult{Added: 1}, "p1 p2 p3 p0", false},
	} {
		res, err := e.m.ReloadConns(parse(step.config), step.name)
		if err != nil {
			t.Fatal(err)
		}
		if res != step.want {
			t.Errorf("ReloadConns(%s): %+v, want %+v", step.name, res, step.want)
		}
		order, now := running()
		if got := strings.Join(order, " "); got != step.order {
			t.Errorf("ReloadConns(%s): connections %s, want %s", step.name, got, step.order)
		}
		if (now != p1) != step.p1Replaced {
			t.Errorf("ReloadConns(%s): p1 replaced %v, want %v", step.name, now != p1, step.p1Replaced)
		}
		p1 = now
	}
}
