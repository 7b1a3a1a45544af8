package message

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"testing"
)

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCPCharon decodes what charon 5.9.8 sends and a charon gateway
// answers (the interop notes' capture): a CFG_REQUEST with empty
// INTERNAL_IP4_ADDRESS and INTERNAL_IP4_DNS, and a CFG_REPLY with the
// address, the DNS server, INTERNAL_IP4_SUBNET and Unity's split include
// (28676), which ipsecd does not know and keeps for the caller to skip.
func TestCPCharon(t *testing.T) {
	req := CP(unhex(t, "01000000"+"00010000"+"00030000"))
	attrs, err := req.Attributes()
	if err != nil || req.Type() != CFGRequest || fmt.Sprint(attrs) != "[{1 []} {3 []}]" {
		t.Fatalf("request: %v %v %v", req.Type(), attrs, err)
	}
	if _, ok := attrs[0].Addr(); ok {
		t.Error("an empty INTERNAL_IP4_ADDRESS has an address")
	}
	reply := CP(unhex(t, "02000000"+"000100040a030001"+"000300040a030035"+"000d00080a040000ffffff00"+"700400080a040000ffffff00"))
	attrs, err = reply.Attributes()
	if err != nil || reply.Type() != CFGReply || len(attrs) != 4 {
		t.Fatalf("reply: %v %v", attrs, err)
	}
	addr, _ := attrs[0].Addr()
	dns, _ := attrs[1].Addr()
	subnet, _ := attrs[2].Prefix()
	if addr.String() != "10.3.0.1" || dns.String() != "10.3.0.53" || subnet.String() != "10.4.0.0/24" || attrs[3].Type != 28676 {
		t.Errorf("got %s %s %s %d", addr, dns, subnet, attrs[3].Type)
	}
	// The same reply, built.
	built := AppendCP(nil, CFGReply, []CPAttribute{
		AddrAttribute(InternalIP4Address, netip.MustParseAddr("10.3.0.1")),
		AddrAttribute(InternalIP4DNS, netip.MustParseAddr("10.3.0.53")),
		SubnetAttribute(netip.MustParsePrefix("10.4.0.0/24")),
		{Type: 28676, Value: unhex(t, "0a040000ffffff00")},
	})
	if !bytes.Equal(built, reply) {
		t.Errorf("built %x\n want %x", built, []byte(reply))
	}
}

func TestCPIPv6AndDomain(t *testing.T) {
	attrs := []CPAttribute{
		AddrAttribute(InternalIP6Address, netip.MustParseAddr("fd00:3::1")),
		AddrAttribute(InternalIP6DNS, netip.MustParseAddr("fd00:3::53")),
		SubnetAttribute(netip.MustParsePrefix("fd00:4::/64")),
		SubnetAttribute(netip.MustParsePrefix("0.0.0.0/0")),
		{Type: InternalDNSDomain, Value: []byte("corp.example")},
	}
	got, err := CP(AppendCP(nil, CFGReply, attrs)).Attributes()
	if err != nil || len(got) != 5 {
		t.Fatal(got, err)
	}
	a, _ := got[0].Addr()
	p, _ := got[0].Prefix()
	d, _ := got[1].Addr()
	s6, _ := got[2].Prefix()
	s4, _ := got[3].Prefix()
	if a.String() != "fd00:3::1" || p.String() != "fd00:3::1/128" || d.String() != "fd00:3::53" || s6.String() != "fd00:4::/64" ||
		s4.String() != "0.0.0.0/0" || string(got[4].Value) != "corp.example" {
		t.Errorf("got %s %s %s %s %s %q", a, p, d, s6, s4, got[4].Value)
	}
}

func TestCPMalformed(t *testing.T) {
	for _, tt := range []struct{ name, hex string }{
		{"short", "0100"},
		{"attribute header cut", "01000000" + "0001"},
		{"length past the end", "01000000" + "00010004" + "0a03"},
		{"address of 3 bytes", "02000000" + "00010003" + "0a0300"},
		{"ip6 address without prefix length", "02000000" + "00080010" + "fd000003000000000000000000000001"},
	} {
		if _, err := CP(unhex(t, tt.hex)).Attributes(); !errors.Is(err, ErrBadPayload) {
			t.Errorf("%s: %v, want ErrBadPayload", tt.name, err)
		}
	}
	// The R bit is reserved: ignored on receipt.
	if attrs, err := CP(unhex(t, "01000000"+"80010000")).Attributes(); err != nil || attrs[0].Type != InternalIP4Address {
		t.Errorf("R bit set: %v %v", attrs, err)
	}
	// A netmask with holes and a prefix length past 128 are not prefixes.
	for _, a := range []CPAttribute{
		{Type: InternalIP4Subnet, Value: unhex(t, "0a040000ff00ff00")},
		{Type: InternalIP6Subnet, Value: unhex(t, "fd000004000000000000000000000000"+"81")},
	} {
		if p, ok := a.Prefix(); ok {
			t.Errorf("%x: prefix %s", a.Value, p)
		}
	}
}

func TestEAP(t *testing.T) {
	// An EAP-Identity request and charon's response "alice".
	req := EAP(unhex(t, "0101000501"))
	resp := EAP(AppendEAP(nil, EAPResponse, 1, EAPIdentity, []byte("alice")))
	if !req.IsValid() || req.Code() != EAPRequest || req.Identifier() != 1 || req.Type() != EAPIdentity || len(req.Data()) != 0 {
		t.Errorf("request: %x", []byte(req))
	}
	if !bytes.Equal(resp, unhex(t, "0201000a01616c696365")) || !resp.IsValid() || string(resp.Data()) != "alice" {
		t.Errorf("response: %x", []byte(resp))
	}
	if ok := EAP(AppendEAPResult(nil, EAPSuccess, 7)); !ok.IsValid() || ok.Code() != EAPSuccess || ok.Identifier() != 7 {
		t.Errorf("success: %x", []byte(ok))
	}
	for _, bad := range []string{"", "010100", "0101000601", "0101000401", "0301000501", "0501000501", "0201000401"} {
		if EAP(unhex(t, bad)).IsValid() {
			t.Errorf("%s: valid", bad)
		}
	}
}

// FuzzCP: Attributes never panics, and what it decodes encodes back to
// the input (the R bit aside, which it drops).
func FuzzCP(f *testing.F) {
	f.Add(unhex(f, "02000000"+"000100040a030001"+"000300040a030035"+"000d00080a040000ffffff00"+"700400080a040000ffffff00"))
	f.Add(unhex(f, "01000000"+"00010000"+"00030000"+"00080000"+"000a0000"))
	f.Fuzz(func(t *testing.T, b []byte) {
		attrs, err := CP(b).Attributes()
		if err != nil {
			return
		}
		for _, a := range attrs {
			a.Addr()
			a.Prefix()
		}
		re := AppendCP(nil, CP(b).Type(), attrs)
		clearR := bytes.Clone(b)
		for o := cpHeaderLen; o < len(clearR); o += cpAttrHeaderLen + int(binary.BigEndian.Uint16(clearR[o+2:])) {
			clearR[o] &= 0x7f
		}
		clearR[1], clearR[2], clearR[3] = 0, 0, 0
		if !bytes.Equal(re, clearR) {
			t.Fatalf("re-encoded %x, want %x", re, clearR)
		}
	})
}

// FuzzEAP: the view never reads past a packet it calls valid.
func FuzzEAP(f *testing.F) {
	f.Add(unhex(f, "0201000a01616c696365"))
	f.Add(unhex(f, "03010004"))
	f.Fuzz(func(t *testing.T, b []byte) {
		e := EAP(b)
		if !e.IsValid() {
			return
		}
		e.Code()
		e.Identifier()
		if e.Code() == EAPRequest || e.Code() == EAPResponse {
			re := AppendEAP(nil, e.Code(), e.Identifier(), e.Type(), e.Data())
			if !bytes.Equal(re, b) {
				t.Fatalf("re-encoded %x, want %x", re, b)
			}
		}
	})
}
