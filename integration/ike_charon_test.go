//go:build linux

package integration

// The rig of the IKEv2 tests against strongSwan: `ipsecd run` in namespace
// A (192.0.2.1, a.test, inner 198.51.100.1 on ipsec1) and charon with its
// userspace data plane in namespace B (192.0.2.2, b.test, inner
// 203.0.113.1 on lo, routed into charon's ipsec0), one PSK connection
// between them with the child "net" (198.51.100.0/24 <-> 203.0.113.0/24),
// ESP in UDP both ways (encap, as ipsecd's underlay has no raw ESP here).

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/internal/charontest"
)

// ikeSpec is what one test varies in the connection; the zero value is
// proposal set 1 with no DPD and charon's default retransmissions.
type ikeSpec struct {
	ike, esp   string // one proposal each, as swanctl writes it
	ipsecdIKE  string // ipsecd's IKE proposal, when it differs from charon's
	secret     string // ipsecd's PSK, when it differs from charon's
	dpdDelay   string // ipsecd's dpd_delay
	dpdAction  string // ipsecd's dpd_action
	charonConf string // extra lines of charon's strongswan.conf
	noEncap    bool   // ESP in UDP only if a NAT is detected (none here)
	metrics    bool   // Prometheus metrics on ikeMetricsAddr
	vici       string // ipsecd's vici socket ("": none)
	viciOnly   bool   // ipsecd's file has no connection: vici loads it
	sid        bool   // strongSwan 6.1 from the sid chroot (charontest.StartSid) instead of Debian 12's 5.9.8
}

// ikeMetricsAddr serves ipsecd's metrics inside its namespace.
const ikeMetricsAddr = "127.0.0.1:9578"

func (s *ikeSpec) fill() {
	if s.ike == "" {
		s.ike, s.esp = "aes256-sha256-x25519", "aes128gcm16"
	}
	if s.ipsecdIKE == "" {
		s.ipsecdIKE = s.ike
	}
	if s.secret == "" {
		s.secret = charontest.PSK
	}
	if s.dpdAction == "" {
		s.dpdAction = "clear"
	}
}

// ipsecdConfig is ipsecd's config: debug logs, short retransmissions (a
// dead peer is given up in seconds), keylog as the ike.keylog prefix
// ("" for none), and the connection.
func (s ikeSpec) ipsecdConfig(keylog string) string {
	kl := ""
	if keylog != "" {
		kl = "\n  keylog: " + keylog
	}
	if s.metrics {
		kl += "\nmetrics: " + ikeMetricsAddr
	}
	if s.vici != "" {
		kl += "\nvici: " + s.vici
	}
	conn := s.ipsecdConnection()
	if s.viciOnly {
		conn, _, _ = strings.Cut(conn, "connections:")
	}
	return fmt.Sprintf("log: {level: debug}\nike:\n  port: 500\n  retransmit: {timeout: 500ms, base: 1, tries: 2}%s\n%s", kl, conn)
}

// ipsecdConnection is ipsecd's side of the connection, the config that
// the README shows beside charon's swanctl.conf (TestIKEReadmeExample).
func (s ikeSpec) ipsecdConnection() string {
	dpd := ""
	if s.dpdDelay != "" {
		dpd = "\n    dpd_delay: " + s.dpdDelay
	}
	return fmt.Sprintf(`underlay: {udp: "0.0.0.0:4500"}
interfaces:
  - {name: ipsec1, if_id: 1, addresses: [198.51.100.1/24], routes: [203.0.113.0/24]}
connections:
  - name: charon
    version: 2
    local_addrs: [192.0.2.1]
    remote_addrs: [192.0.2.2]
    proposals: [%s]
    encap: %v%s
    local:  {auth: psk, id: a.test}
    remote: {auth: psk, id: b.test}
    children:
      - name: net
        if_id: 1
        mode: tunnel
        local_ts: [198.51.100.0/24]
        remote_ts: [203.0.113.0/24]
        esp_proposals: [%s]
        start_action: none
        dpd_action: %s
secrets:
  - {ids: [a.test, b.test], secret: %q}
`, s.ipsecdIKE, !s.noEncap, dpd, s.esp, s.dpdAction, s.secret)
}

// charonConn is charon's side of the connection, the swanctl.conf that
// the README shows beside ipsecd's.
func (s ikeSpec) charonConn() charontest.Conn {
	return charontest.Conn{LocalAddrs: underlayB4, RemoteAddrs: underlayA4, Proposals: s.ike, Encap: !s.noEncap,
		Local: charontest.Peer{ID: "b.test"}, Remote: charontest.Peer{ID: "a.test"},
		LocalTS: "203.0.113.0/24", RemoteTS: "198.51.100.0/24", ESP: s.esp}
}

type ikeRig struct {
	p      *pair
	d      *daemon
	ch     *charontest.Charon
	spec   ikeSpec
	keylog string // ipsecd's ike.keylog prefix
}

// newIKERig starts charon in B with spec's connection loaded, and ipsecd
// in A.
func newIKERig(t *testing.T, spec ikeSpec) *ikeRig {
	t.Helper()
	start := charontest.Start
	if spec.sid {
		charontest.RequireSid(t)
		start = charontest.StartSid
	} else {
		charontest.Require(t)
	}
	spec.fill()
	r := &ikeRig{p: newPair(t), spec: spec}
	// kernel-libipsec routes remote_ts into its TUN from an address of
	// local_ts, and needs a route towards the peer to do it.
	r.p.b.mustRun(t, "ip", "addr", "add", innerB4+"/32", "dev", "lo")
	r.p.b.mustRun(t, "ip", "route", "add", "default", "via", underlayA4)
	r.ch = start(t, r.p.b.name, spec.charonConf)
	r.ch.Load(spec.charonConn().String())
	r.keylog = filepath.Join(t.TempDir(), "keylog")
	r.d = startDaemon(t, r.p.a, spec.ipsecdConfig(r.keylog))
	return r
}

// childSPIs are the SPIs of one child as ipsecd installed it.
type childSPIs struct{ in, out uint32 }

// ipsecdChild returns ipsecd's inbound and outbound SA of if_id 1, and
// whether there is exactly one of each.
func (r *ikeRig) ipsecdChild() (childSPIs, bool) {
	var c childSPIs
	var nin, nout int
	for _, s := range r.d.states() {
		v, _ := strconv.ParseUint(s.SPI, 0, 32)
		switch {
		case s.IfID != 1:
		case s.Dir == "in":
			c.in, nin = uint32(v), nin+1
		case s.Dir == "out":
			c.out, nout = uint32(v), nout+1
		}
	}
	return c, nin == 1 && nout == 1
}

// charonChildRE matches an installed child in swanctl --list-sas: its
// state, then "in  SPI," and "out SPI," two and three lines below. A
// rekeyed child stays listed as DELETED while charon keeps its inbound SA
// for delete_rekeyed_delay (5 s).
var charonChildRE = regexp.MustCompile(`, INSTALLED, [^\n]*\n[^\n]*\n\s*in  ([0-9a-f]{8}),[^\n]*\n\s*out ([0-9a-f]{8}),`)

// charonChildren returns the children charon lists as installed, with
// its in and out SPIs.
func (r *ikeRig) charonChildren() []childSPIs {
	var cs []childSPIs
	for _, m := range charonChildRE.FindAllStringSubmatch(r.ch.ListSAs(), -1) {
		in, _ := strconv.ParseUint(m[1], 16, 32)
		out, _ := strconv.ParseUint(m[2], 16, 32)
		cs = append(cs, childSPIs{uint32(in), uint32(out)})
	}
	return cs
}

// waitUp waits up to 20 s for one IKE SA with one child on both sides
// whose SPIs match (ipsecd's in is charon's out), other than old, and
// returns ipsecd's. After a rekey that is 5 s or more: ipsecd keeps
// the old inbound SA that long (ikenode.DefaultLinger).
func (r *ikeRig) waitUp(t *testing.T, what string, old childSPIs) childSPIs {
	t.Helper()
	return r.waitUpWithin(t, what, old, 20*time.Second)
}

// waitUpWithin is waitUp with a bound of timeout.
func (r *ikeRig) waitUpWithin(t *testing.T, what string, old childSPIs, timeout time.Duration) childSPIs {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ours, one := r.ipsecdChild()
		theirs := r.charonChildren()
		list := r.ch.ListSAs()
		if one && ours != old && len(theirs) == 1 && theirs[0] == (childSPIs{ours.out, ours.in}) &&
			strings.Count(list, "ESTABLISHED") == 1 {
			return ours
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no single matching child within %v (old %08x/%08x); ipsecd: %+v (one pair: %v); charon:\n%s\nipsecd ike list:\n%s",
				what, timeout, old.in, old.out, ours, one, list, r.ikeList())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitDown waits up to timeout for neither side to hold a child of the
// connection, nor, with ike, an IKE SA.
func (r *ikeRig) waitDown(t *testing.T, what string, timeout time.Duration, ike bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ours := 0
		for _, s := range r.d.states() {
			if s.IfID == 1 {
				ours++
			}
		}
		list := r.ch.ListSAs()
		if ours == 0 && !strings.Contains(list, "INSTALLED") && (!ike || !strings.Contains(list, "test:")) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: SAs left after %v: ipsecd %d; charon:\n%s\nipsecd ike list:\n%s", what, timeout, ours, list, r.ikeList())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (r *ikeRig) ikeList() string {
	out, err := r.d.ctl("ike", "list")
	if err != nil {
		return fmt.Sprintf("(%v) %s", err, out)
	}
	return out
}

// ipsecdIKE runs `ipsecd ike ARGS...` and fails the test if it fails.
func (r *ikeRig) ipsecdIKE(t *testing.T, args ...string) {
	t.Helper()
	if out, err := r.d.ctl(append([]string{"ike"}, args...)...); err != nil {
		t.Fatalf("ipsecd ike %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// swanctl runs swanctl in charon's namespaces and fails the test if it fails.
func (r *ikeRig) swanctl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := r.ch.Swanctl(args...)
	if err != nil {
		t.Fatalf("swanctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// up brings the connection up with initiator ("ipsecd" or "charon")
// initiating, and returns the child as ipsecd installed it.
func (r *ikeRig) up(t *testing.T, initiator string) childSPIs {
	t.Helper()
	if initiator == "ipsecd" {
		r.ipsecdIKE(t, "initiate", "--child", "net")
	} else {
		r.swanctl(t, "--initiate", "--child", "net", "--timeout", "10")
	}
	return r.waitUp(t, initiator+" initiating", childSPIs{})
}

// readmeBlock returns the fenced block after marker in README.md.
func readmeBlock(t *testing.T, readme, marker string) string {
	t.Helper()
	_, after, ok := strings.Cut(readme, marker)
	if !ok {
		t.Fatalf("README.md has no %q", marker)
	}
	_, block, ok := strings.Cut(after, "```")
	if !ok {
		t.Fatalf("README.md has no fenced block after %q", marker)
	}
	_, block, _ = strings.Cut(block, "\n") // the fence's language
	block, _, ok = strings.Cut(block, "```")
	if !ok {
		t.Fatalf("README.md: the block after %q is not closed", marker)
	}
	return block
}

// TestIKEReadmeExample: the README shows the ipsecd config and the
// swanctl.conf that the tests here negotiate between, and `ipsecd check`
// accepts the ipsecd one as it stands.
func TestIKEReadmeExample(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	spec := ikeSpec{}
	spec.fill()
	ipsecd := readmeBlock(t, string(b), "<!-- ike-example: ipsecd -->")
	if want := spec.ipsecdConnection(); ipsecd != want {
		t.Errorf("README.md's ipsecd config:\n%s\nthe tests':\n%s", ipsecd, want)
	}
	if want, got := spec.charonConn().String(), readmeBlock(t, string(b), "<!-- ike-example: swanctl -->"); got != want {
		t.Errorf("README.md's swanctl.conf:\n%s\nthe tests':\n%s", got, want)
	}
	f := filepath.Join(t.TempDir(), "ipsecd.yaml")
	if err := os.WriteFile(f, []byte(ipsecd), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(ipsecdBin, "check", "--config", f).CombinedOutput(); err != nil {
		t.Errorf("ipsecd check of README.md's config: %v\n%s", err, out)
	}
}

// charonIKESPIs finds the SPIs of charon's IKE SA: "ESTABLISHED, IKEv2, SPI_i SPI_r".
var charonIKESPIs = regexp.MustCompile(`ESTABLISHED, IKEv2, ([0-9a-f]{16})_i\*? ([0-9a-f]{16})_r`)

// checkIKEList checks that `ipsecd ike list --json` shows the one IKE SA
// charon lists, with ipsecd's role, and child with the SPIs of the SAD
// and traffic counted both ways.
func (r *ikeRig) checkIKEList(t *testing.T, initiator bool, child childSPIs) {
	t.Helper()
	list := r.ch.ListSAs()
	m := charonIKESPIs.FindStringSubmatch(list)
	if m == nil {
		t.Fatalf("charon lists no established IKE SA:\n%s", list)
	}
	sas := r.d.ikeList()
	if len(sas) != 1 || len(sas[0].Children) != 1 {
		t.Fatalf("ipsecd ike list: want one IKE SA with one child, got %+v", sas)
	}
	s, c := sas[0], sas[0].Children[0]
	if s.State != "ESTABLISHED" || s.Initiator != initiator || s.SPIInitiator != m[1] || s.SPIResponder != m[2] {
		t.Errorf("ipsecd ike list: %s, initiator %v, SPIs %s_i %s_r; want ESTABLISHED, initiator %v, charon's %s_i %s_r",
			s.State, s.Initiator, s.SPIInitiator, s.SPIResponder, initiator, m[1], m[2])
	}
	if c.State != "INSTALLED" || c.SPIIn != fmt.Sprintf("%#x", child.in) || c.SPIOut != fmt.Sprintf("%#x", child.out) ||
		c.PacketsIn == 0 || c.PacketsOut == 0 {
		t.Errorf("ipsecd ike list: child %+v; want INSTALLED, in %08x, out %08x, packets both ways", c, child.in, child.out)
	}
}
