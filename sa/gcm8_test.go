package sa

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/ipsecd/ipsecd/sa/esp"
)

// TestGCM8DraftVectors opens the draft-mcgrew-gcm-test-01 cases with a
// 64-bit ICV: RFC 4106 §8 truncates the tag, so the ICV is the first 8
// bytes of the published 16. Any changed byte, header (AAD, nonce)
// included, and a wrong ESN high half are refused.
func TestGCM8DraftVectors(t *testing.T) {
	for _, tt := range gcmDraftVectors {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Config{AEAD: &Algorithm{Name: AlgGCM, Key: append(unhex(tt.key), unhex(tt.salt)...), Bits: 64}}
			tr, err := newTransform(&cfg)
			if err != nil {
				t.Fatal(err)
			}
			plain, ctag := unhex(tt.plain), unhex(tt.ctag)
			wire := make(esp.ESP, 16+len(ctag)-8)
			wire.SetSPI(tt.spi)
			wire.SetSeq(uint32(tt.seq))
			copy(wire.IV(8), unhex(tt.iv))
			copy(wire[16:], ctag[:len(ctag)-8])
			var scratch scratch
			b := esp.ESP(bytes.Clone(wire))
			if !tr.open(&scratch, b, tt.seq, true) {
				t.Fatal("open: ICV did not verify")
			}
			if !bytes.Equal(b.Encrypted(8, 8), plain) {
				t.Errorf("open: got %x, want %x", b.Encrypted(8, 8), plain)
			}
			if !bytes.Equal(b[:16], wire[:16]) || !bytes.Equal(b.ICV(8), wire.ICV(8)) {
				t.Errorf("open changed the header or ICV: %x ... %x, want %x ... %x", b[:16], b.ICV(8), wire[:16], wire.ICV(8))
			}
			for i := range wire {
				b := esp.ESP(bytes.Clone(wire))
				b[i] ^= 0x80
				seq := tt.seq
				if i >= 4 && i < 8 { // the sequence number's low half is the AAD's
					seq = seq&^0xffffffff | uint64(b.Seq())
				}
				if tr.open(&scratch, b, seq, true) {
					t.Errorf("byte %d changed: opened", i)
				}
			}
			if tr.open(&scratch, esp.ESP(bytes.Clone(wire)), tt.seq^1<<32, true) {
				t.Error("wrong ESN high half: opened")
			}
		})
	}
}

// TestGCM8RoundTrip seals with crypto/cipher's full tag, truncated, and
// opens with the length-corrected tag, for every payload length up to
// three blocks past both AAD sizes' padding and some large ones.
func TestGCM8RoundTrip(t *testing.T) {
	for _, esn := range []bool{false, true} {
		out, in := pair(t, ModeTransport, false, esn, 0, suites[3].set)
		if out.t.kind != suiteGCM8 {
			t.Fatalf("suite %s is not GCM8", suites[3].name)
		}
		sizes := []int{8, 9, 60, 65, 1372, 9000, 65535 - 20 - 8 - 40}
		for n := 0; n < 64; n++ {
			sizes = append(sizes, n)
		}
		for _, n := range sizes {
			t.Run(fmt.Sprintf("esn=%v/%d", esn, n), func(t *testing.T) {
				pkt := v4(protoExp, bytes.Repeat([]byte{byte(n)}, n))
				e := sealOne(t, out, pkt)
				p := openOne(in, e)
				if p.Drop != CounterNone {
					t.Fatalf("open: %v", p.Drop)
				}
				// The rebuilt header differs (IPv4 id 0): compare payloads.
				if !bytes.Equal(p.Data()[20:], pkt[20:]) {
					t.Errorf("round trip changed the payload")
				}
				bad := reseat(e)
				bad.Buf[bad.Off+bad.Len-1] ^= 1
				if p := openOne(in, bad); p.Drop != XfrmInStateProtoError {
					t.Errorf("flipped ICV: Drop = %v, want %v", p.Drop, XfrmInStateProtoError)
				}
			})
		}
	}
}

// TestGHASHLenTable: the table's product is the bitwise one, also for
// lengths past the table (which fall back to it).
func TestGHASHLenTable(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	h := [2]uint64{r.Uint64(), r.Uint64()}
	tab := newGHASHLenTable(h)
	for i := 0; i < 1000; i++ {
		bits := uint(r.IntN(ghashLenBits + 8))
		hi, lo := r.Uint64()>>(64-bits), r.Uint64()>>(64-bits)
		if bits == 0 {
			hi, lo = 0, 0
		}
		if got, want := tab.mul(hi, lo, h), gfMul([2]uint64{hi, lo}, h); got != want {
			t.Fatalf("[%#x, %#x]·H = %x, want %x", hi, lo, got, want)
		}
	}
}
