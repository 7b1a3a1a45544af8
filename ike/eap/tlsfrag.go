package eap

import (
	"encoding/binary"
)

// EAP-TLS flags (RFC 5216 §3.1).
const (
	tlsFlagLength = 0x80 // L: a 4-byte TLS Message Length follows
	tlsFlagMore   = 0x40 // M: more fragments follow
	tlsFlagStart  = 0x20 // S: EAP-TLS Start
)

// TLSFragmentSize is the most TLS data one EAP-TLS packet carries, as
// strongSwan's eap-tls (charon.plugins.eap-tls.fragment_size 1024): it
// keeps IKE_AUTH messages under a path MTU with room for IKE's headers.
const TLSFragmentSize = 1024

// maxTLSMessage bounds a reassembled message (strongSwan bounds one by
// max_message_count of fragments; 64 KiB holds any certificate chain a
// gateway should accept).
const maxTLSMessage = 1 << 16

// tlsFrag reassembles the TLS messages received and fragments the ones
// sent.
type tlsFrag struct {
	reasm   []byte
	total   int  // the L announced, 0 if none
	partial bool // fragments came, the last not yet
	send    []byte
	sent    bool // the first fragment of send went
}

// receive takes one EAP-TLS Type-Data (flags, [length], data). It
// returns the whole message once the last fragment came, else nil with
// ack true: the fragment is to be acknowledged with an empty packet.
func (f *tlsFrag) receive(d []byte) (msg []byte, ack bool, err error) {
	if len(d) < 1 {
		return nil, false, protocolError("EAP-TLS packet without flags")
	}
	flags := d[0]
	d = d[1:]
	if flags&tlsFlagLength != 0 {
		if len(d) < 4 {
			return nil, false, protocolError("EAP-TLS length flag without a length")
		}
		l := int(binary.BigEndian.Uint32(d))
		d = d[4:]
		if l > maxTLSMessage || l == 0 {
			return nil, false, protocolError("EAP-TLS message of %d bytes; want 1..%d", l, maxTLSMessage)
		}
		if f.partial && l != f.total {
			return nil, false, protocolError("EAP-TLS length %d changed to %d", f.total, l)
		}
		f.total = l
	}
	if len(d) == 0 {
		return nil, false, protocolError("EAP-TLS fragment without data")
	}
	if len(f.reasm)+len(d) > maxTLSMessage || (f.total != 0 && len(f.reasm)+len(d) > f.total) {
		return nil, false, protocolError("EAP-TLS fragments exceed the message length")
	}
	f.reasm = append(f.reasm, d...)
	if flags&tlsFlagMore != 0 {
		f.partial = true
		return nil, true, nil
	}
	if f.total != 0 && len(f.reasm) != f.total {
		return nil, false, protocolError("EAP-TLS message of %d bytes, %d announced", len(f.reasm), f.total)
	}
	msg = f.reasm
	f.reasm, f.total, f.partial = nil, 0, false
	return msg, false, nil
}

// next returns the Type-Data of the next fragment of what is to send:
// the first with L (and M if more follow), the others with M but the
// last.
func (f *tlsFrag) next() []byte {
	n := min(len(f.send), TLSFragmentSize)
	var flags byte
	var d []byte
	if n < len(f.send) {
		flags |= tlsFlagMore
	}
	if !f.sent && n < len(f.send) {
		flags |= tlsFlagLength
		d = binary.BigEndian.AppendUint32([]byte{flags}, uint32(len(f.send)))
	} else {
		d = []byte{flags}
	}
	d = append(d, f.send[:n]...)
	f.send = f.send[n:]
	f.sent = len(f.send) > 0
	return d
}

// sending says a message is partly sent: the packet received must be an
// empty acknowledgement.
func (f *tlsFrag) sending() bool { return len(f.send) > 0 }

// isAck says d is an empty EAP-TLS packet (flags without L, M or S).
func isAck(d []byte) bool { return len(d) == 1 && d[0]&(tlsFlagLength|tlsFlagMore|tlsFlagStart) == 0 }
