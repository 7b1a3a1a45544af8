package pool

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/big"
	"math/bits"
	"net/netip"
	"strings"
)

// MaxSize is the most addresses a pool hands out: a larger prefix (an
// IPv6 /64) serves its first MaxSize addresses, as strongSwan limits its
// pools to 2^31.
const MaxSize = 1 << 31

// ErrBadRange is wrapped by ParseRange's errors.
var ErrBadRange = errors.New("pool: bad addrs")

// Range is the addresses a pool hands out: Size addresses from First,
// all of one family. The zero value is empty.
type Range struct {
	First netip.Addr
	Size  uint32
	text  string // as written, for String
}

// ParseRange parses a pool's addrs as swanctl.conf writes them: a prefix
// (10.3.0.0/24, fd00:3::/120) or a range of two addresses
// (10.3.0.10-10.3.0.200). Of a prefix of more than two addresses, the
// first (when it is the network's) and the last are not handed out; a
// prefix with host bits set starts at that address, as strongSwan's pools
// do. A range hands out every address in it.
func ParseRange(s string) (Range, error) {
	if from, to, ok := strings.Cut(s, "-"); ok {
		return parseFromTo(s, strings.TrimSpace(from), strings.TrimSpace(to))
	}
	p, err := netip.ParsePrefix(s)
	if err != nil || p.Addr().Zone() != "" {
		return Range{}, fmt.Errorf("%w: want a prefix (10.3.0.0/24) or a range (10.3.0.10-10.3.0.200), got %q", ErrBadRange, s)
	}
	a := p.Addr().Unmap()
	hostBits := a.BitLen() - p.Bits()
	if p.Addr().Is4In6() {
		hostBits = 128 - p.Bits()
	}
	if hostBits < 0 {
		return Range{}, fmt.Errorf("%w: %q is not a prefix", ErrBadRange, s)
	}
	// The addresses of the prefix before a are not handed out; of a
	// prefix of more than two, neither is the network address itself
	// nor the last one.
	size := new(big.Int).Lsh(big.NewInt(1), uint(hostBits))
	host := new(big.Int).Sub(addrInt(a), addrInt(p.Masked().Addr().Unmap()))
	first := a
	if size.Cmp(big.NewInt(2)) > 0 {
		if host.Sign() == 0 {
			first = a.Next()
			host.SetInt64(1)
		}
		size.Sub(size, big.NewInt(1))
	}
	size.Sub(size, host)
	if size.Cmp(big.NewInt(MaxSize)) > 0 {
		size.SetInt64(MaxSize)
	}
	return Range{First: first, Size: uint32(size.Uint64()), text: s}, nil
}

func parseFromTo(s, from, to string) (Range, error) {
	a, errA := netip.ParseAddr(from)
	b, errB := netip.ParseAddr(to)
	switch {
	case errA != nil || errB != nil || a.Zone() != "" || b.Zone() != "":
		return Range{}, fmt.Errorf("%w: want a range of two addresses (10.3.0.10-10.3.0.200), got %q", ErrBadRange, s)
	case a.Unmap().Is4() != b.Unmap().Is4():
		return Range{}, fmt.Errorf("%w: %q mixes an IPv4 and an IPv6 address", ErrBadRange, s)
	}
	a, b = a.Unmap(), b.Unmap()
	if b.Less(a) {
		return Range{}, fmt.Errorf("%w: %q ends before it starts", ErrBadRange, s)
	}
	n := new(big.Int).Sub(addrInt(b), addrInt(a))
	if n.Cmp(big.NewInt(MaxSize-1)) > 0 {
		return Range{}, fmt.Errorf("%w: %q has more than %d addresses, the most a pool holds", ErrBadRange, s, MaxSize)
	}
	return Range{First: a, Size: uint32(n.Uint64()) + 1, text: s}, nil
}

// String returns the range as it was written (ParseRange), or as
// FIRST-LAST.
func (r Range) String() string {
	if r.text != "" {
		return r.text
	}
	if r.Size == 0 {
		return "empty"
	}
	return r.First.String() + "-" + r.Addr(r.Size-1).String()
}

// Is6 reports whether the range holds IPv6 addresses.
func (r Range) Is6() bool { return r.First.Is6() }

// Addr returns the address at offset off (0 is First); off < r.Size.
func (r Range) Addr(off uint32) netip.Addr {
	b := r.First.As16()
	carry := uint64(off)
	for i := 15; i >= 0 && carry != 0; i-- {
		v := uint64(b[i]) + carry&0xff
		b[i] = byte(v)
		carry = carry>>8 + v>>8
	}
	a := netip.AddrFrom16(b)
	if r.First.Is4() {
		a = a.Unmap()
	}
	return a
}

// Offset returns a's offset in r, false when r does not hold a.
func (r Range) Offset(a netip.Addr) (uint32, bool) {
	a = a.Unmap()
	if r.Size == 0 || a.Is4() != r.First.Is4() || a.Less(r.First) {
		return 0, false
	}
	x, f := a.As16(), r.First.As16()
	hi := binary.BigEndian.Uint64(x[:8]) - binary.BigEndian.Uint64(f[:8])
	lo, borrow := bits.Sub64(binary.BigEndian.Uint64(x[8:]), binary.BigEndian.Uint64(f[8:]), 0)
	hi -= borrow
	if hi != 0 || lo >= uint64(r.Size) {
		return 0, false
	}
	return uint32(lo), true
}

func addrInt(a netip.Addr) *big.Int {
	b := a.As16()
	if a.Is4() {
		return new(big.Int).SetBytes(b[12:])
	}
	return new(big.Int).SetBytes(b[:])
}

// Prefixes returns the fewest prefixes that together hold exactly the
// range's addresses, in order: what a traffic selector or a route of the
// whole pool takes.
func (r Range) Prefixes() []netip.Prefix {
	var ps []netip.Prefix
	bitLen := r.First.BitLen()
	for off, left := uint64(0), uint64(r.Size); left > 0; {
		a := r.Addr(uint32(off))
		// The largest block that starts at a (a's trailing zero bits)
		// and fits in what is left.
		b := a.As16()
		tz := bits.TrailingZeros64(binary.BigEndian.Uint64(b[8:]))
		if tz == 64 {
			tz = 64 + bits.TrailingZeros64(binary.BigEndian.Uint64(b[:8]))
		}
		n := min(tz, bitLen, 63-bits.LeadingZeros64(left))
		ps = append(ps, netip.PrefixFrom(a, bitLen-n))
		off += 1 << n
		left -= 1 << n
	}
	return ps
}
