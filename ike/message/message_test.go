package message

import (
	"bytes"
	"encoding/hex"
	"errors"
	"net/netip"
	"reflect"
	"testing"
)

func sampleMessage() *Message {
	sa := AppendSA(nil, []Proposal{
		{Num: 1, Protocol: ProtoIKE, Transforms: []Transform{
			{Type: TransENCR, ID: 12, KeyLen: 256}, {Type: TransINTEG, ID: 12},
			{Type: TransPRF, ID: 5}, {Type: TransDH, ID: 31}}},
		{Num: 2, Protocol: ProtoIKE, Transforms: []Transform{
			{Type: TransENCR, ID: 20, KeyLen: 128}, {Type: TransPRF, ID: 5}, {Type: TransDH, ID: 19}}},
	})
	return &Message{
		HeaderFields: HeaderFields{ISPI: 0x0102030405060708, Exchange: IKESAInit, Flags: FlagInitiator},
		Payloads: []Payload{
			{Type: TypeSA, Body: sa},
			{Type: TypeKE, Body: AppendKE(nil, 31, bytes.Repeat([]byte{9}, 32))},
			{Type: TypeNONC, Body: bytes.Repeat([]byte{7}, 32)},
			{Type: TypeN, Body: AppendNotify(nil, 0, NATDetectionSourceIP, nil, bytes.Repeat([]byte{1}, 20))},
			{Type: TypeN, Body: AppendNotify(nil, 0, FragmentationSupported, nil, nil)},
			{Type: TypeV, Body: []byte("opaque vendor id")},
		},
	}
}

func TestRoundTrip(t *testing.T) {
	m := sampleMessage()
	b := Encode(m)
	got, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, m) {
		t.Fatalf("got %+v, want %+v", got, m)
	}
	if !bytes.Equal(Encode(got), b) {
		t.Fatal("re-encoding differs")
	}
	ps, err := SA(got.Get(TypeSA)).Proposals()
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 2 || ps[0].Transforms[0].KeyLen != 256 || ps[1].Transforms[2] != (Transform{Type: TransDH, ID: 19}) {
		t.Fatalf("proposals: got %+v", ps)
	}
	if ke := KE(got.Get(TypeKE)); !ke.IsValid() || ke.Group() != 31 || len(ke.Data()) != 32 {
		t.Fatalf("KE: got group %d, %d bytes", ke.Group(), len(ke.Data()))
	}
	ns := Notifies(got.Payloads)
	if len(ns) != 2 || ns[0].Type() != NATDetectionSourceIP || len(ns[0].Data()) != 20 || ns[1].Type() != FragmentationSupported {
		t.Fatalf("notifies: got %x", ns)
	}
}

// TestHeaderLayout checks the encoder against the layout of RFC 7296 §3.1
// written out by hand.
func TestHeaderLayout(t *testing.T) {
	m := &Message{HeaderFields: HeaderFields{ISPI: 1, RSPI: 2, Exchange: IKEAuth, Flags: FlagResponse, MessageID: 1},
		Payloads: []Payload{{Type: TypeSK, Inner: TypeIDr, Body: []byte{0xaa}}}}
	want, _ := hex.DecodeString("0000000000000001" + "0000000000000002" + "2e202320" + "00000001" + "00000021" + "24000005aa")
	if got := Encode(m); !bytes.Equal(got, want) {
		t.Fatalf("got %x, want %x", got, want)
	}
}

func TestTrafficSelectors(t *testing.T) {
	ss := []Selector{
		{StartPort: 0, EndPort: 65535, Start: netip.MustParseAddr("198.51.100.0"), End: netip.MustParseAddr("198.51.100.255")},
		{Proto: 17, StartPort: 500, EndPort: 500, Start: netip.MustParseAddr("2001:db8::"), End: netip.MustParseAddr("2001:db8::ffff")},
	}
	b := AppendTS(nil, ss)
	if len(b) != 4+16+40 {
		t.Fatalf("got %d bytes, want 60", len(b))
	}
	got, err := TS(b).Selectors()
	if err != nil || !reflect.DeepEqual(got, ss) {
		t.Fatalf("got %+v, %v; want %+v", got, err, ss)
	}
	b[4] = 9 // unknown TS type
	if _, err := TS(b).Selectors(); err == nil {
		t.Fatal("unknown TS type accepted")
	}
}

func TestDeleteAndID(t *testing.T) {
	d := Delete(AppendDelete(nil, ProtoESP, []uint32{0xc0010203, 0xc0040506}))
	if !d.IsValid() || d.Protocol() != ProtoESP || !reflect.DeepEqual(d.SPIs(), []uint32{0xc0010203, 0xc0040506}) {
		t.Fatalf("delete: got %x", []byte(d))
	}
	if d := Delete(AppendDelete(nil, ProtoIKE, []uint32{1})); !d.IsValid() || len(d) != 4 {
		t.Fatalf("IKE delete: got %x", []byte(d))
	}
	id := ID(AppendID(nil, IDFQDN, []byte("a.test")))
	if !id.IsValid() || id.Type() != IDFQDN || string(id.Data()) != "a.test" {
		t.Fatalf("ID: got %x", []byte(id))
	}
}

func TestUnknownPayloads(t *testing.T) {
	m := sampleMessage()
	m.Payloads = append(m.Payloads, Payload{Type: 200, Body: []byte{1, 2, 3}})
	got, err := Parse(Encode(m))
	if err != nil {
		t.Fatalf("unknown non-critical payload: %v", err)
	}
	if n := len(got.Payloads); n != len(m.Payloads)-1 {
		t.Fatalf("got %d payloads, want the unknown one skipped (%d)", n, len(m.Payloads)-1)
	}
	m.Payloads[len(m.Payloads)-1].Critical = true
	_, err = Parse(Encode(m))
	var ce *CriticalError
	if !errors.As(err, &ce) || ce.Type != 200 {
		t.Fatalf("got %v, want CriticalError for type 200", err)
	}
}

func TestMalformed(t *testing.T) {
	good := Encode(sampleMessage())
	for _, tt := range []struct {
		name string
		edit func([]byte) []byte
		want error
	}{
		{"short", func(b []byte) []byte { return b[:20] }, ErrShort},
		{"version 1", func(b []byte) []byte { b[17] = 0x10; return b }, ErrMajorVersion},
		{"length too big", func(b []byte) []byte { Header(b).SetLength(uint32(len(b) + 1)); return b }, ErrLength},
		{"truncated", func(b []byte) []byte { b = b[:len(b)-1]; Header(b).SetLength(uint32(len(b))); return b }, ErrLength},
		{"payload length 3", func(b []byte) []byte { b[HeaderLen+3] = 3; b[HeaderLen+2] = 0; return b }, ErrLength},
		{"trailing bytes", func(b []byte) []byte { b = append(b, 0, 0); Header(b).SetLength(uint32(len(b))); return b }, ErrLength},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.edit(bytes.Clone(good))
			if _, err := Parse(b); !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
		})
	}
}

func TestSKMustBeLast(t *testing.T) {
	m := &Message{Payloads: []Payload{{Type: TypeSK, Inner: TypeIDi, Body: []byte{1}}, {Type: TypeN, Body: AppendNotify(nil, 0, InitialContact, nil, nil)}}}
	if _, err := Parse(Encode(m)); err == nil {
		// The encoder writes SK's Inner as its next payload, so the
		// notify's bytes follow an SK that claims to end the chain.
		t.Fatal("SK followed by a payload accepted")
	}
}

func FuzzParse(f *testing.F) {
	f.Add(Encode(sampleMessage()))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Parse(b)
		if err != nil {
			return
		}
		// Every view must refuse or decode without panicking.
		for _, p := range m.Payloads {
			switch p.Type {
			case TypeSA:
				SA(p.Body).Proposals()
			case TypeTSi, TypeTSr:
				TS(p.Body).Selectors()
			case TypeN:
				if n := Notify(p.Body); n.IsValid() {
					n.Type()
					n.SPI()
					n.Data()
				}
			case TypeD:
				if d := Delete(p.Body); d.IsValid() {
					d.SPIs()
				}
			case TypeSK:
				ParsePayloads(p.Inner, p.Body)
			case TypeCP:
				CP(p.Body).Attributes()
			case TypeEAP:
				if e := EAP(p.Body); e.IsValid() && e.Code() <= EAPResponse {
					e.Data()
				}
			}
		}
		// Reserved bits and the minor version are not kept, so the
		// property is that an encoded message parses back to itself.
		m2, err := Parse(Encode(m))
		if err != nil || !reflect.DeepEqual(m2, m) {
			t.Fatalf("re-encoded message parses as %+v, %v; want %+v", m2, err, m)
		}
	})
}
