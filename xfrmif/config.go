package xfrmif

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/ipsecd/ipsecd/tun"
)

// DefaultMTU is the MTU of an interface whose Config leaves it 0: 1500
// less the worst ESP-in-UDP-over-IPv6 overhead of common suites, rounded.
const DefaultMTU = 1400

// Config describes one xfrm interface, as the config file's interfaces
// entries do. The zero MTU means DefaultMTU and zero Queues means 1.
type Config struct {
	Name      string
	IfID      uint32
	MTU       int
	Addresses []netip.Prefix // the interface's own addresses, 10.10.0.1/24
	Routes    []netip.Prefix // prefixes routed into the interface
	Queues    int
	// Table is the routing table of Routes; 0 means the main table.
	// Fixed for the interface's life, like Queues.
	Table uint32
	// TxQueueLen is the TUN device's transmit queue length in packets
	// (ip link's txqueuelen); 0 means DefaultTxQueueLen. A link without
	// a transmit queue (a netstack NIC) ignores it.
	TxQueueLen int
}

// The transmit queue of an interface's TUN device, in packets. The
// kernel gives a TUN 500, which at 1,000 packets/s drops what arrives
// while the daemon stalls for half a second (a garbage collection, a
// reload); 1000 is what it gives Ethernet devices. The maximum bounds
// what a stalled daemon lets the kernel hold (up to 64 KiB per packet
// with segmentation offload).
const (
	DefaultTxQueueLen = 1000
	MaxTxQueueLen     = 65535
)

// ErrInvalidConfig is wrapped by Validate's errors: the config must be
// fixed; nothing was changed.
var ErrInvalidConfig = errors.New("xfrmif: invalid interface config")

func (c Config) withDefaults() Config {
	if c.MTU == 0 {
		c.MTU = DefaultMTU
	}
	if c.Queues == 0 {
		c.Queues = 1
	}
	if c.TxQueueLen == 0 {
		c.TxQueueLen = DefaultTxQueueLen
	}
	return c
}

// The MTU limits of an interface, the one place they are set (config
// and the netstack take them from here).
const (
	MinMTU  = 576               // IPv4's minimum reassembly size (RFC 791): every IPv4 host takes it whole
	MinMTU6 = 1280              // IPv6's minimum link MTU (RFC 8200 §5), with IPv6 addresses or routes
	MaxMTU  = tun.MaxPacketSize // 65535, an IP packet's total length field
)

// Validate checks one Config on its own.
func (c Config) Validate() error {
	c = c.withDefaults()
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: interface %q: %s: %s", ErrInvalidConfig, c.Name, field, fmt.Sprintf(format, args...))
	}
	switch {
	case c.Name == "":
		return bad("name", "empty")
	case len(c.Name) > 15:
		return bad("name", "longer than 15 bytes")
	case c.IfID == 0:
		return bad("if_id", "must be non-zero")
	case c.MTU < MinMTU || c.MTU > MaxMTU:
		return bad("mtu", "%d not in %d..%d", c.MTU, MinMTU, MaxMTU)
	case c.Queues < 1 || c.Queues > tun.MaxQueues:
		return bad("queues", "%d not in 1..%d", c.Queues, tun.MaxQueues)
	case c.TxQueueLen < 1 || c.TxQueueLen > MaxTxQueueLen:
		return bad("txqueuelen", "%d not in 1..%d", c.TxQueueLen, MaxTxQueueLen)
	}
	for _, p := range c.Addresses {
		if !p.IsValid() {
			return bad("addresses", "invalid prefix")
		}
		if p.Addr().Is6() && c.MTU < MinMTU6 {
			return bad("mtu", "%d below %d with IPv6 address %v", c.MTU, MinMTU6, p)
		}
	}
	for _, p := range c.Routes {
		if !p.IsValid() {
			return bad("routes", "invalid prefix")
		}
		if p.Addr().Is6() && c.MTU < MinMTU6 {
			return bad("mtu", "%d below %d with IPv6 route %v", c.MTU, MinMTU6, p)
		}
	}
	return nil
}

// ValidateAll checks a set of interfaces: each valid, names and if_ids
// unique.
func ValidateAll(cfgs []Config) error {
	names := make(map[string]bool, len(cfgs))
	ids := make(map[uint32]bool, len(cfgs))
	for _, c := range cfgs {
		if err := c.Validate(); err != nil {
			return err
		}
		if names[c.Name] {
			return fmt.Errorf("%w: interface %q: name: used twice", ErrInvalidConfig, c.Name)
		}
		if ids[c.IfID] {
			return fmt.Errorf("%w: interface %q: if_id: %d used twice", ErrInvalidConfig, c.Name, c.IfID)
		}
		names[c.Name], ids[c.IfID] = true, true
	}
	return nil
}

func (c Config) clone() Config {
	c.Addresses = slices.Clone(c.Addresses)
	c.Routes = slices.Clone(c.Routes)
	return c
}

// diff returns what is in want and not in have, and what is in have and
// not in want.
func diff(have, want []netip.Prefix) (add, remove []netip.Prefix) {
	for _, p := range want {
		if !slices.Contains(have, p) {
			add = append(add, p)
		}
	}
	for _, p := range have {
		if !slices.Contains(want, p) {
			remove = append(remove, p)
		}
	}
	return add, remove
}
