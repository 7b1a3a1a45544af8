package vici

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// MaxSegment is the longest segment (a packet) either side may send:
// 512 KiB, strongSwan's limit (README.md, "Transport protocol").
const MaxSegment = 512 << 10

// PacketType is a packet's first byte.
type PacketType uint8

// The packet types (README.md, "Packet layer").
const (
	CmdRequest      PacketType = 0 // named, with a message
	CmdResponse     PacketType = 1 // with a message
	CmdUnknown      PacketType = 2 // the command has no handler
	EventRegister   PacketType = 3 // named
	EventUnregister PacketType = 4 // named
	EventConfirm    PacketType = 5 // (un)registration done
	EventUnknown    PacketType = 6 // no such event
	Event           PacketType = 7 // named, with a message
)

var packetNames = [...]string{"CMD_REQUEST", "CMD_RESPONSE", "CMD_UNKNOWN", "EVENT_REGISTER", "EVENT_UNREGISTER",
	"EVENT_CONFIRM", "EVENT_UNKNOWN", "EVENT"}

func (t PacketType) String() string {
	if int(t) < len(packetNames) {
		return packetNames[t]
	}
	return fmt.Sprintf("packet type %d", uint8(t))
}

// named reports whether packets of type t carry a name; hasMessage
// whether they carry a message.
func (t PacketType) named() bool {
	return t == CmdRequest || t == EventRegister || t == EventUnregister || t == Event
}
func (t PacketType) hasMessage() bool { return t == CmdRequest || t == CmdResponse || t == Event }

// Packet is one packet: its type, the name of a named type, and the
// message of a type that has one (nil for the others; an empty message
// when a type that has one carried none).
type Packet struct {
	Type    PacketType
	Name    string
	Message *Message
}

// AppendBinary appends p's encoding (without the segment's length) to b.
func (p *Packet) AppendBinary(b []byte) ([]byte, error) {
	if p.Type > Event {
		return b, fmt.Errorf("vici: unknown %v", p.Type)
	}
	b = append(b, byte(p.Type))
	var err error
	if p.Type.named() {
		if p.Name == "" {
			return b, fmt.Errorf("vici: %v without a name", p.Type)
		}
		if b, err = appendNameOnly(b, p.Name); err != nil {
			return b, err
		}
	}
	if p.Type.hasMessage() && p.Message != nil {
		return p.Message.AppendBinary(b)
	}
	return b, nil
}

func appendNameOnly(b []byte, name string) ([]byte, error) {
	if len(name) > MaxNameLen {
		return b, fmt.Errorf("vici: name %.20q... is %d bytes long; at most %d", name, len(name), MaxNameLen)
	}
	b = append(b, byte(len(name)))
	return append(b, name...), nil
}

// ParsePacket decodes a segment's packet. It fails, wrapping
// ErrMalformed, on an empty segment, an unknown type, a missing or
// truncated name, bytes after a packet that has no message, or a
// malformed message.
func ParsePacket(b []byte) (*Packet, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("%w packet: empty segment", ErrMalformed)
	}
	p := &Packet{Type: PacketType(b[0])}
	if p.Type > Event {
		return nil, fmt.Errorf("%w packet: unknown type %d", ErrMalformed, b[0])
	}
	rest := b[1:]
	if p.Type.named() {
		if len(rest) == 0 {
			return nil, fmt.Errorf("%w packet: %v's name missing", ErrMalformed, p.Type)
		}
		// The length as an int: 1+rest[0] in bytes wraps at 255.
		n := int(rest[0])
		if len(rest) < 1+n {
			return nil, fmt.Errorf("%w packet: %v's name of %d bytes truncated", ErrMalformed, p.Type, n)
		}
		if n == 0 {
			return nil, fmt.Errorf("%w packet: %v with an empty name", ErrMalformed, p.Type)
		}
		p.Name = string(rest[1 : 1+n])
		rest = rest[1+n:]
	}
	if !p.Type.hasMessage() {
		if len(rest) != 0 {
			return nil, fmt.Errorf("%w packet: %d bytes after %v, which carries no message", ErrMalformed, len(rest), p.Type)
		}
		return p, nil
	}
	m, err := ParseMessage(rest)
	if err != nil {
		return nil, fmt.Errorf("%v %q: %w", p.Type, p.Name, err)
	}
	p.Message = m
	return p, nil
}

// ErrTooLong is the error of a segment longer than MaxSegment (read or
// written): the connection cannot be resynchronised and is closed.
var ErrTooLong = errors.New("vici: segment longer than 512 KiB")

// ReadSegment reads one segment (its 4-byte length and data) from r into
// buf, grown as needed, and returns the data. A length over MaxSegment
// fails with ErrTooLong before anything more is read.
func ReadSegment(r io.Reader, buf []byte) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return buf[:0], err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > MaxSegment {
		return buf[:0], fmt.Errorf("%w: %d bytes", ErrTooLong, n)
	}
	if cap(buf) < int(n) {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(r, buf); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return buf[:0], err
	}
	return buf, nil
}

// EncodeSegment returns p as a segment: its length, then the packet. It
// fails on a packet longer than MaxSegment or one AppendBinary refuses.
func EncodeSegment(p *Packet) ([]byte, error) {
	b, err := p.AppendBinary(make([]byte, 4, 256))
	if err != nil {
		return nil, err
	}
	if len(b)-4 > MaxSegment {
		return nil, fmt.Errorf("%w: %v %q of %d bytes", ErrTooLong, p.Type, p.Name, len(b)-4)
	}
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b, nil
}
