package ike

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"fmt"
	"io"
	"math/big"
	"slices"

	"github.com/ipsecd/ipsecd/ike/message"
)

// Signatures of the AUTH payload: RFC 7427's Digital Signature method
// (14), whose data names its algorithm with an ASN.1 AlgorithmIdentifier,
// and the older methods that fix the algorithm by number: RSA PKCS#1 v1.5
// with SHA-1 (1, RFC 7296) and ECDSA on P-256/P-384/P-521 with SHA-256/
// 384/512 and r|s signatures (9/10/11, RFC 4754). We sign with method 14
// when the peer listed a hash we can use in SIGNATURE_HASH_ALGORITHMS
// (as strongSwan does), else with the classic method of our key; we
// verify all of them.

var (
	oidSHA1WithRSA   = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 1, 5}
	oidSHA256WithRSA = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 1, 11}
	oidSHA384WithRSA = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 1, 12}
	oidSHA512WithRSA = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 1, 13}
	oidRSAPSS        = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 1, 10}
	oidECDSASHA256   = asn1.ObjectIdentifier{1, 2, 840, 10045, 4, 3, 2}
	oidECDSASHA384   = asn1.ObjectIdentifier{1, 2, 840, 10045, 4, 3, 3}
	oidECDSASHA512   = asn1.ObjectIdentifier{1, 2, 840, 10045, 4, 3, 4}
	oidSHA1          = asn1.ObjectIdentifier{1, 3, 14, 3, 2, 26}
	oidSHA256        = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 2, 1}
	oidSHA384        = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 2, 2}
	oidSHA512        = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 2, 3}
	oidMGF1          = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 1, 8}
)

// ourHashes are the hashes we list in SIGNATURE_HASH_ALGORITHMS.
var ourHashes = []uint16{message.HashSHA256, message.HashSHA384, message.HashSHA512}

func hashAlgs() []byte {
	var b []byte
	for _, h := range ourHashes {
		b = append(b, byte(h>>8), byte(h))
	}
	return b
}

// parseHashAlgs decodes SIGNATURE_HASH_ALGORITHMS data.
func parseHashAlgs(d []byte) []uint16 {
	var hs []uint16
	for ; len(d) >= 2; d = d[2:] {
		hs = append(hs, uint16(d[0])<<8|uint16(d[1]))
	}
	return hs
}

func cryptoHash(h uint16) crypto.Hash {
	switch h {
	case message.HashSHA1:
		return crypto.SHA1
	case message.HashSHA256:
		return crypto.SHA256
	case message.HashSHA384:
		return crypto.SHA384
	case message.HashSHA512:
		return crypto.SHA512
	}
	return 0
}

func digest(h crypto.Hash, data []byte) []byte {
	m := h.New()
	m.Write(data)
	return m.Sum(nil)
}

// curveHash is the hash of the classic ECDSA method of a curve, and that
// method.
func curveHash(c elliptic.Curve) (uint16, message.AuthMethod, int) {
	switch c {
	case elliptic.P256():
		return message.HashSHA256, message.AuthECDSA256, 32
	case elliptic.P384():
		return message.HashSHA384, message.AuthECDSA384, 48
	case elliptic.P521():
		return message.HashSHA512, message.AuthECDSA521, 66
	}
	return 0, 0, 0
}

// sign returns the AUTH method and data signing octets with key, with
// RFC 7427 when peerHashes (the peer's SIGNATURE_HASH_ALGORITHMS) has a
// hash we use, else with the classic method of the key.
func sign(key crypto.Signer, octets []byte, peerHashes []uint16, rnd io.Reader) (message.AuthMethod, []byte, error) {
	var want uint16 = message.HashSHA256 // RSA: SHA-256, as strongSwan
	var classic message.AuthMethod = message.AuthRSA
	size := 0
	ec, isEC := key.Public().(*ecdsa.PublicKey)
	if isEC {
		want, classic, size = curveHash(ec.Curve)
		if classic == 0 {
			return 0, nil, errors.New("ike: ECDSA key on an unsupported curve")
		}
	} else if _, ok := key.Public().(*rsa.PublicKey); !ok {
		return 0, nil, fmt.Errorf("ike: unsupported key type %T", key.Public())
	}
	h := uint16(0)
	if slices.Contains(peerHashes, want) {
		h = want
	} else {
		for _, c := range ourHashes {
			if slices.Contains(peerHashes, c) {
				h = c
				break
			}
		}
	}
	if h == 0 {
		// Classic: RSA with SHA-1, ECDSA with its curve's hash, r|s.
		ch := crypto.SHA1
		if isEC {
			ch = cryptoHash(want)
		}
		sig, err := key.Sign(rnd, digest(ch, octets), ch)
		if err != nil {
			return 0, nil, err
		}
		if isEC {
			if sig, err = derToRS(sig, size); err != nil {
				return 0, nil, err
			}
		}
		return classic, sig, nil
	}
	ch := cryptoHash(h)
	sig, err := key.Sign(rnd, digest(ch, octets), ch)
	if err != nil {
		return 0, nil, err
	}
	var oid asn1.ObjectIdentifier
	params := asn1.RawValue{}
	switch {
	case isEC:
		oid = map[uint16]asn1.ObjectIdentifier{message.HashSHA256: oidECDSASHA256, message.HashSHA384: oidECDSASHA384, message.HashSHA512: oidECDSASHA512}[h]
	default:
		oid = map[uint16]asn1.ObjectIdentifier{message.HashSHA256: oidSHA256WithRSA, message.HashSHA384: oidSHA384WithRSA, message.HashSHA512: oidSHA512WithRSA}[h]
		params = asn1.NullRawValue
	}
	ai, err := asn1.Marshal(pkix.AlgorithmIdentifier{Algorithm: oid, Parameters: params})
	if err != nil {
		return 0, nil, err
	}
	data := append([]byte{byte(len(ai))}, ai...)
	return message.AuthDigitalSig, append(data, sig...), nil
}

type ecdsaSig struct{ R, S *big.Int }

func derToRS(der []byte, size int) ([]byte, error) {
	var s ecdsaSig
	if rest, err := asn1.Unmarshal(der, &s); err != nil || len(rest) != 0 {
		return nil, errors.New("ike: bad ECDSA signature from the signer")
	}
	out := make([]byte, 2*size)
	s.R.FillBytes(out[:size])
	s.S.FillBytes(out[size:])
	return out, nil
}

type pssParams struct {
	Hash       pkix.AlgorithmIdentifier `asn1:"optional,explicit,tag:0"`
	MGF        pkix.AlgorithmIdentifier `asn1:"optional,explicit,tag:1"`
	SaltLength int                      `asn1:"optional,explicit,tag:2,default:20"`
	Trailer    int                      `asn1:"optional,explicit,tag:3,default:1"`
}

func hashOfOID(o asn1.ObjectIdentifier) crypto.Hash {
	switch {
	case o.Equal(oidSHA1):
		return crypto.SHA1
	case o.Equal(oidSHA256):
		return crypto.SHA256
	case o.Equal(oidSHA384):
		return crypto.SHA384
	case o.Equal(oidSHA512):
		return crypto.SHA512
	}
	return 0
}

// errBadSignature is wrapped with what did not fit.
var errBadSignature = errors.New("signature does not verify")

// verifySignature checks AUTH data of method m over octets with pub.
func verifySignature(pub crypto.PublicKey, m message.AuthMethod, data, octets []byte) error {
	rsaKey, _ := pub.(*rsa.PublicKey)
	ecKey, _ := pub.(*ecdsa.PublicKey)
	switch m {
	case message.AuthRSA:
		if rsaKey == nil {
			return fmt.Errorf("RSA signature (method 1) from a %T key", pub)
		}
		if rsa.VerifyPKCS1v15(rsaKey, crypto.SHA1, digest(crypto.SHA1, octets), data) != nil {
			return fmt.Errorf("RSA with SHA-1: %w", errBadSignature)
		}
		return nil
	case message.AuthECDSA256, message.AuthECDSA384, message.AuthECDSA521:
		if ecKey == nil {
			return fmt.Errorf("ECDSA signature (method %d) from a %T key", m, pub)
		}
		h, cm, size := curveHash(ecKey.Curve)
		if cm != m || len(data) != 2*size {
			return fmt.Errorf("ECDSA method %d does not fit the key's curve %s", m, ecKey.Curve.Params().Name)
		}
		r, s := new(big.Int).SetBytes(data[:size]), new(big.Int).SetBytes(data[size:])
		if !ecdsa.Verify(ecKey, digest(cryptoHash(h), octets), r, s) {
			return fmt.Errorf("ECDSA: %w", errBadSignature)
		}
		return nil
	case message.AuthDigitalSig:
	default:
		return fmt.Errorf("auth method %d is not a signature we know", m)
	}
	if len(data) < 1 || len(data) < 1+int(data[0]) {
		return errors.New("RFC 7427 AUTH data is truncated")
	}
	var ai pkix.AlgorithmIdentifier
	if rest, err := asn1.Unmarshal(data[1:1+int(data[0])], &ai); err != nil || len(rest) != 0 {
		return errors.New("RFC 7427 AUTH data: bad AlgorithmIdentifier")
	}
	sig := data[1+int(data[0]):]
	o := ai.Algorithm
	var h crypto.Hash
	switch {
	case o.Equal(oidSHA1WithRSA), o.Equal(oidSHA256WithRSA), o.Equal(oidSHA384WithRSA), o.Equal(oidSHA512WithRSA):
		h = map[string]crypto.Hash{oidSHA1WithRSA.String(): crypto.SHA1, oidSHA256WithRSA.String(): crypto.SHA256,
			oidSHA384WithRSA.String(): crypto.SHA384, oidSHA512WithRSA.String(): crypto.SHA512}[o.String()]
		if rsaKey == nil {
			return fmt.Errorf("RSA signature from a %T key", pub)
		}
		if rsa.VerifyPKCS1v15(rsaKey, h, digest(h, octets), sig) != nil {
			return fmt.Errorf("RSA PKCS#1 v1.5 with %v: %w", h, errBadSignature)
		}
		return nil
	case o.Equal(oidRSAPSS):
		var p pssParams
		if rest, err := asn1.Unmarshal(ai.Parameters.FullBytes, &p); err != nil || len(rest) != 0 {
			return errors.New("RSASSA-PSS: bad parameters")
		}
		h = hashOfOID(p.Hash.Algorithm)
		if len(p.Hash.Algorithm) == 0 {
			h = crypto.SHA1
		}
		var mgfHash pkix.AlgorithmIdentifier
		if !p.MGF.Algorithm.Equal(oidMGF1) {
			return errors.New("RSASSA-PSS: mask generation is not MGF1")
		}
		if _, err := asn1.Unmarshal(p.MGF.Parameters.FullBytes, &mgfHash); err != nil || hashOfOID(mgfHash.Algorithm) != h || h == 0 {
			return errors.New("RSASSA-PSS: MGF1 hash differs from the signature's hash, or is unknown")
		}
		if rsaKey == nil {
			return fmt.Errorf("RSASSA-PSS signature from a %T key", pub)
		}
		if rsa.VerifyPSS(rsaKey, h, digest(h, octets), sig, &rsa.PSSOptions{SaltLength: p.SaltLength, Hash: h}) != nil {
			return fmt.Errorf("RSASSA-PSS with %v: %w", h, errBadSignature)
		}
		return nil
	case o.Equal(oidECDSASHA256), o.Equal(oidECDSASHA384), o.Equal(oidECDSASHA512):
		h = map[string]crypto.Hash{oidECDSASHA256.String(): crypto.SHA256, oidECDSASHA384.String(): crypto.SHA384, oidECDSASHA512.String(): crypto.SHA512}[o.String()]
		if ecKey == nil {
			return fmt.Errorf("ECDSA signature from a %T key", pub)
		}
		if !ecdsa.VerifyASN1(ecKey, digest(h, octets), sig) {
			return fmt.Errorf("ECDSA with %v: %w", h, errBadSignature)
		}
		return nil
	}
	return fmt.Errorf("RFC 7427 signature algorithm %v is not supported", o)
}
