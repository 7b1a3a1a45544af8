//go:build linux

package integration

import (
	"encoding/hex"
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/ike"
)

// TestIKECharonFailures: a wrong pre-shared key and disjoint proposals
// fail cleanly with either side initiating: nothing is installed on
// either side, ipsecd logs why, and charon logs the notify it sent or got.
func TestIKECharonFailures(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec ikeSpec
		// ipsecd's log when it initiated and when it responded
		ours, oursResp *regexp.Regexp
		// charon's log when it responded (refusing ipsecd) and when it
		// initiated (refused by ipsecd)
		charonResp, charonInit string
	}{
		{"wrong psk", ikeSpec{secret: "not-the-psk"}, regexp.MustCompile(`(?i)authentication.failed`),
			regexp.MustCompile(`(?i)authentication.failed`), "N(AUTH_FAILED)", "received AUTHENTICATION_FAILED notify error"},
		// As responder, ipsecd's line names both sides' proposals.
		{"disjoint proposals", ikeSpec{ipsecdIKE: "aes128gcm16-prfsha256-ecp256"}, regexp.MustCompile(`(?i)no.proposal.chosen`),
			regexp.MustCompile(`(?i)no.proposal.chosen.*aes256-sha256.*x25519.*aes128gcm16-prfsha256-ecp256`), "N(NO_PROP)", "received NO_PROPOSAL_CHOSEN notify error"},
	} {
		for _, initiator := range []string{"ipsecd", "charon"} {
			t.Run(tc.name+"/"+initiator, func(t *testing.T) {
				r := newIKERig(t, tc.spec)
				from := r.ch.LogSize()
				want, ours := tc.charonResp, tc.ours
				if initiator == "ipsecd" {
					// The command may report the failure; the test
					// looks at what each side did.
					out, err := r.d.ctl("ike", "initiate", "--child", "net")
					t.Logf("ipsecd ike initiate: %v %s", err, out)
				} else {
					want, ours = tc.charonInit, tc.oursResp
					if out, err := r.ch.Swanctl("--initiate", "--child", "net", "--timeout", "10"); err == nil {
						t.Fatalf("swanctl --initiate succeeded:\n%s", out)
					}
				}
				deadline := time.Now().Add(10 * time.Second)
				for !strings.Contains(r.ch.LogSince(from), want) || !ours.MatchString(r.d.log.String()) {
					if time.Now().After(deadline) {
						t.Fatalf("within 10 s: charon's log says %q: %v; ipsecd's log matches %v: %v",
							want, strings.Contains(r.ch.LogSince(from), want), ours, ours.MatchString(r.d.log.String()))
					}
					time.Sleep(100 * time.Millisecond)
				}
				for _, l := range strings.Split(r.d.log.String(), "\n") {
					if ours.MatchString(l) {
						t.Logf("ipsecd: %s", l)
					}
				}
				r.waitDown(t, "after the failure", 5*time.Second, true)
				if n := len(r.d.states()); n != 0 {
					t.Fatalf("ipsecd has %d SAs after the failure, want none", n)
				}
			})
		}
	}
}

// malformedIKE sends a burst of malformed IKE messages to argv[1], ports
// 500 and 4500 (with the non-ESP marker), each with a fresh initiator
// SPI: an empty one (on port 4500 the marker alone), messages built
// with scapy's IKEv2 layer (an SA with no transforms,
// a KE of an unknown group, an empty nonce, an unknown exchange type, SK
// payloads of random bytes for SAs that do not exist, an unknown critical
// payload), payload and message lengths that lie, other IKE versions, and
// argv[3] truncations and bit flips of the real IKE_SA_INIT argv[2] (hex),
// seeded with argv[4], from the source address argv[5].
const malformedIKE = `
import sys, os, random
from scapy.all import IP, UDP, Raw, send
from scapy.contrib.ikev2 import *
dst, tmpl, n, src = sys.argv[1], bytes.fromhex(sys.argv[2]), int(sys.argv[3]), sys.argv[5]
random.seed(int(sys.argv[4]))
def spi():
    return os.urandom(8)
def hdr(**kw):
    return IKEv2(init_SPI=spi(), **kw)
msgs = [
    b'',
    bytes(hdr(exch_type=34, flags='Initiator', next_payload='SA')/IKEv2_payload_SA(next_payload='None', prop=IKEv2_payload_Proposal(trans_nb=0))),
    bytes(hdr(exch_type=34, flags='Initiator', next_payload='KE')/IKEv2_payload_KE(next_payload='None', group=99, load=b'x')),
    bytes(hdr(exch_type=34, flags='Initiator', next_payload='Nonce')/IKEv2_payload_Nonce(next_payload='None', load=b'')),
    bytes(hdr(exch_type=99, flags='Initiator', next_payload='None')),
    bytes(hdr(exch_type=35, resp_SPI=spi(), flags='Initiator', id=1, next_payload='Encrypted')/IKEv2_payload_Encrypted(next_payload='IDi', load=os.urandom(64))),
    bytes(hdr(exch_type=37, resp_SPI=spi(), flags='Response', id=5, next_payload='Encrypted')/IKEv2_payload_Encrypted(next_payload='None', load=os.urandom(8))),
    bytes(hdr(exch_type=34, flags='Initiator', next_payload=200)/Raw(b'\x00\x80\x00\x08abcd')),
]
for plen in (0, 1, 3, 0xffff):
    m = bytearray(bytes(hdr(exch_type=34, flags='Initiator', next_payload='Nonce')/IKEv2_payload_Nonce(next_payload='None', load=b'n'*16)))
    m[30:32] = plen.to_bytes(2, 'big')
    msgs.append(bytes(m))
for mlen in (0, 27, 29, 0xffffffff):
    m = bytearray(tmpl); m[0:8] = spi(); m[24:28] = mlen.to_bytes(4, 'big'); msgs.append(bytes(m))
for v in (0x10, 0x30, 0x21):
    m = bytearray(tmpl); m[0:8] = spi(); m[17] = v; msgs.append(bytes(m))
for i in range(n):
    m = bytearray(tmpl); m[0:8] = spi()
    if i % 2 == 0:
        m = m[:random.randrange(0, len(m))]
    else:
        for _ in range(random.randint(1, 8)):
            j = random.randrange(8, len(m)); m[j] ^= 1 << random.randrange(8)
    msgs.append(bytes(m))
pkts = []
for m in msgs:
    pkts.append(IP(src=src, dst=dst)/UDP(sport=5500, dport=500)/Raw(m))
    pkts.append(IP(src=src, dst=dst)/UDP(sport=5500, dport=4500)/Raw(b'\0\0\0\0'+m))
send(pkts, verbose=0)
print(len(pkts))
`

// TestIKEMalformedBurst: a burst of malformed IKE messages from charon's
// namespace (from another address of it) leaves ipsecd answering its
// control socket and negotiating: charon then gets its tunnel up and a
// ping through.
func TestIKEMalformedBurst(t *testing.T) {
	r := newIKERig(t, ikeSpec{metrics: true})
	before, overflowsBefore := ikeInputCounted(t, r), udpRcvbufErrors(t, r.d.pid())
	_, tmpl, err := ike.Initiate(engineConfig(t, r.spec.ike, r.spec.esp, false),
		netip.MustParseAddrPort(underlayB4+":500"), netip.MustParseAddrPort(underlayA4+":500"), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	// The burst comes from an address of its own beside charon's: many
	// of its mutated IKE_SA_INITs are still good enough to be answered,
	// and the half-open SAs they leave would (rightly, as
	// ike.block_threshold says) hold back charon's own IKE_SA_INIT from
	// the same address until they time out. From another address they
	// must not.
	const burstFrom = "192.0.2.3"
	r.p.b.mustRun(t, "ip", "addr", "add", burstFrom+"/24", "dev", "veth1")
	const mutations = 400
	out, err := r.p.b.run(scapyPython, "-c", malformedIKE, underlayA4, hex.EncodeToString(tmpl), fmt.Sprint(mutations), fmt.Sprint(time.Now().UnixNano()), burstFrom)
	if err != nil {
		t.Fatalf("scapy: %v\n%s", err, out)
	}
	sent, _ := strconv.Atoi(strings.TrimSpace(out))
	t.Logf("scapy sent %d malformed IKE datagrams", sent)
	// Every datagram is counted, as dropped or as an exchange's result,
	// once IKE has taken it from the queue; those the kernel dropped
	// for a full socket buffer (the burst is faster than a loaded
	// machine reads) never reached ipsecd.
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := ikeInputCounted(t, r) - before
		overflows := float64(udpRcvbufErrors(t, r.d.pid()) - overflowsBefore)
		if got+overflows >= float64(sent) {
			t.Logf("ipsecd counted %.0f IKE datagrams; the kernel dropped %.0f for full socket buffers", got, overflows)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ipsecd counted %.0f of the %d datagrams in ipsecd_ike_dropped_total and ipsecd_ike_exchanges_total, the kernel dropped %.0f:\n%s",
				got, sent, overflows, scrape(t, r.p.a, "http://"+ikeMetricsAddr+"/metrics"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if out, err := r.d.ctl("health"); err != nil {
		t.Fatalf("ipsecd health after the burst: %v\n%s", err, out)
	}
	r.up(t, "charon")
	ping(t, r.p.a, innerB4, 2)
	if r.d.cmd.ProcessState != nil {
		t.Fatalf("ipsecd exited: %v", r.d.cmd.ProcessState)
	}
}

// ikeInputCounted sums the IKE messages ipsecd counted as dropped (any
// reason) and as handled (any exchange and result).
func ikeInputCounted(t *testing.T, r *ikeRig) float64 {
	t.Helper()
	var sum float64
	for _, l := range strings.Split(scrape(t, r.p.a, "http://"+ikeMetricsAddr+"/metrics"), "\n") {
		if !strings.HasPrefix(l, "ipsecd_ike_dropped_total{") && !strings.HasPrefix(l, "ipsecd_ike_exchanges_total{") {
			continue
		}
		f := strings.Fields(l)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", l, err)
		}
		sum += v
	}
	return sum
}
