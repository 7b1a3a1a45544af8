// Package controltest is an in-memory control.Backend for tests of the
// control socket and the command line. It keeps states and policies in
// maps and lists; it encrypts nothing. Safe for concurrent use.
package controltest

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"

	"github.com/ipsecd/ipsecd/control"
	"github.com/ipsecd/ipsecd/sa"
)

// Backend is a fake daemon. The zero value is empty and ready to use.
type Backend struct {
	// Counters and Ifaces are what Stats and Interfaces return; set them
	// before the server starts.
	Counters []control.Counter
	Ifaces   []control.InterfaceInfo
	// ReloadResult and ReloadErr are what Reload returns.
	ReloadResult control.ReloadResult
	ReloadErr    error

	// mu guards states, policies.
	mu       sync.Mutex
	states   map[control.StateID]control.StateInfo
	policies []sa.Policy
}

var _ control.Backend = (*Backend)(nil)

// SetStats sets the counters that the state with id reports.
func (b *Backend) SetStats(id control.StateID, st control.StateStats) {
	b.mu.Lock()
	defer b.mu.Unlock()
	si := b.states[id]
	si.Stats = st
	b.states[id] = si
}

func idOf(c *sa.Config) control.StateID { return control.StateID{Dir: c.Dir, SPI: c.SPI, Dst: c.Dst} }

// States returns the states ordered by dir, dst and SPI, keys included
// (the Server must remove them).
func (b *Backend) States(keys bool) []control.StateInfo {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]control.StateInfo, 0, len(b.states))
	for _, s := range b.states {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool {
		a, c := out[i].Config, out[j].Config
		if a.Dir != c.Dir {
			return a.Dir < c.Dir
		}
		if a.Dst != c.Dst {
			return a.Dst.Less(c.Dst)
		}
		return a.SPI < c.SPI
	})
	return out
}

func (b *Backend) GetState(id control.StateID, keys bool) (control.StateInfo, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	id, err := b.resolveLocked(id)
	if err != nil {
		return control.StateInfo{}, err
	}
	return b.states[id], nil
}

// resolveLocked completes an id without a direction, as the daemon does:
// an error when none or two SAs match.
func (b *Backend) resolveLocked(id control.StateID) (control.StateID, error) {
	if id.Dir != 0 {
		if _, ok := b.states[id]; !ok {
			return id, fmt.Errorf("state %s: %w", id, control.ErrNotFound)
		}
		return id, nil
	}
	in, out := id, id
	in.Dir, out.Dir = sa.DirIn, sa.DirOut
	_, hasIn := b.states[in]
	_, hasOut := b.states[out]
	switch {
	case hasIn && hasOut:
		return id, fmt.Errorf("%w: state %s: names an inbound and an outbound SA; give its dir", control.ErrInvalid, id)
	case hasIn:
		return in, nil
	case hasOut:
		return out, nil
	}
	return id, fmt.Errorf("state %s: %w", id, control.ErrNotFound)
}

func (b *Backend) AddState(c sa.Config) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.states == nil {
		b.states = map[control.StateID]control.StateInfo{}
	}
	id := idOf(&c)
	if _, ok := b.states[id]; ok {
		return fmt.Errorf("state %s: %w", id, control.ErrExists)
	}
	b.states[id] = control.StateInfo{Config: c}
	return nil
}

func (b *Backend) DeleteState(id control.StateID) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	id, err := b.resolveLocked(id)
	if err != nil {
		return err
	}
	delete(b.states, id)
	return nil
}

func (b *Backend) Policies() []sa.Policy {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]sa.Policy(nil), b.policies...)
}

func samePolicy(a, c sa.Policy) bool {
	return a.Dir == c.Dir && a.IfID == c.IfID && a.Selector == c.Selector
}

func (b *Backend) AddPolicy(p sa.Policy) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, q := range b.policies {
		if samePolicy(p, q) {
			return fmt.Errorf("policy: %w", control.ErrExists)
		}
	}
	b.policies = append(b.policies, p)
	return nil
}

func (b *Backend) DeletePolicy(p sa.Policy) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, q := range b.policies {
		if samePolicy(p, q) {
			b.policies = append(b.policies[:i], b.policies[i+1:]...)
			return nil
		}
	}
	return fmt.Errorf("policy: %w", control.ErrNotFound)
}

func (b *Backend) Stats() []control.Counter {
	return append([]control.Counter(nil), b.Counters...)
}

func (b *Backend) Interfaces() []control.InterfaceInfo {
	return append([]control.InterfaceInfo(nil), b.Ifaces...)
}

// FlushStates removes every state.
func (b *Backend) FlushStates() (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(b.states)
	clear(b.states)
	return n, nil
}

// UpdateState sets a state's lifetime.
func (b *Backend) UpdateState(id control.StateID, l sa.Lifetime) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	id, err := b.resolveLocked(id)
	if err != nil {
		return err
	}
	si := b.states[id]
	si.Config.Lifetime = l
	b.states[id] = si
	return nil
}

// Reload returns ReloadResult and ReloadErr.
func (b *Backend) Reload() (control.ReloadResult, error) { return b.ReloadResult, b.ReloadErr }

// Start serves b on a control socket in a fresh short temporary directory
// (unix socket paths are limited to 107 bytes, which t.TempDir can exceed)
// and stops it when the test ends.
func Start(t testing.TB, b control.Backend) *control.Server {
	t.Helper()
	dir, err := os.MkdirTemp("", "ipsecd-ctl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	srv, err := control.Listen(filepath.Join(dir, "run", "ipsecd.sock"), b, nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve() }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return srv
}
