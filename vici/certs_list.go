package vici

import (
	"crypto/x509"
	"fmt"
	"slices"
	"strings"

	"github.com/ipsecd/ipsecd/ike"
)

// x509Flags are charon's X.509 flags as list-cert writes them, in the
// order it lists them; an end entity's is NONE.
var x509Flags = []string{"NONE", "CA", "AA", "OCSP"}

// certTypes are the certificate types list-certs may ask for: charon's
// names, and swanctl's words for a type with its flag
// (vici_cert_info_from_str). ipsecd holds X.509 certificates alone: the
// others list nothing, as charon's do when it holds none.
var certTypes = map[string][2]string{
	"ANY": {"ANY", "ANY"}, "X509": {"X509", "ANY"}, "X509CA": {"X509", "CA"}, "X509AA": {"X509", "AA"},
	"X509OCSP": {"X509", "OCSP"}, "X509_AC": {"X509_AC", ""}, "X509AC": {"X509_AC", ""},
	"X509_CRL": {"X509_CRL", ""}, "X509CRL": {"X509_CRL", ""}, "OCSP_RESPONSE": {"OCSP_RESPONSE", ""},
	"PUBKEY": {"PUBKEY", ""},
}

// listCerts streams one list-cert event per certificate the daemon
// holds, as charon's: those of load-cert and those of the connections
// (the config file's cert: and cacerts:, and vici's), each once, by flag
// (NONE, CA, AA, OCSP), with type, flag, has_privkey when a private key
// of its public key is loaded, and data, the DER. type, flag and subject
// select, as swanctl --list-certs sends them.
func listCerts(r *request) *Message {
	typ, flag := "ANY", "ANY"
	if s := r.msg.String("type"); s != "" {
		tf, ok := certTypes[strings.ToUpper(s)]
		if !ok {
			return failure(fmt.Sprintf("list-certs: invalid certificate type %q; want X509, X509_AC, X509_CRL, OCSP_RESPONSE, PUBKEY or ANY", s))
		}
		typ, flag = tf[0], tf[1]
	}
	if s := r.msg.String("flag"); s != "" && typ == "X509" && flag == "ANY" {
		flag = strings.ToUpper(s)
		if flag != "ANY" && !slices.Contains(x509Flags, flag) {
			return failure(fmt.Sprintf("list-certs: invalid certificate flag %q; want NONE, CA, AA, OCSP or ANY", s))
		}
	}
	var subject ike.Identity
	if s := r.msg.String("subject"); s != "" {
		id, err := ike.ParseIdentity(s)
		if err != nil {
			return failure(fmt.Sprintf("list-certs: subject: %v", err))
		}
		subject = id
	}
	if typ != "ANY" && typ != "X509" {
		return NewMessage()
	}
	certs, keyIDs := r.heldCerts()
	for _, f := range x509Flags {
		if flag != "ANY" && flag != f {
			continue
		}
		for _, c := range certs {
			if certFlag(c) != f || (!subject.IsAny() && !ike.CertProves(c, subject)) {
				continue
			}
			m := NewMessage().Set("type", "X509").Set("flag", f)
			if id, err := keyID(c.PublicKey); err == nil && keyIDs[id] {
				m.Set("has_privkey", "yes")
			}
			if r.emit("list-cert", m.Set("data", string(c.Raw))) != nil {
				return NewMessage()
			}
		}
	}
	return NewMessage()
}

// certFlag is charon's flag of c, read from c as charon's x509 plugin
// reads it: CA from the basic constraints, OCSP from the OCSP signing
// key usage; ipsecd knows no attribute authorities (AA).
func certFlag(c *x509.Certificate) string {
	switch {
	case c.BasicConstraintsValid && c.IsCA:
		return "CA"
	case slices.Contains(c.ExtKeyUsage, x509.ExtKeyUsageOCSPSigning):
		return "OCSP"
	}
	return "NONE"
}

// heldCerts returns the certificates of load-cert and of the
// connections, each once, and the ids of the private keys held: those
// of load-key and the connections' own.
func (r *request) heldCerts() ([]*x509.Certificate, map[string]bool) {
	var certs []*x509.Certificate
	add := func(cs ...*x509.Certificate) {
		for _, c := range cs {
			if !slices.ContainsFunc(certs, c.Equal) {
				certs = append(certs, c)
			}
		}
	}
	keyIDs := map[string]bool{}
	store := &r.conn.s.creds
	store.mu.Lock()
	add(store.certs...)
	add(store.cas...)
	for _, k := range store.keys {
		keyIDs[k.id] = true
	}
	store.mu.Unlock()
	for _, c := range r.conn.s.backend.Connections() {
		add(c.Local.Certs...)
		add(c.Remote.CACertList...)
		add(c.Remote.Certs...) // pinned
		if c.Local.PrivateKey != nil {
			if id, err := keyID(c.Local.PrivateKey.Public()); err == nil {
				keyIDs[id] = true
			}
		}
	}
	return certs, keyIDs
}
