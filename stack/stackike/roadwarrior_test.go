package stackike

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/internal/looppair"
	"github.com/ipsecd/ipsecd/stack"
)

// TestRoadWarriorFromProgram: a road warrior whose connection the
// program gives (RoadWarrior, no file) logs in to a sidecar gateway with
// EAP-MSCHAPv2 on its own (no Initiate), takes 10.3.0.1 and the DNS
// server, and dials a name that DialContext resolves at that server
// through the tunnel. Its password starts with 0x and is not hex: it
// must reach EAP as the text it is, which the gateway's file can only
// write as the 0x-hex of that text.
func TestRoadWarriorFromProgram(t *testing.T) {
	dir := t.TempDir()
	cert, key := selfSigned(t, dir, "vpn.corp.example")
	ca, err := os.ReadFile(cert)
	if err != nil {
		t.Fatal(err)
	}
	const pw = "0xNot hex, but a pass phrase"
	la, lb := looppair.NATT(t)
	gw, err := New(Config{File: eapGatewayConfig(t, lb, cert, key, `secret: "0x`+hex.EncodeToString([]byte(pw))+`"`)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	serveDNS(t, gw, "intranet.corp.example.", netip.MustParseAddr("10.4.0.1"))

	password := []byte(pw)
	start := time.Now()
	rw, err := New(Config{RoadWarrior: &RoadWarrior{Gateway: lb, GatewayID: "vpn.corp.example", CA: ca,
		User: "alice", Password: password, Local: la, Networks: []netip.Prefix{netip.MustParsePrefix("10.4.0.0/24")}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rw.Close() })
	clear(password) // New made its own copy
	ctx, cancel := context.WithTimeout(context.Background(), settleWait)
	defer cancel()
	vips, err := rw.WaitVirtualIP(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("virtual IP %v, DNS %v, %v after New", vips, rw.DNS(), time.Since(start).Round(time.Millisecond))
	if fmt.Sprint(vips, rw.DNS()) != "[10.3.0.1] [10.4.0.53]" {
		t.Fatalf("virtual IPs %v DNS %v, want 10.3.0.1 and 10.4.0.53 from the gateway's pool", vips, rw.DNS())
	}
	if list, err := rw.List(); err != nil || len(list) != 1 || list[0].Name != RoadWarriorConnection {
		t.Errorf("List: %+v %v, want one IKE SA of connection %q", list, err, RoadWarriorConnection)
	}
	streamFromVIPTo(t, rw, gw, "intranet.corp.example", 1<<20)
}

// TestRoadWarriorRefused: a RoadWarrior that lacks what a login needs is
// refused by New with an error naming the field, as a bad file is.
func TestRoadWarriorRefused(t *testing.T) {
	ca, err := os.ReadFile(func() string { c, _ := selfSigned(t, t.TempDir(), "vpn.corp.example"); return c }())
	if err != nil {
		t.Fatal(err)
	}
	good := func() *RoadWarrior {
		return &RoadWarrior{Gateway: netip.MustParseAddr("192.0.2.1"), GatewayID: "vpn.corp.example", CA: ca,
			User: "alice", Password: []byte("pw"), Local: netip.MustParseAddr("127.0.0.1")}
	}
	for _, tt := range []struct {
		name, want string
		change     func(r *RoadWarrior)
	}{
		{"no gateway", "RoadWarrior.Gateway: missing", func(r *RoadWarrior) { r.Gateway = netip.Addr{} }},
		{"unspecified gateway", "RoadWarrior.Gateway: missing", func(r *RoadWarrior) { r.Gateway = netip.IPv4Unspecified() }},
		{"no gateway id", "RoadWarrior.GatewayID: missing", func(r *RoadWarrior) { r.GatewayID = "" }},
		{"no CA", "RoadWarrior.CA: missing", func(r *RoadWarrior) { r.CA = nil }},
		{"CA not PEM", "RoadWarrior.CA: ", func(r *RoadWarrior) { r.CA = []byte("not a certificate") }},
		{"no user", "RoadWarrior.User: missing", func(r *RoadWarrior) { r.User = "" }},
		{"no password", "RoadWarrior.Password: empty", func(r *RoadWarrior) { r.Password = nil }},
		{"IPv6 local, IPv4 gateway", "RoadWarrior.Local: ::1: not of the Gateway's family (192.0.2.1)", func(r *RoadWarrior) { r.Local = netip.IPv6Loopback() }},
		{"bad proposal", RoadWarriorFile + ":", func(r *RoadWarrior) { r.Proposals = []string{"aes256-nonsense"} }},
		{"user too long", RoadWarriorFile + ":", func(r *RoadWarrior) { r.User = strings.Repeat("a", 300) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := good()
			tt.change(r)
			n, err := New(Config{RoadWarrior: r})
			if err == nil {
				n.Close()
				t.Fatalf("New: no error, want one with %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New: %v, want an error with %q", err, tt.want)
			}
			if strings.HasPrefix(tt.want, "RoadWarrior.") && !errors.Is(err, stack.ErrInvalidConfig) {
				t.Errorf("New: %v does not wrap stack.ErrInvalidConfig", err)
			}
		})
	}
	if _, err := New(Config{RoadWarrior: good(), File: parse(t, "")}); !errors.Is(err, stack.ErrInvalidConfig) {
		t.Errorf("New with File and RoadWarrior: %v, want stack.ErrInvalidConfig", err)
	}
}
