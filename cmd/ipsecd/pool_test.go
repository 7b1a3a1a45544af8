package main

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"

	"github.com/ipsecd/ipsecd/control"
	"github.com/ipsecd/ipsecd/control/controltest"
)

// TestPoolList: pool list prints swanctl's columns, and the leases'
// identities (the peer's text) escaped; a daemon without pools says so.
func TestPoolList(t *testing.T) {
	var o bytes.Buffer
	writePools(&o, []control.PoolInfo{{Name: "rw", Addrs: "10.3.0.0/24", Size: 254, Online: 1, Offline: 1, Leases: []control.PoolLease{
		{Address: netip.MustParseAddr("10.3.0.1"), Identity: "alice", Status: "online"},
		{Address: netip.MustParseAddr("10.3.0.2"), Identity: "\x1b[2J\r\nfake", Status: "offline"},
	}}})
	want := "rw                   10.3.0.0/24                                  1 /     1 /   254\n" +
		"  10.3.0.1                                online  'alice'\n" +
		"  10.3.0.2                                offline '\\x1b[2J\\x0d\\x0afake'\n"
	if o.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", o.String(), want)
	}
	srv := controltest.Start(t, &controltest.Backend{})
	var e bytes.Buffer
	if code := run([]string{"pool", "list", "--control", srv.Path()}, &o, &e); code != 1 || !strings.Contains(e.String(), "no address pools") {
		t.Errorf("pool list from a daemon without pools: exit %d, %q", code, e.String())
	}
	if code := run([]string{"pool", "show"}, &o, &e); code != 2 {
		t.Errorf("pool show: exit %d, want 2", code)
	}
}
