package message

// Authentication methods (RFC 7296 §3.8, RFC 4754 §7, RFC 7427 §3).
const (
	AuthRSA        AuthMethod = 1  // RSA PKCS#1 v1.5 signature, SHA-1 (RFC 7296)
	AuthECDSA256   AuthMethod = 9  // ECDSA with SHA-256 on P-256 (RFC 4754)
	AuthECDSA384   AuthMethod = 10 // ECDSA with SHA-384 on P-384
	AuthECDSA521   AuthMethod = 11 // ECDSA with SHA-512 on P-521
	AuthDigitalSig AuthMethod = 14 // Digital Signature (RFC 7427)
)

// Hash algorithms of the SIGNATURE_HASH_ALGORITHMS notify (RFC 7427 §4,
// IANA "IKEv2 Hash Algorithms"): its data is a list of 2-byte identifiers.
const (
	HashSHA1     uint16 = 1
	HashSHA256   uint16 = 2
	HashSHA384   uint16 = 3
	HashSHA512   uint16 = 4
	HashIdentity uint16 = 5
)

// CertX509Signature is the certificate encoding "X.509 Certificate -
// Signature" (RFC 7296 §3.6): a DER certificate in CERT, SHA-1 hashes of
// CA public keys in CERTREQ.
const CertX509Signature = 4

// CertReqHashLen is the size of one CA hash in a CERTREQ: SHA-1 of the
// CA's DER SubjectPublicKeyInfo (RFC 7296 §3.7).
const CertReqHashLen = 20

// Cert is the body of a CERT payload (RFC 7296 §3.6): encoding (1),
// certificate data. CertReq has the same layout (§3.7): encoding (1),
// certification authority (a list of 20-byte hashes for encoding 4).
type Cert []byte

func (c Cert) IsValid() bool   { return len(c) > 1 }
func (c Cert) Encoding() uint8 { return c[0] }
func (c Cert) Data() []byte    { return c[1:] }
func AppendCert(dst []byte, encoding uint8, data []byte) []byte {
	return append(append(dst, encoding), data...)
}

// All returns the bodies of every payload of type t among ps, in order.
func All(ps []Payload, t PayloadType) [][]byte {
	var out [][]byte
	for _, p := range ps {
		if p.Type == t {
			out = append(out, p.Body)
		}
	}
	return out
}
