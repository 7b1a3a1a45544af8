package ike

import (
	"crypto/sha1"
	"encoding/binary"
	"net/netip"
)

// natHash is a NAT_DETECTION_*_IP notify's data (RFC 7296 §2.23):
// SHA-1(SPIi | SPIr | IP | port). SHA-1 is what the RFC fixes here; it
// only detects address rewriting and protects nothing.
func natHash(ispi, rspi uint64, ap netip.AddrPort) []byte {
	h := sha1.New()
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], ispi)
	h.Write(b[:])
	binary.BigEndian.PutUint64(b[:], rspi)
	h.Write(b[:])
	h.Write(ap.Addr().AsSlice())
	binary.BigEndian.PutUint16(b[:], ap.Port())
	h.Write(b[:2])
	return h.Sum(nil)
}
