//go:build linux

package ike

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ipsecd/ipsecd/internal/charontest"
	"github.com/ipsecd/ipsecd/pool"
)

// poolVIPs is VirtualIPs over one address pool, as the daemon's are.
type poolVIPs struct {
	p   *pool.Pool
	dns []netip.Addr
}

func (v *poolVIPs) Acquire(id string, requested netip.Addr, peer netip.AddrPort) (Lease, error) {
	a, err := v.p.Acquire(id, requested, peer)
	return Lease{Addr: a, Identity: id, Pool: v.p.Name(), DNS: v.dns, Domains: []string{"corp.example"}}, err
}

func (v *poolVIPs) Release(l Lease) { v.p.Release(l.Identity, l.Addr) }

// eapGateway loads charon as a road warrior of auth (eap-mschapv2 or
// eap-md5) with EAP identity user and password, asking for a virtual
// IP, against us as the gateway b.test with an ECDSA certificate; it
// returns our config, whose users are alice and carol. mods change
// charon's connection before it is loaded.
func eapGateway(t *testing.T, ch *charon, auth, user, password string, vips *poolVIPs, mods ...func(*charontest.Conn)) *Config {
	t.Helper()
	ca := makeCert(t, testKey(t, "p256", "ca"), certOpts{CN: "ipsecd test CA", CA: true}, nil)
	gw := makeCert(t, testKey(t, "p256", "b"), certOpts{CN: "b.test", DNS: []string{"b.test"}}, ca)
	dir := t.TempDir()
	caFile := writePEM(t, filepath.Join(dir, "ca.pem"), "CERTIFICATE", ca.Cert.Raw)
	conn := charontest.Conn{LocalAddrs: "192.0.2.1", RemoteAddrs: "192.0.2.2", Proposals: "aes256-sha256-x25519",
		Local: charontest.Peer{Auth: auth, ID: "a.test", EAPID: user}, Remote: charontest.Peer{Auth: "pubkey", ID: "b.test", CACerts: caFile},
		VIPs: "0.0.0.0", RemoteTS: "203.0.113.0/24", ESP: "aes128gcm16", EAPSecret: password}
	for _, mod := range mods {
		mod(&conn)
	}
	if err := os.MkdirAll(filepath.Join(dir, "x509ca"), 0o700); err != nil {
		t.Fatal(err)
	}
	ch.LoadDir(conn.String(), dir)
	cfg := peerConfig(t, "aes256-sha256-x25519", "aes128gcm16")
	cfg.PSK = nil
	cfg.LocalID, cfg.RemoteID = MustParseIdentity("b.test"), Identity{}
	cfg.LocalAuth, cfg.RemoteAuth = AuthPubkey, AuthClass(auth)
	cfg.LocalCerts, cfg.PrivateKey = []*x509.Certificate{gw.Cert}, gw.Key
	cfg.Child.LocalTS = []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")}
	cfg.Child.RemoteTS = vips.p.Range().Prefixes() // remote_ts: [dynamic]
	cfg.EAPSecret = func(id string) ([]byte, bool) {
		s, ok := map[string]string{"alice": "alice-mschapv2-pw", "carol": "carol-md5-pw"}[id]
		return []byte(s), ok
	}
	cfg.VirtualIPs = vips
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestCharonEAPGateway: charon 5.9.8 connects to us as a road warrior
// with EAP-MSCHAPv2 and EAP-MD5: we prove ourselves with our certificate,
// check its password over EAP rounds in IKE_AUTH, hand it a virtual IP
// from a pool keyed by its EAP identity, with DNS, and narrow its side of
// the child to that address. charon lists the SA with the virtual IP and
// logged the child keys we derived (so both AUTHs, keyed by the MSK or
// by SK_p for MD5, verified on both sides). A reconnect gets the same
// address back; a wrong password and an exhausted pool fail.
func TestCharonEAPGateway(t *testing.T) {
	ch, d := charonPair(t)
	r, _ := pool.ParseRange("10.3.0.0/24")
	vips := &poolVIPs{p: pool.New("rw", r), dns: []netip.Addr{netip.MustParseAddr("10.3.0.53")}}
	for _, tc := range []struct{ auth, user, password, vip string }{
		{"eap-mschapv2", "alice", "alice-mschapv2-pw", "10.3.0.1"},
		{"eap-md5", "carol", "carol-md5-pw", "10.3.0.2"},
	} {
		t.Run(tc.auth, func(t *testing.T) {
			cfg := eapGateway(t, ch, tc.auth, tc.user, tc.password, vips)
			for round := range 2 { // the second: a reconnect
				from := ch.LogSize()
				d.establish(t, ch, cfg, "responder")
				if d.sa.EAPIdentity() != tc.user || fmt.Sprint(d.sa.VirtualIPs()) != "["+tc.vip+"]" {
					t.Fatalf("round %d: EAP identity %q, virtual IPs %v; want %s and %s", round, d.sa.EAPIdentity(), d.sa.VirtualIPs(), tc.user, tc.vip)
				}
				c := d.sa.Children()[0]
				if got := fmt.Sprint(c.RemoteTS[0].Start, c.RemoteTS[0].End, len(c.RemoteTS)); got != tc.vip+" "+tc.vip+" 1" {
					t.Errorf("the child's remote selectors: %v, want %s alone", c.RemoteTS, tc.vip)
				}
				checkChildKeys(t, ch, from, c)
				list, _ := ch.Swanctl("--list-sas", "--raw")
				if !strings.Contains(list, "local-vips=["+tc.vip+"]") || !strings.Contains(list, "local-ts=["+tc.vip+"/32]") {
					t.Errorf("charon does not list virtual IP %s:\n%s", tc.vip, list)
				}
				log := ch.LogSince(from)
				for _, want := range []string{"INTERNAL_IP4_DNS", "authentication of 'b.test' with ECDSA_WITH_SHA256_DER successful", "IKE_SA test[", "established"} {
					if !strings.Contains(log, want) {
						t.Errorf("charon's log does not say %q", want)
					}
				}
				d.while(t, ch, func() bool { return d.sa.State() == StateDeleted }, "--terminate", "--ike", "test", "--timeout", "10")
				if st := vips.p.Stats(); st.Online != 0 {
					t.Errorf("after the delete: %+v, want no lease online", st)
				}
				if got := fmt.Sprint(d.sa.VirtualIPs()); got != "["+tc.vip+"]" {
					t.Errorf("the deleted SA lists virtual IPs %s, want %s still (ike_down says which went offline)", got, tc.vip)
				}
			}
		})
	}
	t.Run("wrong password", func(t *testing.T) {
		cfg := eapGateway(t, ch, "eap-mschapv2", "alice", "not-alices", vips)
		d.fail(t, ch, cfg, "responder", func() bool { return d.sa != nil && d.sa.State() == StateFailed })
		var ae interface{ Unwrap() error }
		if err := d.sa.Err(); !errors.Is(err, ErrAuthFailed) || !strings.Contains(err.Error(), `EAP-MSCHAPv2 of "alice" failed: wrong password`) || errors.As(err, &ae) && strings.Contains(err.Error(), "not-alices") {
			t.Errorf("error %v, want a failure naming alice and the method", err)
		}
	})
	t.Run("pool exhausted", func(t *testing.T) {
		one, _ := pool.ParseRange("10.3.1.1/32")
		small := &poolVIPs{p: pool.New("one", one)}
		small.p.Acquire("someone", netip.IPv4Unspecified(), netip.AddrPort{})
		cfg := eapGateway(t, ch, "eap-mschapv2", "alice", "alice-mschapv2-pw", small)
		d.reset(cfg)
		rc := make(chan error, 1)
		go func() {
			_, err := ch.Swanctl("--initiate", "--child", "net", "--timeout", "10")
			rc <- err
		}()
		done := func() bool {
			for _, e := range d.errs {
				if errors.Is(e, ErrAddressFailure) {
					return true
				}
			}
			return false
		}
		serr := d.serve(done)
		if err := <-rc; err == nil || serr != nil {
			t.Fatalf("swanctl --initiate: %v; we: %v", err, serr)
		}
		if !strings.Contains(fmt.Sprint(d.errs), "pool one") {
			t.Errorf("errors %v do not name the pool", d.errs)
		}
	})
}

// twoPools is VirtualIPs over an IPv4 and an IPv6 pool, the first of the
// family asked for, as the daemon's pools: [rw4, rw6].
type twoPools struct{ v4, v6 *poolVIPs }

func (v twoPools) Acquire(id string, requested netip.Addr, peer netip.AddrPort) (Lease, error) {
	if requested.Is6() {
		return v.v6.Acquire(id, requested, peer)
	}
	return v.v4.Acquire(id, requested, peer)
}

func (v twoPools) Release(l Lease) {
	if l.Addr.Is6() {
		v.v6.Release(l)
	} else {
		v.v4.Release(l)
	}
}

// TestCharonEAPGatewayIPv6: charon asks for an IPv4 and an IPv6 virtual
// IP (vips = 0.0.0.0, ::) and gets one of each, with both DNS servers;
// its child is narrowed to the two addresses.
func TestCharonEAPGatewayIPv6(t *testing.T) {
	ch, d := charonPair(t)
	r4, _ := pool.ParseRange("10.3.0.0/24")
	r6, _ := pool.ParseRange("fd00:3::/120")
	v4 := &poolVIPs{p: pool.New("rw4", r4), dns: []netip.Addr{netip.MustParseAddr("10.3.0.53")}}
	v6 := &poolVIPs{p: pool.New("rw6", r6), dns: []netip.Addr{netip.MustParseAddr("fd00:3::53")}}
	cfg := eapGateway(t, ch, "eap-mschapv2", "alice", "alice-mschapv2-pw", v4, func(c *charontest.Conn) {
		c.VIPs, c.RemoteTS = "0.0.0.0, ::", "203.0.113.0/24, 2001:db8:cafe::/64"
	})
	cfg.VirtualIPs = twoPools{v4, v6}
	cfg.Child.LocalTS = append(cfg.Child.LocalTS, netip.MustParsePrefix("2001:db8:cafe::/64"))
	cfg.Child.RemoteTS = append(r4.Prefixes(), r6.Prefixes()...)
	from := ch.LogSize()
	d.establish(t, ch, cfg, "responder")
	if got := fmt.Sprint(d.sa.VirtualIPs()); got != "[10.3.0.1 fd00:3::1]" {
		t.Fatalf("virtual IPs %s, want [10.3.0.1 fd00:3::1]", got)
	}
	c := d.sa.Children()[0]
	if len(c.RemoteTS) != 2 || c.RemoteTS[0].Start != c.RemoteTS[0].End || c.RemoteTS[1].Start.String() != "fd00:3::1" || c.RemoteTS[1].Start != c.RemoteTS[1].End {
		t.Errorf("the child's remote selectors: %v, want the two addresses alone", c.RemoteTS)
	}
	checkChildKeys(t, ch, from, c)
	list, _ := ch.Swanctl("--list-sas", "--raw")
	if !strings.Contains(list, "local-vips=[10.3.0.1 fd00:3::1]") {
		t.Errorf("charon does not list both virtual IPs:\n%s", list)
	}
	log := ch.LogSince(from)
	for _, want := range []string{"INTERNAL_IP4_DNS", "INTERNAL_IP6_DNS", "installing new virtual IP fd00:3::1"} {
		if !strings.Contains(log, want) {
			t.Errorf("charon's log does not say %q", want)
		}
	}
}

// TestCharonVirtualIPClient: we are the road warrior of a charon gateway
// (pre-shared keys both ways, as RA-INTEROP's PSK variant): our IKE_AUTH
// asks for an IPv4 address and DNS (vips 0.0.0.0), charon gives the
// first of its pool with its DNS server and domain, and narrows our side
// of the child to that address, whose keys are charon's.
func TestCharonVirtualIPClient(t *testing.T) {
	ch, d := charonPair(t)
	conn := testConn("aes256-sha256-x25519", "aes128gcm16")
	conn.LocalTS, conn.RemoteTS = "198.51.100.0/24", "dynamic"
	conn.Pools = "rw"
	conn.PoolsConf = "pools {\n  rw {\n    addrs = 10.3.0.0/24\n    dns = 10.3.0.53\n  }\n}\n"
	ch.Load(conn.String())
	cfg := peerConfig(t, "aes256-sha256-x25519", "aes128gcm16")
	cfg.VIPs = []netip.Addr{netip.IPv4Unspecified()}
	cfg.Child.LocalTS = []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")}
	cfg.Child.RemoteTS = []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")}
	for round := range 2 { // the second: a reconnect, the same address
		from := ch.LogSize()
		d.establish(t, ch, cfg, "initiator")
		got := d.sa.Configuration()
		if fmt.Sprint(got.VirtualIPs, got.DNS) != "[10.3.0.1] [10.3.0.53]" {
			t.Fatalf("round %d: the gateway gave %+v, want 10.3.0.1 and DNS 10.3.0.53", round, got)
		}
		c := d.sa.Children()[0]
		if len(c.LocalTS) != 1 || c.LocalTS[0].Start.String() != "10.3.0.1" || c.LocalTS[0].End.String() != "10.3.0.1" {
			t.Errorf("our side of the child: %v, want 10.3.0.1 alone", c.LocalTS)
		}
		checkChildKeys(t, ch, from, c)
		if list, _ := ch.Swanctl("--list-sas", "--raw"); !strings.Contains(list, "remote-vips=[10.3.0.1]") {
			t.Errorf("charon does not list our virtual IP:\n%s", list)
		}
		d.ask(t, func() bool { return d.sa.State() == StateDeleted }, d.sa.Delete)
	}
}
