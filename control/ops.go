package control

import (
	"errors"

	"github.com/ipsecd/ipsecd/sa"
)

// The maintenance commands, as ip xfrm and swanctl have them:
// state.flush, state.count, state.update and reload.

// Maintainer is the part of a Backend that the maintenance commands use.
type Maintainer interface {
	// FlushStates removes every SA, whoever installed it, and returns
	// how many it removed.
	FlushStates() (int, error)
	// UpdateState sets the limits of the SA id names, in place; an error
	// wrapping ErrNotFound when there is none.
	UpdateState(id StateID, l sa.Lifetime) error
	// Reload applies the daemon's config file as SIGHUP does and returns
	// what changed, or the reason it was refused (the file's
	// FILE:LINE: field errors, one per line).
	Reload() (ReloadResult, error)
}

// StateCount is the answer of state.count.
type StateCount struct {
	Count int `json:"count"`
	In    int `json:"in"`
	Out   int `json:"out"`
}

// ReloadResult says what a reload changed, in the words of its log line.
type ReloadResult struct {
	File                   string   `json:"file"`
	InterfacesAdded        int      `json:"interfaces_added"`
	InterfacesRemoved      int      `json:"interfaces_removed"`
	InterfacesReconfigured int      `json:"interfaces_reconfigured"`
	InterfacesReplaced     int      `json:"interfaces_replaced"`
	StatesAdded            int      `json:"states_added"`
	StatesRemoved          int      `json:"states_removed"`
	StatesKept             int      `json:"states_kept"`
	StatesTaken            int      `json:"states_taken"`   // the control socket's, now named by the file
	StatesUpdated          int      `json:"states_updated"` // kept, with new limits
	PoliciesAdded          int      `json:"policies_added"`
	PoliciesRemoved        int      `json:"policies_removed"`
	PoliciesKept           int      `json:"policies_kept"`
	PoliciesTaken          int      `json:"policies_taken"`
	Warnings               []string `json:"warnings,omitempty"`
}

// FlushResult is the answer of state.flush.
type FlushResult struct {
	Removed int `json:"removed"`
}

func (s *Server) stateFlush(*Request) (any, error) {
	n, err := s.backend.FlushStates()
	if err != nil {
		return nil, err
	}
	return FlushResult{Removed: n}, nil
}

func (s *Server) stateCount(*Request) (any, error) {
	var c StateCount
	for _, st := range s.backend.States(false) {
		c.Count++
		if st.Config.Dir == sa.DirIn {
			c.In++
		} else {
			c.Out++
		}
	}
	return c, nil
}

func (s *Server) stateUpdate(req *Request) (any, error) {
	id, err := req.stateID()
	if err != nil {
		return nil, err
	}
	if req.Lifetime == nil {
		return nil, invalid(errors.New(`missing "lifetime"`))
	}
	l, err := req.Lifetime.lifetime()
	if err != nil {
		return nil, invalid(err)
	}
	return nil, s.backend.UpdateState(id, l)
}

func (s *Server) reload(*Request) (any, error) {
	res, err := s.backend.Reload()
	if err != nil {
		return nil, err
	}
	return res, nil
}

// FlushStates removes every SA and returns how many there were.
func (c *Client) FlushStates() (int, error) {
	var out FlushResult
	err := c.call(Request{Cmd: "state.flush"}, &out)
	return out.Removed, err
}

// CountStates counts the SAs.
func (c *Client) CountStates() (StateCount, error) {
	var out StateCount
	err := c.call(Request{Cmd: "state.count"}, &out)
	return out, err
}

// UpdateState sets the limits of the SA id names.
func (c *Client) UpdateState(id StateID, l sa.Lifetime) error {
	return c.call(Request{Cmd: "state.update", ID: NewStateIDSpec(id), Lifetime: NewLifetimeSpec(l)}, nil)
}

// Reload asks the daemon to apply its config file.
func (c *Client) Reload() (ReloadResult, error) {
	var out ReloadResult
	err := c.call(Request{Cmd: "reload"}, &out)
	return out, err
}
