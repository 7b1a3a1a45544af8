package control_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/control"
	"github.com/ipsecd/ipsecd/control/controltest"
	"github.com/ipsecd/ipsecd/sa"
)

func gcmState(spi uint32, dir sa.Dir) sa.Config {
	key := make([]byte, 20)
	for i := range key {
		key[i] = byte(0xa0 + i)
	}
	return sa.Config{
		Src: netip.MustParseAddr("192.0.2.1"), Dst: netip.MustParseAddr("192.0.2.2"),
		SPI: spi, Dir: dir, Mode: sa.ModeTunnel, IfID: 1,
		AEAD:         &sa.Algorithm{Name: "rfc4106(gcm(aes))", Key: key, Bits: 128},
		Encap:        &sa.Encap{SrcPort: 4500, DstPort: 4500},
		ReplayWindow: 64, ESN: true,
		Lifetime: sa.Lifetime{HardBytes: 1 << 30, SoftAdd: time.Hour, HardAdd: 2 * time.Hour},
		Selector: sa.Selector{Src: netip.MustParsePrefix("10.0.0.0/24")},
	}
}

func dial(t *testing.T, srv *control.Server) *control.Client {
	t.Helper()
	c, err := control.Dial(srv.Path())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestRoundTrip(t *testing.T) {
	b := &controltest.Backend{
		Counters: []control.Counter{{"XfrmInError", 1}, {"XfrmInNoStates", 7}},
		Ifaces: []control.InterfaceInfo{{Name: "ipsec1", IfID: 1, MTU: 1400, Queues: 2,
			Addresses: []netip.Prefix{netip.MustParsePrefix("10.0.0.1/24")}, RX: control.LinkStats{Packets: 3}}},
	}
	srv := controltest.Start(t, b)
	c := dial(t, srv)

	if err := c.Ping(); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	st := gcmState(0x1001, sa.DirOut)
	if err := c.AddState(st); err != nil {
		t.Fatalf("AddState: %v", err)
	}
	if err := c.AddState(st); !errors.Is(err, control.ErrExists) {
		t.Errorf("AddState twice: got %v, want ErrExists", err)
	}
	id := control.StateID{Dir: sa.DirOut, SPI: 0x1001, Dst: st.Dst}
	want := control.StateStats{Bytes: 100, Packets: 2, Replay: 1, Seq: 2}
	b.SetStats(id, want)

	got, err := c.GetState(id, true)
	if err != nil {
		t.Fatalf("GetState: %v", err)
	}
	if !reflect.DeepEqual(got.Config, st) {
		t.Errorf("GetState(keys) config:\n got %+v\nwant %+v", got.Config, st)
	}
	if got.Stats != want {
		t.Errorf("GetState stats: got %+v, want %+v", got.Stats, want)
	}
	got, err = c.GetState(id, false)
	if err != nil {
		t.Fatal(err)
	}
	if got.Config.AEAD.Key != nil {
		t.Errorf("GetState without keys returned a key")
	}
	list, err := c.States(false)
	if err != nil || len(list) != 1 || list[0].Config.AEAD.Key != nil {
		t.Errorf("States(false) = %d states, %v; want 1 without keys", len(list), err)
	}
	list, err = c.States(true)
	if err != nil || len(list) != 1 || len(list[0].Config.AEAD.Key) != 20 {
		t.Errorf("States(true) = %v; want 1 with a key", err)
	}
	if _, err := c.GetState(control.StateID{Dir: sa.DirIn, SPI: 0x1001, Dst: st.Dst}, false); !errors.Is(err, control.ErrNotFound) {
		t.Errorf("GetState(other dir): got %v, want ErrNotFound", err)
	}
	if err := c.DeleteState(id); err != nil {
		t.Errorf("DeleteState: %v", err)
	}
	if err := c.DeleteState(id); !errors.Is(err, control.ErrNotFound) {
		t.Errorf("DeleteState twice: got %v, want ErrNotFound", err)
	}

	bad := st
	bad.AEAD = &sa.Algorithm{Name: "rfc4106(gcm(aes))", Key: make([]byte, 17)}
	err = c.AddState(bad)
	if !errors.Is(err, control.ErrInvalid) || !strings.Contains(err.Error(), "aead.key: rfc4106(gcm(aes)) wants 20 or 36 bytes, got 17") {
		t.Errorf("AddState(bad key): got %v", err)
	}

	p := sa.Policy{Dir: sa.DirOut, IfID: 1, Action: sa.ActionBlock,
		Selector: sa.Selector{Dst: netip.MustParsePrefix("10.20.0.0/24")}}
	if err := c.AddPolicy(p); err != nil {
		t.Fatalf("AddPolicy: %v", err)
	}
	ps, err := c.Policies()
	if err != nil || !reflect.DeepEqual(ps, []sa.Policy{p}) {
		t.Errorf("Policies = %+v, %v; want %+v", ps, err, p)
	}
	if err := c.AddPolicy(sa.Policy{Dir: sa.DirOut, Action: sa.ActionAllow}); !errors.Is(err, control.ErrInvalid) {
		t.Errorf("AddPolicy(if_id 0): got %v, want ErrInvalid", err)
	}
	if err := c.DeletePolicy(sa.Policy{Dir: p.Dir, IfID: p.IfID, Selector: p.Selector}); err != nil {
		t.Errorf("DeletePolicy: %v", err)
	}
	if ps, _ := c.Policies(); len(ps) != 0 {
		t.Errorf("Policies after delete = %+v", ps)
	}

	cs, err := c.Stats()
	if err != nil || !reflect.DeepEqual(cs, b.Counters) {
		t.Errorf("Stats = %+v, %v; want %+v", cs, err, b.Counters)
	}
	ifs, err := c.Interfaces()
	if err != nil || !reflect.DeepEqual(ifs, b.Ifaces) {
		t.Errorf("Interfaces = %+v, %v; want %+v", ifs, err, b.Ifaces)
	}
}

// TestWireFormat pins the JSON a script sees.
func TestWireFormat(t *testing.T) {
	b := &controltest.Backend{Counters: []control.Counter{{Name: "XfrmInError", Value: 1}, {Name: "XfrmInBufferError", Value: 0}}}
	b.AddState(gcmState(0x1001, sa.DirIn))
	srv := controltest.Start(t, b)
	conn, err := net.Dial("unix", srv.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	r := bufio.NewReader(conn)
	ask := func(line string) string {
		t.Helper()
		fmt.Fprintln(conn, line)
		resp, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(resp)
	}
	got := ask(`{"cmd":"state.list"}`)
	want := `{"ok":true,"result":[{"src":"192.0.2.1","dst":"192.0.2.2","spi":"0x1001","dir":"in","mode":"tunnel","if_id":1,` +
		`"aead":{"name":"rfc4106(gcm(aes))","icv_bits":128},"encap":{"type":"espinudp","sport":4500,"dport":4500},` +
		`"replay_window":64,"esn":true,"lifetime":{"hard_bytes":1073741824,"soft_add_seconds":3600,"hard_add_seconds":7200},` +
		`"selector":{"src":"10.0.0.0/24"},` +
		`"stats":{"bytes":0,"packets":0,"replay_window_dropped":0,"replay_dropped":0,"integrity_failed":0,"seq":0,"added":"0001-01-01T00:00:00Z"}}]}`
	if got != want {
		t.Errorf("state.list:\n got %s\nwant %s", got, want)
	}
	if got := ask(`{"cmd":"state.list","keys":true}`); !strings.Contains(got, `"key":"0xa0a1a2a3`) {
		t.Errorf("state.list with keys lacks the key: %s", got)
	}
	for _, tt := range []struct{ req, want string }{
		{`not json`, `{"ok":false,"error":"invalid request: bad JSON: invalid character 'o' in literal null (expecting 'u')","code":"invalid"}`},
		{`{"cmd":"state.fly"}`, `{"ok":false,"error":"invalid request: unknown cmd \"state.fly\"","code":"invalid"}`},
		{`{"cmd":"state.list","kyes":true}`, `{"ok":false,"error":"invalid request: bad JSON: json: unknown field \"kyes\"","code":"invalid"}`},
		{`{}`, `{"ok":false,"error":"invalid request: missing \"cmd\"","code":"invalid"}`},
		{`{"cmd":"state.get"}`, `{"ok":false,"error":"invalid request: missing \"id\"","code":"invalid"}`},
		{`{"cmd":"state.get","id":{"dir":"in","spi":"zz","dst":"192.0.2.2"}}`, `{"ok":false,"error":"invalid request: spi \"zz\": want 0x100..0xffffffff","code":"invalid"}`},
		{`{"cmd":"state.delete","id":{"dir":"in","spi":"0x9","dst":"192.0.2.2"}}`, `{"ok":false,"error":"state spi 0x9 dir in dst 192.0.2.2: not found","code":"not_found"}`},
		{`{"cmd":"state.add","state":{"src":"192.0.2.1","dst":"192.0.2.2","spi":"0x2000","dir":"in","mode":"tunnel","if_id":1,"aead":{"name":"rfc4106(gcm(aes))","key":"0x00"}}}`,
			`{"ok":false,"error":"invalid request: aead.key: rfc4106(gcm(aes)) wants 20 or 36 bytes, got 1","code":"invalid"}`},
		{`{"cmd":"policy.add","policy":{"dir":"up","if_id":1}}`, `{"ok":false,"error":"invalid request: dir \"up\": want in or out","code":"invalid"}`},
		{`{"cmd":"ping"}`, `{"ok":true,"result":"pong"}`},
		{`{"cmd":"policy.list"}`, `{"ok":true,"result":[]}`},
		// One object keyed by counter name, in /proc/net/xfrm_stat order.
		{`{"cmd":"stats"}`, `{"ok":true,"result":{"XfrmInError":1,"XfrmInBufferError":0}}`},
	} {
		if got := ask(tt.req); got != tt.want {
			t.Errorf("%s:\n got %s\nwant %s", tt.req, got, tt.want)
		}
	}
	// A line past MaxLine ends the connection with an error, and the
	// server keeps serving others.
	fmt.Fprintln(conn, strings.Repeat("x", control.MaxLine+10))
	resp, _ := r.ReadString('\n')
	if !strings.Contains(resp, `"code":"invalid"`) {
		t.Errorf("long line: got %q", resp)
	}
	c := dial(t, srv)
	if err := c.Ping(); err != nil {
		t.Errorf("Ping after a long line: %v", err)
	}
}

func TestSocketMode(t *testing.T) {
	srv := controltest.Start(t, &controltest.Backend{})
	fi, err := os.Stat(srv.Path())
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode = %v, want a socket with 0600", fi.Mode())
	}
	di, err := os.Stat(filepath.Dir(srv.Path()))
	if err != nil {
		t.Fatal(err)
	}
	if di.Mode().Perm() != 0o700 {
		t.Errorf("socket dir mode = %v, want 0700", di.Mode().Perm())
	}
	// A second server on the same path must refuse: the first answers.
	if _, err := control.Listen(srv.Path(), &controltest.Backend{}, nil); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Errorf("second Listen: got %v, want in use", err)
	}
}

func TestStaleSocket(t *testing.T) {
	dir, err := os.MkdirTemp("", "ipsecd-ctl")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "s.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close() // leaves a socket file nobody answers on
	srv, err := control.Listen(path, &controltest.Backend{}, nil)
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	go srv.Serve()
	c, err := control.Dial(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Ping(); err != nil {
		t.Errorf("Ping: %v", err)
	}
	c.Close()
	srv.Close()
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("socket left behind after Close: %v", err)
	}

	regular := filepath.Join(dir, "file")
	os.WriteFile(regular, nil, 0o600)
	if _, err := control.Listen(regular, &controltest.Backend{}, nil); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Errorf("Listen on a regular file: got %v", err)
	}
}

func TestConcurrentClients(t *testing.T) {
	srv := controltest.Start(t, &controltest.Backend{})
	shared := dial(t, srv)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			own, err := control.Dial(srv.Path())
			if err != nil {
				errs <- err
				return
			}
			defer own.Close()
			for i := 0; i < 20; i++ {
				st := gcmState(uint32(0x1000+g*100+i), sa.DirIn)
				c := own
				if i%2 == 1 {
					c = shared // one Client used from many goroutines
				}
				if err := c.AddState(st); err != nil {
					errs <- err
					return
				}
				if _, err := c.GetState(control.StateID{Dir: sa.DirIn, SPI: st.SPI, Dst: st.Dst}, false); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	list, err := shared.States(false)
	if err != nil || len(list) != 160 {
		t.Errorf("States: got %d, %v; want 160", len(list), err)
	}
}

type panicBackend struct{ controltest.Backend }

func (*panicBackend) Stats() []control.Counter { panic("boom") }

func TestBackendPanic(t *testing.T) {
	srv := controltest.Start(t, &panicBackend{})
	c := dial(t, srv)
	if _, err := c.Stats(); err == nil || err.Error() != "internal error" {
		t.Errorf("Stats with a panicking backend: got %v, want internal error", err)
	}
	if err := c.Ping(); err != nil {
		t.Errorf("Ping after a panic: %v", err)
	}
}

func TestStateInfoJSON(t *testing.T) {
	in := control.StateInfo{Config: gcmState(0x1001, sa.DirOut), Stats: control.StateStats{Bytes: 1, HardExpired: true}}
	data, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var out control.StateInfo
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Errorf("round trip:\n got %+v\nwant %+v", out, in)
	}
}

// TestStateInfoJSONTS: an SA whose selector is traffic selector lists
// (IKE's) crosses the control socket whole, as src_ts and dst_ts; lists
// that break sa's rules are refused naming the field.
func TestStateInfoJSONTS(t *testing.T) {
	ts := func(p string) sa.TS { return sa.PrefixTS(netip.MustParsePrefix(p)) }
	tcp := ts("2001:db8:2::/48")
	tcp.Proto, tcp.StartPort, tcp.EndPort = 6, 80, 443
	sel, err := sa.NewSelector([]sa.TS{ts("10.1.0.0/25"), ts("10.1.0.128/25")}, []sa.TS{ts("10.2.0.0/24"), tcp})
	if err != nil {
		t.Fatal(err)
	}
	in := control.StateInfo{Config: gcmState(0x1001, sa.DirIn)}
	in.Config.Selector = sel
	data, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"src_ts":[{"start":"10.1.0.0","end":"10.1.0.127","start_port":0,"end_port":65535}`) {
		t.Errorf("JSON: %s", data)
	}
	var out control.StateInfo
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Errorf("round trip:\n got %+v\nwant %+v", out.Config.Selector, in.Config.Selector)
	}
	spec := control.NewStateSpec(in.Config, true)
	spec.Selector.SrcTS[1].StartPort, spec.Selector.SrcTS[1].EndPort = 65535, 0
	if _, err := spec.Config(); err == nil || !strings.Contains(err.Error(), "selector.src_ts[1]") {
		t.Errorf("reversed ports: %v, want an error naming selector.src_ts[1]", err)
	}
}

// TestStateAddDefaultWindow: a state.add whose state names no
// replay_window gets the window a config file's state or `ipsecd state
// add` gets (sa.DefaultReplayWindow inbound, none outbound); one that
// names 0 turns anti-replay off, as in the file.
func TestStateAddDefaultWindow(t *testing.T) {
	b := &controltest.Backend{}
	srv := controltest.Start(t, b)
	conn, err := net.Dial("unix", srv.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	r := bufio.NewReader(conn)
	const key = `"aead":{"name":"rfc4106(gcm(aes))","key":"0xa0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3"}`
	for _, tt := range []struct {
		name, dir, window string
		spi               uint32
		want              uint32
	}{
		{"inbound, none named", "in", "", 0x2001, sa.DefaultReplayWindow},
		{"inbound, 0 named", "in", `,"replay_window":0`, 0x2002, 0},
		{"inbound, 1024 named", "in", `,"replay_window":1024`, 0x2003, 1024},
		{"outbound, none named", "out", "", 0x2004, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fmt.Fprintf(conn, `{"cmd":"state.add","state":{"src":"192.0.2.1","dst":"192.0.2.2","spi":"%#x","dir":"%s","mode":"tunnel","if_id":1,%s%s}}`+"\n",
				tt.spi, tt.dir, key, tt.window)
			resp, err := r.ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(resp, `{"ok":true`) {
				t.Fatalf("state.add: %s", resp)
			}
			dir, _ := sa.ParseDir(tt.dir)
			st, err := b.GetState(control.StateID{Dir: dir, SPI: tt.spi, Dst: netip.MustParseAddr("192.0.2.2")}, false)
			if err != nil {
				t.Fatal(err)
			}
			if got := st.Config.ReplayWindow; got != tt.want {
				t.Errorf("replay window: got %d, want %d", got, tt.want)
			}
		})
	}
}
