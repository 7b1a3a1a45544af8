package ike

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
)

// ParseCertificatesPEM returns the certificates of every CERTIFICATE block
// in b, in order (a certificate and its chain, or a set of CAs).
func ParseCertificatesPEM(b []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d: %w", len(certs)+1, err)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, errors.New("no PEM CERTIFICATE block")
	}
	return certs, nil
}

// LoadCertificates reads ParseCertificatesPEM's input from files, in
// order; an error names the file.
func LoadCertificates(files ...string) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		cs, err := ParseCertificatesPEM(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		certs = append(certs, cs...)
	}
	return certs, nil
}

// ParsePrivateKeyPEM returns the RSA or ECDSA key of the first private key
// block in b, written as PKCS#1 (RSA PRIVATE KEY), SEC1 (EC PRIVATE KEY)
// or PKCS#8 (PRIVATE KEY), as strongSwan's pki and openssl write them.
// Encrypted keys are refused. Errors never include key material.
func ParsePrivateKeyPEM(b []byte) (crypto.Signer, error) {
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return nil, errors.New("no PEM private key block (RSA PRIVATE KEY, EC PRIVATE KEY or PRIVATE KEY)")
		}
		if _, ok := blk.Headers["DEK-Info"]; ok {
			return nil, fmt.Errorf("%s is encrypted; give it unencrypted", blk.Type)
		}
		var key any
		var err error
		switch blk.Type {
		case "RSA PRIVATE KEY":
			key, err = x509.ParsePKCS1PrivateKey(blk.Bytes)
		case "EC PRIVATE KEY":
			key, err = x509.ParseECPrivateKey(blk.Bytes)
		case "PRIVATE KEY":
			key, err = x509.ParsePKCS8PrivateKey(blk.Bytes)
		case "ENCRYPTED PRIVATE KEY":
			return nil, errors.New("ENCRYPTED PRIVATE KEY: give the key unencrypted")
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", blk.Type, err)
		}
		switch k := key.(type) {
		case *rsa.PrivateKey:
			return k, nil
		case *ecdsa.PrivateKey:
			return k, nil
		}
		return nil, fmt.Errorf("%s: a %T; only RSA and ECDSA keys are supported", blk.Type, key)
	}
}

// LoadPrivateKey reads ParsePrivateKeyPEM's input from file.
func LoadPrivateKey(file string) (crypto.Signer, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	k, err := ParsePrivateKeyPEM(b)
	clear(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return k, nil
}
