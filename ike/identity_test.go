package ike

import (
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/ipsecd/ipsecd/ike/message"
	"github.com/ipsecd/ipsecd/internal/printable"
)

// TestParseIdentity: identities as swanctl.conf writes them, with the ID
// type each becomes and how it prints.
func TestParseIdentity(t *testing.T) {
	for _, tt := range []struct {
		in      string
		typ     message.IDType
		printed string
	}{
		{"", 0, "%any"},
		{"%any", 0, "%any"},
		{"192.0.2.1", message.IDIPv4, "192.0.2.1"},
		{"2001:db8::1", message.IDIPv6, "2001:db8::1"},
		{"gw.example.net", message.IDFQDN, "gw.example.net"},
		{"@gw.example.net", message.IDFQDN, "gw.example.net"},
		{"alice@example.net", message.IDRFC822, "alice@example.net"},
		{"@@alice@example.net", message.IDRFC822, "alice@example.net"},
		{"@#0a0b0c", message.IDKeyID, "0a:0b:0c"},
		{"keyid:roadwarrior", message.IDKeyID, "roadwarrior"},
		{"fqdn:192.0.2.1", message.IDFQDN, "192.0.2.1"},
		{"email:alice@example.net", message.IDRFC822, "alice@example.net"},
		{"ipv4:192.0.2.1", message.IDIPv4, "192.0.2.1"},
		{"C=CH, O=Example, CN=gw", message.IDDN, "C=CH, O=Example, CN=gw"},
		{"c=ch,o=Example,cn=gw", message.IDDN, "C=ch, O=Example, CN=gw"},
		{"asn1dn:CN=gw", message.IDDN, "CN=gw"},
	} {
		t.Run(tt.in, func(t *testing.T) {
			id, err := ParseIdentity(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if id.Type() != tt.typ || id.String() != tt.printed {
				t.Errorf("got type %d %q, want type %d %q", id.Type(), id.String(), tt.typ, tt.printed)
			}
		})
	}
}

// TestParseIdentityErrors: what a config may not write as an id.
func TestParseIdentityErrors(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"X=1, CN=gw", `unknown attribute "X"`},
		{"CN=gw, nothing", `"nothing" is not attribute=value`},
		{"gw\x1b[2J.example.net", `gw\x1b[2J.example.net has a control character`},
		{"a\r\nb", `a\x0d\x0ab has a control character`},
		{"@#xyz", "want hex"},
		{"ipv4:2001:db8::1", "not an IPv4 address"},
		{"fqdn:", "nothing after the type prefix"},
	} {
		t.Run(tt.in, func(t *testing.T) {
			_, err := ParseIdentity(tt.in)
			if !errors.Is(err, ErrBadIdentity) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want ErrBadIdentity saying %q", err, tt.want)
			}
		})
	}
}

// TestIdentityEqual: identities compare by type and bytes: the same
// text under two types is two identities. Names ignore ASCII case, DNs
// compare attribute by attribute.
func TestIdentityEqual(t *testing.T) {
	utf8DN, _ := asn1.Marshal(pkix.RDNSequence{{{Type: asn1.ObjectIdentifier{2, 5, 4, 3}, Value: "gw"}}})
	for _, tt := range []struct {
		name string
		a, b Identity
		want bool
	}{
		{"an address and a name of the same text", MustParseIdentity("192.0.2.1"), MustParseIdentity("fqdn:192.0.2.1"), false},
		{"an address and a key id of its bytes", MustParseIdentity("192.0.2.1"), NewIdentity(message.IDKeyID, netip.MustParseAddr("192.0.2.1").AsSlice()), false},
		{"a name and an e-mail address of the same text", MustParseIdentity("a@b.test"), MustParseIdentity("fqdn:a@b.test"), false},
		{"a name and a DN of the same text", NewIdentity(message.IDFQDN, []byte("CN=gw")), MustParseIdentity("CN=gw"), false},
		{"a name in another case", MustParseIdentity("GW.example.net"), MustParseIdentity("gw.EXAMPLE.net"), true},
		{"a DN in another string type and case", MustParseIdentity("cn=GW"), NewIdentity(message.IDDN, utf8DN), true},
		{"an address", MustParseIdentity("2001:db8::1"), MustParseIdentity("2001:DB8:0::1"), true},
		{"%any and %any", Identity{}, MustParseIdentity("%any"), true},
		{"%any and a name", Identity{}, MustParseIdentity("gw"), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.a.Equal(tt.b); got != tt.want {
				t.Errorf("%s (type %d) Equal %s (type %d) = %v, want %v", tt.a, tt.a.Type(), tt.b, tt.b.Type(), got, tt.want)
			}
			if got := tt.b.Equal(tt.a); got != tt.want {
				t.Errorf("not symmetric")
			}
		})
	}
	if !(Identity{}).Matches(MustParseIdentity("gw")) || MustParseIdentity("gw").Matches(MustParseIdentity("fqdn:gw2")) {
		t.Error("Matches: %any should match any, a name only itself")
	}
}

// TestIdentityStringEscapes: a peer's identity prints with its control
// characters escaped, in a name, in a DN's value and in a key id.
func TestIdentityStringEscapes(t *testing.T) {
	const evil = "\x1b[2J\r\nfake"
	dn, _ := asn1.Marshal(pkix.RDNSequence{{{Type: asn1.ObjectIdentifier{2, 5, 4, 3}, Value: evil}}})
	for _, tt := range []struct {
		id   Identity
		want string
	}{
		{NewIdentity(message.IDFQDN, []byte(evil)), `\x1b[2J\x0d\x0afake`},
		{NewIdentity(message.IDRFC822, []byte("a@"+evil)), `a@\x1b[2J\x0d\x0afake`},
		{NewIdentity(message.IDDN, dn), `CN=\x1b[2J\x0d\x0afake`},
		{NewIdentity(message.IDKeyID, []byte(evil)), "1b:5b:32:4a:0d:0a:66:61:6b:65"},
		{NewIdentity(message.IDIPv4, []byte(evil)), "(id type 1, 1b5b324a0d0a66616b65)"},
		{NewIdentity(99, []byte(evil)), "(id type 99, 1b5b324a0d0a66616b65)"},
	} {
		if got := tt.id.String(); got != tt.want {
			t.Errorf("type %d: %q, want %q", tt.id.Type(), got, tt.want)
		}
	}
}

// TestAuthErrorEscapes: an error naming the peer's identity (a peer that
// is not the one configured) names it escaped.
func TestAuthErrorEscapes(t *testing.T) {
	ci, cr := pairConfigs(t, []string{"aes256-sha256-x25519"}, []string{"aes128gcm16"})
	ci.LocalID = NewIdentity(message.IDFQDN, []byte("\x1b[2J\r\nfake"))
	_, _, _, errR := run(t, ci, cr)
	if !errors.Is(errR, ErrAuthFailed) || !printable.IsPrintable(errR.Error()) || !strings.Contains(errR.Error(), `peer is "\x1b[2J\x0d\x0afake", want "a.test"`) {
		t.Fatalf("responder: %v; want ErrAuthFailed naming the peer escaped", errR)
	}
}

// TestInitialContactCertificateIdentity: with a certificate and no local
// id, HasContact is asked about the identity our ID payload carries (the
// certificate's subject), typed, and about the configured peer identity
// as a typed DN, not about the text either was written as.
func TestInitialContactCertificateIdentity(t *testing.T) {
	ci, cr, _ := certPairConfigs(t, "p256")
	// The test CA's certificates name C=CH, O=ipsecd test, CN=...; the
	// peer's is written in another case.
	ci.LocalID, cr.LocalID, cr.RemoteID = Identity{}, Identity{}, Identity{}
	ci.RemoteID = MustParseIdentity("c=ch, o=ipsecd test, cn=B.test")
	var local, remote Identity
	ci.HasContact = func(l, r Identity) bool { local, remote = l, r; return false }
	ini, _, errI, errR := run(t, ci, cr)
	if errI != nil || errR != nil {
		t.Fatal(errI, errR)
	}
	if !local.Equal(NewIdentity(message.IDDN, ci.LocalCerts[0].RawSubject)) || !local.Equal(ini.LocalID()) {
		t.Errorf("HasContact asked about us as %s (type %d), want the certificate's subject DN", local, local.Type())
	}
	if !remote.Equal(ini.PeerID()) || remote.Type() != message.IDDN {
		t.Errorf("HasContact asked about the peer as %s (type %d), want %s as the peer authenticated", remote, remote.Type(), ini.PeerID())
	}
}

// TestIdentityEqualFoldsASCIIOnly: names and DN values ignore ASCII case
// only, as strongSwan's strcasecmp: the Kelvin sign is not a "k", the
// long s not an "s" (Unicode folding made "CN=\u212Aarl" the DN "CN=karl").
func TestIdentityEqualFoldsASCIIOnly(t *testing.T) {
	kelvinDN, _ := asn1.Marshal(pkix.RDNSequence{{{Type: asn1.ObjectIdentifier{2, 5, 4, 3}, Value: "\u212Aarl"}}})
	for _, tt := range []struct {
		name string
		a, b Identity
	}{
		{"DN", MustParseIdentity("CN=karl"), NewIdentity(message.IDDN, kelvinDN)},
		{"FQDN", MustParseIdentity("fqdn:staff.test"), NewIdentity(message.IDFQDN, []byte("\u017Ftaff.test"))},
	} {
		if tt.a.Equal(tt.b) || tt.b.Equal(tt.a) {
			t.Errorf("%s: %s Equal %s", tt.name, tt.a, tt.b)
		}
	}
}
