package control

import (
	"encoding/json"
	"errors"
	"net/netip"
	"time"

	"github.com/ipsecd/ipsecd/node"
	"github.com/ipsecd/ipsecd/sa"
)

// Sentinel errors a Backend wraps (with %w) so that the client can tell
// them apart; Client methods return errors that match them with errors.Is.
var (
	// ErrNotFound: no state or policy matches; list them to see what exists.
	ErrNotFound = errors.New("not found")
	// ErrExists: a state with the same dir, dst and spi (or a policy with
	// the same dir, if_id and selector) exists; delete it first.
	ErrExists = errors.New("already exists")
	// ErrInvalid: the request is malformed or names an impossible state or
	// policy; the message says which field.
	ErrInvalid = errors.New("invalid request")
	// ErrBusy: the daemon serves as many control connections as it will
	// at once (MaxConns); try again when one has closed.
	ErrBusy = errors.New("control: too many connections")
	// ErrDenied: the connecting process runs as neither root nor the
	// socket's owner; run the command as one of them.
	ErrDenied = errors.New("control: permission denied")
)

// Backend is what the daemon gives the Server. Its methods are called from
// many goroutines at once.
type Backend interface {
	// States returns every SA. Keys may be left in: the Server removes
	// them unless keys is true.
	States(keys bool) []StateInfo
	// GetState returns one SA, or an error wrapping ErrNotFound.
	GetState(id StateID, keys bool) (StateInfo, error)
	// AddState installs an SA. The Server has already checked c with
	// sa.Check; the Backend checks what needs the running config
	// (the interface exists, no duplicate: ErrExists).
	AddState(c sa.Config) error
	// DeleteState removes an SA, or returns an error wrapping ErrNotFound.
	DeleteState(id StateID) error
	Policies() []sa.Policy
	AddPolicy(p sa.Policy) error
	// DeletePolicy removes the policy with p's Dir, IfID and Selector;
	// p.Action is ignored.
	DeletePolicy(p sa.Policy) error
	// Stats returns the global counters in /proc/net/xfrm_stat order.
	Stats() []Counter
	Interfaces() []InterfaceInfo
	Maintainer // ops.go
}

// StateID names one SA as ip xfrm does, by SPI and outer destination,
// with its direction where an inbound and an outbound SA share those two
// (Dir 0 means either: the Backend refuses it with ErrInvalid when both
// exist). It is the node's name for an SA, so that the control socket,
// the daemon and its messages name SAs one way.
type StateID = node.StateID

// StateInfo is one SA with its counters. In JSON it is the state as the
// config file writes it plus a "stats" object.
type StateInfo struct {
	Config sa.Config // keys are nil unless asked for
	Stats  StateStats
}

// StateStats are the counters and flags of one SA, as ip -s xfrm state
// shows them. In JSON, as everywhere in the control socket's JSON, the
// names are snake_case; the drop counters say "dropped" so that none is
// taken for the state's replay_window (its size).
type StateStats struct {
	Bytes           uint64 `json:"bytes"`
	Packets         uint64 `json:"packets"`
	ReplayWindow    uint64 `json:"replay_window_dropped"` // dropped: left of the window
	Replay          uint64 `json:"replay_dropped"`        // dropped: seen before
	IntegrityFailed uint64 `json:"integrity_failed"`      // dropped: ICV mismatch
	// Seq is the last sequence number sent (out) or the highest accepted
	// (in), with ESN the full 64 bits.
	Seq         uint64 `json:"seq"`
	SoftExpired bool   `json:"soft_expired,omitempty"`
	HardExpired bool   `json:"hard_expired,omitempty"`
	// Added is when the SA was installed; LastUsed the second in which
	// it last counted a packet (nil: never), as ip -s xfrm state's add
	// and use times.
	Added    time.Time  `json:"added"`
	LastUsed *time.Time `json:"last_used,omitempty"`
	// LifetimeLeft is what is left of each limit the SA has (nil when
	// it has none).
	LifetimeLeft *LifetimeLeft `json:"lifetime_left,omitempty"`
}

// Counter is one global counter.
type Counter struct {
	Name  string `json:"name"`
	Value uint64 `json:"value"`
}

// InterfaceInfo is one xfrm interface with its counters.
type InterfaceInfo struct {
	Name       string         `json:"name"`
	IfID       uint32         `json:"if_id"`
	MTU        int            `json:"mtu"`
	Queues     int            `json:"queues"`
	TxQueueLen int            `json:"txqueuelen"`
	Addresses  []netip.Prefix `json:"addresses"`
	Routes     []netip.Prefix `json:"routes"`
	RX         LinkStats      `json:"rx"`
	TX         LinkStats      `json:"tx"`
}

// LinkStats are one direction's counters of an interface.
type LinkStats struct {
	Packets uint64 `json:"packets"`
	Bytes   uint64 `json:"bytes"`
	Errors  uint64 `json:"errors"`
	Drops   uint64 `json:"drops"`
}

// Request is one line a client sends.
type Request struct {
	Cmd    string       `json:"cmd"`
	Keys   bool         `json:"keys,omitempty"`
	ID     *StateIDSpec `json:"id,omitempty"`
	State  *StateSpec   `json:"state,omitempty"`
	Policy *PolicySpec  `json:"policy,omitempty"`
	// Lifetime is state.update's new limits.
	Lifetime *LifetimeSpec `json:"lifetime,omitempty"`
	// IKE and Child name a connection or a child (ike.go).
	IKE   string `json:"ike,omitempty"`
	Child string `json:"child,omitempty"`
	// Leases asks pool.list for each pool's leases (pool.go).
	Leases bool `json:"leases,omitempty"`
}

// Response is one line the server answers.
type Response struct {
	OK     bool            `json:"ok"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  string          `json:"error,omitempty"`
	Code   string          `json:"code,omitempty"` // not_found, exists, invalid, internal
}
