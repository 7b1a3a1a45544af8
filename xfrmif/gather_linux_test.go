package xfrmif

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ipsecd/ipsecd/internal/iphdr"
	"github.com/ipsecd/ipsecd/internal/vnet"
	"github.com/ipsecd/ipsecd/sa/satest"
	"github.com/ipsecd/ipsecd/tun/netnstest"
)

// gatherQueueDouble is a queue that takes gathered writes and keeps them.
type gatherQueueDouble struct {
	frames  [][][]byte
	written [][]byte // by plain Writes
}

func (q *gatherQueueDouble) Read([][]byte, []int, int) (int, error) { return 0, os.ErrClosed }
func (q *gatherQueueDouble) BatchSize() int                         { return 1 }
func (q *gatherQueueDouble) Write(bufs [][]byte, offset int) (int, error) {
	for _, b := range bufs {
		q.written = append(q.written, slices.Clone(b[offset:]))
	}
	return len(bufs), nil
}
func (q *gatherQueueDouble) WriteGather(parts [][]byte) error {
	var f [][]byte
	for _, p := range parts {
		f = append(f, slices.Clone(p))
	}
	q.frames = append(q.frames, f)
	return nil
}

func withHeadroom(pkts [][]byte, off int) [][]byte {
	bufs := make([][]byte, len(pkts))
	for i, p := range pkts {
		bufs[i] = append(make([]byte, off), p...)
	}
	return bufs
}

// TestWriteQueueGathers: through a queue that takes gathered writes,
// WriteQueue writes a flow's run of TCP segments as one super-packet (its
// first segment whole, then only the payloads of the others), leaves the
// other packets to the queue's Write, and counts every packet as
// received.
func TestWriteQueueGathers(t *testing.T) {
	q := &gatherQueueDouble{}
	link := newFakeLink(0)
	link.queues = []Queue{q}
	ifc, err := NewInterface(Config{Name: "ipsec1", IfID: 1, MTU: 1500}, link)
	if err != nil {
		t.Fatal(err)
	}
	sizes := []int{1396, 1396, 1396, 700}
	pkts := satest.TCPSegments(satest.TCPFlow{Src: netip.MustParseAddrPort("192.0.2.2:40000"),
		Dst: netip.MustParseAddrPort("192.0.2.1:5201"), Seq: 1}, sizes, 0)
	pkts = append(pkts, udp4(netip.MustParseAddrPort("192.0.2.2:1"), netip.MustParseAddrPort("192.0.2.1:2"), []byte("x")))
	if _, err := ifc.WriteQueue(0, withHeadroom(pkts, MinOffset), MinOffset); err != nil {
		t.Fatal(err)
	}
	if len(q.frames) != 1 || len(q.written) != 1 {
		t.Fatalf("%d gathered frames and %d packets written plainly, want 1 (the TCP run) and 1 (the UDP packet, for wireguard/tun's UDP GRO)", len(q.frames), len(q.written))
	}
	f := q.frames[0]
	var h vnet.Header
	h.Decode(f[0])
	if len(f) != len(sizes) || h.GSOType != vnet.GSOTCPv4 || h.GSOSize != 1396 || h.HdrLen != 40 {
		t.Errorf("super-packet of %d parts with header %+v, want %d parts, TCPv4, segment 1396, headers 40", len(f), h, len(sizes))
	}
	for i := 1; i < len(f); i++ {
		if !bytes.Equal(f[i], pkts[i][40:]) {
			t.Errorf("part %d is not segment %d's payload", i, i)
		}
	}
	if !bytes.Equal(q.written[0], pkts[4]) {
		t.Errorf("the UDP packet was not written as it was")
	}
	if st := ifc.Stats(); st.RxPackets != 5 || st.RxErrors != 0 {
		t.Errorf("rx packets %d, errors %d: want 5 and 0", st.RxPackets, st.RxErrors)
	}
}

// TestWriteQueueSuperPacketTCP: a TCP super-packet written through a real
// TUN (virtio-net header with GSO and a partial checksum, gathered from
// the segments' buffers) is taken by the kernel as the segments it was
// made of: a local TCP socket receives the stream whole, over IPv4 and
// IPv6.
func TestWriteQueueSuperPacketTCP(t *testing.T) {
	for _, tt := range []struct {
		name        string
		addr        string
		peer, local netip.AddrPort
	}{
		{"ipv4", "192.0.2.1/24", netip.MustParseAddrPort("192.0.2.2:40000"), netip.MustParseAddrPort("192.0.2.1:5201")},
		{"ipv6", "2001:db8:1::1/64", netip.MustParseAddrPort("[2001:db8:1::2]:40000"), netip.MustParseAddrPort("[2001:db8:1::1]:5201")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			superPacketTCP(t, tt.addr, tt.peer, tt.local)
		})
	}
}

func superPacketTCP(t *testing.T, addr string, peer, local netip.AddrPort) {
	ns := netnstest.New(t, "xfrmif")
	var ifc *Interface
	var ln *net.TCPListener
	err := ns.Do(func() (err error) {
		// No duplicate address detection: the address is usable at once.
		if err := os.WriteFile("/proc/sys/net/ipv6/conf/default/accept_dad", []byte("0"), 0); err != nil {
			return err
		}
		if ifc, err = Create(Config{Name: "ipsec1", IfID: 1, MTU: 1500, Addresses: prefixes(addr)}); err != nil {
			return err
		}
		ln, err = net.ListenTCP("tcp", net.TCPAddrFromAddrPort(local))
		return err
	})
	if ifc != nil {
		t.Cleanup(func() { ifc.Close() })
	}
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ihl := 20
	if local.Addr().Is6() {
		ihl = 40
	}
	const isn = 1000
	write := func(pkts ...[]byte) {
		t.Helper()
		if _, err := ifc.WriteQueue(0, withHeadroom(pkts, MinOffset), MinOffset); err != nil {
			t.Fatal(err)
		}
	}

	// The handshake, a packet at a time.
	syn := satest.TCPSegments(satest.TCPFlow{Src: peer, Dst: local, Seq: isn}, []int{0}, 0x02)[0]
	binary.BigEndian.PutUint16(syn[ihl+14:], 65535) // window
	satest.SetTCPChecksum(syn)
	write(syn)
	ifc.SetReadDeadline(0, time.Now().Add(5*time.Second))
	bufs, sizes := queueBuffers(ifc, 0, MinOffset)
	var serverISN uint32
	for serverISN == 0 {
		n, err := ifc.ReadQueue(0, bufs, sizes, MinOffset)
		if err != nil {
			t.Fatalf("waiting for the SYN-ACK: %v", err)
		}
		for i := range n {
			p := bufs[i][MinOffset : MinOffset+sizes[i]]
			proto := p[9]
			if ihl == 40 {
				proto = p[6]
			}
			if len(p) >= ihl+20 && proto == 6 && p[ihl+13] == 0x12 {
				serverISN = binary.BigEndian.Uint32(p[ihl+4:])
			}
		}
	}
	flow := satest.TCPFlow{Src: peer, Dst: local, Seq: isn + 1, Ack: serverISN + 1, ID: 1}
	write(satest.TCPSegments(flow, []int{0}, 0)[0])
	conn, err := ln.AcceptTCP()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	// 44 segments, written as one super-packet.
	segSizes := make([]int, 44)
	for i := range segSizes {
		segSizes[i] = 1376
	}
	segSizes[43] = 500
	flow.ID = 2
	data := satest.TCPSegments(flow, segSizes, 0x18)
	rxBefore := kernelRxPackets(t, ns)
	write(data...)
	var want []byte
	for _, p := range data {
		want = append(want, p[ihl+20:]...)
	}
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	got := make([]byte, len(want))
	if _, err := io.ReadFull(conn, got); err != nil {
		t.Fatalf("reading the stream: %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("the stream differs from the segments' payloads")
	}
	if d := kernelRxPackets(t, ns) - rxBefore; d != 1 {
		t.Errorf("the kernel counted %d packets in, want 1 super-packet", d)
	}
	if st := ifc.Stats(); st.RxPackets != 46 {
		t.Errorf("interface rx packets %d, want 46 (SYN, ACK and 44 segments)", st.RxPackets)
	}
}

// kernelRxPackets is the TUN device's own count of packets written to it.
func kernelRxPackets(t *testing.T, ns *netnstest.NS) int {
	out := ns.IP(t, "-s", "-o", "link", "show", "ipsec1")
	// "... RX: bytes packets errors ...\    BYTES PACKETS ..."
	i := strings.Index(out, "RX:")
	f := strings.Fields(strings.ReplaceAll(out[i:], `\`, " "))
	// Fields after "RX:" are the column names up to the first number.
	k := 1
	for ; k < len(f); k++ {
		if _, err := strconv.Atoi(f[k]); err == nil {
			break
		}
	}
	n, err := strconv.Atoi(f[k+1]) // bytes, then packets
	if err != nil {
		t.Fatalf("reading rx packets from %q: %v", out, err)
	}
	return n
}

// plainTUN opens a TUN device without offloads (no IFF_VNET_HDR): the
// kernel segments and checksums what it forwards into it, so that its
// reader sees the packets as they would leave on the wire.
func plainTUN(name string) (*os.File, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		return nil, err
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), name), nil
}

// TestWriteQueueSuperPacketForwarded: a TCP super-packet written through a
// real TUN and forwarded leaves as exactly the segments it was made of
// (less one TTL, with the header checksum that goes with it): the
// kernel's segmentation and checksum of the partial checksum give back
// every byte.
func TestWriteQueueSuperPacketForwarded(t *testing.T) {
	ns := netnstest.New(t, "xfrmif")
	var ifc *Interface
	var out *os.File
	err := ns.Do(func() (err error) {
		if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0); err != nil {
			return err
		}
		if ifc, err = Create(Config{Name: "ipsec1", IfID: 1, MTU: 1500, Addresses: prefixes("192.0.2.1/24")}); err != nil {
			return err
		}
		out, err = plainTUN("plain0")
		return err
	})
	if ifc != nil {
		t.Cleanup(func() { ifc.Close() })
	}
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	ns.IP(t, "link", "set", "plain0", "up")
	ns.IP(t, "addr", "add", "198.51.100.1/24", "dev", "plain0")

	sizes := make([]int, 10)
	for i := range sizes {
		sizes[i] = 1400
	}
	sizes[9] = 333
	segs := satest.TCPSegments(satest.TCPFlow{Src: netip.MustParseAddrPort("192.0.2.2:40000"),
		Dst: netip.MustParseAddrPort("198.51.100.2:5201"), Seq: 0xffffff00, Ack: 77, ID: 0xfffd, Timestamps: true}, sizes, 0x18)
	bufs := withHeadroom(segs, MinOffset)
	rxBefore := kernelRxPackets(t, ns)
	if _, err := ifc.WriteQueue(0, bufs, MinOffset); err != nil {
		t.Fatal(err)
	}
	if d := kernelRxPackets(t, ns) - rxBefore; d != 1 {
		t.Errorf("the kernel counted %d packets in, want 1 super-packet", d)
	}
	out.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 65536)
	for i, want := range segs {
		var got []byte
		for {
			n, err := out.Read(buf)
			if err != nil {
				t.Fatalf("segment %d: %v", i, err)
			}
			if got = buf[:n]; n >= 20 && got[9] == 6 { // not a router solicitation
				break
			}
		}
		want = slices.Clone(want)
		want[8]-- // TTL
		iphdr.IPv4(want).UpdateChecksum()
		if !bytes.Equal(got, want) {
			t.Fatalf("segment %d leaves as %d bytes, headers %x; want %d bytes, headers %x", i, len(got), got[:min(len(got), 52)], len(want), want[:52])
		}
	}
}
