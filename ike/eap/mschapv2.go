package eap

import (
	"bytes"
	"crypto/des"
	"crypto/sha1"
	"crypto/subtle"
	"encoding/binary"
	"encoding/hex"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"golang.org/x/crypto/md4"
)

// The computations of MS-CHAPv2 (RFC 2759 §8) and of its keys (RFC 3079
// §3), with the RFCs' names.

// MS-CHAPv2 OpCodes (draft-kamath-pppext-eap-mschapv2-02 §2).
const (
	opChallenge = 1
	opResponse  = 2
	opSuccess   = 3
	opFailure   = 4
)

const (
	challengeLen  = 16
	ntResponseLen = 24
	// responseValueLen is the Response packet's Value: Peer-Challenge
	// (16), reserved (8), NT-Response (24), Flags (1).
	responseValueLen = 49
	// msHeaderLen is what follows the EAP Type in a Challenge, Response,
	// and a server's Success or Failure: OpCode, MS-CHAPv2-ID, MS-Length.
	msHeaderLen = 4
	// authResponseHexLen is the 20-byte authenticator response in hex,
	// after "S=".
	authResponseHexLen = 40
	// MSKLen is the MSK MSCHAPv2 leaves, as strongSwan lays it out.
	MSKLen = 64
)

// ntPasswordHash is MD4 of the password in UTF-16LE (RFC 2759 §8.3). A
// secret that is not UTF-8 is taken byte by byte, as strongSwan does with
// every secret (the two agree on ASCII).
func ntPasswordHash(secret []byte) [16]byte {
	var u []byte
	if utf8.Valid(secret) {
		for _, c := range utf16.Encode([]rune(string(secret))) {
			u = binary.LittleEndian.AppendUint16(u, c)
		}
	} else {
		for _, b := range secret {
			u = append(u, b, 0)
		}
	}
	h := md4.New()
	h.Write(u)
	clear(u)
	var out [16]byte
	h.Sum(out[:0])
	return out
}

// hashNTPasswordHash is RFC 2759 §8.4.
func hashNTPasswordHash(pw [16]byte) [16]byte {
	h := md4.New()
	h.Write(pw[:])
	var out [16]byte
	h.Sum(out[:0])
	return out
}

// userName is the name the challenge hash takes: what follows a
// backslash (a Windows domain), else the whole name.
func userName(name string) string {
	if i := strings.IndexByte(name, '\\'); i >= 0 {
		return name[i+1:]
	}
	return name
}

// challengeHash is RFC 2759 §8.2.
func challengeHash(peer, server []byte, user string) [8]byte {
	h := sha1.New()
	h.Write(peer)
	h.Write(server)
	h.Write([]byte(user))
	var out [8]byte
	copy(out[:], h.Sum(nil))
	return out
}

// challengeResponse is RFC 2759 §8.5: the challenge hash DES-encrypted
// under each 7 bytes of the password hash, zero-padded to 21.
func challengeResponse(ch [8]byte, pw [16]byte) [ntResponseLen]byte {
	var z [21]byte
	copy(z[:], pw[:])
	var out [ntResponseLen]byte
	for i := range 3 {
		k := desKey(z[i*7 : i*7+7])
		c, _ := des.NewCipher(k[:]) // 8 bytes: cannot fail
		c.Encrypt(out[i*8:], ch[:])
		clear(k[:])
	}
	clear(z[:])
	return out
}

// desKey spreads 56 bits over 8 bytes, each with its low (parity) bit
// left 0: DES ignores it.
func desKey(b []byte) [8]byte {
	v := uint64(0)
	for _, x := range b {
		v = v<<8 | uint64(x)
	}
	var k [8]byte
	for i := range 8 {
		k[i] = byte(v>>(56-7*(i+1))) << 1
	}
	return k
}

var (
	magicServer = []byte("Magic server to client signing constant")
	magicPad    = []byte("Pad to make it do more than one iteration")
)

// authenticatorResponse is RFC 2759 §8.7: the 20 bytes the server sends
// as "S=" in hex.
func authenticatorResponse(pwHashHash [16]byte, ntResponse []byte, ch [8]byte) [20]byte {
	h := sha1.New()
	h.Write(pwHashHash[:])
	h.Write(ntResponse)
	h.Write(magicServer)
	d := h.Sum(nil)
	h.Reset()
	h.Write(d)
	h.Write(ch[:])
	h.Write(magicPad)
	var out [20]byte
	copy(out[:], h.Sum(nil))
	return out
}

// authResponseString is "S=" and the response in upper-case hex.
func authResponseString(r [20]byte) string {
	return "S=" + strings.ToUpper(hex.EncodeToString(r[:]))
}

var (
	magicMaster     = []byte("This is the MPPE Master Key")
	magicClientSend = []byte("On the client side, this is the send key; on the server side, it is the receive key.")
	magicClientRecv = []byte("On the client side, this is the receive key; on the server side, it is the send key.")
	shsPad1         = bytes.Repeat([]byte{0x00}, 40)
	shsPad2         = bytes.Repeat([]byte{0xf2}, 40)
)

// msk is the 64-byte MSK as strongSwan's GenerateMSK lays it out: from
// RFC 3079 §3.4's master key, the 16-byte keys of §3.3 with magic 2 (the
// client's send key, which strongSwan calls the receive key: the
// server's) and magic 3, then 32 zero bytes.
func msk(pwHashHash [16]byte, ntResponse []byte) []byte {
	h := sha1.New()
	h.Write(pwHashHash[:])
	h.Write(ntResponse)
	h.Write(magicMaster)
	master := h.Sum(nil)[:16]
	out := make([]byte, 0, MSKLen)
	for _, magic := range [][]byte{magicClientSend, magicClientRecv} {
		h.Reset()
		h.Write(master)
		h.Write(shsPad1)
		h.Write(magic)
		h.Write(shsPad2)
		out = append(out, h.Sum(nil)[:16]...)
	}
	clear(master)
	return append(out, make([]byte, 32)...)
}

// mschapv2 is what one MSCHAPv2 exchange derives from the password.
type mschapv2 struct {
	ntResponse   [ntResponseLen]byte
	authResponse [20]byte
	msk          []byte
}

// derive computes the NT-Response, the authenticator response and the
// MSK of a password hash for the challenges and name; it zeroes pw.
func derive(pw *[16]byte, server, peer []byte, name string) mschapv2 {
	ch := challengeHash(peer, server, userName(name))
	hh := hashNTPasswordHash(*pw)
	var m mschapv2
	m.ntResponse = challengeResponse(ch, *pw)
	m.authResponse = authenticatorResponse(hh, m.ntResponse[:], ch)
	m.msk = msk(hh, m.ntResponse[:])
	clear(pw[:])
	clear(hh[:])
	return m
}

// equal compares in constant time.
func equal(a, b []byte) bool { return subtle.ConstantTimeCompare(a, b) == 1 }

// appendMS appends an MSCHAPv2 packet's header after the EAP Type:
// OpCode, MS-CHAPv2-ID and MS-Length (the EAP Length less 5, the EAP
// header and Type), for a packet of bodyLen bytes after it.
func appendMS(dst []byte, op, msID byte, bodyLen int) []byte {
	dst = append(dst, op, msID)
	return binary.BigEndian.AppendUint16(dst, uint16(msHeaderLen+bodyLen))
}
