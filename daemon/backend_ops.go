package daemon

import (
	"fmt"

	"github.com/ipsecd/ipsecd/control"
	ipnode "github.com/ipsecd/ipsecd/node"
	"github.com/ipsecd/ipsecd/sa"
)

// The maintenance commands of the control socket (control.Maintainer):
// state flush, state update, reload.

// FlushStates removes every SA, as ip xfrm state flush does. The keys
// stay used: a new SA, or a reload of the same file, needs fresh ones.
func (b *backend) FlushStates() (int, error) {
	n, err := b.core.FlushStates()
	return n, mapSAError(err)
}

// UpdateState sets the limits of one SA in place (ip xfrm state update).
func (b *backend) UpdateState(id control.StateID, l sa.Lifetime) error {
	s, err := b.find(id)
	if err != nil {
		return err
	}
	return mapSAError(b.core.UpdateLifetime(ipnode.IDOf(s), l))
}

// Reload is SIGHUP with an answer: what changed, or why the file was
// refused. The file's errors (FILE:LINE: field: message, one per line)
// and a refused change are ErrInvalid; the running config stays.
func (b *backend) Reload() (control.ReloadResult, error) {
	n := (*Daemon)(b)
	cfg := n.runningConfig()
	if cfg == nil {
		return control.ReloadResult{}, fmt.Errorf("%w: reload: this daemon runs no config file", control.ErrInvalid)
	}
	res, err := n.reload(cfg.File)
	if err != nil {
		return res, coded{control.ErrInvalid, err}
	}
	return res, nil
}
