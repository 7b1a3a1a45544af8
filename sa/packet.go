package sa

// Headroom is the space a buffer must have before a packet that is sealed
// or opened in place: the ESP header and the largest IV on Seal, and room to
// rebuild an IPv6 header in front of the payload on a transport-mode Open.
const Headroom = 64

// Tailroom is the space a buffer must have after a packet that is sealed in
// place: the largest padding (a cipher block, 16 bytes), the pad length and
// next header bytes, and the largest ICV (32 bytes, hmac(sha512)'s).
const Tailroom = 16 + 2 + 32

// Packet is one packet of a batch. It names Buf[Off:Off+Len]; Buf belongs to
// the caller, and Seal and Open rewrite it in place and move Off and Len.
//
// The zero value is not usable: set Buf, Off and Len (and UDP, for Open).
// A Packet may be reused for the next batch; Seal and Open reset every
// field they report.
type Packet struct {
	Buf []byte
	Off int
	Len int

	// Src, for Open, is where the ESP packet is read from when it is not
	// already at Buf[Off:Off+Len]: a receive buffer holding many packets
	// back to back (UDP GRO), which Open then need not copy out first.
	// The plaintext lands in Buf as if the packet had been opened in place,
	// so Buf[Off:Off+Len] must have room for it. Src must be Len bytes and
	// either lie outside Buf or be exactly Buf[Off:Off+Len]; Open does not
	// write it, and the caller keeps it. Nil means in place. Seal ignores
	// it.
	Src []byte

	// UDP says, for Open, that the packet arrived in UDP (ESP in UDP, RFC
	// 3948) rather than as raw ESP (IP protocol 50). The caller sets it
	// from how the packet came in; Open drops a packet whose encapsulation
	// is not its SA's (XfrmInStateMismatch), so raw ESP cannot reach an SA
	// meant for ESP in UDP or the reverse. Seal ignores it.
	UDP bool

	// Proto is the IP protocol the ESP payload carries (the next header):
	// 4 or 41 in tunnel mode, the transport protocol in transport mode.
	// Set by Open (and by Seal, to the next header it wrote).
	Proto uint8

	// Drop is CounterNone when the packet passed, otherwise the counter it
	// was counted in (DroppedDummy for a next header 59 packet, which is
	// dropped silently). The caller forwards only packets with CounterNone.
	Drop Counter

	// SA is the SA that sealed or opened the packet, or nil.
	SA *SA

	// seq is the packet's full (64-bit) sequence number, kept between the
	// stages of Open.
	seq uint64

	// scratch holds the nonce, AAD and MAC of this packet, so that the
	// crypto interfaces get slices of memory already on the heap and the
	// seal and open paths do not allocate.
	scratch scratch
}

// Data returns the packet's bytes, Buf[Off:Off+Len].
func (p *Packet) Data() []byte { return p.Buf[p.Off : p.Off+p.Len] }

// ESP returns the ESP packet Open reads: Src if set, else Data. It does
// not check bounds; Open does.
func (p *Packet) ESP() []byte {
	if p.Src != nil {
		return p.Src
	}
	return p.Buf[p.Off : p.Off+p.Len]
}
