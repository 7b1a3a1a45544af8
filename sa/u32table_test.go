package sa

import (
	"encoding/binary"
	"maps"
	"math/rand/v2"
	"testing"
)

// keysAt returns n distinct keys, from start up, whose home slot in a
// table of 2^bits slots is home: keys that collide.
func keysAt(bits uint8, home uint32, start uint32, n int) []uint32 {
	t := u32table[int]{shift: 32 - bits}
	var keys []uint32
	for k := start; len(keys) < n; k++ {
		if k != 0 && t.home(k) == home {
			keys = append(keys, k)
		}
	}
	return keys
}

// checkTable verifies t's invariants against want: every key is found by
// a probe from its home slot that crosses no empty slot, the count is
// right, the table is at most half full, and all yields exactly want.
func checkTable(t *testing.T, tab *u32table[int], want map[uint32]int) {
	t.Helper()
	if got := tab.len(); got != len(want) {
		t.Fatalf("len = %d, want %d", got, len(want))
	}
	var slots []u32slot[int] // a nil tab has none
	if tab != nil {
		slots = tab.slots
	}
	if len(slots) != 0 && 2*tab.len() > len(slots) {
		t.Fatalf("%d keys in %d slots: more than half full", tab.len(), len(slots))
	}
	mask := uint32(len(slots) - 1)
	for i, s := range slots {
		if s.key == 0 {
			if s.val != 0 {
				t.Fatalf("empty slot %d holds value %d", i, s.val)
			}
			continue
		}
		for j := tab.home(s.key); j&mask != uint32(i); j++ {
			if slots[j&mask].key == 0 {
				t.Fatalf("key %#x in slot %d: empty slot %d between it and its home %d", s.key, i, j&mask, tab.home(s.key))
			}
		}
	}
	got := maps.Collect(tab.all())
	if !maps.Equal(got, want) {
		t.Fatalf("all() = %v, want %v", got, want)
	}
	for k, v := range want {
		if got, ok := tab.get(k); !ok || got != v {
			t.Fatalf("get(%#x) = %d, %v; want %d, true", k, got, ok, v)
		}
		if got := tab.lookup(k); got != v {
			t.Fatalf("lookup(%#x) = %d, want %d", k, got, v)
		}
	}
	if v, ok := tab.get(0); ok || v != 0 || tab.lookup(0) != 0 {
		t.Fatalf("get(0) = %d, %v; want 0, false", v, ok)
	}
}

func TestU32Table(t *testing.T) {
	// Keys of an 8-slot table (bits 3) that share a home slot.
	at2 := keysAt(3, 2, 1, 4)
	at7 := keysAt(3, 7, 1, 3) // probe runs that wrap around to slot 0
	at3 := keysAt(3, 3, 1, 1)
	type op struct {
		del bool
		key uint32
		val int
	}
	set := func(k uint32, v int) op { return op{key: k, val: v} }
	del := func(k uint32) op { return op{del: true, key: k} }
	tests := []struct {
		name      string
		ops       []op
		want      map[uint32]int
		wantSlots int
	}{
		{"empty", nil, map[uint32]int{}, 0},
		{"one", []op{set(7, 70)}, map[uint32]int{7: 70}, 8},
		{"overwrite", []op{set(7, 70), set(7, 71)}, map[uint32]int{7: 71}, 8},
		{"delete the only key", []op{set(7, 70), del(7)}, map[uint32]int{}, 8},
		{"delete a missing key", []op{set(7, 70), del(8)}, map[uint32]int{7: 70}, 8},
		{"delete from empty", []op{del(8)}, map[uint32]int{}, 0},
		{"collisions", []op{set(at2[0], 1), set(at2[1], 2), set(at2[2], 3)},
			map[uint32]int{at2[0]: 1, at2[1]: 2, at2[2]: 3}, 8},
		{"delete the head of a collision run: the rest shift back",
			[]op{set(at2[0], 1), set(at2[1], 2), set(at2[2], 3), del(at2[0])},
			map[uint32]int{at2[1]: 2, at2[2]: 3}, 8},
		{"delete the middle of a collision run",
			[]op{set(at2[0], 1), set(at2[1], 2), set(at2[2], 3), del(at2[1])},
			map[uint32]int{at2[0]: 1, at2[2]: 3}, 8},
		{"delete the tail of a collision run",
			[]op{set(at2[0], 1), set(at2[1], 2), set(at2[2], 3), del(at2[2])},
			map[uint32]int{at2[0]: 1, at2[1]: 2}, 8},
		{"a key at its home stays when the run before it shrinks",
			// at2[0..1] fill slots 2 and 3, so at3 lands in 4; deleting
			// at2[0] moves at2[1] to 2 and at3 to 3, its home.
			[]op{set(at2[0], 1), set(at2[1], 2), set(at3[0], 3), del(at2[0])},
			map[uint32]int{at2[1]: 2, at3[0]: 3}, 8},
		{"a key at its home is not moved before it",
			// at3 sits in its home 3; deleting at2[0] from 2 must not
			// move at3 into 2, where a probe from 3 would not find it.
			[]op{set(at3[0], 3), set(at2[0], 1), del(at2[0])},
			map[uint32]int{at3[0]: 3}, 8},
		{"a run that wraps around the end",
			[]op{set(at7[0], 1), set(at7[1], 2), set(at7[2], 3)},
			map[uint32]int{at7[0]: 1, at7[1]: 2, at7[2]: 3}, 8},
		{"delete across the wrap",
			[]op{set(at7[0], 1), set(at7[1], 2), set(at7[2], 3), del(at7[0])},
			map[uint32]int{at7[1]: 2, at7[2]: 3}, 8},
		{"delete across the wrap, keys homed at 0 in the way",
			[]op{set(at7[0], 1), set(at7[1], 2), set(keysAt(3, 0, 1, 1)[0], 4), set(at7[2], 3), del(at7[1])},
			map[uint32]int{at7[0]: 1, keysAt(3, 0, 1, 1)[0]: 4, at7[2]: 3}, 8},
		{"grows past half full",
			[]op{set(1, 1), set(2, 2), set(3, 3), set(4, 4), set(5, 5)},
			map[uint32]int{1: 1, 2: 2, 3: 3, 4: 4, 5: 5}, 16},
		{"overwriting a full table does not grow it",
			[]op{set(1, 1), set(2, 2), set(3, 3), set(4, 4), set(4, 40)},
			map[uint32]int{1: 1, 2: 2, 3: 3, 4: 40}, 8},
		{"shrinks when an eighth full",
			[]op{set(1, 1), set(2, 2), set(3, 3), set(4, 4), set(5, 5), del(1), del(2), del(3)},
			map[uint32]int{4: 4, 5: 5}, 8},
		{"all bits", []op{set(0xffffffff, 1), set(0x80000000, 2), set(1, 3)},
			map[uint32]int{0xffffffff: 1, 0x80000000: 2, 1: 3}, 8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var tab u32table[int]
			for _, o := range tt.ops {
				if o.del {
					tab.delete(o.key)
				} else {
					tab.set(o.key, o.val)
				}
			}
			checkTable(t, &tab, tt.want)
			if len(tab.slots) != tt.wantSlots {
				t.Errorf("%d slots, want %d", len(tab.slots), tt.wantSlots)
			}
		})
	}
}

func TestU32TableDeleteReports(t *testing.T) {
	var tab u32table[int]
	tab.set(5, 50)
	if !tab.delete(5) {
		t.Error("delete(5) = false, want true")
	}
	if tab.delete(5) {
		t.Error("second delete(5) = true, want false")
	}
	if tab.delete(0) {
		t.Error("delete(0) = true, want false")
	}
}

func TestU32TableSetZeroPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("set(0, ...) did not panic")
		}
	}()
	var tab u32table[int]
	tab.set(0, 1)
}

func TestU32TableGrowth(t *testing.T) {
	var tab u32table[int]
	want := map[uint32]int{}
	for i := range 10_000 {
		k := uint32(0x1000 + i*7)
		tab.set(k, i)
		want[k] = i
	}
	checkTable(t, &tab, want)
	if got := len(tab.slots); got != 32768 {
		t.Errorf("10,000 keys in %d slots, want 32768", got)
	}
	for k := range want {
		if k%3 != 0 {
			tab.delete(k)
			delete(want, k)
		}
	}
	checkTable(t, &tab, want)
	for k := range want {
		tab.delete(k)
	}
	checkTable(t, &tab, map[uint32]int{})
	if got := len(tab.slots); got != minTableSlots {
		t.Errorf("emptied table has %d slots, want %d", got, minTableSlots)
	}
}

func TestU32TableCloneIndependence(t *testing.T) {
	var a u32table[int]
	for k := uint32(1); k <= 3; k++ {
		a.set(k, int(k))
	}
	b := a.clone()
	b.set(4, 4)  // no growth: 4 keys in 8 slots
	b.set(1, 10) // overwrite
	b.delete(2)  // backward shift in b only
	a.set(5, 5)  // and a changes on its own
	checkTable(t, &a, map[uint32]int{1: 1, 2: 2, 3: 3, 5: 5})
	checkTable(t, b, map[uint32]int{1: 10, 3: 3, 4: 4})

	var empty u32table[int]
	c := empty.clone()
	c.set(1, 1)
	checkTable(t, &empty, map[uint32]int{})

	var none *u32table[int] // a nil table reads as empty
	checkTable(t, none, map[uint32]int{})
	if none.delete(1) {
		t.Error("nil table: delete(1) = true")
	}
	d := none.clone()
	d.set(2, 2)
	checkTable(t, d, map[uint32]int{2: 2})
	checkTable(t, c, map[uint32]int{1: 1})
}

// TestU32TableLookupAllocs: lookups allocate nothing (STYLE.md 5).
func TestU32TableLookupAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	var tab u32table[[]*SA]
	for k := uint32(1); k < 1000; k++ {
		tab.set(k, make([]*SA, 1))
	}
	allocs := testing.AllocsPerRun(100, func() {
		if tab.lookup(500) == nil || tab.lookup(5000) != nil {
			t.Fatal("lookup")
		}
	})
	if allocs != 0 {
		t.Errorf("lookup: %v allocations, want 0", allocs)
	}
}

// runU32TableOps applies ops encoded in b (5 bytes each: an op byte and a
// key) to a u32table and to a Go map, comparing them after every op. Keys
// are drawn from a narrow range (by the op byte) so that they collide,
// and every few ops the table is cloned to check that the clone and the
// original stay apart.
func runU32TableOps(t *testing.T, b []byte) {
	var tab u32table[int]
	want := map[uint32]int{}
	var snap *u32table[int]
	var snapWant map[uint32]int
	for i := 0; i+5 <= len(b); i += 5 {
		op, k := b[i], binary.LittleEndian.Uint32(b[i+1:])
		if op&0x40 != 0 {
			k &= 0x3f // small keys: many collisions and long runs
		}
		switch op % 4 {
		case 0, 1:
			if k == 0 {
				continue
			}
			tab.set(k, i)
			want[k] = i
		case 2:
			_, inMap := want[k]
			if got := tab.delete(k); got != inMap {
				t.Fatalf("op %d: delete(%#x) = %v, want %v", i/5, k, got, inMap)
			}
			delete(want, k)
		case 3:
			snap, snapWant = tab.clone(), maps.Clone(want)
		}
		v, ok := tab.get(k)
		if wv, wok := want[k]; v != wv || ok != wok {
			t.Fatalf("op %d: get(%#x) = %d, %v; want %d, %v", i/5, k, v, ok, wv, wok)
		}
	}
	checkTable(t, &tab, want)
	if snapWant != nil {
		checkTable(t, snap, snapWant)
	}
}

// TestU32TableRandom compares random sequences of operations with a Go map.
func TestU32TableRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	rounds := 300
	if testing.Short() {
		rounds = 30
	}
	for range rounds {
		b := make([]byte, 5*r.IntN(2000))
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		runU32TableOps(t, b)
	}
}

func FuzzU32Table(f *testing.F) {
	f.Add([]byte{0x40, 1, 0, 0, 0, 0x40, 9, 0, 0, 0, 0x42, 1, 0, 0, 0})
	f.Add([]byte{0, 1, 0, 0, 0, 3, 0, 0, 0, 0, 2, 1, 0, 0, 0})
	f.Fuzz(runU32TableOps)
}
