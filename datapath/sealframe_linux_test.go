package datapath

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
	wgtun "golang.zx2c4.com/wireguard/tun"

	"github.com/ipsecd/ipsecd/internal/gso"
	"github.com/ipsecd/ipsecd/internal/iphdr"
	"github.com/ipsecd/ipsecd/internal/vnet"
	"github.com/ipsecd/ipsecd/sa"
	"github.com/ipsecd/ipsecd/sa/satest"
	"github.com/ipsecd/ipsecd/tun/netnstest"
)

// superFrame describes a frame as a TUN hands it out: a virtio-net header
// and a TCP or UDP super-packet (or one packet, gsoType GSONone).
type superFrame struct {
	v6      bool
	udp     bool
	gsoType uint8 // vnet.GSO*; GSONone for a single packet with NEEDS_CSUM
	payload int
	mss     int
	flags   uint8 // TCP flags
	opts    int   // TCP option bytes, a multiple of 4
}

var (
	sfSrc4, sfDst4 = netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("198.51.100.7")
	sfSrc6, sfDst6 = netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8:1::9")
)

// build returns the frame, its transport checksum left as the pseudo-header
// sum (CHECKSUM_PARTIAL), as Linux leaves it.
func (sf superFrame) build(rng *rand.Rand) []byte {
	src, dst := sfSrc4, sfDst4
	l3 := iphdr.IPv4MinLen
	if sf.v6 {
		src, dst, l3 = sfSrc6, sfDst6, iphdr.IPv6Len
	}
	l4 := iphdr.TCPMinLen + sf.opts
	proto := uint8(iphdr.ProtocolTCP)
	if sf.udp {
		l4, proto = iphdr.UDPLen, iphdr.ProtocolUDP
	}
	pkt := make([]byte, l3+l4+sf.payload)
	if sf.v6 {
		iphdr.IPv6(pkt).Encode(src, dst, proto, 64, len(pkt)-l3)
	} else {
		iphdr.IPv4(pkt).Encode(src, dst, proto, 64, len(pkt)-l3)
		iphdr.IPv4(pkt).SetID(0xfffe) // wraps within the super-packet
		iphdr.IPv4(pkt).UpdateChecksum()
	}
	t := pkt[l3:]
	binary.BigEndian.PutUint16(t[0:], 40000)
	binary.BigEndian.PutUint16(t[2:], 5201)
	csumOff := 6
	if sf.udp {
		binary.BigEndian.PutUint16(t[4:], uint16(len(t)))
	} else {
		csumOff = 16
		binary.BigEndian.PutUint32(t[4:], 0xfffff000) // wraps
		binary.BigEndian.PutUint32(t[8:], 0x01020304)
		t[12] = byte(l4/4) << 4
		t[13] = sf.flags
		binary.BigEndian.PutUint16(t[14:], 502)
		for i := iphdr.TCPMinLen; i < l4; i++ {
			t[i] = 1 // NOP options
		}
	}
	for i := l3 + l4; i < len(pkt); i++ {
		pkt[i] = byte(rng.Uint32())
	}
	// The pseudo-header's sum, length included, not complemented.
	var sum uint32
	for _, b := range [][]byte{src.AsSlice(), dst.AsSlice()} {
		for i := 0; i < len(b); i += 2 {
			sum += uint32(binary.BigEndian.Uint16(b[i:]))
		}
	}
	sum += uint32(proto) + uint32(len(t))
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(t[csumOff:], uint16(sum))
	h := vnet.Header{Flags: vnet.FlagNeedsCsum, GSOType: sf.gsoType, HdrLen: uint16(l3 + l4),
		GSOSize: uint16(sf.mss), CsumStart: uint16(l3), CsumOffset: uint16(csumOff)}
	frame := make([]byte, vnet.HeaderLen+len(pkt))
	h.Encode(frame)
	copy(frame[vnet.HeaderLen:], pkt)
	return frame
}

// oldSplitter is the transmit path's split before SealSegments:
// wireguard/tun's Read of a TUN queue, which copies each segment of the
// frame it read into a buffer of its own. The device is a real TUN (in a
// namespace of the test's), whose descriptor is then replaced by one end
// of a socketpair, so that Read reads the frames the test writes.
type oldSplitter struct {
	dev  wgtun.Device
	feed int // the socketpair's other end
}

func newOldSplitter(t testing.TB) *oldSplitter {
	ns := netnstest.New(t, "sealtso")
	var dev wgtun.Device
	if err := ns.Do(func() (err error) { dev, err = wgtun.CreateTUN("tso0", 1500); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(sp[1]) })
	unix.SetsockoptInt(sp[1], unix.SOL_SOCKET, unix.SO_SNDBUF, 1<<20)
	unix.SetsockoptInt(sp[0], unix.SOL_SOCKET, unix.SO_RCVBUF, 1<<20)
	rc, err := dev.File().SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var dupErr error
	rc.Control(func(fd uintptr) { dupErr = unix.Dup3(sp[0], int(fd), unix.O_CLOEXEC) })
	unix.Close(sp[0])
	if dupErr != nil {
		t.Fatal(dupErr)
	}
	return &oldSplitter{dev: dev, feed: sp[1]}
}

// split returns the segments of frame as today's path read them, each at
// sa.Headroom in a buffer with sa.Tailroom behind it.
func (o *oldSplitter) split(t *testing.T, frame []byte) []sa.Packet {
	if _, err := unix.Write(o.feed, frame); err != nil {
		t.Fatal(err)
	}
	bufs := make([][]byte, o.dev.BatchSize())
	for i := range bufs {
		bufs[i] = make([]byte, sa.Headroom+xfrmifMaxPacket+sa.Tailroom)
	}
	sizes := make([]int, len(bufs))
	n, err := o.dev.Read(bufs, sizes, sa.Headroom)
	if err != nil {
		t.Fatalf("wireguard/tun Read: %v", err)
	}
	pkts := make([]sa.Packet, n)
	for i := range pkts {
		pkts[i] = sa.Packet{Buf: bufs[i], Off: sa.Headroom, Len: sizes[i]}
	}
	return pkts
}

const xfrmifMaxPacket = 65535

// newFrameSA returns an outbound SA and its inbound twin for inner packets
// of v6's family, keyed the same on every call.
func newFrameSA(t testing.TB, suite satest.Suite, mode sa.Mode, v6 bool) (out, in *sa.SA) {
	key := make([]byte, suite.KeyLen)
	for i := range key {
		key[i] = byte(i + 1)
	}
	src, dst := sfSrc4, sfDst4
	if v6 {
		src, dst = sfSrc6, sfDst6
	}
	aead, enc, auth := suite.Algorithms(key)
	mk := func(dir sa.Dir) *sa.SA {
		s, err := sa.New(sa.Config{Src: src, Dst: dst, SPI: 0x1001, Dir: dir, Mode: mode, IfID: 1,
			AEAD: aead, Enc: enc, Auth: auth, ReplayWindow: 1024}, new(sa.Counters))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	return mk(sa.DirOut), mk(sa.DirIn)
}

// SealSegments reads each segment straight from the frame and makes the
// same ESP packets, byte for byte, as today's path: wireguard/tun's split,
// then SealBatch, with the same SA state; the SA counts the same packets
// and bytes; and the peer opens each into the segment the split made.
// Suites with a random IV (CBC) differ in IV and ciphertext, so for them
// only the opened segments are compared.
func TestSealSegmentsMatchesSplit(t *testing.T) {
	old := newOldSplitter(t)
	frames := []struct {
		name string
		sf   superFrame
	}{
		{"ipv4 tcp", superFrame{gsoType: vnet.GSOTCPv4, payload: 65535 - 20 - 32, mss: 1448, flags: 0x18, opts: 12}},
		{"ipv4 tcp fin odd tail", superFrame{gsoType: vnet.GSOTCPv4, payload: 20001, mss: 1000, flags: 0x19}},
		{"ipv6 tcp", superFrame{v6: true, gsoType: vnet.GSOTCPv6, payload: 60000, mss: 1428, flags: 0x10, opts: 12}},
		{"ipv4 udp", superFrame{udp: true, gsoType: vnet.GSOUDPL4, payload: 30000, mss: 1400}},
		{"ipv6 udp", superFrame{v6: true, udp: true, gsoType: vnet.GSOUDPL4, payload: 9001, mss: 1200}},
		{"ipv4 one packet", superFrame{gsoType: vnet.GSONone, payload: 1000, flags: 0x18}},
		{"ipv6 tiny mss", superFrame{v6: true, gsoType: vnet.GSOTCPv6, payload: 700, mss: 7, flags: 0x18, opts: 40}},
	}
	suites := append(append([]satest.Suite(nil), satest.Suites...), satest.TruncatedGCM...)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, fr := range frames {
		frame := fr.sf.build(rng)
		for _, mode := range []sa.Mode{sa.ModeTunnel, sa.ModeTransport} {
			for _, suite := range suites {
				t.Run(fmt.Sprintf("%s/%v/%s", fr.name, mode, suite.Name), func(t *testing.T) {
					checkSealSegments(t, old, frame, fr.sf.v6, mode, suite)
				})
			}
		}
	}
}

func checkSealSegments(t *testing.T, old *oldSplitter, frame []byte, v6 bool, mode sa.Mode, suite satest.Suite) {
	want := old.split(t, frame)
	clear := make([][]byte, len(want))
	for i := range want {
		clear[i] = append([]byte(nil), want[i].Data()...)
	}
	outOld, _ := newFrameSA(t, suite, mode, v6)
	outOld.SealBatch(want)

	buf := make([]byte, len(frame), len(frame)+gso.Tailroom)
	copy(buf, frame)
	var f gso.Frame
	if err := f.Parse(buf, 128, xfrmifMaxPacket); err != nil {
		t.Fatal(err)
	}
	if f.Segments() != len(want) {
		t.Fatalf("%d segments, the split made %d", f.Segments(), len(want))
	}
	outNew, in := newFrameSA(t, suite, mode, v6)
	got := make([]sa.Packet, f.Segments())
	for i := range got {
		got[i] = sa.Packet{Buf: make([]byte, sa.Headroom+f.SegmentLen(i)+sa.Tailroom), Off: sa.Headroom, Len: f.SegmentLen(i)}
		if got[i].Len != len(clear[i]) {
			t.Fatalf("segment %d: %d bytes, the split made %d", i, got[i].Len, len(clear[i]))
		}
	}
	outNew.SealSegments(got, &f)

	deterministic := suite.Name != "aes-cbc-hmac-sha256"
	for i := range got {
		if got[i].Drop != sa.CounterNone || want[i].Drop != sa.CounterNone {
			t.Fatalf("segment %d: dropped as %v, the old path as %v", i, got[i].Drop, want[i].Drop)
		}
		if deterministic && !bytes.Equal(got[i].Data(), want[i].Data()) {
			t.Fatalf("segment %d: ESP differs from the old path's\ngot  % x\nwant % x", i, head(got[i].Data()), head(want[i].Data()))
		}
		p := []sa.Packet{satest.NewPacket(got[i].Data())}
		in.OpenBatch(p)
		if p[0].Drop != sa.CounterNone {
			t.Fatalf("segment %d: the peer drops it as %v", i, p[0].Drop)
		}
		if mode == sa.ModeTunnel && !bytes.Equal(p[0].Data(), clear[i]) {
			t.Fatalf("segment %d: opens to\n% x\nwant\n% x", i, head(p[0].Data()), head(clear[i]))
		}
	}
	if g, w := outNew.Stats(), outOld.Stats(); g.Packets != w.Packets || g.Bytes != w.Bytes || g.Seq != w.Seq {
		t.Errorf("SA stats %+v, the old path's %+v", g, w)
	}
}

// head is the start of a packet, for failure messages.
func head(b []byte) []byte { return b[:min(len(b), 96)] }

// BenchmarkSealSuperPacket is the transmit path's CPU for one 64 KiB TCP
// super-packet (48 segments of 1,400 bytes, AES-GCM-128, tunnel mode),
// from the read of the frame to the ESP packets, without the send: "split"
// is today's path before SealSegments (wireguard/tun's Read copies each
// segment out and checksums it, an SA lookup per segment, SealBatch),
// "segments" the new one (read the frame, cut it in place, one lookup,
// SealSegments). Both read the frame from a socketpair, as from a TUN.
func BenchmarkSealSuperPacket(b *testing.B) {
	const segments, mss = 48, 1360
	sf := superFrame{gsoType: vnet.GSOTCPv4, payload: segments * mss, mss: mss, flags: 0x18, opts: 0}
	frame := sf.build(rand.New(rand.NewPCG(1, 2)))
	for _, path := range []string{"split", "segments"} {
		b.Run(path, func(b *testing.B) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			old := newOldSplitter(b)
			out, _ := newFrameSA(b, satest.Suites[0], sa.ModeTunnel, false)
			sad := sa.NewSAD(new(sa.Counters))
			if err := sad.Replace([]*sa.SA{out}, nil); err != nil {
				b.Fatal(err)
			}
			batch := old.dev.BatchSize()
			bufs := make([][]byte, batch)
			for i := range bufs {
				bufs[i] = make([]byte, sa.Headroom+1400+sa.Tailroom)
			}
			sizes := make([]int, batch)
			pkts := make([]sa.Packet, batch)
			frameBuf := make([]byte, frameBufSize)
			var f gso.Frame
			b.ReportAllocs()
			b.SetBytes(int64(sf.payload))
			cpu0 := threadCPU()
			for b.Loop() {
				if _, err := unix.Write(old.feed, frame); err != nil {
					b.Fatal(err)
				}
				if path == "split" {
					n, err := old.dev.Read(bufs, sizes, sa.Headroom)
					if err != nil || n != segments {
						b.Fatalf("Read %d, %v", n, err)
					}
					for i := range n {
						p := &pkts[i]
						p.Buf, p.Off, p.Len = bufs[i], sa.Headroom, sizes[i]
						p.SA, _ = sad.LookupOut(1, p.Data())
					}
					pkts[0].SA.SealBatch(pkts[:n])
				} else {
					n, err := old.read(frameBuf[:len(frameBuf)-gso.Tailroom])
					if err != nil {
						b.Fatal(err)
					}
					if err := f.Parse(frameBuf[:n], batch, 1400); err != nil || f.Segments() != segments {
						b.Fatalf("Parse %d segments, %v", f.Segments(), err)
					}
					s, _ := sad.LookupOutSegments(1, f.Packet(), f.Segments())
					for i := range f.Segments() {
						p := &pkts[i]
						p.Buf, p.Off, p.Len = bufs[i], sa.Headroom, f.SegmentLen(i)
					}
					s.SealSegments(pkts[:segments], &f)
				}
				if pkts[0].Drop != sa.CounterNone {
					b.Fatalf("dropped as %v", pkts[0].Drop)
				}
			}
			// The machine is shared: the CPU time this thread spent
			// is the figure, wall time only its upper bound.
			cpu := float64(threadCPU()-cpu0) / float64(b.N)
			b.ReportMetric(cpu, "cpu-ns/superpacket")
			b.ReportMetric(cpu/float64(sf.payload), "cpu-ns/byte")
		})
	}
}

// threadCPU returns the CPU time, user and system, of the calling thread
// (the benchmark's loop stays on one: nothing in it blocks for long).
func threadCPU() int64 {
	var ru unix.Rusage
	unix.Getrusage(unix.RUSAGE_THREAD, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// read reads the frame the feed wrote, raw, as tun's ReadFrame reads a
// TUN queue.
func (o *oldSplitter) read(buf []byte) (int, error) {
	rc, err := o.dev.File().SyscallConn()
	if err != nil {
		return 0, err
	}
	var n int
	var rerr error
	rc.Read(func(fd uintptr) bool {
		n, rerr = unix.Read(int(fd), buf)
		return rerr != unix.EAGAIN
	})
	return n, rerr
}
