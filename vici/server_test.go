package vici_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	govici "github.com/strongswan/govici/vici"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/control"
	"github.com/ipsecd/ipsecd/vici"
)

// fakeIKE is a Backend whose SAs the test sets and whose actions it
// records; an action may publish the events the daemon would.
type fakeIKE struct {
	mu      sync.Mutex
	sas     []control.IKESAInfo
	conns   []config.Connection
	actions []string
	// onAction runs after an action is recorded (in the caller's
	// goroutine), to publish its outcome; err is what actions return.
	onAction func(verb string, t control.IKETarget)
	err      error
	reloaded int
}

func (f *fakeIKE) IKEList() ([]control.IKESAInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]control.IKESAInfo(nil), f.sas...), nil
}

func (f *fakeIKE) act(verb string, t control.IKETarget) error {
	f.mu.Lock()
	f.actions = append(f.actions, fmt.Sprintf("%s ike=%s child=%s", verb, t.IKE, t.Child))
	on, err := f.onAction, f.err
	f.mu.Unlock()
	if err != nil {
		return err
	}
	if on != nil {
		on(verb, t)
	}
	return nil
}

func (f *fakeIKE) IKEInitiate(t control.IKETarget) error  { return f.act("initiate", t) }
func (f *fakeIKE) IKETerminate(t control.IKETarget) error { return f.act("terminate", t) }
func (f *fakeIKE) IKERekey(t control.IKETarget) error     { return f.act("rekey", t) }
func (f *fakeIKE) Connections() []config.Connection       { return f.conns }
func (f *fakeIKE) ReloadConfig() error                    { f.reloaded++; return nil }

func (f *fakeIKE) took() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.actions...)
}

// serve starts a Server over b and returns a govici session to it.
func serve(t testing.TB, b vici.Backend, events *control.Monitor) (*vici.Server, *govici.Session) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "charon.vici")
	s, err := vici.Listen(path, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Events = events
	s.MaxWait = 2 * time.Second
	go s.Serve()
	t.Cleanup(func() { s.Close() })
	sess, err := govici.NewSession(govici.WithSocketPath(path))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close() })
	return s, sess
}

// ago returns the time d before now: when the fakes' SAs were
// established and installed, for a listing that follows at once.
func ago(d time.Duration) time.Time { return time.Now().Add(-d) }

// twoSAs: an initiator's SA with one child through a NAT, and a
// responder's with none, as ike.list answers them.
func twoSAs() []control.IKESAInfo {
	return []control.IKESAInfo{{
		Name: "gw", State: "ESTABLISHED", Initiator: true, SPIInitiator: "1a2b3c4d5e6f7081", SPIResponder: "0011223344556677",
		Local: netip.MustParseAddrPort("192.0.2.1:4500"), Remote: netip.MustParseAddrPort("198.51.100.2:4500"),
		LocalID: "gw.example.net", RemoteID: "198.51.100.2", Algorithms: "aes256gcm16-prfsha384-x25519", NAT: true,
		Established: ago(90 * time.Second), RekeyIn: 3000, ExpiresIn: 3500,
		Children: []control.IKEChildInfo{{
			Name: "net", State: "INSTALLED", Mode: "TUNNEL", IfID: 7, Encap: true, SPIIn: "0xc1a0b2", SPIOut: "0xcafe0001",
			Algorithms: "aes128-sha256-esn", LocalTS: []string{"10.1.0.0/24"}, RemoteTS: []string{"10.2.0.0/24", "10.3.0.5-10.3.0.9"},
			BytesIn: 840, PacketsIn: 10, BytesOut: 1680, PacketsOut: 20, Installed: ago(30 * time.Second), RekeyIn: 600, ExpiresIn: 700,
		}},
	}, {
		Name: "rw", State: "CONNECTING", SPIInitiator: "ffeeddccbbaa9988", SPIResponder: "0000000000000000",
		Local: netip.MustParseAddrPort("192.0.2.1:500"), Remote: netip.MustParseAddrPort("203.0.113.9:500"),
		LocalID: "gw.example.net", Children: []control.IKEChildInfo{},
	}}
}

// flat writes a message's key/values as "key=value" and lists as
// "key=[a b]", sections by their path, in order, for comparing.
func flat(m *govici.Message, prefix string) []string {
	var out []string
	for _, k := range m.Keys() {
		switch v := m.Get(k).(type) {
		case string:
			out = append(out, prefix+k+"="+v)
		case []string:
			out = append(out, prefix+k+"=["+strings.Join(v, " ")+"]")
		case *govici.Message:
			out = append(out, flat(v, prefix+k+".")...)
		}
	}
	return out
}

func TestListSAsAsCharonWritesThem(t *testing.T) {
	f := &fakeIKE{sas: twoSAs()}
	_, sess := serve(t, f, nil)
	var got [][]string
	for _, m := range streamed(t, sess, "list-sas", "list-sa", nil) {
		got = append(got, flat(m, ""))
	}
	if len(got) != 2 {
		t.Fatalf("got %d list-sa events, want 2", len(got))
	}
	// charon's keys, in charon's order (vici_query.c's list_ike and
	// list_child), with what ipsecd knows; the times from the fake's.
	want := []string{
		"gw.uniqueid=1", "gw.version=2", "gw.state=ESTABLISHED",
		"gw.local-host=192.0.2.1", "gw.local-port=4500", "gw.local-id=gw.example.net",
		"gw.remote-host=198.51.100.2", "gw.remote-port=4500", "gw.remote-id=198.51.100.2",
		"gw.initiator=yes", "gw.initiator-spi=1a2b3c4d5e6f7081", "gw.responder-spi=0011223344556677", "gw.nat-any=yes",
		"gw.encr-alg=AES_GCM_16", "gw.encr-keysize=256", "gw.prf-alg=PRF_HMAC_SHA2_384", "gw.dh-group=CURVE_25519",
		"gw.established=90", "gw.rekey-time=3000", "gw.life-time=3500",
		"gw.child-sas.net-1.name=net", "gw.child-sas.net-1.uniqueid=1", "gw.child-sas.net-1.reqid=7",
		"gw.child-sas.net-1.state=INSTALLED", "gw.child-sas.net-1.mode=TUNNEL", "gw.child-sas.net-1.protocol=ESP",
		"gw.child-sas.net-1.encap=yes", "gw.child-sas.net-1.spi-in=00c1a0b2", "gw.child-sas.net-1.spi-out=cafe0001",
		"gw.child-sas.net-1.if-id-in=00000007", "gw.child-sas.net-1.if-id-out=00000007",
		"gw.child-sas.net-1.encr-alg=AES_CBC", "gw.child-sas.net-1.encr-keysize=128",
		"gw.child-sas.net-1.integ-alg=HMAC_SHA2_256_128", "gw.child-sas.net-1.esn=1",
		"gw.child-sas.net-1.bytes-in=840", "gw.child-sas.net-1.packets-in=10",
		"gw.child-sas.net-1.bytes-out=1680", "gw.child-sas.net-1.packets-out=20",
		"gw.child-sas.net-1.rekey-time=600", "gw.child-sas.net-1.life-time=700", "gw.child-sas.net-1.install-time=30",
		"gw.child-sas.net-1.local-ts=[10.1.0.0/24]", "gw.child-sas.net-1.remote-ts=[10.2.0.0/24 10.3.0.5-10.3.0.9]",
	}
	if g, w := strings.Join(got[0], "\n"), strings.Join(want, "\n"); g != w {
		t.Errorf("first SA:\n got\n%s\nwant\n%s", g, w)
	}
	wantRW := []string{"rw.uniqueid=2", "rw.version=2", "rw.state=CONNECTING", "rw.local-host=192.0.2.1", "rw.local-port=500",
		"rw.local-id=gw.example.net", "rw.remote-host=203.0.113.9", "rw.remote-port=500", "rw.remote-id=%any",
		"rw.initiator-spi=ffeeddccbbaa9988", "rw.responder-spi=0000000000000000"}
	if g, w := strings.Join(got[1], "\n"), strings.Join(wantRW, "\n"); g != w {
		t.Errorf("second SA:\n got\n%s\nwant\n%s", g, w)
	}

	// Selected by name and by unique id; ids stay with their SAs.
	for _, tt := range []struct {
		sel  *govici.Message
		want string
	}{
		{msg(t, "ike", "rw"), "rw"},
		{msg(t, "ike-id", "1"), "gw"},
		{msg(t, "ike-id", "2"), "rw"},
		{msg(t, "ike", "nope"), ""},
	} {
		var names []string
		for _, m := range streamed(t, sess, "list-sas", "list-sa", tt.sel) {
			names = append(names, m.Keys()...)
		}
		if got := strings.Join(names, ","); got != tt.want {
			t.Errorf("list-sas %v: got %q, want %q", tt.sel, got, tt.want)
		}
	}
}

// streamed runs a streamed command and returns its events. govici's
// CallStreaming cannot serve here: it selects between the events and the
// response at random, so the response can overtake the last events, and
// it drops events beyond 128 the caller has not taken. Events of a
// subscription are handed over in the order they arrive, before the
// response that follows them.
func streamed(t testing.TB, sess *govici.Session, cmd, event string, in *govici.Message) []*govici.Message {
	t.Helper()
	ch := make(chan govici.Event, 20000)
	sess.NotifyEvents(ch)
	defer sess.StopEvents(ch)
	if err := sess.Subscribe(event); err != nil {
		t.Fatal(err)
	}
	defer sess.Unsubscribe(event)
	if _, err := sess.Call(context.Background(), cmd, in); err != nil {
		t.Fatalf("%s: %v", cmd, err)
	}
	var out []*govici.Message
	for {
		select {
		case ev := <-ch:
			if ev.Name == event {
				out = append(out, ev.Message)
			}
		default:
			return out
		}
	}
}

func msg(t testing.TB, kv ...string) *govici.Message {
	m := govici.NewMessage()
	for i := 0; i < len(kv); i += 2 {
		if err := m.Set(kv[i], kv[i+1]); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

func TestVersionAndStats(t *testing.T) {
	_, sess := serve(t, &fakeIKE{sas: twoSAs()}, nil)
	v, err := sess.Call(context.Background(), "version", nil)
	if err != nil {
		t.Fatal(err)
	}
	if v.Get("daemon") != "ipsecd" || v.Get("sysname") != "Linux" || v.Get("version") == "" || v.Get("machine") == "" {
		t.Errorf("version: %v", v)
	}
	st, err := sess.Call(context.Background(), "stats", nil)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(flat(st, ""), " ")
	for _, want := range []string{"ikesas.total=2", "ikesas.half-open=1", "uptime.running=0 seconds", "workers.total=0",
		"queues.critical=0", "scheduled=0", "plugins=[]"} {
		if !strings.Contains(got, want) {
			t.Errorf("stats lacks %s: %s", want, got)
		}
	}
}

func TestReloadSettings(t *testing.T) {
	f := &fakeIKE{}
	_, sess := serve(t, f, nil)
	if _, err := sess.Call(context.Background(), "reload-settings", nil); err != nil || f.reloaded != 1 {
		t.Fatalf("reload-settings: %v, reloaded %d times, want once", err, f.reloaded)
	}
}

// Every command ipsecd does not implement says so: success=no and an
// errmsg that names the command and why; none succeeds silently.
func TestUnsupportedCommandsSayNo(t *testing.T) {
	_, sess := serve(t, &fakeIKE{}, nil)
	for _, cmd := range []string{"load-conn", "unload-conn", "load-shared", "unload-shared", "load-cert", "load-key",
		"load-pool", "unload-pool", "get-algorithms", "install", "uninstall",
		"redirect", "load-authority", "get-counters"} {
		resp, err := sess.Call(context.Background(), cmd, msg(t, "name", "x"))
		if err == nil || resp == nil || resp.Get("success") != "no" || !strings.HasPrefix(resp.Get("errmsg").(string), cmd+": ") {
			t.Errorf("%s: %v, %v; want success=no with an errmsg naming it", cmd, resp, err)
		}
	}
	// A command vici does not define is CMD_UNKNOWN, as charon answers.
	if _, err := sess.Call(context.Background(), "frobnicate", nil); err == nil || !strings.Contains(err.Error(), "response type: 2") {
		t.Errorf("frobnicate: %v, want an unknown command", err)
	}
	if err := sess.Subscribe("log"); err == nil {
		t.Error("registering for log (which ipsecd does not raise) succeeded")
	}
}

// publishOn returns an onAction that publishes the events a daemon
// would for an action, as IKE would after a round trip.
func publishOn(m *control.Monitor, evs map[string][]control.Event) func(string, control.IKETarget) {
	return func(verb string, _ control.IKETarget) {
		go func() {
			time.Sleep(20 * time.Millisecond)
			for _, ev := range evs[verb] {
				m.Publish(ev)
			}
		}()
	}
}

func childEvent(typ, conn, child, spiIn string) control.Event {
	return control.Event{Type: typ, Detail: map[string]string{
		control.DetailConnection: conn, control.DetailChild: child, control.DetailIKESPII: "1a2b3c4d5e6f7081",
		control.DetailIKESPIR: "0011223344556677", control.DetailLocal: "192.0.2.1:4500", control.DetailRemote: "198.51.100.2:4500",
		control.DetailLocalID: "gw.example.net", control.DetailPeerID: "198.51.100.2", control.DetailSPIIn: spiIn,
		control.DetailSPIOut: "0xcafe0001",
	}}
}

func TestInitiateWaitsForTheOutcome(t *testing.T) {
	events := &control.Monitor{}
	f := &fakeIKE{conns: []config.Connection{{Name: "gw", Children: []config.Child{{Name: "net"}, {Name: "other"}}}}}
	f.onAction = publishOn(events, map[string][]control.Event{
		"initiate": {
			childEvent("child_up", "gw", "other", "0x1"), // not the one asked for
			childEvent("child_up", "gw", "net", "0x2"),
		},
		"terminate": {{Type: "ike_down", Reason: "terminated", Detail: map[string]string{control.DetailConnection: "gw"}}},
	})
	_, sess := serve(t, f, events)

	var logs []string
	for _, m := range streamed(t, sess, "initiate", "control-log", msg(t, "child", "net")) {
		logs = append(logs, m.Get("msg").(string))
	}
	want := []string{"initiating 'net'", "CHILD_SA net established with SPIs 00000002_i cafe0001_o"}
	if strings.Join(logs, "|") != strings.Join(want, "|") {
		t.Errorf("control-log: got %q, want %q", logs, want)
	}

	// loglevel -1: no control-log lines.
	if got := streamed(t, sess, "initiate", "control-log", msg(t, "child", "net", "loglevel", "-1")); len(got) != 0 {
		t.Errorf("loglevel -1: %d control-log events, want none", len(got))
	}

	// A failure of the connection's IKE SA fails the child's initiate.
	f.onAction = publishOn(events, map[string][]control.Event{"initiate": {{Type: "ike_failed", Reason: "authentication failed",
		Detail: map[string]string{control.DetailConnection: "gw", control.DetailError: "AUTHENTICATION_FAILED"}}}})
	resp, err := sess.Call(context.Background(), "initiate", msg(t, "child", "net"))
	if err == nil || !strings.Contains(fmt.Sprint(resp.Get("errmsg")), "authentication failed: AUTHENTICATION_FAILED") {
		t.Errorf("initiate to a failing peer: %v, %v; want success=no saying authentication failed", resp, err)
	}

	// No outcome within the timeout: success=no, and it says so.
	f.onAction = nil
	start := time.Now()
	resp, err = sess.Call(context.Background(), "initiate", msg(t, "child", "net", "timeout", "100"))
	if err == nil || !strings.Contains(fmt.Sprint(resp.Get("errmsg")), "no outcome within 100ms") || time.Since(start) > time.Second {
		t.Errorf("initiate with no outcome: %v, %v after %v; want a timeout after 100 ms", resp, err, time.Since(start))
	}
	// timeout -1 answers at once.
	if _, err := sess.Call(context.Background(), "initiate", msg(t, "ike", "gw", "timeout", "-1")); err != nil {
		t.Errorf("initiate with timeout -1: %v", err)
	}
	// The daemon's refusal is the answer.
	f.err = fmt.Errorf("%w: child net is already up or on its way", control.ErrInvalid)
	resp, err = sess.Call(context.Background(), "initiate", msg(t, "child", "net"))
	if err == nil || !strings.Contains(fmt.Sprint(resp.Get("errmsg")), "already up") {
		t.Errorf("initiate refused: %v, %v", resp, err)
	}
	f.err = nil
	if _, err := sess.Call(context.Background(), "initiate", nil); err == nil {
		t.Error("initiate without a name succeeded")
	}
	if got, want := strings.Join(f.took(), "|"), "initiate ike= child=net|initiate ike= child=net|initiate ike= child=net|initiate ike= child=net|initiate ike=gw child=|initiate ike= child=net"; got != want {
		t.Errorf("actions:\n got %s\nwant %s", got, want)
	}
}

func TestTerminateAndRekeyByID(t *testing.T) {
	events := &control.Monitor{}
	f := &fakeIKE{sas: twoSAs()}
	f.onAction = publishOn(events, map[string][]control.Event{
		"terminate": {{Type: "ike_down", Reason: "terminated", Detail: map[string]string{control.DetailConnection: "rw"}}},
	})
	_, sess := serve(t, f, events)
	// The ids are list-sas's.
	streamed(t, sess, "list-sas", "list-sa", nil)
	if _, err := sess.Call(context.Background(), "terminate", msg(t, "ike-id", "2")); err != nil {
		t.Fatalf("terminate ike-id 2: %v", err)
	}
	if _, err := sess.Call(context.Background(), "rekey", msg(t, "child-id", "1")); err != nil {
		t.Fatalf("rekey child-id 1: %v", err)
	}
	if _, err := sess.Call(context.Background(), "rekey", msg(t, "ike", "gw")); err != nil {
		t.Fatalf("rekey ike gw: %v", err)
	}
	if resp, err := sess.Call(context.Background(), "terminate", msg(t, "ike-id", "9")); err == nil || !strings.Contains(fmt.Sprint(resp.Get("errmsg")), "no SA with ike-id 9") {
		t.Errorf("terminate ike-id 9: %v, %v; want no such SA", resp, err)
	}
	if resp, err := sess.Call(context.Background(), "rekey", msg(t, "ike", "gw", "reauth", "yes")); err == nil || !strings.Contains(fmt.Sprint(resp.Get("errmsg")), "reauthentication is not implemented") {
		t.Errorf("rekey reauth: %v, %v; want refused", resp, err)
	}
	if got, want := strings.Join(f.took(), "|"), "terminate ike=rw child=|rekey ike= child=net|rekey ike=gw child="; got != want {
		t.Errorf("actions:\n got %s\nwant %s", got, want)
	}
}

func TestEventsOfTheDaemon(t *testing.T) {
	events := &control.Monitor{}
	_, sess := serve(t, &fakeIKE{}, events)
	ch := make(chan govici.Event, 16)
	sess.NotifyEvents(ch)
	if err := sess.Subscribe("ike-updown", "child-updown", "child-rekey", "ike-rekey"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return events.Clients() == 1 })
	up := childEvent("ike_up", "gw", "", "")
	child := childEvent("child_up", "gw", "net", "0xc1a0b2")
	rekeyed := childEvent("child_rekeyed", "gw", "net", "0xd00d")
	rekeyed.Detail[control.DetailOldSPIIn], rekeyed.Detail[control.DetailOldSPIOut] = "0xc1a0b2", "0xcafe0001"
	down := childEvent("ike_down", "gw", "", "")
	for _, ev := range []control.Event{up, child, rekeyed, down, {Type: "state_added"}} {
		events.Publish(ev)
	}
	want := []string{
		"ike-updown: up=yes gw.uniqueid=1 gw.version=2 gw.state=ESTABLISHED gw.local-host=192.0.2.1 gw.local-port=4500 gw.local-id=gw.example.net gw.remote-host=198.51.100.2 gw.remote-port=4500 gw.remote-id=198.51.100.2 gw.initiator-spi=1a2b3c4d5e6f7081 gw.responder-spi=0011223344556677",
		"child-updown: up=yes gw.uniqueid=1 gw.version=2 gw.state=ESTABLISHED gw.local-host=192.0.2.1 gw.local-port=4500 gw.local-id=gw.example.net gw.remote-host=198.51.100.2 gw.remote-port=4500 gw.remote-id=198.51.100.2 gw.initiator-spi=1a2b3c4d5e6f7081 gw.responder-spi=0011223344556677 gw.child-sas.net-1.name=net gw.child-sas.net-1.uniqueid=1 gw.child-sas.net-1.state=INSTALLED gw.child-sas.net-1.protocol=ESP gw.child-sas.net-1.spi-in=00c1a0b2 gw.child-sas.net-1.spi-out=cafe0001",
		"child-rekey: gw.uniqueid=1 gw.version=2 gw.state=ESTABLISHED gw.local-host=192.0.2.1 gw.local-port=4500 gw.local-id=gw.example.net gw.remote-host=198.51.100.2 gw.remote-port=4500 gw.remote-id=198.51.100.2 gw.initiator-spi=1a2b3c4d5e6f7081 gw.responder-spi=0011223344556677 gw.child-sas.net.old.name=net gw.child-sas.net.old.uniqueid=1 gw.child-sas.net.old.state=REKEYED gw.child-sas.net.old.protocol=ESP gw.child-sas.net.old.spi-in=00c1a0b2 gw.child-sas.net.old.spi-out=cafe0001 gw.child-sas.net.new.name=net gw.child-sas.net.new.uniqueid=2 gw.child-sas.net.new.state=INSTALLED gw.child-sas.net.new.protocol=ESP gw.child-sas.net.new.spi-in=0000d00d gw.child-sas.net.new.spi-out=cafe0001",
		"ike-updown: gw.uniqueid=1 gw.version=2 gw.state=DELETING gw.local-host=192.0.2.1 gw.local-port=4500 gw.local-id=gw.example.net gw.remote-host=198.51.100.2 gw.remote-port=4500 gw.remote-id=198.51.100.2 gw.initiator-spi=1a2b3c4d5e6f7081 gw.responder-spi=0011223344556677",
	}
	for i, w := range want {
		select {
		case ev := <-ch:
			if got := ev.Name + ": " + strings.Join(flat(ev.Message, ""), " "); got != w {
				t.Errorf("event %d:\n got %s\nwant %s", i, got, w)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("event %d did not come: want %s", i, w)
		}
	}
	// Unregistered, the events stop.
	if err := sess.UnsubscribeAll(); err != nil {
		t.Fatal(err)
	}
	events.Publish(up)
	select {
	case ev := <-ch:
		t.Errorf("after unsubscribing: got %s", ev.Name)
	case <-time.After(100 * time.Millisecond):
	}
}

func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestListConnsAndPolicies(t *testing.T) {
	f := &fakeIKE{conns: []config.Connection{{
		Name: "gw", RemoteAddrs: []netip.Addr{netip.MustParseAddr("198.51.100.2")}, LocalAny: true, RekeyTime: 4 * time.Hour,
		Local:  config.Endpoint{Auth: "psk", ID: "gw.example.net"},
		Remote: config.Endpoint{Auth: "pubkey", ID: "peer.example.net", CACerts: []string{"ca.pem"}, CACertList: []*x509.Certificate{listCA(t)}},
		Children: []config.Child{{Name: "net", IfID: 7, LocalTS: []netip.Prefix{netip.MustParsePrefix("10.1.0.0/24")},
			RemoteTS: []netip.Prefix{netip.MustParsePrefix("10.2.0.0/24")}, RekeyTime: time.Hour, LifeTime: 66 * time.Minute,
			StartAction: config.StartActionTrap, DPDAction: config.DPDActionClear}},
	}}}
	_, sess := serve(t, f, nil)
	var got []string
	for _, m := range streamed(t, sess, "list-conns", "list-conn", nil) {
		got = append(got, flat(m, "")...)
	}
	want := "gw.local_addrs=[%any] gw.remote_addrs=[198.51.100.2] gw.version=IKEv2 gw.reauth_time=0 gw.rekey_time=14400 " +
		"gw.unique=UNIQUE_NO gw.local-1.id=gw.example.net gw.local-1.class=pre-shared key gw.local-1.groups=[] " +
		"gw.local-1.cert_policy=[] gw.local-1.certs=[] gw.local-1.cacerts=[] gw.remote-1.id=peer.example.net " +
		"gw.remote-1.class=public key gw.remote-1.groups=[] gw.remote-1.cert_policy=[] gw.remote-1.certs=[] " +
		"gw.remote-1.cacerts=[O=ipsecd, CN=list test CA] gw.children.net.mode=TUNNEL gw.children.net.rekey_time=3600 " +
		"gw.children.net.rekey_bytes=0 gw.children.net.rekey_packets=0 gw.children.net.dpd_action=none " +
		"gw.children.net.close_action=none gw.children.net.local-ts=[10.1.0.0/24] gw.children.net.remote-ts=[10.2.0.0/24] " +
		"gw.children.net.if_id_in=7 gw.children.net.if_id_out=7"
	if g := strings.Join(got, " "); g != want {
		t.Errorf("list-conns:\n got %s\nwant %s", g, want)
	}
	got = nil
	for _, m := range streamed(t, sess, "list-policies", "list-policy", msg(t, "trap", "yes")) {
		got = append(got, flat(m, "")...)
	}
	if g, w := strings.Join(got, " "), "gw/net.child=net gw/net.ike=gw gw/net.mode=TUNNEL gw/net.local-ts=[10.1.0.0/24] gw/net.remote-ts=[10.2.0.0/24]"; g != w {
		t.Errorf("list-policies:\n got %s\nwant %s", g, w)
	}
	resp, err := sess.Call(context.Background(), "get-conns", nil)
	if err != nil || len(resp.Get("conns").([]string)) != 0 {
		t.Errorf("get-conns: %v, %v; want an empty list (none loaded over vici)", resp, err)
	}
}

// A road warrior's EAP identity and virtual IP are listed as charon
// lists them: remote-eap-id when it differs from the IKE identity,
// remote-vips.
func TestListSAsRoadWarrior(t *testing.T) {
	sa := control.IKESAInfo{Name: "rw", State: "ESTABLISHED", SPIInitiator: "1111111111111111", SPIResponder: "2222222222222222",
		Local: netip.MustParseAddrPort("192.0.2.1:4500"), Remote: netip.MustParseAddrPort("203.0.113.9:4500"),
		LocalID: "vpn.example.net", RemoteID: "203.0.113.9", RemoteEAPID: "alice", RemoteVIPs: []string{"10.3.0.1"},
		Children: []control.IKEChildInfo{}}
	_, sess := serve(t, &fakeIKE{sas: []control.IKESAInfo{sa}}, nil)
	got := strings.Join(flat(streamed(t, sess, "list-sas", "list-sa", nil)[0], ""), " ")
	for _, want := range []string{"rw.remote-id=203.0.113.9 rw.remote-eap-id=alice rw.initiator-spi=", "rw.responder-spi=2222222222222222 rw.remote-vips=[10.3.0.1]"} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in %s", want, got)
		}
	}
	f := &fakeIKE{conns: []config.Connection{{Name: "rw", Local: config.Endpoint{Auth: "pubkey", ID: "vpn.example.net", Cert: "gw.pem",
		Certs: []*x509.Certificate{selfSigned(t, listKey(t), false), listCA(t)}},
		Remote: config.Endpoint{Auth: "eap-mschapv2", EAPID: "%any"}}}}
	_, sess = serve(t, f, nil)
	got = strings.Join(flat(streamed(t, sess, "list-conns", "list-conn", nil)[0], ""), " ")
	for _, want := range []string{"rw.local-1.class=public key", "rw.local-1.certs=[CN=vici test]",
		"rw.remote-1.id=%any rw.remote-1.class=EAP rw.remote-1.eap-type=EAP_MSCHAPV2 rw.remote-1.eap_id=%any"} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in %s", want, got)
		}
	}
}

// listKey is a key for the certificates list-conns writes by subject.
func listKey(t *testing.T) *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// listCA is a CA whose subject has two attributes, which charon writes
// in the certificate's order, separated by ", ".
func listCA(t *testing.T) *x509.Certificate {
	t.Helper()
	key := listKey(t)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{Organization: []string{"ipsecd"}, CommonName: "list test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
