package seqstate

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sync"

	"github.com/ipsecd/ipsecd/sa"
)

// The record file: two slots of slotLen bytes (see the package doc).
const (
	slotLen   = 32
	recordLen = 2 * slotLen
	magic     = "IPSQ"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Record is the durable state of one key: how far its outbound sequence
// numbers are reserved and the top of its inbound replay window. Its
// methods are safe for concurrent use.
type Record struct {
	dir, name string

	mu sync.Mutex
	// mu guards everything below and serialises the writes.
	exists bool   // the file is there (else the first write creates it)
	gen    uint64 // generation of the newest valid slot
	out    uint64 // outbound: every number up to out may have been used
	in     uint64 // inbound: the highest number accepted, as last saved
}

// loadRecord reads the record named name in dir, or returns an empty one
// when there is none. A damaged file is an error, never a guess: a
// record that cannot be read means the key's numbers are unknown.
func loadRecord(dir, name string) (*Record, error) {
	r := &Record{dir: dir, name: name}
	p := filepath.Join(dir, name)
	b, err := readSmall(p, recordLen)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return r, nil
	case err != nil:
		return nil, damaged(err)
	}
	ok := false
	for i := range 2 {
		gen, out, in, valid := decodeSlot(b[i*slotLen : (i+1)*slotLen])
		if valid && (!ok || gen > r.gen) {
			r.gen, r.out, r.in, ok = gen, out, in, true
		}
	}
	if !ok {
		return nil, damaged(fmt.Errorf("state_dir: %s: no valid slot", p))
	}
	r.exists = true
	return r, nil
}

// damaged explains what a record that cannot be read means.
func damaged(err error) error {
	return fmt.Errorf("%w; the sequence numbers this key used are unknown, so it cannot be used safely again: "+
		"give the SA a new key (and remove the file)", err)
}

func encodeSlot(b []byte, gen, out, in uint64) {
	copy(b[0:4], magic)
	binary.BigEndian.PutUint64(b[8:], gen)
	binary.BigEndian.PutUint64(b[16:], out)
	binary.BigEndian.PutUint64(b[24:], in)
	binary.BigEndian.PutUint32(b[4:], crc32.Checksum(b[8:slotLen], castagnoli))
}

func decodeSlot(b []byte) (gen, out, in uint64, ok bool) {
	if string(b[0:4]) != magic || binary.BigEndian.Uint32(b[4:]) != crc32.Checksum(b[8:slotLen], castagnoli) {
		return 0, 0, 0, false
	}
	return binary.BigEndian.Uint64(b[8:]), binary.BigEndian.Uint64(b[16:]), binary.BigEndian.Uint64(b[24:]), true
}

// write makes (out, in) the record's state on disk, with r.mu held. It
// returns once the state is synced; on error the state in memory stays
// the old one.
func (r *Record) write(out, in uint64) error {
	gen := r.gen + 1
	off := int64(gen%2) * slotLen
	if !r.exists {
		var b [recordLen]byte
		encodeSlot(b[off:off+slotLen], gen, out, in)
		if err := writeNew(r.dir, r.name, b[:]); err != nil {
			return err
		}
		r.exists = true
	} else {
		var b [slotLen]byte
		encodeSlot(b[:], gen, out, in)
		p := filepath.Join(r.dir, r.name)
		f, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err != nil {
			return fmt.Errorf("state_dir: %w", err)
		}
		_, err = f.WriteAt(b[:], off)
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("state_dir: %s: %w", p, err)
		}
	}
	r.gen, r.out, r.in = gen, out, in
	return nil
}

// Resume returns where an outbound SA of this key continues: above both
// the last outbound reservation and the inbound top (a key that was
// inbound before a restart does not start at 1 either).
func (r *Record) Resume() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return max(r.out, r.in)
}

// Top returns the inbound top as last saved.
func (r *Record) Top() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.in
}

// Reserver returns the sa.SeqReserver of an outbound SA of this key,
// reserving blocks of ESNBlock numbers with ESN and Block without.
func (r *Record) Reserver(esn bool) sa.SeqReserver {
	b := uint64(Block)
	if esn {
		b = ESNBlock
	}
	return reserver{r, b}
}

type reserver struct {
	r     *Record
	block uint64
}

// Reserve records that numbers up to upto+block-1 may be used, and
// returns that limit once it is synced. A reservation already that far
// (another SA of the same key) is returned without a write.
func (v reserver) Reserve(upto uint64) (uint64, error) {
	r := v.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if upto <= r.out {
		return r.out, nil
	}
	limit := upto + v.block - 1
	if limit < upto { // the end of the 64-bit space
		limit = math.MaxUint64
	}
	if err := r.write(limit, r.in); err != nil {
		return 0, err
	}
	return limit, nil
}

// SaveTop records top as the inbound top, when it is higher than the
// saved one.
func (r *Record) SaveTop(top uint64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if top <= r.in {
		return nil
	}
	return r.write(r.out, top)
}
