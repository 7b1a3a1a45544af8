package sa

import (
	"fmt"
	"net/netip"
	"testing"
)

func TestTSPrefixes(t *testing.T) {
	a := netip.MustParseAddr
	tests := []struct {
		name string
		ts   TS
		want string
	}{
		{"everything of IPv4, TCP only", TS{Start: a("0.0.0.0"), End: a("255.255.255.255"), Proto: 6, EndPort: 0xffff}, "[0.0.0.0/0]"},
		{"everything of IPv6", TS{Start: a("::"), End: a("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"), EndPort: 0xffff}, "[::/0]"},
		{"a range", TS{Start: a("10.0.0.1"), End: a("10.0.0.6"), EndPort: 0xffff}, "[10.0.0.1/32 10.0.0.2/31 10.0.0.4/31 10.0.0.6/32]"},
		{"one prefix, port 443", PrefixTS(netip.MustParsePrefix("203.0.113.0/24")), "[203.0.113.0/24]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := fmt.Sprint(tt.ts.Prefixes()); got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
}
