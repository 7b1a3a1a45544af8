package ike

import (
	"fmt"

	"github.com/ipsecd/ipsecd/ike/proposal"
)

// Keylog lines in the formats of Wireshark's ikev2_decryption_table and
// esp_sa files (Wireshark 4.0 names), for the daemon's debug-only keylog
// option and for tests. They hold keys: write them only where the
// operator asked for them.

// wiresharkIKEEncr names an IKE encryption transform as Wireshark does;
// Wireshark 4.0 has no ChaCha20-Poly1305 for IKEv2.
func wiresharkIKEEncr(a proposal.Alg) (string, bool) {
	switch a.ID {
	case proposal.EncrAESCBC:
		return fmt.Sprintf("AES-CBC-%d [RFC3602]", a.KeyLen), true
	case proposal.EncrAESGCM16:
		return fmt.Sprintf("AES-GCM-%d with 16 octet ICV [RFC5282]", a.KeyLen), true
	}
	return "", false
}

var wiresharkIKEInteg = map[uint16]string{
	proposal.IntegSHA256: "HMAC_SHA2_256_128 [RFC4868]",
	proposal.IntegSHA384: "HMAC_SHA2_384_192 [RFC4868]",
	proposal.IntegSHA512: "HMAC_SHA2_512_256 [RFC4868]",
}

// KeylogIKE returns the SA's line for Wireshark's ikev2_decryption_table,
// and false when Wireshark cannot decrypt its suite.
func (s *SA) KeylogIKE() (string, bool) {
	enc, ok := wiresharkIKEEncr(s.ikeSuite.Encr)
	if !ok {
		return "", false
	}
	integ := "NONE [RFC4306]"
	if s.ikeSuite.Integ.Name != "" {
		integ = wiresharkIKEInteg[s.ikeSuite.Integ.ID]
	}
	return fmt.Sprintf("%016x,%016x,%x,%x,%q,%x,%x,%q", s.ispi, s.rspi, s.keys.EI, s.keys.ER, enc, s.keys.AI, s.keys.AR, integ), true
}

// keylogPrevious keeps the line of the keys an additional key exchange
// is about to replace (Config.Keylog): Wireshark decrypts the
// IKE_INTERMEDIATE exchanges with them, the later messages with the
// last line (one key set per SPI pair: it takes one file at a time).
func (s *SA) keylogPrevious() {
	if !s.cfg.Keylog {
		return
	}
	if line, ok := s.KeylogIKE(); ok {
		s.keylogEarlier = append(s.keylogEarlier, line)
	}
}

// TakeKeylog returns the keylog lines of the key sets that
// IKE_INTERMEDIATE replaced (with Config.Keylog), oldest first, and
// forgets them.
func (s *SA) TakeKeylog() []string {
	l := s.keylogEarlier
	s.keylogEarlier = nil
	return l
}

// KeylogESP returns the child's two lines (inbound, outbound) for
// Wireshark's esp_sa file, and false when Wireshark 4.0 cannot decrypt
// its suite (ChaCha20-Poly1305).
func (c *Child) KeylogESP() ([]string, bool) {
	var enc, auth string
	switch c.Suite.Encr.ID {
	case proposal.EncrAESGCM16:
		enc, auth = "AES-GCM with 16 octet ICV [RFC4106]", "NULL"
	case proposal.EncrAESCBC:
		enc, auth = "AES-CBC [RFC3602]", "HMAC-SHA-256-128 [RFC4868]"
	default:
		return nil, false
	}
	family := "IPv4"
	if c.Local.Addr().Is6() {
		family = "IPv6"
	}
	line := func(src, dst string, spi uint32, k []byte, ik []byte) string {
		ikey := ""
		if len(ik) > 0 {
			ikey = fmt.Sprintf("0x%x", ik)
		}
		return fmt.Sprintf("%q,%q,%q,\"0x%08x\",%q,\"0x%x\",%q,%q", family, src, dst, spi, enc, k, auth, ikey)
	}
	return []string{
		line(c.Remote.Addr().String(), c.Local.Addr().String(), c.InSPI, c.In.Enc, c.In.Integ),
		line(c.Local.Addr().String(), c.Remote.Addr().String(), c.OutSPI, c.Out.Enc, c.Out.Integ),
	}, true
}
