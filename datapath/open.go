package datapath

import (
	"encoding/binary"
	"net/netip"
	"sync"

	"github.com/ipsecd/ipsecd/sa"
	"github.com/ipsecd/ipsecd/sa/esp"
)

// minChunk is the fewest packets worth handing to another goroutine: below
// it the hand-off costs more than the decryption it spreads.
const minChunk = 16

// openJob is a slice of a receiver's batch for one of its openers.
type openJob struct {
	pkts []sa.Packet
	done *sync.WaitGroup
}

// openers spread the opening of a receiver's batches over several
// goroutines: the receiver opens the first chunk itself and waits for the
// others, then delivers the whole batch in the order it arrived. Many
// goroutines opening one SA at once is what the SA's single short
// critical section is for (docs/design.md, lesson 1).
type openers struct {
	n    int // goroutines opening a batch, the receiver included
	jobs chan openJob
	wg   sync.WaitGroup // the chunks of the batch in flight

	splits uint64 // batches opened in parallel, for tests
}

// start starts n-1 helper goroutines, counted in running (the engine's
// workers, so that Engine.Wait waits for them too); stop ends them.
func (o *openers) start(sad *sa.SAD, n int, running *sync.WaitGroup) {
	o.n = n
	if n <= 1 {
		return
	}
	o.jobs = make(chan openJob, n)
	for range n - 1 {
		running.Add(1)
		go func() {
			defer running.Done()
			o.routineOpen(sad)
		}()
	}
}

// routineOpen is a helper: it opens the chunks it is given until stop.
func (o *openers) routineOpen(sad *sa.SAD) {
	for j := range o.jobs {
		sad.OpenBatch(j.pkts)
		j.done.Done()
	}
}

func (o *openers) stop() {
	if o.jobs != nil {
		close(o.jobs)
	}
}

// open opens the batch, in parallel chunks when that is safe.
func (o *openers) open(sad *sa.SAD, pkts []sa.Packet) {
	k := min(o.n, len(pkts)/minChunk)
	if k <= 1 || !splittable(sad, pkts) {
		sad.OpenBatch(pkts)
		return
	}
	o.splits++
	size := (len(pkts) + k - 1) / k
	for lo := size; lo < len(pkts); lo += size {
		o.wg.Add(1)
		o.jobs <- openJob{pkts: pkts[lo:min(lo+size, len(pkts))], done: &o.wg}
	}
	sad.OpenBatch(pkts[:size])
	o.wg.Wait()
}

// splittable reports whether the batch may be opened in chunks at once.
// A later chunk may advance the replay window before an earlier one
// checks its packets, so every packet must stay inside the window
// whatever the order: the batch must belong to one SA whose window is off
// or at least as wide as the batch's span of sequence numbers (a gap from
// loss counts). Otherwise packets would be dropped as too old, or, with
// ESN, inferred into the next epoch and fail their ICV.
func splittable(sad *sa.SAD, pkts []sa.Packet) bool {
	spi, ok := esp.SPIOf(pkts[0].ESP())
	if !ok {
		return false
	}
	s := sad.LookupIn(spi, netip.Addr{})
	if s == nil {
		return false
	}
	var first uint32
	var lo, hi int32 // span relative to the first packet, wrap-safe
	for i := range pkts {
		b := pkts[i].ESP()
		if len(b) < esp.HeaderLen || binary.BigEndian.Uint32(b[0:4]) != spi {
			return false
		}
		seq := binary.BigEndian.Uint32(b[4:8])
		if i == 0 {
			first = seq
			continue
		}
		d := int32(seq - first)
		lo, hi = min(lo, d), max(hi, d)
	}
	w := s.ReplayWindow()
	return w == 0 || int64(hi)-int64(lo)+1 <= int64(w)
}
