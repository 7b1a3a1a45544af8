package vici

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"slices"
	"strings"
)

// A connection's certificates come in load-conn as swanctl sends them:
// local.certs and remote.cacerts hold the bytes of files of x509/ and
// x509ca/ (DER or PEM), not their names, as charon's vici plugin reads
// them. The private key is the one of load-key whose public key is the
// certificate's, as charon finds it in its credential sets. They reach
// config as files in memory (config.ParseMem), so that a connection of
// vici's runs the checks a file's does.

// memDir is where the files in memory of a connection are said to be;
// no file system path is read for them.
const memDir = "vici-creds/"

// connFiles collects the files in memory of one connection.
type connFiles map[string][]byte

// wipe zeroes the files (the key's among them).
func (f connFiles) wipe() {
	for _, b := range f {
		clear(b)
	}
}

// localCerts writes cert: and key: for local.certs: the first
// certificate is ours, the others its chain; the key is the store's
// whose public key is the first certificate's.
func (c *creds) localCerts(b *strings.Builder, files connFiles, blobs []string) error {
	if len(blobs) == 0 {
		return fmt.Errorf("empty")
	}
	var chain []byte
	var own *x509.Certificate
	for i, blob := range blobs {
		cert, err := parseCert([]byte(blob))
		if err != nil {
			return fmt.Errorf("certificate %d: %v", i+1, err)
		}
		if own == nil {
			own = cert
		}
		chain = append(chain, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})...)
	}
	id, err := keyID(own.PublicKey)
	if err != nil {
		return fmt.Errorf("certificate %q: %v", own.Subject, err)
	}
	c.mu.Lock()
	i := slices.IndexFunc(c.keys, func(k storedKey) bool { return k.id == id })
	var der []byte
	if i >= 0 {
		der, err = x509.MarshalPKCS8PrivateKey(c.keys[i].key)
	}
	c.mu.Unlock()
	switch {
	case i < 0:
		return fmt.Errorf("no private key loaded for certificate %q (key id %s); load-key it first", own.Subject, id)
	case err != nil:
		return fmt.Errorf("private key of %q: %v", own.Subject, err)
	}
	files[memDir+"local.crt"] = chain
	files[memDir+"local.key"] = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	clear(der)
	fmt.Fprintf(b, "cert: %s, key: %s", quote(memDir+"local.crt"), quote(memDir+"local.key"))
	return nil
}

// remoteCAs writes cacerts: for remote.cacerts, or, when the connection
// names none, for every CA certificate of load-cert (charon trusts any
// CA in its credential sets).
func (c *creds) remoteCAs(b *strings.Builder, files connFiles, blobs []string) error {
	var cas []*x509.Certificate
	for i, blob := range blobs {
		cert, err := parseCert([]byte(blob))
		if err != nil {
			return fmt.Errorf("certificate %d: %v", i+1, err)
		}
		cas = append(cas, cert)
	}
	if len(blobs) == 0 {
		c.mu.Lock()
		cas = slices.Clone(c.cas)
		c.mu.Unlock()
		if len(cas) == 0 {
			return fmt.Errorf("none given and no CA certificate loaded (load-cert with flag CA)")
		}
	}
	names := make([]string, len(cas))
	for i, ca := range cas {
		name := fmt.Sprintf("%sca%d.crt", memDir, i)
		files[name] = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw})
		names[i] = quote(name)
	}
	fmt.Fprintf(b, "cacerts: [%s]", strings.Join(names, ", "))
	return nil
}

// pinnedCerts writes certs: for remote.certs: the peer's certificates,
// pinned, so that only one of them authenticates it (as charon's, each
// is its own trust anchor; with remote.cacerts it must chain to them too).
func pinnedCerts(b *strings.Builder, files connFiles, blobs []string) error {
	if len(blobs) == 0 {
		return fmt.Errorf("empty")
	}
	names := make([]string, len(blobs))
	for i, blob := range blobs {
		cert, err := parseCert([]byte(blob))
		if err != nil {
			return fmt.Errorf("certificate %d: %v", i+1, err)
		}
		name := fmt.Sprintf("%speer%d.crt", memDir, i)
		files[name] = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})
		names[i] = quote(name)
	}
	fmt.Fprintf(b, "certs: [%s]", strings.Join(names, ", "))
	return nil
}

// localCAs checks local.cacerts: charon picks by them which of its
// certificates to send; ipsecd sends local.certs' first, which must then
// chain to one of them (through the others of local.certs).
func localCAs(certs, cas any) error {
	own, _ := certs.([]string)
	blobs, ok := cas.([]string)
	switch {
	case !ok:
		return fmt.Errorf("want a list of certificates")
	case len(own) == 0:
		return fmt.Errorf("ipsecd picks no certificate of its own by its CA: give local.certs")
	}
	leaf, err := parseCert([]byte(own[0]))
	if err != nil {
		return fmt.Errorf("local.certs: certificate 1: %v", err)
	}
	roots, inter := x509.NewCertPool(), x509.NewCertPool()
	for i, blob := range blobs {
		ca, err := parseCert([]byte(blob))
		if err != nil {
			return fmt.Errorf("certificate %d: %v", i+1, err)
		}
		roots.AddCert(ca)
	}
	for _, blob := range own[1:] {
		if c, err := parseCert([]byte(blob)); err == nil {
			inter.AddCert(c)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return fmt.Errorf("our certificate %q does not chain to them: %v", leaf.Subject, err)
	}
	return nil
}

// sideCerts writes local.certs, remote.cacerts or remote.certs
// (certKey), a list.
func sideCerts(b *strings.Builder, store *creds, files connFiles, certKey string, v any) error {
	blobs, ok := v.([]string)
	if !ok {
		return fmt.Errorf("want a list of certificates")
	}
	switch certKey {
	case "local.certs":
		return store.localCerts(b, files, blobs)
	case "remote.certs":
		return pinnedCerts(b, files, blobs)
	}
	return store.remoteCAs(b, files, blobs)
}
