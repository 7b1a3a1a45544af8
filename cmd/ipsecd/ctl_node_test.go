package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/ipsecd/ipsecd/control/controltest"
	ipnode "github.com/ipsecd/ipsecd/node"
	"github.com/ipsecd/ipsecd/sa/satest"
)

// ctlNode is a daemon's node without TUN devices or underlay (an
// interface ipsec1, if_id 1, over an idle link) serving its real backend
// on a real control socket, and the command line that talks to it.
type ctlNode struct {
	t    *testing.T
	n    *testNode
	sock string
	stop func() // closes the control socket (monitorNode)
}

func newCtlNode(t *testing.T) *ctlNode {
	t.Helper()
	log := logrus.New()
	log.SetOutput(io.Discard)
	n := newTestNode(t, log, ipnode.Config{EphemeralKeys: true})
	addInterface(t, n, "ipsec1", 1, 1)
	srv := controltest.Start(t, n.backend)
	return &ctlNode{t: t, n: n, sock: srv.Path()}
}

// ipsecd runs the command line against the node's socket (--control is
// added) and fails the test unless it exits with want. It returns stdout
// and stderr.
func (c *ctlNode) ipsecd(want int, args ...string) (string, string) {
	c.t.Helper()
	args = append(args, "--control", c.sock)
	var o, e bytes.Buffer
	if code := run(args, &o, &e); code != want {
		c.t.Fatalf("ipsecd %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, want, o.String(), e.String())
	}
	return o.String(), e.String()
}

// addSA adds an SA 192.0.2.1 -> 192.0.2.2 (out) or back (in) with a fresh
// key and the extra flags.
func (c *ctlNode) addSA(spi, dir string, extra ...string) {
	c.t.Helper()
	src, dst := "192.0.2.1", "192.0.2.2"
	if dir == "in" {
		src, dst = dst, src
	}
	key := filepath.Join(c.t.TempDir(), "key")
	var o bytes.Buffer
	if code := run([]string{"genkey", "--alg", "rfc4106(gcm(aes))"}, &o, io.Discard); code != 0 {
		c.t.Fatal("genkey failed")
	}
	if err := os.WriteFile(key, o.Bytes(), 0o600); err != nil {
		c.t.Fatal(err)
	}
	c.ipsecd(0, append([]string{"state", "add", "--src", src, "--dst", dst, "--spi", spi, "--dir", dir, "--mode", "tunnel",
		"--if-id", "1", "--aead", "rfc4106(gcm(aes))", "--key", "@" + key, "--encap", "espinudp:4500:4500"}, extra...)...)
}

// TestStateNamedOneWay: `state get` and `state delete` name an SA the
// same way, as ip xfrm does (SPI and destination; the direction only
// where an inbound and an outbound SA share both), and their errors name
// it in the same words as every other message ("spi 0x... dir ... dst
// ..."), each word once.
func TestStateNamedOneWay(t *testing.T) {
	c := newCtlNode(t)
	c.addSA("0x1001", "out")
	got, _ := c.ipsecd(0, "state", "get", "--spi", "0x1001", "--dst", "192.0.2.2")
	if !strings.Contains(got, "proto esp spi 0x1001 dir out") {
		t.Errorf("state get by SPI and dst:\n%s", got)
	}
	_, errGet := c.ipsecd(1, "state", "get", "--spi", "0x1009", "--dst", "192.0.2.2", "--dir", "out")
	_, errDel := c.ipsecd(1, "state", "delete", "--spi", "0x1009", "--dst", "192.0.2.2", "--dir", "out")
	const name = "state spi 0x1009 dir out dst 192.0.2.2: not found"
	if !strings.HasSuffix(strings.TrimSpace(errGet), ": "+name) || !strings.HasSuffix(strings.TrimSpace(errDel), ": "+name) {
		t.Errorf("a missing SA:\nget:    %s\ndelete: %s\nwant both to end in %q", errGet, errDel, name)
	}
	// The same SPI and dst inbound too (the peer's address is ours
	// here): then the direction is needed.
	c.ipsecd(0, "state", "add", "--src", "192.0.2.1", "--dst", "192.0.2.2", "--spi", "0x1001", "--dir", "in", "--mode", "tunnel",
		"--if-id", "1", "--aead", "rfc4106(gcm(aes))", "--key", "0x"+strings.Repeat("5a", 20), "--encap", "espinudp")
	if _, e := c.ipsecd(1, "state", "delete", "--spi", "0x1001", "--dst", "192.0.2.2"); !strings.Contains(e, "names an inbound and an outbound SA; give its dir") {
		t.Errorf("ambiguous delete: %s", e)
	}
	c.ipsecd(0, "state", "delete", "--spi", "0x1001", "--dst", "192.0.2.2", "--dir", "in")
	c.ipsecd(0, "state", "delete", "--spi", "0x1001", "--dst", "192.0.2.2")
	if out, _ := c.ipsecd(0, "state", "list"); out != "" {
		t.Errorf("state list after deleting both:\n%s", out)
	}
}

// TestErrorsSayItOnce: an error of the control socket does not repeat its
// sentinel's words ("already exists: state ...: already exists").
func TestErrorsSayItOnce(t *testing.T) {
	c := newCtlNode(t)
	c.addSA("0x1001", "out")
	_, e := c.ipsecd(1, "state", "add", "--src", "192.0.2.1", "--dst", "192.0.2.2", "--spi", "0x1001", "--dir", "out", "--mode", "tunnel",
		"--if-id", "1", "--aead", "rfc4106(gcm(aes))", "--key", "0x"+strings.Repeat("5b", 20), "--encap", "espinudp")
	_, e2 := c.ipsecd(1, "policy", "delete", "--dir", "out", "--if-id", "1")
	c.ipsecd(0, "policy", "add", "--dir", "out", "--if-id", "1")
	_, e3 := c.ipsecd(1, "policy", "add", "--dir", "out", "--if-id", "1")
	for _, tt := range []struct{ out, words string }{{e, "already exists"}, {e2, "not found"}, {e3, "already exists"}} {
		if n := strings.Count(tt.out, tt.words); n != 1 {
			t.Errorf("%q appears %d times, want once: %s", tt.words, n, tt.out)
		}
	}
}

// TestStateAddHelpShowsEncap: `state add -h` shows --encap's real syntax.
func TestStateAddHelpShowsEncap(t *testing.T) {
	var o, e bytes.Buffer
	if code := run([]string{"state", "add", "-h"}, &o, &e); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if !strings.Contains(e.String(), "-encap espinudp:SPORT:DPORT\n") {
		t.Errorf("state add -h does not show --encap espinudp:SPORT:DPORT:\n%s", e.String())
	}
}

// snakeCase is a JSON name of the control socket's style.
var snakeCase = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// checkJSONNames walks v (decoded JSON) and reports every object key that
// is not snake_case, and every "spi" that is not written 0x1001 (%#x). The
// objects under "stats" of `ipsecd stats` are keyed by counter name
// (XfrmInError), which is data, not a name of the format: skip says so.
func checkJSONNames(t *testing.T, what string, v any, skipKeys bool) {
	t.Helper()
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if !skipKeys && !snakeCase.MatchString(k) {
				t.Errorf("%s: key %q is not snake_case", what, k)
			}
			if k == "spi" {
				if s, _ := x.(string); !regexp.MustCompile(`^0x[1-9a-f][0-9a-f]*$`).MatchString(s) {
					t.Errorf("%s: spi %v is not written %%#x", what, x)
				}
			}
			checkJSONNames(t, what+"."+k, x, false)
		}
	case []any:
		for _, x := range v {
			checkJSONNames(t, what, x, false)
		}
	}
}

// TestJSONOneStyle: every --json output of the control commands names its
// fields in snake_case, writes the SPI as 0x1001, and `stats --json` is
// one object keyed by counter name, in /proc/net/xfrm_stat order.
func TestJSONOneStyle(t *testing.T) {
	c := newCtlNode(t)
	c.addSA("0x1001", "out", "--soft-bytes", "1000", "--hard-add-seconds", "60")
	c.addSA("4097", "in", "--sel-src", "10.0.0.0/24")
	c.ipsecd(0, "policy", "add", "--dir", "out", "--if-id", "1", "--dst", "10.1.0.0/24")
	for _, args := range [][]string{
		{"state", "list", "--json"},
		{"state", "get", "--spi", "0x1001", "--dst", "192.0.2.2", "--json"},
		{"policy", "list", "--json"},
		{"interface", "list", "--json"},
		{"stats", "--json"},
	} {
		out, _ := c.ipsecd(0, args...)
		var v any
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatalf("%s: %v\n%s", args, err, out)
		}
		checkJSONNames(t, strings.Join(args, " "), v, args[0] == "stats")
	}
	out, _ := c.ipsecd(0, "stats", "--json")
	var counters map[string]uint64
	if err := json.Unmarshal([]byte(out), &counters); err != nil {
		t.Fatalf("stats --json is not an object of counters: %v\n%s", err, out)
	}
	if _, ok := counters["XfrmInNoStates"]; !ok || len(counters) < 20 {
		t.Errorf("stats --json: %d counters, XfrmInNoStates missing or too few:\n%s", len(counters), out)
	}
	if i, j := strings.Index(out, `"XfrmInError"`), strings.Index(out, `"XfrmOutError"`); i < 0 || j < i {
		t.Errorf("stats --json is not in /proc/net/xfrm_stat order:\n%s", out)
	}
	if ifs, _ := c.ipsecd(0, "interface", "list"); !strings.HasPrefix(ifs, "ipsec1: if_id 0x1 mtu 1400 queues 1 qlen 1000\n") {
		t.Errorf("interface list does not show the txqueuelen:\n%s", ifs)
	}
	text, _ := c.ipsecd(0, "state", "list")
	if !strings.Contains(text, "spi 0x1001") || !strings.Contains(text, "spi 0x1001 dir in") {
		t.Errorf("state list does not write the SPIs 0x%%08x:\n%s", text)
	}
}

// stateStatsJSON is the stats object of `state get --json`.
type stateStatsJSON struct {
	Stats struct {
		Packets      uint64             `json:"packets"`
		Added        time.Time          `json:"added"`
		LastUsed     *time.Time         `json:"last_used"`
		LifetimeLeft map[string]*uint64 `json:"lifetime_left"`
	} `json:"stats"`
}

func (c *ctlNode) getJSON(args ...string) stateStatsJSON {
	c.t.Helper()
	out, _ := c.ipsecd(0, append([]string{"state", "get", "--json"}, args...)...)
	var st stateStatsJSON
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		c.t.Fatalf("%v\n%s", err, out)
	}
	return st
}

// TestStateTimes: `state get` and `state list` show when an SA was added
// and last used (as ip -s xfrm state's add and use times) and what is
// left of its limits, in text and JSON. The use time comes from the
// node's ticker (SAD.Tick), which the test calls itself rather than
// waiting for the next second.
func TestStateTimes(t *testing.T) {
	c := newCtlNode(t)
	before := time.Now().Add(-time.Second)
	c.addSA("0x1001", "out", "--soft-packets", "10", "--hard-add-seconds", "600")
	st := c.getJSON("--spi", "0x1001", "--dst", "192.0.2.2")
	if st.Stats.Added.Before(before) || st.Stats.Added.After(time.Now()) {
		t.Errorf("added %v, want about now", st.Stats.Added)
	}
	if st.Stats.LastUsed != nil {
		t.Errorf("an SA never used: last_used %v, want none", st.Stats.LastUsed)
	}
	l := st.Stats.LifetimeLeft
	if l["soft_packets"] == nil || *l["soft_packets"] != 10 || l["hard_add_seconds"] == nil || *l["hard_add_seconds"] < 590 ||
		*l["hard_add_seconds"] > 600 || l["hard_packets"] != nil {
		t.Errorf("lifetime_left %v, want soft_packets 10, hard_add_seconds about 600, no hard_packets", l)
	}
	text, _ := c.ipsecd(0, "state", "list")
	if !strings.Contains(text, "\t  add "+st.Stats.Added.Local().Format(time.DateTime)+" use -\n") {
		t.Errorf("state list lacks the add and use times:\n%s", text)
	}

	s := c.n.sad.States()[0]
	satest.Seal(t, s, satest.IPv4UDP(netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"), 40))
	satest.Seal(t, s, satest.IPv4UDP(netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"), 40))
	used := time.Now()
	c.n.sad.Tick(used)
	st = c.getJSON("--spi", "0x1001", "--dst", "192.0.2.2")
	if st.Stats.LastUsed == nil || st.Stats.LastUsed.Before(used.Add(-time.Second)) {
		t.Errorf("after two packets and a tick: last_used %v, want about %v", st.Stats.LastUsed, used)
	}
	if l := st.Stats.LifetimeLeft; l["soft_packets"] == nil || *l["soft_packets"] != 8 {
		t.Errorf("after two packets: lifetime_left.soft_packets %v, want 8", l["soft_packets"])
	}
	text, _ = c.ipsecd(0, "state", "get", "--spi", "0x1001", "--dst", "192.0.2.2")
	for _, want := range []string{
		" use " + st.Stats.LastUsed.Local().Format(time.DateTime) + "\n",
		"\tlifetime left:\n\t  limit: soft (INF)(bytes), hard (INF)(bytes)\n\t  limit: soft 8(packets), hard (INF)(packets)\n\t  expire add: soft (INF)(sec), hard ",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("state get lacks %q:\n%s", want, text)
		}
	}
}
