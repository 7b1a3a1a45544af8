package main

import (
	"crypto/rand"
	"fmt"
	"net/netip"
	"strings"
)

// suite is an AEAD as the config file names it.
type suite struct {
	label  string // for tables
	name   string // the config's aead name (Linux's)
	keyLen int    // key plus 4-byte salt
}

var (
	aesGCM128 = suite{"AES-GCM-128", "rfc4106(gcm(aes))", 16 + 4}
	chacha20  = suite{"ChaCha20-Poly1305", "rfc7539esp(chacha20,poly1305)", 32 + 4}
)

// ipsecSpec describes a tunnel-mode, ESP-in-UDP pair of ipsecd configs.
// Traffic always crosses one interface and one SA pair, both listed last
// so that a lookup that walked a list would pay for everything before
// them.
type ipsecSpec struct {
	suite  suite
	queues int // TUN queues of the measured interface
	// ifaces is the number of interfaces per side; all but the measured
	// one are idle, each with its own SA pair.
	ifaces int
	// sas is the number of out/in SA pairs on the measured interface.
	sas int
	// selectors gives every out SA of the measured interface a selector
	// (the measured one the inner /24s, the idle ones other /24s), so
	// each packet's SA is picked by destination. Implied by sas > 1.
	selectors bool
	// profiled turns on the metrics listener (at metricsAddr) with Go's
	// profiler, for -profile.
	profiled bool
}

func (s ipsecSpec) name() string {
	return fmt.Sprintf("%s-q%d-i%d-s%d", strings.ToLower(s.suite.label), s.queues, max(s.ifaces, 1), max(s.sas, 1))
}

// side is one end's view of the pair.
type side struct {
	local, peer string // underlay addresses
	// spiOut and spiIn are the bases of this side's SPIs; the peer has
	// them the other way round.
	spiOut, spiIn uint32
	inner, remote string // measured interface: own address, peer's address
	// idleNet and idlePeer give the inner /26s of idle interface i.
	idleNet, idlePeer func(i int) netip.Prefix
	// selNet gives the destination /24 of idle SA i on the measured
	// interface.
	selNet func(i int) string
}

// Idle interface i (1..32767) gets the i-th /26 of 100.64.0.0/11 on A and
// of 100.96.0.0/11 on B, halves of the shared address space of RFC 6598
// that do not meet however many interfaces there are; idle SA i selects
// 10.(64+i/256).(i%256).0/24 (A) or 10.(96+i/256).(i%256).0/24 (B),
// networks no packet is sent to.
// maxIfaces is the most interfaces per side the address plan holds.
const maxIfaces = 32767

func net26(second, i int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{100, byte(second + i/1024), byte(i % 1024 / 4), byte(i % 4 * 64)}), 26)
}

func net24(first, second, i int) string {
	return fmt.Sprintf("%d.%d.%d.0/24", first, second+i/256, i%256)
}

var (
	sideA = side{
		local: underlayA, peer: underlayB, spiOut: 0x10000000, spiIn: 0x20000000,
		inner: ipsecInnerA, remote: ipsecInnerB,
		idleNet:  func(i int) netip.Prefix { return net26(64, i) },
		idlePeer: func(i int) netip.Prefix { return net26(96, i) },
		selNet:   func(i int) string { return net24(10, 64, i) },
	}
	sideB = side{
		local: underlayB, peer: underlayA, spiOut: 0x20000000, spiIn: 0x10000000,
		inner: ipsecInnerB, remote: ipsecInnerA,
		idleNet:  func(i int) netip.Prefix { return net26(96, i) },
		idlePeer: func(i int) netip.Prefix { return net26(64, i) },
		selNet:   func(i int) string { return net24(10, 96, i) },
	}
)

// configs returns the YAML of A and B, without the control key. Keys are
// fresh for each call; both sides get the same key per SPI.
func (s ipsecSpec) configs() (a, b string) {
	keys := map[uint32]string{}
	key := func(spi uint32) string {
		if k, ok := keys[spi]; ok {
			return k
		}
		k := make([]byte, s.suite.keyLen)
		rand.Read(k)
		keys[spi] = fmt.Sprintf("0x%x", k)
		return keys[spi]
	}
	return s.config(sideA, key), s.config(sideB, key)
}

func (s ipsecSpec) config(sd side, key func(spi uint32) string) string {
	var ifaces, states strings.Builder
	state := func(spi uint32, dir string, ifID int, src, dst, sel string) {
		fmt.Fprintf(&states, `  - {src: %s, dst: %s, spi: %#x, dir: %s, mode: tunnel, if_id: %d,
     aead: {name: %q, key: %q, icv_bits: 128},
     encap: {type: espinudp, sport: 4500, dport: 4500}`, src, dst, spi, dir, ifID, s.suite.name, key(spi))
		if dir == "in" {
			states.WriteString(", replay_window: 1024")
		}
		if sel != "" {
			states.WriteString(", " + sel)
		}
		states.WriteString("}\n")
	}
	pair := func(n int, ifID int, sel string) {
		state(sd.spiOut+uint32(n), "out", ifID, sd.local, sd.peer, sel)
		// Inbound SAs are found by SPI; they need no selector.
		state(sd.spiIn+uint32(n), "in", ifID, sd.peer, sd.local, "")
	}

	// Idle interfaces first, if_id 1.., each with one SA pair.
	for i := 1; i < s.ifaces; i++ {
		fmt.Fprintf(&ifaces, "  - {name: ipsec%d, if_id: %d, mtu: %d, queues: 1, addresses: [%s], routes: [%s]}\n",
			i, i, tunnelMTU, netip.PrefixFrom(sd.idleNet(i).Addr().Next(), 26), sd.idlePeer(i))
		pair(i, i, "")
	}
	// The measured interface last.
	ifID := max(s.ifaces, 1)
	fmt.Fprintf(&ifaces, "  - {name: ipsec%d, if_id: %d, mtu: %d, queues: %d, addresses: [%s/24], routes: [%s]}\n",
		ifID, ifID, tunnelMTU, s.queues, sd.inner, prefix24(sd.remote))
	localNet := prefix24(sd.inner)
	for i := 1; i < s.sas; i++ {
		pair(s.ifaces+i, ifID, fmt.Sprintf("selector: {src: %s, dst: %s}", localNet, sd.selNet(i)))
	}
	sel := ""
	if s.selectors || s.sas > 1 {
		sel = fmt.Sprintf("selector: {src: %s, dst: %s}", localNet, prefix24(sd.remote))
	}
	pair(0, ifID, sel)

	return fmt.Sprintf(`log: {level: warn, format: text}
underlay:
  udp: "0.0.0.0:4500"
interfaces:
%sstates:
%s`, ifaces.String(), states.String())
}

// prefix24 turns 10.20.0.1 into 10.20.0.0/24.
func prefix24(addr string) string {
	return addr[:strings.LastIndex(addr, ".")] + ".0/24"
}
