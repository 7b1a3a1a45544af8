//go:build linux

package integration

import (
	"crypto/x509"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/ike"
	"github.com/ipsecd/ipsecd/ike/message"
	"github.com/ipsecd/ipsecd/ike/proposal"
	"github.com/ipsecd/ipsecd/internal/charontest"
)

// raClientsEnv, when set to a count, makes TestRAScale connect that many
// road warriors to one gateway (a measurement for docs/benchmark.md, not a
// CI check; it skips otherwise). raProfileEnv names a directory for the
// gateway's CPU and heap profiles of the first connect.
const (
	raClientsEnv = "IPSECD_RA_CLIENTS"
	raProfileEnv = "IPSECD_RA_PROFILE"
	// raGatewayEnv=charon puts charon 5.9.8 in the gateway's place.
	raGatewayEnv = "IPSECD_RA_GATEWAY"
)

// raEAPUser is road warrior i's EAP identity and its own password
// (EAP-MSCHAPv2 against the gateway's certificate, as remote access runs).
func raEAPUser(i int) (id, pw string) {
	return fmt.Sprintf("rw%d", i), fmt.Sprintf("rw%d-mschapv2-%08x", i, uint32(i)*2654435761)
}

// raScaleGateway is the gateway's config: its certificate, a pool of
// 2,046 addresses, the n users of EAP-MSCHAPv2 with their passwords, no
// limit on half-open IKE SAs (every client arrives at once).
func raScaleGateway(cert, key string, n int) string {
	var users strings.Builder
	for i := range n {
		id, pw := raEAPUser(i)
		fmt.Fprintf(&users, "  - {type: eap, ids: [%s], secret: %q}\n", id, pw)
	}
	return fmt.Sprintf(`log: {level: info}
metrics: %s
pprof: true
underlay: {udp: "0.0.0.0:4500"}
interfaces:
  - {name: ipsec1, if_id: 1, addresses: [198.51.100.1/24], routes: [10.4.0.0/21]}
ike: {block_threshold: 0, init_limit_half_open: 0}
pools:
  - {name: rw, addrs: 10.4.0.0/21, dns: [10.4.0.53]}
connections:
  - name: rw
    proposals: [aes256-sha256-x25519]
    pools: [rw]
    local:  {auth: pubkey, id: a.test, cert: %s, key: %s}
    remote: {auth: eap-mschapv2, id: "%%any"}
    children:
      - {name: net, if_id: 1, local_ts: [198.51.100.0/24], remote_ts: [dynamic], esp_proposals: [aes128gcm16]}
secrets:
%s`, ikeMetricsAddr, cert, key, users.String())
}

// raDriver runs many initiators of the engine over one address's sockets
// (ports 500 and 4500), all in one goroutine: at most window handshakes
// at a time, as clients arriving.
type raDriver struct {
	c, c4500 *net.UDPConn
	local    netip.AddrPort
	in       chan raPacket
}

type raPacket struct {
	b    []byte
	from netip.AddrPort
	natt bool
}

func newRADriver(t *testing.T, p *pair, addr string) *raDriver {
	la := netip.MustParseAddrPort(addr + ":500")
	d := &raDriver{c: listenUDPIn(t, p.b, la), c4500: listenUDPIn(t, p.b, netip.AddrPortFrom(la.Addr(), ike.NATTPort)), local: la, in: make(chan raPacket, 1024)}
	for _, c := range []*net.UDPConn{d.c, d.c4500} {
		go func() {
			for {
				buf := make([]byte, 4096)
				n, from, err := c.ReadFromUDPAddrPort(buf)
				if err != nil {
					return // closed at the test's end
				}
				d.in <- raPacket{buf[:n], from, c == d.c4500}
			}
		}()
	}
	return d
}

// raClient is one road warrior's IKE SA and its identity.
type raClient struct {
	id string
	sa *ike.SA
}

// run brings up a client for each of cfgs against gw, window at a time,
// and returns them established, or the first failure.
func (d *raDriver) run(cfgs []*ike.Config, gw netip.AddrPort, window int, deadline time.Time) ([]raClient, error) {
	sas := map[uint64]raClient{}
	var done []raClient
	send := func(sa *ike.SA, b []byte) error {
		_, to := sa.Addrs()
		for _, p := range sa.Packets(b) {
			var err error
			if to.Port() == ike.NATTPort {
				_, err = d.c4500.WriteToUDPAddrPort(append([]byte{0, 0, 0, 0}, p...), to)
			} else {
				_, err = d.c.WriteToUDPAddrPort(p, to)
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
	next := 0
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for len(done) < len(cfgs) {
		for ; next < len(cfgs) && len(sas) < window; next++ {
			sa, msg, err := ike.Initiate(cfgs[next], d.local, gw, time.Now())
			if err != nil {
				return nil, err
			}
			ispi, _ := sa.SPIs()
			sas[ispi] = raClient{cfgs[next].LocalID.String(), sa}
			if err := send(sa, msg); err != nil {
				return nil, err
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%d of %d clients up by the deadline", len(done), len(cfgs))
		}
		select {
		case <-tick.C:
			for _, rc := range sas {
				sa := rc.sa
				out, err := sa.Tick(time.Now())
				if err != nil {
					return nil, err
				}
				if out != nil {
					if err := send(sa, out); err != nil {
						return nil, err
					}
				}
			}
		case pk := <-d.in:
			in, at := pk.b, d.local
			if pk.natt {
				if len(in) < 4 || in[0]|in[1]|in[2]|in[3] != 0 {
					continue // ESP
				}
				in, at = in[4:], netip.AddrPortFrom(d.local.Addr(), ike.NATTPort)
			}
			if len(in) < 8 {
				continue
			}
			rc, ok := sas[binary.BigEndian.Uint64(in)]
			if !ok {
				continue
			}
			sa := rc.sa
			out, err := sa.HandleFrom(in, at, pk.from, time.Now())
			if err != nil && !errors.Is(err, ike.ErrDropped) {
				return nil, err
			}
			if out != nil {
				if err := send(sa, out); err != nil {
					return nil, err
				}
			}
			if sa.State() == ike.StateEstablished {
				ispi, _ := sa.SPIs()
				delete(sas, ispi)
				done = append(done, rc)
			}
		}
	}
	return done, nil
}

// raClientConfigs are n road warriors' engine configs: identities
// rw<i>.test of EAP-MSCHAPv2 as EAP identity rw<i> (raEAPUser), each
// asking for an IPv4 address.
func raClientConfigs(t *testing.T, n int, caFile string) []*ike.Config {
	pemCA, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(pemCA)
	ca, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	ikeP, _ := proposal.ParseList(message.ProtoIKE, []string{"aes256-sha256-x25519"})
	espP, _ := proposal.ParseList(message.ProtoESP, []string{"aes128gcm16"})
	var cfgs []*ike.Config
	for i := range n {
		id, pw := raEAPUser(i)
		cfgs = append(cfgs, &ike.Config{LocalID: ike.MustParseIdentity(id + ".test"), RemoteID: ike.MustParseIdentity("a.test"),
			LocalAuth: ike.AuthEAPMSCHAPv2, LocalEAPID: id, EAPSecret: func(u string) ([]byte, bool) { return []byte(pw), u == id },
			RemoteAuth: ike.AuthPubkey, CACerts: []*x509.Certificate{ca}, Proposals: ikeP,
			VIPs: []netip.Addr{netip.IPv4Unspecified()},
			Child: ike.ChildConfig{Proposals: espP, LocalTS: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")},
				RemoteTS: []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")}}})
	}
	return cfgs
}

// raConnectAll connects cfgs spread over drivers and returns each
// client's virtual IP by identity, and the time it took.
func raConnectAll(t *testing.T, drivers []*raDriver, cfgs []*ike.Config) (map[string]netip.Addr, time.Duration) {
	t.Helper()
	gw := netip.MustParseAddrPort(underlayA4 + ":500")
	type result struct {
		sas []raClient
		err error
	}
	res := make(chan result, len(drivers))
	start := time.Now()
	deadline := start.Add(time.Duration(len(cfgs))*20*time.Millisecond + 30*time.Second)
	for i, d := range drivers {
		var mine []*ike.Config
		for j := i; j < len(cfgs); j += len(drivers) {
			mine = append(mine, cfgs[j])
		}
		go func() {
			sas, err := d.run(mine, gw, 64, deadline)
			res <- result{sas, err}
		}()
	}
	leases := map[string]netip.Addr{}
	seen := map[netip.Addr]string{}
	for range drivers {
		r := <-res
		if r.err != nil {
			t.Fatalf("connecting: %v", r.err)
		}
		for _, c := range r.sas {
			vips, id := c.sa.Configuration().VirtualIPs, c.id
			if len(vips) != 1 {
				t.Fatalf("%s got virtual IPs %v, want one", id, vips)
			}
			if other, dup := seen[vips[0]]; dup {
				t.Fatalf("%s and %s both got %v", id, other, vips[0])
			}
			seen[vips[0]], leases[id] = id, vips[0]
		}
	}
	return leases, time.Since(start)
}

// raSaveProfile writes the gateway's pprof profile of kind to file.
func raSaveProfile(t *testing.T, p *pair, file, kind string) {
	if err := os.WriteFile(file, []byte(scrape(t, p.a, "http://"+ikeMetricsAddr+"/debug/pprof/"+kind)), 0o644); err != nil {
		t.Error(err)
	}
}

// raMemStats are the gateway's runtime.MemStats figures that say where
// its RSS went (from /debug/pprof/heap?debug=1), in bytes by name.
func raMemStats(t *testing.T, p *pair) map[string]int64 {
	stats := map[string]int64{}
	for _, line := range strings.Split(scrape(t, p.a, "http://"+ikeMetricsAddr+"/debug/pprof/heap?debug=1"), "\n") {
		name, v, ok := strings.Cut(strings.TrimPrefix(line, "# "), " = ")
		if n, err := strconv.ParseInt(v, 10, 64); ok && err == nil {
			stats[name] = n
		}
	}
	return stats
}

// raLogMemStats logs what each client added to the gateway's heap (in
// use, in live objects, and the garbage collector's goal), stacks and
// runtime metadata, from before and after.
func raLogMemStats(t *testing.T, before, after map[string]int64, n int) {
	var b strings.Builder
	for _, name := range []string{"HeapAlloc", "HeapInuse", "HeapIdle", "HeapReleased", "StackInuse", "MSpanInuse", "GCSys", "OtherSys", "NextGC", "Sys"} {
		fmt.Fprintf(&b, " %s %+.1f", name, float64(after[name]-before[name])/1024/float64(n))
	}
	t.Logf("per client, KiB:%s; GCs %d", b.String(), after["NumGC"]-before["NumGC"])
}

// TestRAScale: IPSECD_RA_CLIENTS road warriors (the engine as client, 4
// addresses, 64 handshakes in flight on each) connect to one gateway with
// a pool; all must come up with distinct leases. Then the gateway is
// restarted and all reconnect, each getting its lease back from
// state_dir. It logs the times, the gateway's CPU per handshake and the
// RSS each connected client adds.
func TestRAScale(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv(raClientsEnv))
	if n <= 0 {
		t.Skipf("a measurement: set %s=N to connect N road warriors", raClientsEnv)
	}
	p := newPair(t)
	caFile, cert, key := raPKI(t, t.TempDir())
	var drivers []*raDriver
	for i := range 4 {
		addr := fmt.Sprintf("192.0.2.%d", 10+i)
		p.b.mustRun(t, "ip", "addr", "add", addr+"/24", "dev", "veth1")
		drivers = append(drivers, newRADriver(t, p, addr))
	}
	cfgs := raClientConfigs(t, n, caFile)
	if os.Getenv(raGatewayEnv) == "charon" {
		raScaleCharon(t, p, drivers, cfgs, cert, key)
		return
	}
	d := startDaemon(t, p.a, raScaleGateway(cert, key, n))
	time.Sleep(500 * time.Millisecond)
	rss, cpu := d.rssKiB(), cpuTime(t, d.pid())
	mem := raMemStats(t, p)

	prof := os.Getenv(raProfileEnv)
	profDone := make(chan struct{})
	if prof != "" {
		go func() {
			defer close(profDone)
			raSaveProfile(t, p, filepath.Join(prof, "connect.cpu"), "profile?seconds=8")
		}()
	} else {
		close(profDone)
	}
	leases, took := raConnectAll(t, drivers, cfgs)
	used := cpuTime(t, d.pid()) - cpu
	<-profDone
	time.Sleep(500 * time.Millisecond)
	added := d.rssKiB() - rss
	raLogMemStats(t, mem, raMemStats(t, p), n)
	if prof != "" {
		raSaveProfile(t, p, filepath.Join(prof, "connected.heap"), "heap")
	}
	if up := d.upCount(); up != n {
		t.Fatalf("the gateway lists %d IKE SAs up with a child, want %d", up, n)
	}
	t.Logf("%d road warriors up with distinct leases in %.2f s (%.0f per second); gateway CPU %v per handshake; RSS added %d KiB (%.1f KiB per client)",
		n, took.Seconds(), float64(n)/took.Seconds(), (used / time.Duration(n)).Round(10*time.Microsecond), added, float64(added)/float64(n))

	if err := d.stop(); err != nil {
		t.Fatal(err)
	}
	d.start()
	again, took := raConnectAll(t, drivers, cfgs)
	for id, a := range leases {
		if again[id] != a {
			t.Fatalf("after the restart %s got %v, had %v", id, again[id], a)
		}
	}
	t.Logf("after the gateway's restart the %d reconnected, each with its lease, in %.2f s", n, took.Seconds())
}

// raScaleCharon is TestRAScale's connect with charon 5.9.8 as the
// gateway (kernel-libipsec, default log levels), the same certificate,
// pool, EAP-MSCHAPv2 users and clients: for its CPU per handshake beside ipsecd's. Its pool
// lives in memory (no restart to measure), and its per-address limit on
// half-open IKE SAs is lifted as ipsecd's is.
func raScaleCharon(t *testing.T, p *pair, drivers []*raDriver, cfgs []*ike.Config, cert, key string) {
	charontest.Require(t)
	// kernel-libipsec routes each client's address into its TUN from an
	// address of local_ts, through a route towards the clients.
	p.a.mustRun(t, "ip", "addr", "add", "198.51.100.1/32", "dev", "lo")
	p.a.mustRun(t, "ip", "route", "add", "default", "via", underlayB4)
	ch := charontest.StartQuiet(t, p.a.name, "  block_threshold = 1000000\n  init_limit_half_open = 0\n  cookie_threshold = 1000000\n  cookie_threshold_ip = 1000000\n")
	dir := filepath.Join(ch.Dir, "swanctl")
	for _, sub := range []string{"x509", "private"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for from, to := range map[string]string{cert: "x509/gw.pem", key: "private/gw.key"} {
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, to), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	conn := charontest.Conn{Name: "rw", LocalAddrs: underlayA4, Proposals: "aes256-sha256-x25519", Encap: true,
		Local: charontest.Peer{Auth: "pubkey", ID: "a.test", Certs: "gw.pem"}, Remote: charontest.Peer{Auth: "eap-mschapv2", ID: "%any", EAPID: "%any"},
		LocalTS: "198.51.100.0/24", RemoteTS: "dynamic", ESP: "aes128gcm16", Pools: "rw",
		PoolsConf: "pools {\n  rw {\n    addrs = 10.4.0.0/21\n    dns = 10.4.0.53\n  }\n}\n"}
	var users strings.Builder
	users.WriteString("secrets {\n")
	for i := range cfgs {
		id, pw := raEAPUser(i)
		fmt.Fprintf(&users, "  eap-%s {\n    id = %s\n    secret = %q\n  }\n", id, id, pw)
	}
	users.WriteString("}\n")
	ch.LoadDir(conn.String()+users.String(), dir)
	time.Sleep(500 * time.Millisecond)
	cpu := cpuTime(t, ch.Pid)
	_, took := raConnectAll(t, drivers, cfgs)
	used := cpuTime(t, ch.Pid) - cpu
	t.Logf("charon gateway: %d road warriors up with distinct leases in %.2f s (%.0f per second); gateway CPU %v per handshake",
		len(cfgs), took.Seconds(), float64(len(cfgs))/took.Seconds(), (used / time.Duration(len(cfgs))).Round(10*time.Microsecond))
}
