package tun

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// rtnl is a NETLINK_ROUTE socket for requests with acknowledgements. It is
// bound to the network namespace of the thread that opened it, whatever
// thread uses it later.
type rtnl struct {
	// mu guards: fd use, seq, buf.
	mu  sync.Mutex
	fd  int
	seq uint32
	buf []byte // request under construction, then the reply
}

func openRTNL() (*rtnl, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("tun: netlink socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("tun: netlink bind: %w", err)
	}
	// Ask for extended acknowledgements so failures come with the
	// kernel's message; ignore kernels without them.
	_ = unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_EXT_ACK, 1)
	// 32 KiB: the kernel sizes a dump's messages to the largest read
	// seen, up to 32 KiB, and a shorter read would cut them.
	return &rtnl{fd: fd, buf: make([]byte, 0, 32<<10)}, nil
}

func (c *rtnl) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fd < 0 {
		return nil
	}
	err := unix.Close(c.fd)
	c.fd = -1
	return err
}

// request sends one message built by body and waits for its ack. body
// appends the family header and attributes to b.
func (c *rtnl) request(typ, flags uint16, body func(b []byte) []byte) error {
	return c.query(typ, flags, body, nil)
}

// query is request that also passes each reply other than the ack to
// reply (type and payload after the netlink header).
func (c *rtnl) query(typ, flags uint16, body func(b []byte) []byte, reply func(typ uint16, m []byte)) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fd < 0 {
		return ErrClosed
	}
	c.seq++
	seq := c.seq
	b := c.buf[:unix.SizeofNlMsghdr]
	b = body(b)
	ne := binary.NativeEndian
	ne.PutUint32(b[0:], uint32(len(b)))
	ne.PutUint16(b[4:], typ)
	ne.PutUint16(b[6:], flags|unix.NLM_F_REQUEST|unix.NLM_F_ACK)
	ne.PutUint32(b[8:], seq)
	ne.PutUint32(b[12:], 0)
	if err := unix.Sendto(c.fd, b, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("tun: netlink send: %w", err)
	}
	rb := c.buf[:cap(c.buf)]
	for {
		n, _, err := unix.Recvfrom(c.fd, rb, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("tun: netlink receive: %w", err)
		}
		for m := rb[:n]; len(m) >= unix.SizeofNlMsghdr; {
			l := int(ne.Uint32(m[0:]))
			if l < unix.SizeofNlMsghdr || l > len(m) {
				return errors.New("tun: netlink: malformed reply")
			}
			mtyp, mseq := ne.Uint16(m[4:]), ne.Uint32(m[8:])
			// A dump (NLM_F_DUMP) ends with NLMSG_DONE, which carries
			// an error code as NLMSG_ERROR does, instead of an ack.
			if mseq == seq && (mtyp == unix.NLMSG_ERROR || mtyp == unix.NLMSG_DONE) {
				if l < unix.SizeofNlMsghdr+4 {
					return errors.New("tun: netlink: short error message")
				}
				if e := int32(ne.Uint32(m[unix.SizeofNlMsghdr:])); e != 0 {
					return syscall.Errno(-e)
				}
				return nil
			}
			if mseq == seq && reply != nil {
				reply(mtyp, m[unix.SizeofNlMsghdr:l])
			}
			m = m[nlAlign(l):]
		}
	}
}

func nlAlign(n int) int { return (n + unix.NLMSG_ALIGNTO - 1) &^ (unix.NLMSG_ALIGNTO - 1) }

func appendAttr(b []byte, typ uint16, data []byte) []byte {
	l := unix.SizeofRtAttr + len(data)
	b = binary.NativeEndian.AppendUint16(b, uint16(l))
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = append(b, data...)
	for pad := nlAlign(l) - l; pad > 0; pad-- {
		b = append(b, 0)
	}
	return b
}

func appendAttrU32(b []byte, typ uint16, v uint32) []byte {
	var d [4]byte
	binary.NativeEndian.PutUint32(d[:], v)
	return appendAttr(b, typ, d[:])
}

// appendIfInfomsg appends struct ifinfomsg.
func appendIfInfomsg(b []byte, index int, flags, change uint32) []byte {
	b = append(b, unix.AF_UNSPEC, 0)
	b = binary.NativeEndian.AppendUint16(b, 0) // type
	b = binary.NativeEndian.AppendUint32(b, uint32(index))
	b = binary.NativeEndian.AppendUint32(b, flags)
	return binary.NativeEndian.AppendUint32(b, change)
}

func family(a netip.Addr) uint8 {
	if a.Is4() {
		return unix.AF_INET
	}
	return unix.AF_INET6
}

// setLink sets MTU (when mtu > 0) and brings the link up, in one message.
func (c *rtnl) setLink(index, mtu int, up bool) error {
	var flags uint32
	if up {
		flags = unix.IFF_UP
	}
	return c.request(unix.RTM_NEWLINK, 0, func(b []byte) []byte {
		b = appendIfInfomsg(b, index, flags, unix.IFF_UP)
		if mtu > 0 {
			b = appendAttrU32(b, unix.IFLA_MTU, uint32(mtu))
		}
		return b
	})
}

// noAddrGen turns IPv6 address generation off on the link (addr_gen_mode
// none): an xfrm interface needs no link-local address, and without one
// the kernel sends no router solicitations into the tunnel, which would
// only be dropped and counted (XfrmOutNoStates) or reach a peer that has
// no use for them. It must come before the link goes up.
func (c *rtnl) noAddrGen(index int) error {
	const in6AddrGenModeNone = 1 // IN6_ADDR_GEN_MODE_NONE, linux/if_link.h
	mode := appendAttr(nil, unix.IFLA_INET6_ADDR_GEN_MODE, []byte{in6AddrGenModeNone})
	inet6 := appendAttr(nil, unix.AF_INET6, mode)
	return c.request(unix.RTM_NEWLINK, 0, func(b []byte) []byte {
		b = appendIfInfomsg(b, index, 0, 0)
		return appendAttr(b, unix.IFLA_AF_SPEC, inet6)
	})
}

func (c *rtnl) delLink(index int) error {
	err := c.request(unix.RTM_DELLINK, 0, func(b []byte) []byte {
		return appendIfInfomsg(b, index, 0, 0)
	})
	if errors.Is(err, unix.ENODEV) {
		return nil
	}
	return err
}

// addr adds (RTM_NEWADDR) or removes (RTM_DELADDR) p.Addr()/p.Bits() on
// the link. IPv6 addresses get IFA_F_NODAD so they are usable at once.
func (c *rtnl) addr(typ uint16, index int, p netip.Prefix) error {
	a := p.Addr().Unmap()
	var ifaFlags uint32
	if a.Is6() {
		ifaFlags = unix.IFA_F_NODAD
	}
	flags := uint16(0)
	if typ == unix.RTM_NEWADDR {
		flags = unix.NLM_F_CREATE | unix.NLM_F_EXCL
	}
	err := c.request(typ, flags, func(b []byte) []byte {
		// struct ifaddrmsg
		b = append(b, family(a), uint8(p.Bits()), uint8(ifaFlags), unix.RT_SCOPE_UNIVERSE)
		b = binary.NativeEndian.AppendUint32(b, uint32(index))
		b = appendAttr(b, unix.IFA_LOCAL, a.AsSlice())
		b = appendAttr(b, unix.IFA_ADDRESS, a.AsSlice())
		return appendAttrU32(b, unix.IFA_FLAGS, ifaFlags)
	})
	switch {
	case typ == unix.RTM_NEWADDR && errors.Is(err, unix.EEXIST):
		return nil
	case typ == unix.RTM_DELADDR && errors.Is(err, unix.EADDRNOTAVAIL):
		return nil
	}
	return err
}

// isLocal reports whether the kernel would deliver packets to a locally,
// as `ip route get A` showing "local" does.
func (c *rtnl) isLocal(a netip.Addr) (bool, error) {
	a = a.Unmap()
	local := false
	err := c.query(unix.RTM_GETROUTE, 0, func(b []byte) []byte {
		b = append(b, family(a), uint8(a.BitLen()), 0, 0, 0, 0, 0, 0)
		b = binary.NativeEndian.AppendUint32(b, 0)
		return appendAttr(b, unix.RTA_DST, a.AsSlice())
	}, func(typ uint16, m []byte) {
		// struct rtmsg: rtm_type is byte 7.
		if typ == unix.RTM_NEWROUTE && len(m) >= unix.SizeofRtMsg {
			local = m[7] == unix.RTN_LOCAL
		}
	})
	return local, err
}

// route adds (RTM_NEWROUTE) or removes (RTM_DELROUTE) a route of prefix p
// through the link, in table (0: main), as `ip route add P dev NAME table
// T` does.
func (c *rtnl) route(typ uint16, index int, table uint32, p netip.Prefix) error {
	if table == 0 {
		table = unix.RT_TABLE_MAIN
	}
	rtmTable := uint8(unix.RT_TABLE_UNSPEC) // RTA_TABLE holds it
	if table < 256 {
		rtmTable = uint8(table)
	}
	p = p.Masked()
	a := p.Addr().Unmap()
	scope := uint8(unix.RT_SCOPE_LINK)
	if a.Is6() {
		scope = unix.RT_SCOPE_UNIVERSE
	}
	flags := uint16(0)
	if typ == unix.RTM_NEWROUTE {
		// Replace, as `ip route replace` does: the prefix is configured to
		// go through this link, even if another route held it before.
		flags = unix.NLM_F_CREATE | unix.NLM_F_REPLACE
	} else {
		scope = unix.RT_SCOPE_NOWHERE
	}
	err := c.request(typ, flags, func(b []byte) []byte {
		// struct rtmsg
		b = append(b, family(a), uint8(p.Bits()), 0, 0, // family, dst_len, src_len, tos
			rtmTable, unix.RTPROT_STATIC, scope, unix.RTN_UNICAST)
		b = binary.NativeEndian.AppendUint32(b, 0) // flags
		b = appendAttr(b, unix.RTA_DST, a.AsSlice())
		b = appendAttrU32(b, unix.RTA_TABLE, table)
		return appendAttrU32(b, unix.RTA_OIF, uint32(index))
	})
	if typ == unix.RTM_DELROUTE && errors.Is(err, unix.ESRCH) {
		return nil
	}
	return err
}
