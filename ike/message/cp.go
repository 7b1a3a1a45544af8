package message

import (
	"encoding/binary"
	"net/netip"
)

// CP is the body of a Configuration payload (RFC 7296 §3.15), after its
// generic header:
//
//	                     1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|   CFG Type    |                    RESERVED                   |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	~                   Configuration Attributes                    ~
//
// and each attribute (§3.15.1):
//
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|R|         Attribute Type      |            Length             |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	~                             Value                             ~
type CP []byte

// CFGType is a CP payload's CFG Type.
type CFGType uint8

const (
	CFGRequest CFGType = 1
	CFGReply   CFGType = 2
	CFGSet     CFGType = 3
	CFGAck     CFGType = 4
)

// CPAttrType is a configuration attribute type (RFC 7296 §3.15.1, RFC
// 8598 §4; 28672.. are private use, Cisco Unity's among them).
type CPAttrType uint16

const (
	InternalIP4Address  CPAttrType = 1
	InternalIP4Netmask  CPAttrType = 2
	InternalIP4DNS      CPAttrType = 3
	InternalIP4NBNS     CPAttrType = 4
	InternalIP4DHCP     CPAttrType = 6
	ApplicationVersion  CPAttrType = 7
	InternalIP6Address  CPAttrType = 8
	InternalIP6DNS      CPAttrType = 10
	InternalIP6DHCP     CPAttrType = 12
	InternalIP4Subnet   CPAttrType = 13
	SupportedAttributes CPAttrType = 14
	InternalIP6Subnet   CPAttrType = 15
	InternalDNSDomain   CPAttrType = 25 // RFC 8598
	InternalDNSSECTA    CPAttrType = 26 // RFC 8598
)

// cpHeaderLen is the CFG Type and RESERVED fields; cpAttrHeaderLen an
// attribute's type and length.
const (
	cpHeaderLen     = 4
	cpAttrHeaderLen = 4
)

// valueLens are the lengths RFC 7296 §3.15.1 allows an attribute of a
// known type besides 0 (which asks for it, in a CFG_REQUEST); a type not
// here may have any length.
var valueLens = map[CPAttrType]int{
	InternalIP4Address: 4, InternalIP4Netmask: 4, InternalIP4DNS: 4, InternalIP4NBNS: 4, InternalIP4DHCP: 4,
	InternalIP6Address: 17, InternalIP6DNS: 16, InternalIP6DHCP: 16,
	InternalIP4Subnet: 8, InternalIP6Subnet: 17,
}

// CPAttribute is one configuration attribute. Value aliases the parsed
// body; empty asks for the attribute (CFG_REQUEST) or acknowledges it
// (CFG_ACK).
type CPAttribute struct {
	Type  CPAttrType
	Value []byte
}

// IsValid reports whether c holds its CFG Type.
func (c CP) IsValid() bool { return len(c) >= cpHeaderLen }

// Type returns the CFG Type; c must be valid.
func (c CP) Type() CFGType { return CFGType(c[0]) }

// Attributes decodes the attributes, in order. An attribute of a type
// whose length RFC 7296 fixes must have that length or none; one of a
// type ipsecd does not know is returned as it is, for the caller to skip
// (§3.15.1: "MUST be ignored"). A length running past the body, or a body
// that does not end on an attribute, is ErrBadPayload.
func (c CP) Attributes() ([]CPAttribute, error) {
	if !c.IsValid() {
		return nil, ErrBadPayload
	}
	var out []CPAttribute
	for b := []byte(c[cpHeaderLen:]); len(b) > 0; {
		if len(b) < cpAttrHeaderLen {
			return nil, ErrBadPayload
		}
		t := CPAttrType(binary.BigEndian.Uint16(b) & 0x7fff) // the R bit is reserved
		n := int(binary.BigEndian.Uint16(b[2:]))
		if cpAttrHeaderLen+n > len(b) {
			return nil, ErrBadPayload
		}
		if want, ok := valueLens[t]; ok && n != 0 && n != want {
			return nil, ErrBadPayload
		}
		out = append(out, CPAttribute{Type: t, Value: b[cpAttrHeaderLen : cpAttrHeaderLen+n]})
		b = b[cpAttrHeaderLen+n:]
	}
	return out, nil
}

// AppendCP appends the body of a CP payload of type t holding attrs.
// Each value must be shorter than 64 KiB.
func AppendCP(dst []byte, t CFGType, attrs []CPAttribute) []byte {
	dst = append(dst, byte(t), 0, 0, 0)
	for _, a := range attrs {
		dst = binary.BigEndian.AppendUint16(dst, uint16(a.Type)&0x7fff)
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(a.Value)))
		dst = append(dst, a.Value...)
	}
	return dst
}

// Addr returns the address of an INTERNAL_IP4_ADDRESS, _IP4_DNS,
// _IP4_NBNS, _IP4_DHCP, _IP6_DNS or _IP6_DHCP attribute, and of an
// INTERNAL_IP6_ADDRESS without its prefix length; false when a has none
// (an empty value, another type).
func (a CPAttribute) Addr() (netip.Addr, bool) {
	switch {
	case len(a.Value) == 4 && (a.Type == InternalIP4Address || a.Type == InternalIP4DNS || a.Type == InternalIP4NBNS || a.Type == InternalIP4DHCP):
		return netip.AddrFrom4([4]byte(a.Value)), true
	case len(a.Value) == 16 && (a.Type == InternalIP6DNS || a.Type == InternalIP6DHCP):
		return netip.AddrFrom16([16]byte(a.Value)), true
	case len(a.Value) == 17 && a.Type == InternalIP6Address:
		return netip.AddrFrom16([16]byte(a.Value[:16])), true
	}
	return netip.Addr{}, false
}

// Prefix returns the prefix of an INTERNAL_IP6_ADDRESS (the address with
// its prefix length), INTERNAL_IP4_SUBNET (address and netmask) or
// INTERNAL_IP6_SUBNET attribute; false when a has none, or a netmask that
// is not contiguous or a prefix length over 128.
func (a CPAttribute) Prefix() (netip.Prefix, bool) {
	switch {
	case len(a.Value) == 17 && (a.Type == InternalIP6Address || a.Type == InternalIP6Subnet):
		if a.Value[16] > 128 {
			return netip.Prefix{}, false
		}
		return netip.PrefixFrom(netip.AddrFrom16([16]byte(a.Value[:16])), int(a.Value[16])), true
	case len(a.Value) == 8 && a.Type == InternalIP4Subnet:
		mask := binary.BigEndian.Uint32(a.Value[4:])
		ones := 0
		for ones < 32 && mask&(1<<(31-ones)) != 0 {
			ones++
		}
		if ones < 32 && mask<<ones != 0 {
			return netip.Prefix{}, false
		}
		return netip.PrefixFrom(netip.AddrFrom4([4]byte(a.Value[:4])), ones), true
	}
	return netip.Prefix{}, false
}

// AddrAttribute returns the attribute of type t carrying a:
// INTERNAL_IP4_ADDRESS or _DNS and their IPv6 twins (an
// INTERNAL_IP6_ADDRESS gets prefix length 128, as a virtual IP has).
func AddrAttribute(t CPAttrType, a netip.Addr) CPAttribute {
	v := a.AsSlice()
	if t == InternalIP6Address {
		v = append(v, 128)
	}
	return CPAttribute{Type: t, Value: v}
}

// SubnetAttribute returns an INTERNAL_IP4_SUBNET (address and netmask)
// or INTERNAL_IP6_SUBNET (address and prefix length) carrying p.
func SubnetAttribute(p netip.Prefix) CPAttribute {
	p = p.Masked()
	if p.Addr().Is4() {
		mask := ^uint32(0) << (32 - p.Bits()) // 0 for /0: a shift past the width
		return CPAttribute{Type: InternalIP4Subnet, Value: binary.BigEndian.AppendUint32(p.Addr().AsSlice(), mask)}
	}
	return CPAttribute{Type: InternalIP6Subnet, Value: append(p.Addr().AsSlice(), byte(p.Bits()))}
}
