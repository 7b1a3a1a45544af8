package esp

import (
	"bytes"
	"testing"
)

func TestPadLen(t *testing.T) {
	tests := []struct{ n, align, want int }{
		{0, 4, 2}, {1, 4, 1}, {2, 4, 0}, {84, 4, 2}, // RFC 7634 App. A: 84-byte inner packet, 2 pad bytes
		{46, 16, 0}, {47, 16, 15}, {14, 16, 0}, {0, 16, 14},
	}
	for _, tt := range tests {
		if got := PadLen(tt.n, tt.align); got != tt.want {
			t.Errorf("PadLen(%d, %d) = %d, want %d", tt.n, tt.align, got, tt.want)
		}
		if (tt.n+tt.want+TrailerLen)%tt.align != 0 {
			t.Errorf("PadLen(%d, %d) leaves the payload unaligned", tt.n, tt.align)
		}
	}
}

func TestTrailer(t *testing.T) {
	tests := []struct {
		name    string
		plain   []byte
		wantLen int
		wantNH  uint8
		wantOK  bool
	}{
		{"no padding", []byte{0xaa, 0xbb, 0, 4}, 2, 4, true},
		{"two pad bytes", []byte{0xaa, 1, 2, 2, 41}, 1, 41, true},
		{"padding only", []byte{1, 2, 3, 3, 59}, 0, 59, true},
		{"bad pad byte", []byte{0xaa, 1, 3, 2, 4}, 0, 0, false},
		{"pad length past payload", []byte{1, 2, 3, 4}, 0, 0, false},
		{"too short", []byte{4}, 0, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, nh, ok := ParseTrailer(tt.plain)
			if ok != tt.wantOK || (ok && (n != tt.wantLen || nh != tt.wantNH)) {
				t.Errorf("ParseTrailer(%x) = %d, %d, %v; want %d, %d, %v", tt.plain, n, nh, ok, tt.wantLen, tt.wantNH, tt.wantOK)
			}
		})
	}
	b := make([]byte, 7+TrailerLen)
	WriteTrailer(b, 4)
	if want := []byte{1, 2, 3, 4, 5, 6, 7, 7, 4}; !bytes.Equal(b, want) {
		t.Errorf("WriteTrailer = %x, want %x", b, want)
	}
}

func TestESP(t *testing.T) {
	// RFC 7634 Appendix A: SPI 0x01020304, sequence number 5.
	b := ESP{1, 2, 3, 4, 0, 0, 0, 5, 0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17}
	if got := b.SPI(); got != 0x01020304 {
		t.Errorf("SPI = %#x, want 0x01020304", got)
	}
	if got := b.Seq(); got != 5 {
		t.Errorf("Seq = %d, want 5", got)
	}
	if !bytes.Equal(b.IV(8), []byte{0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17}) {
		t.Errorf("IV = %x", b.IV(8))
	}
	if b.IsValid(8, 16, 4) {
		t.Error("a header without trailer and ICV is valid")
	}
	full := make(ESP, 8+8+4+16)
	if !full.IsValid(8, 16, 4) {
		t.Error("a minimal packet is not valid")
	}
	if full[:len(full)-1].IsValid(8, 16, 4) {
		t.Error("an unaligned packet is valid")
	}
	if _, ok := SPIOf(b[:7]); ok {
		t.Error("SPIOf of 7 bytes succeeded")
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 0, 0, 0, 5, 0x10, 0x11, 1, 2, 2, 4})
	f.Add([]byte{0xaa, 1, 2, 2, 41})
	f.Fuzz(func(t *testing.T, b []byte) {
		n, _, ok := ParseTrailer(b)
		if ok && (n < 0 || n+TrailerLen > len(b)) {
			t.Fatalf("ParseTrailer(%x) = %d past the input", b, n)
		}
		for _, iv := range []int{0, 8, 16} {
			e := ESP(b)
			if e.IsValid(iv, 16, 4) {
				_ = e.Encrypted(iv, 16)
				_ = e.ICV(16)
				_ = e.SPI() + e.Seq()
			}
		}
		SPIOf(b)
	})
}
