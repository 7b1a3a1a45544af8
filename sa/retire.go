package sa

// Retiring an SA: what happens to it when it leaves its SAD (Delete,
// Replace without it, RemoveExpired).
//
// The SAD's tables are immutable snapshots that workers read without a
// lock, so a worker may have found an SA in a table just before it was
// replaced and still be sealing or opening with it. Its keys may only be
// wiped once no such worker is left. Linux holds a reference per packet
// (xfrm_state_hold/put) and frees the keys (kfree_sensitive) on the last
// put; here SealBatch and OpenBatch count themselves in and out of one
// word per SA, and the last one out of a retired SA wipes it:
//
//	use: bits 0..61  batches inside the SA's crypto
//	     bit 62      retired: the SA has left its SAD
//	     bit 63      wiped: the keys are gone; no batch may enter
//
// Whoever sees the word at exactly retiredBit (retired, nobody inside, not
// wiped) and swaps in wipedBit wipes: retire itself, or the batch that
// leaves last. A batch that enters after the swap sees wipedBit, leaves
// at once without touching the keys and drops its packets as
// XfrmOutStateInvalid / XfrmInStateInvalid, the counters Linux uses for a
// packet that meets a state which is no longer valid. The cost on the data
// path is two atomic adds per batch, on the cache line the sequence number
// already uses.

const (
	retiredBit = 1 << 62
	wipedBit   = 1 << 63
)

// enter counts a batch in. It reports false, and counts nothing, when the
// SA's keys are wiped.
func (s *SA) enter() bool {
	if s.use.Add(1)&wipedBit != 0 {
		s.use.Add(^uint64(0))
		return false
	}
	return true
}

// exit counts a batch out; the last one out of a retired SA wipes it.
func (s *SA) exit() {
	if s.use.Add(^uint64(0)) == retiredBit {
		s.tryWipe()
	}
}

// retire marks the SA as gone from its SAD, so that it raises no more
// events and its keys are wiped as soon as no batch is inside it (at once
// when none is). It is idempotent.
func (s *SA) retire() {
	s.use.Or(retiredBit)
	s.tryWipe()
}

func (s *SA) tryWipe() {
	if s.use.CompareAndSwap(retiredBit, retiredBit|wipedBit) {
		s.wipe()
	}
}

// Discard zeroes the keys of an SA that will not be used: one New made
// that never joined a SAD, because the reload or control change it was made
// for was refused (ErrExists, a bad file). Like a removal it waits for any
// batch still inside the SA; an SA in a SAD must be removed from it
// instead (Delete, Replace), or it stays in the table, dropping everything
// as XfrmOutStateInvalid / XfrmInStateInvalid.
func (s *SA) Discard() { s.retire() }

// Retired reports whether the SA has left its SAD. A retired SA seals and
// opens until its last running batch ends; then its keys are wiped and it
// drops everything as XfrmOutStateInvalid / XfrmInStateInvalid. It cannot
// join a SAD again: make a new one with New.
func (s *SA) Retired() bool { return s.use.Load()&retiredBit != 0 }

// Wiped reports whether the SA's keys have been zeroed.
func (s *SA) Wiped() bool { return s.use.Load()&wipedBit != 0 }

// wipe zeroes the key material the SA owns: its copies of the keys, the
// HMAC key, the AEAD salt and the GHASH key of 64-bit-ICV GCM. It then
// drops its cipher objects and pooled HMAC states so that they become
// garbage even while something still points at the SA.
//
// What it cannot wipe: Go's crypto/aes, crypto/cipher (GCM),
// x/crypto/chacha20poly1305 and crypto/hmac keep the expanded key, the
// GHASH tables, a copy of the key, and the key-derived ipad/opad inside
// unexported fields with no way to clear them; those bytes stay in the
// heap until the garbage collector reuses the memory. So do copies that
// are Go strings (the YAML and JSON decoders') and whatever the caller of
// New passed in (New copies it; zeroing the caller's slice is the
// caller's job).
//
// Only the goroutine that swapped in wipedBit calls it, after every batch
// has left, so nothing reads these fields concurrently.
func (s *SA) wipe() {
	s.cfg.ClearKeys()
	t := s.t
	clear(t.macKey)
	t.salt = [4]byte{}
	t.ghashH = [2]uint64{}
	if t.ghashLen != nil {
		*t.ghashLen = ghashLenTable{}
	}
	t.aead, t.block = nil, nil
	for t.pool.Get() != nil {
	}
}

// dropInvalid drops a whole batch of a wiped SA.
func (s *SA) dropInvalid(pkts []Packet, c Counter) {
	for i := range pkts {
		p := &pkts[i]
		p.SA, p.Proto, p.seq = s, 0, 0
		p.Drop = c
		s.counters.Inc(c)
	}
}
