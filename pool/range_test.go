package pool

import (
	"errors"
	"fmt"
	"net/netip"
	"testing"
)

func TestParseRange(t *testing.T) {
	for _, tt := range []struct {
		in          string
		first, last string
		size        uint32
	}{
		{"10.3.0.0/24", "10.3.0.1", "10.3.0.254", 254},
		{"10.3.0.5/24", "10.3.0.5", "10.3.0.254", 250},
		{"10.3.0.0/31", "10.3.0.0", "10.3.0.1", 2},
		{"10.3.0.1/31", "10.3.0.1", "10.3.0.1", 1},
		{"10.3.0.7/32", "10.3.0.7", "10.3.0.7", 1},
		{"10.3.0.10-10.3.0.200", "10.3.0.10", "10.3.0.200", 191},
		{"10.3.0.10 - 10.3.0.10", "10.3.0.10", "10.3.0.10", 1},
		{"10.3.0.250-10.3.1.5", "10.3.0.250", "10.3.1.5", 12},
		{"fd00:3::/120", "fd00:3::1", "fd00:3::fe", 254},
		{"2001:db8::/64", "2001:db8::1", "2001:db8::8000:0", MaxSize},
		{"2001:db8::ffff:fffe-2001:db8::1:0:1", "2001:db8::ffff:fffe", "2001:db8::1:0:1", 4},
		{"0.0.0.0/0", "0.0.0.1", "128.0.0.0", MaxSize},
	} {
		t.Run(tt.in, func(t *testing.T) {
			r, err := ParseRange(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if r.Size != tt.size || r.First.String() != tt.first || r.Addr(r.Size-1).String() != tt.last {
				t.Errorf("got %s..%s (%d), want %s..%s (%d)", r.First, r.Addr(r.Size-1), r.Size, tt.first, tt.last, tt.size)
			}
			if r.String() != tt.in {
				t.Errorf("String() = %q, want %q", r.String(), tt.in)
			}
			for _, off := range []uint32{0, 1, r.Size / 2, r.Size - 1} {
				if off >= r.Size {
					continue
				}
				if got, ok := r.Offset(r.Addr(off)); !ok || got != off {
					t.Errorf("Offset(Addr(%d) = %s) = %d, %t", off, r.Addr(off), got, ok)
				}
			}
		})
	}
}

func TestParseRangeErrors(t *testing.T) {
	for _, in := range []string{"", "10.3.0.0", "10.3.0.0/33", "vpn", "10.3.0.9-10.3.0.1", "10.3.0.1-fd00::1",
		"fd00::-fd00::1:0:0:0", "10.3.0.1-", "fe80::1%eth0/64"} {
		if r, err := ParseRange(in); !errors.Is(err, ErrBadRange) {
			t.Errorf("ParseRange(%q) = %v, %v; want ErrBadRange", in, r, err)
		}
	}
}

func TestOffsetOutside(t *testing.T) {
	r, _ := ParseRange("10.3.0.10-10.3.0.20")
	for _, a := range []string{"10.3.0.9", "10.3.0.21", "10.4.0.10", "::ffff:10.3.0.30", "fd00::a", "0.0.0.0"} {
		if off, ok := r.Offset(netip.MustParseAddr(a)); ok {
			t.Errorf("Offset(%s) = %d, want outside", a, off)
		}
	}
	if off, ok := r.Offset(netip.MustParseAddr("::ffff:10.3.0.12")); !ok || off != 2 {
		t.Errorf("Offset(::ffff:10.3.0.12) = %d, %t; want 2 (an IPv4-mapped address is its IPv4 address)", off, ok)
	}
}

func TestPrefixes(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"10.3.0.0/24", "[10.3.0.1/32 10.3.0.2/31 10.3.0.4/30 10.3.0.8/29 10.3.0.16/28 10.3.0.32/27 10.3.0.64/26 10.3.0.128/26 10.3.0.192/27 10.3.0.224/28 10.3.0.240/29 10.3.0.248/30 10.3.0.252/31 10.3.0.254/32]"},
		{"10.3.0.0-10.3.0.255", "[10.3.0.0/24]"},
		{"10.3.0.10-10.3.0.20", "[10.3.0.10/31 10.3.0.12/30 10.3.0.16/30 10.3.0.20/32]"},
		{"10.3.0.7/32", "[10.3.0.7/32]"},
		{"fd00:3::-fd00:3::ffff", "[fd00:3::/112]"},
		{"0.0.0.0-127.255.255.255", "[0.0.0.0/1]"},
	} {
		r, err := ParseRange(tt.in)
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(r.Prefixes()); got != tt.want {
			t.Errorf("%s: got %s, want %s", tt.in, got, tt.want)
		}
	}
}
