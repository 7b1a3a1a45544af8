package replay

import (
	"encoding/binary"
	"testing"
)

// fuzzSizes are the window sizes the first byte of a fuzz input picks from.
var fuzzSizes = []uint32{0, 1, 2, 32, 63, 64, 65, 100, 128, 1000, 1024, 4096}

// FuzzWindow decodes its input into a window configuration and a stream of
// operations and checks every answer against the reference model.
//
// Input: byte 0 picks the size and ESN, bytes 1-8 (big endian) are a first
// sequence number to accept, then 3 bytes per operation: a kind and a
// signed 16-bit distance from the current top.
//
//	kind%4 == 0: a packet: Check, and Advance if OK
//	kind%4 == 1: Check only
//	kind%4 == 2: Advance directly with top+distance (clamped at 0)
//	kind%4 == 3: a packet distance*4099 away (far jumps, epochs)
func FuzzWindow(f *testing.F) {
	f.Add([]byte{0x13, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xf0, 0, 0, 1, 0, 0, 1, 0, 0, 40, 0, 0xff, 0xf0, 1, 0xff, 0xe0, 2, 0, 5})
	f.Add([]byte{0x0a, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 1, 0, 0xff, 0xff, 3, 0x7f, 0xff, 0, 0xff, 0x00})
	f.Add([]byte{0x01, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 1, 0, 0xff, 0xfb, 1, 0xff, 0xfa})
	f.Add([]byte{0x17, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0xff, 0xfe, 0, 0, 3, 0, 0xff, 0x00, 3, 0x40, 0x00})
	f.Add([]byte{0x15, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xf0, 0, 0, 0x10, 0, 0, 0x20})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 9 {
			return
		}
		size := fuzzSizes[int(data[0]>>1)%len(fuzzSizes)]
		esn := data[0]&1 == 1
		start := binary.BigEndian.Uint64(data[1:9])
		if !esn {
			start &= 0xffff_ffff
		}
		var w Window
		w.Init(size, esn)
		m := newModel(size, esn)
		if got, want := w.Advance(start), m.advance(start); got != want {
			t.Fatalf("Advance(%#x) = %v, model says %v", start, got, want)
		}
		for ops := data[9:]; len(ops) >= 3; ops = ops[3:] {
			kind := ops[0] % 4
			d := int64(int16(binary.BigEndian.Uint16(ops[1:3])))
			if kind == 3 {
				d *= 4099
			}
			target := m.top + uint64(d)
			if d < 0 && uint64(-d) > m.top {
				target = 0
			}
			switch kind {
			case 0, 1, 3:
				seql := uint32(target)
				seq, v := w.Check(seql)
				mseq, mv := m.check(seql)
				if seq != mseq || v != mv {
					t.Fatalf("Check(%#x) = %#x, %v; model says %#x, %v (top %#x)", seql, seq, v, mseq, mv, m.top)
				}
				if kind == 1 || v != OK {
					continue
				}
				if got, want := w.Advance(seq), m.advance(seq); got != want {
					t.Fatalf("Advance(%#x) = %v, model says %v", seq, got, want)
				}
			case 2:
				if got, want := w.Advance(target), m.advance(target); got != want {
					t.Fatalf("Advance(%#x) = %v, model says %v (top %#x)", target, got, want, m.top)
				}
			}
			if w.Top() != m.top {
				t.Fatalf("Top() = %#x, model says %#x", w.Top(), m.top)
			}
		}
	})
}
