//go:build !linux

package tun

import (
	"net/netip"
	"time"
)

// Device is one TUN network interface and its queues; Linux only.
type Device struct{}

// Options are the less common choices of OpenOptions.
type Options struct {
	Monitor    bool
	RouteTable uint32
	Down       bool
	TxQueueLen int
	NoIPv6     bool
}

// OpenOptions returns ErrNotSupported.
func OpenOptions(name string, mtu, queues int, opts Options) (*Device, error) {
	return nil, ErrNotSupported
}

// Open returns ErrNotSupported: TUN multiqueue and offloads are Linux only.
func Open(name string, mtu, queues int) (*Device, error) { return nil, ErrNotSupported }

func (d *Device) Name() string                             { return "" }
func (d *Device) Index() int                               { return 0 }
func (d *Device) Queues() []Queue                          { return nil }
func (d *Device) SetReadDeadline(q int, t time.Time) error { return ErrNotSupported }
func (d *Device) ActiveQueues() int                        { return 0 }
func (d *Device) BatchSize() int                           { return 1 }
func (d *Device) SetLink(mtu int, up bool) error           { return ErrNotSupported }
func (d *Device) SetMTU(mtu int) error                     { return ErrNotSupported }
func (d *Device) SetTxQueueLen(n int) error                { return ErrNotSupported }
func (d *Device) AddAddress(p netip.Prefix) error          { return ErrNotSupported }
func (d *Device) AddAddressNoWait(p netip.Prefix) error    { return ErrNotSupported }
func (d *Device) WaitLocal(a netip.Addr)                   {}
func (d *Device) RemoveAddress(p netip.Prefix) error       { return ErrNotSupported }
func (d *Device) AddRoute(p netip.Prefix) error            { return ErrNotSupported }
func (d *Device) RemoveRoute(p netip.Prefix) error         { return ErrNotSupported }
func (d *Device) EnableIPv6() error                        { return ErrNotSupported }
func (d *Device) Close() error                             { return nil }

// CloseAll closes each device.
func CloseAll(devs []*Device) []error {
	errs := make([]error, len(devs))
	for i, d := range devs {
		errs[i] = d.Close()
	}
	return errs
}
