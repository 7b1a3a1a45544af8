//go:build linux

package ike

import (
	"bytes"
	"encoding/hex"
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

	"github.com/ipsecd/ipsecd/tun/netnstest"
)

// The strongSwan side of the interop tests: charon in a namespace of its
// own, driven with swanctl, and the keys it logs.

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
  load = random nonce openssl pem pkcs1 pkcs8 x509 pubkey revocation constraints curve25519 gcm chapoly aes sha2 sha1 hmac kdf gmp kernel-libipsec kernel-netlink socket-default vici
  install_routes = yes
  # Short retransmissions, so that a peer that stops answering is given
  # up in seconds (TestCharonDPD), not minutes.
  retransmit_timeout = 1
  retransmit_base = 1
  retransmit_tries = 2
%s
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
    dpd_delay = %s
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

// startCharon starts charon in ns; extra goes into strongswan.conf's
// charon section.
func startCharon(t *testing.T, ns *netnstest.NS, extra string) *charon {
	t.Helper()
	dir := t.TempDir()
	c := &charon{t: t, dir: dir, log: filepath.Join(dir, "charon.log")}
	conf := filepath.Join(dir, "strongswan.conf")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(charonConf, extra, c.log)), 0o600); err != nil {
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

func (c *charon) load(ike, esp string) { c.loadDPD(ike, esp, "0s") }

// loadConf loads a swanctl.conf, with the credentials in the
// directories under swanctlDir (x509, x509ca, private, ...).
func (c *charon) loadConf(conf, swanctlDir string) {
	c.t.Helper()
	f := filepath.Join(swanctlDir, "swanctl.conf")
	if err := os.WriteFile(f, []byte(conf), 0o600); err != nil {
		c.t.Fatal(err)
	}
	cmd := exec.Command("nsenter", "-t", fmt.Sprint(c.pid), "-m", "-n", "swanctl", "--load-all", "--clear", "--file", f)
	cmd.Env = append(os.Environ(), "SWANCTL_DIR="+swanctlDir)
	if out, err := cmd.CombinedOutput(); err != nil {
		c.t.Fatalf("swanctl --load-all: %v\n%s", err, out)
	}
}

// loadDPD loads the test connection with charon's liveness checks every
// dpd (0s: none).
func (c *charon) loadDPD(ike, esp, dpd string) {
	c.t.Helper()
	f := filepath.Join(c.dir, "swanctl.conf")
	if err := os.WriteFile(f, []byte(fmt.Sprintf(swanctlConf, ike, dpd, esp)), 0o600); err != nil {
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

// charonPair starts charon in one namespace and a driver on ports 500
// and 4500 in another, joined by a veth pair: charon at 192.0.2.1, the
// driver at 192.0.2.2. It skips the test without root or strongSwan.
func charonPair(t *testing.T) (*charon, *driver) {
	ch, d, _, _ := charonNamespaces(t)
	return ch, d
}

// charonPairWith is charonPair with extra lines in charon's section of
// strongswan.conf.
func charonPairWith(t *testing.T, extra string) (*charon, *driver) {
	ch, d, _, _ := charonNamespacesWith(t, extra)
	return ch, d
}

// charonNamespaces is charonPair that also returns charon's namespace and
// the driver's.
func charonNamespaces(t *testing.T) (*charon, *driver, *netnstest.NS, *netnstest.NS) {
	return charonNamespacesWith(t, "")
}

func charonNamespacesWith(t *testing.T, extra string) (*charon, *driver, *netnstest.NS, *netnstest.NS) {
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
	ch := startCharon(t, nsC, extra)

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
