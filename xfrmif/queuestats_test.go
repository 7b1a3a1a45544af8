package xfrmif

import "testing"

// TestQueueStats: each queue's counters show what went through that
// queue, and their sum is Stats.
func TestQueueStats(t *testing.T) {
	l := newFakeLink(3)
	ifc, err := NewInterface(Config{Name: "ipsec1", IfID: 1, Queues: 3}, l)
	if err != nil {
		t.Fatal(err)
	}
	defer ifc.Close()

	// rx: 2 packets of 5 bytes through queue 0, 3 of 7 through queue 2.
	if _, err := ifc.WriteQueue(0, [][]byte{make([]byte, 16+5), make([]byte, 16+5)}, 16); err != nil {
		t.Fatal(err)
	}
	if _, err := ifc.WriteQueue(2, [][]byte{make([]byte, 16+7), make([]byte, 16+7), make([]byte, 16+7)}, 16); err != nil {
		t.Fatal(err)
	}
	// tx: one packet of 4 bytes read from queue 1, and drops.
	l.queues[1].(*fakeQueue).in <- []byte("abcd")
	bufs, sizes := [][]byte{make([]byte, 64+1500)}, []int{0}
	if n, err := ifc.ReadQueue(1, bufs, sizes, 64); n != 1 || err != nil {
		t.Fatalf("ReadQueue = %d, %v, want 1 packet", n, err)
	}
	ifc.CountTxDrops(1, 1)
	ifc.CountRxDrops(2, 4)

	got := ifc.QueueStats()
	want := []Stats{
		{RxPackets: 2, RxBytes: 10},
		{TxPackets: 1, TxBytes: 4, TxDrops: 1},
		{RxPackets: 3, RxBytes: 21, RxDrops: 4},
	}
	if len(got) != len(want) {
		t.Fatalf("QueueStats has %d queues, want %d", len(got), len(want))
	}
	var sum Stats
	for q := range want {
		if got[q] != want[q] {
			t.Errorf("queue %d: got %+v, want %+v", q, got[q], want[q])
		}
		sum = sum.Add(got[q])
	}
	if st := ifc.Stats(); st != sum {
		t.Errorf("Stats() = %+v, want the sum of the queues %+v", st, sum)
	}
}
