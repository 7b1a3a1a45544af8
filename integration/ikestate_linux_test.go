//go:build linux

package integration

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ipsecd/ipsecd/control"
	"github.com/ipsecd/ipsecd/internal/syncbuf"
)

// startDaemonUnusableState is startDaemon with the daemon's state_dir a
// regular file, which seqstate cannot open.
func startDaemonUnusableState(t *testing.T, ns *netns, cfg string) *daemon {
	t.Helper()
	dir := t.TempDir()
	d := &daemon{t: t, ns: ns, cfgPath: filepath.Join(dir, "ipsecd.yaml"), control: filepath.Join(dir, "ipsecd.sock"),
		stateDir: filepath.Join(dir, "state"), log: &syncbuf.Buffer{}, done: make(chan error, 1)}
	if err := os.WriteFile(d.stateDir, []byte("not a directory\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(d.cfgPath, []byte(d.file(cfg)), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		d.stop()
		if t.Failed() {
			t.Logf("ipsecd log in %s:\n%s", ns.name, d.log.String())
		}
	})
	d.start()
	return d
}

// TestIKEStateDir: IKE's children keep no sequence records and need no
// state_dir (their keys are new for each child). A's state_dir cannot be
// used: its AES-GCM child is installed all the same and pings cross. B's
// can: after its children sealed pings and were rekeyed from each side,
// it holds its secret only.
func TestIKEStateDir(t *testing.T) {
	p := newPair(t)
	b := startDaemon(t, p.b, ikeSide(underlayB4, underlayA4, "b.example.net", "a.example.net", innerB4, prefix24(innerA4), "none", ""))
	a := startDaemonUnusableState(t, p.a, ikeSide(underlayA4, underlayB4, "a.example.net", "b.example.net", innerA4, prefix24(innerB4), "start", ""))
	a.waitIKE("a child", anyChild)
	b.waitIKE("a child", anyChild)
	ping(t, p.a, innerB4, 3)
	for _, d := range []*daemon{a, b} {
		before := d.ikeList()[0].Children[0].SPIIn
		d.mustCtl(t, "ike", "rekey", "--child", "net")
		d.waitIKE("the rekeyed child", func(_ control.IKESAInfo, c control.IKEChildInfo) bool { return c.SPIIn != before })
		ping(t, p.a, innerB4, 3)
	}
	es, err := os.ReadDir(b.stateDir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"secret"}) {
		t.Errorf("B's state_dir holds %v after three children; want its secret only", names)
	}
}
