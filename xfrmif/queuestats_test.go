package xfrmif

import (
	"context"
	"testing"
	"time"
)

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
	// tx: one packet of 4 bytes read by queue 1's worker, and drops.
	ctx, cancel := context.WithCancel(context.Background())
	handled := make(chan struct{}, 1)
	done := make(chan error, 1)
	go func() {
		done <- ifc.RunQueue(ctx, 1, QueueBuffers{Headroom: 64, PacketSize: 1500}, func([][]byte, []int, int) { handled <- struct{}{} })
	}()
	l.queues[1].(*fakeQueue).in <- []byte("abcd")
	select {
	case <-handled:
	case <-time.After(5 * time.Second):
		t.Fatal("queue 1 handled no packet within 5 s")
	}
	cancel()
	l.queues[1].(*fakeQueue).in <- []byte("wake") // RunQueue checks ctx between reads
	<-done
	ifc.CountTxDrops(1, 1)
	ifc.CountRxDrops(2, 4)

	got := ifc.QueueStats()
	// The wake-up packet may or may not have been read before ctx was
	// seen: take queue 1's tx from what was counted, at least 1.
	if got[1].TxPackets < 1 || got[1].TxBytes != 4*got[1].TxPackets {
		t.Fatalf("queue 1 tx = %d packets %d bytes, want >= 1 packets of 4 bytes", got[1].TxPackets, got[1].TxBytes)
	}
	want := []Stats{
		{RxPackets: 2, RxBytes: 10},
		{TxPackets: got[1].TxPackets, TxBytes: got[1].TxBytes, TxDrops: 1},
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
