package xfrmif

import (
	"strings"
	"testing"

	"github.com/ipsecd/ipsecd/tun/netnstest"
)

// TestTxQueueLen: a TUN interface gets DefaultTxQueueLen (the kernel would
// give it 500), a configured txqueuelen replaces it, and a reconfigure
// changes it in place.
func TestTxQueueLen(t *testing.T) {
	ns := netnstest.New(t, "txqlen")
	qlen := func() string {
		t.Helper()
		out := ns.IP(t, "link", "show", "ipsec1")
		i := strings.Index(out, " qlen ")
		if i < 0 {
			t.Fatalf("no qlen in %q", out)
		}
		return strings.Fields(out[i:])[1]
	}
	var ifc *Interface
	err := ns.Do(func() (err error) {
		ifc, err = Create(Config{Name: "ipsec1", IfID: 1})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ifc.Close() })
	if got := qlen(); got != "1000" {
		t.Errorf("default txqueuelen: qlen %s, want 1000", got)
	}
	if err := ifc.Reconfigure(Config{Name: "ipsec1", IfID: 1, TxQueueLen: 3000}); err != nil {
		t.Fatal(err)
	}
	if got := qlen(); got != "3000" {
		t.Errorf("after Reconfigure to 3000: qlen %s", got)
	}
	if err := (Config{Name: "ipsec1", IfID: 1, TxQueueLen: MaxTxQueueLen + 1}).Validate(); err == nil || !strings.Contains(err.Error(), "txqueuelen") {
		t.Errorf("txqueuelen %d: %v, want an error naming txqueuelen", MaxTxQueueLen+1, err)
	}
}
