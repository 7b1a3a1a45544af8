package control

import (
	"errors"
	"fmt"

	"github.com/ipsecd/ipsecd/ikenode"
)

// IKEBackend is what a Backend adds when the daemon runs IKE: the
// commands of `ipsecd ike`. A Backend without it answers them with
// ErrInvalid ("IKE is not running").
type IKEBackend interface {
	IKEList() ([]ikenode.SAInfo, error)
	IKEInitiate(t ikenode.Target) error
	IKETerminate(t ikenode.Target) error
	IKERekey(t ikenode.Target) error
}

// errNoIKE answers the ike commands of a daemon that runs no IKE.
var errNoIKE = fmt.Errorf("%w: IKE is not running (the config has no connections)", ErrInvalid)

// isIKE reports whether cmd is one of dispatchIKE's.
func isIKE(cmd string) bool {
	switch cmd {
	case "ike.list", "ike.initiate", "ike.terminate", "ike.rekey":
		return true
	}
	return false
}

// dispatchIKE answers the ike.* requests: list, and initiate, terminate
// and rekey of one connection ("ike") or child ("child").
func (s *Server) dispatchIKE(req *Request) (any, error) {
	b, ok := s.backend.(IKEBackend)
	if !ok {
		return nil, errNoIKE
	}
	if req.Cmd == "ike.list" {
		l, err := b.IKEList()
		return nonNil(l), ikeError(err)
	}
	if (req.IKE == "") == (req.Child == "") {
		return nil, invalid(errors.New(`want one of "ike" (a connection's name) and "child" (a child's name)`))
	}
	t := ikenode.Target{IKE: req.IKE, Child: req.Child}
	var err error
	switch req.Cmd {
	case "ike.initiate":
		err = b.IKEInitiate(t)
	case "ike.terminate":
		err = b.IKETerminate(t)
	case "ike.rekey":
		err = b.IKERekey(t)
	}
	return nil, ikeError(err)
}

// ikeError gives the manager's errors the codes the client tells apart.
func ikeError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ikenode.ErrNotFound):
		return fmt.Errorf("%w: %v", ErrNotFound, err)
	case errors.Is(err, ikenode.ErrState):
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return err
}

// IKEList returns the IKE SAs and their children.
func (c *Client) IKEList() ([]ikenode.SAInfo, error) {
	var out []ikenode.SAInfo
	err := c.call(Request{Cmd: "ike.list"}, &out)
	return out, err
}

// IKEAction runs ike.initiate, ike.terminate or ike.rekey (cmd) on a
// connection or a child.
func (c *Client) IKEAction(cmd string, t ikenode.Target) error {
	return c.call(Request{Cmd: cmd, IKE: t.IKE, Child: t.Child}, nil)
}
