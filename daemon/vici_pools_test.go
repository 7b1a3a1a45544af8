package daemon

import (
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	govici "github.com/strongswan/govici/vici"

	"github.com/ipsecd/ipsecd/config"
)

// poolMsg is a load-pool request as swanctl --load-pools sends one: a
// section named after the pool, addrs a key/value, the rest lists.
func poolMsg(t *testing.T, name string, kv ...any) *govici.Message {
	t.Helper()
	sec := govici.NewMessage()
	for i := 0; i+1 < len(kv); i += 2 {
		if err := sec.Set(kv[i].(string), kv[i+1]); err != nil {
			t.Fatal(err)
		}
	}
	m := govici.NewMessage()
	if err := m.Set(name, sec); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestViciLoadPool: swanctl's load-pool, unload-pool and get-pools over
// the daemon's socket, as charon's vici_attribute.c answers them: a pool
// loaded is listed beside the file's, with its leases; the same addresses
// again keep the leases; other addresses, or unloading, are refused while
// a client is online with a lease; the file's names and addresses are
// the file's; attributes ipsecd does not send are refused by name; a
// reload of the file leaves vici's pools.
func TestViciLoadPool(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ipsecd.yaml")
	sock := filepath.Join(dir, "v.vici")
	text := "control: " + filepath.Join(dir, "ipsecd.sock") + "\nstate_dir: " + filepath.Join(dir, "state") +
		"\nunderlay: {udp: " + freeUDP(t) + "}\nvici: " + sock + "\npools: [{name: rw, addrs: 10.3.0.0/24}]\n"
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	log := logrus.New()
	log.SetOutput(io.Discard)
	d, _ := startFile(t, path, log)
	s, err := govici.NewSession(govici.WithSocketPath(sock))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	call := func(cmd string, m *govici.Message) string {
		t.Helper()
		resp, err := s.Call(t.Context(), cmd, m)
		if err != nil && resp == nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		if resp.Get("success") == "no" {
			return resp.Get("errmsg").(string)
		}
		return ""
	}
	vp := poolMsg(t, "vp", "addrs", "10.4.0.0/24", "dns", []string{"10.4.0.53"}, "subnet", []string{"10.9.0.0/16"},
		"25", []string{"corp.example"})
	if e := call("load-pool", vp); e != "" {
		t.Fatalf("load-pool vp: %s", e)
	}
	pools := func() map[string]string {
		t.Helper()
		resp, err := s.Call(t.Context(), "get-pools", poolListArgs(t))
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, k := range resp.Keys() {
			p := resp.Get(k).(*govici.Message)
			line := p.Get("base").(string) + " " + p.Get("size").(string) + " online=" + p.Get("online").(string)
			if l, ok := p.Get("leases").(*govici.Message); ok {
				for _, i := range l.Keys() {
					le := l.Get(i).(*govici.Message)
					line += " " + le.Get("address").(string) + "=" + le.Get("identity").(string) + "/" + le.Get("status").(string)
				}
			}
			out[k] = line
		}
		return out
	}
	// vp's size leaves out its DNS server 10.4.0.53, which it never
	// hands out (charon counts it, and would lease it).
	if got := pools(); got["rw"] != "10.3.0.0 254 online=0" || got["vp"] != "10.4.0.0 253 online=0" {
		t.Fatalf("get-pools: %v; want rw of 254 addresses and vp of 253", got)
	}
	// The attributes reach what IKE hands a client with a lease of vp.
	d.mu.Lock()
	p := d.ikeConfig(d.cfg).Pool("vp")
	d.mu.Unlock()
	if p == nil || !slices.Equal(p.DNS, []netip.Addr{netip.MustParseAddr("10.4.0.53")}) ||
		!slices.Equal(p.SplitInclude, []netip.Prefix{netip.MustParsePrefix("10.9.0.0/16")}) || !slices.Equal(p.DNSDomains, []string{"corp.example"}) {
		t.Fatalf("IKE's pool vp: %+v", p)
	}

	for _, tt := range []struct {
		name string
		m    *govici.Message
		want string
	}{
		{"the file's name", poolMsg(t, "rw", "addrs", "10.5.0.0/24"), `load-pool: rw: pool "rw" comes from the config file`},
		{"the file's addresses", poolMsg(t, "x", "addrs", "10.3.0.128/25"), "load-pool: x: addrs 10.3.0.128/25 overlaps pool rw (10.3.0.0/24)"},
		{"vici's addresses", poolMsg(t, "x", "addrs", "10.4.0.10-10.4.0.20"), "overlaps pool vp (10.4.0.0/24)"},
		{"no addrs", poolMsg(t, "x", "dns", []string{"10.0.0.1"}), "load-pool: x: missing addrs"},
		{"bad addrs", poolMsg(t, "x", "addrs", "10.6.0.0/33"), "load-pool: x: addrs:"},
		{"nbns", poolMsg(t, "x", "addrs", "10.6.0.0/24", "nbns", []string{"10.0.0.1"}), "load-pool: x: nbns is not supported by ipsecd"},
		{"split_include", poolMsg(t, "x", "addrs", "10.6.0.0/24", "split_include", []string{"10.0.0.0/8"}), "split_include is not supported by ipsecd: it is Cisco Unity's"},
		{"a number", poolMsg(t, "x", "addrs", "10.6.0.0/24", "28675", []string{"x"}), "attribute 28675 is not supported by ipsecd"},
		{"unknown", poolMsg(t, "x", "addrs", "10.6.0.0/24", "wins", []string{"x"}), "load-pool: x: invalid attribute: wins"},
		{"bad dns", poolMsg(t, "x", "addrs", "10.6.0.0/24", "dns", []string{"ns1"}), "load-pool: x: dns[0]:"},
		{"bad name", poolMsg(t, "a b", "addrs", "10.6.0.0/24"), "name: \"a b\": want letters"},
	} {
		if got := call("load-pool", tt.m); !strings.Contains(got, tt.want) || strings.Contains(got, "vici:") {
			t.Errorf("%s: %q; want %q", tt.name, got, tt.want)
		}
	}
	if got := pools(); len(got) != 2 {
		t.Errorf("refused pools were kept: %v", got)
	}

	// A client online with a lease of vp.
	set := d.pools.pools()
	a, _, err := set.Acquire([]string{"vp"}, "alice", netip.IPv4Unspecified(), netip.MustParseAddrPort("192.0.2.7:500"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := call("load-pool", poolMsg(t, "vp", "addrs", "10.7.0.0/24")), "load-pool: vp: vici pool vp has 1 online leases, unable to replace"; !strings.Contains(got, want) {
		t.Errorf("other addrs with a lease online: %q; want %q", got, want)
	}
	if got, want := call("unload-pool", nameMsg(t, "vp")), "unload-pool: vp has 1 online leases, unable to unload"; got != want {
		t.Errorf("unload with a lease online: %q; want %q", got, want)
	}
	if e := call("load-pool", poolMsg(t, "vp", "addrs", "10.4.0.0/24", "dns", []string{"10.4.0.54"})); e != "" {
		t.Errorf("the same addrs, new dns: %s", e)
	}
	if got, want := pools()["vp"], "10.4.0.0 253 online=1 "+a.String()+"=alice/online"; got != want {
		t.Errorf("vp after an update: %q; want %q (the lease kept)", got, want)
	}
	// A reload of the file leaves vici's pool, and its lease.
	if _, err := d.Reload(path); err != nil {
		t.Fatal(err)
	}
	if got := pools(); got["vp"] != "10.4.0.0 253 online=1 "+a.String()+"=alice/online" {
		t.Errorf("after a reload of the file: %v", got)
	}
	set.Release("vp", "alice", a)
	if e := call("unload-pool", nameMsg(t, "vp")); e != "" {
		t.Errorf("unload-pool vp, offline: %s", e)
	}
	for name, want := range map[string]string{
		"vp": `unload-pool: not found: no pool "vp" loaded over vici`,
		"rw": `unload-pool: pool "rw" comes from the config file; vici loads and unloads only its own`,
		"":   "unload-pool: missing pool name to unload",
	} {
		if got := call("unload-pool", nameMsg(t, name)); got != want {
			t.Errorf("unload-pool %q: %q; want %q", name, got, want)
		}
	}
	if got := pools(); len(got) != 1 || got["rw"] == "" {
		t.Errorf("after unload: %v", got)
	}
}

func poolListArgs(t *testing.T) *govici.Message {
	m := govici.NewMessage()
	if err := m.Set("leases", "yes"); err != nil {
		t.Fatal(err)
	}
	return m
}

func nameMsg(t *testing.T, name string) *govici.Message {
	m := govici.NewMessage()
	if name != "" {
		if err := m.Set("name", name); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

// TestViciPoolsInIKE: a vici pool is IKE's beside the file's; remote_ts
// dynamic of a connection naming it, the file's or vici's, admits its
// addresses; a vici connection naming a pool nobody has is refused; a
// vici pool whose name or addresses the file takes later is left out.
func TestViciPoolsInIKE(t *testing.T) {
	file, err := config.Parse("f.yaml", []byte(`interfaces: [{name: ipsec1, if_id: 1}]
vici: /run/x.vici
pools: [{name: rw, addrs: 10.3.0.0/24}]
connections:
  - {name: file, remote_addrs: [192.0.2.9], proposals: [aes256-sha256-x25519], local: {auth: psk, id: a.test}, remote: {auth: psk, id: f.test},
     pools: [rw, vp], children: [{name: fnet, if_id: 1, local_ts: [10.9.0.0/24], remote_ts: [dynamic], esp_proposals: [aes128gcm16]}]}
secrets: [{ids: [a.test], secret: x}]
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(file.Warnings) == 0 || !strings.Contains(strings.Join(file.Warnings, "\n"), `connections[0].pools[1]: no pool is named "vp" in pools:; it must be loaded over vici`) {
		t.Errorf("the file's warnings: %q", file.Warnings)
	}
	log := logrus.New()
	log.SetOutput(io.Discard)
	n := &Daemon{cfg: file, log: log}
	vp, err := parseVici(nil, nil, nil, nil, []loadedItem{{"vp", []byte(`{name: "vp", addrs: "10.4.0.0/24"}`)}})
	if err != nil {
		t.Fatal(err)
	}
	n.loaded.pools = vp.Pools
	gw := `{name: "gw", remote_addrs: ["192.0.2.2"], proposals: ["aes256-sha256-x25519"], local: {auth: "psk", id: "a.test"}, ` +
		`remote: {auth: "psk", id: "b.test"}, pools: ["POOL"], children: [{name: "net", if_id: "1", local_ts: ["10.1.0.0/24"], ` +
		`remote_ts: ["dynamic"], esp_proposals: ["aes128gcm16"]}]}`
	secret := []loadedItem{{"s", []byte(`{ids: ["a.test"], secret: "0x6869"}`)}}
	cfg, err := parseVici(file.Interfaces, []loadedItem{{"gw", []byte(strings.Replace(gw, "POOL", "vp", 1))}}, secret, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.knownPoolsLocked(cfg.Connections[0]); err != nil {
		t.Errorf("a vici connection naming vici's pool: %v", err)
	}
	n.loaded.conns = []loadedConn{{"gw", cfg}}
	bad, err := parseVici(file.Interfaces, []loadedItem{{"gw", []byte(strings.Replace(gw, "POOL", "nope", 1))}}, secret, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.knownPoolsLocked(bad.Connections[0]); err == nil || !strings.Contains(err.Error(), `pools: no pool is named "nope"; load-pool it first`) {
		t.Errorf("a vici connection naming no pool anyone has: %v", err)
	}

	remoteTS := func(ic *config.IKEConfig, conn string) string {
		return strings.TrimSpace(fmtPrefixes(ic.Connection(conn).Children[0].RemoteTS))
	}
	ic := n.ikeConfig(file)
	// Each pool's addresses are the prefixes of the addresses it hands out.
	if got, want := remoteTS(ic, "file"), "10.3.0.1/32 .* 10.3.0.254/32 10.4.0.1/32 .* 10.4.0.254/32"; !regexp.MustCompile("^" + want + "$").MatchString(got) {
		t.Errorf("the file's connection: remote_ts %s; want %s", got, want)
	}
	if got, want := remoteTS(ic, "gw"), "10.4.0.1/32 .* 10.4.0.254/32"; !regexp.MustCompile("^" + want + "$").MatchString(got) {
		t.Errorf("vici's connection: remote_ts %s; want %s", got, want)
	}
	if got := remoteTS(&file.IKEConfig, "file"); strings.Contains(got, "10.4.") {
		t.Errorf("ikeConfig changed the file's config: %s", got)
	}
	// The file takes vp's addresses, then its name: vici's vp is left out.
	for _, pools := range []string{"[{name: rw, addrs: 10.3.0.0/24}, {name: other, addrs: 10.4.0.0/25}]", "[{name: vp, addrs: 10.8.0.0/24}]"} {
		f2, err := config.Parse("f.yaml", []byte("vici: /run/x.vici\npools: "+pools+"\n"))
		if err != nil {
			t.Fatal(err)
		}
		ic := n.ikeConfig(f2)
		if p := ic.Pool("vp"); p != nil && p.Addrs.String() == "10.4.0.0/24" {
			t.Errorf("file pools %s: vici's vp still in IKE's pools", pools)
		}
	}
}

func fmtPrefixes(ps []netip.Prefix) string {
	var b strings.Builder
	for _, p := range ps {
		b.WriteString(p.String() + " ")
	}
	return b.String()
}

// TestViciEAPSecrets: EAP passwords loaded over vici join the file's in
// what IKE runs (its user store: IKEConfig.EAPUsers), the file's winning
// an identity both have; unload-shared and clear-creds take them out.
func TestViciEAPSecrets(t *testing.T) {
	file, err := config.Parse("f.yaml", []byte("secrets: [{type: eap, ids: [alice], secret: file-pw}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	log := logrus.New()
	log.SetOutput(io.Discard)
	n := &Daemon{cfg: file, log: log}
	b := (*backend)(n)
	for id, item := range map[string]string{
		"eap-bob":   `{type: eap, ids: ["bob"], secret: "0x626f622d7077"}`,
		"eap-alice": `{type: eap, ids: ["alice"], secret: "0x7669636920707721"}`,
		"ike-gw":    `{type: ike, ids: ["a.test", "b.test"], secret: "0x6869"}`,
	} {
		if err := b.LoadShared(id, []byte(item)); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
	}
	users := func() string {
		var out []string
		for id, pw := range n.ikeConfig(n.cfg).EAPUsers() {
			out = append(out, id+"="+string(pw))
		}
		slices.Sort(out)
		return strings.Join(out, " ")
	}
	if got, want := users(), "alice=file-pw bob=bob-pw"; got != want {
		t.Errorf("IKE's EAP users: %s; want %s (the file's alice)", got, want)
	}
	if err := b.UnloadShared("eap-bob"); err != nil {
		t.Fatal(err)
	}
	if got, want := users(), "alice=file-pw"; got != want {
		t.Errorf("after unloading bob: %s; want %s", got, want)
	}
	if err := b.LoadShared("eap-carol", []byte(`{type: eap, ids: ["carol"], secret: "0x6361726f6c"}`)); err != nil {
		t.Fatal(err)
	}
	parsed := n.loaded.eap
	b.ClearShared()
	if got, want := users(), "alice=file-pw"; got != want {
		t.Errorf("after clear-creds: %s; want %s", got, want)
	}
	for _, s := range parsed.Secrets {
		if strings.Trim(string(s.Secret), "\x00") != "" {
			t.Errorf("secret %v not zeroed after clear-creds", s.IDs)
		}
	}
}
