package seqstate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ipsecd/ipsecd/sa"
)

// ErrNoState is wrapped by Without's refusal: a static AEAD key with no
// state directory to keep its sequence numbers in.
var ErrNoState = errors.New("no state directory")

// Without says whether an SA with config c may run when its state
// directory (stateDir, which failed to open with cause) cannot be used.
// AES-GCM and ChaCha20-Poly1305 take their nonces from the sequence
// numbers, which would start again at 1 after a restart: refused, with
// an error wrapping ErrNoState that names state_dir. CBC and NULL take no
// nonce from it (CBC's IVs are random): allowed, and the caller warns
// that their replay protection does not survive a restart.
func Without(c *sa.Config, stateDir string, cause error) error {
	if c.AEAD == nil {
		return nil
	}
	return fmt.Errorf("%w: %s: static key refused: state_dir %q cannot be used (%v), and without it the sequence numbers, "+
		"which %s takes as nonces, start again at 1 after a restart, sealing new packets under nonces already used "+
		"(RFC 4106 §3.1): make state_dir a directory ipsecd can create and write (mode 0700, its own)",
		ErrNoState, c.AEAD.Name, stateDir, cause, c.AEAD.Name)
}

// Attach resumes s, just made by sa.New and not yet in use, from the
// record of its key: an outbound SA continues above the last reservation
// and reserves its numbers in the record from then on (its first batch
// reserves the first block); an inbound SA's replay window starts at the
// saved top, and RoutineSaveTops and Flush save its top from then on. A
// record that cannot be read is an error.
func (d *Dir) Attach(s *sa.SA) error {
	c := s.Config()
	defer c.ClearKeys()
	r, err := d.Record(&c)
	if err != nil {
		return err
	}
	if s.Dir() == sa.DirOut {
		return s.ResumeOutbound(r.Resume(), r.Reserver(c.ESN))
	}
	if top := r.Top(); top > 0 {
		if err := s.ResumeInbound(top); err != nil {
			return err
		}
	}
	d.mu.Lock()
	d.tracked[s] = &tracked{rec: r}
	d.mu.Unlock()
	return nil
}

// Flush saves the replay-window top of every attached inbound SA whose
// top rose since it was last saved, and forgets the SAs that left their
// SAD (after saving them one last time). logf, when not nil, hears of a
// failed save once, until saving that SA works again. Call it once the
// data path has stopped, for the final tops of a clean stop.
func (d *Dir) Flush(logf func(format string, args ...any)) {
	d.flushMu.Lock()
	defer d.flushMu.Unlock()
	d.mu.Lock()
	items := d.flushing[:0]
	for s, t := range d.tracked {
		items = append(items, flushItem{s, t})
	}
	d.mu.Unlock()
	defer func() {
		clear(items) // no reference to a removed SA until the next Flush
		d.flushing = items[:0]
	}()
	for _, it := range items {
		// Retired is read before Top, so that the last save of an SA
		// that left its SAD has its final top (no batch opens it after).
		gone := it.s.Retired() && it.s.Wiped()
		err := it.t.rec.SaveTop(it.s.Top())
		switch {
		case err != nil && !it.t.failed && logf != nil:
			logf("saving the replay window of %s: %v (after a crash now, more of its old packets could be replayed)", it.s, err)
		case err == nil && it.t.failed && logf != nil:
			logf("saving the replay window of %s works again", it.s)
		}
		it.t.failed = err != nil
		if gone && err == nil {
			d.mu.Lock()
			delete(d.tracked, it.s)
			d.mu.Unlock()
		}
	}
}

// RoutineSaveTops runs Flush every SaveInterval until ctx is done. The
// caller starts it, waits for it to return, and calls Flush once more
// after its data path has stopped.
func (d *Dir) RoutineSaveTops(ctx context.Context, logf func(format string, args ...any)) {
	t := time.NewTicker(SaveInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			d.Flush(logf)
		}
	}
}
