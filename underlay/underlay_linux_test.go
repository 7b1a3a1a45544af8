package underlay

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ipsecd/ipsecd/internal/blocktest"
)

// testHeadroom and testBufSize shape the test buffers: headroom as package
// sa wants it, room for the largest test packet after it.
const (
	testHeadroom = 64
	testBufSize  = testHeadroom + 9000 + 64
)

func openConn(t testing.TB, cfg Config) *Conn {
	t.Helper()
	c, err := Open(cfg, t.Logf)
	if err != nil {
		t.Fatalf("Open(%+v): %v", cfg, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// readerFor returns c's Reader for raw or UDP packets of family v6.
func readerFor(t testing.TB, c *Conn, raw, v6 bool) *Reader {
	t.Helper()
	for _, r := range c.Readers() {
		if r.Raw() == raw && r.sock.v6 == v6 {
			return r
		}
	}
	t.Fatalf("no reader raw=%v v6=%v in %v", raw, v6, c.Readers())
	return nil
}

func newMessages(n int) []Message {
	msgs := make([]Message, n)
	for i := range msgs {
		msgs[i] = Message{Buf: make([]byte, testBufSize), Off: testHeadroom}
	}
	return msgs
}

// espLike writes an ESP-looking packet of size bytes: SPI 0x1000+spi,
// sequence number seq, then a pattern derived from both.
func espLike(b []byte, spi, seq uint32, size int) []byte {
	b = b[:size]
	binary.BigEndian.PutUint32(b[0:], 0x1000+spi)
	binary.BigEndian.PutUint32(b[4:], seq)
	for i := 8; i < size; i++ {
		b[i] = byte(int(seq)*7 + i)
	}
	return b
}

// fillBatch makes msgs[i] an ESP-like packet of sizes[i%len(sizes)] bytes
// to peer.
func fillBatch(msgs []Message, sizes []int, peer netip.AddrPort, raw bool) {
	for i := range msgs {
		m := &msgs[i]
		m.Len = len(espLike(m.Buf[m.Off:], 1, uint32(i+1), sizes[i%len(sizes)]))
		m.Peer = peer
		m.Raw = raw
	}
}

// readAll reads until want packets arrived (or 5 s passed), using batches
// of at most per messages, and returns copies of them.
func readAll(t testing.TB, r *Reader, want, per int) []Message {
	t.Helper()
	return readAllAt(t, r, want, per, testHeadroom)
}

// readAllAt is readAll into buffers with off bytes of headroom.
func readAllAt(t testing.TB, r *Reader, want, per, off int) []Message {
	t.Helper()
	if err := r.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	defer r.SetReadDeadline(time.Time{})
	msgs := newMessages(per)
	for i := range msgs {
		msgs[i].Off = off
	}
	var got []Message
	for len(got) < want {
		n, err := r.ReadBatch(msgs)
		if err != nil {
			t.Fatalf("%v: ReadBatch after %d of %d packets: %v", r, len(got), want, err)
		}
		for _, m := range msgs[:n] {
			c := m
			c.Buf = append([]byte(nil), m.Buf...)
			got = append(got, c)
		}
	}
	return got
}

// checkSame compares what was sent with what arrived: same order, same
// bytes, from the right peer, at the right offset.
func checkSame(t testing.TB, sent, got []Message, from netip.AddrPort) {
	t.Helper()
	if len(got) != len(sent) {
		t.Fatalf("got %d packets, want %d", len(got), len(sent))
	}
	for i := range sent {
		if !bytes.Equal(got[i].Data(), sent[i].Data()) {
			t.Fatalf("packet %d: got %d bytes (seq %d), want %d bytes (seq %d)", i,
				got[i].Len, binary.BigEndian.Uint32(got[i].Data()[4:]), sent[i].Len, binary.BigEndian.Uint32(sent[i].Data()[4:]))
		}
		if got[i].Peer != from {
			t.Fatalf("packet %d: Peer = %v, want %v", i, got[i].Peer, from)
		}
		if got[i].Raw != sent[i].Raw {
			t.Fatalf("packet %d: Raw = %v, want %v", i, got[i].Raw, sent[i].Raw)
		}
	}
}

var loopbacks = []struct {
	name string
	addr netip.Addr
}{
	{"v4", netip.MustParseAddr("127.0.0.1")},
	{"v6", netip.MustParseAddr("::1")},
}

var offloads = []struct {
	name string
	cfg  Config
}{
	{"plain", Config{DisableGSO: true, DisableGRO: true}},
	{"gso-gro", Config{}},
}

// TestUDPLoopback: batches of mixed sizes both ways keep order and bytes.
func TestUDPLoopback(t *testing.T) {
	// Runs of equal sizes (coalesced with GSO) broken by other sizes.
	sizes := []int{1400, 1400, 1400, 1400, 64, 8, 1400, 1400, 600, 9000, 100, 100, 100, 1500}
	for _, lo := range loopbacks {
		for _, off := range offloads {
			t.Run(lo.name+"/"+off.name, func(t *testing.T) {
				cfg := off.cfg
				cfg.UDP = netip.AddrPortFrom(lo.addr, 0)
				a, b := openConn(t, cfg), openConn(t, cfg)
				addrA := netip.AddrPortFrom(lo.addr, a.Port())
				addrB := netip.AddrPortFrom(lo.addr, b.Port())
				const n = 300 // more than one BatchSize
				for _, dir := range []struct {
					name       string
					from, to   *Conn
					fromA, toA netip.AddrPort
				}{{"a to b", a, b, addrA, addrB}, {"b to a", b, a, addrB, addrA}} {
					sent := newMessages(n)
					fillBatch(sent, sizes, dir.toA, false)
					if err := dir.from.WriteBatch(sent); err != nil {
						t.Fatalf("%s: WriteBatch: %v", dir.name, err)
					}
					got := readAll(t, readerFor(t, dir.to, false, lo.addr.Is6()), n, BatchSize)
					checkSame(t, sent, got, dir.fromA)
				}
				ca, cb := a.Counters(), b.Counters()
				if ca.TxPackets != n || cb.RxPackets != n || cb.TxPackets != n || ca.RxPackets != n {
					t.Errorf("counters: a %+v, b %+v; want %d packets each way", ca, cb, n)
				}
				if off.cfg.DisableGSO && ca.TxGSO != 0 {
					t.Errorf("TxGSO = %d with GSO disabled", ca.TxGSO)
				}
			})
		}
	}
}

// TestUDPClassification: keepalives, IKE and short datagrams are counted
// and not handed up; the IKE hook sees the datagram.
func TestUDPClassification(t *testing.T) {
	for _, lo := range loopbacks {
		for _, off := range offloads {
			t.Run(lo.name+"/"+off.name, func(t *testing.T) {
				var mu sync.Mutex
				var ike [][]byte
				cfg := off.cfg
				cfg.UDP = netip.AddrPortFrom(lo.addr, 0)
				cfg.NonESP = func(b []byte, peer netip.AddrPort, local netip.Addr) {
					mu.Lock()
					ike = append(ike, append([]byte(nil), b...))
					mu.Unlock()
				}
				c := openConn(t, cfg)
				peer, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(lo.addr, c.Port())))
				if err != nil {
					t.Fatal(err)
				}
				defer peer.Close()
				ikeMsg := []byte{0, 0, 0, 0, 0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4}
				esp := espLike(make([]byte, 32), 7, 1, 32)
				for _, d := range [][]byte{{0xff}, ikeMsg, {1, 2, 3, 4, 5}, {0x01}, esp} {
					if _, err := peer.Write(d); err != nil {
						t.Fatal(err)
					}
				}
				got := readAll(t, readerFor(t, c, false, lo.addr.Is6()), 1, 8)
				if !bytes.Equal(got[0].Data(), esp) {
					t.Errorf("got % x, want the ESP packet % x", got[0].Data(), esp)
				}
				if want := netip.MustParseAddrPort(peer.LocalAddr().String()); got[0].Peer != want {
					t.Errorf("Peer = %v, want %v", got[0].Peer, want)
				}
				ctr := c.Counters()
				if ctr.Keepalives != 1 || ctr.NonESP != 1 || ctr.HeaderErrors != 2 || ctr.RxPackets != 1 {
					t.Errorf("counters %+v: want 1 keepalive, 1 non-ESP, 2 header errors, 1 packet", ctr)
				}
				mu.Lock()
				defer mu.Unlock()
				if len(ike) != 1 || !bytes.Equal(ike[0], ikeMsg) {
					t.Errorf("NonESP hook saw %x, want [%x]", ike, ikeMsg)
				}
			})
		}
	}
}

// TestDualStack: an unspecified address serves both families on one port,
// the IPv6 socket IPv6-only, and reports and selects the local address.
func TestDualStack(t *testing.T) {
	c := openConn(t, Config{UDP: netip.MustParseAddrPort("0.0.0.0:0")})
	if len(c.Readers()) != 2 {
		t.Fatalf("got readers %v, want udp4 and udp6", c.Readers())
	}
	r6 := readerFor(t, c, false, true)
	if r6.LocalAddr() != netip.AddrPortFrom(netip.IPv6Unspecified(), c.Port()) {
		t.Errorf("udp6 bound to %v, want [::]:%d", r6.LocalAddr(), c.Port())
	}
	var v6only int
	var gerr error
	r6.sock.rc.Control(func(fd uintptr) { v6only, gerr = unix.GetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_V6ONLY) })
	if gerr != nil || v6only != 1 {
		t.Errorf("IPV6_V6ONLY = %d, %v; want 1", v6only, gerr)
	}
	for _, lo := range loopbacks {
		t.Run(lo.name, func(t *testing.T) {
			peer, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(lo.addr, 0)))
			if err != nil {
				t.Fatal(err)
			}
			defer peer.Close()
			esp := espLike(make([]byte, 40), 2, 9, 40)
			if _, err := peer.WriteToUDPAddrPort(esp, netip.AddrPortFrom(lo.addr, c.Port())); err != nil {
				t.Fatal(err)
			}
			got := readAll(t, readerFor(t, c, false, lo.addr.Is6()), 1, 4)
			peerAddr := netip.MustParseAddrPort(peer.LocalAddr().String())
			if !bytes.Equal(got[0].Data(), esp) || got[0].Peer != peerAddr || got[0].Local != lo.addr {
				t.Fatalf("got % x from %v on %v, want % x from %v on %v", got[0].Data(), got[0].Peer, got[0].Local, esp, peerAddr, lo.addr)
			}
			// Reply from the address it arrived on.
			reply := newMessages(1)
			fillBatch(reply, []int{100}, got[0].Peer, false)
			reply[0].Local = got[0].Local
			if err := c.WriteBatch(reply); err != nil {
				t.Fatal(err)
			}
			peer.SetReadDeadline(time.Now().Add(5 * time.Second))
			buf := make([]byte, 2000)
			n, from, err := peer.ReadFromUDPAddrPort(buf)
			if err != nil {
				t.Fatal(err)
			}
			if want := netip.AddrPortFrom(lo.addr, c.Port()); from != want || !bytes.Equal(buf[:n], reply[0].Data()) {
				t.Errorf("reply from %v (%d bytes), want from %v (%d bytes)", from, n, want, reply[0].Len)
			}
		})
	}
}

// TestWriteNoSocket: a message no socket carries is counted and the rest
// of the batch still goes out.
func TestWriteNoSocket(t *testing.T) {
	a := openConn(t, Config{UDP: netip.MustParseAddrPort("127.0.0.1:0"), DisableGRO: true})
	b := openConn(t, Config{UDP: netip.MustParseAddrPort("127.0.0.1:0"), DisableGRO: true})
	to := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), b.Port())
	msgs := newMessages(3)
	fillBatch(msgs, []int{100}, to, false)
	msgs[1].Peer = netip.MustParseAddrPort("[::1]:4500")
	msgs[2].Raw = true
	err := a.WriteBatch(msgs)
	if err != ErrNoSocket {
		t.Errorf("WriteBatch error = %v, want ErrNoSocket", err)
	}
	got := readAll(t, readerFor(t, b, false, false), 1, 4)
	if !bytes.Equal(got[0].Data(), msgs[0].Data()) {
		t.Errorf("the sendable message did not arrive intact")
	}
	if ctr := a.Counters(); ctr.SendErrors != 2 || ctr.TxPackets != 1 {
		t.Errorf("counters %+v: want 2 send errors, 1 packet sent", ctr)
	}
}

// TestClose: Close unblocks a reader with ErrClosed.
func TestClose(t *testing.T) {
	c := openConn(t, Config{UDP: netip.MustParseAddrPort("127.0.0.1:0")})
	errc := make(chan error, 1)
	go func() {
		_, err := c.Readers()[0].ReadBatch(newMessages(1))
		errc <- err
	}()
	blocktest.Wait(t, "(*Reader).ReadBatch")
	select {
	case err := <-errc:
		t.Fatalf("ReadBatch returned %v before Close, want it blocked", err)
	default:
	}
	c.Close()
	select {
	case err := <-errc:
		if !errorsIs(err, ErrClosed) {
			t.Errorf("ReadBatch after Close: %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("ReadBatch still blocked 5 s after Close")
	}
	if err := c.WriteBatch(newMessages(1)); !errorsIs(err, ErrClosed) && err != ErrNoSocket {
		t.Errorf("WriteBatch after Close: %v, want ErrClosed", err)
	}
}

func isRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (raw sockets, SO_MARK, network namespaces); skipped")
	}
}

func errorsIs(err, target error) bool { return err != nil && errors.Is(err, target) }
