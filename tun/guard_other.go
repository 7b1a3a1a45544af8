//go:build !linux

package tun

// Guards are Linux only.
type Guards struct{}

// OpenGuards returns ErrNotSupported.
func OpenGuards() (*Guards, error) { return nil, ErrNotSupported }

func (g *Guards) Close() error           { return nil }
func (g *Guards) Add(gd Guard) error     { return ErrNotSupported }
func (g *Guards) Remove(gd Guard) error  { return ErrNotSupported }
func (g *Guards) List() ([]Guard, error) { return nil, ErrNotSupported }
