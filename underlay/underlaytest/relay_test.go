package underlaytest

import (
	"encoding/binary"
	"net"
	"net/netip"
	"testing"
	"time"
)

// run sends count numbered datagrams through a relay with imp and returns
// the numbers in the order they arrived, and the relay's stats.
func run(t *testing.T, imp Impairment, count int) ([]int, Stats) {
	t.Helper()
	sink, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	sink.SetReadBuffer(4 << 20)
	r, err := New(netip.MustParseAddrPort("127.0.0.1:0"), sink.LocalAddr().(*net.UDPAddr).AddrPort(), imp)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	src, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(r.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	go func() {
		var b [8]byte
		for i := range count {
			binary.BigEndian.PutUint64(b[:], uint64(i))
			src.Write(b[:])
			if i%32 == 31 {
				time.Sleep(time.Millisecond) // let the relay keep up
			}
		}
	}()
	var got []int
	b := make([]byte, 64)
	for {
		sink.SetReadDeadline(time.Now().Add(time.Second))
		n, err := sink.Read(b)
		if err != nil {
			break // quiet for a second (longer than Hold): all is in
		}
		if n == 8 {
			got = append(got, int(binary.BigEndian.Uint64(b)))
		}
	}
	return got, r.Stats()
}

func TestRelayForwardsInOrder(t *testing.T) {
	got, st := run(t, Impairment{}, 500)
	if len(got) != 500 || st.Forwarded != 500 || st.Dropped != 0 {
		t.Fatalf("got %d datagrams, stats %+v; want all 500 forwarded", len(got), st)
	}
	for i, v := range got {
		if v != i {
			t.Fatalf("datagram %d arrived at position %d", v, i)
		}
	}
}

func TestRelayLoses(t *testing.T) {
	got, st := run(t, Impairment{Loss: 0.2, Seed: 1}, 2000)
	// 400 expected; 5 standard deviations is about ±90.
	if st.Dropped < 310 || st.Dropped > 490 {
		t.Fatalf("dropped %d of 2000 at 20%%, want about 400", st.Dropped)
	}
	if len(got) != 2000-int(st.Dropped) {
		t.Fatalf("received %d, want %d (2000 less those dropped)", len(got), 2000-st.Dropped)
	}
	for i := 1; i < len(got); i++ {
		if got[i] <= got[i-1] {
			t.Fatalf("loss alone reordered: %d after %d", got[i], got[i-1])
		}
	}
}

// Every datagram held back arrives at least Distance places after the
// place it was sent at; all others keep their order.
func TestRelayReorders(t *testing.T) {
	const distance = 10
	got, st := run(t, Impairment{Reorder: 0.05, Distance: distance, Hold: 200 * time.Millisecond, Seed: 2}, 2000)
	if len(got) != 2000 {
		t.Fatalf("received %d, want 2000 (reordering loses nothing)", len(got))
	}
	if st.Reordered+st.Expired < 50 {
		t.Fatalf("stats %+v: want about 100 reordered", st)
	}
	late := 0
	maxSeen := -1
	for pos, v := range got {
		if v < maxSeen {
			late++
			if pos-v < distance {
				t.Fatalf("datagram %d arrived at %d, less than %d late", v, pos, distance)
			}
		}
		maxSeen = max(maxSeen, v)
	}
	if uint64(late) != st.Reordered+st.Expired {
		t.Fatalf("%d datagrams arrived late, relay says %d held", late, st.Reordered+st.Expired)
	}
}

func TestRelayRefusesBadImpairment(t *testing.T) {
	to := netip.MustParseAddrPort("127.0.0.1:9")
	for _, imp := range []Impairment{{Loss: -0.1}, {Loss: 1.5}, {Reorder: 2}, {Reorder: 0.1}} {
		if r, err := New(netip.MustParseAddrPort("127.0.0.1:0"), to, imp); err == nil {
			r.Close()
			t.Errorf("New accepted %+v", imp)
		}
	}
}
