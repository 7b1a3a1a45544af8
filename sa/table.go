package sa

import (
	"slices"
)

const numShards = 256

// table is one immutable version of the SAD. Tables and slices reachable
// from it are never written after it is published.
//
// The SPI and if_id indexes are u32tables rather than Go maps: a Go map of
// up to 8 entries skips hashing, so with few SAs per shard lookups were
// faster than with many, and the cost of a lookup depended on the number of
// SAs. A u32table costs the same at every size. The 256 shards keep a
// change cheap: it copies the shards it touches, not the whole index (a
// nil shard is empty), so that installing one IKE child beside 10,000 SAs
// costs about what it costs beside 10 (BenchmarkInstallChild in package
// node). (Shards held by value, not pointer, would save one load per lookup
// but make the table 24 KB, copied by every change.)
type table struct {
	in    shards[[]*SA] // inbound SAs by SPI (usually one)
	out   shards[[]*SA] // outbound SAs by SPI
	iface shards[*iface]
	// iface0 is the interface of if_id 0, which a u32table cannot hold.
	// The daemon refuses if_id 0, but the SAD does not.
	iface0 *iface
	// policies in the order added, for Policies.
	policies []Policy
	n        int // number of SAs
}

// shards is a u32table split by key into numShards tables, so that a
// change copies one shard, about 1/256 of the keys, instead of them all.
// A lookup costs one more load than a u32table's.
type shards[V any] [numShards]*u32table[V]

// lookup returns the value of k, or the zero V. It allocates nothing.
func (s *shards[V]) lookup(k uint32) V { return s[shardOf(k)].lookup(k) }

// len returns the number of keys.
func (s *shards[V]) len() int {
	n := 0
	for _, m := range s {
		n += m.len()
	}
	return n
}

// shardsWriter changes a copy of published shards: the first write to a
// shard clones it, later writes of the same change write the clone.
// Its zero value is unusable; see writer.
type shardsWriter[V any] struct {
	s     *shards[V]
	owned [numShards]bool
}

// writer returns a writer of s, a private copy of published shards (its
// tables are shared with them until written), or new shards (a nil shard
// is made on its first write).
func writer[V any](s *shards[V]) *shardsWriter[V] { return &shardsWriter[V]{s: s} }

// shard returns the shard of k for writing.
func (w *shardsWriter[V]) shard(k uint32) *u32table[V] {
	sh := shardOf(k)
	if !w.owned[sh] {
		w.s[sh] = w.s[sh].clone()
		w.owned[sh] = true
	}
	return w.s[sh]
}

func (w *shardsWriter[V]) set(k uint32, v V) { w.shard(k).set(k, v) }
func (w *shardsWriter[V]) delete(k uint32)   { w.shard(k).delete(k) }

func shardOf(k uint32) uint32 { return (k ^ k>>8 ^ k>>16 ^ k>>24) & (numShards - 1) }

// ifaceOf returns the interface of id, or nil.
func (t *table) ifaceOf(id uint32) *iface {
	if id == 0 {
		return t.iface0
	}
	return t.iface.lookup(id)
}

// each calls fn for every SA of t.
func (t *table) each(fn func(*SA)) {
	for i := range t.in {
		for _, list := range t.in[i].all() {
			for _, s := range list {
				fn(s)
			}
		}
		for _, list := range t.out[i].all() {
			for _, s := range list {
				fn(s)
			}
		}
	}
}

func (t *table) bySPI(dir Dir) *shards[[]*SA] {
	if dir == DirIn {
		return &t.in
	}
	return &t.out
}

// tableChange is one change of a published table: the copy it makes, with
// the writers that copy each shard, interface and index level it touches
// once, however many SAs the change adds or removes. Its cost is that of
// the SAs it touches (and of those that share an SPI or a destination
// prefix with them), not of the SAs in the table.
type tableChange struct {
	t       table
	in, out *shardsWriter[[]*SA]
	ifaces  *shardsWriter[*iface]
	// changed: the interfaces copied so far, by if_id.
	changed map[uint32]*ifaceWriter
}

// change starts a change of old, a published table.
func change(old *table) *tableChange {
	c := &tableChange{t: *old, changed: map[uint32]*ifaceWriter{}}
	c.in, c.out, c.ifaces = writer(&c.t.in), writer(&c.t.out), writer(&c.t.iface)
	return c
}

func (c *tableChange) bySPI(dir Dir) *shardsWriter[[]*SA] {
	if dir == DirIn {
		return c.in
	}
	return c.out
}

// iface returns the changed table's interface of id for writing: a copy
// of the published one (whose slices it shares until written), or a new
// one.
func (c *tableChange) iface(id uint32) *ifaceWriter {
	if w := c.changed[id]; w != nil {
		return w
	}
	f := &iface{}
	if old := c.t.ifaceOf(id); old != nil {
		*f = *old
	}
	w := &ifaceWriter{f: f, levels: map[*shards[[]*SA]]*shardsWriter[[]*SA]{}}
	c.changed[id] = w
	if id == 0 {
		c.t.iface0 = f
	} else {
		c.ifaces.set(id, f)
	}
	return w
}

// add puts s into the changed table, or returns ErrExists (conflict).
func (c *tableChange) add(s *SA) error {
	list := c.t.bySPI(s.cfg.Dir).lookup(s.cfg.SPI)
	if err := conflict(list, s); err != nil {
		return err
	}
	c.bySPI(s.cfg.Dir).set(s.cfg.SPI, append(slices.Clip(list), s))
	if s.cfg.Dir == DirOut {
		c.iface(s.cfg.IfID).insertOut(s)
	}
	c.t.n++
	return nil
}

// remove takes s out of the changed table; false when s is not in it.
func (c *tableChange) remove(s *SA) bool {
	dir, spi := s.cfg.Dir, s.cfg.SPI
	list := c.t.bySPI(dir).lookup(spi)
	if !slices.Contains(list, s) {
		return false
	}
	if len(list) == 1 {
		c.bySPI(dir).delete(spi)
	} else {
		c.bySPI(dir).set(spi, without(list, s))
	}
	if dir == DirOut {
		c.iface(s.cfg.IfID).removeOut(s)
	}
	c.t.n--
	return true
}

// without returns a copy of list without s.
func without(list []*SA, s *SA) []*SA {
	return slices.DeleteFunc(slices.Clone(list), func(o *SA) bool { return o == s })
}
