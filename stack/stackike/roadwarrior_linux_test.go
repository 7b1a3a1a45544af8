package stackike

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"testing"

	"github.com/ipsecd/ipsecd/tun/netnstest"
)

// TestRoadWarriorIPv6Underlay: a RoadWarrior reaches its gateway over
// IPv6 (the sidecar gateway at [2001:db8:1::1]:4500 in one namespace,
// the road warrior's socket at 2001:db8:1::2 in another, joined by a
// veth pair) and takes its IPv4 virtual IP through that tunnel.
func TestRoadWarriorIPv6Underlay(t *testing.T) {
	nsG := netnstest.New(t, "stackike-rw6-gw")
	nsR := netnstest.New(t, "stackike-rw6")
	nsG.IP(t, "link", "add", "vg", "type", "veth", "peer", "name", "vr", "netns", nsR.Name)
	nsG.IP(t, "addr", "add", "2001:db8:1::1/64", "dev", "vg", "nodad")
	nsR.IP(t, "addr", "add", "2001:db8:1::2/64", "dev", "vr", "nodad")
	nsG.IP(t, "link", "set", "vg", "up")
	nsR.IP(t, "link", "set", "vr", "up")
	dir := t.TempDir()
	cert, key := selfSigned(t, dir, "vpn.corp.example")
	ca, err := os.ReadFile(cert)
	if err != nil {
		t.Fatal(err)
	}
	text := eapGatewayConfig(t, netip.MustParseAddr("127.0.0.1"), cert, key, "secret: alice-password")
	text.Underlay.UDP = netip.MustParseAddrPort("[2001:db8:1::1]:4500")
	gw := sidecarIn(t, nsG, Config{File: text})
	rw := sidecarIn(t, nsR, Config{RoadWarrior: &RoadWarrior{Gateway: netip.MustParseAddr("2001:db8:1::1"), GatewayID: "vpn.corp.example",
		CA: ca, User: "alice", Password: []byte("alice-password"), Local: netip.MustParseAddr("2001:db8:1::2"), Networks: []netip.Prefix{netip.MustParsePrefix("10.4.0.0/24")}}})
	ctx, cancel := context.WithTimeout(context.Background(), settleWait)
	defer cancel()
	vips, err := rw.WaitVirtualIP(ctx)
	if err != nil || fmt.Sprint(vips) != "[10.3.0.1]" {
		t.Fatalf("WaitVirtualIP: %v %v, want 10.3.0.1", vips, err)
	}
	if list, _ := rw.List(); len(list) != 1 || list[0].Local.String() != "[2001:db8:1::2]:4500" {
		t.Errorf("the road warrior's IKE SA: %+v, want it from [2001:db8:1::2]:4500", list)
	}
	streamFromVIP(t, rw, gw, 1<<20)
}
