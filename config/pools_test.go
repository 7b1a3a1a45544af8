package config

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ipsecd/ipsecd/ike"
	"github.com/ipsecd/ipsecd/pool"
)

func raEdit(t *testing.T, old, new string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/ra-good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), old) {
		t.Fatalf("testdata/ra-good.yaml has no %q", old)
	}
	return strings.Replace(string(b), old, new, 1)
}

func TestPoolsParseGood(t *testing.T) {
	c, err := Load(writeConfig(t, raEdit(t, "", "")))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Pools) != 2 {
		t.Fatalf("got %d pools, want 2", len(c.Pools))
	}
	rw, rw6 := c.Pools[0], c.Pools[1]
	if got := fmt.Sprintln(rw.Name, rw.Addrs, rw.Addrs.Size, rw.DNS, rw.SplitInclude, rw.DNSDomains, rw.Line); got != "rw 10.3.0.0/24 254 [10.4.0.53] [10.4.0.0/16] [corp.example] 4\n" {
		t.Errorf("pool rw: got %s", got)
	}
	if got := fmt.Sprintln(rw6.Name, rw6.Addrs.First, rw6.Addrs.Size, rw6.DNS); got != "rw6 fd00:3::10 240 [fd00:4::53]\n" {
		t.Errorf("pool rw6: got %s", got)
	}
	gw, client := c.Connections[0], c.Connections[1]
	if fmt.Sprint(gw.Pools) != "[rw rw6]" || len(gw.VIPs) != 0 || fmt.Sprint(client.VIPs) != "[0.0.0.0 ::]" {
		t.Errorf("pools %v vips %v, client vips %v", gw.Pools, gw.VIPs, client.VIPs)
	}
	ch := gw.Children[0]
	// dynamic: what the pools hand out, exactly.
	if !ch.RemoteDynamic || fmt.Sprint(ch.RemoteTS) != "[10.3.0.1/32 10.3.0.2/31 10.3.0.4/30 10.3.0.8/29 10.3.0.16/28 10.3.0.32/27 10.3.0.64/26 10.3.0.128/26 10.3.0.192/27 10.3.0.224/28 10.3.0.240/29 10.3.0.248/30 10.3.0.252/31 10.3.0.254/32 fd00:3::10/124 fd00:3::20/123 fd00:3::40/122 fd00:3::80/121]" {
		t.Errorf("remote_ts [dynamic]: got %v", ch.RemoteTS)
	}
	if got, want := c.Summary(), "1 interfaces, 0 states, 0 policies, 2 connections, 2 children, 1 secrets, 2 pools"; got != want {
		t.Errorf("Summary() = %q, want %q", got, want)
	}
	if s := c.String(); !strings.Contains(s, "pool rw addrs 10.3.0.0/24 (254 addresses)") || !strings.Contains(s, "pools [rw rw6] vips []") {
		t.Errorf("String() lacks the pools:\n%s", s)
	}
	if s := c.PoolSet(); len(s.Pools()) != 2 || s.Pool("rw6").Range().Size != 240 {
		t.Errorf("PoolSet: %v", s.Pools())
	}
}

func TestPoolsOnly(t *testing.T) {
	c, err := Parse("x.yaml", []byte("pools:\n  - {name: rw, addrs: 10.3.0.0/28}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Pools) != 1 || c.Summary() != "0 interfaces, 0 states, 0 policies, 1 pools" {
		t.Errorf("got %d pools, summary %q", len(c.Pools), c.Summary())
	}
}

func TestPoolsErrors(t *testing.T) {
	for _, tt := range []struct {
		name, old, new string
		want           string // a line of the errors, after "FILE:"
	}{
		{"bad addrs", "addrs: 10.3.0.0/24", "addrs: 10.3.0.300/24", `5: pools[0].addrs: want a prefix (10.3.0.0/24) or a range (10.3.0.10-10.3.0.200), got "10.3.0.300/24"`},
		{"reversed range", `"fd00:3::10-fd00:3::ff"`, `"fd00:3::ff-fd00:3::10"`, `10: pools[1].addrs: "fd00:3::ff-fd00:3::10" ends before it starts`},
		{"missing addrs", "{name: rw6, addrs: \"fd00:3::10-fd00:3::ff\",", "{name: rw6,", "10: pools[1].addrs: missing; want a prefix (10.3.0.0/24) or a range (10.3.0.10-10.3.0.200)"},
		{"overlap", `"fd00:3::10-fd00:3::ff"`, "10.3.0.200-10.3.1.10", "10: pools[1].addrs: 10.3.0.200-10.3.1.10 overlaps pool rw (10.3.0.0/24): two clients could get one address"},
		{"duplicate name", "{name: rw6,", "{name: rw,", `10: pools[1].name: "rw" is already the name of pools[0]`},
		{"bad name", "{name: rw6,", "{name: \"rw 6\",", `10: pools[1].name: "rw 6": want letters, digits, '.', '_' and '-', starting with a letter or digit, at most 64`},
		{"bad dns", "dns: [10.4.0.53]", "dns: [10.3.0.530]", `6: pools[0].dns[0]: want an IP address, got "10.3.0.530"`},
		{"bad domain", "dns_domains: [corp.example]", "dns_domains: [corp..example]", `8: pools[0].dns_domains[0]: "corp..example": label "" is not letters, digits and inner hyphens, of at most 63`},
		{"split host bits", "split_include: [10.4.0.0/16]", "split_include: [10.4.0.1/16]", "7: pools[0].split_include[0]: 10.4.0.1/16 has host bits set; did you mean 10.4.0.0/16?"},
		{"radius", "radius: false", "radius: true", "9: pools[0].radius: true needs eap_radius: (the servers whose Access-Accept assigns the address)"},
		{"unknown pool key", "radius: false", "radios: false", "9: pools[0].radios: unknown field; did you mean radius?"},
		{"unknown pool", "pools: [rw, rw6]", "pools: [rw, rx6]", `15: connections[0].pools[1]: no pool is named "rx6"; did you mean rw6?`},
		{"pool twice", "pools: [rw, rw6]", "pools: [rw, rw]", `15: connections[0].pools[1]: pool "rw" is named twice`},
		{"empty pools", "pools: [rw, rw6]", "pools: []", "15: connections[0].pools: empty; want names of pools"},
		{"dynamic without pools", "    pools: [rw, rw6]\n", "", "18: connections[0].children[0].remote_ts[0]: dynamic stands for the clients' virtual IPs and needs the connection's pools; give pools: [NAME], or write the prefixes"},
		{"dynamic in local_ts", "local_ts: [10.4.0.0/16,", "local_ts: [dynamic,", "19: connections[0].children[0].local_ts[0]: dynamic in local_ts stands for the virtual IPs the gateway gives us and needs the connection's vips; give vips: [0.0.0.0], or write the prefixes"},
		{"bad vip", `vips: [0.0.0.0, "::"]`, "vips: [0.0.0.0, any]", `23: connections[1].vips[1]: want an IP address, got "any"`},
		{"vip twice", `vips: [0.0.0.0, "::"]`, "vips: [0.0.0.0, 0.0.0.0]", "23: connections[1].vips[1]: 0.0.0.0 is given twice"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("ra.yaml", []byte(raEdit(t, tt.old, tt.new)))
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), "ra.yaml:"+tt.want) {
				t.Errorf("got:\n%v\nwant a line:\nra.yaml:%s", err, tt.want)
			}
		})
	}
}

// TestVIPs: a client's vips are asked for, and local_ts dynamic is any
// address of their families.
func TestVIPs(t *testing.T) {
	c, err := Load(writeConfig(t, raEdit(t, "local_ts: [0.0.0.0/0]", "local_ts: [dynamic]")))
	if err != nil {
		t.Fatal(err)
	}
	cn := c.Connections[1]
	ec, _ := c.EngineConfig(cn.Name, "office")
	if fmt.Sprint(ec.VIPs) != "[0.0.0.0 ::]" || fmt.Sprint(cn.Children[0].LocalTS) != "[0.0.0.0/0 ::/0]" || !cn.Children[0].LocalDynamic {
		t.Errorf("vips %v, local_ts %v", ec.VIPs, cn.Children[0].LocalTS)
	}
	if len(c.Warnings) != 0 {
		t.Errorf("warnings: %q", c.Warnings)
	}
}

// raGateway is a remote-access gateway's file: certificate, EAP users,
// a pool; remote is the connection's remote: block.
func raGateway(t *testing.T, remote, secrets string) string {
	t.Helper()
	dir := t.TempDir()
	_, cert, key, _ := pki(t, dir)
	return `interfaces:
  - {name: ipsec1, if_id: 1, addresses: [10.4.0.1/24], routes: [10.3.0.0/24]}
pools:
  - {name: rw, addrs: 10.3.0.0/24, dns: [10.3.0.53]}
connections:
  - name: rw
    proposals: [aes256-sha256-x25519]
    pools: [rw]
    local:  {auth: pubkey, id: gw.example.net, cert: ` + cert + `, key: ` + key + `}
    remote: ` + remote + `
    children:
      - {name: net, if_id: 1, local_ts: [10.4.0.0/24], remote_ts: [dynamic], esp_proposals: [aes128gcm16]}
secrets:
` + secrets
}

// TestEAPGatewayConfig: remote auth eap-mschapv2 or eap-md5 with the
// users' eap secrets becomes the engine's EAP config: EAPSecret finds a
// user's password (a copy, that WipeKeys leaves), eap_id admits one.
func TestEAPGatewayConfig(t *testing.T) {
	users := "  - {type: eap, ids: [alice], secret: alice-pw}\n  - {type: eap, ids: [carol], secret: carol-pw}\n"
	c, err := Parse(filepath.Join(t.TempDir(), "x.yaml"), []byte(raGateway(t, "{auth: eap-mschapv2, eap_id: alice}", users)))
	if err != nil {
		t.Fatal(err)
	}
	ec, err := c.EngineConfig("rw", "net")
	if err != nil {
		t.Fatal(err)
	}
	c.WipeKeys()
	if k, ok := ec.EAPSecret("alice"); ec.RemoteAuth != ike.AuthEAPMSCHAPv2 || ec.RemoteEAPID != "alice" || !ok || string(k) != "alice-pw" {
		t.Errorf("engine config: auth %s, eap_id %q, alice's secret %q %v", ec.RemoteAuth, ec.RemoteEAPID, k, ok)
	}
	if _, ok := ec.EAPSecret("bob"); ok {
		t.Error("bob has a secret")
	}
	for _, tt := range []struct{ remote, secrets, want string }{
		{"{auth: eap-md5}", "  - {ids: [gw.example.net], secret: psk-not-eap}\n", "connections[0].remote.auth: eap-md5, and no item of secrets has type eap: no user could log in"},
		{"{auth: eap-gtc}", users, `connections[0].remote.auth: want psk, pubkey, eap-mschapv2, eap-md5, eap-tls, eap or eap-radius, got "eap-gtc"`},
		{"{auth: pubkey, eap_id: alice, cacerts: [x]}", users, "connections[0].remote.eap_id: only with auth: eap-mschapv2, eap-md5, eap-tls or eap-radius"},
	} {
		_, err := Parse(filepath.Join(t.TempDir(), "x.yaml"), []byte(raGateway(t, tt.remote, tt.secrets)))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("remote %s: %v, want %s", tt.remote, err, tt.want)
		}
	}
	text := strings.Replace(raGateway(t, "{auth: eap-mschapv2}", users), "local:  {auth: pubkey, id: gw.example.net,", "local:  {auth: eap-mschapv2, id: gw.example.net,", 1)
	if _, err := Parse(filepath.Join(t.TempDir(), "x.yaml"), []byte(text)); err == nil || !strings.Contains(err.Error(), "connections[0].local.cert: only with auth: pubkey") {
		t.Errorf("both sides EAP: %v", err)
	}
}

// raClient is a road warrior's config of local (an EAP auth) and
// secrets, against gw.example.net proving itself with a certificate.
func raClient(t *testing.T, local, remote, secrets string) string {
	t.Helper()
	dir := t.TempDir()
	ca, _, _, _ := pki(t, dir)
	if remote == "" {
		remote = "{auth: pubkey, id: gw.example.net, cacerts: [" + ca + "]}"
	}
	return `interfaces:
  - {name: ipsec1, if_id: 1}
connections:
  - name: rw
    proposals: [aes256-sha256-x25519]
    remote_addrs: [192.0.2.1]
    vips: [0.0.0.0]
    local: ` + local + `
    remote: ` + remote + `
    children:
      - {name: net, if_id: 1, local_ts: [dynamic], remote_ts: [10.4.0.0/24], esp_proposals: [aes128gcm16]}
secrets:
` + secrets
}

// TestEAPClientConfig: local auth eap-mschapv2 or eap-md5 with eap_id
// and the eap secret of that identity becomes the engine's EAP client
// config; an id defaults to the eap_id. What is missing is named.
func TestEAPClientConfig(t *testing.T) {
	alice := "  - {type: eap, ids: [alice], secret: alice-pw}\n"
	for _, local := range []string{"{auth: eap-mschapv2, id: alice@example.net, eap_id: alice}", "{auth: eap-md5, eap_id: alice}"} {
		c, err := Parse(filepath.Join(t.TempDir(), "x.yaml"), []byte(raClient(t, local, "", alice)))
		if err != nil {
			t.Fatalf("%s: %v", local, err)
		}
		ec, err := c.EngineConfig("rw", "net")
		if err != nil {
			t.Fatal(err)
		}
		k, ok := ec.EAPSecret(ec.LocalEAPID)
		if ec.LocalEAPID != "alice" || string(k) != "alice-pw" || !ok || ec.LocalID.String() == "" || !ec.LocalAuth.IsEAP() {
			t.Errorf("%s: engine config: auth %s, id %s, eap_id %q, secret %v", local, ec.LocalAuth, ec.LocalID, ec.LocalEAPID, ok)
		}
		if err := ec.Validate(); err != nil {
			t.Errorf("%s: %v", local, err)
		}
	}
	for _, tt := range []struct{ local, remote, secrets, want string }{
		{"{auth: eap-mschapv2, eap_id: bob}", "", alice, `connections[0].local.auth: eap-mschapv2, and no item of secrets of type eap has ids [bob]: no password for EAP identity "bob"`},
		{"{auth: eap-mschapv2, id: bob}", "", alice, `no password for EAP identity "bob"`},
		{"{auth: eap-md5}", "", alice, "connections[0].local.id: missing; auth eap-md5 needs an id (our IDi) or an eap_id"},
		{"{auth: eap-radius, eap_id: alice}", "", alice, "connections[0].local.auth: eap-radius is a gateway's"},
		{"{auth: eap-mschapv2, eap_id: alice}", "{auth: psk, id: gw.example.net}", alice + "  - {ids: [alice, gw.example.net], secret: a-psk}\n", "connections[0].remote.auth: psk: local auth eap-mschapv2 needs remote auth pubkey"},
	} {
		_, err := Parse(filepath.Join(t.TempDir(), "x.yaml"), []byte(raClient(t, tt.local, tt.remote, tt.secrets)))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("local %s: %v, want %s", tt.local, err, tt.want)
		}
	}
}

// TestPoolSetNeverLeasesDNS: a pool whose DNS server lies in its addrs
// never hands that address to a client; the client would take over the
// server's address.
func TestPoolSetNeverLeasesDNS(t *testing.T) {
	c, err := Parse("x.yaml", []byte("pools:\n  - {name: rw, addrs: 10.3.0.0/29, dns: [10.3.0.3, 10.3.0.5, 192.0.2.53]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	set := c.PoolSet()
	var got []string
	for i := range 4 {
		a, _, err := set.Acquire([]string{"rw"}, fmt.Sprint("user", i), netip.IPv4Unspecified(), netip.MustParseAddrPort("198.51.100.1:4500"))
		if err != nil {
			t.Fatalf("Acquire %d: %v", i, err)
		}
		got = append(got, a.String())
	}
	if want := "[10.3.0.1 10.3.0.2 10.3.0.4 10.3.0.6]"; fmt.Sprint(got) != want {
		t.Errorf("leased %v, want %s: the DNS servers 10.3.0.3 and 10.3.0.5 left out", got, want)
	}
	_, _, err = set.Acquire([]string{"rw"}, "user4", netip.IPv4Unspecified(), netip.MustParseAddrPort("198.51.100.1:4500"))
	if !errors.Is(err, pool.ErrExhausted) || !strings.Contains(err.Error(), "all 4 addresses") {
		t.Errorf("a fifth client: %v, want the pool exhausted after its 4 addresses", err)
	}
}

// TestUnreachableDNSWarning: a pool's private DNS server that no child's
// local_ts covers on a connection using the pool is warned of, naming
// the connection's pool and the pool's dns item; one covered, or public
// (reached outside the tunnel), is not.
func TestUnreachableDNSWarning(t *testing.T) {
	for _, tt := range []struct {
		name, dns, localTS string
		want               string // "" for no warning
	}{
		{"in the pool, outside local_ts", "10.3.0.53", "10.4.0.0/24",
			"connections[0].pools[0]: pool rw's DNS server 10.3.0.53 (pools[0].dns[0]) is in no child's local_ts: its clients cannot reach it through the tunnel; give a DNS server behind the gateway, in a local_ts (it is one of the pool's own addrs 10.3.0.0/24, which the pool never hands out)"},
		{"private, outside local_ts", "192.168.1.53", "10.4.0.0/24",
			"connections[0].pools[0]: pool rw's DNS server 192.168.1.53 (pools[0].dns[0]) is in no child's local_ts: its clients cannot reach it through the tunnel; give a DNS server behind the gateway, in a local_ts"},
		{"IPv6 ULA, no IPv6 local_ts", `"fd00:4::53"`, "10.4.0.0/24",
			"connections[0].pools[0]: pool rw's DNS server fd00:4::53 (pools[0].dns[0]) is in no child's local_ts"},
		{"behind the gateway", "10.4.0.53", "10.4.0.0/24", ""},
		{"the gateway's own, in the pool", "10.3.0.1", "10.4.0.0/24, 10.3.0.1/32", ""},
		{"public", "192.0.2.53", "10.4.0.0/24", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			text := strings.NewReplacer("DNS", tt.dns, "LOCALTS", tt.localTS).Replace(`pools:
  - {name: rw, addrs: 10.3.0.0/24, dns: [DNS]}
connections:
  - name: rw
    proposals: [aes256-sha256-x25519]
    pools: [rw]
    local:  {auth: psk, id: vpn.example.net}
    remote: {auth: psk, id: "%any"}
    children:
      - {name: net, if_id: 1, local_ts: [LOCALTS], remote_ts: [dynamic], esp_proposals: [aes128gcm16]}
secrets:
  - {ids: [vpn.example.net], secret: "a long enough test secret"}
interfaces:
  - {name: ipsec1, if_id: 1, addresses: [10.4.0.1/24]}
`)
			c, err := Parse("x.yaml", []byte(text))
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Join(c.Warnings, "\n")
			if tt.want == "" && got != "" || !strings.Contains(got, tt.want) {
				t.Errorf("warnings %q, want %q", got, tt.want)
			}
		})
	}
}
