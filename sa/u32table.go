package sa

import (
	"iter"
	"slices"
)

// u32table is a hash table keyed by uint32, built for the SAD's read-mostly
// indexes (SPI -> SAs, if_id -> interface, masked address -> SAs): open
// addressing with linear probing in a power-of-two array of slots, Fibonacci
// hashing, at most half full, and backward-shift deletion (no tombstones, so
// a lookup stops at the first empty slot however the table was used).
//
// A lookup costs one multiply, one shift and a short run of compares over
// adjacent slots whatever the number of keys: unlike Go's maps, there is no
// separate small-table code path, so a table of 3 keys and one of 3,000 cost
// the same per hit (docs/design.md, lesson 4).
//
// Key 0 marks an empty slot and cannot be stored; lookups of 0 find nothing.
// The zero value is an empty table, and so is a nil *u32table for the
// methods that read. It is not safe for concurrent writes; the SAD
// publishes tables that are never written again and changes a clone.
type u32table[V any] struct {
	slots []u32slot[V] // nil or a power of two long, at most half used
	shift uint8        // 32 - log2(len(slots))
	n     int32        // number of keys
}

type u32slot[V any] struct {
	key uint32 // 0: empty
	val V
}

const (
	// fibMul is 2^32 divided by the golden ratio, made odd: multiplying by
	// it spreads keys that differ in any bits over the high bits.
	fibMul = 0x9E3779B1
	// minTableSlots is the size of a table's first allocation.
	minTableSlots = 8
)

// home is the slot where a probe for k starts.
func (t *u32table[V]) home(k uint32) uint32 { return (k * fibMul) >> t.shift }

// lookup returns the value of k, or the zero V. It allocates nothing, and
// is small enough for the compiler to inline.
func (t *u32table[V]) lookup(k uint32) (v V) {
	if t != nil && len(t.slots) != 0 {
		mask := uint32(len(t.slots) - 1)
		for i := t.home(k); ; i++ {
			s := &t.slots[i&mask]
			if s.key == k {
				return s.val // for k == 0, an empty slot's zero V
			}
			if s.key == 0 {
				break
			}
		}
	}
	return v
}

// get returns the value of k and whether k is in t. It allocates nothing.
func (t *u32table[V]) get(k uint32) (V, bool) {
	if t != nil && len(t.slots) != 0 {
		slots := t.slots
		mask := uint32(len(slots) - 1)
		for i := t.home(k); ; i++ {
			s := &slots[i&mask]
			if s.key == k {
				// For k == 0 this is the first empty slot, whose
				// value is the zero V: found false, as documented.
				return s.val, k != 0
			}
			if s.key == 0 {
				break
			}
		}
	}
	var zero V
	return zero, false
}

// len returns the number of keys in t.
func (t *u32table[V]) len() int {
	if t == nil {
		return 0
	}
	return int(t.n)
}

// set stores v as the value of k, growing t when it would be more than
// half full. It writes t's slots in place: never call it on a table that
// readers may see (clone it first). k must not be 0.
func (t *u32table[V]) set(k uint32, v V) {
	if k == 0 {
		panic("sa: u32table key 0")
	}
	if len(t.slots) == 0 || int(t.n+1)*2 > len(t.slots) {
		if i, ok := t.find(k); ok {
			t.slots[i].val = v
			return
		}
		t.resize(max(2*len(t.slots), minTableSlots))
	}
	mask := uint32(len(t.slots) - 1)
	for i := t.home(k); ; i++ {
		s := &t.slots[i&mask]
		if s.key == k {
			s.val = v
			return
		}
		if s.key == 0 {
			s.key, s.val = k, v
			t.n++
			return
		}
	}
}

// find returns the slot index of k.
func (t *u32table[V]) find(k uint32) (uint32, bool) {
	if t == nil || len(t.slots) == 0 || k == 0 {
		return 0, false
	}
	mask := uint32(len(t.slots) - 1)
	for i := t.home(k); ; i++ {
		switch t.slots[i&mask].key {
		case k:
			return i & mask, true
		case 0:
			return 0, false
		}
	}
}

// delete removes k from t and reports whether it was there. Like set, it
// writes in place. The entries after k in its probe run move back into the
// hole when that brings them no further from their home slot, so that no
// probe run is ever broken by an empty slot.
func (t *u32table[V]) delete(k uint32) bool {
	hole, ok := t.find(k)
	if !ok {
		return false
	}
	mask := uint32(len(t.slots) - 1)
	for j := (hole + 1) & mask; t.slots[j].key != 0; j = (j + 1) & mask {
		// The entry at j may fill the hole if its home is not in
		// (hole, j] (cyclically): its probe distance is at least the
		// distance from the hole to j.
		if (j-t.home(t.slots[j].key))&mask >= (j-hole)&mask {
			t.slots[hole] = t.slots[j]
			hole = j
		}
	}
	t.slots[hole] = u32slot[V]{} // also drops the reference in val
	t.n--
	if len(t.slots) > minTableSlots && int(t.n)*8 <= len(t.slots) {
		t.resize(len(t.slots) / 2)
	}
	return true
}

// resize rehashes t into n slots (a power of two, more than 2*t.len()).
func (t *u32table[V]) resize(n int) {
	old := t.slots
	t.slots = make([]u32slot[V], n)
	t.shift = uint8(32 - log2(n))
	mask := uint32(n - 1)
	for _, s := range old {
		if s.key == 0 {
			continue
		}
		i := t.home(s.key)
		for t.slots[i&mask].key != 0 {
			i++
		}
		t.slots[i&mask] = s
	}
}

func log2(n int) int {
	l := 0
	for n > 1 {
		n >>= 1
		l++
	}
	return l
}

// clone returns a copy of t that shares nothing with it, for a writer to
// change and publish.
func (t *u32table[V]) clone() *u32table[V] {
	c := new(u32table[V])
	if t != nil {
		*c = *t
		c.slots = slices.Clone(t.slots)
	}
	return c
}

// all yields the keys and values of t in no particular order.
func (t *u32table[V]) all() iter.Seq2[uint32, V] {
	return func(yield func(uint32, V) bool) {
		if t == nil {
			return
		}
		for i := range t.slots {
			if s := &t.slots[i]; s.key != 0 && !yield(s.key, s.val) {
				return
			}
		}
	}
}
