package control

import (
	"fmt"
	"net/netip"
)

// PoolBackend is what a Backend adds when the daemon has address pools:
// the commands of `ipsecd pool`. A Backend without it answers them with
// ErrNoPools, an ErrInvalid.
type PoolBackend interface {
	// PoolList returns the pools, each with its leases when leases is
	// set.
	PoolList(leases bool) ([]PoolInfo, error)
}

// PoolInfo is one address pool as pool.list answers it and `ipsecd pool
// list` shows it (swanctl --list-pools's fields).
type PoolInfo struct {
	Name    string `json:"name"`
	Addrs   string `json:"addrs"` // as the config writes them
	Size    uint32 `json:"size"`  // addresses it hands out
	Online  int    `json:"online"`
	Offline int    `json:"offline"`
	// Leases, sorted by address; nil unless asked for.
	Leases []PoolLease `json:"leases,omitempty"`
}

// PoolLease is one address of a pool and the identity it is leased to.
type PoolLease struct {
	Address  netip.Addr `json:"address"`
	Identity string     `json:"identity"` // the peer's text: escape it where shown
	Status   string     `json:"status"`   // online or offline
}

// ErrNoPools answers the pool commands of a daemon whose config has no
// pools. It wraps ErrInvalid; add pools to the config and reload.
var ErrNoPools = fmt.Errorf("%w: no address pools (the config has no pools)", ErrInvalid)

// poolList answers pool.list.
func (s *Server) poolList(req *Request) (any, error) {
	b, ok := s.backend.(PoolBackend)
	if !ok {
		return nil, ErrNoPools
	}
	l, err := b.PoolList(req.Leases)
	return nonNil(l), err
}

// PoolList returns the pools, with their leases when leases is set.
func (c *Client) PoolList(leases bool) ([]PoolInfo, error) {
	var out []PoolInfo
	err := c.call(Request{Cmd: "pool.list", Leases: leases}, &out)
	return out, err
}
