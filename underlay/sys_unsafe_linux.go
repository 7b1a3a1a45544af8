package underlay

// The unsafe parts of the Linux underlay: mmsghdr batches, socket addresses
// and control messages laid out as the kernel reads and writes them.

import (
	"net/netip"
	"unsafe"

	"golang.org/x/sys/unix"
)

// oobSize is the control buffer per message: room for a UDP_GRO or
// UDP_SEGMENT message (CmsgSpace(4) = 24 on 64-bit) and an IPv6 packet info
// message (CmsgSpace(20) = 40).
const oobSize = 64

// recvmmsg receives up to len(hdrs) datagrams without blocking.
func recvmmsg(fd uintptr, hdrs []unix.Mmsghdr) (int, unix.Errno) {
	n, _, errno := unix.Syscall6(unix.SYS_RECVMMSG, fd,
		uintptr(unsafe.Pointer(&hdrs[0])), uintptr(len(hdrs)), unix.MSG_DONTWAIT, 0, 0)
	return int(n), errno
}

// sendmmsg sends up to len(hdrs) datagrams without blocking.
func sendmmsg(fd uintptr, hdrs []unix.Mmsghdr) (int, unix.Errno) {
	n, _, errno := unix.Syscall6(unix.SYS_SENDMMSG, fd,
		uintptr(unsafe.Pointer(&hdrs[0])), uintptr(len(hdrs)), unix.MSG_DONTWAIT, 0, 0)
	return int(n), errno
}

// setIovec points iov at b (which may be empty).
func setIovec(iov *unix.Iovec, b []byte) {
	if len(b) == 0 {
		iov.Base = nil
	} else {
		iov.Base = &b[0]
	}
	iov.SetLen(len(b))
}

// setMsghdr fills h for one datagram.
func setMsghdr(h *unix.Msghdr, name *unix.RawSockaddrInet6, nameLen int, iovs []unix.Iovec, oob []byte) {
	h.Name = (*byte)(unsafe.Pointer(name))
	h.Namelen = uint32(nameLen)
	h.Iov = &iovs[0]
	h.SetIovlen(len(iovs))
	if len(oob) == 0 {
		h.Control = nil
	} else {
		h.Control = &oob[0]
	}
	h.SetControllen(len(oob))
	h.Flags = 0
}

// putSockaddr writes ap into sa in the form a socket of family v6 (or
// IPv4) takes and returns its length. The caller has unmapped 4in6 peers
// for IPv4 sockets.
func putSockaddr(sa *unix.RawSockaddrInet6, ap netip.AddrPort, v6 bool) int {
	port := ap.Port()
	if !v6 {
		sa4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		*sa4 = unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: ap.Addr().Unmap().As4()}
		p := (*[2]byte)(unsafe.Pointer(&sa4.Port))
		p[0], p[1] = byte(port>>8), byte(port)
		return unix.SizeofSockaddrInet4
	}
	*sa = unix.RawSockaddrInet6{Family: unix.AF_INET6, Addr: ap.Addr().As16()}
	if z := ap.Addr().Zone(); z != "" {
		sa.Scope_id = zoneIndex(z)
	}
	p := (*[2]byte)(unsafe.Pointer(&sa.Port))
	p[0], p[1] = byte(port>>8), byte(port)
	return unix.SizeofSockaddrInet6
}

// getSockaddr reads the source address the kernel wrote into sa.
func getSockaddr(sa *unix.RawSockaddrInet6) netip.AddrPort {
	p := (*[2]byte)(unsafe.Pointer(&sa.Port))
	port := uint16(p[0])<<8 | uint16(p[1])
	switch sa.Family {
	case unix.AF_INET:
		sa4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		return netip.AddrPortFrom(netip.AddrFrom4(sa4.Addr), port)
	case unix.AF_INET6:
		a := netip.AddrFrom16(sa.Addr)
		if sa.Scope_id != 0 {
			a = a.WithZone(zoneName(sa.Scope_id)) // link-local peers only; allocates
		}
		return netip.AddrPortFrom(a, port)
	}
	return netip.AddrPort{}
}

// cmsg returns the control message header at b[0:].
func cmsg(b []byte) *unix.Cmsghdr { return (*unix.Cmsghdr)(unsafe.Pointer(&b[0])) }

// parseControl returns the UDP GRO segment size (0 if the datagram was not
// coalesced) and the local address (invalid if none) in oob.
func parseControl(oob []byte) (gso int, local netip.Addr) {
	for len(oob) >= unix.SizeofCmsghdr {
		h := cmsg(oob)
		l := int(h.Len)
		if l < unix.SizeofCmsghdr || l > len(oob) {
			break
		}
		data := oob[unix.CmsgLen(0):l]
		switch {
		case h.Level == unix.SOL_UDP && h.Type == unix.UDP_GRO:
			// The kernel writes an int; older code reads a u16.
			if len(data) >= 4 {
				gso = int(*(*int32)(unsafe.Pointer(&data[0])))
			} else if len(data) >= 2 {
				gso = int(*(*uint16)(unsafe.Pointer(&data[0])))
			}
		case h.Level == unix.IPPROTO_IP && h.Type == unix.IP_PKTINFO && len(data) >= unix.SizeofInet4Pktinfo:
			pi := (*unix.Inet4Pktinfo)(unsafe.Pointer(&data[0]))
			local = netip.AddrFrom4(pi.Addr)
		case h.Level == unix.IPPROTO_IPV6 && h.Type == unix.IPV6_PKTINFO && len(data) >= unix.SizeofInet6Pktinfo:
			pi := (*unix.Inet6Pktinfo)(unsafe.Pointer(&data[0]))
			local = netip.AddrFrom16(pi.Addr)
		}
		sp := unix.CmsgSpace(l - unix.CmsgLen(0))
		if sp > len(oob) {
			break
		}
		oob = oob[sp:]
	}
	return gso, local
}

// putSegment writes a UDP_SEGMENT control message for segments of size
// gso into b and returns its length.
func putSegment(b []byte, gso int) int {
	h := cmsg(b)
	h.Level = unix.SOL_UDP
	h.Type = unix.UDP_SEGMENT
	h.SetLen(unix.CmsgLen(2))
	*(*uint16)(unsafe.Pointer(&b[unix.CmsgLen(0)])) = uint16(gso)
	return unix.CmsgSpace(2)
}

// putPktinfo writes an IP_PKTINFO or IPV6_PKTINFO control message that
// selects local as the source address into b and returns its length.
func putPktinfo(b []byte, local netip.Addr, v6 bool) int {
	h := cmsg(b)
	data := unsafe.Pointer(&b[unix.CmsgLen(0)])
	if !v6 {
		h.Level, h.Type = unix.IPPROTO_IP, unix.IP_PKTINFO
		h.SetLen(unix.CmsgLen(unix.SizeofInet4Pktinfo))
		*(*unix.Inet4Pktinfo)(data) = unix.Inet4Pktinfo{Spec_dst: local.Unmap().As4()}
		return unix.CmsgSpace(unix.SizeofInet4Pktinfo)
	}
	h.Level, h.Type = unix.IPPROTO_IPV6, unix.IPV6_PKTINFO
	h.SetLen(unix.CmsgLen(unix.SizeofInet6Pktinfo))
	*(*unix.Inet6Pktinfo)(data) = unix.Inet6Pktinfo{Addr: local.As16()}
	return unix.CmsgSpace(unix.SizeofInet6Pktinfo)
}

// sameBytes reports whether a and b start at the same address.
func sameBytes(a, b []byte) bool {
	return len(a) > 0 && len(b) > 0 && unsafe.SliceData(a) == unsafe.SliceData(b)
}

// alignedBytes returns n zero bytes aligned for control message headers.
func alignedBytes(n int) []byte {
	words := make([]uint64, (n+7)/8)
	return unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), n)
}
