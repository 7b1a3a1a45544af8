package daemon

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"runtime"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/sirupsen/logrus"

	"github.com/ipsecd/ipsecd/internal/promtest"
	ipnode "github.com/ipsecd/ipsecd/node"
	"github.com/ipsecd/ipsecd/sa"
	"github.com/ipsecd/ipsecd/tun"
	"github.com/ipsecd/ipsecd/underlay"
	"github.com/ipsecd/ipsecd/xfrmif"
	"github.com/ipsecd/ipsecd/xfrmif/xfrmiftest"
)

// newIdleLink is an xfrmif.Link of idle queues with no kernel device.
func newIdleLink(queues int) xfrmif.Link { return xfrmiftest.NewIdleLink(queues) }

// metricsNode is a node without TUN devices or control socket: a real
// SAD, a registry of interfaces over idle links, and a real underlay on
// loopback, which is all the metrics read.
func metricsNode(t testing.TB) *Daemon {
	t.Helper()
	log := logrus.New()
	log.SetOutput(io.Discard)
	n := testNode(t, log, true, ipnode.Config{EphemeralKeys: true})
	// A SAD of its own, which the core's ticker does not reap: the
	// tests read hard-expired SAs before a daemon would remove them.
	n.sad = sa.NewSAD(n.counters)
	return n
}

// testNode is a node over a core made from c and log, started with a
// loopback underlay (unless c has a Conn) when started says so; the core
// closes when the test ends.
func testNode(t testing.TB, log *logrus.Logger, started bool, c ipnode.Config) *Daemon {
	t.Helper()
	if started && c.Conn == nil {
		conn, err := underlay.Open(underlay.Config{UDP: netip.MustParseAddrPort("127.0.0.1:0")}, nil)
		if err != nil {
			t.Fatal(err)
		}
		c.Conn = conn // the core's from here on
	}
	c.Log = log
	core, err := ipnode.New(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { core.Close() })
	n := &Daemon{log: log}
	n.attach(core)
	if started {
		if err := core.Start(); err != nil {
			t.Fatal(err)
		}
		n.conn = core.Underlay()
	}
	return n
}

func addInterface(t testing.TB, n *Daemon, name string, ifID uint32, queues int) *xfrmif.Interface {
	t.Helper()
	ifc, err := xfrmif.NewInterface(xfrmif.Config{Name: name, IfID: ifID, Queues: queues}, newIdleLink(queues))
	if err != nil {
		t.Fatal(err)
	}
	if err := n.reg.Add(ifc); err != nil {
		t.Fatal(err)
	}
	return ifc
}

func newTestSA(t testing.TB, n *Daemon, dir sa.Dir, spi uint32, src, dst string, key []byte, window uint32, life sa.Lifetime) *sa.SA {
	t.Helper()
	s, err := sa.New(sa.Config{
		Src: netip.MustParseAddr(src), Dst: netip.MustParseAddr(dst), SPI: spi, Dir: dir, Mode: sa.ModeTunnel, IfID: 1,
		AEAD: &sa.Algorithm{Name: sa.AlgChaCha, Key: key}, ReplayWindow: window, Lifetime: life,
	}, n.counters)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// innerPacket is an IPv4 packet 198.51.100.10 -> 203.0.113.10 of n bytes
// in a buffer with room for ESP.
func innerPacket(n int) sa.Packet {
	buf := make([]byte, sa.Headroom+n+sa.Tailroom)
	p := buf[sa.Headroom : sa.Headroom+n]
	p[0] = 0x45
	p[2], p[3] = byte(n>>8), byte(n)
	p[8], p[9] = 64, 17
	copy(p[12:], []byte{198, 51, 100, 10})
	copy(p[16:], []byte{203, 0, 113, 10})
	return sa.Packet{Buf: buf, Off: sa.Headroom, Len: n}
}

// reseat copies an ESP packet into a fresh buffer, as the underlay hands
// one to Open.
func reseat(p sa.Packet) sa.Packet {
	buf := make([]byte, sa.Headroom+p.Len+sa.Tailroom)
	copy(buf[sa.Headroom:], p.Data())
	return sa.Packet{Buf: buf, Off: sa.Headroom, Len: p.Len}
}

// scrapeMetrics serves one GET of path from h and returns the body.
func scrapeMetrics(t testing.TB, h http.Handler, path string) string {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET %s: %d\n%s", path, rec.Code, rec.Body.String())
	}
	return rec.Body.String()
}

// TestMetricsScrape drives real SAs (seal, open, replay, left of the
// window, bad ICV, lifetimes), interfaces (writes through given queues,
// drops) and the SAD's counters, scrapes /metrics through the handler the
// daemon serves, and checks every sample against what was done.
func TestMetricsScrape(t *testing.T) {
	n := metricsNode(t)
	keyOut := make([]byte, 36)
	keyOther := make([]byte, 36)
	rand.Read(keyOut)
	rand.Read(keyOther)
	// out and in share SPI 0x1001 and key (in opens what out seals);
	// other shares the SPI and direction of out but not its destination.
	out := newTestSA(t, n, sa.DirOut, 0x1001, "198.51.100.1", "198.51.100.2", keyOut, 0, sa.Lifetime{SoftPackets: 5})
	in := newTestSA(t, n, sa.DirIn, 0x1001, "198.51.100.2", "198.51.100.1", keyOut, 32, sa.Lifetime{HardPackets: 2})
	other := newTestSA(t, n, sa.DirOut, 0x1001, "198.51.100.3", "198.51.100.4", keyOther, 0, sa.Lifetime{})
	if err := n.sad.Replace([]*sa.SA{out, in, other}, nil); err != nil {
		t.Fatal(err)
	}
	ifc := addInterface(t, n, "ipsec1", 1, 2)

	// 40 packets of 100 bytes sealed: seq 1..40.
	sealed := make([]sa.Packet, 40)
	for i := range sealed {
		sealed[i] = innerPacket(100)
	}
	out.SealBatch(sealed)
	for i, p := range sealed {
		if p.Drop != sa.CounterNone {
			t.Fatalf("seal %d: dropped as %v", i, p.Drop)
		}
	}
	open := func(p sa.Packet) sa.Counter {
		ps := []sa.Packet{reseat(p)}
		in.OpenBatch(ps)
		return ps[0].Drop
	}
	bad := reseat(sealed[38])
	bad.Buf[bad.Off+bad.Len-1] ^= 1
	for _, step := range []struct {
		what string
		pkt  sa.Packet
		want sa.Counter
	}{
		{"seq 40", sealed[39], sa.CounterNone},
		{"seq 1, left of the window", sealed[0], sa.XfrmInStateSeqError},
		{"seq 40 again", sealed[39], sa.XfrmInStateSeqError},
		{"seq 39 with a flipped ICV byte", bad, sa.XfrmInStateProtoError},
		{"seq 39, reaching the hard limit", sealed[38], sa.CounterNone},
		{"seq 38, past the hard limit", sealed[37], sa.XfrmInStateExpired},
	} {
		if got := open(step.pkt); got != step.want {
			t.Fatalf("open %s: drop %v, want %v", step.what, got, step.want)
		}
	}
	// An unknown SPI through the SAD: XfrmInNoStates.
	unknown := reseat(sealed[1])
	copy(unknown.Buf[unknown.Off:], []byte{0, 0, 0xde, 0xad}) // SPI 0xdead
	n.sad.OpenBatch([]sa.Packet{unknown})

	// rx: 3 packets of 50 bytes through queue 0, 1 through queue 1; tx: 2
	// drops on queue 1.
	pkt := func() []byte { return make([]byte, tun.MinOffset+50) }
	if _, err := ifc.WriteQueue(0, [][]byte{pkt(), pkt(), pkt()}, tun.MinOffset); err != nil {
		t.Fatal(err)
	}
	if _, err := ifc.WriteQueue(1, [][]byte{pkt()}, tun.MinOffset); err != nil {
		t.Fatal(err)
	}
	ifc.CountTxDrops(1, 2)

	h := metricsHandler(n, false)
	body := scrapeMetrics(t, h, "/metrics")
	got, fams := promtest.Samples(t, body)
	saOut := []string{"spi", "0x1001", "dir", "out", "dst", "198.51.100.2"}
	saIn := []string{"spi", "0x1001", "dir", "in", "dst", "198.51.100.1"}
	saOther := []string{"spi", "0x1001", "dir", "out", "dst", "198.51.100.4"}
	with := func(base []string, kv ...string) []string { return append(append([]string{}, base...), kv...) }
	want := map[string]float64{
		promtest.Series("ipsecd_sa_packets_total", saOut...):                                                 40,
		promtest.Series("ipsecd_sa_bytes_total", saOut...):                                                   float64(out.Stats().Bytes),
		promtest.Series("ipsecd_sa_packets_total", saIn...):                                                  2,
		promtest.Series("ipsecd_sa_bytes_total", saIn...):                                                    float64(in.Stats().Bytes),
		promtest.Series("ipsecd_sa_packets_total", saOther...):                                               0,
		promtest.Series("ipsecd_sa_errors_total", with(saIn, "kind", "replay_window")...):                    1,
		promtest.Series("ipsecd_sa_errors_total", with(saIn, "kind", "replay")...):                           1,
		promtest.Series("ipsecd_sa_errors_total", with(saIn, "kind", "integrity_failed")...):                 1,
		promtest.Series("ipsecd_sa_errors_total", with(saOut, "kind", "integrity_failed")...):                0,
		promtest.Series("ipsecd_sa_errors_total", with(saOther, "kind", "replay")...):                        0,
		promtest.Series("ipsecd_sa_expired", with(saOut, "kind", "soft")...):                                 1,
		promtest.Series("ipsecd_sa_expired", with(saOut, "kind", "hard")...):                                 0,
		promtest.Series("ipsecd_sa_expired", with(saIn, "kind", "soft")...):                                  0,
		promtest.Series("ipsecd_sa_expired", with(saIn, "kind", "hard")...):                                  1,
		promtest.Series("ipsecd_sa_expired", with(saOther, "kind", "hard")...):                               0,
		promtest.Series("ipsecd_xfrm_stat_total", "counter", "XfrmInNoStates"):                               1,
		promtest.Series("ipsecd_xfrm_stat_total", "counter", "XfrmInStateSeqError"):                          2,
		promtest.Series("ipsecd_xfrm_stat_total", "counter", "XfrmInStateProtoError"):                        1,
		promtest.Series("ipsecd_xfrm_stat_total", "counter", "XfrmInStateExpired"):                           1,
		promtest.Series("ipsecd_xfrm_stat_total", "counter", "XfrmOutNoStates"):                              0,
		promtest.Series("ipsecd_xfrm_stat_total", "counter", "IpsecdUnderlayRxPackets"):                      0,
		promtest.Series("ipsecd_xfrm_stat_total", "counter", "IpsecdUnderlayKeepalives"):                     0,
		promtest.Series("ipsecd_interface_packets_total", "name", "ipsec1", "dir", "rx"):                     4,
		promtest.Series("ipsecd_interface_packets_total", "name", "ipsec1", "dir", "tx"):                     0,
		promtest.Series("ipsecd_interface_bytes_total", "name", "ipsec1", "dir", "rx"):                       200,
		promtest.Series("ipsecd_interface_drops_total", "name", "ipsec1", "dir", "tx"):                       2,
		promtest.Series("ipsecd_interface_errors_total", "name", "ipsec1", "dir", "rx"):                      0,
		promtest.Series("ipsecd_interface_queue_packets_total", "name", "ipsec1", "queue", "0", "dir", "rx"): 3,
		promtest.Series("ipsecd_interface_queue_packets_total", "name", "ipsec1", "queue", "1", "dir", "rx"): 1,
		promtest.Series("ipsecd_interface_queue_packets_total", "name", "ipsec1", "queue", "1", "dir", "tx"): 0,
	}
	for s, w := range want {
		v, ok := got[s]
		switch {
		case !ok:
			t.Errorf("no sample %s", s)
		case v != w:
			t.Errorf("%s = %v, want %v", s, v, w)
		}
	}
	if got[promtest.Series("ipsecd_sa_bytes_total", saOut...)] == 0 || got[promtest.Series("ipsecd_sa_bytes_total", saIn...)] == 0 {
		t.Errorf("SA bytes are 0 after traffic")
	}

	// Every SA gives 2+3+2 series, every queue 2, every interface 8; the
	// families are typed as their names say.
	for name, tt := range map[string]struct {
		typ dto.MetricType
		n   int
	}{
		"ipsecd_sa_bytes_total":                {dto.MetricType_COUNTER, 3},
		"ipsecd_sa_packets_total":              {dto.MetricType_COUNTER, 3},
		"ipsecd_sa_errors_total":               {dto.MetricType_COUNTER, 9},
		"ipsecd_sa_expired":                    {dto.MetricType_GAUGE, 6},
		"ipsecd_interface_packets_total":       {dto.MetricType_COUNTER, 2},
		"ipsecd_interface_bytes_total":         {dto.MetricType_COUNTER, 2},
		"ipsecd_interface_errors_total":        {dto.MetricType_COUNTER, 2},
		"ipsecd_interface_drops_total":         {dto.MetricType_COUNTER, 2},
		"ipsecd_interface_queue_packets_total": {dto.MetricType_COUNTER, 4},
		"ipsecd_xfrm_stat_total":               {dto.MetricType_COUNTER, len((*backend)(n).Stats())},
		"ipsecd_build_info":                    {dto.MetricType_GAUGE, 1},
	} {
		f := fams[name]
		switch {
		case f == nil:
			t.Errorf("no family %s", name)
		case f.GetType() != tt.typ || len(f.GetMetric()) != tt.n:
			t.Errorf("%s: %v with %d series, want %v with %d", name, f.GetType(), len(f.GetMetric()), tt.typ, tt.n)
		}
	}
	if bi := fams["ipsecd_build_info"]; bi != nil {
		m := bi.GetMetric()[0]
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if len(labels) != 3 || labels["version"] == "" || labels["revision"] == "" || labels["goversion"] != runtime.Version() || m.GetGauge().GetValue() != 1 {
			t.Errorf("ipsecd_build_info = %v %v, want version, revision and goversion %s, value 1", labels, m.GetGauge().GetValue(), runtime.Version())
		}
	}
	for _, name := range []string{"go_goroutines", "process_cpu_seconds_total", "promhttp_metric_handler_errors_total"} {
		if fams[name] == nil {
			t.Errorf("no family %s (Go, process or handler collector)", name)
		}
	}
	for _, k := range [][]byte{keyOut, keyOther} {
		if h := hex.EncodeToString(k); strings.Contains(strings.ToLower(body), h[:16]) {
			t.Errorf("the scrape shows key material")
		}
	}

	// Deleting an SA (a rekey's end) removes its series at the next
	// scrape, with no unregistering; the others keep their values.
	if err := n.sad.Delete(sa.DirOut, 0x1001, netip.MustParseAddr("198.51.100.4")); err != nil {
		t.Fatal(err)
	}
	got2, _ := promtest.Samples(t, scrapeMetrics(t, h, "/metrics"))
	if _, ok := got2[promtest.Series("ipsecd_sa_packets_total", saOther...)]; ok {
		t.Errorf("a deleted SA is still in the scrape")
	}
	if v := got2[promtest.Series("ipsecd_sa_packets_total", saOut...)]; v != 40 {
		t.Errorf("after the delete, the outbound SA's packets = %v, want 40", v)
	}

	if t.Failed() {
		t.Logf("scrape:\n%s", body)
	}
}

// TestMetricsCollectorPedantic: what the collector collects matches what
// it describes, and the registry finds nothing inconsistent.
func TestMetricsCollectorPedantic(t *testing.T) {
	n := metricsNode(t)
	key := make([]byte, 36)
	var states []*sa.SA
	for i := range 10 {
		dir := sa.DirOut
		if i%2 == 1 {
			dir = sa.DirIn
		}
		states = append(states, newTestSA(t, n, dir, uint32(0x100+i/2), "198.51.100.1", "198.51.100.2", key, 64, sa.Lifetime{}))
	}
	if err := n.sad.Replace(states, nil); err != nil {
		t.Fatal(err)
	}
	addInterface(t, n, "ipsec1", 1, 4)
	addInterface(t, n, "ipsec2", 2, 1)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(newNodeCollector(nodeMetricsSource(n)))
	fams, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	count := 0
	for _, f := range fams {
		count += len(f.GetMetric())
	}
	// 10 SAs x 7, 5 queues x 2, 2 interfaces x 8, the counters, build info.
	if want := 10*7 + 5*2 + 2*8 + len((*backend)(n).Stats()) + 1; count != want {
		t.Errorf("%d series, want %d", count, want)
	}
}

// BenchmarkMetricsScrape is one full scrape of /metrics (collect, gather,
// encode) with 1,000 SAs (500 pairs) over 10 interfaces of 4 queues.
func BenchmarkMetricsScrape(b *testing.B) {
	n := metricsNode(b)
	key := make([]byte, 36)
	var states []*sa.SA
	for i := range 1000 {
		dir := sa.DirOut
		if i%2 == 1 {
			dir = sa.DirIn
		}
		states = append(states, newTestSA(b, n, dir, uint32(0x1000+i/2), "198.51.100.1", "198.51.100.2", key, 64, sa.Lifetime{}))
	}
	if err := n.sad.Replace(states, nil); err != nil {
		b.Fatal(err)
	}
	for i := range 10 {
		addInterface(b, n, fmt.Sprintf("ipsec%d", i+1), uint32(i+1), 4)
	}
	h := metricsHandler(n, false)
	size := len(scrapeMetrics(b, h, "/metrics"))
	b.ReportAllocs()
	for b.Loop() {
		scrapeMetrics(b, h, "/metrics")
	}
	b.ReportMetric(float64(size), "body-bytes")
}
