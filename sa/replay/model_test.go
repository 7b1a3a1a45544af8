package replay

import "math/big"

// model is the reference the Window is compared against: a set of accepted
// sequence numbers and the top, with the ESN inference done in big integers
// as "the number with these low 32 bits in [top-W+1, top-W+1+2^32)"
// rather than by the RFC's case split.
type model struct {
	size uint32
	esn  bool
	top  uint64
	seen map[uint64]bool
}

func newModel(size uint32, esn bool) *model {
	return &model{size: size, esn: esn, seen: make(map[uint64]bool)}
}

var (
	two32 = new(big.Int).Lsh(big.NewInt(1), 32)
	two64 = new(big.Int).Lsh(big.NewInt(1), 64)
)

func (m *model) check(seql uint32) (uint64, Verdict) {
	if !m.esn {
		return uint64(seql), m.verdict(uint64(seql))
	}
	w := int64(m.size)
	if w == 0 {
		w = 1 << 31
	}
	base := new(big.Int).SetUint64(m.top)
	base.Sub(base, big.NewInt(w-1))
	off := new(big.Int).Sub(big.NewInt(int64(seql)), base)
	off.Mod(off, two32) // Mod is Euclidean: 0 <= off < 2^32
	seq := off.Add(off, base)
	if seq.Sign() <= 0 || seq.Cmp(two64) >= 0 {
		return 0, TooOld
	}
	return seq.Uint64(), m.verdict(seq.Uint64())
}

func (m *model) verdict(seq uint64) Verdict {
	switch {
	case seq == 0:
		return TooOld
	case seq > m.top, m.size == 0:
		return OK
	case m.top-seq >= uint64(m.size):
		return TooOld
	case m.seen[seq]:
		return Duplicate
	}
	return OK
}

func (m *model) advance(seq uint64) Verdict {
	v := m.verdict(seq)
	if v != OK {
		return v
	}
	if m.size > 0 {
		m.seen[seq] = true
	}
	if seq > m.top {
		m.top = seq
		// Forget what fell out of the window, to keep long runs small.
		if len(m.seen) > 4*int(m.size)+1024 {
			for s := range m.seen {
				if m.top-s >= uint64(m.size) {
					delete(m.seen, s)
				}
			}
		}
	}
	return OK
}
