package sa

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"
)

// BenchmarkSADInstallChild adds one road warrior's pair of SAs to a SAD
// that holds n others on the same interface (each outbound SA for its
// client's /32, as IKE's remote_ts = dynamic makes them) and removes it
// again, in two table changes: by Update, which copies what the pair
// touches, and by Replace with every SA, as the node did before Update.
func BenchmarkSADInstallChild(b *testing.B) {
	for _, n := range []int{10, 1000, 10000} {
		for _, how := range []string{"update", "replace"} {
			b.Run(fmt.Sprintf("sas=%d/%s", n, how), func(b *testing.B) { benchSADInstallChild(b, n, how == "update") })
		}
	}
}

// roadWarriorPair returns client i's inbound and outbound SAs.
func roadWarriorPair(b *testing.B, i int) (in, out *SA) {
	var a [4]byte
	binary.BigEndian.PutUint32(a[:], 10<<24+uint32(i)+1)
	vip, gw := netip.PrefixFrom(netip.AddrFrom4(a), 32), netip.MustParsePrefix("10.255.0.0/16")
	key := &Algorithm{Name: AlgGCM, Key: seqKey(20, byte(i))}
	var err error
	in, err = New(Config{Src: outer4b, Dst: outer4a, SPI: uint32(0x10000 + 2*i), Dir: DirIn, Mode: ModeTunnel, IfID: 1,
		Selector: Selector{Src: vip, Dst: gw}, AEAD: key}, nil)
	if err != nil {
		b.Fatal(err)
	}
	out, err = New(Config{Src: outer4a, Dst: outer4b, SPI: uint32(0x10001 + 2*i), Dir: DirOut, Mode: ModeTunnel, IfID: 1,
		Selector: Selector{Src: gw, Dst: vip}, AEAD: key}, nil)
	if err != nil {
		b.Fatal(err)
	}
	return in, out
}

func benchSADInstallChild(b *testing.B, n int, update bool) {
	d := NewSAD(nil)
	var all []*SA
	for i := range n / 2 {
		in, out := roadWarriorPair(b, i)
		all = append(all, in, out)
	}
	if err := d.Replace(all, nil); err != nil {
		b.Fatal(err)
	}
	// A removed SA cannot come back: each round needs a new pair, made
	// in batches outside the timer (stopping it costs more than a round).
	var pairs [][2]*SA
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if i%256 == 0 {
			b.StopTimer()
			pairs = pairs[:0]
			for range min(256, b.N-i) {
				in, out := roadWarriorPair(b, n/2)
				pairs = append(pairs, [2]*SA{in, out})
			}
			b.StartTimer()
		}
		in, out := pairs[i%256][0], pairs[i%256][1]
		if update {
			if err := d.Update(nil, []*SA{in, out}); err != nil {
				b.Fatal(err)
			}
			if err := d.Update([]*SA{in, out}, nil); err != nil {
				b.Fatal(err)
			}
			continue
		}
		if err := d.Replace(append(all, in, out), nil); err != nil {
			b.Fatal(err)
		}
		if err := d.Replace(all, nil); err != nil {
			b.Fatal(err)
		}
	}
}
