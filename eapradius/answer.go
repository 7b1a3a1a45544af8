package eapradius

import (
	"encoding/binary"
	"net/netip"
	"time"

	"layeh.com/radius"
	"layeh.com/radius/rfc2865"
	"layeh.com/radius/rfc2869"
	"layeh.com/radius/rfc3162"
)

// Microsoft's vendor attributes that carry the EAP keys (RFC 2548 §2.4.2,
// §2.4.3).
const (
	vendorMicrosoft = 311
	msMPPESendKey   = 16
	msMPPERecvKey   = 17
)

// Accept is what an Access-Accept grants beyond the EAP-Success: what
// the caller keeps for the session and for its accounting.
type Accept struct {
	// MSK keys the IKE AUTH payloads: MS-MPPE-Recv-Key followed by
	// MS-MPPE-Send-Key, as strongSwan's eap-radius joins them; nil when
	// the server sent neither (a method without keys, such as EAP-MD5).
	MSK []byte
	// FramedIP, FramedIPv6 and FramedIPv6Prefix are the client's
	// addresses (Framed-IP-Address, RFC 6911's Framed-IPv6-Address,
	// RFC 3162's Framed-IPv6-Prefix); zero when not sent. 255.255.255.254
	// and 255.255.255.255 mean "the NAS chooses" (RFC 2865 §5.8) and are
	// dropped here.
	FramedIP         netip.Addr
	FramedIPv6       netip.Addr
	FramedIPv6Prefix netip.Prefix
	// Class values are echoed in accounting (RFC 2865 §5.25).
	Class [][]byte
	// SessionTimeout and IdleTimeout end the session (RFC 2865 §5.27,
	// §5.28); InterimInterval is how often the server wants
	// Interim-Updates (RFC 2869 §5.16). Zero when not sent.
	SessionTimeout  time.Duration
	IdleTimeout     time.Duration
	InterimInterval time.Duration
	// UserName is the User-Name the server sent back, if any: the
	// identity accounting names (RFC 2865 §5.1).
	UserName string
}

// Wipe zeroes the MSK.
func (a *Accept) Wipe() { clear(a.MSK) }

// parseAccept reads an Access-Accept, p, answering the request whose
// Request Authenticator is reqAuth; the MPPE keys are decrypted with the
// secret. Attributes it cannot read are skipped: the keys make the one
// error, since AUTH cannot be keyed without them.
func parseAccept(p *radius.Packet, reqAuth []byte) (*Accept, error) {
	a := &Accept{}
	var send, recv []byte
	var sawSend, sawRecv bool
	for _, avp := range p.Attributes {
		v := avp.Attribute
		switch avp.Type {
		case rfc2865.FramedIPAddress_Type:
			if len(v) == 4 {
				ip := netip.AddrFrom4([4]byte(v))
				if ip != netip.AddrFrom4([4]byte{255, 255, 255, 255}) && ip != netip.AddrFrom4([4]byte{255, 255, 255, 254}) {
					a.FramedIP = ip
				}
			}
		case framedIPv6AddressType:
			if len(v) == 16 {
				a.FramedIPv6 = netip.AddrFrom16([16]byte(v))
			}
		case rfc3162.FramedIPv6Prefix_Type:
			if n, err := radius.IPv6Prefix(v); err == nil {
				ones, _ := n.Mask.Size()
				if ip, ok := netip.AddrFromSlice(n.IP); ok {
					a.FramedIPv6Prefix = netip.PrefixFrom(ip, ones)
				}
			}
		case rfc2865.Class_Type:
			a.Class = append(a.Class, append([]byte(nil), v...))
		case rfc2865.UserName_Type:
			a.UserName = string(v)
		case rfc2865.SessionTimeout_Type:
			a.SessionTimeout = seconds(v)
		case rfc2865.IdleTimeout_Type:
			a.IdleTimeout = seconds(v)
		case rfc2869.AcctInterimInterval_Type:
			a.InterimInterval = seconds(v)
		case rfc2865.VendorSpecific_Type:
			typ, key, ok, err := mppeKey(v, p.Secret, reqAuth)
			if !ok {
				continue
			}
			if err != nil {
				return nil, err
			}
			switch typ {
			case msMPPESendKey:
				send, sawSend = key, true
			case msMPPERecvKey:
				recv, sawRecv = key, true
			}
		}
	}
	if sawSend != sawRecv {
		clear(send)
		clear(recv)
		return nil, malformed("an MS-MPPE key without its pair")
	}
	if sawSend {
		a.MSK = append(recv, send...)
		clear(send)
	}
	return a, nil
}

// framedIPv6AddressType is RFC 6911's Framed-IPv6-Address.
const framedIPv6AddressType radius.Type = 168

// seconds reads a 32-bit count of seconds.
func seconds(v []byte) time.Duration {
	if len(v) != 4 {
		return 0
	}
	return time.Duration(binary.BigEndian.Uint32(v)) * time.Second
}

// mppeKey decrypts an MS-MPPE-Send-Key or -Recv-Key held in the
// Vendor-Specific value v (RFC 2548 §2.4.2: Vendor-Id 311, Vendor-Type,
// Vendor-Length, Salt, String, where String is the key's length, the key
// and padding, encrypted as RFC 2868's Tunnel-Password). ok is false for
// any other vendor attribute.
func mppeKey(v, secret, reqAuth []byte) (typ byte, key []byte, ok bool, err error) {
	if len(v) < 6 || binary.BigEndian.Uint32(v) != vendorMicrosoft {
		return 0, nil, false, nil
	}
	typ, n := v[4], int(v[5])
	if typ != msMPPESendKey && typ != msMPPERecvKey {
		return 0, nil, false, nil
	}
	if n != len(v)-4 {
		return typ, nil, true, malformed("MS-MPPE key of Vendor-Length %d in %d bytes", n, len(v)-4)
	}
	plain, _, err := radius.TunnelPassword(radius.Attribute(v[6:]), secret, reqAuth)
	if err != nil {
		return typ, nil, true, malformed("MS-MPPE key: %v", err)
	}
	if len(plain) == 0 {
		return typ, nil, true, malformed("MS-MPPE key of 0 bytes")
	}
	key = append([]byte(nil), plain...)
	clear(plain[:cap(plain)])
	return typ, key, true, nil
}
