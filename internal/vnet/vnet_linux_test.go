package vnet

import (
	"bytes"
	"encoding/binary"
	"testing"

	"golang.org/x/sys/unix"
)

// The layout is the kernel's: the constants match x/sys/unix's copy of the
// UAPI header, the fields sit where the C struct has them, and a header
// survives Encode and Decode.
func TestHeader(t *testing.T) {
	for _, c := range []struct{ got, want int }{
		{FlagNeedsCsum, unix.VIRTIO_NET_HDR_F_NEEDS_CSUM},
		{FlagDataValid, unix.VIRTIO_NET_HDR_F_DATA_VALID},
		{GSONone, unix.VIRTIO_NET_HDR_GSO_NONE},
		{GSOTCPv4, unix.VIRTIO_NET_HDR_GSO_TCPV4},
		{GSOUDP, unix.VIRTIO_NET_HDR_GSO_UDP},
		{GSOTCPv6, unix.VIRTIO_NET_HDR_GSO_TCPV6},
		{GSOUDPL4, unix.VIRTIO_NET_HDR_GSO_UDP_L4},
		{GSOECN, unix.VIRTIO_NET_HDR_GSO_ECN},
	} {
		if c.got != c.want {
			t.Errorf("constant %d, the kernel's is %d", c.got, c.want)
		}
	}
	h := Header{Flags: FlagNeedsCsum, GSOType: GSOTCPv4, HdrLen: 52, GSOSize: 1388, CsumStart: 20, CsumOffset: 16}
	b := make([]byte, HeaderLen)
	h.Encode(b)
	// struct virtio_net_hdr: two bytes, then four 16-bit fields in the
	// host's order (written out here for a little-endian host).
	if binary.NativeEndian.Uint16([]byte{1, 0}) == 1 {
		want := []byte{1, 1, 52, 0, 0x6c, 0x05, 20, 0, 16, 0}
		if !bytes.Equal(b, want) {
			t.Fatalf("encoded % x, want % x", b, want)
		}
	}
	var d Header
	if !d.Decode(b) || d != h {
		t.Fatalf("decoded %+v, want %+v", d, h)
	}
	if d.Decode(b[:HeaderLen-1]) {
		t.Fatal("Decode of 9 bytes reported true")
	}
}
