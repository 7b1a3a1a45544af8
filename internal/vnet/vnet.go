// Package vnet reads and writes the virtio-net header (struct
// virtio_net_hdr, include/uapi/linux/virtio_net.h) that a Linux TUN opened
// with IFF_VNET_HDR puts in front of every packet it reads and expects in
// front of every packet written to it. The header is what carries the
// offloads across the TUN: a TCP or UDP super-packet of up to 64 KiB with
// the segment size to cut it at (GSO), and a checksum left for someone
// else to compute (NEEDS_CSUM) or already checked (DATA_VALID).
//
// The TUN uses the host's byte order for the 16-bit fields (the legacy
// virtio layout, unless TUNSETVNETLE or TUNSETVNETBE changed it, which
// ipsecd never does).
package vnet

import "encoding/binary"

// HeaderLen is the size of struct virtio_net_hdr.
const HeaderLen = 10

// Flags.
const (
	// FlagNeedsCsum: the checksum at CsumStart+CsumOffset holds only the
	// pseudo-header's sum; whoever sends the packet on computes the rest
	// (CHECKSUM_PARTIAL). On a packet written to the TUN the kernel takes
	// it as verified.
	FlagNeedsCsum = 1
	// FlagDataValid: the checksums were checked (CHECKSUM_UNNECESSARY).
	FlagDataValid = 2
)

// GSO types.
const (
	GSONone  = 0
	GSOTCPv4 = 1
	GSOUDP   = 3 // UFO, not used by TUNs with USO
	GSOTCPv6 = 4
	GSOUDPL4 = 5    // USO (Linux 6.2)
	GSOECN   = 0x80 // or-ed into a TCP type: the segments carry CWR
)

// Header is struct virtio_net_hdr.
type Header struct {
	Flags      uint8
	GSOType    uint8
	HdrLen     uint16 // length of the headers before the payload (the kernel's is only a hint)
	GSOSize    uint16 // payload bytes per segment
	CsumStart  uint16 // where the checksummed data starts: the transport header
	CsumOffset uint16 // where in it the checksum is
}

// Decode reads the header from b[:HeaderLen]; it reports false if b is
// shorter.
func (h *Header) Decode(b []byte) bool {
	if len(b) < HeaderLen {
		return false
	}
	h.Flags = b[0]
	h.GSOType = b[1]
	h.HdrLen = binary.NativeEndian.Uint16(b[2:])
	h.GSOSize = binary.NativeEndian.Uint16(b[4:])
	h.CsumStart = binary.NativeEndian.Uint16(b[6:])
	h.CsumOffset = binary.NativeEndian.Uint16(b[8:])
	return true
}

// Encode writes the header into b[:HeaderLen], which must be long enough.
func (h *Header) Encode(b []byte) {
	_ = b[HeaderLen-1]
	b[0] = h.Flags
	b[1] = h.GSOType
	binary.NativeEndian.PutUint16(b[2:], h.HdrLen)
	binary.NativeEndian.PutUint16(b[4:], h.GSOSize)
	binary.NativeEndian.PutUint16(b[6:], h.CsumStart)
	binary.NativeEndian.PutUint16(b[8:], h.CsumOffset)
}
