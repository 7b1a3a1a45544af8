package sa

import (
	"bytes"
	"strings"
	"testing"
)

// TestOpenFromSrc: a packet opened from Src (a receive buffer holding
// other packets around it) comes out as the same packet opened in place,
// for every suite and both modes, and Src is left as it was. A packet
// whose ICV fails leaves no plaintext in Buf.
func TestOpenFromSrc(t *testing.T) {
	for _, su := range suites {
		for _, mode := range []Mode{ModeTunnel, ModeTransport} {
			t.Run(su.name+"/"+mode.String(), func(t *testing.T) {
				out, in := pair(t, mode, false, true, 64, su.set)
				_, fromSrc := pair(t, mode, false, true, 64, su.set) // same keys, its own window
				for n, size := range []int{0, 1, 100, 1372} {
					inner := ipv4Packet(size)
					sealed := sealOne(t, out, inner)
					esp := append([]byte(nil), sealed.Data()...)

					want := openOne(in, sealed)
					// The same packet for the second SA, in the middle
					// of a shared buffer.
					shared := make([]byte, 7+len(esp)+9)
					for i := range shared {
						shared[i] = 0xee
					}
					copy(shared[7:], esp)
					src := shared[7 : 7+len(esp)]
					before := append([]byte(nil), shared...)
					p := Packet{Buf: make([]byte, Headroom+len(esp)+Tailroom), Off: Headroom, Len: len(esp), Src: src}
					ps := []Packet{p}
					fromSrc.OpenBatch(ps)
					got := ps[0]
					if got.Drop != want.Drop || !bytes.Equal(got.Data(), want.Data()) || got.Proto != want.Proto {
						t.Fatalf("packet %d: from Src: drop %v proto %d %x, want drop %v proto %d %x", n, got.Drop, got.Proto, got.Data(), want.Drop, want.Proto, want.Data())
					}
					if !bytes.Equal(shared, before) {
						t.Fatalf("packet %d: Open wrote into Src", n)
					}
				}

				// A forged packet: its plaintext must not appear in Buf.
				inner := ipv4Packet(200)
				sealed := sealOne(t, out, inner)
				esp := append([]byte(nil), sealed.Data()...)
				esp[len(esp)-1] ^= 1
				buf := make([]byte, Headroom+len(esp)+Tailroom)
				ps := []Packet{{Buf: buf, Off: Headroom, Len: len(esp), Src: esp}}
				fromSrc.OpenBatch(ps)
				if ps[0].Drop != XfrmInStateProtoError {
					t.Fatalf("forged: drop %v, want %v", ps[0].Drop, XfrmInStateProtoError)
				}
				// (With NULL encryption the packet on the wire is the
				// plaintext: nothing to keep.)
				payload := inner[len(inner)-100:]
				if !strings.HasPrefix(su.name, "null-") && bytes.Contains(buf, payload) {
					t.Fatal("forged: plaintext left in Buf")
				}
			})
		}
	}
}

// TestOpenFromSrcLength: a Src of another length than Len is a header
// error, not a read past either buffer.
func TestOpenFromSrcLength(t *testing.T) {
	out, in := pair(t, ModeTunnel, false, false, 64, suites[0].set)
	sealed := sealOne(t, out, ipv4Packet(50))
	esp := sealed.Data()
	ps := []Packet{{Buf: make([]byte, Headroom+len(esp)), Off: Headroom, Len: len(esp) + 8, Src: esp}}
	d := NewSAD(nil)
	if err := d.Replace([]*SA{in}, nil); err != nil {
		t.Fatal(err)
	}
	d.OpenBatch(ps)
	if ps[0].Drop != XfrmInHdrError {
		t.Fatalf("drop %v, want %v", ps[0].Drop, XfrmInHdrError)
	}
}
