package tun

import (
	"errors"
	"net/netip"
	"os"
	"testing"

	"github.com/ipsecd/ipsecd/internal/vnet"
	"github.com/ipsecd/ipsecd/tun/netnstest"
)

// TestWriteGather: a packet gathered from several parts is one packet to
// the kernel; an idle queue is made active by it; a frame the kernel
// refuses (a GSO header that does not describe the packet) is an error
// for that frame only; a closed queue says os.ErrClosed.
func TestWriteGather(t *testing.T) {
	ns := netnstest.New(t, "tun")
	d := openConfigured(t, ns, "tungather0", 1)
	q := d.qs[0]
	if q.active() {
		t.Fatal("queue active before any traffic")
	}
	pkt := udpPacket(netip.MustParseAddrPort("192.0.2.2:9"), netip.MustParseAddrPort("192.0.2.1:9"), make([]byte, 100))
	hdr := make([]byte, vnet.HeaderLen)
	if err := q.WriteGather([][]byte{append(hdr, pkt[:30]...), pkt[30:70], nil, pkt[70:]}); err != nil {
		t.Fatalf("gathered write: %v", err)
	}
	if !q.active() {
		t.Error("queue still idle after a write")
	}
	// GSO TCPv4 for a UDP packet, segment size 0: virtio_net_hdr_to_skb
	// refuses it.
	bad := make([]byte, vnet.HeaderLen)
	(&vnet.Header{Flags: vnet.FlagNeedsCsum, GSOType: vnet.GSOTCPv4, HdrLen: 28, CsumStart: 20, CsumOffset: 6}).Encode(bad)
	if err := q.WriteGather([][]byte{bad, pkt}); err == nil {
		t.Error("the kernel took a frame with a bad GSO header")
	}
	if err := q.WriteGather([][]byte{append(hdr, pkt...)}); err != nil {
		t.Fatalf("write after a refused frame: %v", err)
	}
	d.Close()
	if err := q.WriteGather([][]byte{append(hdr, pkt...)}); !errors.Is(err, os.ErrClosed) {
		t.Errorf("write after Close: %v, want os.ErrClosed", err)
	}
}
