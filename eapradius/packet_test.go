package eapradius

import (
	"bytes"
	"errors"
	"net/netip"
	"testing"

	"layeh.com/radius"
	"layeh.com/radius/rfc2865"
	"layeh.com/radius/rfc2869"
	"layeh.com/radius/vendors/microsoft"

	"github.com/ipsecd/ipsecd/ike/message"
)

// TestEAPSplit: an EAP packet longer than 253 bytes goes in attributes
// of 253, 253, ..., the rest, in order (RFC 3579 §3.1), and is joined
// back whole.
func TestEAPSplit(t *testing.T) {
	data := make([]byte, 600-message.EAPHeaderLen-1)
	for i := range data {
		data[i] = byte(i)
	}
	e := message.AppendEAP(nil, message.EAPResponse, 9, message.EAPTLS, data)
	p := &radius.Packet{Code: radius.CodeAccessRequest}
	addEAP(p, e)
	var sizes []int
	for _, a := range p.Attributes {
		sizes = append(sizes, len(a.Attribute))
	}
	if len(sizes) != 3 || sizes[0] != 253 || sizes[1] != 253 || sizes[2] != 94 {
		t.Errorf("EAP-Message sizes %v; want [253 253 94]", sizes)
	}
	got, err := joinEAP(p.Attributes)
	if err != nil || !bytes.Equal(got, e) {
		t.Errorf("joined %d bytes, %v; want the 600 sent", len(got), err)
	}
	p.Attributes = p.Attributes[:2]
	if _, err := joinEAP(p.Attributes); !errors.Is(err, ErrMalformed) {
		t.Errorf("a missing piece: %v; want ErrMalformed", err)
	}
}

// request returns an Access-Request on the wire, signed with secret.
func request(t *testing.T, secret string) []byte {
	t.Helper()
	p := radius.New(radius.CodeAccessRequest, []byte(secret))
	p.Add(rfc2865.UserName_Type, radius.Attribute("alice"))
	b, err := encodeRequest(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestVerifyAnswer: an answer is believed only with the request's
// Identifier, a right Response Authenticator and a right
// Message-Authenticator; each fault is named.
func TestVerifyAnswer(t *testing.T) {
	req := request(t, "s3cret")
	good := func() []byte {
		p := &radius.Packet{Code: radius.CodeAccessAccept}
		p.Add(rfc2865.FramedIPAddress_Type, radius.Attribute{10, 3, 0, 7})
		return signAnswer(p, req, []byte("s3cret"))
	}
	if _, err := verifyAnswer(good(), req, []byte("s3cret")); err != nil {
		t.Fatalf("a good answer: %v", err)
	}
	noMA := func() []byte {
		b := good()
		// Drop the Message-Authenticator and sign the rest.
		p, _ := radius.Parse(b, []byte("s3cret"))
		p.Attributes.Del(rfc2869.MessageAuthenticator_Type)
		copy(p.Authenticator[:], req[4:20])
		out, _ := p.Encode()
		return out
	}
	tests := []struct {
		name   string
		answer []byte
		secret string
		want   error
	}{
		{"wrong secret", good(), "other", ErrMismatch},
		{"attribute changed", func() []byte { b := good(); b[len(b)-20-1] ^= 1; return b }(), "s3cret", ErrMismatch},
		{"no Message-Authenticator", noMA(), "s3cret", ErrMismatch},
		{"other identifier", func() []byte { b := good(); b[1]++; return b }(), "s3cret", ErrMalformed},
		{"short", good()[:19], "s3cret", ErrMalformed},
		{"Length past the datagram", func() []byte { b := good(); b[3] += 10; return b }(), "s3cret", ErrMalformed},
		{"accounting code", func() []byte { b := good(); b[0] = byte(radius.CodeAccountingResponse); return b }(), "s3cret", ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := verifyAnswer(tt.answer, req, []byte(tt.secret)); !errors.Is(err, tt.want) {
				t.Errorf("got %v, want %v", err, tt.want)
			}
		})
	}
}

// TestParseAccept: the MPPE keys decrypted and joined Recv | Send (as
// strongSwan's eap-radius does), the addresses and timers read, the
// addresses that leave the choice to the NAS dropped.
func TestParseAccept(t *testing.T) {
	req := request(t, "s3cret")
	recv, send := bytes.Repeat([]byte{0xaa}, 32), bytes.Repeat([]byte{0xbb}, 32)
	p := &radius.Packet{Code: radius.CodeAccessAccept, Secret: []byte("s3cret")}
	copy(p.Authenticator[:], req[4:20]) // the keys are encrypted with the Request Authenticator
	if err := microsoft.MSMPPESendKey_Add(p, send); err != nil {
		t.Fatal(err)
	}
	if err := microsoft.MSMPPERecvKey_Add(p, recv); err != nil {
		t.Fatal(err)
	}
	p.Add(rfc2865.FramedIPAddress_Type, radius.Attribute{255, 255, 255, 254})
	p.Add(framedIPv6AddressType, radius.Attribute(netip.MustParseAddr("2001:db8::7").AsSlice()))
	p.Add(rfc2865.SessionTimeout_Type, uint32Attr(30))
	parsed, err := verifyAnswer(signAnswer(p, req, []byte("s3cret")), req, []byte("s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	a, err := parseAccept(parsed, req[4:20])
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.MSK, append(recv, send...)) {
		t.Errorf("MSK %x; want Recv-Key | Send-Key", a.MSK)
	}
	if a.FramedIP.IsValid() || a.FramedIPv6 != netip.MustParseAddr("2001:db8::7") || a.SessionTimeout.Seconds() != 30 {
		t.Errorf("FramedIP %v, FramedIPv6 %v, Session-Timeout %v; want none, 2001:db8::7, 30s", a.FramedIP, a.FramedIPv6, a.SessionTimeout)
	}
	// One key without the other cannot key AUTH.
	parsed.Attributes = parsed.Attributes[:1]
	if _, err := parseAccept(parsed, req[4:20]); !errors.Is(err, ErrMalformed) {
		t.Errorf("one MPPE key: %v; want ErrMalformed", err)
	}
}
