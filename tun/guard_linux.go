package tun

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"golang.org/x/sys/unix"
)

// Guards adds, removes and lists guard routes in the network namespace it
// was opened in. Safe for concurrent use.
type Guards struct {
	nl *rtnl
}

// OpenGuards opens a netlink socket in the network namespace of the
// calling thread; the Guards keep working there from any goroutine.
func OpenGuards() (*Guards, error) {
	nl, err := openRTNL()
	if err != nil {
		return nil, err
	}
	return &Guards{nl: nl}, nil
}

// Close closes the netlink socket. The guard routes stay in the kernel.
func (g *Guards) Close() error { return g.nl.close() }

// Add installs gd. A guard that is there already is not an error, and
// neither is another route of the same prefix, table and metric (it is
// left as it is: the guard never replaces a route it did not make).
func (g *Guards) Add(gd Guard) error {
	err := g.nl.request(unix.RTM_NEWROUTE, unix.NLM_F_CREATE|unix.NLM_F_EXCL, func(b []byte) []byte {
		return appendGuard(b, gd, unix.RT_SCOPE_UNIVERSE)
	})
	if err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("tun: add guard %v: %w", gd, err)
	}
	return nil
}

// Remove deletes gd. A guard that is not there is not an error. Only a
// route with every mark of a guard (type, protocol, metric, table) is
// deleted.
func (g *Guards) Remove(gd Guard) error {
	err := g.nl.request(unix.RTM_DELROUTE, 0, func(b []byte) []byte {
		return appendGuard(b, gd, unix.RT_SCOPE_NOWHERE)
	})
	if err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("tun: remove guard %v: %w", gd, err)
	}
	return nil
}

// List returns the guards in every routing table of both families: the
// routes of type unreachable, protocol GuardProto and metric GuardMetric.
func (g *Guards) List() ([]Guard, error) {
	var out []Guard
	for _, fam := range []uint8{unix.AF_INET, unix.AF_INET6} {
		err := g.nl.query(unix.RTM_GETROUTE, unix.NLM_F_DUMP, func(b []byte) []byte {
			// struct rtmsg, all zero but the family: every table.
			b = append(b, fam, 0, 0, 0, 0, 0, 0, 0)
			return binary.NativeEndian.AppendUint32(b, 0)
		}, func(typ uint16, m []byte) {
			if gd, ok := parseGuard(typ, m); ok {
				out = append(out, gd)
			}
		})
		if err != nil {
			return nil, fmt.Errorf("tun: list guards: %w", err)
		}
	}
	return out, nil
}

// appendGuard appends the rtmsg and attributes of gd's route.
func appendGuard(b []byte, gd Guard, scope uint8) []byte {
	p := gd.Prefix.Masked()
	a := p.Addr().Unmap()
	table := gd.table()
	rtmTable := uint8(unix.RT_TABLE_UNSPEC) // RTA_TABLE holds it
	if table < 256 {
		rtmTable = uint8(table)
	}
	// struct rtmsg: family, dst_len, src_len, tos, table, protocol, scope, type; flags.
	b = append(b, family(a), uint8(p.Bits()), 0, 0, rtmTable, GuardProto, scope, unix.RTN_UNREACHABLE)
	b = binary.NativeEndian.AppendUint32(b, 0)
	if p.Bits() > 0 {
		b = appendAttr(b, unix.RTA_DST, a.AsSlice())
	}
	b = appendAttrU32(b, unix.RTA_PRIORITY, GuardMetric)
	return appendAttrU32(b, unix.RTA_TABLE, table)
}

// parseGuard reads one RTM_NEWROUTE message of a dump and reports whether
// it is a guard.
func parseGuard(typ uint16, m []byte) (Guard, bool) {
	if typ != unix.RTM_NEWROUTE || len(m) < unix.SizeofRtMsg {
		return Guard{}, false
	}
	fam, dstLen, table, proto, rtype := m[0], int(m[1]), uint32(m[4]), m[5], m[7]
	if proto != GuardProto || rtype != unix.RTN_UNREACHABLE {
		return Guard{}, false
	}
	var dst []byte
	var metric uint32
	ne := binary.NativeEndian
	for a := m[unix.SizeofRtMsg:]; len(a) >= unix.SizeofRtAttr; {
		l := int(ne.Uint16(a[0:]))
		if l < unix.SizeofRtAttr || l > len(a) {
			return Guard{}, false
		}
		data := a[unix.SizeofRtAttr:l]
		switch ne.Uint16(a[2:]) {
		case unix.RTA_DST:
			dst = data
		case unix.RTA_PRIORITY:
			if len(data) == 4 {
				metric = ne.Uint32(data)
			}
		case unix.RTA_TABLE:
			if len(data) == 4 {
				table = ne.Uint32(data)
			}
		}
		a = a[min(nlAlign(l), len(a)):]
	}
	if metric != GuardMetric {
		return Guard{}, false
	}
	var addr netip.Addr
	switch {
	case fam == unix.AF_INET && (len(dst) == 4 || dstLen == 0):
		addr = netip.IPv4Unspecified()
	case fam == unix.AF_INET6 && (len(dst) == 16 || dstLen == 0):
		addr = netip.IPv6Unspecified()
	default:
		return Guard{}, false
	}
	if len(dst) != 0 {
		addr, _ = netip.AddrFromSlice(dst)
	}
	p, err := addr.Prefix(dstLen)
	if err != nil {
		return Guard{}, false
	}
	gd := Guard{Prefix: p}
	if table != unix.RT_TABLE_MAIN {
		gd.Table = table
	}
	return gd, true
}
