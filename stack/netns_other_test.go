//go:build !linux

package stack

import (
	"net/netip"
	"testing"
)

// inNamespace skips the test: network namespaces are Linux's.
func inNamespace(t *testing.T, addrs []netip.Addr) func(Config) (*Net, error) {
	t.Skip("network namespaces: Linux only")
	return nil
}
