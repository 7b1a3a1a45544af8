// Package underlaytest is a test double for the network under ipsecd's
// underlay: a UDP relay on loopback that loses, reorders and delays
// datagrams as a test tells it to, as wireguard-go's tun/tuntest stands
// in for a TUN device.
//
// A Relay listens on one address and forwards every datagram it receives
// to one destination, so a pair of relays stands between two peers, one
// per direction: each peer's SA sends to its relay instead of the other
// peer. Datagrams leave with the relay's own address as their source,
// which ESP does not check.
//
// A Relay runs one goroutine, stopped by Close. Its methods are safe for
// concurrent use.
package underlaytest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Impairment says what a Relay does to the datagrams it forwards. The
// zero value forwards everything in order.
type Impairment struct {
	// Loss is the fraction of datagrams dropped, 0 to 1.
	Loss float64
	// Reorder is the fraction of datagrams held back, 0 to 1. A held
	// datagram is sent after Distance later datagrams have been sent (so
	// it arrives Distance places late), or after Hold, if traffic stops
	// first. At most MaxHeld are held at once; others are not reordered.
	Reorder  float64
	Distance int
	// Hold is the longest a datagram is held; 0 means 50 ms.
	Hold time.Duration
	// Seed makes the choices reproducible.
	Seed uint64
}

// MaxHeld is the most datagrams a Relay holds back at once.
const MaxHeld = 64

// Stats counts what a Relay did.
type Stats struct {
	Received  uint64 // datagrams read
	Forwarded uint64 // datagrams sent on, reordered ones included
	Dropped   uint64 // datagrams lost on purpose
	Reordered uint64 // datagrams sent late after Distance others
	Expired   uint64 // held datagrams sent when Hold ran out
}

// Relay forwards UDP datagrams from its address to a destination,
// impaired. Make one with New.
type Relay struct {
	conn *net.UDPConn
	to   netip.AddrPort
	imp  Impairment
	rnd  *rand.Rand
	done chan struct{}
	wg   sync.WaitGroup

	received, forwarded, dropped, reordered, expired atomic.Uint64

	// held is used by the relay's goroutine only.
	held []heldDatagram
}

type heldDatagram struct {
	b     []byte
	after int       // datagrams still to send before this one
	until time.Time // send it at the latest then
}

// New listens on listen (port 0 picks a free one) and forwards what
// arrives to to.
func New(listen, to netip.AddrPort, imp Impairment) (*Relay, error) {
	switch {
	case imp.Loss < 0 || imp.Loss > 1:
		return nil, fmt.Errorf("underlaytest: Loss %v not in 0..1", imp.Loss)
	case imp.Reorder < 0 || imp.Reorder > 1:
		return nil, fmt.Errorf("underlaytest: Reorder %v not in 0..1", imp.Reorder)
	case imp.Reorder > 0 && imp.Distance < 1:
		return nil, fmt.Errorf("underlaytest: Distance %d: want 1 or more with Reorder", imp.Distance)
	case !to.IsValid():
		return nil, errors.New("underlaytest: no destination")
	}
	if imp.Hold == 0 {
		imp.Hold = 50 * time.Millisecond
	}
	conn, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(listen))
	if err != nil {
		return nil, fmt.Errorf("underlaytest: %w", err)
	}
	// Large socket buffers: the relay must not add loss of its own when
	// a peer sends a burst of 64 segments at once.
	conn.SetReadBuffer(4 << 20)
	conn.SetWriteBuffer(4 << 20)
	r := &Relay{
		conn: conn,
		to:   to,
		imp:  imp,
		rnd:  rand.New(rand.NewPCG(imp.Seed, imp.Seed^0x5eed)),
		done: make(chan struct{}),
	}
	r.wg.Add(1)
	go r.run()
	return r, nil
}

// Addr is the address the relay listens on: where a peer sends.
func (r *Relay) Addr() netip.AddrPort {
	return r.conn.LocalAddr().(*net.UDPAddr).AddrPort()
}

// Stats returns the relay's counters.
func (r *Relay) Stats() Stats {
	return Stats{
		Received:  r.received.Load(),
		Forwarded: r.forwarded.Load(),
		Dropped:   r.dropped.Load(),
		Reordered: r.reordered.Load(),
		Expired:   r.expired.Load(),
	}
}

// Close stops the relay and waits for its goroutine. Held datagrams are
// dropped.
func (r *Relay) Close() error {
	select {
	case <-r.done:
		return nil
	default:
	}
	close(r.done)
	err := r.conn.Close()
	r.wg.Wait()
	return err
}

func (r *Relay) run() {
	defer r.wg.Done()
	buf := make([]byte, 65536)
	for {
		deadline := time.Time{}
		for _, h := range r.held {
			if deadline.IsZero() || h.until.Before(deadline) {
				deadline = h.until
			}
		}
		r.conn.SetReadDeadline(deadline)
		n, _, err := r.conn.ReadFromUDPAddrPort(buf)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			r.releaseExpired(time.Now())
			continue
		}
		if err != nil {
			select {
			case <-r.done:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue // e.g. ECONNREFUSED from an earlier send
		}
		r.received.Add(1)
		switch {
		case r.imp.Loss > 0 && r.rnd.Float64() < r.imp.Loss:
			r.dropped.Add(1)
		case r.imp.Reorder > 0 && len(r.held) < MaxHeld && r.rnd.Float64() < r.imp.Reorder:
			r.held = append(r.held, heldDatagram{
				b:     append([]byte(nil), buf[:n]...),
				after: r.imp.Distance,
				until: time.Now().Add(r.imp.Hold),
			})
		default:
			r.send(buf[:n])
			r.countDown()
		}
		r.releaseExpired(time.Now())
	}
}

// countDown counts one datagram sent against every held one and sends
// those whose turn it is.
func (r *Relay) countDown() {
	for i := 0; i < len(r.held); {
		h := &r.held[i]
		if h.after--; h.after > 0 {
			i++
			continue
		}
		b := h.b
		r.held = append(r.held[:i], r.held[i+1:]...)
		r.send(b)
		r.reordered.Add(1)
	}
}

// releaseExpired sends the held datagrams whose Hold ran out.
func (r *Relay) releaseExpired(now time.Time) {
	for i := 0; i < len(r.held); {
		if now.Before(r.held[i].until) {
			i++
			continue
		}
		b := r.held[i].b
		r.held = append(r.held[:i], r.held[i+1:]...)
		r.send(b)
		r.expired.Add(1)
	}
}

func (r *Relay) send(b []byte) {
	if _, err := r.conn.WriteToUDPAddrPort(b, r.to); err == nil {
		r.forwarded.Add(1)
	}
}
