package profile

import (
	"bytes"
	"encoding/pem"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/ike"
	"github.com/ipsecd/ipsecd/internal/printable"
)

// Windows' names (Set-VpnConnectionIPsecConfiguration's parameters): the
// IKE SA's EncryptionMethod, IntegrityCheckMethod (also the PRF) and
// DHGroup; ESP's CipherTransformConstants, AuthenticationTransformConstants
// and PfsGroup.
var (
	windowsIKE = names{
		"aes128": "AES128", "aes256": "AES256", "aes128gcm16": "GCMAES128", "aes256gcm16": "GCMAES256",
		"sha256": "SHA256", "sha384": "SHA384", "prfsha256": "SHA256", "prfsha384": "SHA384",
		"modp1024": "Group2", "modp2048": "Group14", "ecp256": "ECP256", "ecp384": "ECP384",
	}
	windowsESP = names{
		"aes128": "AES128", "aes256": "AES256", "aes128gcm16": "GCMAES128", "aes256gcm16": "GCMAES256",
		"sha256":   "SHA256128",
		"modp1024": "PFS2", "modp2048": "PFS2048", "ecp256": "ECP256", "ecp384": "ECP384",
	}
)

// Windows returns a PowerShell script that sets up Windows' built-in
// IKEv2 client for o's user of o's connection: the gateway's CA into the
// machine's root store, Add-VpnConnection (with the routes of a split
// tunnel), and Set-VpnConnectionIPsecConfiguration with the first
// combination of the connection's proposals that Windows can make.
func Windows(c *config.IKEConfig, o Options) ([]File, error) {
	g, ikeSuite, espSuite, err := newSingleSuite(c, o, "windows", "Windows' IKEv2 client", windowsIKE, windowsESP)
	if err != nil {
		return nil, err
	}
	fail := func(format string, args ...any) ([]File, error) {
		return nil, fmt.Errorf("windows: connection %s: %s", g.conn.Name, fmt.Sprintf(format, args...))
	}
	if g.conn.Local.Auth != ike.AuthPubkey {
		return fail("local.auth %s: Windows' IKEv2 client checks the gateway's certificate (pubkey); it takes no pre-shared key", g.conn.Local.Auth)
	}
	if err := g.serverAuth("Windows' client"); err != nil {
		return fail("%v", err)
	}
	if leaf := g.conn.Local.Certs[0]; !slices.Contains(leaf.DNSNames, g.address) && leaf.Subject.CommonName != g.address {
		// Error 13801: Windows looks for the name it connects to among
		// the certificate's DNS names (an IP address too) and its CN.
		return fail("Windows connects to %s, which the gateway's certificate names neither as a DNS subjectAltName nor as its CN (it has %s): give --address one of those, or issue the certificate with DNS:%s", g.address, strings.Join(append(leaf.DNSNames, "CN="+leaf.Subject.CommonName), ", "), g.address)
	}
	var method []string
	switch auth := g.conn.Remote.Auth; auth {
	case ike.AuthPubkey:
		method = []string{"-AuthenticationMethod MachineCertificate"}
	case ike.AuthEAPMSCHAPv2, "eap-radius":
		method = []string{"-AuthenticationMethod Eap", "-RememberCredential"}
	case "eap-tls":
		method = []string{"-AuthenticationMethod Eap", "-EapConfigXmlStream (New-EapConfiguration -Tls -UserCertificate).EapConfigXmlStream"}
	default:
		return fail("remote.auth %s is nothing Windows' IKEv2 client does (it does machine certificates, EAP-MSCHAPv2 and EAP-TLS)", auth)
	}
	for _, s := range []string{g.conn.Name, g.address, g.userText} {
		if !printable.IsPrintable(s) {
			return fail("%s has a control character", printable.Escape(s))
		}
	}
	name := psQuote(g.conn.Name)
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Windows IKEv2 VPN %s to %s for %s, from the gateway's config (ipsecd profile windows).\n", g.conn.Name, g.address, g.userText)
	fmt.Fprintf(&b, "# Run in an elevated PowerShell: the gateway's CA goes into the machine's root store.\n")
	fmt.Fprintf(&b, "$ErrorActionPreference = 'Stop'\n")
	if g.ca != nil {
		fmt.Fprintf(&b, "# The CA that issued the gateway's certificate: %s\n", g.ca.Subject)
		fmt.Fprintf(&b, "$ca = Join-Path $env:TEMP %s\n", psQuote("ipsecd-"+reverseDNSLabel(g.conn.Name)+"-ca.cer"))
		fmt.Fprintf(&b, "Set-Content -Path $ca -Value @'\n%s'@\n", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: g.ca.Raw}))
		fmt.Fprintf(&b, "Import-Certificate -FilePath $ca -CertStoreLocation Cert:\\LocalMachine\\Root | Out-Null\n")
	}
	split := splitRoutes(g.child.LocalTS)
	add := []string{"Add-VpnConnection", "-Name " + name, "-ServerAddress " + psQuote(g.address), "-TunnelType Ikev2", "-EncryptionLevel Required"}
	add = append(add, method...)
	if len(split) > 0 {
		add = append(add, "-SplitTunneling")
	}
	fmt.Fprintf(&b, "%s -Force\n", strings.Join(add, " "))
	for _, p := range split {
		fmt.Fprintf(&b, "Add-VpnConnectionRoute -ConnectionName %s -DestinationPrefix %s\n", name, p)
	}
	pfs := "None"
	if espSuite.dh.Name != "" {
		pfs = windowsESP[espSuite.dh.Name]
	}
	integ, auth := ikeSuite.integ.Name, windowsESP[espSuite.integ.Name]
	if ikeSuite.aead() {
		integ = ikeSuite.prf.Name // Windows takes the PRF from IntegrityCheckMethod
	}
	if espSuite.aead() {
		auth = windowsESP[espSuite.encr.Name] // GCM's authentication is its cipher
	}
	fmt.Fprintf(&b, "Set-VpnConnectionIPsecConfiguration -ConnectionName %s -EncryptionMethod %s -IntegrityCheckMethod %s -DHGroup %s -CipherTransformConstants %s -AuthenticationTransformConstants %s -PfsGroup %s -Force\n",
		name, windowsIKE[ikeSuite.encr.Name], windowsIKE[integ], windowsIKE[ikeSuite.dh.Name], windowsESP[espSuite.encr.Name], auth, pfs)
	return []File{{g.conn.Name + ".ps1", b.Bytes()}}, nil
}

// splitRoutes returns the networks behind the gateway that a split
// tunnel routes, or none when the child carries everything.
func splitRoutes(ts []netip.Prefix) []netip.Prefix {
	for _, p := range ts {
		if p.Bits() == 0 {
			return nil
		}
	}
	return ts
}

// psQuote quotes s as a PowerShell literal string, in which each quote
// is doubled: the ASCII one and the typographic ones that PowerShell
// takes for it too.
func psQuote(s string) string {
	var b strings.Builder
	b.WriteByte('\'')
	for _, r := range s {
		if strings.ContainsRune("'\u2018\u2019\u201a\u201b", r) {
			b.WriteRune(r)
		}
		b.WriteRune(r)
	}
	b.WriteByte('\'')
	return b.String()
}
