package underlay

import (
	"net/netip"
	"strconv"
	"testing"
	"time"
)

// loopbackPair opens two UDP Conns on 127.0.0.1 and returns a's batch of
// n messages of size bytes to b, b's Reader, and buffers to read into.
func loopbackPair(tb testing.TB, cfg Config, n, size int) (a *Conn, sent []Message, r *Reader, recv []Message) {
	lo := netip.MustParseAddr("127.0.0.1")
	cfg.UDP = netip.AddrPortFrom(lo, 0)
	a, b := openConn(tb, cfg), openConn(tb, cfg)
	sent = newMessages(n)
	fillBatch(sent, []int{size}, netip.AddrPortFrom(lo, b.Port()), false)
	r = readerFor(tb, b, false, false)
	if err := r.SetReadDeadline(time.Now().Add(time.Minute)); err != nil {
		tb.Fatal(err)
	}
	return a, sent, r, newMessages(BatchSize)
}

// roundTrip writes sent and reads until as many packets arrived.
func roundTrip(tb testing.TB, a *Conn, sent []Message, r *Reader, recv []Message) {
	if err := a.WriteBatch(sent); err != nil {
		tb.Fatal(err)
	}
	for got := 0; got < len(sent); {
		n, err := r.ReadBatch(recv)
		if err != nil {
			tb.Fatalf("ReadBatch after %d of %d: %v", got, len(sent), err)
		}
		got += n
	}
}

// TestAllocs: WriteBatch and ReadBatch do not allocate in steady state,
// with and without GSO/GRO.
func TestAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items under the race detector")
	}
	for _, off := range offloads {
		t.Run(off.name, func(t *testing.T) {
			a, sent, r, recv := loopbackPair(t, off.cfg, 64, 1400)
			roundTrip(t, a, sent, r, recv) // warm up
			allocs := testing.AllocsPerRun(50, func() { roundTrip(t, a, sent, r, recv) })
			if allocs != 0 {
				t.Errorf("%v allocations per write+read of 64 packets, want 0", allocs)
			}
			mine := append([]Message(nil), recv...)
			allocs = testing.AllocsPerRun(50, func() {
				if err := a.WriteBatch(sent); err != nil {
					t.Fatal(err)
				}
				for got := 0; got < len(sent); {
					copy(recv, mine)
					n, err := r.ReadBatchBorrowed(recv)
					if err != nil {
						t.Fatal(err)
					}
					got += n
				}
			})
			if allocs != 0 {
				t.Errorf("%v allocations per write+borrowed read of 64 packets, want 0", allocs)
			}
		})
	}
}

// BenchmarkLoopbackUDP: batches of 64 ESP-sized packets written and read
// back over loopback, one goroutine, with and without GSO/GRO.
func BenchmarkLoopbackUDP(b *testing.B) {
	const batch = 64
	for _, size := range []int{64, 1400} {
		for _, off := range offloads {
			b.Run(off.name+"/"+strconv.Itoa(size), func(b *testing.B) {
				a, sent, r, recv := loopbackPair(b, off.cfg, batch, size)
				b.ReportAllocs()
				b.SetBytes(batch * int64(size))
				for b.Loop() {
					roundTrip(b, a, sent, r, recv)
				}
				b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "pkt/s")
			})
		}
	}
}
