package vici

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/ipsecd/ipsecd/ike"
)

// creds is vici's credential store: the certificates of load-cert and
// the private keys of load-key, held parsed in memory until clear-creds,
// as charon's vici plugin holds them. Safe for concurrent use.
type creds struct {
	mu    sync.Mutex
	certs []*x509.Certificate
	cas   []*x509.Certificate // loaded with flag CA: trust anchors
	keys  []storedKey
}

// storedKey is a private key and its id as get-keys lists it.
type storedKey struct {
	id  string
	key crypto.Signer
}

// maxCreds bounds what one connection's client can make the daemon
// hold: charon has no bound; thousands of certificates are no use.
const maxCreds = 1024

// loadCert takes an X.509 certificate (type X509, flag NONE or CA; data
// DER or PEM, as swanctl sends a file's bytes). A CA must say so in its
// basic constraints, as charon checks.
func loadCert(r *request) *Message {
	if t := r.msg.String("type"); !strings.EqualFold(t, "X509") {
		return failure(fmt.Sprintf("load-cert: certificate type %q is not supported; ipsecd takes X509 only", t))
	}
	flag := strings.ToUpper(r.msg.String("flag"))
	if flag != "" && flag != "NONE" && flag != "CA" {
		return failure(fmt.Sprintf("load-cert: flag %q is not supported; ipsecd takes NONE and CA", r.msg.String("flag")))
	}
	data := []byte(r.msg.String("data"))
	if len(data) == 0 {
		return failure("load-cert: certificate data missing")
	}
	cert, err := parseCert(data)
	if err != nil {
		return failure("load-cert: parsing X509 certificate failed: " + err.Error())
	}
	if flag == "CA" && !(cert.BasicConstraintsValid && cert.IsCA) {
		return failure("load-cert: ca certificate lacks CA basic constraint, rejected")
	}
	if err := r.conn.s.creds.addCert(cert, flag == "CA"); err != nil {
		return failure("load-cert: " + err.Error())
	}
	r.conn.s.log.WithField("subject", cert.Subject.String()).Info("vici: loaded certificate")
	return success()
}

// parseCert reads one certificate, PEM or DER.
func parseCert(data []byte) (*x509.Certificate, error) {
	if bytes.Contains(data, []byte("-----BEGIN")) {
		cs, err := ike.ParseCertificatesPEM(data)
		if err != nil {
			return nil, err
		}
		return cs[0], nil
	}
	return x509.ParseCertificate(data)
}

// loadKey takes a private key (type rsa, ecdsa or any; data PEM or DER:
// PKCS#1, SEC1 or PKCS#8) and answers its id, as charon 5.9 does.
func loadKey(r *request) *Message {
	t := strings.ToLower(r.msg.String("type"))
	if t == "" {
		return failure("load-key: key type missing")
	}
	if t != "rsa" && t != "ecdsa" && t != "any" {
		return failure(fmt.Sprintf("load-key: key type %q is not supported; ipsecd takes rsa, ecdsa and any", t))
	}
	data := []byte(r.msg.String("data"))
	defer clear(data)
	if len(data) == 0 {
		return failure("load-key: key data missing")
	}
	key, err := parseKey(data)
	if err != nil {
		return failure(fmt.Sprintf("load-key: parsing %s private key failed: %v", t, err))
	}
	_, isRSA := key.(*rsa.PrivateKey)
	if (t == "rsa" && !isRSA) || (t == "ecdsa" && isRSA) {
		return failure(fmt.Sprintf("load-key: parsing %s private key failed: the data holds another type of key", t))
	}
	id, err := keyID(key.Public())
	if err != nil {
		return failure("load-key: " + err.Error())
	}
	if err := r.conn.s.creds.addKey(storedKey{id, key}); err != nil {
		return failure("load-key: " + err.Error())
	}
	r.conn.s.log.WithField("id", id).Info("vici: loaded private key")
	return success().Set("id", id)
}

// parseKey reads an RSA or ECDSA private key, PEM or DER. Errors never
// include key material.
func parseKey(data []byte) (crypto.Signer, error) {
	if bytes.Contains(data, []byte("-----BEGIN")) {
		return ike.ParsePrivateKeyPEM(data)
	}
	for _, typ := range []string{"PRIVATE KEY", "EC PRIVATE KEY", "RSA PRIVATE KEY"} {
		block := pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: data})
		k, err := ike.ParsePrivateKeyPEM(block)
		clear(block)
		if err == nil {
			return k, nil
		}
	}
	return nil, fmt.Errorf("not an RSA or ECDSA key in PKCS#1, SEC1 or PKCS#8 DER")
}

// keyID is charon's key id: the hex SHA-1 of the subjectPublicKey bits
// of the key's subjectPublicKeyInfo (its KEYID_PUBKEY_SHA1, RFC 5280's
// first method of a subject key identifier).
func keyID(pub crypto.PublicKey) (string, error) {
	switch pub.(type) {
	case *rsa.PublicKey, *ecdsa.PublicKey:
	default:
		return "", fmt.Errorf("a %T key; only RSA and ECDSA keys are supported", pub)
	}
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", err
	}
	var spki struct {
		Algorithm pkix.AlgorithmIdentifier
		PublicKey asn1.BitString
	}
	if _, err := asn1.Unmarshal(der, &spki); err != nil {
		return "", err
	}
	sum := sha1.Sum(spki.PublicKey.Bytes)
	return hex.EncodeToString(sum[:]), nil
}

// getKeys answers the ids of the keys loaded over vici.
func getKeys(r *request) *Message {
	return NewMessage().Set("keys", nonNil(r.conn.s.creds.keyIDs()))
}

// unloadKey drops the key of id, as swanctl --load-creds asks for a key
// whose file is gone.
func unloadKey(r *request) *Message {
	id := r.msg.String("id")
	if id == "" {
		return failure("unload-key: key id missing")
	}
	if !r.conn.s.creds.dropKey(id) {
		return failure(fmt.Sprintf("unload-key: no key %s loaded over vici", id))
	}
	return success()
}

func (c *creds) dropKey(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(c.keys)
	c.keys = slices.DeleteFunc(c.keys, func(k storedKey) bool { return k.id == id })
	return len(c.keys) < n
}

func (c *creds) addCert(cert *x509.Certificate, ca bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	list := &c.certs
	if ca {
		list = &c.cas
	}
	if slices.ContainsFunc(*list, func(o *x509.Certificate) bool { return o.Equal(cert) }) {
		return nil // charon keeps one reference to a certificate loaded twice
	}
	if len(c.certs)+len(c.cas) >= maxCreds {
		return fmt.Errorf("%d certificates loaded; clear-creds first", maxCreds)
	}
	*list = append(*list, cert)
	return nil
}

func (c *creds) addKey(k storedKey) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if i := slices.IndexFunc(c.keys, func(o storedKey) bool { return o.id == k.id }); i >= 0 {
		c.keys[i] = k
		return nil
	}
	if len(c.keys) >= maxCreds {
		return fmt.Errorf("%d keys loaded; clear-creds first", maxCreds)
	}
	c.keys = append(c.keys, k)
	return nil
}

func (c *creds) keyIDs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, len(c.keys))
	for i, k := range c.keys {
		out[i] = k.id
	}
	return out
}

// clear drops every certificate and key (Go's keys cannot be zeroed in
// place; they are dropped for the collector).
func (c *creds) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.certs, c.cas, c.keys = nil, nil, nil
}
