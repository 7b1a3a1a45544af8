package underlay

import (
	"net/netip"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// openInNetns opens Conns inside a new network namespace with only lo,
// up, so raw ESP tests see no one else's traffic. The sockets stay in the
// namespace; it disappears when they are closed. Needs root.
func openInNetns(t *testing.T, cfgs ...Config) []*Conn {
	t.Helper()
	return openInNetnsWith(t, func() error { return nil }, cfgs...)
}

// openInNetnsWith is openInNetns with setup run inside the namespace
// after lo is up, before the Conns are opened.
func openInNetnsWith(t *testing.T, setup func() error, cfgs ...Config) []*Conn {
	t.Helper()
	isRoot(t)
	type result struct {
		conns []*Conn
		err   error
	}
	done := make(chan result)
	go func() {
		// The thread is never unlocked: it dies with this goroutine,
		// taking the namespace switch with it.
		runtime.LockOSThread()
		var res result
		defer func() { done <- res }()
		if res.err = unix.Unshare(unix.CLONE_NEWNET); res.err != nil {
			return
		}
		if res.err = linkUp("lo"); res.err != nil {
			return
		}
		if res.err = setup(); res.err != nil {
			return
		}
		for _, cfg := range cfgs {
			c, err := Open(cfg, t.Logf)
			if err != nil {
				res.err = err
				return
			}
			res.conns = append(res.conns, c)
		}
	}()
	res := <-done
	for _, c := range res.conns {
		t.Cleanup(func() { c.Close() })
	}
	if res.err != nil {
		t.Fatalf("network namespace: %v", res.err)
	}
	return res.conns
}

// setMTU sets the MTU of the named interface.
func setMTU(name string, mtu uint32) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return err
	}
	ifr.SetUint32(mtu)
	return unix.IoctlIfreq(fd, unix.SIOCSIFMTU, ifr)
}

// linkUp sets the IFF_UP flag of the named interface.
func linkUp(name string) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// TestRawESP: raw ESP both families; the IPv4 header is stripped whatever
// headroom the caller left; SPI 0 is a header error.
func TestRawESP(t *testing.T) {
	tests := []struct {
		name     string
		from, to netip.Addr
	}{
		// Two loopback addresses, so that the sender's raw socket (bound
		// to its own address) does not see its own packets.
		{"v4", netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2")},
		// One address: the Conn receives what it sends.
		{"v6", netip.MustParseAddr("::1"), netip.MustParseAddr("::1")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs := openInNetns(t,
				Config{UDP: netip.AddrPortFrom(tt.from, 0), RawESP: true},
				Config{UDP: netip.AddrPortFrom(tt.to, 0), RawESP: true})
			a, b := cs[0], cs[1]
			if tt.from == tt.to {
				b = a
			}
			sent := newMessages(40)
			fillBatch(sent, []int{1400, 100, 8, 1000}, netip.AddrPortFrom(tt.to, 4500), true)
			if err := a.WriteBatch(sent); err != nil {
				t.Fatal(err)
			}
			r := readerFor(t, b, true, tt.to.Is6())
			// Headroom of 64, 20, 10 and 0 bytes: a raw IPv4 header lands
			// in the headroom or is moved over.
			for _, off := range []int{64, 20, 10, 0} {
				got := readAllAt(t, r, 10, 10, off)
				for _, m := range got {
					if m.Off != off {
						t.Fatalf("Off = %d after ReadBatch, want %d", m.Off, off)
					}
				}
				checkSame(t, sent[:10], got, netip.AddrPortFrom(tt.from, 0))
				sent = sent[10:]
			}
			// SPI 0 is never ESP.
			bad := newMessages(2)
			fillBatch(bad, []int{64}, netip.AddrPortFrom(tt.to, 0), true)
			copy(bad[0].Data(), []byte{0, 0, 0, 0})
			if err := a.WriteBatch(bad); err != nil {
				t.Fatal(err)
			}
			got := readAll(t, r, 1, 4)
			checkSame(t, bad[1:], got, netip.AddrPortFrom(tt.from, 0))
			if ctr := b.Counters(); ctr.HeaderErrors != 1 {
				t.Errorf("HeaderErrors = %d, want 1", ctr.HeaderErrors)
			}
		})
	}
}

// TestMark: every socket carries SO_MARK.
func TestMark(t *testing.T) {
	const mark = 0x100
	c := openInNetns(t, Config{UDP: netip.MustParseAddrPort("0.0.0.0:0"), RawESP: true, Mark: mark})[0]
	if len(c.Readers()) != 4 {
		t.Fatalf("got readers %v, want udp4, udp6, raw4 and raw6", c.Readers())
	}
	for _, r := range c.Readers() {
		var got int
		var err error
		r.sock.rc.Control(func(fd uintptr) { got, err = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_MARK) })
		if err != nil || got != mark {
			t.Errorf("%v: SO_MARK = %#x, %v; want %#x", r, got, err, mark)
		}
	}
}
