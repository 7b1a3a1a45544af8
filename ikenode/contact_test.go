package ikenode

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sirupsen/logrus"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/control"
	"github.com/ipsecd/ipsecd/ike"
	"github.com/ipsecd/ipsecd/ike/message"
	"github.com/ipsecd/ipsecd/internal/testpki"
)

// parseYAML parses a whole config for an IKE daemon on loopback (port 0).
func parseYAML(t *testing.T, y string) *config.Config {
	t.Helper()
	cfg, err := config.Parse(filepath.Join(t.TempDir(), "test.yaml"), []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	cfg.IKE.Port = 0
	return cfg
}

// startOn runs an IKE daemon of cfg listening on the addresses listen,
// initiating to peerPort.
func startOn(t *testing.T, n *testNet, cfg *config.Config, peerPort uint16, base uint32, listen ...string) *endpoint {
	t.Helper()
	var ls []netip.Addr
	for _, a := range listen {
		ls = append(ls, netip.MustParseAddr(a))
	}
	return startDaemon(t, n, Config{IKE: &cfg.IKEConfig, RawESP: true, PeerPort: peerPort, Listen: ls}, base)
}

// listed returns the SAs of e's connection conn in state.
func listed(e *endpoint, conn, state string) []control.IKESAInfo {
	l, _ := e.m.List()
	var out []control.IKESAInfo
	for _, s := range l {
		if s.Name == conn && s.State == state {
			out = append(out, s)
		}
	}
	return out
}

// TestInitialContactOtherConnection: B serves A on connection site
// (remote id a.test) and road warriors on rw (remote id %any, a PSK the
// road warriors share). A road warrior that claims A's identity and says
// INITIAL_CONTACT gets its SA on rw; A's SA on site stays: INITIAL_CONTACT
// acts only on the connection it came by.
func TestInitialContactOtherConnection(t *testing.T) {
	n := newTestNet()
	const bYAML = `interfaces:
  - {name: ipsec1, if_id: 1, addresses: [10.2.0.1/24], routes: [10.1.0.0/24]}
  - {name: ipsec2, if_id: 2, addresses: [10.2.1.1/24], routes: [10.3.0.0/24]}
connections:
  - name: site
    local_addrs: [127.0.0.2]
    remote_addrs: [127.0.0.1]
    proposals: [aes128gcm16-prfsha256-x25519]
    local: {auth: psk, id: b.test}
    remote: {auth: psk, id: a.test}
    children:
      - {name: site-net, if_id: 1, local_ts: [10.2.0.0/24], remote_ts: [10.1.0.0/24], esp_proposals: [aes128gcm16]}
  - name: rw
    local_addrs: [127.0.0.2]
    remote_addrs: ["%any"]
    proposals: [aes128gcm16-prfsha256-x25519]
    local: {auth: psk, id: b.test}
    remote: {auth: psk, id: "%any"}
    children:
      - {name: rw-net, if_id: 2, local_ts: [10.2.1.0/24], remote_ts: [10.3.0.0/24], esp_proposals: [aes128gcm16]}
secrets:
  - {ids: [b.test, "%any"], secret: "0x2222222222222222222222222222222222222222222222222222222222222222"}
  - {ids: [a.test, b.test], secret: "0x1111111111111111111111111111111111111111111111111111111111111111"}
`
	const peerYAML = `interfaces:
  - {name: ipsec1, if_id: 1, addresses: [%[2]s.1/24], routes: [%[3]s.0/24]}
connections:
  - name: to-b
    local_addrs: [%[1]s]
    remote_addrs: [127.0.0.2]
    proposals: [aes128gcm16-prfsha256-x25519]
    local: {auth: psk, id: a.test}
    remote: {auth: psk, id: b.test}
    children:
      - {name: net, if_id: 1, local_ts: [%[2]s.0/24], remote_ts: [%[3]s.0/24], esp_proposals: [aes128gcm16], start_action: start}
secrets:
  - {ids: [a.test, b.test], secret: "%[4]s"}
`
	b := startOn(t, n, parseYAML(t, bYAML), 0, 0x2000, "127.0.0.2")
	a := startOn(t, n, parseYAML(t, fmt.Sprintf(peerYAML, "127.0.0.1", "10.1.0", "10.2.0", "0x1111111111111111111111111111111111111111111111111111111111111111")), b.m.Port(), 0x1000, "127.0.0.1")
	n.waitFor(t, "A's SA on site", func() bool { return len(listed(b, "site", "ESTABLISHED")) == 1 && established(a) })
	site := listed(b, "site", "ESTABLISHED")[0]

	// The road warrior at 127.0.0.3 knows rw's PSK and calls itself
	// a.test; its first IKE_AUTH carries INITIAL_CONTACT.
	rw := startOn(t, n, parseYAML(t, fmt.Sprintf(peerYAML, "127.0.0.3", "10.3.0", "10.2.1", "0x2222222222222222222222222222222222222222222222222222222222222222")), b.m.Port(), 0x3000, "127.0.0.3")
	n.waitFor(t, "the road warrior's SA on rw", func() bool { return len(listed(b, "rw", "ESTABLISHED")) == 1 && established(rw) })
	if got := listed(b, "rw", "ESTABLISHED")[0].RemoteID; got != "a.test" {
		t.Fatalf("the road warrior authenticated as %q, want a.test", got)
	}
	if !strings.Contains(b.log.String(), "INITIAL_CONTACT") {
		t.Fatalf("B's log does not show the road warrior's INITIAL_CONTACT:\n%s", b.log.String())
	}
	now := listed(b, "site", "ESTABLISHED")
	if len(now) != 1 || now[0].SPIInitiator != site.SPIInitiator || len(now[0].Children) != 1 {
		t.Fatalf("site's SAs after the road warrior's INITIAL_CONTACT: %d established (want A's, %s_i, still up with its child)", len(now), site.SPIInitiator)
	}
}

// pki writes a CA and certificates for the given common names (subject
// CN=name, the name as a DNS subjectAltName) with their keys (PKCS#8)
// into dir: ca.pem, NAME.pem, NAME.key (package testpki).
func pki(t *testing.T, dir string, names ...string) {
	t.Helper()
	ca := testpki.NewCA(t, "ipsecd test CA", testpki.Opts{})
	ca.WriteCert(t, filepath.Join(dir, "ca.pem"))
	for _, name := range names {
		c := ca.Issue(t, name, testpki.Opts{})
		c.WriteCert(t, filepath.Join(dir, name+".pem"))
		c.WriteKey(t, filepath.Join(dir, name+".key"), testpki.PKCS8)
	}
}

// TestInitialContactCertificates: with certificates and no local id
// (our identity is the certificate's subject), A's second IKE SA with
// B, on another connection between the same identities, carries no
// INITIAL_CONTACT: A holds an SA with B's identity already. B sees
// INITIAL_CONTACT once, from the first, and both SAs stay up.
func TestInitialContactCertificates(t *testing.T) {
	n := newTestNet()
	dir := t.TempDir()
	pki(t, dir, "a.test", "b.test")
	const side = `interfaces:
  - {name: ipsec1, if_id: 1, addresses: [%[1]s.0.1/24], routes: [%[2]s.0.0/24]}
  - {name: ipsec2, if_id: 2, addresses: [%[1]s.1.1/24], routes: [%[2]s.1.0/24]}
connections:
  - name: one
    local_addrs: [%[3]s]
    remote_addrs: [%[4]s]
    proposals: [aes128gcm16-prfsha256-x25519]
    local: {auth: pubkey, cert: %[6]s/%[7]s.pem, key: %[6]s/%[7]s.key}
    remote: {auth: pubkey, id: "cn=%[8]s", cacerts: [%[6]s/ca.pem]}
    children:
      - {name: net1, if_id: 1, local_ts: [%[1]s.0.0/24], remote_ts: [%[2]s.0.0/24], esp_proposals: [aes128gcm16]}
  - name: two
    local_addrs: [%[9]s]
    remote_addrs: [%[5]s]
    proposals: [aes128gcm16-prfsha256-x25519]
    local: {auth: pubkey, cert: %[6]s/%[7]s.pem, key: %[6]s/%[7]s.key}
    remote: {auth: pubkey, id: "cn=%[8]s", cacerts: [%[6]s/ca.pem]}
    children:
      - {name: net2, if_id: 2, local_ts: [%[1]s.1.0/24], remote_ts: [%[2]s.1.0/24], esp_proposals: [aes128gcm16]}
`
	// B answers connection one on 127.0.0.2 and two on 127.0.0.4.
	b := startOn(t, n, parseYAML(t, fmt.Sprintf(side, "10.2", "10.1", "127.0.0.2", "127.0.0.1", "127.0.0.1", dir, "b.test", "a.test", "127.0.0.4")), 0, 0x2000, "127.0.0.2", "127.0.0.4")
	a := startOn(t, n, parseYAML(t, fmt.Sprintf(side, "10.1", "10.2", "127.0.0.1", "127.0.0.2", "127.0.0.4", dir, "a.test", "b.test", "127.0.0.1")), b.m.Port(), 0x1000, "127.0.0.1")
	if err := a.m.Initiate(Target{IKE: "one"}); err != nil {
		t.Fatal(err)
	}
	n.waitFor(t, "connection one up", func() bool {
		return len(listed(b, "one", "ESTABLISHED")) == 1 && len(listed(a, "one", "ESTABLISHED")) == 1
	})
	if err := a.m.Initiate(Target{IKE: "two"}); err != nil {
		t.Fatal(err)
	}
	n.waitFor(t, "connection two up", func() bool {
		return len(listed(b, "two", "ESTABLISHED")) == 1 && len(listed(a, "two", "ESTABLISHED")) == 1
	})
	if got := listed(a, "two", "ESTABLISHED")[0].RemoteID; got != "CN=b.test" {
		t.Errorf("A lists B as %q, want CN=b.test", got)
	}
	if got := listed(a, "two", "ESTABLISHED")[0].LocalID; got != "CN=a.test" {
		t.Errorf("A lists itself as %q, want CN=a.test (its certificate's subject)", got)
	}
	if n := strings.Count(b.log.String(), "INITIAL_CONTACT"); n != 1 {
		t.Errorf("B's log names INITIAL_CONTACT %d times, want once (A's first IKE SA):\n%s", n, b.log.String())
	}
	if len(listed(b, "one", "ESTABLISHED")) != 1 {
		t.Errorf("B dropped connection one's SA when two came up")
	}
}

// recordHook keeps the text of every log entry's message and fields.
type recordHook struct {
	mu    sync.Mutex
	texts []string
}

func (h *recordHook) Levels() []logrus.Level { return logrus.AllLevels }
func (h *recordHook) Fire(e *logrus.Entry) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.texts = append(h.texts, e.Message)
	for k, v := range e.Data {
		h.texts = append(h.texts, k+"="+fmt.Sprint(v))
	}
	return nil
}

// TestPeerIDEscaped: a peer whose identity holds a terminal escape and a
// CR LF that would fake a line ("\x1b[2J\r\nfake") is shown escaped by
// ike list and in every log entry's message and fields, whatever the
// log's formatter does with them.
func TestPeerIDEscaped(t *testing.T) {
	n := newTestNet()
	const evil = "\x1b[2J\r\nfake"
	bCfg := parseSide(t, "127.0.0.2", "127.0.0.1", "b.test", `"%any"`, "10.2.0", "10.1.0", sideOpts{})
	b := startEndpoint(t, n, bCfg, "127.0.0.2", 0, 0x2000)
	hook := &recordHook{}
	b.m.log.(*logrus.Logger).AddHook(hook)
	aCfg := parseSide(t, "127.0.0.1", "127.0.0.2", "a.test", "b.test", "10.1.0", "10.2.0", sideOpts{start: "start"})
	aCfg.Connections[0].Local.Identity = ike.NewIdentity(message.IDFQDN, []byte(evil))
	a := startEndpoint(t, n, aCfg, "127.0.0.1", b.m.Port(), 0x1000)
	n.waitFor(t, "the SA", func() bool { return established(a) && established(b) })
	got := list(t, b)[0].RemoteID
	if want := `\x1b[2J\x0d\x0afake`; got != want {
		t.Errorf("ike list shows the peer as %q, want %q", got, want)
	}
	hook.mu.Lock()
	defer hook.mu.Unlock()
	seen := false
	for _, s := range hook.texts {
		if strings.ContainsAny(s, "\x1b\r\n") {
			t.Errorf("a log entry carries the peer's control characters: %q", s)
		}
		seen = seen || strings.Contains(s, `\x1b[2J\x0d\x0afake`)
	}
	if !seen {
		t.Errorf("no log entry names the peer (escaped): %q", hook.texts)
	}
}

// TestInitialContactTypedIdentity: on a connection for any peer, a peer
// whose identity is the name "192.0.2.1" (ID_FQDN) and says
// INITIAL_CONTACT does not drop the SA of the peer whose identity is the
// address 192.0.2.1 (ID_IPV4_ADDR): the same text, two identities.
func TestInitialContactTypedIdentity(t *testing.T) {
	n := newTestNet()
	const bYAML = `interfaces:
  - {name: ipsec1, if_id: 1, addresses: [10.2.0.1/24], routes: [10.3.0.0/16]}
connections:
  - name: rw
    local_addrs: [127.0.0.2]
    proposals: [aes128gcm16-prfsha256-x25519]
    local: {auth: psk, id: b.test}
    remote: {auth: psk, id: "%any"}
    children:
      - {name: rw-net, if_id: 1, local_ts: [10.2.0.0/24], remote_ts: [10.3.0.0/16], esp_proposals: [aes128gcm16]}
secrets:
  - {ids: [b.test, "%any"], secret: "0x2222222222222222222222222222222222222222222222222222222222222222"}
`
	const peerYAML = `interfaces:
  - {name: ipsec1, if_id: 1, addresses: [%[2]s.1/24], routes: [10.2.0.0/24]}
connections:
  - name: to-b
    local_addrs: [%[1]s]
    remote_addrs: [127.0.0.2]
    proposals: [aes128gcm16-prfsha256-x25519]
    local: {auth: psk, id: 192.0.2.1}
    remote: {auth: psk, id: b.test}
    children:
      - {name: net, if_id: 1, local_ts: [%[2]s.0/24], remote_ts: [10.2.0.0/24], esp_proposals: [aes128gcm16], start_action: start}
secrets:
  - {ids: [192.0.2.1, b.test], secret: "0x2222222222222222222222222222222222222222222222222222222222222222"}
`
	b := startOn(t, n, parseYAML(t, bYAML), 0, 0x2000, "127.0.0.2")
	addr := startOn(t, n, parseYAML(t, fmt.Sprintf(peerYAML, "127.0.0.1", "10.3.1")), b.m.Port(), 0x1000, "127.0.0.1")
	n.waitFor(t, "the address's SA", func() bool { return len(listed(b, "rw", "ESTABLISHED")) == 1 && established(addr) })
	first := listed(b, "rw", "ESTABLISHED")[0]
	nameCfg := parseYAML(t, fmt.Sprintf(peerYAML, "127.0.0.3", "10.3.2"))
	nameCfg.Connections[0].Local.Identity = ike.NewIdentity(message.IDFQDN, []byte("192.0.2.1"))
	name := startOn(t, n, nameCfg, b.m.Port(), 0x3000, "127.0.0.3")
	// B acted on INITIAL_CONTACT before it answered the IKE_AUTH.
	n.waitFor(t, "the name's SA", func() bool { return established(name) })
	if !strings.Contains(b.log.String(), "INITIAL_CONTACT") {
		t.Fatalf("B's log does not show the name's INITIAL_CONTACT:\n%s", b.log.String())
	}
	still := false
	for _, s := range listed(b, "rw", "ESTABLISHED") {
		still = still || s.SPIInitiator == first.SPIInitiator && len(s.Children) == 1
	}
	if !still {
		t.Errorf("the address's SA (%s_i) was dropped by the name's INITIAL_CONTACT", first.SPIInitiator)
	}
}
