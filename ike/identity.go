package ike

import (
	"bytes"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/ipsecd/ipsecd/ike/message"
	"github.com/ipsecd/ipsecd/internal/printable"
)

// Identity is an IKE identity (RFC 7296 §3.5): an ID type and the data
// of its ID payload. It is parsed once, from the config (ParseIdentity)
// or from the peer's ID payload (IdentityOf), and compared by value
// (Equal): the type and the bytes, so that the FQDN "192.0.2.1" is not
// the address 192.0.2.1, as strongSwan's identification_t compares
// them.
//
// The zero value is %any: no identity, which Matches every other. An
// Identity is immutable and safe for concurrent use.
type Identity struct {
	typ  message.IDType
	data string // the ID payload's data, after its type and reserved bytes
}

// ErrBadIdentity wraps why ParseIdentity refused a string; the config
// reports it under the id field.
var ErrBadIdentity = errors.New("ike: bad identity")

// idPrefixes are strongSwan's type prefixes of identity strings
// ("fqdn:192.0.2.1" is a name, not an address); "#" after one gives the
// data in hex.
var idPrefixes = []struct {
	prefix string
	typ    message.IDType
}{
	{"ipv4:", message.IDIPv4}, {"ipv6:", message.IDIPv6},
	{"rfc822:", message.IDRFC822}, {"email:", message.IDRFC822}, {"userfqdn:", message.IDRFC822},
	{"fqdn:", message.IDFQDN}, {"dns:", message.IDFQDN},
	{"asn1dn:", message.IDDN}, {"keyid:", message.IDKeyID},
}

// ParseIdentity reads an identity as swanctl.conf writes one (strongSwan's
// identification_create_from_string):
//
//   - "" or "%any": any identity (the zero Identity);
//   - an IPv4 or IPv6 address: ID_IPV4_ADDR, ID_IPV6_ADDR;
//   - a distinguished name "C=CH, O=Example, CN=gw" (it has an "="):
//     ID_DER_ASN1_DN;
//   - "@name": ID_FQDN of the name, "@@user@host": ID_RFC822_ADDR,
//     "@#0a1b...": ID_KEY_ID of the hex bytes;
//   - "user@host": ID_RFC822_ADDR; any other text: ID_FQDN;
//   - a type prefix, "fqdn:", "dns:", "email:", "rfc822:", "ipv4:",
//     "ipv6:", "asn1dn:" or "keyid:", forces the type; "#" after it gives
//     the data in hex.
//
// It refuses control characters, a DN with an attribute it does not
// know, and bad hex, with an error wrapping ErrBadIdentity.
func ParseIdentity(s string) (Identity, error) {
	if !printable.IsPrintable(s) {
		return Identity{}, fmt.Errorf(`%w: %s has a control character or is not UTF-8`, ErrBadIdentity, printable.Escape(s))
	}
	if s == "" || s == "%any" {
		return Identity{}, nil
	}
	for _, p := range idPrefixes {
		if len(s) >= len(p.prefix) && strings.EqualFold(s[:len(p.prefix)], p.prefix) {
			return typedIdentity(p.typ, s[len(p.prefix):])
		}
	}
	if strings.Contains(s, "=") {
		der, err := parseDN(s)
		if err != nil {
			return Identity{}, fmt.Errorf("%w: %q: %v", ErrBadIdentity, s, err)
		}
		return Identity{message.IDDN, string(der)}, nil
	}
	if a, err := netip.ParseAddr(s); err == nil && a.Zone() == "" {
		return addrIdentity(a), nil
	}
	if rest, ok := strings.CutPrefix(s, "@"); ok {
		switch {
		case strings.HasPrefix(rest, "#"):
			return typedIdentity(message.IDKeyID, rest)
		case strings.HasPrefix(rest, "@"):
			return typedIdentity(message.IDRFC822, rest[1:])
		}
		return typedIdentity(message.IDFQDN, rest)
	}
	if strings.Contains(s, "@") {
		return Identity{message.IDRFC822, s}, nil
	}
	return Identity{message.IDFQDN, s}, nil
}

// MustParseIdentity is ParseIdentity for identities known to be good
// (tests, examples); it panics on a bad one.
func MustParseIdentity(s string) Identity {
	id, err := ParseIdentity(s)
	if err != nil {
		panic(err)
	}
	return id
}

// typedIdentity is an identity of type t written after a type prefix:
// text, or "#" and hex.
func typedIdentity(t message.IDType, v string) (Identity, error) {
	if h, ok := strings.CutPrefix(v, "#"); ok {
		b, err := hex.DecodeString(strings.ReplaceAll(h, ":", ""))
		if err != nil || len(b) == 0 {
			return Identity{}, fmt.Errorf("%w: %q: want hex after #", ErrBadIdentity, v)
		}
		return NewIdentity(t, b), nil
	}
	switch t {
	case message.IDIPv4, message.IDIPv6:
		a, err := netip.ParseAddr(v)
		if err != nil || a.Is4() != (t == message.IDIPv4) || a.Zone() != "" {
			family := "IPv6"
			if t == message.IDIPv4 {
				family = "IPv4"
			}
			return Identity{}, fmt.Errorf("%w: %q is not an %s address", ErrBadIdentity, v, family)
		}
		return addrIdentity(a), nil
	case message.IDDN:
		der, err := parseDN(v)
		if err != nil {
			return Identity{}, fmt.Errorf("%w: %q: %v", ErrBadIdentity, v, err)
		}
		return Identity{t, string(der)}, nil
	}
	if v == "" {
		return Identity{}, fmt.Errorf("%w: nothing after the type prefix", ErrBadIdentity)
	}
	return Identity{t, v}, nil
}

func addrIdentity(a netip.Addr) Identity {
	if a.Is4() {
		return Identity{message.IDIPv4, string(a.AsSlice())}
	}
	return Identity{message.IDIPv6, string(a.AsSlice())}
}

// NewIdentity returns the identity of type t with data (copied), as an
// ID payload carries it.
func NewIdentity(t message.IDType, data []byte) Identity {
	return Identity{t, string(data)}
}

// IdentityOf returns the identity an ID payload carries (copied), or %any
// for one that is not valid.
func IdentityOf(id message.ID) Identity {
	if !id.IsValid() {
		return Identity{}
	}
	return Identity{id.Type(), string(id.Data())}
}

// IsAny reports whether i is %any (the zero Identity).
func (i Identity) IsAny() bool { return i.typ == 0 }

// Type returns the ID type; 0 for %any.
func (i Identity) Type() message.IDType { return i.typ }

// Data returns a copy of the ID payload's data.
func (i Identity) Data() []byte { return []byte(i.data) }

// payload returns the body of an ID payload that carries i.
func (i Identity) payload() []byte { return message.AppendID(nil, i.typ, []byte(i.data)) }

// Equal reports whether i and o are the same identity: the same type and
// the same data, where names (FQDN, RFC 822) compare without regard to
// ASCII case and DNs attribute by attribute (dnEqual), as strongSwan
// compares them. %any equals only %any.
func (i Identity) Equal(o Identity) bool {
	if i.typ != o.typ {
		return false
	}
	switch i.typ {
	case message.IDFQDN, message.IDRFC822:
		return asciiEqualFold(i.data, o.data)
	case message.IDDN:
		return dnEqual([]byte(i.data), []byte(o.data))
	}
	return i.data == o.data
}

// Matches reports whether the peer's identity is what i asks for: any
// for %any, else an Equal one.
func (i Identity) Matches(peer Identity) bool { return i.IsAny() || i.Equal(peer) }

// asciiEqualFold is strings.EqualFold for ASCII letters only (as
// strcasecmp): "ſ" is not "s" in a name.
func asciiEqualFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for k := 0; k < len(a); k++ {
		x, y := a[k], b[k]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// String writes i as swanctl --list-sas does: an address, a name, a DN
// "C=CH, O=Example, CN=gw", a key id as text (or its bytes in hex,
// colon-separated, when it is not text), "%any". What came from the
// peer may hold anything: control characters are escaped
// (printable.Escape), so that what is shown cannot move a terminal's
// cursor or fake a line.
func (i Identity) String() string {
	switch i.typ {
	case 0:
		return "%any"
	case message.IDIPv4, message.IDIPv6:
		if a, ok := netip.AddrFromSlice([]byte(i.data)); ok && a.Is4() == (i.typ == message.IDIPv4) {
			return a.String()
		}
	case message.IDFQDN, message.IDRFC822:
		return printable.Escape(i.data)
	case message.IDDN:
		return formatDN([]byte(i.data))
	case message.IDKeyID:
		if printable.IsPrintable(i.data) && len(i.data) > 0 {
			return i.data
		}
		return colonHex([]byte(i.data))
	}
	return fmt.Sprintf("(id type %d, %x)", i.typ, i.data)
}

// MarshalText is String, so that JSON and logs show identities as text.
func (i Identity) MarshalText() ([]byte, error) { return []byte(i.String()), nil }

func colonHex(b []byte) string {
	parts := make([]string, len(b))
	for k, c := range b {
		parts[k] = fmt.Sprintf("%02x", c)
	}
	return strings.Join(parts, ":")
}

// dnAttrs are the attribute names a DN string may use, as strongSwan
// writes them.
var dnAttrs = map[string]asn1.ObjectIdentifier{
	"CN": {2, 5, 4, 3}, "SN": {2, 5, 4, 4}, "SERIALNUMBER": {2, 5, 4, 5}, "C": {2, 5, 4, 6},
	"L": {2, 5, 4, 7}, "ST": {2, 5, 4, 8}, "O": {2, 5, 4, 10}, "OU": {2, 5, 4, 11},
	"T": {2, 5, 4, 12}, "E": {1, 2, 840, 113549, 1, 9, 1}, "EMAIL": {1, 2, 840, 113549, 1, 9, 1},
	"DC": {0, 9, 2342, 19200300, 100, 1, 25}, "UID": {0, 9, 2342, 19200300, 100, 1, 1},
}

// parseDN encodes a distinguished name written "C=CH, O=Example, CN=a"
// (strongSwan's order: the first RDN first) as DER.
func parseDN(s string) ([]byte, error) {
	var rdns pkix.RDNSequence
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return nil, fmt.Errorf("%q is not attribute=value", strings.TrimSpace(part))
		}
		oid, known := dnAttrs[strings.ToUpper(strings.TrimSpace(k))]
		if !known {
			return nil, fmt.Errorf("unknown attribute %q in a distinguished name (want one of %s)", strings.TrimSpace(k), strings.Join(slices.Sorted(maps.Keys(dnAttrs)), ", "))
		}
		rdns = append(rdns, pkix.RelativeDistinguishedNameSET{{Type: oid, Value: strings.TrimSpace(v)}})
	}
	return asn1.Marshal(rdns)
}

// dnEqual compares two DER DNs by their attributes, so that one written
// as PrintableString equals one written as UTF8String; strings compare
// without ASCII case (asciiEqualFold), as strongSwan's strncasecmp: with
// Unicode folding, a certificate for "CN=\u212Aarl" (the Kelvin sign)
// would prove "CN=karl".
func dnEqual(a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	var ra, rb pkix.RDNSequence
	if rest, err := asn1.Unmarshal(a, &ra); err != nil || len(rest) != 0 {
		return false
	}
	if rest, err := asn1.Unmarshal(b, &rb); err != nil || len(rest) != 0 || len(ra) != len(rb) {
		return false
	}
	for i := range ra {
		if len(ra[i]) != len(rb[i]) {
			return false
		}
		for j := range ra[i] {
			x, y := ra[i][j], rb[i][j]
			xs, ok1 := x.Value.(string)
			ys, ok2 := y.Value.(string)
			if !x.Type.Equal(y.Type) || !ok1 || !ok2 || !asciiEqualFold(xs, ys) {
				return false
			}
		}
	}
	return true
}

// formatDN writes a DER DN as strongSwan does: "C=CH, O=Example, CN=a",
// the values escaped (printable.Escape).
func formatDN(der []byte) string {
	var rdns pkix.RDNSequence
	if rest, err := asn1.Unmarshal(der, &rdns); err != nil || len(rest) != 0 {
		return fmt.Sprintf("(bad DN %x)", der)
	}
	var parts []string
	for _, rdn := range rdns {
		for _, a := range rdn {
			name := a.Type.String()
			for k, o := range dnAttrs {
				if o.Equal(a.Type) && k != "EMAIL" && k != "SERIALNUMBER" {
					name = k
				}
			}
			parts = append(parts, name+"="+printable.Escape(fmt.Sprint(a.Value)))
		}
	}
	return strings.Join(parts, ", ")
}
