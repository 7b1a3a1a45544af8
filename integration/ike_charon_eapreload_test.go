package integration

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/ipsecd/ipsecd/control"
	"github.com/ipsecd/ipsecd/internal/charontest"
)

// TestIKECharonReloadEAPUsers: the real binary as the gateway, charon
// 5.9.8 as dave, a user the config lacks: refused; `ipsecd reload` of a
// config that adds dave, and his next login comes up (the connection
// unchanged); a reload that removes him leaves his IKE SA up, and his
// next login is refused.
func TestIKECharonReloadEAPUsers(t *testing.T) {
	charontest.Require(t)
	p := newPair(t)
	caFile, cert, key := raPKI(t, t.TempDir())
	withDave := raGateway(cert, key)
	const daveLine = "  - {type: eap, ids: [dave], secret: dave-mschapv2-pw}\n"
	if !strings.Contains(withDave, daveLine) {
		t.Fatal("raGateway has no eap secret of dave's")
	}
	without := strings.Replace(withDave, daveLine, "", 1)
	rw := newRoadWarrior(t, p.b, underlayB4, "dave", "dave-mschapv2-pw", caFile)
	d := startDaemon(t, p.a, without)
	reload := func(cfg string) {
		t.Helper()
		if err := os.WriteFile(d.cfgPath, []byte(d.file(cfg)), 0o600); err != nil {
			t.Fatal(err)
		}
		if out, err := d.ctl("reload"); err != nil {
			t.Fatalf("ipsecd reload: %v\n%s", err, out)
		}
	}
	refused := func(what string) {
		t.Helper()
		if out, err := rw.ch.Swanctl("--initiate", "--child", "net", "--timeout", "15"); err == nil {
			t.Fatalf("%s: dave logged in:\n%s", what, out)
		}
	}

	refused("before he is a user")
	reload(withDave)
	rw.up(t, d, "after the reload that adds him", "dave", "10.3.0.1")
	reload(without)
	if !slices.ContainsFunc(d.ikeList(), func(s control.IKESAInfo) bool { return s.RemoteEAPID == "dave" }) {
		t.Fatal("dave's IKE SA went with his user: strongSwan keeps it")
	}
	rw.down(t, d, "dave")
	refused("after the reload that removes him")
}
