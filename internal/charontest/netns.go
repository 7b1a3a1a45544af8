//go:build linux

package charontest

import (
	"testing"

	"github.com/ipsecd/ipsecd/tun/netnstest"
)

// Namespaces makes charon's network namespace and its peer's, joined by
// a veth pair: charon at 192.0.2.1/24, the peer at 192.0.2.2/24, and
// behind (addresses) on charon's lo, the network charon's tunnels reach.
// Charon's default route goes to the peer: kernel-libipsec routes a
// tunnel's remote_ts into its TUN device from an address of local_ts,
// and needs a route towards the peer to do it. Both namespaces go when
// the test ends; without root the test is skipped.
func Namespaces(t testing.TB, prefix string, behind ...string) (gw, peer *netnstest.NS) {
	t.Helper()
	gw = netnstest.New(t, prefix+"-charon")
	peer = netnstest.New(t, prefix+"-peer")
	gw.IP(t, "link", "add", "vc", "type", "veth", "peer", "name", "vs", "netns", peer.Name)
	gw.IP(t, "addr", "add", "192.0.2.1/24", "dev", "vc")
	peer.IP(t, "addr", "add", "192.0.2.2/24", "dev", "vs")
	gw.IP(t, "link", "set", "vc", "up")
	peer.IP(t, "link", "set", "vs", "up")
	for _, a := range behind {
		gw.IP(t, "addr", "add", a, "dev", "lo")
	}
	gw.IP(t, "route", "add", "default", "via", "192.0.2.2")
	return gw, peer
}
