package stack

import (
	"net/netip"
	"testing"

	"github.com/ipsecd/ipsecd/tun/netnstest"
)

// inNamespace makes a network namespace with addrs on its loopback
// device and returns a New that binds the underlay socket in it. The
// netstacks and every goroutine stay in the test's own namespace: only
// the socket belongs to the new one. It skips the test unless root.
func inNamespace(t *testing.T, addrs []netip.Addr) func(Config) (*Net, error) {
	ns := netnstest.New(t, "stack")
	for _, a := range addrs {
		ns.IP(t, "addr", "add", netip.PrefixFrom(a, a.BitLen()).String(), "dev", "lo", "nodad")
	}
	return func(cfg Config) (n *Net, err error) {
		err = ns.Do(func() error {
			n, err = New(cfg)
			return err
		})
		return n, err
	}
}
