package ike

import (
	"testing"

	"github.com/ipsecd/ipsecd/ike/message"
	"github.com/ipsecd/ipsecd/internal/printable"
)

// FuzzHandleDecrypted reaches past the SK payload: the fuzzer writes the
// payload chain that an authenticated peer sends, in a request or a
// response of any exchange, and the SA must answer or drop it without
// panicking. (FuzzHandle cannot get past the integrity check.)
func FuzzHandleDecrypted(f *testing.F) {
	ci, cr := pairConfigs(f, []string{"aes128gcm16-prfsha256-x25519"}, []string{"aes128gcm16-x25519"})
	rekeySA := message.AppendSA(nil, []message.Proposal{mustProposals(f, message.ProtoESP, "aes128gcm16-x25519")[0].Message(1, []byte{1, 2, 3, 4})})
	seed, _ := message.AppendPayloads(nil, []message.Payload{
		{Type: message.TypeN, Body: message.AppendNotify(nil, message.ProtoESP, message.RekeySA, []byte{0, 0, 1, 0}, nil)},
		{Type: message.TypeSA, Body: rekeySA},
		{Type: message.TypeNONC, Body: make([]byte, 32)},
		{Type: message.TypeKE, Body: message.AppendKE(nil, 31, make([]byte, 32))},
	})
	f.Add(uint8(message.CreateChildSA), false, uint8(message.TypeN), seed)
	f.Add(uint8(message.CreateChildSA), true, uint8(message.TypeSA), seed[8+4:])
	f.Add(uint8(message.Informational), false, uint8(message.TypeD), message.AppendDelete([]byte{0, 0, 0, 12}, message.ProtoESP, []uint32{7}))
	f.Add(uint8(message.IKEAuth), true, uint8(message.TypeIDr), []byte{0, 0, 0, 8, 2, 0, 0, 0})
	f.Fuzz(func(t *testing.T, ex uint8, response bool, first uint8, chain []byte) {
		// A fresh pair each time: what one input does to the state
		// must not hide what the next one finds.
		ini, res, errI, errR := run(t, ci, cr)
		if errI != nil || errR != nil {
			t.Fatal(errI, errR)
		}
		id := res.nextID
		if response {
			// ini's request is pending; res answers it with the chain.
			if _, err := ini.RekeyChild(ini.Children()[0], t0); err != nil {
				t.Fatal(err)
			}
			id = ini.nextID - 1
		}
		h := res.header(message.ExchangeType(ex), id, response)
		msg, err := res.seal.Seal(h, message.PayloadType(first), chain)
		if err != nil {
			return
		}
		ini.Handle(msg, t0)
		if response {
			return
		}
		// And the same as a request to the original responder.
		h = ini.header(message.ExchangeType(ex), ini.nextID, false)
		if msg, err = ini.seal.Seal(h, message.PayloadType(first), chain); err == nil {
			res.Handle(msg, t0)
		}
	})
}

// FuzzFragments is an authenticated peer sending whatever fragments it
// likes (RFC 7383): any numbers, totals, first-payload types and
// contents, in any order, each sealed so that it authenticates. The
// reassembly must answer or drop them without panicking, and hold no
// more than its bounds.
func FuzzFragments(f *testing.F) {
	ci, cr := pairConfigs(f, []string{"aes128gcm16-prfsha256-x25519"}, []string{"aes128gcm16-x25519"})
	chain, _ := message.AppendPayloads(nil, []message.Payload{{Type: message.TypeD, Body: message.AppendDelete(nil, message.ProtoESP, []uint32{7})}})
	// Records: number (2), total (2), inner type (1), length (1), bytes.
	rec := func(num, total uint16, inner uint8, b []byte) []byte {
		return append([]byte{byte(num >> 8), byte(num), byte(total >> 8), byte(total), inner, byte(len(b))}, b...)
	}
	f.Add(uint8(message.Informational), append(rec(2, 2, 0, chain[4:]), rec(1, 2, uint8(message.TypeD), chain[:4])...))
	f.Add(uint8(message.CreateChildSA), append(rec(1, 3, 33, []byte{1, 2}), rec(1, 2, 0, nil)...))
	f.Add(uint8(message.Informational), rec(0, 0, 0, nil))
	f.Fuzz(func(t *testing.T, ex uint8, data []byte) {
		ini, res, errI, errR := run(t, ci, cr)
		if errI != nil || errR != nil || !res.fragOK {
			t.Fatal(errI, errR, res.fragOK)
		}
		h := ini.header(message.ExchangeType(ex), ini.nextID, false)
		for n := 0; len(data) >= 6 && n < 2*MaxFragments; n++ {
			num, total := uint16(data[0])<<8|uint16(data[1]), uint16(data[2])<<8|uint16(data[3])
			inner, l := message.PayloadType(data[4]), int(data[5])
			data = data[6:]
			body := data[:min(l, len(data))]
			data = data[len(body):]
			msg, err := ini.seal.SealFragment(h, inner, num, total, body)
			if err != nil {
				return
			}
			res.Handle(msg, t0)
			if r := res.reasm; r != nil && (r.have > int(r.total) || r.size > message.MaxLen || int(r.total) > MaxFragments) {
				t.Fatalf("reassembly past its bounds: %d of %d fragments, %d bytes", r.have, r.total, r.size)
			}
		}
	})
}

// FuzzIdentity: an ID payload from the network and an id string from the
// config parse without panicking; what they print as is printable text
// (no control character reaches a terminal or a log), and each identity
// equals itself.
func FuzzIdentity(f *testing.F) {
	f.Add([]byte{2, 0, 0, 0, 0x1b, '[', '2', 'J', '\r', '\n', 'f'}, "gw.example.net")
	f.Add(message.AppendID(nil, message.IDDN, []byte{0x30, 0x0c, 0x31, 0x0a, 0x30, 0x08, 0x06, 0x03, 0x55, 0x04, 0x03, 0x0c, 0x01, 0x1b}), "C=CH, CN=\x1b")
	f.Add([]byte{1, 0, 0, 0, 192, 0, 2, 1}, "@#0102")
	f.Fuzz(func(t *testing.T, payload []byte, s string) {
		id := IdentityOf(message.ID(payload))
		if p := id.String(); !printable.IsPrintable(p) {
			t.Fatalf("%x prints as %q", payload, p)
		}
		if !id.Equal(id) {
			t.Fatalf("%x does not equal itself", payload)
		}
		c, err := ParseIdentity(s)
		if err != nil {
			return
		}
		if p := c.String(); !printable.IsPrintable(p) || !c.Equal(c) {
			t.Fatalf("%q parses to %q (type %d)", s, p, c.Type())
		}
	})
}
