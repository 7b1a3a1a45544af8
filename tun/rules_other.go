//go:build !linux

package tun

import "net/netip"

func (g *Guards) AddRule(r Rule) error       { return ErrNotSupported }
func (g *Guards) RemoveRule(r Rule) error    { return ErrNotSupported }
func (g *Guards) Rules() ([]Rule, error)     { return nil, ErrNotSupported }
func (g *Guards) AddThrow(th Throw) error    { return ErrNotSupported }
func (g *Guards) RemoveThrow(th Throw) error { return ErrNotSupported }
func (g *Guards) Throws() ([]Throw, error)   { return nil, ErrNotSupported }

// AddRouteFrom is Linux only.
func (d *Device) AddRouteFrom(p netip.Prefix, src netip.Addr) error { return ErrNotSupported }
