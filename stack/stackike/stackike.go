// Package stackike runs IKEv2 for a sidecar: a netstack (package stack)
// whose SAs are negotiated by the daemon's IKE runner (package ikenode)
// instead of given as static keys. It is apart from stack so that only a
// program that asks for IKE links the engine, the config file's decoder
// and their crypto.
//
// New builds the netstack from a daemon config file, as stackfile.New
// does (one interface, underlay.udp), and runs the file's connections:
// and secrets: on it. The children go into the netstack's node under
// node.OwnerIKE, exactly as in `ipsecd run`, and are rekeyed, checked
// for liveness (dpd_delay) and deleted there.
//
// # One port, no privilege
//
// IKE runs on the netstack's own ESP-in-UDP socket, after the non-ESP
// marker (RFC 3948 §2.2), from the first message on: the sidecar binds
// no IKE port 500, which would need privilege, and no second socket. An
// initiator may start on port 4500 (RFC 7296 §2.23), and ipsecd and
// strongSwan both answer there. So the underlay's port must be 4500,
// the port IKE's peers send to, every connection is UDP-encapsulated
// (ESP and IKE share the socket), and a peer that initiates must send
// from and to port 4500 with the marker (strongSwan's local_port and
// remote_port = 4500; an ipsecd daemon, which starts on port 500, cannot);
// ike.port is not used.
//
// # A road warrior
//
// A connection with vips: asks its gateway for an inner address (a
// configuration payload, RFC 7296 §3.15): the IKE runner makes it the
// netstack's own while the IKE SA is up (vip.go), so the interface may
// have no addresses: in the file. VirtualIPs and WaitVirtualIP tell the
// program its address, DNS the gateway's DNS servers, and Resolver
// resolves names through them, inside the tunnel, as DialContext does
// for a host name (dns.go). A program thus joins a company's VPN with no
// root, no TUN and no kernel ESP.
//
// The connection may come from a file (any auth the engine's client
// has: PSK, a certificate, EAP-MSCHAPv2 or EAP-MD5 with an eap secret),
// or from the program: Config.RoadWarrior holds what a laptop's VPN
// settings hold (the gateway's address and identity, the CA of its
// certificate, the user's name and EAP-MSCHAPv2 password) and New makes
// it the file it stands for, checked as a file is (roadwarrior.go).
//
// A sidecar may be the gateway too: its pools: hand out addresses as
// the daemon's do, a lease per identity for as long as the program runs
// (the daemon also keeps them in state_dir across restarts; a sidecar
// does not).
//
// A Net is safe for concurrent use; its IKE goroutine is the ikenode
// Daemon's Run, started by New and stopped by Close.
package stackike

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/control"
	"github.com/ipsecd/ipsecd/ike"
	"github.com/ipsecd/ipsecd/ikenode"
	"github.com/ipsecd/ipsecd/sa"
	"github.com/ipsecd/ipsecd/stack"
	"github.com/ipsecd/ipsecd/stack/stackfile"
)

// stopWait bounds how long Close waits for the IKE goroutine to send its
// deletes and end.
const stopWait = 5 * time.Second

// Config is what New needs.
type Config struct {
	// File is a daemon config with exactly one interface (stackfile.New's
	// rules), underlay.udp on port 4500, and connections: whose
	// children's if_id is the interface's. Its states:, if any, run
	// beside the negotiated children.
	File *config.Config
	// RoadWarrior, instead of File, is a connection to a remote-access
	// gateway given by the program (roadwarrior.go).
	RoadWarrior *RoadWarrior
	// Log gets the IKE runner's and the data path's log lines; nil
	// discards them.
	Log logrus.FieldLogger
	// OnEvent, when set, is told of every IKE SA and child that comes
	// up, goes down, is rekeyed or fails (ikenode.Event). It is called
	// in the IKE goroutine and must not block.
	OnEvent func(ikenode.Event)
}

// Net is a sidecar netstack whose SAs IKEv2 negotiates: a stack.Net (dial
// and listen through it as with package net) and the IKE daemon that
// runs its connections.
type Net struct {
	*stack.Net
	ike     *ikenode.Daemon
	vip     vipState
	cancel  context.CancelFunc
	done    chan struct{} // the IKE goroutine ended
	vipDone chan struct{} // routineVIP ended
	// retriesAuth is false for a RoadWarrior: an authentication
	// failure stops its retries (routineVIP) until Initiate.
	retriesAuth bool
}

// New brings the netstack up and starts IKE: connections with
// start_action start initiate at once (and retry with backoff), others
// wait for the peer or Initiate. A bad Config is refused with an error
// naming the field, wrapping stack.ErrInvalidConfig; on any error nothing
// is left running or bound.
func New(cfg Config) (_ *Net, err error) {
	f := cfg.File
	switch {
	case f != nil && cfg.RoadWarrior != nil:
		return nil, fmt.Errorf("%w: File and RoadWarrior both set; want one", stack.ErrInvalidConfig)
	case cfg.RoadWarrior != nil:
		if f, err = cfg.RoadWarrior.file(); err != nil {
			return nil, err
		}
		defer f.WipeKeys() // the engine holds copies of its own
	case f == nil:
		return nil, fmt.Errorf("%w: no config file", stack.ErrInvalidConfig)
	}
	if len(f.Connections) == 0 {
		return nil, fmt.Errorf("%w: %s: connections: none (a sidecar with static keys only is stackfile.New's)", stack.ErrInvalidConfig, f.File)
	}
	if p := f.Underlay.UDP.Port(); p != ike.NATTPort {
		return nil, fmt.Errorf("%w: %s: underlay.udp: port %d: a sidecar runs IKE on its ESP-in-UDP socket, which must be port %d, where IKE's peers send (RFC 7296 §2.23)",
			stack.ErrInvalidConfig, f.File, p, ike.NATTPort)
	}
	log := cfg.Log
	if log == nil {
		l := logrus.New()
		l.SetOutput(io.Discard)
		log = l
	}
	sc, err := stackfile.Config(f)
	if err != nil {
		return nil, err
	}
	// A road warrior's address may all come from its gateways.
	sc.AddressesLater = asksVIPs(f)
	// Negotiated keys are new for every child: only the file's static
	// states need state_dir.
	sc.EphemeralKeys = len(f.States) == 0
	sn, err := stack.New(sc)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.File, err)
	}
	defer func() {
		if err != nil {
			sn.Close()
		}
	}()
	nd := sn.Node()
	n := new(Net) // OnEvent signals its vip, made before Run starts
	d, err := ikenode.New(ikenode.Config{
		IKE:       &f.IKEConfig,
		Node:      nd,
		NATT:      nd.Underlay(),
		NATTAddr:  f.Underlay.UDP.Addr().Unmap(),
		PeerPort:  ike.NATTPort,
		Trap:      true, // the node raises acquires: start_action trap works
		Pools:     f.PoolSet(),
		Stats:     ikenode.StatsFromSAD(sn.SAD()),
		Log:       log.WithField("part", "ike"),
		Transport: underlayTransport{nd.Underlay()},
		OnEvent: func(ev ikenode.Event) {
			if cfg.OnEvent != nil {
				cfg.OnEvent(ev)
			}
			n.vip.event(ev)
		},
	})
	if err != nil {
		return nil, fmt.Errorf("stackike: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	*n = Net{Net: sn, ike: d, cancel: cancel, done: make(chan struct{}), vipDone: make(chan struct{}),
		vip: vipState{kick: make(chan struct{}, 1), changed: make(chan struct{})}, retriesAuth: cfg.RoadWarrior == nil}
	nd.SetNonESPHandler(d.DeliverNonESP)
	nd.SetAcquireHandler(func(a sa.Acquire) { d.Acquire(a.Policy.IfID, a.Src, a.Dst) })
	go n.routineIKE(ctx)
	go n.routineVIP(ctx)
	return n, nil
}

// asksVIPs reports whether a connection of f asks for virtual IPs.
func asksVIPs(f *config.Config) bool {
	for _, c := range f.Connections {
		if len(c.VIPs) > 0 {
			return true
		}
	}
	return false
}

// routineIKE runs the IKE daemon until Close.
func (n *Net) routineIKE(ctx context.Context) {
	defer close(n.done)
	n.ike.Run(ctx)
}

// Initiate brings up a connection's IKE SA with its children, or one
// child (t.Child), as `ipsecd ike initiate` does. It returns once the
// request is sent; List, WaitVirtualIP or Config.OnEvent tell when the
// SAs are up. WaitVirtualIP forgets an earlier failure.
func (n *Net) Initiate(t ikenode.Target) error {
	n.vip.setFailed(nil, false)
	return n.ike.Initiate(t)
}

// Rekey rekeys a child (t.Child) or an IKE SA (t.IKE), make-before-break,
// as `ipsecd ike rekey` does.
func (n *Net) Rekey(t ikenode.Target) error { return n.ike.Rekey(t) }

// Terminate deletes a child or an IKE SA with the peer, as `ipsecd ike
// terminate` does.
func (n *Net) Terminate(t ikenode.Target) error { return n.ike.Terminate(t) }

// List returns the IKE SAs and their children, as `ipsecd ike list`
// shows them.
func (n *Net) List() ([]control.IKESAInfo, error) { return n.ike.List() }

// Close deletes the IKE SAs with their peers (one try), stops the IKE
// goroutine (waiting stopWait at most), then closes the netstack, which
// zeroes the children's keys. It is idempotent.
func (n *Net) Close() error {
	n.cancel()
	var err error
	select {
	case <-n.done:
	case <-time.After(stopWait):
		err = errors.New("stackike: the IKE daemon did not stop within 5 s")
	}
	<-n.vipDone // its List returns once Run has ended
	nd := n.Node()
	nd.SetNonESPHandler(nil)
	nd.SetAcquireHandler(nil)
	return errors.Join(err, n.Net.Close())
}
