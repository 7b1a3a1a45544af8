package tun

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/internal/gso"
	"github.com/ipsecd/ipsecd/tun/netnstest"
)

var (
	testAddrs = []netip.Prefix{
		netip.MustParsePrefix("192.0.2.1/24"),
		netip.MustParsePrefix("2001:db8:1::1/64"),
	}
	testRoutes = []netip.Prefix{
		netip.MustParsePrefix("198.51.100.0/24"),
		netip.MustParsePrefix("2001:db8:2::/64"),
	}
)

const testMTU = 1400

// openConfigured opens a device in ns and configures it as the daemon
// does: MTU and up, addresses, routes. It is closed at cleanup.
func openConfigured(t testing.TB, ns *netnstest.NS, name string, queues int, opts ...Options) *Device {
	t.Helper()
	var d *Device
	err := ns.Do(func() error {
		var err error
		var o Options
		if len(opts) > 0 {
			o = opts[0]
		}
		d, err = OpenOptions(name, testMTU, queues, o)
		if err != nil {
			return err
		}
		return configure(d, testAddrs, testRoutes)
	})
	if d != nil {
		t.Cleanup(func() { d.Close() })
	}
	if err != nil {
		t.Fatalf("Open(%q, %d, %d): %v", name, testMTU, queues, err)
	}
	return d
}

func configure(d *Device, addrs, routes []netip.Prefix) error {
	for _, a := range addrs {
		if err := d.AddAddress(a); err != nil {
			return err
		}
	}
	for _, r := range routes {
		if err := d.AddRoute(r); err != nil {
			return err
		}
	}
	return nil
}

// received is a packet read from queue q.
type received struct {
	q   int
	pkt []byte
}

// readAll reads every queue of d until stop is closed, sending a copy of
// each packet on the returned channel, and the sizes of each Read call's
// packets on calls (if not nil).
func readAll(t testing.TB, d *Device, stop <-chan struct{}, calls chan<- []int) <-chan received {
	t.Helper()
	return readQueues(t, d, stop, calls, false)
}

// readQueues is readAll, reading with ReadFrame and cutting each frame
// with gso.Frame (as the data path does) when frames is set, else with
// Read.
func readQueues(t testing.TB, d *Device, stop <-chan struct{}, calls chan<- []int, frames bool) <-chan received {
	t.Helper()
	out := make(chan received, 4096)
	var wg sync.WaitGroup
	for qi, q := range d.Queues() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bufs := make([][]byte, q.BatchSize())
			for i := range bufs {
				bufs[i] = make([]byte, MinOffset+MaxPacketSize)
			}
			sizes := make([]int, len(bufs))
			frameBuf := make([]byte, MaxFrameSize+gso.Tailroom)
			var f gso.Frame
			for {
				select {
				case <-stop:
					return
				default:
				}
				d.SetReadDeadline(qi, time.Now().Add(50*time.Millisecond))
				var n int
				var err error
				if frames {
					n, err = q.(*queue).ReadFrame(frameBuf[:MaxFrameSize])
					if err == nil {
						if err = f.Parse(frameBuf[:n], len(bufs), MinOffset+MaxPacketSize); err == nil {
							n = f.Segments()
							for i := range n {
								sizes[i] = copy(bufs[i][MinOffset:], f.Segment(i))
							}
						}
					}
				} else {
					n, err = q.Read(bufs, sizes, MinOffset)
				}
				if errors.Is(err, os.ErrDeadlineExceeded) {
					continue
				}
				if err != nil {
					if !errors.Is(err, os.ErrClosed) {
						t.Errorf("queue %d: Read: %v", qi, err)
					}
					return
				}
				if calls != nil {
					select {
					case calls <- append([]int(nil), sizes[:n]...):
					default:
					}
				}
				for i := range n {
					p := bytes.Clone(bufs[i][MinOffset : MinOffset+sizes[i]])
					select {
					case out <- received{qi, p}:
					default:
					}
				}
			}
		}()
	}
	t.Cleanup(wg.Wait)
	return out
}

type ipLink struct {
	MTU   int      `json:"mtu"`
	Flags []string `json:"flags"`
}

type ipAddr struct {
	AddrInfo []struct {
		Local     string `json:"local"`
		Prefixlen int    `json:"prefixlen"`
	} `json:"addr_info"`
}

type ipRoute struct {
	Dst string `json:"dst"`
	Dev string `json:"dev"`
}

func decode[T any](t testing.TB, s string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("decode %q: %v", s, err)
	}
	return v
}

func has(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func TestOpenConfigure(t *testing.T) {
	for _, tt := range []struct {
		queues  int
		monitor bool
	}{{1, false}, {4, false}, {4, true}} {
		queues := tt.queues
		t.Run(fmt.Sprintf("queues=%d/monitor=%v", queues, tt.monitor), func(t *testing.T) {
			ns := netnstest.New(t, "tun")
			d := openConfigured(t, ns, "ipsec1", queues, Options{Monitor: tt.monitor})
			if got := len(d.Queues()); got != queues {
				t.Errorf("len(Queues()) = %d, want %d", got, queues)
			}
			if got := d.BatchSize(); got != 128 {
				t.Errorf("BatchSize() = %d, want 128 (offloads on)", got)
			}
			links := decode[[]ipLink](t, ns.IP(t, "-j", "link", "show", "dev", "ipsec1"))
			if len(links) != 1 {
				t.Fatalf("ip link show: %d links, want 1", len(links))
			}
			if links[0].MTU != testMTU {
				t.Errorf("mtu %d, want %d", links[0].MTU, testMTU)
			}
			if !has(links[0].Flags, "UP") {
				t.Errorf("flags %v, want UP", links[0].Flags)
			}
			addrs := decode[[]ipAddr](t, ns.IP(t, "-j", "addr", "show", "dev", "ipsec1"))
			var got []string
			for _, a := range addrs {
				for _, ai := range a.AddrInfo {
					got = append(got, fmt.Sprintf("%s/%d", ai.Local, ai.Prefixlen))
				}
			}
			for _, want := range testAddrs {
				if !has(got, want.String()) {
					t.Errorf("addresses %v, want %v among them", got, want)
				}
			}
			// No link-local address: address generation is off, so
			// the kernel sends no router solicitations into the tunnel.
			if len(got) != len(testAddrs) {
				t.Errorf("addresses %v, want only %v", got, testAddrs)
			}
			var dsts []string
			for _, fam := range []string{"-4", "-6"} {
				for _, r := range decode[[]ipRoute](t, ns.IP(t, fam, "-j", "route", "show", "dev", "ipsec1")) {
					dsts = append(dsts, r.Dst)
				}
			}
			for _, want := range testRoutes {
				if !has(dsts, want.String()) {
					t.Errorf("routes %v, want %v among them", dsts, want)
				}
			}
			// Removing and re-adding is idempotent.
			if err := d.RemoveRoute(testRoutes[0]); err != nil {
				t.Errorf("RemoveRoute: %v", err)
			}
			if err := d.RemoveRoute(testRoutes[0]); err != nil {
				t.Errorf("RemoveRoute twice: %v", err)
			}
			if err := d.AddAddress(testAddrs[0]); err != nil {
				t.Errorf("AddAddress twice: %v", err)
			}
			if err := d.RemoveAddress(testAddrs[1]); err != nil {
				t.Errorf("RemoveAddress: %v", err)
			}
			if out := ns.IP(t, "-6", "addr", "show", "dev", "ipsec1"); bytes.Contains([]byte(out), []byte("2001:db8:1::1")) {
				t.Errorf("address still there after RemoveAddress: %s", out)
			}

			if err := d.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if out := ns.IP(t, "-j", "link", "show"); bytes.Contains([]byte(out), []byte("ipsec1")) {
				t.Errorf("ipsec1 still exists after Close: %s", out)
			}
		})
	}
}

// TestWriteDelivers writes UDP packets into the device (inbound direction)
// and expects a socket in the namespace to receive them, one batch GRO
// coalesced by the Write.
func TestWriteDelivers(t *testing.T) {
	for _, queues := range []int{1, 4} {
		for _, fam := range []string{"ipv4", "ipv6"} {
			t.Run(fmt.Sprintf("queues=%d/%s", queues, fam), func(t *testing.T) {
				ns := netnstest.New(t, "tun")
				d := openConfigured(t, ns, "ipsec1", queues)
				local, remote := testAddrs[0].Addr(), netip.MustParseAddr("198.51.100.7")
				if fam == "ipv6" {
					local, remote = testAddrs[1].Addr(), netip.MustParseAddr("2001:db8:2::7")
				}
				var conn *net.UDPConn
				if err := ns.Do(func() (err error) {
					conn, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(local, 0)))
					return err
				}); err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				dst := conn.LocalAddr().(*net.UDPAddr).AddrPort()
				src := netip.AddrPortFrom(remote, 4500)

				const n = 8
				var bufs [][]byte
				for i := range n {
					payload := bytes.Repeat([]byte{byte(i)}, 1000)
					bufs = append(bufs, append(make([]byte, MinOffset), udpPacket(src, dst, payload)...))
				}
				for qi, q := range d.Queues() {
					if _, err := q.Write(bufs, MinOffset); err != nil {
						t.Fatalf("queue %d: Write: %v", qi, err)
					}
				}
				conn.SetReadDeadline(time.Now().Add(2 * time.Second))
				buf := make([]byte, 2000)
				for i := range n * queues {
					m, from, err := conn.ReadFromUDPAddrPort(buf)
					if err != nil {
						t.Fatalf("datagram %d: %v", i, err)
					}
					if from.Addr().Unmap() != src.Addr() || from.Port() != src.Port() {
						t.Errorf("from %v, want %v", from, src)
					}
					want := bytes.Repeat([]byte{byte(i % n)}, 1000)
					if !bytes.Equal(buf[:m], want) {
						t.Errorf("datagram %d: got %d bytes of %#x, want 1000 of %#x", i, m, buf[0], i%n)
					}
				}
			})
		}
	}
}

// TestReadRouted sends UDP from the namespace to routed addresses and reads
// the datagrams from the queues. With 4 queues every flow stays on one.
func TestReadRouted(t *testing.T) {
	for _, queues := range []int{1, 4} {
		t.Run(fmt.Sprintf("queues=%d", queues), func(t *testing.T) {
			ns := netnstest.New(t, "tun")
			d := openConfigured(t, ns, "ipsec1", queues)
			stop := make(chan struct{})
			defer close(stop)
			pkts := readAll(t, d, stop, nil)

			const flows, perFlow = 16, 10
			dsts := []netip.AddrPort{
				netip.MustParseAddrPort("198.51.100.9:5001"),
				netip.MustParseAddrPort("[2001:db8:2::9]:5001"),
			}
			var conns []*net.UDPConn
			if err := ns.Do(func() error {
				for i := range flows {
					c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(testAddrs[i%2].Addr(), 0)))
					if err != nil {
						return err
					}
					conns = append(conns, c)
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			for _, c := range conns {
				defer c.Close()
			}
			for j := range perFlow {
				for i, c := range conns {
					msg := fmt.Appendf(nil, "flow %d packet %d", i, j)
					if _, err := c.WriteToUDPAddrPort(msg, dsts[i%2]); err != nil {
						t.Fatalf("flow %d: %v", i, err)
					}
				}
			}
			flowQueue := map[netip.AddrPort]int{}
			perQueue := make([]int, queues)
			count := 0
			timeout := time.After(3 * time.Second)
			for count < flows*perFlow {
				select {
				case r := <-pkts:
					p, ok := parse(r.pkt)
					if !ok || p.proto != 17 || p.dst.Port() != 5001 {
						continue // e.g. IPv6 router solicitations
					}
					if !p.l4Checksum {
						t.Errorf("%v -> %v: bad UDP checksum", p.src, p.dst)
					}
					var i, j int
					if _, err := fmt.Sscanf(string(p.payload), "flow %d packet %d", &i, &j); err != nil {
						t.Errorf("payload %q: %v", p.payload, err)
					}
					if want := conns[i].LocalAddr().(*net.UDPAddr).AddrPort(); p.src.Port() != want.Port() {
						t.Errorf("payload %q from port %d, want %d", p.payload, p.src.Port(), want.Port())
					}
					if q, ok := flowQueue[p.src]; ok && q != r.q {
						t.Errorf("flow %v on queues %d and %d, want one", p.src, q, r.q)
					}
					flowQueue[p.src] = r.q
					perQueue[r.q]++
					count++
				case <-timeout:
					t.Fatalf("read %d of %d datagrams", count, flows*perFlow)
				}
			}
			t.Logf("datagrams per queue: %v", perQueue)
			if queues > 1 {
				used := 0
				for _, n := range perQueue {
					if n > 0 {
						used++
					}
				}
				if used < 2 {
					t.Errorf("%d flows all on one queue: %v", flows, perQueue)
				}
			}
		})
	}
}

// TestReadSplitsTSO answers a TCP handshake from the namespace, then reads
// the bulk data: with TSO on, the kernel hands the TUN super-packets, and
// Read returns them split into segments no larger than the MTU.
//
// ReadFrame hands out the super-packets uncut; gso.Frame, cutting them
// in place as the data path does, makes the same segments.
func TestReadSplitsTSO(t *testing.T) {
	for _, frames := range []bool{false, true} {
		name := "Read"
		if frames {
			name = "ReadFrame"
		}
		t.Run(name, func(t *testing.T) { readSplitsTSO(t, frames) })
	}
}

func readSplitsTSO(t *testing.T, frames bool) {
	ns := netnstest.New(t, "tun")
	d := openConfigured(t, ns, "ipsec1", 1)
	stop := make(chan struct{})
	defer close(stop)
	calls := make(chan []int, 1024)
	pkts := readQueues(t, d, stop, calls, frames)

	peer := netip.MustParseAddrPort("198.51.100.10:8080")
	connc := make(chan net.Conn, 1)
	errc := make(chan error, 1)
	go func() {
		errc <- ns.Do(func() error {
			c, err := net.DialTimeout("tcp", peer.String(), 3*time.Second)
			if err != nil {
				return err
			}
			connc <- c
			return nil
		})
	}()

	// Answer the SYN with a SYN-ACK advertising a large MSS.
	var syn parsed
	timeout := time.After(3 * time.Second)
	for syn.flags&tcpSYN == 0 {
		select {
		case r := <-pkts:
			if p, ok := parse(r.pkt); ok && p.proto == 6 && p.dst == peer {
				syn = p
			}
		case <-timeout:
			t.Fatal("no SYN read from the TUN")
		}
	}
	const iss = 1000
	synack := tcpPacket(peer, syn.src, iss, syn.seq+1, tcpSYN|tcpACK, 1460, nil)
	if _, err := d.Queues()[0].Write([][]byte{append(make([]byte, MinOffset), synack...)}, MinOffset); err != nil {
		t.Fatalf("Write SYN-ACK: %v", err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("dial: %v", err)
	}
	c := <-connc
	defer c.Close()
	go c.Write(make([]byte, 256<<10)) // blocks once the window is full; ends on Close

	var segments, bytes, multi int
	var maxSize int
	timeout = time.After(3 * time.Second)
	for multi == 0 || segments < 10 {
		select {
		case sizes := <-calls:
			if len(sizes) > 1 {
				multi++
			}
			for _, s := range sizes {
				maxSize = max(maxSize, s)
				if s > testMTU {
					t.Errorf("segment of %d bytes, want <= MTU %d", s, testMTU)
				}
			}
		case r := <-pkts:
			if p, ok := parse(r.pkt); ok && p.proto == 6 && len(p.payload) > 0 {
				segments++
				bytes += len(p.payload)
				if !p.l4Checksum {
					t.Errorf("segment seq %d: bad TCP checksum", p.seq)
				}
			}
		case <-timeout:
			t.Fatalf("after 3s: %d data segments, %d reads of more than one packet; want a split super-packet", segments, multi)
		}
	}
	t.Logf("%d data segments (%d bytes), %d reads returned several packets, largest %d bytes", segments, bytes, multi, maxSize)
}

// TestCreateRemoveMany times creating, configuring and removing devices,
// as the daemon does at start and on reload.
func TestCreateRemoveMany(t *testing.T) {
	n := 200
	if testing.Short() {
		n = 20
	}
	ns := netnstest.New(t, "tun")
	devs := make([]*Device, 0, n)
	t.Cleanup(func() {
		for _, d := range devs {
			d.Close()
		}
	})
	start := time.Now()
	err := ns.Do(func() error {
		for i := range n {
			d, err := Open(fmt.Sprintf("ipsec%d", i), testMTU, 1)
			if err != nil {
				return err
			}
			devs = append(devs, d)
			a := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 1}), 24)
			r := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 128 + byte(i>>8), byte(i), 0}), 24)
			a6 := netip.PrefixFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 1, byte(i >> 8), byte(i), 15: 1}), 64)
			r6 := netip.PrefixFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 2, byte(i >> 8), byte(i)}), 64)
			if err := configure(d, []netip.Prefix{a, a6}, []netip.Prefix{r, r6}); err != nil {
				return err
			}
		}
		return nil
	})
	created := time.Since(start)
	if err != nil {
		t.Fatalf("after %d devices: %v", len(devs), err)
	}
	if got := len(decode[[]ipLink](t, ns.IP(t, "-j", "link", "show"))); got != n+1 {
		t.Errorf("%d links, want %d and lo", got, n)
	}
	// Close in parallel: each removal waits for RCU grace periods, which
	// overlap when removals run concurrently (serially 20ms each).
	start = time.Now()
	var wg sync.WaitGroup
	ch := make(chan *Device)
	for range 32 {
		wg.Go(func() {
			for d := range ch {
				if err := d.Close(); err != nil {
					t.Errorf("Close %s: %v", d.Name(), err)
				}
			}
		})
	}
	for _, d := range devs {
		ch <- d
	}
	close(ch)
	wg.Wait()
	removed := time.Since(start)
	t.Logf("%d devices with 2 addresses and 2 routes each: create+configure %v (%v each, 1000 in ~%v), remove %v (%v each)",
		n, created, created/time.Duration(n), created/time.Duration(n)*1000, removed, removed/time.Duration(n))
	if got := len(decode[[]ipLink](t, ns.IP(t, "-j", "link", "show"))); got != 1 {
		t.Errorf("%d links after Close, want lo only", got)
	}
	if per := created / time.Duration(n); per > 5*time.Millisecond {
		t.Errorf("%v per device, want under 5ms (1,000 interfaces in 5s)", per)
	}
}
