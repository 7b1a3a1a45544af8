//go:build linux

package ike

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/ike/message"
	"github.com/ipsecd/ipsecd/tun/netnstest"
)

// charonBin is Debian's charon (strongswan-charon); it is not on PATH.
const charonBin = "/usr/lib/ipsec/charon"

var (
	charonAddr = netip.MustParseAddrPort("192.0.2.1:500")
	driverAddr = netip.MustParseAddrPort("192.0.2.2:500")
)

// charonConf is strongswan.conf: kernel-libipsec (this kernel has no ESP)
// before kernel-netlink, and ike = 4, chd = 4 so that the log holds the
// derived keys the test compares with ours.
const charonConf = `charon {
  load = random nonce openssl pem pkcs1 x509 pubkey curve25519 gcm chapoly aes sha2 sha1 hmac kdf gmp kernel-libipsec kernel-netlink socket-default vici
  install_routes = yes
  filelog {
    test {
      path = %s
      time_format = %%T
      default = 1
      ike = 4
      chd = 4
      flush_line = yes
    }
  }
  syslog { daemon { default = -1 } }
}
`

const swanctlConf = `connections {
  test {
    version = 2
    local_addrs = 192.0.2.1
    remote_addrs = 192.0.2.2
    proposals = %s
    encap = no
    mobike = no
    local { auth = psk
            id = a.test }
    remote { auth = psk
             id = b.test }
    children {
      net {
        mode = tunnel
        local_ts = 198.51.100.0/24
        remote_ts = 203.0.113.0/24
        esp_proposals = %s
        start_action = none
      }
    }
  }
}
secrets {
  ike-test {
    id-a = a.test
    id-b = b.test
    secret = "a-test-psk-not-a-secret"
  }
}
`

// charon is one charon in a namespace of its own with a private /run.
type charon struct {
	t   *testing.T
	dir string
	pid int
	log string
}

func startCharon(t *testing.T, ns *netnstest.NS) *charon {
	t.Helper()
	dir := t.TempDir()
	c := &charon{t: t, dir: dir, log: filepath.Join(dir, "charon.log")}
	conf := filepath.Join(dir, "strongswan.conf")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(charonConf, c.log)), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("ip", "netns", "exec", ns.Name, "unshare", "-m", "sh", "-c",
		"mount -t tmpfs tmpfs /run && exec env STRONGSWAN_CONF="+conf+" "+charonBin)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// ip netns exec, unshare and sh all exec: the pid is charon's.
	c.pid = cmd.Process.Pid
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			b, _ := os.ReadFile(c.log)
			t.Logf("charon output:\n%s\ncharon log:\n%s", out.String(), b)
		}
	})
	for i := 0; ; i++ {
		if _, err := c.swanctl("--stats"); err == nil {
			break
		}
		if i == 50 {
			t.Fatalf("charon did not open its vici socket in 5 s: %s", out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	return c
}

// swanctl runs swanctl inside charon's namespaces.
func (c *charon) swanctl(args ...string) (string, error) {
	out, err := exec.Command("nsenter", append([]string{"-t", fmt.Sprint(c.pid), "-m", "-n", "swanctl"}, args...)...).CombinedOutput()
	return string(out), err
}

func (c *charon) load(ike, esp string) {
	c.t.Helper()
	f := filepath.Join(c.dir, "swanctl.conf")
	if err := os.WriteFile(f, []byte(fmt.Sprintf(swanctlConf, ike, esp)), 0o600); err != nil {
		c.t.Fatal(err)
	}
	if out, err := c.swanctl("--load-all", "--clear", "--file", f); err != nil {
		c.t.Fatalf("swanctl --load-all: %v\n%s", err, out)
	}
}

func (c *charon) logSize() int {
	b, _ := os.ReadFile(c.log)
	return len(b)
}

// loggedKey returns the key charon logged as "NAME => N bytes @ ADDR",
// followed by hex dump lines, after offset from in the log.
func (c *charon) loggedKey(from int, name string) []byte {
	c.t.Helper()
	b, _ := os.ReadFile(c.log)
	lines := strings.Split(string(b[from:]), "\n")
	dump := regexp.MustCompile(`^\s*\d+: ((?:[0-9A-F]{2} ){0,15}[0-9A-F]{2})`)
	for i, l := range lines {
		if !strings.Contains(l, name+" =>") {
			continue
		}
		var key []byte
		for _, d := range lines[i+1:] {
			// The file logger prefixes every line with time and thread.
			if j := strings.Index(d, "] "); j >= 0 && j < 20 {
				d = d[j+2:]
			}
			m := dump.FindStringSubmatch(d)
			if m == nil {
				break
			}
			h, _ := hex.DecodeString(strings.ReplaceAll(m[1], " ", ""))
			key = append(key, h...)
		}
		return key
	}
	c.t.Fatalf("charon's log has no %q", name)
	return nil
}

// driver runs our IKE SAs over UDP sockets on ports 500 and 4500 in the
// driver namespace, as the daemon will: messages on 4500 carry the
// non-ESP marker, and messages go to the SA their SPIs name.
type driver struct {
	c500, c4500 *net.UDPConn
	in          chan packet
	cfg         *Config
	sa          *SA   // the current IKE SA (the newest after a rekey)
	sas         []*SA // every SA still able to talk
	events      []Event
	errs        []error
}

type packet struct {
	b         []byte
	from      netip.AddrPort
	localPort uint16
}

var nonESPMarker = []byte{0, 0, 0, 0}

func newDriver(c500, c4500 *net.UDPConn) *driver {
	d := &driver{c500: c500, c4500: c4500, in: make(chan packet, 16)}
	for _, c := range []*net.UDPConn{c500, c4500} {
		go d.read(c)
	}
	return d
}

func (d *driver) reset(cfg *Config) {
	d.cfg, d.sa, d.sas, d.events, d.errs = cfg, nil, nil, nil, nil
}

// read feeds the packets of one socket to the driver until it is closed.
func (d *driver) read(c *net.UDPConn) {
	port := netip.MustParseAddrPort(c.LocalAddr().String()).Port()
	for {
		buf := make([]byte, 65536)
		n, from, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			return
		}
		b := buf[:n]
		if port == NATTPort {
			if n < 4 || !bytes.Equal(b[:4], nonESPMarker) {
				continue // ESP or a keepalive, not IKE
			}
			b = b[4:]
		}
		d.in <- packet{b: b, from: from, localPort: port}
	}
}

func (d *driver) send(b []byte, to netip.AddrPort, localPort uint16) {
	if localPort == NATTPort {
		d.c4500.WriteToUDPAddrPort(append(append([]byte(nil), nonESPMarker...), b...), to)
		return
	}
	d.c500.WriteToUDPAddrPort(b, to)
}

// request sends a request an SA made, to the SA's peer.
func (d *driver) request(sa *SA, b []byte) {
	l, r := sa.Addrs()
	d.send(b, r, l.Port())
}

func (d *driver) add(sa *SA) {
	d.sa = sa
	d.sas = append(d.sas, sa)
}

// start sends our IKE_SA_INIT request.
func (d *driver) start() error {
	sa, msg, err := Initiate(d.cfg, driverAddr, charonAddr, time.Now())
	if err != nil {
		return err
	}
	d.add(sa)
	d.request(sa, msg)
	return nil
}

func (d *driver) find(h message.Header) *SA {
	for i := len(d.sas) - 1; i >= 0; i-- {
		sa := d.sas[i]
		ispi, rspi := sa.SPIs()
		if h.ISPI() == ispi && (h.RSPI() == rspi || h.ExchangeType() == message.IKESAInit) {
			return sa
		}
	}
	return nil
}

func (d *driver) collect(sa *SA) {
	for _, e := range sa.TakeEvents() {
		d.events = append(d.events, e)
		if e.Kind == EventIKERekeyed {
			d.add(e.SA)
		}
	}
}

// serve answers and retransmits until done reports true or ten seconds
// pass (an error).
func (d *driver) serve(done func() bool) error {
	until := time.Now().Add(10 * time.Second)
	for !done() {
		if time.Now().After(until) {
			return fmt.Errorf("timed out; errors so far: %v", d.errs)
		}
		var p packet
		select {
		case p = <-d.in:
		case <-time.After(100 * time.Millisecond):
			for _, sa := range d.sas {
				out, err := sa.Tick(time.Now())
				if err != nil {
					return err
				}
				if out != nil {
					d.request(sa, out)
				}
			}
			continue
		}
		h := message.Header(p.b)
		if !h.IsValid() {
			continue
		}
		local := netip.AddrPortFrom(driverAddr.Addr(), p.localPort)
		sa := d.find(h)
		var out []byte
		var err error
		if sa == nil {
			sa, out, err = Respond(d.cfg, local, p.from, p.b, time.Now())
			if sa != nil {
				d.add(sa)
			}
		} else {
			out, err = sa.HandleFrom(p.b, local, p.from, time.Now())
		}
		if err != nil {
			d.errs = append(d.errs, err)
		}
		if sa != nil {
			d.collect(sa)
		}
		switch {
		case out == nil:
		case h.Flags()&message.FlagResponse != 0:
			// What we send after a response is our next request
			// (IKE_AUTH after IKE_SA_INIT, a delete after a rekey).
			d.request(sa, out)
		default:
			d.send(out, p.from, p.localPort)
		}
	}
	return nil
}

// while runs swanctl with args in the background and serves until done;
// both must succeed.
func (d *driver) while(t *testing.T, ch *charon, done func() bool, args ...string) {
	t.Helper()
	type result struct {
		out string
		err error
	}
	rc := make(chan result, 1)
	go func() {
		out, err := ch.swanctl(args...)
		rc <- result{out, err}
	}()
	serr := d.serve(done)
	r := <-rc
	if serr != nil || r.err != nil {
		t.Fatalf("swanctl %v: %v\n%s\ndriver: %v", args, r.err, r.out, serr)
	}
}

// checkKeys compares keys we derived with those charon logged after
// offset from.
func checkKeys(t *testing.T, ch *charon, from int, pairs ...any) {
	t.Helper()
	for i := 0; i < len(pairs); i += 2 {
		name, ours := pairs[i].(string), pairs[i+1].([]byte)
		if theirs := ch.loggedKey(from, name); !bytes.Equal(theirs, ours) {
			t.Errorf("%s: charon logged %x, we derived %x", name, theirs, ours)
		}
	}
}

func checkChildKeys(t *testing.T, ch *charon, from int, c *Child) {
	t.Helper()
	checkKeys(t, ch, from, "encryption initiator key", c.InitiatorKeys.Enc, "encryption responder key", c.ResponderKeys.Enc)
	if c.Suite.Integ.Name != "" {
		checkKeys(t, ch, from, "integrity initiator key", c.InitiatorKeys.Integ, "integrity responder key", c.ResponderKeys.Integ)
	}
}

// listed checks that charon lists our current IKE SA ESTABLISHED with
// our child installed.
func (d *driver) listed(t *testing.T, ch *charon) {
	t.Helper()
	// charon may still be deleting the SAs a rekey replaced: serve and
	// look again for up to two seconds.
	var list string
	for i := 0; i < 20; i++ {
		list, _ = ch.swanctl("--list-sas")
		if strings.Count(list, "INSTALLED") == 1 && strings.Count(list, "ESTABLISHED") == 1 {
			break
		}
		stop := time.Now().Add(100 * time.Millisecond)
		d.serve(func() bool { return time.Now().After(stop) })
	}
	ispi, rspi := d.sa.SPIs()
	if !strings.Contains(list, "ESTABLISHED") || !strings.Contains(list, fmt.Sprintf("%016x_i", ispi)) || !strings.Contains(list, fmt.Sprintf("%016x_r", rspi)) {
		t.Fatalf("charon does not list our IKE SA %016x_i %016x_r as ESTABLISHED:\n%s", ispi, rspi, list)
	}
	if len(d.sa.Children()) != 1 {
		t.Fatalf("we have %d children, want 1", len(d.sa.Children()))
	}
	c := d.sa.Children()[0]
	if !strings.Contains(list, fmt.Sprintf("in  %08x,", c.OutSPI)) || !strings.Contains(list, fmt.Sprintf("out %08x,", c.InSPI)) {
		t.Fatalf("charon does not list the child with SPIs in %08x, out %08x:\n%s", c.OutSPI, c.InSPI, list)
	}
	if strings.Count(list, "INSTALLED") != 1 || strings.Count(list, "ESTABLISHED") != 1 {
		t.Fatalf("charon lists old SAs besides the current ones:\n%s", list)
	}
}

// charonPair starts charon in one namespace and a driver on ports 500
// and 4500 in another, joined by a veth pair: charon at 192.0.2.1, the
// driver at 192.0.2.2. It skips the test without root or strongSwan.
func charonPair(t *testing.T) (*charon, *driver) {
	ch, d, _, _ := charonNamespaces(t)
	return ch, d
}

// charonNamespaces is charonPair that also returns charon's namespace and
// the driver's.
func charonNamespaces(t *testing.T) (*charon, *driver, *netnstest.NS, *netnstest.NS) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: network namespaces and charon")
	}
	if _, err := os.Stat(charonBin); err != nil {
		t.Skip("strongSwan's charon is not installed (scripts/test.sh installs strongswan-charon)")
	}
	if _, err := exec.LookPath("swanctl"); err != nil {
		t.Skip("swanctl is not installed (strongswan-swanctl)")
	}
	nsC := netnstest.New(t, "ike-charon")
	nsG := netnstest.New(t, "ike-driver")
	nsC.IP(t, "link", "add", "vc", "type", "veth", "peer", "name", "vg", "netns", nsG.Name)
	nsC.IP(t, "addr", "add", "192.0.2.1/24", "dev", "vc")
	nsG.IP(t, "addr", "add", "192.0.2.2/24", "dev", "vg")
	nsC.IP(t, "link", "set", "vc", "up")
	nsG.IP(t, "link", "set", "vg", "up")
	// kernel-libipsec routes remote_ts into its TUN device from an
	// address of local_ts, and needs a route to the peer's side to do it.
	nsC.IP(t, "addr", "add", "198.51.100.1/32", "dev", "lo")
	nsC.IP(t, "route", "add", "default", "via", "192.0.2.2")
	ch := startCharon(t, nsC)

	var c500, c4500 *net.UDPConn
	if err := nsG.Do(func() (err error) {
		if c500, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(driverAddr)); err != nil {
			return err
		}
		c4500, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(driverAddr.Addr(), NATTPort)))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c500.Close(); c4500.Close() })
	d := newDriver(c500, c4500)
	return ch, d, nsC, nsG
}

// TestCharonInterop negotiates with strongSwan's charon across two network
// namespaces, with our state machine as initiator and as responder: the
// IKE SA and its child come up, are rekeyed from both sides (the child
// with PFS where the ESP proposal names a group), answer a liveness check
// and are deleted by charon. After each step the keys we derived must
// equal those charon logged, and charon must list exactly our SAs.
func TestCharonInterop(t *testing.T) {
	ch, d := charonPair(t)

	for _, tc := range []struct{ ike, esp string }{
		{"aes256-sha256-x25519", "aes128gcm16"},
		{"aes256gcm16-prfsha384-ecp384", "chacha20poly1305-ecp384"},
		{"aes128-sha256-modp2048", "aes256-sha256-modp2048"},
		{"chacha20poly1305-prfsha512-ecp256", "aes256gcm16"},
	} {
		ch.load(tc.ike, tc.esp)
		cfg, _ := pairConfigs(t, []string{tc.ike}, []string{tc.esp})
		cfg.Child.LocalTS, cfg.Child.RemoteTS = cfg.Child.RemoteTS, cfg.Child.LocalTS
		cfg.LocalID, cfg.RemoteID = "b.test", "a.test"
		for _, role := range []string{"initiator", "responder"} {
			t.Run(tc.ike+"/"+tc.esp+"/"+role, func(t *testing.T) {
				d.reset(cfg)
				from := ch.logSize()
				up := func() bool { return d.sa != nil && d.sa.State() == StateEstablished && len(d.sa.Children()) == 1 }
				if role == "initiator" {
					if err := d.start(); err != nil {
						t.Fatal(err)
					}
					if err := d.serve(up); err != nil {
						t.Fatal(err)
					}
				} else {
					d.while(t, ch, up, "--initiate", "--child", "net", "--timeout", "10")
				}
				d.listed(t, ch)
				checkKeys(t, ch, from, "Sk_ei secret", d.sa.Keys().EI, "Sk_er secret", d.sa.Keys().ER)
				checkChildKeys(t, ch, from, d.sa.Children()[0])

				// charon rekeys the child, then we do.
				old := d.sa.Children()[0]
				from = ch.logSize()
				rekeyed := func() bool {
					cs := d.sa.Children()
					return len(cs) == 1 && cs[0].Replaces == old
				}
				d.while(t, ch, rekeyed, "--rekey", "--child", "net")
				checkChildKeys(t, ch, from, d.sa.Children()[0])
				wantPFS := strings.Contains(tc.esp, "-modp") || strings.Contains(tc.esp, "-ecp")
				if pfs := d.sa.Children()[0].Suite.DH.Name; (pfs != "") != wantPFS {
					t.Errorf("PFS group %q after a rekey of %q", pfs, tc.esp)
				}
				old = d.sa.Children()[0]
				from = ch.logSize()
				req, err := d.sa.RekeyChild(old, time.Now())
				if err != nil {
					t.Fatal(err)
				}
				d.request(d.sa, req)
				if err := d.serve(rekeyed); err != nil {
					t.Fatal(err)
				}
				checkChildKeys(t, ch, from, d.sa.Children()[0])
				// Wait for charon's answer to our delete of the old child.
				if err := d.serve(func() bool { return d.sa.NextTimeout().IsZero() }); err != nil {
					t.Fatal(err)
				}
				d.listed(t, ch)

				// charon rekeys the IKE SA, then we do.
				for _, ours := range []bool{false, true} {
					prev := d.sa
					from = ch.logSize()
					newSA := func() bool { return d.sa != prev && prev.State() == StateDeleted }
					if ours {
						req, err := d.sa.RekeyIKE(time.Now())
						if err != nil {
							t.Fatal(err)
						}
						d.request(d.sa, req)
						if err := d.serve(newSA); err != nil {
							t.Fatal(err)
						}
					} else {
						d.while(t, ch, newSA, "--rekey", "--ike", "test")
					}
					checkKeys(t, ch, from, "Sk_ei secret", d.sa.Keys().EI, "Sk_er secret", d.sa.Keys().ER)
					d.listed(t, ch)
				}

				// A liveness check over the newest IKE SA.
				ping, err := d.sa.Ping(time.Now())
				if err != nil {
					t.Fatal(err)
				}
				d.request(d.sa, ping)
				if err := d.serve(func() bool { return d.sa.NextTimeout().IsZero() }); err != nil {
					t.Fatal(err)
				}

				// charon deletes the IKE SA; we answer and drop ours.
				d.while(t, ch, func() bool { return d.sa.State() == StateDeleted }, "--terminate", "--ike", "test", "--timeout", "10")
				if list, _ := ch.swanctl("--list-sas"); strings.Contains(list, "ESTABLISHED") {
					t.Fatalf("charon still lists an SA after the delete:\n%s", list)
				}
			})
		}
	}
}

// TestCharonInteropFailures: a wrong pre-shared key and disjoint
// proposals fail cleanly on both sides, in both roles, and leave no SA.
func TestCharonInteropFailures(t *testing.T) {
	ch, d := charonPair(t)
	for _, tc := range []struct {
		name, ours string
		psk        string
		want       error
		notify     string // charon's log: "generating ... N(notify)" or "received ... notify error"
		long       string
	}{
		{"wrong psk", "aes256-sha256-x25519", "not-the-psk", ErrAuthFailed, "AUTH_FAILED", "AUTHENTICATION_FAILED"},
		{"disjoint proposals", "aes128gcm16-prfsha256-ecp256", "a-test-psk-not-a-secret", ErrNoProposalChosen, "NO_PROP", "NO_PROPOSAL_CHOSEN"},
	} {
		ch.load("aes256-sha256-x25519", "aes128gcm16")
		cfg, _ := pairConfigs(t, []string{tc.ours}, []string{"aes128gcm16"})
		cfg.Child.LocalTS, cfg.Child.RemoteTS = cfg.Child.RemoteTS, cfg.Child.LocalTS
		cfg.LocalID, cfg.RemoteID = "b.test", "a.test"
		cfg.PSK = []byte(tc.psk)
		for _, role := range []string{"initiator", "responder"} {
			t.Run(tc.name+"/"+role, func(t *testing.T) {
				d.reset(cfg)
				from := ch.logSize()
				failed := func() bool {
					if d.sa != nil && d.sa.State() == StateFailed {
						return true
					}
					for _, err := range d.errs {
						if errors.Is(err, tc.want) {
							return true
						}
					}
					return false
				}
				if role == "initiator" {
					if err := d.start(); err != nil {
						t.Fatal(err)
					}
					if err := d.serve(failed); err != nil {
						t.Fatal(err)
					}
					if !errors.Is(d.sa.Err(), tc.want) {
						t.Fatalf("our SA failed with %v, want %v", d.sa.Err(), tc.want)
					}
				} else {
					rc := make(chan error, 1)
					go func() {
						_, err := ch.swanctl("--initiate", "--child", "net", "--timeout", "10")
						rc <- err
					}()
					serr := d.serve(failed)
					if err := <-rc; err == nil || serr != nil {
						t.Fatalf("swanctl --initiate succeeded (%v) or the driver saw no failure (%v)", err, serr)
					}
					if len(d.errs) == 0 || !errors.Is(d.errs[len(d.errs)-1], tc.want) {
						t.Fatalf("our errors %v, want %v", d.errs, tc.want)
					}
				}
				b, _ := os.ReadFile(ch.log)
				want := "received " + tc.long + " notify error" // charon initiated, we refused
				if role == "initiator" {
					want = "N(" + tc.notify + ") ]" // charon refused us
				}
				if !strings.Contains(string(b[from:]), want) {
					t.Errorf("charon's log does not say %q", want)
				}
				for i := 0; i < 20; i++ {
					list, _ := ch.swanctl("--list-sas")
					if !strings.Contains(list, "test:") {
						return
					}
					time.Sleep(100 * time.Millisecond)
				}
				list, _ := ch.swanctl("--list-sas")
				t.Fatalf("charon keeps an SA after the failure:\n%s", list)
			})
		}
	}
}

// TestCharonKeylogTshark checks our keylog lines with an independent
// decryptor: tshark decrypts the captured IKE_AUTH with our
// ikev2_decryption_table line and the ESP that charon sends (pings from
// its side of the tunnel) with our esp_sa lines.
func TestCharonKeylogTshark(t *testing.T) {
	ch, d, nsC, nsG := charonNamespaces(t)
	if _, err := exec.LookPath("tshark"); err != nil {
		t.Skip("tshark is not installed")
	}
	for _, tc := range []struct{ ike, esp string }{
		{"aes256-sha256-x25519", "aes128gcm16"},
		{"aes128gcm16-prfsha256-ecp256", "aes256-sha256"},
	} {
		t.Run(tc.ike+"/"+tc.esp, func(t *testing.T) {
			ch.load(tc.ike, tc.esp)
			cfg, _ := pairConfigs(t, []string{tc.ike}, []string{tc.esp})
			cfg.Child.LocalTS, cfg.Child.RemoteTS = cfg.Child.RemoteTS, cfg.Child.LocalTS
			cfg.LocalID, cfg.RemoteID = "b.test", "a.test"
			d.reset(cfg)
			dir := t.TempDir()
			pcap := filepath.Join(dir, "underlay.pcap")
			dump := exec.Command("ip", "netns", "exec", nsG.Name, "tcpdump", "-i", "vg", "-U", "-n", "-w", pcap, "udp")
			if err := dump.Start(); err != nil {
				t.Fatal(err)
			}
			stopped := false
			stop := func() {
				if !stopped {
					stopped = true
					dump.Process.Signal(syscall.SIGINT)
					dump.Wait()
				}
			}
			defer stop()
			// tcpdump writes the file's header once it captures.
			for i := 0; ; i++ {
				if fi, err := os.Stat(pcap); err == nil && fi.Size() >= 24 {
					break
				}
				if i == 50 {
					t.Fatal("tcpdump did not start in 5 s")
				}
				time.Sleep(100 * time.Millisecond)
			}
			if err := d.start(); err != nil {
				t.Fatal(err)
			}
			if err := d.serve(func() bool { return d.sa.State() == StateEstablished && len(d.sa.Children()) == 1 }); err != nil {
				t.Fatal(err)
			}
			// charon's side of the tunnel sends pings into it; nothing
			// answers them (ipsecd's data path is not here), which is fine.
			exec.Command("ip", "netns", "exec", nsC.Name, "ping", "-c", "3", "-i", "0.2", "-W", "1", "-I", "198.51.100.1", "203.0.113.1").Run()
			// The lines are taken before the delete, which wipes the IKE keys.
			child := d.sa.Children()[0]
			ikeLine, ok := d.sa.KeylogIKE()
			espLines, ok2 := child.KeylogESP()
			d.while(t, ch, func() bool { return d.sa.State() == StateDeleted }, "--terminate", "--ike", "test", "--timeout", "10")
			stop()

			if !ok || !ok2 {
				t.Fatal("no keylog lines for a suite Wireshark decrypts")
			}
			if err := os.WriteFile(filepath.Join(dir, "ikev2_decryption_table"), []byte(ikeLine+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "esp_sa"), []byte(strings.Join(espLines, "\n")+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			tshark := func(filter string) string {
				cmd := exec.Command("tshark", "-r", pcap, "-n", "-V", "-o", "esp.enable_encryption_decode:TRUE", "-Y", filter)
				cmd.Env = append(os.Environ(), "WIRESHARK_CONFIG_DIR="+dir)
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("tshark: %v\n%s", err, out)
				}
				return string(out)
			}
			if out := tshark("isakmp.exchangetype == 35"); !strings.Contains(out, "b.test") || !strings.Contains(out, "a.test") {
				t.Errorf("tshark did not decrypt IKE_AUTH with our keylog (no IDi b.test, IDr a.test):\n%.3000s", out)
			}
			if out := tshark("icmp.type == 8"); strings.Count(out, "Echo (ping) request") < 3 {
				t.Errorf("tshark did not decrypt charon's ESP with our keylog:\n%.3000s", tshark("esp"))
			}
		})
	}
}
