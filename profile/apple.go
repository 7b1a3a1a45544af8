package profile

import (
	"crypto/sha256"
	"crypto/x509"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/ike"
	"github.com/ipsecd/ipsecd/ike/message"
	"github.com/ipsecd/ipsecd/internal/printable"
)

// Apple's names of the algorithms (Device Management, VPN.IKEv2's
// IKESecurityAssociationParameters and ChildSecurityAssociationParameters).
var (
	appleNames = names{
		"aes128": "AES-128", "aes256": "AES-256", "aes128gcm16": "AES-128-GCM", "aes256gcm16": "AES-256-GCM",
		"chacha20poly1305": "ChaCha20Poly1305",
		"sha256":           "SHA2-256", "sha384": "SHA2-384", "sha512": "SHA2-512",
		"prfsha256": "SHA2-256", "prfsha384": "SHA2-384", "prfsha512": "SHA2-512",
		"modp1024": "2", "modp2048": "14", "ecp256": "19", "ecp384": "20", "x25519": "31",
	}
	appleGroups = map[string]int{"modp1024": 2, "modp2048": 14, "ecp256": 19, "ecp384": 20, "x25519": 31}
)

// Apple returns an Apple configuration profile (.mobileconfig) for o's
// user of o's connection: a com.apple.vpn.managed payload of VPNType
// IKEv2, the gateway's CA as a com.apple.security.root payload, and with
// certificate authentication the user's PKCS#12 (o.P12) as a
// com.apple.security.pkcs12 payload.
func Apple(c *config.IKEConfig, o Options) ([]File, error) {
	g, ikeSuite, espSuite, err := newSingleSuite(c, o, "apple", "Apple's IKEv2 client", appleNames, appleNames)
	if err != nil {
		return nil, err
	}
	fail := func(format string, args ...any) ([]File, error) {
		return nil, fmt.Errorf("apple: connection %s: %s", g.conn.Name, fmt.Sprintf(format, args...))
	}
	remoteID, err := appleIdentity(g.id)
	if err != nil {
		return fail("local.id: %v", err)
	}
	if err := g.serverAuth("Apple's client"); err != nil {
		return fail("%v", err)
	}
	if g.ca != nil && !inSAN(g.conn.Local.Certs[0], remoteID) {
		// Since iOS 13 and macOS 10.15 only a subjectAltName counts.
		return fail("the gateway's identity %s is not a subjectAltName of its certificate, which Apple's client requires (a CN is not enough): issue it with one", remoteID)
	}
	seed := "ipsecd profile apple " + g.conn.Name + " " + g.userText
	ident := "ipsecd." + reverseDNSLabel(g.conn.Name) + "." + reverseDNSLabel(g.userText)

	ikev2 := dict{
		{"RemoteAddress", g.address},
		{"RemoteIdentifier", remoteID},
		{"LocalIdentifier", g.userText},
	}
	var payloads []dict
	auth := g.conn.Remote.Auth
	switch {
	case auth == ike.AuthPSK:
		if g.conn.Local.Auth != ike.AuthPSK {
			return fail("remote.auth psk with local.auth %s: Apple's client authenticates both ends with the shared secret", g.conn.Local.Auth)
		}
		if !utf8.Valid(g.psk) || !printable.IsPrintable(string(g.psk)) {
			return fail("the pre-shared key is not text, and Apple's SharedSecret is")
		}
		ikev2 = append(ikev2, entry{"AuthenticationMethod", "SharedSecret"}, entry{"SharedSecret", string(g.psk)})
	case auth == ike.AuthPubkey || auth == "eap-tls":
		if len(o.P12) == 0 {
			return fail("remote.auth %s: the user authenticates with a certificate; give the user's certificate and key as PKCS#12 (--p12 FILE)", auth)
		}
		if o.P12[0] != 0x30 {
			// PKCS#12 is DER: a SEQUENCE. A PEM file is the usual mistake.
			return fail("--p12: not a PKCS#12 file (DER); openssl pkcs12 -export -legacy makes one Apple's client reads")
		}
		p12UUID := uuid(seed, "pkcs12")
		ikev2 = append(ikev2, entry{"AuthenticationMethod", "Certificate"}, entry{"PayloadCertificateUUID", p12UUID})
		if auth == "eap-tls" {
			ikev2 = append(ikev2, entry{"ExtendedAuthEnabled", 1})
		}
		payloads = append(payloads, dict{
			{"PayloadType", "com.apple.security.pkcs12"},
			{"PayloadIdentifier", ident + ".pkcs12"},
			{"PayloadUUID", p12UUID},
			{"PayloadVersion", 1},
			{"PayloadDisplayName", g.userText},
			{"PayloadCertificateFileName", reverseDNSLabel(g.userText) + ".p12"},
			{"PayloadContent", o.P12},
		})
	case strings.HasPrefix(string(auth), "eap-"):
		// EAP with a user name and password: Apple's EAP-only setting,
		// the gateway still proving itself with its certificate.
		ikev2 = append(ikev2, entry{"AuthenticationMethod", "None"}, entry{"ExtendedAuthEnabled", 1}, entry{"AuthName", g.userText})
	default:
		return fail("remote.auth %s is nothing Apple's IKEv2 client does", auth)
	}
	if g.conn.Remote.Auth != ike.AuthPSK && g.conn.Local.Auth != ike.AuthPubkey {
		return fail("local.auth %s: with remote.auth %s Apple's client wants the gateway's certificate (pubkey)", g.conn.Local.Auth, auth)
	}
	if g.ca != nil {
		// So that the client sends CERTREQ and checks the issuer.
		ikev2 = append(ikev2, entry{"ServerCertificateIssuerCommonName", g.ca.Subject.CommonName})
	}
	childGroup, pfs := espSuite.dh.Name, 1
	if childGroup == "" {
		childGroup, pfs = ikeSuite.dh.Name, 0
	}
	child := dict{{"EncryptionAlgorithm", appleNames[espSuite.encr.Name]}}
	if !espSuite.aead() {
		child = append(child, entry{"IntegrityAlgorithm", appleNames[espSuite.integ.Name]})
	}
	child = append(child, entry{"DiffieHellmanGroup", appleGroups[childGroup]}, entry{"LifeTimeInMinutes", appleMinutes(g.child.RekeyTime)})
	integ := ikeSuite.integ.Name
	if ikeSuite.aead() {
		integ = ikeSuite.prf.Name // Apple takes the PRF from IntegrityAlgorithm
	}
	ikev2 = append(ikev2,
		entry{"DeadPeerDetectionRate", appleDPD(g.conn.DPDDelay)},
		entry{"EnablePFS", pfs},
		entry{"IKESecurityAssociationParameters", dict{
			{"EncryptionAlgorithm", appleNames[ikeSuite.encr.Name]},
			{"IntegrityAlgorithm", appleNames[integ]},
			{"DiffieHellmanGroup", appleGroups[ikeSuite.dh.Name]},
			{"LifeTimeInMinutes", appleMinutes(g.conn.RekeyTime)},
		}},
		entry{"ChildSecurityAssociationParameters", child},
	)
	vpn := dict{
		{"PayloadType", "com.apple.vpn.managed"},
		{"PayloadIdentifier", ident + ".vpn"},
		{"PayloadUUID", uuid(seed, "vpn")},
		{"PayloadVersion", 1},
		{"PayloadDisplayName", "VPN " + g.conn.Name},
		{"UserDefinedName", g.conn.Name},
		{"VPNType", "IKEv2"},
		{"IKEv2", ikev2},
	}
	payloads = append([]dict{vpn}, payloads...)
	if g.ca != nil {
		payloads = append(payloads, dict{
			{"PayloadType", "com.apple.security.root"},
			{"PayloadIdentifier", ident + ".ca"},
			{"PayloadUUID", uuid(seed, "ca")},
			{"PayloadVersion", 1},
			{"PayloadDisplayName", g.ca.Subject.CommonName},
			{"PayloadCertificateFileName", "ca.cer"},
			{"PayloadContent", g.ca.Raw},
		})
	}
	top := dict{
		{"PayloadContent", payloads},
		{"PayloadDisplayName", "VPN " + g.conn.Name + " (" + g.userText + ")"},
		{"PayloadIdentifier", ident},
		{"PayloadType", "Configuration"},
		{"PayloadUUID", uuid(seed, "profile")},
		{"PayloadVersion", 1},
	}
	return []File{{g.conn.Name + ".mobileconfig", marshalPlist(top)}}, nil
}

// appleIdentity returns id as RemoteIdentifier takes it: a name, an
// email address or an IP address. Apple's client sends a DN as an FQDN,
// so a gateway known by its DN cannot be named.
func appleIdentity(id ike.Identity) (string, error) {
	switch id.Type() {
	case message.IDFQDN, message.IDRFC822, message.IDIPv4, message.IDIPv6:
		return id.String(), nil
	}
	return "", fmt.Errorf("the gateway's identity %s is no DNS name, email or IP address, which is all Apple's client can check: set local.id to a name in the certificate's subjectAltName", id)
}

// inSAN reports whether id (a name, email address or IP address) is a
// subjectAltName of cert.
func inSAN(cert *x509.Certificate, id string) bool {
	if a, err := netip.ParseAddr(id); err == nil {
		return slices.ContainsFunc(cert.IPAddresses, func(ip net.IP) bool { b, ok := netip.AddrFromSlice(ip); return ok && b.Unmap() == a })
	}
	return slices.Contains(cert.DNSNames, id) || slices.Contains(cert.EmailAddresses, id)
}

// appleDPD maps the gateway's dpd_delay onto Apple's four rates (None,
// Low: 30 min, Medium: 10 min, High: 1 min): the nearest that is not
// slower.
func appleDPD(d time.Duration) string {
	switch {
	case d <= 0:
		return "None"
	case d <= time.Minute:
		return "High"
	case d <= 10*time.Minute:
		return "Medium"
	}
	return "Low"
}

// appleMinutes is a rekey time in LifeTimeInMinutes, within Apple's 10 to
// 1440 minutes: a client that rekeys earlier than the gateway or later
// (the gateway then rekeys) both work.
func appleMinutes(d time.Duration) int {
	return min(max(int(d/time.Minute), 10), 1440)
}

// uuid returns a UUID (version 5 layout) from seed and what, so that
// writing the same profile again gives the same PayloadUUIDs and a
// device replaces the profile instead of adding a second.
func uuid(seed, what string) string {
	h := sha256.Sum256([]byte(seed + "\x00" + what))
	h[6] = h[6]&0x0f | 0x50
	h[8] = h[8]&0x3f | 0x80
	return fmt.Sprintf("%X-%X-%X-%X-%X", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

// reverseDNSLabel makes s a label of a PayloadIdentifier: letters,
// digits and hyphens.
func reverseDNSLabel(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x80 && (r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return r
		}
		return '-'
	}, s)
}
