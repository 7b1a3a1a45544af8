//go:build linux

package integration

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/ipsecd/ipsecd/sa"
	"github.com/ipsecd/ipsecd/sa/satest"
)

// suite is one ESP transform of the shared table (satest.Suites), as the
// config file spells it.
type suite struct {
	name   string
	keyLen int
	alg    func(key []byte) (aead, enc, auth *sa.Algorithm)
}

// yaml returns the algorithm keys of a state keyed with key (keyLen
// bytes), as docs/config.md spells them.
func (s suite) yaml(key []byte) string {
	aead, enc, auth := s.alg(key)
	if aead != nil {
		return fmt.Sprintf(`aead: {name: %q, key: "0x%x", icv_bits: %d}`, aead.Name, aead.Key, aead.Bits)
	}
	encYAML := fmt.Sprintf(`enc: {name: %q}`, enc.Name)
	if len(enc.Key) != 0 {
		encYAML = fmt.Sprintf(`enc: {name: %q, key: "0x%x"}`, enc.Name, enc.Key)
	}
	return encYAML + fmt.Sprintf("\n    auth: {name: %q, key: \"0x%x\", trunc_bits: %d}", auth.Name, auth.Key, auth.Bits)
}

func suitesOf(ss []satest.Suite) []suite {
	out := make([]suite, len(ss))
	for i, s := range ss {
		out[i] = suite{s.Name, s.KeyLen, s.Algorithms}
	}
	return out
}

// suites are every transform the daemon supports; truncGCMSuites, AES-GCM
// with a truncated ICV (RFC 4106 §8), are kept out of suites (every suite
// runs TestTunnel's TCP streams): the interop test checks them against an
// independent implementation.
var (
	suites         = suitesOf(satest.Suites)
	truncGCMSuites = suitesOf(satest.TruncatedGCM)
)

func suiteByName(name string) suite {
	for _, s := range append(suites[:len(suites):len(suites)], truncGCMSuites...) {
		if s.name == name {
			return s
		}
	}
	panic("integration: no suite " + name)
}

func randomKey(n int) []byte {
	k := make([]byte, n)
	rand.Read(k)
	return k
}

// The inner (cleartext) networks: A's interface holds the .1 of the
// first ones and routes the second ones into the tunnel; B the reverse.
const (
	innerA4 = "198.51.100.1"
	innerB4 = "203.0.113.1"
	innerA6 = "2001:db8:a::1"
	innerB6 = "2001:db8:b::1"
)

// tunnelSpec describes a tunnel-mode pair of endpoints.
type tunnelSpec struct {
	suite  suite
	raw    bool // raw ESP instead of ESP in UDP
	outer6 bool // IPv6 underlay
	esn    bool
	window int // replay window of the inbound SAs
	keyAB  []byte
	keyBA  []byte
	extraA string // appended to A's config
	noOutA bool   // leave A without its outbound SA (fail-closed tests)
	mtu    int
	queues int
}

func (s *tunnelSpec) fill() {
	if s.keyAB == nil {
		s.keyAB = randomKey(s.suite.keyLen)
		s.keyBA = randomKey(s.suite.keyLen)
	}
	if s.mtu == 0 {
		s.mtu = 1400
	}
	if s.queues == 0 {
		s.queues = 1
	}
	if s.window == 0 {
		s.window = 1024
	}
}

// SPIs: A→B and B→A.
const (
	spiAB = 0x1001
	spiBA = 0x2001
)

// configs returns the YAML of A and B (without the control key, which
// startDaemon adds).
func (s *tunnelSpec) configs() (a, b string) {
	s.fill()
	la, lb := underlayA4, underlayB4
	listen := "0.0.0.0:4500"
	if s.outer6 {
		la, lb = underlayA6, underlayB6
		listen = "[::]:4500"
	}
	a = s.side(listen, la, lb, innerA4+"/24", innerA6+"/64", innerB4, innerB6, spiAB, spiBA, s.keyAB, s.keyBA, s.noOutA) + s.extraA
	b = s.side(listen, lb, la, innerB4+"/24", innerB6+"/64", innerA4, innerA6, spiBA, spiAB, s.keyBA, s.keyAB, false)
	return a, b
}

func (s *tunnelSpec) side(listen, local, peer, addr4, addr6, remote4, remote6 string, spiOut, spiIn int, keyOut, keyIn []byte, noOut bool) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, `log: {level: debug, format: text}
underlay:
  udp: "%s"
  raw_esp: %v
interfaces:
  - name: ipsec1
    if_id: 1
    mtu: %d
    queues: %d
    addresses: [%s, %s]
    routes: [%s/24, %s/64]
states:
`, listen, s.raw, s.mtu, s.queues, addr4, addr6, prefix24(remote4), prefix64(remote6))
	encap := "\n    encap: {type: espinudp, sport: 4500, dport: 4500}"
	if s.raw {
		encap = ""
	}
	if !noOut {
		fmt.Fprintf(&sb, `  - src: "%s"
    dst: "%s"
    spi: 0x%x
    dir: out
    mode: tunnel
    if_id: 1
    %s%s
    esn: %v
`, local, peer, spiOut, s.suite.yaml(keyOut), encap, s.esn)
	}
	fmt.Fprintf(&sb, `  - src: "%s"
    dst: "%s"
    spi: 0x%x
    dir: in
    mode: tunnel
    if_id: 1
    %s%s
    replay_window: %d
    esn: %v
`, peer, local, spiIn, s.suite.yaml(keyIn), encap, s.window, s.esn)
	return sb.String()
}

func prefix24(a string) string { return a[:strings.LastIndex(a, ".")] + ".0" }
func prefix64(a string) string { return a[:strings.LastIndex(a, "::")] + "::" }

func hexKey(k []byte) string { return "0x" + hex.EncodeToString(k) }
