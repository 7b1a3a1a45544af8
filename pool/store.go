package pool

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"slices"

	"github.com/ipsecd/ipsecd/internal/atomicfile"
)

// FileName is the file of the leases in the directory Flush and Load
// take (the daemon's state_dir).
const FileName = "pool-leases.json"

// maxFile bounds what Load reads: a million leases of long identities.
const maxFile = 256 << 20

// file is what FileName holds.
type file struct {
	Version int         `json:"version"` // fileVersion
	Pools   []savedPool `json:"pools"`
}

const fileVersion = 1

type savedPool struct {
	Name  string `json:"name"`
	Addrs string `json:"addrs"`
	// Leases, offline ones first in the order they went offline, then
	// the online ones (offline once read back).
	Leases []savedLease `json:"leases"`
}

type savedLease struct {
	ID   string     `json:"id"`
	Addr netip.Addr `json:"addr"`
}

// Flush writes the leases of every pool to dir/FileName, whole or not at
// all (atomicfile.Write), when they changed since the last Flush. The
// daemon calls it every second and when it stops; a crash loses at most
// the changes since, and a client whose lease was lost gets a new one.
func (s *Set) Flush(dir string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.changedLocked() || len(s.pools) == 0 && s.savedGen == nil {
		return nil // nothing new; or no pools, and no file of ours to empty
	}
	f := file{Version: fileVersion, Pools: []savedPool{}}
	gens := make(map[*Pool]uint64, len(s.pools))
	for _, p := range s.pools {
		sp, gen := p.save()
		f.Pools = append(f.Pools, sp)
		gens[p] = gen
	}
	data, err := json.Marshal(f)
	if err != nil {
		return fmt.Errorf("pool: %w", err)
	}
	if err := atomicfile.Write(dir, FileName, data); err != nil {
		return fmt.Errorf("pool: saving leases: %w", err)
	}
	s.savedVersion, s.savedGen = s.version, gens
	return nil
}

// save returns p's leases as Flush writes them, and p's gen they are of.
func (p *Pool) save() (savedPool, uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	sp := savedPool{Name: p.name, Addrs: p.r.String(), Leases: make([]savedLease, 0, p.offline.Len()+p.online)}
	for el := p.offline.Front(); el != nil; el = el.Next() {
		l := el.Value.(*offlineLease)
		sp.Leases = append(sp.Leases, savedLease{ID: l.e.id, Addr: p.r.Addr(l.off)})
	}
	for _, e := range p.byID {
		for i, l := range e.online {
			if !slices.ContainsFunc(e.online[:i], func(x onlineLease) bool { return x.off == l.off }) {
				sp.Leases = append(sp.Leases, savedLease{ID: e.id, Addr: p.r.Addr(l.off)})
			}
		}
	}
	return sp, p.gen
}

// Load reads the leases Flush wrote to dir/FileName into the set's pools
// of the same names, each lease offline and kept for its identity, and
// returns how many it took. Leases of pools the set does not have, or out
// of their pool's range now, are left out; a missing file is no error.
// Call it before the first Acquire: a pool that has leases already takes
// no more.
func (s *Set) Load(dir string) (int, error) {
	path := filepath.Join(dir, FileName)
	data, err := readFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("pool: %w", err)
	}
	var f file
	if err := json.Unmarshal(data, &f); err != nil {
		return 0, fmt.Errorf("pool: %s: %w", path, err)
	}
	if f.Version != fileVersion {
		return 0, fmt.Errorf("pool: %s: version %d, want %d", path, f.Version, fileVersion)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, sp := range f.Pools {
		p := s.poolLocked(sp.Name)
		if p == nil {
			continue
		}
		ls := make([]Lease, len(sp.Leases))
		for i, l := range sp.Leases {
			ls[i] = Lease{ID: l.ID, Addr: l.Addr}
		}
		n += p.restore(ls)
	}
	s.version++
	return n, nil
}

// readFile reads a regular file of at most maxFile bytes.
func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() || fi.Size() > maxFile {
		return nil, fmt.Errorf("%s: not a regular file of at most %d bytes", path, maxFile)
	}
	data := make([]byte, fi.Size())
	if _, err := f.ReadAt(data, 0); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return data, nil
}

// restore gives an empty p the leases ls (in the order they went
// offline), each offline unless Online, and returns how many it took: a
// lease outside p's range, of a reserved address (a DNS server now) or
// of an address taken already, is left out.
// The addresses below the highest lease that no lease holds become free.
func (p *Pool) restore(ls []Lease) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.byID) > 0 || p.unused > 0 {
		return 0
	}
	taken := map[uint32]bool{}
	for _, l := range ls {
		off, ok := p.r.Offset(l.Addr)
		if !ok || taken[off] || p.isReserved(off) {
			continue
		}
		taken[off] = true
		e := p.byID[l.ID]
		if e == nil {
			e = &entry{id: l.ID}
			p.byID[l.ID] = e
		}
		if l.Online {
			e.online = append(e.online, onlineLease{off: off})
			p.online++
		} else {
			p.offlineLocked(e, off)
		}
		p.unused = max(p.unused, off+1)
	}
	// The gaps, as spans; newLocked takes from the last, so the lowest
	// goes first.
	offs := make([]uint32, 0, len(taken))
	for off := range taken {
		offs = append(offs, off)
	}
	slices.Sort(offs)
	next := uint32(0)
	for _, off := range offs {
		if off > next {
			p.free = append(p.free, span{next, off})
		}
		next = off + 1
	}
	slices.Reverse(p.free)
	p.gen++
	return len(taken)
}
