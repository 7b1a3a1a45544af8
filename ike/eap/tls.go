package eap

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/ipsecd/ipsecd/ike/message"
)

// mskLen is the MSK's length (RFC 5216 §2.3, RFC 9190 §2.3: the first
// 64 bytes of 128 of keying material; the other 64 are the EMSK, which
// IKEv2 does not use).
const mskLen = 64

// tlsMSK derives the MSK of a finished handshake: TLS 1.3's exporter
// with label "EXPORTER_EAP_TLS_Key_Material" and context 0x0D (RFC 9190
// §2.3); TLS 1.2's PRF(master, "client EAP encryption", client random |
// server random) (RFC 5216 §2.3), from what keys caught (tls12msk.go).
func tlsMSK(cs tls.ConnectionState, keys *tls12Keys) ([]byte, error) {
	if cs.Version < tls.VersionTLS13 {
		return keys.msk(cs.CipherSuite)
	}
	km, err := cs.ExportKeyingMaterial("EXPORTER_EAP_TLS_Key_Material", []byte{byte(message.EAPTLS)}, 128)
	if err != nil {
		return nil, fmt.Errorf("eap: EAP-TLS MSK: %w", err)
	}
	msk := slices.Clone(km[:mskLen])
	clear(km)
	return msk, nil
}

// certNames returns the names a certificate holds that an EAP identity
// may be: its subject, the subject's common name, DNS names, e-mail
// addresses and URIs.
func certNames(c *x509.Certificate) []string {
	names := []string{c.Subject.String(), c.Subject.CommonName}
	names = append(names, c.DNSNames...)
	names = append(names, c.EmailAddresses...)
	for _, u := range c.URIs {
		names = append(names, u.String())
	}
	return names
}

// certHasIdentity says the certificate names id.
func certHasIdentity(c *x509.Certificate, id string) bool {
	for _, n := range certNames(c) {
		if n != "" && strings.EqualFold(n, id) {
			return true
		}
	}
	return false
}

// tlsSuccessByte is what a TLS 1.3 server sends after its handshake to
// say it sends no more handshake messages (RFC 9190 §2.5).
const tlsSuccessByte = 0x00

// tlsServerRun does the server's handshake and, for TLS 1.3, sends the
// success byte.
func tlsServerRun(c *tls.Conn) error {
	if err := c.Handshake(); err != nil {
		return err
	}
	if c.ConnectionState().Version >= tls.VersionTLS13 {
		_, err := c.Write([]byte{tlsSuccessByte})
		return err
	}
	return nil
}

// tlsClientRun does the client's handshake and, for TLS 1.3, waits for
// the server's success byte.
func tlsClientRun(c *tls.Conn) error {
	if err := c.Handshake(); err != nil {
		return err
	}
	if c.ConnectionState().Version < tls.VersionTLS13 {
		return nil
	}
	var b [1]byte
	if _, err := c.Read(b[:]); err != nil {
		return err
	}
	if b[0] != tlsSuccessByte {
		return fmt.Errorf("eap: TLS 1.3 success indication %#x, want 0", b[0])
	}
	return nil
}

func tlsServerConn(cfg *tls.Config) func(net.Conn) *tls.Conn {
	return func(c net.Conn) *tls.Conn { return tls.Server(c, cfg) }
}

func tlsClientConn(cfg *tls.Config) func(net.Conn) *tls.Conn {
	return func(c net.Conn) *tls.Conn { return tls.Client(c, cfg) }
}
