package sa

import (
	"crypto/aes"
	"crypto/cipher"
	"fmt"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/chacha20poly1305"
)

var benchSizes = []int{64, 1400, 65535 - 64}

// BenchmarkSeal seals one packet per op with each suite, beside a raw
// cipher.AEAD.Seal of the same size (the ESP overhead is the difference).
func BenchmarkSeal(b *testing.B) {
	for _, su := range suites {
		for _, n := range benchSizes {
			b.Run(fmt.Sprintf("%s/%d", su.name, n), func(b *testing.B) {
				out, _ := pair(b, ModeTunnel, false, true, 0, su.set)
				pkt := ipv4Packet(n - 28)
				ps := []Packet{mkPacket(pkt)}
				b.ReportAllocs()
				b.SetBytes(int64(n))
				for b.Loop() {
					// The last seal left ciphertext there; only the
					// version nibble is read, so restore just that
					// (the raw AEAD below copies nothing either).
					ps[0].Buf[Headroom] = 0x45
					ps[0].Off, ps[0].Len = Headroom, n
					out.SealBatch(ps)
					if ps[0].Drop != CounterNone {
						b.Fatal(ps[0].Drop)
					}
				}
			})
		}
	}
	raw := map[string]func() cipher.AEAD{
		"raw-aes128gcm16":      func() cipher.AEAD { c, _ := aes.NewCipher(seqKey(16, 1)); a, _ := cipher.NewGCM(c); return a },
		"raw-chacha20poly1305": func() cipher.AEAD { a, _ := chacha20poly1305.New(seqKey(32, 1)); return a },
	}
	for name, mk := range raw {
		for _, n := range benchSizes {
			b.Run(fmt.Sprintf("%s/%d", name, n), func(b *testing.B) {
				a := mk()
				buf := make([]byte, n+16)
				nonce := make([]byte, 12)
				ad := make([]byte, 8)
				b.ReportAllocs()
				b.SetBytes(int64(n))
				for b.Loop() {
					a.Seal(buf[:0], nonce, buf[:n], ad)
				}
			})
		}
	}
}

func BenchmarkOpen(b *testing.B) {
	for _, su := range suites {
		for _, n := range benchSizes {
			b.Run(fmt.Sprintf("%s/%d", su.name, n), func(b *testing.B) {
				out, in := pair(b, ModeTunnel, false, true, 0, su.set)
				e := sealOne(b, out, ipv4Packet(n-28))
				wire := append([]byte{}, e.Data()...)
				ps := []Packet{mkPacket(wire)}
				b.ReportAllocs()
				b.SetBytes(int64(n))
				for b.Loop() {
					copy(ps[0].Buf[Headroom:], wire)
					ps[0].Off, ps[0].Len = Headroom, len(wire)
					in.OpenBatch(ps)
					if ps[0].Drop != CounterNone {
						b.Fatal(ps[0].Drop)
					}
				}
			})
		}
	}
}

// BenchmarkOpenParallel opens packets of one SA from many goroutines, in
// batches of 8 (one critical section per batch). Anti-replay is off
// (window 0) so that goroutines replaying a shared set of packets are not
// dropped, but every packet still takes the SA's lock to advance the
// window and count. ns/op (per batch of 8) must not grow with -cpu
// (docs/design.md, lesson 1).
func BenchmarkOpenParallel(b *testing.B) {
	const batch = 8
	const ring = 256
	out, in := pair(b, ModeTunnel, false, true, 0, suites[0].set)
	var wire [][]byte
	for i := 0; i < ring; i++ {
		e := sealOne(b, out, ipv4Packet(1400-28))
		wire = append(wire, append([]byte{}, e.Data()...))
	}
	var next atomic.Int64
	b.ReportAllocs()
	b.SetBytes(1400 * batch)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := int(next.Add(1)) * 17
		ps := make([]Packet, batch)
		for k := range ps {
			ps[k] = mkPacket(wire[0])
		}
		for pb.Next() {
			for k := range ps {
				w := wire[i%ring]
				i++
				copy(ps[k].Buf[Headroom:], w)
				ps[k].Off, ps[k].Len = Headroom, len(w)
			}
			in.OpenBatch(ps)
			if ps[0].Drop != CounterNone {
				panic(ps[0].Drop.String())
			}
		}
	})
}

// BenchmarkSealParallel seals batches of 8 packets of 1400 bytes on one
// SA from every goroutine, as the send workers of many TUN queues do:
// docs/design.md lesson 1 wants the time per batch not to grow with -cpu (the
// sequence numbers and the retire guard are one atomic add each per
// batch).
func BenchmarkSealParallel(b *testing.B) {
	const batch = 8
	out, _ := pair(b, ModeTunnel, false, true, 0, suites[0].set) // ESN: no sequence limit
	plain := ipv4Packet(1400 - 28)
	b.ReportAllocs()
	b.SetBytes(1400 * batch)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ps := make([]Packet, batch)
		for k := range ps {
			ps[k] = mkPacket(plain)
		}
		for pb.Next() {
			for k := range ps {
				copy(ps[k].Buf[Headroom:], plain)
				ps[k].Off, ps[k].Len = Headroom, len(plain)
			}
			out.SealBatch(ps)
			if ps[0].Drop != CounterNone {
				panic(ps[0].Drop.String())
			}
		}
	})
}

func BenchmarkLookup(b *testing.B) {
	for _, n := range []int{1, 1000, 100_000} {
		d := NewSAD(nil)
		if err := d.Replace(manySAs(b, n), nil); err != nil {
			b.Fatal(err)
		}
		i := n / 2
		pkt := v4to(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}).String())
		b.Run(fmt.Sprintf("in/%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if d.LookupIn(uint32(0x1000+i), netip.Addr{}) == nil {
					b.Fatal("miss")
				}
			}
		})
		b.Run(fmt.Sprintf("out/%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if s, _ := d.LookupOut(uint32(i+1), pkt); s == nil {
					b.Fatal("miss")
				}
			}
		})
	}
}

// BenchmarkLookupPolicy: an outbound lookup through an allow policy, with
// the SA there (hit) and, for an on-demand child, not yet (trap: the
// miss a flood towards it costs, its Acquire already raised).
func BenchmarkLookupPolicy(b *testing.B) {
	d := NewSAD(nil)
	pol := Policy{Dir: DirOut, IfID: 1, Selector: sel("192.0.2.0/24", "203.0.113.0/24"), Action: ActionAllow}
	if err := d.AddPolicy(pol); err != nil {
		b.Fatal(err)
	}
	if err := d.AddPolicy(Policy{Dir: DirOut, IfID: 2, Selector: pol.Selector, Action: ActionAllow}); err != nil {
		b.Fatal(err)
	}
	if err := d.Add(newOut(b, 0x100, 1, pol.Selector)); err != nil {
		b.Fatal(err)
	}
	d.SetAcquireHandler(func(Acquire) {}, time.Hour)
	pkt := v4to("203.0.113.7")
	b.Run("hit", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if s, _ := d.LookupOut(1, pkt); s == nil {
				b.Fatal("miss")
			}
		}
	})
	b.Run("trap", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if s, _ := d.LookupOut(2, pkt); s != nil {
				b.Fatal("hit")
			}
		}
	})
}
