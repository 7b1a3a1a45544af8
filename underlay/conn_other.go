//go:build !linux

package underlay

import (
	"net/netip"
	"time"
)

// Conn is the set of underlay sockets of one daemon. Only Linux has an
// implementation; elsewhere Open returns ErrNotSupported.
type Conn struct{}

// Reader receives from one underlay socket (Linux only).
type Reader struct{}

// Open returns ErrNotSupported: the underlay needs Linux (recvmmsg,
// sendmmsg, UDP GSO/GRO, SO_MARK).
func Open(cfg Config, logf Logf) (*Conn, error) { return nil, ErrNotSupported }

func (c *Conn) Readers() []*Reader              { return nil }
func (c *Conn) Port() uint16                    { return 0 }
func (c *Conn) Counters() Counters              { return Counters{} }
func (c *Conn) Close() error                    { return nil }
func (c *Conn) WriteBatch(msgs []Message) error { return ErrNotSupported }

func (r *Reader) BatchSize() int                        { return BatchSize }
func (r *Reader) LocalAddr() netip.AddrPort             { return netip.AddrPort{} }
func (r *Reader) Raw() bool                             { return false }
func (r *Reader) GRO() bool                             { return false }
func (r *Reader) String() string                        { return "unsupported" }
func (r *Reader) ReadBatch(msgs []Message) (int, error) { return 0, ErrNotSupported }
func (r *Reader) ReadBatchBorrowed(msgs []Message) (int, error) {
	return 0, ErrNotSupported
}
func (r *Reader) SetReadDeadline(t time.Time) error { return ErrNotSupported }
