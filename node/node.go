package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/ipsecd/ipsecd/datapath"
	"github.com/ipsecd/ipsecd/sa"
	"github.com/ipsecd/ipsecd/seqstate"
	"github.com/ipsecd/ipsecd/underlay"
	"github.com/ipsecd/ipsecd/xfrmif"
)

// Owner says who installed an SA or a policy, and so who may change it
// wholesale (Sync) or remove it (RemoveOwner).
type Owner string

// The owners of the daemon. IKE owns its SAs as OwnerIKE, or as one
// Owner per IKE SA ("ike:" and a name) to remove them together.
const (
	OwnerFile    Owner = "file"    // the config file: a reload replaces what it owns
	OwnerControl Owner = "control" // the control socket (ipsecd state add, policy add)
	OwnerIKE     Owner = "ike"     // SAs negotiated by IKE (package ike)
)

// FreshKeys reports whether o's SAs have keys made for them alone and
// forgotten at a restart: IKE's (OwnerIKE, or "ike:" and a name), whose
// every child has keys derived from fresh nonces (RFC 7296 §2.17). Such
// an SA's sequence numbers never meet its key again after it ends, so it
// keeps no sequence record in the state directory (and runs without
// one), and its keys are not remembered once it is gone; within its life
// the SA itself never wraps its sequence number (package sa). Static
// keys (the file's, the control socket's) keep both.
func (o Owner) FreshKeys() bool { return o == OwnerIKE || strings.HasPrefix(string(o), "ike:") }

// Config is what a Node is built from. The zero value is a Node without
// an underlay, state directory or log.
type Config struct {
	// Underlay is opened by Start unless Conn is set.
	Underlay underlay.Config
	// Conn is an underlay opened by the caller; the Node owns it from
	// New on (it closes it, also when New or Start fails).
	// Underlay.RawESP then says whether Conn has raw ESP sockets.
	Conn *underlay.Conn
	// InboundWorkers is how many goroutines open each underlay socket's
	// batches (datapath.Engine.SetInboundWorkers); 0 means 1.
	InboundWorkers int
	// StateDir is the sequence-reservation directory (package
	// seqstate) of the static keys. When it cannot be used, the Node
	// runs on and refuses static AES-GCM and ChaCha20-Poly1305 SAs
	// (seqstate.Without); IKE's (Owner.FreshKeys) need none.
	StateDir string
	// EphemeralKeys says that every key is fresh for this run
	// (negotiated, or random and handed to the peer): no state directory
	// is opened, and AEAD SAs run without one.
	EphemeralKeys bool
	// Log receives the Node's diagnostics and lifetime events; nil
	// discards them.
	Log logrus.FieldLogger
	// Counters are the global xfrm counters; nil makes new ones.
	Counters *sa.Counters
	// NewSA makes the Node's SAs; nil means sa.New. Tests set it to see
	// the SAs that were made.
	NewSA func(sa.Config, *sa.Counters) (*sa.SA, error)
	// Events receives every change of the SAs, policies and interfaces
	// (events.go), for ipsecd monitor; nil: none. It is called with the
	// Node's lock held, in the order of the changes, and must not block
	// or call the Node.
	Events func(Event)
}

// Node is a running ESP endpoint: see the package doc for what it owns.
type Node struct {
	log      logrus.FieldLogger
	counters *sa.Counters
	sad      *sa.SAD
	reg      *xfrmif.Registry
	conn     *underlay.Conn   // nil before Start; guarded by mu
	engine   *datapath.Engine // nil before Start; guarded by mu
	rawESP   bool
	newSA    func(sa.Config, *sa.Counters) (*sa.SA, error)
	events   func(Event) // Config.Events; nil: none
	// nonESP is what SetNonESPHandler set (handlers.go); the underlay
	// calls deliverNonESP, which loads it.
	nonESP atomic.Pointer[nonESPHandler]
	cfg    Config // for Start

	ctx    context.Context
	cancel context.CancelFunc
	// routines are the ticker and the top-saving goroutine; Close
	// waits for them.
	routines sync.WaitGroup

	// expiry carries lifetime events from the data path to the ticker.
	expiry expiryQueue

	// seq is the state directory; nil with EphemeralKeys or when it
	// cannot be used (seqErr says why, stateDir where).
	seq       *seqstate.Dir
	seqErr    error
	stateDir  string
	ephemeral bool

	mu sync.Mutex
	// mu guards: conn, engine, keys, freshKeys, owners, policyOwners, workers,
	// reserved, and serialises every change of the SAD and the registry.
	keys sa.KeyOwners
	// freshKeys holds the keys (in keys) of each running SA of an owner
	// with FreshKeys, which leave keys when the SA leaves (forgetLocked).
	freshKeys    map[*sa.SA][]sa.KeyID
	owners       map[*sa.SA]Owner
	policyOwners map[policyID]Owner
	workers      map[*xfrmif.Interface]*datapath.Workers
	reserved     map[uint32]bool // inbound SPIs handed out by AllocSPI

	closeOnce sync.Once
	closeErr  error
}

// policyID identifies a policy in the SAD (its action is not part of it).
type policyID struct {
	dir  sa.Dir
	ifID uint32
	sel  sa.Selector
}

func idOf(p sa.Policy) policyID { return policyID{p.Dir, p.IfID, p.Selector} }

// New builds a Node: counters, SAD, registry and state directory, and
// starts the lifetime ticker and the top-saving goroutine. It holds no
// SAs, policies or interfaces yet, and has no data path until Start: SAs
// can be checked and installed before any socket is bound. On error
// nothing is left running.
func New(cfg Config) (_ *Node, err error) {
	log := cfg.Log
	if log == nil {
		l := logrus.New()
		l.SetOutput(io.Discard)
		log = l
	}
	n := &Node{
		log:          log,
		counters:     cfg.Counters,
		reg:          &xfrmif.Registry{},
		newSA:        cfg.NewSA,
		events:       cfg.Events,
		keys:         sa.KeyOwners{},
		freshKeys:    map[*sa.SA][]sa.KeyID{},
		owners:       map[*sa.SA]Owner{},
		policyOwners: map[policyID]Owner{},
		workers:      map[*xfrmif.Interface]*datapath.Workers{},
		reserved:     map[uint32]bool{},
		ephemeral:    cfg.EphemeralKeys,
		rawESP:       cfg.Underlay.RawESP,
		cfg:          cfg,
	}
	if n.counters == nil {
		n.counters = &sa.Counters{}
	}
	if n.newSA == nil {
		n.newSA = sa.New
	}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	n.sad = sa.NewSAD(n.counters)
	n.sad.SetEventHandler(n.expiry.push)
	defer func() {
		if err != nil {
			n.Close()
		}
	}()
	if !cfg.EphemeralKeys {
		n.stateDir = cfg.StateDir
		n.seq, n.seqErr = seqstate.Open(cfg.StateDir)
		if n.seqErr != nil {
			log.WithError(n.seqErr).Warn("state_dir cannot be used: static SAs with AES-GCM or ChaCha20-Poly1305 keys are refused; " +
				"static CBC and NULL SAs run, but after a restart their sequence numbers start again at 1 and their replay windows forget the old packets " +
				"(IKE's children need no state_dir: their keys are new for each child)")
		}
	}
	n.routines.Add(1)
	go n.routineTick()
	if n.seq != nil {
		n.routines.Add(1)
		go n.routineSaveTops()
	}
	return n, nil
}

// Start opens the underlay (or takes Config.Conn) and starts the
// forwarding engine: its receivers, and the sending workers of every
// interface, now and as they come. On error the Node is as before (Close
// it). A Node that is never started forwards nothing (tests of the
// control plane).
func (n *Node) Start() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.engine != nil {
		return errors.New("node: started twice")
	}
	n.conn = n.cfg.Conn
	if n.conn == nil {
		ucfg := n.cfg.Underlay
		if ucfg.NonESP != nil {
			n.SetNonESPHandler(ucfg.NonESP)
		}
		ucfg.NonESP = n.deliverNonESP
		conn, err := underlay.Open(ucfg, n.log.WithField("part", "underlay").Debugf)
		if err != nil {
			return err
		}
		n.conn = conn
	}
	n.engine = datapath.New(n.sad, n.reg, datapath.FromConn(n.conn), n.log.WithField("part", "datapath"))
	n.engine.SetInboundWorkers(n.cfg.InboundWorkers)
	n.engine.Start(n.ctx)
	names := make([]string, 0, n.reg.Len())
	for _, ifc := range n.reg.All() {
		names = append(names, ifc.Name())
	}
	n.startWorkersLocked(names)
	return nil
}

// SAD returns the security association database, for lookups, counters
// and tests. Change it through the Node's methods, which record owners
// and keys; an SA added to the SAD directly has no owner and escapes the
// key-reuse check.
func (n *Node) SAD() *sa.SAD { return n.sad }

// Registry returns the interface registry. Its Create hook may be set
// before the first SyncInterfaces (tests make interfaces without TUN
// devices that way).
func (n *Node) Registry() *xfrmif.Registry { return n.reg }

// Counters returns the global xfrm counters (/proc/net/xfrm_stat names).
func (n *Node) Counters() *sa.Counters { return n.counters }

// Underlay returns the underlay sockets, nil before Start.
func (n *Node) Underlay() *underlay.Conn {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.conn
}

// RawESP reports whether the underlay has raw ESP sockets: without them,
// an SA without encap would have its traffic dropped.
func (n *Node) RawESP() bool { return n.rawESP }

// routineSaveTops saves the inbound SAs' replay-window tops every
// seqstate.SaveInterval, off the packet path, until the Node closes.
func (n *Node) routineSaveTops() {
	defer n.routines.Done()
	n.seq.RoutineSaveTops(n.ctx, n.log.WithField("part", "state").Warnf)
}

// Close removes the interfaces, closes the underlay, stops the workers
// and goroutines (waiting up to 5 s), saves the final replay-window tops,
// and empties the SAD, which zeroes every SA's keys once no worker uses
// them. It is idempotent.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		n.cancel()
		var errs []error
		n.mu.Lock()
		conn := n.conn
		if conn == nil {
			conn = n.cfg.Conn // never started: still the Node's to close
		}
		n.mu.Unlock()
		if conn != nil {
			errs = append(errs, conn.Close())
		}
		errs = append(errs, n.reg.Close())
		done := make(chan struct{})
		n.mu.Lock()
		engine := n.engine
		n.mu.Unlock()
		go func() {
			if engine != nil {
				engine.Wait()
			}
			n.routines.Wait()
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			errs = append(errs, errors.New("workers did not stop within 5 s"))
		}
		if n.seq != nil {
			// The final tops, once the workers have stopped opening.
			n.seq.Flush(n.log.WithField("part", "state").Warnf)
			errs = append(errs, n.seq.Close())
		}
		n.mu.Lock()
		if err := n.sad.Replace(nil, nil); err != nil {
			errs = append(errs, fmt.Errorf("emptying the SAD: %w", err))
		}
		for s := range n.owners {
			n.forgetLocked(s)
		}
		clear(n.policyOwners)
		n.mu.Unlock()
		n.closeErr = errors.Join(errs...)
	})
	return n.closeErr
}
