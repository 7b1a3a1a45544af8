package vici

import (
	"bytes"
	"testing"
)

func fuzzSeeds(f *testing.F) {
	f.Add(readmeExample)
	f.Add([]byte{})
	f.Add([]byte{4, 1, 'l', 6})
	f.Add([]byte{1, 1, 's', 1, 1, 't', 3, 1, 'k', 0, 1, 'v', 2, 2})
	f.Add([]byte{3, 1, 'k', 0, 0, 3, 1, 'k', 0, 0})
	f.Add([]byte{4, 1, 'l', 5, 0, 0, 5, 0, 1, 'x', 6, 3, 0, 0, 0})
}

// FuzzParseMessage: any bytes are parsed or refused without a panic, and
// what is parsed encodes to a message that parses to the same encoding
// (decode∘encode is the identity on what the decoder accepts).
func FuzzParseMessage(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		m, err := ParseMessage(in)
		if err != nil {
			return
		}
		enc, err := m.AppendBinary(nil)
		if err != nil {
			t.Fatalf("parsed message does not encode: %v", err)
		}
		// Parsing keeps every element, so the encoding is the input.
		if !bytes.Equal(enc, in) {
			t.Fatalf("round trip changed the message:\n in %q\nout %q", in, enc)
		}
	})
}

// FuzzParsePacket: any segment is parsed or refused without a panic;
// what is parsed encodes back to the same bytes.
func FuzzParsePacket(f *testing.F) {
	f.Add(append([]byte{0, 7}, "version"...))
	f.Add(append(append([]byte{7, 7}, "list-sa"...), readmeExample...))
	f.Add([]byte{5})
	f.Add([]byte{3, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		p, err := ParsePacket(in)
		if err != nil {
			return
		}
		enc, err := p.AppendBinary(nil)
		if err != nil {
			t.Fatalf("parsed packet does not encode: %v", err)
		}
		if !bytes.Equal(enc, in) {
			t.Fatalf("round trip changed the packet:\n in %q\nout %q", in, enc)
		}
	})
}
