//go:build linux

package integration

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/control"
)

// TestBadTraffic joins two daemons (AES-GCM-128, no ESN, replay window 64)
// and then, from namespace B, sends A's underlay what a hostile or broken
// network would: an unknown SPI, a real packet with a flipped ICV or
// ciphertext byte, a truncated packet, a runt, a NAT keepalive and an
// IKE-marked datagram, replays, a packet left of the window, and packets
// that authenticate but carry a bad trailer (padding, pad length, next
// header) or are dummies. Each must raise its Linux-named counter in A's
// `ipsecd stats` by exactly its amount and no other error counter, and the
// per-SA counters of `ipsecd state list` likewise; A must stay up and the
// tunnel keep carrying ping and TCP both ways. Over ESP in UDP and raw ESP.
//
// The genuine packets come from B's daemon itself: A's input is closed to
// B's ESP with nftables for a moment while B sends, and tcpdump in B keeps
// what B sent. A has never seen those packets, so a flipped ICV is judged
// by the ICV and not by the replay window, and the packet itself is
// accepted afterwards, once. The test seals the bad-trailer packets itself
// with B's key, under sequence numbers of held-back packets.
func TestBadTraffic(t *testing.T) {
	for _, raw := range []bool{false, true} {
		t.Run(encapName(raw), func(t *testing.T) {
			p := newPair(t)
			spec := tunnelSpec{suite: suiteByName("aes-gcm-128"), raw: raw, esn: false, window: 64}
			cfgA, cfgB := spec.configs()
			da := startDaemon(t, p.a, cfgA)
			startDaemon(t, p.b, cfgB)
			ping(t, p.a, innerB4, 2)

			held := holdBack(t, p, raw, 8)
			p1, p2 := held[0], held[1]
			t.Logf("held back %d ESP packets of B, seq %d..%d", len(held), espSeq(held[0]), espSeq(held[len(held)-1]))
			// Packets sealed here with B's key, under sequence numbers B
			// used but A never saw, so that the window lets them in: a
			// genuine one first, to show the sealing is right, then ones
			// that authenticate but carry a bad trailer.
			seal := newGCMSealer(t, spec.keyBA, spiBA)
			echo := ipv4Echo(innerB4, innerA4)
			crafted := func(i int, pad []byte, padLen int, nh byte) []byte {
				return seal.seal(espSeq(held[i]), echo, pad, padLen, nh)
			}
			valid, dummy := crafted(2, []byte{1, 2}, 2, 4), crafted(7, []byte{1, 2}, 2, 59)

			send := func(b []byte) { t.Helper(); inject(t, p.b, raw, underlayA4, b) }
			in := stateKey("in", spiBA)
			type saDelta struct{ packets, replay, replayWindow, integrity uint64 }
			cases := []struct {
				name    string
				udpOnly bool
				pkt     []byte
				want    map[string]uint64 // counters of ipsecd stats that go up, by how much
				sa      saDelta           // A's inbound SA
			}{
				{name: "unknown SPI", pkt: withSPI(p2, 0xdeadbeef), want: map[string]uint64{"XfrmInNoStates": 1}},
				{name: "flipped ICV byte", pkt: flipLast(p1), want: map[string]uint64{"XfrmInStateProtoError": 1}, sa: saDelta{integrity: 1}},
				{name: "flipped ciphertext byte", pkt: flipAt(p1, 20), want: map[string]uint64{"XfrmInStateProtoError": 1}, sa: saDelta{integrity: 1}},
				{name: "truncated below IV and ICV", pkt: p1[:8+8+3], want: map[string]uint64{"XfrmInHdrError": 1}},
				{name: "runt below SPI and seq", pkt: []byte{1, 2, 3}, want: map[string]uint64{"XfrmInHdrError": 1}},
				// Not errors: counted by the underlay under ipsecd's names.
				{name: "NAT keepalive", udpOnly: true, pkt: []byte{0xff}, want: map[string]uint64{"IpsecdUnderlayKeepalives": 1}},
				{name: "non-ESP marker (IKE)", udpOnly: true, pkt: append(make([]byte, 4), bytes.Repeat([]byte{0x2a}, 28)...),
					want: map[string]uint64{"IpsecdUnderlayNonESP": 1}},
				// Accepted: the replay that follows proves it, as a
				// packet not accepted before would be accepted then.
				{name: "held-back packet, once", pkt: p1, sa: saDelta{packets: 1}},
				{name: "the same packet again", pkt: p1, want: map[string]uint64{"XfrmInStateSeqError": 1}, sa: saDelta{replay: 1}},
				{name: "crafted, valid", pkt: valid, sa: saDelta{packets: 1}},
				{name: "crafted, valid, again", pkt: valid, want: map[string]uint64{"XfrmInStateSeqError": 1}, sa: saDelta{replay: 1}},
				// A bad trailer is a protocol error, not an integrity
				// failure: the ICV verified (RFC 4303 §2.4, Linux
				// esp_remove_trailer).
				{name: "crafted, padding not 1, 2", pkt: crafted(3, []byte{0, 0}, 2, 4), want: map[string]uint64{"XfrmInStateProtoError": 1}},
				{name: "crafted, pad length past the payload", pkt: crafted(4, []byte{1, 2}, 255, 4), want: map[string]uint64{"XfrmInStateProtoError": 1}},
				{name: "crafted, next header TCP in tunnel mode", pkt: crafted(5, []byte{1, 2}, 2, 6), want: map[string]uint64{"XfrmInStateModeError": 1}},
				{name: "crafted, next header IPv6 on an IPv4 packet", pkt: crafted(6, []byte{1, 2}, 2, 41), want: map[string]uint64{"XfrmInStateModeError": 1}},
				// A dummy packet (RFC 4303 §2.6) is dropped silently, but
				// it was valid: it took its place in the window.
				{name: "crafted, dummy (next header 59)", pkt: dummy},
				{name: "the same dummy again", pkt: dummy, want: map[string]uint64{"XfrmInStateSeqError": 1}, sa: saDelta{replay: 1}},
			}
			for _, tc := range cases {
				if tc.udpOnly && raw {
					continue
				}
				before, beforeSA := da.stats(), da.saStats()[in]
				send(tc.pkt)
				wantSA := control.StateStats{
					Packets: beforeSA.Packets + tc.sa.packets, Replay: beforeSA.Replay + tc.sa.replay,
					ReplayWindow: beforeSA.ReplayWindow + tc.sa.replayWindow, IntegrityFailed: beforeSA.IntegrityFailed + tc.sa.integrity,
				}
				after, afterSA := waitCounters(t, da, in, before, tc.want, wantSA)
				checkCounters(t, tc.name, before, after, tc.want)
				// Packets only at least: B's kernel sends into the tunnel on
				// its own now and then (IPv6 router solicitations, MLD).
				if afterSA.Packets < wantSA.Packets || afterSA.Replay != wantSA.Replay ||
					afterSA.ReplayWindow != wantSA.ReplayWindow || afterSA.IntegrityFailed != wantSA.IntegrityFailed {
					t.Errorf("%s: A's inbound SA: packets %d replay %d replay-window %d integrity-failed %d; want >=%d %d %d %d",
						tc.name, afterSA.Packets, afterSA.Replay, afterSA.ReplayWindow, afterSA.IntegrityFailed,
						wantSA.Packets, wantSA.Replay, wantSA.ReplayWindow, wantSA.IntegrityFailed)
				}
				mustBeAlive(t, da, tc.name)
			}

			// The tunnel still works, both ways.
			ping(t, p.a, innerB4, 3)
			ping(t, p.b, innerA4, 3)
			tcpTransfer(t, p.a, p.b, innerB4, 256<<10)
			tcpTransfer(t, p.b, p.a, innerA4, 256<<10)

			// p2 was never accepted and now lies far left of the window.
			before, beforeSA := da.stats(), da.saStats()[in]
			if beforeSA.Seq < uint64(espSeq(p2))+uint64(spec.window) {
				t.Fatalf("A's inbound SA is at seq %d: not %d past the held-back seq %d", beforeSA.Seq, spec.window, espSeq(p2))
			}
			send(p2)
			wantSA := beforeSA
			wantSA.ReplayWindow++
			after, afterSA := waitCounters(t, da, in, before, map[string]uint64{"XfrmInStateSeqError": 1}, wantSA)
			checkCounters(t, "left of the window", before, after, map[string]uint64{"XfrmInStateSeqError": 1})
			if afterSA.ReplayWindow != wantSA.ReplayWindow || afterSA.Replay != beforeSA.Replay {
				t.Errorf("left of the window: A's inbound SA: replay-window %d, replay %d; want %d, %d",
					afterSA.ReplayWindow, afterSA.Replay, wantSA.ReplayWindow, beforeSA.Replay)
			}
			mustBeAlive(t, da, "left of the window")
		})
	}
}

// holdBack closes A's input to ESP from B (nftables), pings A from B so
// that B's daemon seals echo requests, captures them leaving B, and opens
// A's input again. It returns at least n ESP packets (SPI to ICV) of B's
// outbound SA that A never received, in the order B sent them.
func holdBack(t *testing.T, p *pair, raw bool, n int) [][]byte {
	t.Helper()
	match, filter := "udp dport 4500", "udp and dst port 4500"
	if raw {
		match, filter = "meta l4proto esp", "ip proto 50"
	}
	p.a.mustRun(t, "nft", "add", "table", "inet", "ipsecdtest")
	p.a.mustRun(t, "nft", "add", "chain", "inet", "ipsecdtest", "input", "{ type filter hook input priority -10; }")
	p.a.mustRun(t, "nft", "add", "rule", "inet", "ipsecdtest", "input", "ip", "saddr", underlayB4, match, "drop")
	dropped := true
	reopen := func() {
		if dropped {
			dropped = false
			p.a.mustRun(t, "nft", "delete", "table", "inet", "ipsecdtest")
		}
	}
	defer reopen()

	pcap := filepath.Join(t.TempDir(), "held.pcap")
	stop := captureFile(t, p.b, "veth1", pcap, "src host "+underlayB4+" and dst host "+underlayA4+" and "+filter)
	// A cannot answer: ping is expected to fail.
	p.b.run("ping", "-n", "-q", "-c", fmt.Sprint(n+2), "-i", "0.1", "-w", "2", innerA4)
	stop()
	reopen()

	pkts, err := readPcapESP(pcap, raw)
	if err != nil {
		t.Fatal(err)
	}
	var held [][]byte
	for _, b := range pkts {
		if len(b) >= 8 && binary.BigEndian.Uint32(b) == spiBA {
			held = append(held, b)
		}
	}
	if len(held) < n {
		t.Fatalf("captured %d ESP packets with SPI %#x leaving B, want %d", len(held), spiBA, n)
	}
	return held
}

// readPcapESP returns the ESP packets (SPI to ICV) in a pcap file of
// Ethernet frames: UDP payloads, or with raw the IP payloads of protocol 50.
func readPcapESP(path string, raw bool) ([][]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(b) < 24 {
		return nil, fmt.Errorf("%s: %d bytes, no pcap header", path, len(b))
	}
	var bo binary.ByteOrder
	switch binary.LittleEndian.Uint32(b) {
	case 0xa1b2c3d4, 0xa1b23c4d:
		bo = binary.LittleEndian
	case 0xd4c3b2a1, 0x4d3cb2a1:
		bo = binary.BigEndian
	default:
		return nil, fmt.Errorf("%s: not a pcap file", path)
	}
	if lt := bo.Uint32(b[20:]); lt != 1 {
		return nil, fmt.Errorf("%s: link type %d, want Ethernet", path, lt)
	}
	var out [][]byte
	for b = b[24:]; len(b) >= 16; {
		n := int(bo.Uint32(b[8:]))
		if len(b) < 16+n {
			return nil, fmt.Errorf("%s: truncated record", path)
		}
		frame := b[16 : 16+n]
		b = b[16+n:]
		if p := espOfFrame(frame, raw); p != nil {
			out = append(out, p)
		}
	}
	return out, nil
}

// espOfFrame returns the ESP packet in an Ethernet frame, or nil.
func espOfFrame(f []byte, raw bool) []byte {
	if len(f) < 14 {
		return nil
	}
	var proto byte
	var payload []byte
	switch binary.BigEndian.Uint16(f[12:]) {
	case 0x0800:
		ip := f[14:]
		if len(ip) < 20 {
			return nil
		}
		ihl, total := int(ip[0]&0x0f)*4, int(binary.BigEndian.Uint16(ip[2:]))
		if total > len(ip) || ihl > total {
			return nil
		}
		proto, payload = ip[9], ip[ihl:total]
	case 0x86dd:
		ip := f[14:]
		if len(ip) < 40 || 40+int(binary.BigEndian.Uint16(ip[4:])) > len(ip) {
			return nil
		}
		proto, payload = ip[6], ip[40:40+int(binary.BigEndian.Uint16(ip[4:]))]
	default:
		return nil
	}
	switch {
	case raw && proto == 50:
		return bytes.Clone(payload)
	case !raw && proto == 17 && len(payload) > 8:
		return bytes.Clone(payload[8:])
	}
	return nil
}

func espSeq(p []byte) uint32 { return binary.BigEndian.Uint32(p[4:]) }

func withSPI(p []byte, spi uint32) []byte {
	q := bytes.Clone(p)
	binary.BigEndian.PutUint32(q, spi)
	return q
}

func flipAt(p []byte, i int) []byte {
	q := bytes.Clone(p)
	q[i] ^= 0x01
	return q
}

func flipLast(p []byte) []byte { return flipAt(p, len(p)-1) }

// inject sends one packet from namespace ns to dst's ESP-in-UDP port (from
// an ephemeral port, not 4500, which B's daemon holds) or, with raw, as IP
// protocol 50. It runs the test binary inside ns as a helper.
func inject(t *testing.T, ns *netns, raw bool, dst string, pkt []byte) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	mode := "send-udp"
	if raw {
		mode = "send-esp"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := ns.cmd(ctx, self, dst, hex.EncodeToString(pkt))
	cmd.Env = append(os.Environ(), helperEnv+"="+mode)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s in %s: %v\n%s", mode, ns.name, err, out)
	}
}

// sendPackets is the helper behind inject (runHelper modes send-udp and
// send-esp): args are the destination address and hex packets.
func sendPackets(mode string, args []string) error {
	if len(args) < 2 {
		return errors.New("want DST HEX...")
	}
	dst := args[0]
	var network, addr string
	switch mode {
	case "send-udp":
		network, addr = "udp", net.JoinHostPort(dst, "4500")
	case "send-esp":
		network, addr = "ip4:50", dst
		if strings.Contains(dst, ":") {
			network = "ip6:50"
		}
	default:
		return fmt.Errorf("unknown mode %q", mode)
	}
	c, err := net.Dial(network, addr)
	if err != nil {
		return err
	}
	defer c.Close()
	for _, h := range args[1:] {
		b, err := hex.DecodeString(h)
		if err != nil {
			return err
		}
		if _, err := c.Write(b); err != nil {
			return err
		}
	}
	return nil
}

// waitCounters polls A's counters until every counter in want has risen by
// its amount and the SA's counters reached wantSA (packets and drops), or
// 3 s pass; then it waits a little longer for stray increments to show
// and returns what it saw last.
func waitCounters(t *testing.T, d *daemon, sa string, before map[string]uint64, want map[string]uint64, wantSA control.StateStats) (map[string]uint64, control.StateStats) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		st, s := d.stats(), d.saStats()[sa]
		done := s.Packets >= wantSA.Packets && s.Replay >= wantSA.Replay &&
			s.ReplayWindow >= wantSA.ReplayWindow && s.IntegrityFailed >= wantSA.IntegrityFailed
		for name, n := range want {
			done = done && st[name] >= before[name]+n
		}
		if done || time.Now().After(deadline) {
			time.Sleep(150 * time.Millisecond)
			return d.stats(), d.saStats()[sa]
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkCounters fails unless every Xfrm counter, and every counter named
// in want, rose by exactly want (0 for those not in want).
func checkCounters(t *testing.T, what string, before, after, want map[string]uint64) {
	t.Helper()
	names := make([]string, 0, len(after))
	for name := range after {
		if _, ok := want[name]; ok || strings.HasPrefix(name, "Xfrm") {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for name := range want {
		if _, ok := after[name]; !ok {
			t.Errorf("%s: ipsecd stats has no counter %s", what, name)
		}
	}
	for _, name := range names {
		if got := after[name] - before[name]; got != want[name] {
			t.Errorf("%s: %s went up by %d, want %d", what, name, got, want[name])
		}
	}
}

// mustBeAlive fails the test unless the daemon is still running and its
// control socket answers.
func mustBeAlive(t *testing.T, d *daemon, after string) {
	t.Helper()
	select {
	case err := <-d.done:
		d.done <- err
		t.Fatalf("after %s: ipsecd in %s exited: %v\n%s", after, d.ns.name, err, d.log.String())
	default:
	}
	if out, err := d.ctl("stats"); err != nil {
		t.Fatalf("after %s: ipsecd in %s does not answer: %v\n%s", after, d.ns.name, err, out)
	}
}

// gcmSealer seals ESP packets as the sender of an AES-GCM-128 SA without
// ESN (RFC 4106) does, with any trailer, good or bad.
type gcmSealer struct {
	aead cipher.AEAD
	salt []byte
	spi  uint32
}

// newGCMSealer takes the SA's key material: a 16-byte AES key and a 4-byte
// salt.
func newGCMSealer(t *testing.T, key []byte, spi uint32) *gcmSealer {
	t.Helper()
	block, err := aes.NewCipher(key[:16])
	if err != nil {
		t.Fatal(err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		t.Fatal(err)
	}
	return &gcmSealer{aead: aead, salt: key[16:20], spi: spi}
}

// seal returns SPI, seq, a random IV, and inner ‖ pad ‖ padLen ‖ nh
// encrypted and authenticated, with the ICV.
func (g *gcmSealer) seal(seq uint32, inner, pad []byte, padLen int, nh byte) []byte {
	hdr := make([]byte, 16, 16+len(inner)+len(pad)+2+16)
	binary.BigEndian.PutUint32(hdr, g.spi)
	binary.BigEndian.PutUint32(hdr[4:], seq)
	rand.Read(hdr[8:16])
	plain := append(append(bytes.Clone(inner), pad...), byte(padLen), nh)
	nonce := append(bytes.Clone(g.salt), hdr[8:16]...)
	return g.aead.Seal(hdr, nonce, plain, hdr[:8])
}

// ipv4Echo returns an ICMP echo request from src to dst (28 bytes, so
// that with a 2-byte trailer the ciphertext is 4-byte aligned with 2 bytes
// of padding).
func ipv4Echo(src, dst string) []byte {
	b := make([]byte, 28)
	b[0], b[8], b[9] = 0x45, 64, 1 // version 4, IHL 5; TTL; ICMP
	binary.BigEndian.PutUint16(b[2:], 28)
	copy(b[12:16], net.ParseIP(src).To4())
	copy(b[16:20], net.ParseIP(dst).To4())
	binary.BigEndian.PutUint16(b[10:], inetChecksum(b[:20]))
	b[20] = 8 // echo request
	binary.BigEndian.PutUint16(b[24:], 0x1d5)
	binary.BigEndian.PutUint16(b[26:], 1)
	binary.BigEndian.PutUint16(b[22:], inetChecksum(b[20:]))
	return b
}

func inetChecksum(b []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return ^uint16(s)
}
