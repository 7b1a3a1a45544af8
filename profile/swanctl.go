package profile

import (
	"bytes"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"net/netip"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/ike"
	"github.com/ipsecd/ipsecd/ike/proposal"
	"github.com/ipsecd/ipsecd/internal/printable"
)

// Swanctl returns a strongSwan client for o's user of o's connection, as
// the files of a swanctl directory (SWANCTL_DIR): swanctl.conf with the
// connection, its child and, with a pre-shared key, its secret; and with
// a certificate, the gateway's CA in x509ca/. The proposals are the
// connection's own, all of them. The user's certificate and key (pubkey,
// eap-tls) or EAP password are the user's to add: the config does not
// hold them.
func Swanctl(c *config.IKEConfig, o Options) ([]File, error) {
	g, err := newGateway(c, o)
	if err != nil {
		return nil, err
	}
	for _, s := range []string{g.conn.Name, g.child.Name} {
		if !isSwanctlName(s) {
			return nil, fmt.Errorf("strongswan: connection %s: %q is no name swanctl.conf takes as a section (letters, digits, - and _)", g.conn.Name, s)
		}
	}
	caFile := g.conn.Name + "-ca.pem"
	var b bytes.Buffer
	fmt.Fprintf(&b, "# strongSwan client of connection %s at %s for %s, from the gateway's config (ipsecd profile strongswan).\n", g.conn.Name, g.address, printable.Escape(g.userText))
	fmt.Fprintf(&b, "connections {\n\t%s {\n\t\tversion = 2\n", g.conn.Name)
	fmt.Fprintf(&b, "\t\tremote_addrs = %s\n", swanQuote(g.address))
	if vips := g.vips(); len(vips) > 0 {
		fmt.Fprintf(&b, "\t\tvips = %s\n", join(vips))
	}
	fmt.Fprintf(&b, "\t\tproposals = %s\n", proposals(g.conn.Proposals))
	if g.conn.RekeyTime > 0 {
		fmt.Fprintf(&b, "\t\trekey_time = %s\n", seconds(g.conn.RekeyTime))
	}
	if g.conn.Encap {
		// The gateway wants ESP in UDP (a gateway without raw ESP).
		fmt.Fprintf(&b, "\t\tencap = yes\n")
	}
	if g.conn.DPDDelay > 0 {
		fmt.Fprintf(&b, "\t\tdpd_delay = %s\n", seconds(g.conn.DPDDelay))
	}
	fmt.Fprintf(&b, "\t\tlocal {\n\t\t\tauth = %s\n", g.conn.Remote.Auth)
	switch auth := string(g.conn.Remote.Auth); {
	case strings.HasPrefix(auth, "eap-") && auth != "eap-tls":
		fmt.Fprintf(&b, "\t\t\teap_id = %s\n", swanQuote(g.userText))
	default:
		fmt.Fprintf(&b, "\t\t\tid = %s\n", swanQuote(g.userText))
	}
	if g.conn.Remote.Auth == ike.AuthPubkey || g.conn.Remote.Auth == "eap-tls" {
		fmt.Fprintf(&b, "\t\t\t# the user's certificate in x509/ and its key in private/ (or ecdsa/, rsa/)\n")
	}
	fmt.Fprintf(&b, "\t\t}\n\t\tremote {\n\t\t\tauth = %s\n\t\t\tid = %s\n", g.conn.Local.Auth, swanQuote(g.id.String()))
	if g.ca != nil {
		fmt.Fprintf(&b, "\t\t\tcacerts = %s\n", caFile)
	}
	fmt.Fprintf(&b, "\t\t}\n\t\tchildren {\n\t\t\t%s {\n", g.child.Name)
	fmt.Fprintf(&b, "\t\t\t\tremote_ts = %s\n", join(g.child.LocalTS))
	if !g.child.RemoteDynamic && len(g.child.RemoteTS) > 0 {
		fmt.Fprintf(&b, "\t\t\t\tlocal_ts = %s\n", join(g.child.RemoteTS))
	}
	fmt.Fprintf(&b, "\t\t\t\tesp_proposals = %s\n", proposals(g.child.ESPProposals))
	if g.child.RekeyTime > 0 {
		fmt.Fprintf(&b, "\t\t\t\trekey_time = %s\n", seconds(g.child.RekeyTime))
	}
	if g.child.Transport {
		fmt.Fprintf(&b, "\t\t\t\tmode = transport\n")
	}
	fmt.Fprintf(&b, "\t\t\t}\n\t\t}\n\t}\n}\n")
	switch {
	case g.psk != nil:
		fmt.Fprintf(&b, "secrets {\n\tike-%s {\n\t\tid-user = %s\n\t\tid-gateway = %s\n\t\tsecret = %s\n\t}\n}\n",
			g.conn.Name, swanQuote(g.userText), swanQuote(g.id.String()), swanSecret(g.psk))
	case strings.HasPrefix(string(g.conn.Remote.Auth), "eap-") && g.conn.Remote.Auth != "eap-tls":
		fmt.Fprintf(&b, "secrets {\n\t# The user's EAP password goes here:\n\t# eap-%s {\n\t# \tid = %s\n\t# \tsecret = \"\"\n\t# }\n}\n", g.conn.Name, swanQuote(g.userText))
	}
	files := []File{{"swanctl.conf", b.Bytes()}}
	if g.ca != nil {
		files = append(files, File{"x509ca/" + caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: g.ca.Raw})})
	}
	return files, nil
}

// proposals writes ps as a swanctl list.
func proposals(ps []proposal.Proposal) string {
	var s []string
	for _, p := range ps {
		s = append(s, p.String())
	}
	return strings.Join(s, ", ")
}

// join writes addresses or prefixes as a swanctl list.
func join[T netip.Addr | netip.Prefix](xs []T) string {
	var s []string
	for _, x := range xs {
		s = append(s, fmt.Sprint(x))
	}
	return strings.Join(s, ", ")
}

// seconds writes d as swanctl's times do.
func seconds(d time.Duration) string { return fmt.Sprintf("%ds", int64(d/time.Second)) }

// isSwanctlName reports whether s can name a section of swanctl.conf.
func isSwanctlName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r == '-' || r == '_' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

// swanQuote quotes s as a string value of strongSwan's settings syntax,
// with \ and " escaped. Control characters cannot be written; identities
// and addresses in the config have none.
func swanQuote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`)
	return `"` + r.Replace(s) + `"`
}

// swanSecret writes a pre-shared key as text when it is printable text,
// else as 0x-hex, which swanctl reads as bytes.
func swanSecret(k config.Key) string {
	if utf8.Valid(k) && printable.IsPrintable(string(k)) {
		return swanQuote(string(k))
	}
	return "0x" + hex.EncodeToString(k)
}
