package xfrmif

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/ipsecd/ipsecd/tun"
)

// Queue is one queue of a link, as golang.zx2c4.com/wireguard/tun.Device
// exposes it: a TUN queue (tun.Queue has the same methods), or the
// netstack's endpoint. It is declared here, by its consumer, so that a
// link needs no TUN package.
type Queue interface {
	// Read reads one or more packets into bufs, each starting at offset,
	// sets sizes and returns how many. len(bufs) must be at least
	// BatchSize(), and each buffer must hold offset+MaxPacketSize bytes
	// when offloads are off, or offset plus the device MTU when they are
	// on.
	Read(bufs [][]byte, sizes []int, offset int) (n int, err error)
	// Write writes the packets bufs[i][offset:]; offset must be at least
	// MinOffset. It may coalesce packets (GRO) and overwrites the bytes in
	// front of offset. The caller keeps ownership of bufs.
	Write(bufs [][]byte, offset int) (int, error)
	// BatchSize is the largest batch Read returns and Write takes at once.
	BatchSize() int
}

// MinOffset is the headroom a Queue's Write needs in front of each
// packet (the TUN's virtio-net header); MaxPacketSize the largest packet.
const (
	MinOffset     = tun.MinOffset
	MaxPacketSize = tun.MaxPacketSize
)

// Link is what an Interface needs from the device under it: its queues and
// its configuration. A TUN device (Create) is one; a netstack NIC or a
// test double can be another.
type Link interface {
	// Queues returns the link's queues; the Interface does not modify the
	// slice. Their number does not change.
	Queues() []Queue
	SetMTU(mtu int) error
	AddAddress(p netip.Prefix) error
	RemoveAddress(p netip.Prefix) error
	AddRoute(p netip.Prefix) error
	RemoveRoute(p netip.Prefix) error
	// Close removes the link; blocked reads return an error matching
	// os.ErrClosed.
	Close() error
}

// txQueueLink is a Link with a kernel transmit queue (a TUN device),
// whose length Config.TxQueueLen sets.
type txQueueLink interface {
	SetTxQueueLen(n int) error
}

// ipv6Link is a Link that may have IPv6 off (a TUN device opened for an
// IPv4-only Config), which must be turned on before an IPv6 address or
// route is added.
type ipv6Link interface {
	EnableIPv6() error
}

// ipv4Only reports whether cfg's interface carries IPv4 only, and may
// start with IPv6 disabled (tun.Options.NoIPv6): it has IPv4 addresses or
// routes and no IPv6 ones. One with neither keeps IPv6: its routes come
// from elsewhere (by hand, as transport mode's recipe may add them), in
// either family.
func ipv4Only(cfg Config) bool {
	return len(cfg.Addresses)+len(cfg.Routes) > 0 && !hasIPv6(cfg.Addresses, cfg.Routes)
}

// hasIPv6 reports whether any of the prefixes is IPv6.
func hasIPv6(prefixes ...[]netip.Prefix) bool {
	for _, ps := range prefixes {
		for _, p := range ps {
			if p.Addr().Unmap().Is6() {
				return true
			}
		}
	}
	return false
}

// ErrClosed is returned by ReadQueue, WriteQueue and the configuration
// methods of a closed Interface.
var ErrClosed = errors.New("xfrmif: interface closed")

// Interface is one xfrm interface. Name, IfID and the number of queues are
// fixed; the MTU, addresses and routes change with Reconfigure. Safe for
// concurrent use.
type Interface struct {
	name   string
	ifID   uint32
	link   Link
	queues []Queue
	shards []statShard   // one per queue, summed by Stats
	wmu    []queueWriter // one per queue, taken by WriteQueue
	mtu    atomic.Int64
	closed atomic.Bool

	// mu guards: cfg (the applied MTU, addresses and routes).
	mu  sync.Mutex
	cfg Config
}

// Create opens a TUN device for cfg in the network namespace of the
// calling thread and configures it: MTU, up, addresses, routes.
func Create(cfg Config) (*Interface, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	dev, err := openTUN(cfg, false)
	if err != nil {
		return nil, err
	}
	return newInterface(cfg, tunLink{Device: dev, queues: queuesOf(dev)}, cfg.MTU, cfg.TxQueueLen)
}

// openTUN opens the TUN device of cfg (with defaults), with its MTU and
// transmit queue length, up unless down, without addresses or routes.
func openTUN(cfg Config, down bool) (*tun.Device, error) {
	opts := tun.Options{RouteTable: cfg.Table, Down: down, TxQueueLen: cfg.TxQueueLen, NoIPv6: ipv4Only(cfg)}
	dev, err := tun.OpenOptions(cfg.Name, cfg.MTU, cfg.Queues, opts)
	if err != nil {
		return nil, fmt.Errorf("xfrmif: %s: %w", cfg.Name, err)
	}
	return dev, nil
}

// tunLink is a TUN device as a Link.
type tunLink struct {
	*tun.Device
	queues []Queue
	// noWait: AddAddress does not wait for an IPv6 address to become
	// deliverable; the caller does, for many at once (configure).
	noWait bool
}

func (l tunLink) AddAddress(p netip.Prefix) error {
	if l.noWait {
		return l.AddAddressNoWait(p)
	}
	return l.Device.AddAddress(p)
}

func (l tunLink) Queues() []Queue { return l.queues }

func queuesOf(dev *tun.Device) []Queue {
	qs := make([]Queue, len(dev.Queues()))
	for i, q := range dev.Queues() {
		qs[i] = q
	}
	return qs
}

// NewInterface makes an Interface of cfg over link and applies cfg's MTU,
// addresses and routes to it. The Interface owns link from then on, also
// when NewInterface fails.
func NewInterface(cfg Config, link Link) (*Interface, error) {
	return newInterface(cfg, link, 0, 0)
}

// newInterface is NewInterface for a link whose MTU and transmit queue
// length are already mtu and txQueueLen (0: not known).
func newInterface(cfg Config, link Link, mtu, txQueueLen int) (*Interface, error) {
	if err := cfg.Validate(); err != nil {
		link.Close()
		return nil, err
	}
	cfg = cfg.withDefaults()
	qs := link.Queues()
	if len(qs) == 0 {
		link.Close()
		return nil, fmt.Errorf("xfrmif: %s: link has no queues", cfg.Name)
	}
	ifc := &Interface{
		name:   cfg.Name,
		ifID:   cfg.IfID,
		link:   link,
		queues: qs,
		shards: make([]statShard, len(qs)),
		wmu:    make([]queueWriter, len(qs)),
	}
	ifc.cfg = Config{Name: cfg.Name, IfID: cfg.IfID, Queues: len(qs), MTU: mtu, TxQueueLen: txQueueLen, Table: cfg.Table}
	ifc.mtu.Store(int64(mtu))
	if err := ifc.Reconfigure(cfg); err != nil {
		ifc.Close()
		return nil, err
	}
	return ifc, nil
}

// Reconfigure applies cfg's MTU, transmit queue length, addresses and routes, changing only what
// differs from what is applied. Name, IfID, Queues and Table must be
// unchanged (a new Interface is needed for those). On error, what was applied stays
// applied and the next Reconfigure retries the rest.
func (ifc *Interface) Reconfigure(cfg Config) error {
	cfg = cfg.withDefaults()
	if cfg.Name != ifc.name || cfg.IfID != ifc.ifID || cfg.Queues != len(ifc.queues) {
		return fmt.Errorf("xfrmif: %s: reconfigure cannot change name, if_id or queues", ifc.name)
	}
	ifc.mu.Lock()
	defer ifc.mu.Unlock()
	if cfg.Table != ifc.cfg.Table {
		return fmt.Errorf("xfrmif: %s: reconfigure cannot change the routing table", ifc.name)
	}
	if ifc.closed.Load() {
		return ErrClosed
	}
	var errs []error
	if cfg.TxQueueLen != ifc.cfg.TxQueueLen {
		tq, ok := ifc.link.(txQueueLink)
		if !ok {
			ifc.cfg.TxQueueLen = cfg.TxQueueLen // no queue to size: nothing to apply
		} else if err := tq.SetTxQueueLen(cfg.TxQueueLen); err != nil {
			errs = append(errs, err)
		} else {
			ifc.cfg.TxQueueLen = cfg.TxQueueLen
		}
	}
	if cfg.MTU != ifc.cfg.MTU {
		if err := ifc.link.SetMTU(cfg.MTU); err != nil {
			errs = append(errs, err)
		} else {
			ifc.cfg.MTU = cfg.MTU
			ifc.mtu.Store(int64(cfg.MTU))
		}
	}
	add, remove := diff(ifc.cfg.Routes, cfg.Routes)
	for _, p := range remove {
		if err := ifc.link.RemoveRoute(p); err != nil {
			errs = append(errs, err)
		} else {
			ifc.cfg.Routes = slices.DeleteFunc(ifc.cfg.Routes, func(q netip.Prefix) bool { return q == p })
		}
	}
	addAddr, removeAddr := diff(ifc.cfg.Addresses, cfg.Addresses)
	for _, p := range removeAddr {
		if err := ifc.link.RemoveAddress(p); err != nil {
			errs = append(errs, err)
		} else {
			ifc.cfg.Addresses = slices.DeleteFunc(ifc.cfg.Addresses, func(q netip.Prefix) bool { return q == p })
		}
	}
	if len(removeAddr) != 0 {
		// Removing a device's last IPv4 address makes Linux flush every
		// IPv4 route through it (fib_disable_ip), kept ones included, even
		// when a new address follows at once. Old addresses go before new
		// ones come (a new one in the same subnet would be a secondary,
		// and deleting the primary deletes its secondaries unless
		// promote_secondaries is set), so reapply every route below:
		// AddRoute replaces, so a route still there is left as it is.
		add = slices.Clone(cfg.Routes)
		ifc.cfg.Routes = slices.DeleteFunc(ifc.cfg.Routes, func(q netip.Prefix) bool { return slices.Contains(add, q) })
	}
	if l, ok := ifc.link.(ipv6Link); ok && hasIPv6(addAddr, add) {
		// An interface opened IPv4-only gains IPv6 (a reload). If
		// this fails, the IPv6 additions below fail too and say so.
		if err := l.EnableIPv6(); err != nil {
			errs = append(errs, err)
		}
	}
	for _, p := range addAddr {
		if err := ifc.link.AddAddress(p); err != nil {
			errs = append(errs, err)
		} else {
			ifc.cfg.Addresses = append(ifc.cfg.Addresses, p)
		}
	}
	// Routes last: an IPv6 route needs the link up, and a route may use
	// a source from the addresses.
	for _, p := range add {
		if err := ifc.link.AddRoute(p); err != nil {
			errs = append(errs, err)
		} else {
			ifc.cfg.Routes = append(ifc.cfg.Routes, p)
		}
	}
	return errors.Join(errs...)
}

// Name is the interface's name.
func (ifc *Interface) Name() string { return ifc.name }

// IfID is the interface's xfrm if_id.
func (ifc *Interface) IfID() uint32 { return ifc.ifID }

// MTU is the applied MTU.
func (ifc *Interface) MTU() int { return int(ifc.mtu.Load()) }

// Config returns the applied configuration (a copy).
func (ifc *Interface) Config() Config {
	ifc.mu.Lock()
	defer ifc.mu.Unlock()
	return ifc.cfg.clone()
}

// Addresses returns the applied addresses (a copy).
func (ifc *Interface) Addresses() []netip.Prefix { return ifc.Config().Addresses }

// Routes returns the applied routes (a copy).
func (ifc *Interface) Routes() []netip.Prefix { return ifc.Config().Routes }

// Link returns the link under the interface.
func (ifc *Interface) Link() Link { return ifc.link }

// NumQueues is the number of queues, each read by one goroutine
// (ReadQueue).
func (ifc *Interface) NumQueues() int { return len(ifc.queues) }

// WriteQueue delivers inbound cleartext packets bufs[i][offset:] out of
// the interface (to the kernel, for a TUN) through queue q: the data path
// writes a flow's packets through one queue, so that they stay in order.
// offset must be at least MinOffset; the bytes before it are overwritten,
// and WriteQueue may lengthen some bufs[i] within their capacity to
// coalesce packets (GRO), so spare capacity lets it coalesce. The caller
// keeps the buffers. Writes to one queue are serialised.
//
// The packets are counted as received (rx), or as rx drops if the
// interface is closed (ErrClosed).
func (ifc *Interface) WriteQueue(q int, bufs [][]byte, offset int) (int, error) {
	ifc.wmu[q].Lock()
	defer ifc.wmu[q].Unlock()
	return ifc.writeLocked(q, bufs, offset)
}

func (ifc *Interface) writeLocked(q int, bufs [][]byte, offset int) (int, error) {
	s := &ifc.shards[q]
	if len(bufs) == 0 {
		return 0, nil
	}
	if offset < MinOffset {
		s.rxErrors.Add(uint64(len(bufs)))
		return 0, fmt.Errorf("xfrmif: %s: write offset %d, want at least %d", ifc.name, offset, MinOffset)
	}
	if ifc.closed.Load() {
		s.rxDrops.Add(uint64(len(bufs)))
		return 0, ErrClosed
	}
	var bytes uint64
	for _, b := range bufs {
		bytes += uint64(len(b) - offset)
	}
	npkts := len(bufs) // before GRO changes lengths' meaning
	var n int
	var err error
	if gq, ok := ifc.queues[q].(gatherQueue); ok {
		n, err = ifc.wmu[q].writeGathered(gq, bufs, offset)
	} else {
		n, err = ifc.queues[q].Write(bufs, offset)
	}
	if err != nil {
		if errors.Is(err, os.ErrClosed) {
			s.rxDrops.Add(uint64(npkts))
			return n, ErrClosed
		}
		// wireguard/tun joins per-packet errors; the batch is counted
		// as one error.
		s.rxErrors.Add(1)
		return n, fmt.Errorf("xfrmif: %s: write: %w", ifc.name, err)
	}
	s.rxPackets.Add(uint64(npkts))
	s.rxBytes.Add(bytes)
	return n, nil
}

// Close removes the link. Reads and writes after Close return ErrClosed,
// and so do reads blocked in it. Close is idempotent.
func (ifc *Interface) Close() error {
	if ifc.closed.Swap(true) {
		return nil
	}
	return ifc.link.Close()
}
