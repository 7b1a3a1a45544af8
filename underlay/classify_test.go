package underlay

import "testing"

func TestClassifyUDP(t *testing.T) {
	tests := []struct {
		name string
		b    []byte
		want kind
	}{
		{"keepalive", []byte{0xff}, kindKeepalive},
		{"one other byte", []byte{0x01}, kindShort},
		{"empty", nil, kindShort},
		{"non-ESP marker, IKE", []byte{0, 0, 0, 0, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88}, kindNonESP},
		{"non-ESP marker alone", []byte{0, 0, 0, 0}, kindNonESP},
		{"seven bytes", []byte{0, 0, 0x10, 0x01, 0, 0, 0}, kindShort},
		{"smallest ESP", []byte{0, 0, 0x10, 0x01, 0, 0, 0, 1}, kindESP},
		{"two 0xff", []byte{0xff, 0xff}, kindShort},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := classifyUDP(tt.b); got != tt.want {
				t.Errorf("classifyUDP(% x) = %d, want %d", tt.b, got, tt.want)
			}
		})
	}
}

func TestClassifyRaw(t *testing.T) {
	tests := []struct {
		name string
		b    []byte
		want kind
	}{
		{"ESP", []byte{0, 0, 0x10, 0x01, 0, 0, 0, 1}, kindESP},
		{"SPI 0", []byte{0, 0, 0, 0, 0, 0, 0, 1}, kindShort},
		{"short", []byte{0, 0, 0x10, 0x01}, kindShort},
		{"keepalive is not special", []byte{0xff}, kindShort},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := classifyRaw(tt.b); got != tt.want {
				t.Errorf("classifyRaw(% x) = %d, want %d", tt.b, got, tt.want)
			}
		})
	}
}

func TestIPv4Payload(t *testing.T) {
	hdr := func(vihl byte, n int) []byte {
		b := make([]byte, n)
		b[0] = vihl
		return b
	}
	tests := []struct {
		name string
		b    []byte
		want int
	}{
		{"plain header", hdr(0x45, 28), 20},
		{"with options", hdr(0x46, 28), 24},
		{"largest header", hdr(0x4f, 60), 60},
		{"header longer than packet", hdr(0x4f, 40), -1},
		{"IHL below 5", hdr(0x44, 28), -1},
		{"IPv6 version", hdr(0x65, 28), -1},
		{"short", hdr(0x45, 19), -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ipv4Payload(tt.b); got != tt.want {
				t.Errorf("ipv4Payload = %d, want %d", got, tt.want)
			}
		})
	}
}

// FuzzClassify: the parsers of bytes from the network never panic, and an
// accepted packet is at least an ESP header.
func FuzzClassify(f *testing.F) {
	f.Add([]byte{0xff})
	f.Add([]byte{0, 0, 0, 0, 1})
	f.Add([]byte{0x45, 0, 0, 28, 0, 0, 0, 0, 64, 50, 0, 0, 127, 0, 0, 1, 127, 0, 0, 1, 0, 0, 0x10, 1, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		if classifyUDP(b) == kindESP && len(b) < minESP {
			t.Fatalf("classifyUDP accepted %d bytes", len(b))
		}
		if classifyRaw(b) == kindESP && (len(b) < minESP || b[0]|b[1]|b[2]|b[3] == 0) {
			t.Fatalf("classifyRaw accepted % x", b)
		}
		if off := ipv4Payload(b); off > len(b) || (off >= 0 && off < 20) {
			t.Fatalf("ipv4Payload = %d for %d bytes", off, len(b))
		}
	})
}

func BenchmarkIPv4Payload(b *testing.B) {
	pkt := make([]byte, 1400)
	pkt[0] = 0x45
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		n += ipv4Payload(pkt)
	}
	if n < 0 {
		b.Fatal("refused")
	}
}
