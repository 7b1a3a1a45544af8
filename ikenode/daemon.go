package ikenode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/eapradius"
	"github.com/ipsecd/ipsecd/ike"
	"github.com/ipsecd/ipsecd/node"
	"github.com/ipsecd/ipsecd/pool"
	"github.com/ipsecd/ipsecd/sa"
)

// Bounds of the queues into the IKE goroutine. IKE runs a few messages
// per SA per rekey interval; 1024 datagrams absorb a burst of thousands
// of peers re-establishing at once, and what does not fit is dropped and
// counted (the peers retransmit).
const (
	inboxSize   = 1024
	controlSize = 16
	// tickEvery is how often timers are checked: retransmissions (4 s
	// and up), rekeys and liveness checks need no finer grain.
	tickEvery = 100 * time.Millisecond
	// keepaliveEvery is the NAT keepalive interval (strongSwan's
	// keep_alive default).
	keepaliveEvery = 20 * time.Second
	// controlWait bounds how long a control request waits for the IKE
	// goroutine.
	controlWait = 5 * time.Second
)

// Node is what the IKE daemon needs of a node.Node: installing and removing
// children's SAs and reserving inbound SPIs.
type Node interface {
	InstallChild(owner node.Owner, in, out sa.Config, replaces ...node.StateID) error
	AddState(owner node.Owner, c sa.Config) error
	RemoveStates(owner node.Owner, ids ...node.StateID) error
	AllocSPI() (uint32, error)
	ReleaseSPI(spi uint32)
	// AddPolicy and DeletePolicy install and remove trap policies.
	AddPolicy(owner node.Owner, p sa.Policy) error
	DeletePolicy(p sa.Policy) error
	// SetPeer moves an outbound ESP-in-UDP SA to the peer's new NAT
	// mapping.
	SetPeer(owner node.Owner, id node.StateID, peer netip.AddrPort) error
}

// NATT is the underlay's ESP-in-UDP socket, where IKE moves after NAT
// detection (*underlay.Conn).
type NATT interface {
	WriteNonESP(b []byte, peer netip.AddrPort, local netip.Addr) error
	WriteKeepalive(peer netip.AddrPort, local netip.Addr) error
}

// Config is what a Daemon is made from.
type Config struct {
	// IKE holds the ike:, connections: and secrets: sections. The
	// Daemon reads it and keeps copies of the PSKs it needs; the caller
	// may wipe it after Reload or Run returned.
	IKE *config.IKEConfig
	// Node installs the children.
	Node Node
	// NATT sends IKE on the ESP-in-UDP socket; nil means none (IKE then
	// never moves to port 4500: tests without NAT).
	NATT NATT
	// NATTAddr is the address the ESP-in-UDP socket is bound to: the
	// local address of what arrives there when the socket does not say
	// (it says only when bound to an unspecified address).
	NATTAddr netip.Addr
	// RawESP says the underlay carries raw ESP; without it every
	// connection is UDP-encapsulated.
	RawESP bool
	// Listen are the addresses the IKE port is bound on; empty means
	// 0.0.0.0 and ::, where the local address of each datagram is read
	// from IP_PKTINFO.
	Listen []netip.Addr
	// PeerPort is the peer's IKE port when we initiate; 0 means
	// IKE.IKE.Port (tests run two IKE daemons on one host).
	PeerPort uint16
	// Mark is SO_MARK for the IKE sockets (the underlay's), so that IKE
	// to the peer is never routed into the tunnel it negotiates.
	Mark uint32
	// Trap says that the node raises acquires for packets an allow out
	// policy lets through with no SA, and hands them to Acquire: trap
	// (start_action, dpd_action) works. Without, it acts as none and
	// clear.
	Trap bool
	// Stats returns the counters of an installed SA, for List; nil
	// leaves them zero.
	Stats func(id node.StateID) (sa.Stats, bool)
	// Log gets the IKE log lines; nil discards them.
	Log logrus.FieldLogger
	// Clock is the IKE daemon's time; nil is the system clock.
	Clock Clock
	// Transport opens the IKE port; nil is UDP sockets with SO_MARK
	// Mark.
	Transport Transport
	// Pools are the daemon's address pools, whose addresses connections
	// with pools hand their peers (vips.go); nil hands out none.
	Pools *pool.Set
	// RADIUS relays the EAP of connections with remote auth eap-radius
	// (radius.go); nil leaves such connections out. Accounting, when
	// set, reports their sessions (accounting.go), with Interim-Updates
	// every AccountingInterval unless the Access-Accept names another.
	RADIUS             *eapradius.Client
	Accounting         *eapradius.Accounting
	AccountingInterval time.Duration
	// Router puts the routes of connections with vips into the kernel
	// (routes.go); nil leaves them out (the sidecar's netstack needs
	// none).
	Router Router
	// OnEvent, when set, is told of every IKE SA and child that comes
	// up, goes down, is rekeyed or fails (events.go). It is called in
	// the Run goroutine and must not block.
	OnEvent func(Event)
}

// Daemon runs the IKE SAs of one daemon. Make it with New, run Run in a
// goroutine; its other methods are safe for concurrent use.
type Daemon struct {
	cfg      Config
	log      logrus.FieldLogger
	inbox    chan packet
	acquires chan acquire
	control  chan func()
	clock    Clock
	bind     Bind
	peerPort uint16
	cookies  *ike.Cookies
	ctr      counters
	keylog   *keylog

	// Owned by the Run goroutine:
	conns     map[string]*conn
	connOrder []string
	sas       []*ikeSA
	index     saIndex         // finds sas' SAs by SPIs, counts the half-open ones
	vipsAdded map[vipKey]bool // virtual IPs we put on interfaces (vips.go)
	// poolAttrs are the pools' DNS servers, subnets and domains by pool
	// name, as the config IKE runs last says (connsFrom): a connection
	// a reload keeps hands out what the new config says (vips.go).
	poolAttrs atomic.Pointer[map[string]config.Pool]
	// resolveFile is ike.resolve_file; resolv the file we wrote to
	// (resolv.go).
	resolveFile string
	resolv      resolvState
	limits      limits
	children    map[*ike.Child]*installed
	routes      map[routeKey]*routeHold  // the routes of children (routes.go)
	relays      map[*ike.SA]*radiusRelay // eap-radius SAs until up or gone (radius.go)
	eap         eapUsers                 // the EAP users' passwords, one store for all connections (eapusers.go)
	lingering   []lingering
	// keepalive is the NAT keepalive interval (keepaliveEvery; tests
	// shorten it).
	keepalive time.Duration
	// linger is how long a rekeyed child's inbound SA stays after its
	// delete (DefaultLinger; tests set 0); lingerFor bounds the others'.
	linger time.Duration

	closeOnce sync.Once
	done      chan struct{}
}

// packet is one IKE datagram, after any non-ESP marker.
type packet struct {
	b      []byte
	local  netip.AddrPort // the port is the IKE port or ike.NATTPort
	remote netip.AddrPort
}

// New makes a Daemon and binds the IKE port. Nothing is negotiated
// before Run.
func New(cfg Config) (*Daemon, error) {
	log := cfg.Log
	if log == nil {
		l := logrus.New()
		l.SetOutput(io.Discard)
		log = l
	}
	if cfg.Clock == nil {
		cfg.Clock = systemClock{}
	}
	if cfg.Transport == nil {
		cfg.Transport = UDP{Mark: cfg.Mark}
	}
	m := &Daemon{
		cfg:       cfg,
		clock:     cfg.Clock,
		log:       log,
		inbox:     make(chan packet, inboxSize),
		acquires:  make(chan acquire, acquireSize),
		control:   make(chan func(), controlSize),
		peerPort:  cfg.PeerPort,
		cookies:   &ike.Cookies{Threshold: cfg.IKE.IKE.CookieSetting()},
		conns:     map[string]*conn{},
		vipsAdded: map[vipKey]bool{},
		children:  map[*ike.Child]*installed{},
		routes:    map[routeKey]*routeHold{},
		relays:    map[*ike.SA]*radiusRelay{},
		index:     newSAIndex(),
		limits:    limitsOf(cfg.IKE.IKE),
		done:      make(chan struct{}),
		linger:    DefaultLinger,
		keepalive: keepaliveEvery,
	}
	if m.peerPort == 0 {
		m.peerPort = cfg.IKE.IKE.Port
	}
	if err := m.openKeylog(cfg.IKE.IKE.Keylog); err != nil {
		return nil, err
	}
	bind, err := cfg.Transport.Listen(cfg.Listen, cfg.IKE.IKE.Port, m.deliverIKE)
	if err != nil {
		m.keylog.close()
		return nil, fmt.Errorf("ike: port %d: %w", cfg.IKE.IKE.Port, err)
	}
	m.bind = bind
	m.setEAPUsers(cfg.IKE)
	m.setConnections(cfg.IKE, m.clock.Now())
	m.resolveFile = cfg.IKE.IKE.ResolveFile
	m.cfg.IKE = nil // the Daemon keeps what it needs, not the file
	return m, nil
}

// Port returns the bound IKE port (the one chosen, for port 0).
func (m *Daemon) Port() uint16 { return m.bind.Port() }

// DeliverNonESP hands the IKE daemon an IKE datagram that arrived on the
// ESP-in-UDP socket (underlay.Config.NonESP): b starts with the non-ESP
// marker and is copied. It never blocks: when the queue is full the
// datagram is dropped and counted.
func (m *Daemon) DeliverNonESP(b []byte, peer netip.AddrPort, local netip.Addr) {
	if !local.IsValid() {
		local = m.cfg.NATTAddr
	}
	if len(b) <= 4 || !local.IsValid() || local.IsUnspecified() {
		m.ctr.malformed.Add(1) // the marker alone (an empty IKE message), or no address to answer from
		return
	}
	m.deliver(packet{b: append([]byte(nil), b[4:]...), local: netip.AddrPortFrom(local, ike.NATTPort), remote: peer})
}

// deliverIKE is the Transport's deliver: a datagram on the IKE port.
func (m *Daemon) deliverIKE(b []byte, local, remote netip.AddrPort) {
	m.deliver(packet{b: b, local: local, remote: remote})
}

func (m *Daemon) deliver(p packet) {
	select {
	case m.inbox <- p:
	default:
		m.ctr.queueDrops.Add(1)
	}
}

// Run serves until ctx ends: then it deletes every IKE SA (one try, the
// daemon is going away), removes their children, and closes the
// sockets.
func (m *Daemon) Run(ctx context.Context) {
	defer m.Close()
	now := m.clock.Now()
	for _, name := range m.connOrder {
		m.startConn(m.conns[name], now)
	}
	ticks, stop := m.clock.NewTicker(tickEvery)
	defer stop()
	for {
		select {
		case <-ctx.Done():
			m.shutdown()
			return
		case p := <-m.inbox:
			m.handleSafely(p, m.clock.Now())
		case a := <-m.acquires:
			m.onAcquire(a, m.clock.Now())
		case f := <-m.control:
			f()
		case now := <-ticks:
			m.tick(now)
		}
	}
}

// Close closes the sockets and the keylog; Run returns. Safe to call
// more than once.
func (m *Daemon) Close() {
	m.closeOnce.Do(func() {
		close(m.done)
		m.bind.Close()
		m.keylog.close()
	})
}

// errStopped is a control request's error once the IKE daemon stopped.
var errStopped = errors.New("ike: the IKE daemon is not running")

// do runs f in the Run goroutine and waits for it, at most controlWait.
func (m *Daemon) do(f func()) error {
	done := make(chan struct{})
	select {
	case m.control <- func() { f(); close(done) }:
	case <-m.done:
		return errStopped
	case <-time.After(controlWait):
		return fmt.Errorf("ike: the IKE daemon did not take the request within %v", controlWait)
	}
	select {
	case <-done:
		return nil
	case <-m.done:
		return errStopped
	case <-time.After(controlWait):
		return fmt.Errorf("ike: the IKE daemon did not answer within %v", controlWait)
	}
}

// shutdown deletes every IKE SA: the peer learns at once rather than by
// DPD. The delete is sent once (no one is left to retransmit it).
func (m *Daemon) shutdown() {
	now := m.clock.Now()
	for _, x := range m.sas {
		if x.why == "" && !x.rekeyed {
			x.why = ReasonShutdown
		}
		if x.sa.State() == ike.StateEstablished {
			if out, err := x.sa.Delete(now); err == nil {
				m.request(x, out)
			}
		}
		m.down(x, now)
		m.wipe(x) // the delete goes once: no one is left to answer it
	}
	m.sas = nil
	m.updateResolv() // our DNS servers leave the resolve_file
	m.index = newSAIndex()
	m.removeLingering(time.Time{})
	for _, c := range m.conns {
		clear(c.ec.PSK) // the engine's copies; the file's are the caller's
	}
	m.eap.wipe()
}

// handleSafely is handle, with a panic (a bug the peer's message
// reached; the engine is fuzzed, but the daemon must outlive what the
// fuzzer missed) logged with its stack and the message dropped.
func (m *Daemon) handleSafely(p packet, now time.Time) {
	defer func() {
		if r := recover(); r != nil {
			m.ctr.malformed.Add(1)
			m.log.WithFields(logrus.Fields{"panic": r, "remote": p.remote, "stack": string(debug.Stack())}).Error("ike: handling a message panicked; dropped")
		}
	}()
	m.handle(p, now)
}
