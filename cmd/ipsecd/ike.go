package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/control"
	"github.com/ipsecd/ipsecd/ikenode"
	"github.com/ipsecd/ipsecd/internal/printable"
	"github.com/ipsecd/ipsecd/sa"
	"github.com/ipsecd/ipsecd/underlay"
)

// ikeRunner is the daemon's IKE (package ikenode), started when the config
// has connections (at start or at a reload). The node hands it IKE on
// port 4500 and acquires through the handlers startIKE sets.
type ikeRunner struct {
	mgr    atomic.Pointer[ikenode.Manager]
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex // serialises start and stop
}

// manager returns the running manager, or nil.
func (r *ikeRunner) manager() *ikenode.Manager { return r.mgr.Load() }

// startIKE starts IKE for cfg's connections, unless it runs or there
// are none.
func (n *node) startIKE(cfg *config.Config) error {
	r := &n.ike
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mgr.Load() != nil || len(cfg.Connections) == 0 {
		return nil
	}
	log := n.log.WithField("part", "ike")
	if p := n.conn.Port(); p != underlay.DefaultPort {
		log.Warnf("ike: the underlay's UDP port is %d: IKE moves to port 4500 after NAT detection (RFC 7296 §2.23), and ESP in UDP with it, so connections that need UDP encapsulation will not work", p)
	}
	m, err := ikenode.New(ikenode.Config{
		IKE:  &cfg.IKEConfig,
		Node: n.core,
		NATT: n.conn,
		// The local address of IKE on port 4500 when the underlay is
		// bound to one address (IP_PKTINFO tells it otherwise).
		NATTAddr: cfg.Underlay.UDP.Addr().Unmap(),
		RawESP:   cfg.Underlay.RawESP,
		Mark:     cfg.Underlay.Mark,
		Trap:     true, // the node raises acquires (node.Node.SetAcquireHandler)
		Stats:    ikenode.StatsFromSAD(n.sad),
		Log:      log,
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel, r.done = cancel, make(chan struct{})
	r.mgr.Store(m)
	// IKE on port 4500 comes through the underlay; packets a trap
	// policy lets through with no SA start IKE (start_action: trap).
	n.core.SetNonESPHandler(m.DeliverNonESP)
	n.core.SetAcquireHandler(func(a sa.Acquire) { m.Acquire(a.Policy.IfID, a.Src, a.Dst) })
	go func() {
		defer close(r.done)
		m.Run(ctx)
	}()
	log.WithField("port", m.Port()).Infof("ike: %d connections", len(cfg.Connections))
	return nil
}

// reloadIKE applies a reloaded config's connections.
func (n *node) reloadIKE(cfg *config.Config) {
	m := n.ike.manager()
	if m == nil {
		if err := n.startIKE(cfg); err != nil {
			n.log.WithError(err).Error("reload: ike")
		}
		return
	}
	res, err := m.Reload(&cfg.IKEConfig)
	if err != nil {
		n.log.WithError(err).Error("reload: ike")
		return
	}
	n.log.WithFields(map[string]any{"added": res.Added, "removed": res.Removed, "changed": res.Changed, "unchanged": res.Unchanged}).Info("reload: ike connections")
}

// stopIKE deletes the IKE SAs (the peers learn at once) and stops the
// manager, waiting a few seconds at most.
func (n *node) stopIKE() {
	r := &n.ike
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mgr.Load() == nil {
		return
	}
	n.core.SetNonESPHandler(nil)
	n.core.SetAcquireHandler(nil)
	r.cancel()
	select {
	case <-r.done:
	case <-time.After(5 * time.Second):
		n.log.Warn("ike: did not stop within 5 s")
	}
	r.mgr.Store(nil)
}

// The control socket's ike commands (control.IKEBackend).

var _ control.IKEBackend = (*backend)(nil)

func (b *backend) ikeManager() (*ikenode.Manager, error) {
	m := b.ike.manager()
	if m == nil {
		return nil, fmt.Errorf("%w: IKE is not running (the config has no connections)", control.ErrInvalid)
	}
	return m, nil
}

func (b *backend) IKEList() ([]ikenode.SAInfo, error) {
	m, err := b.ikeManager()
	if err != nil {
		return nil, err
	}
	return m.List()
}

func (b *backend) IKEInitiate(t ikenode.Target) error {
	return b.ikeAct(t, (*ikenode.Manager).Initiate)
}
func (b *backend) IKETerminate(t ikenode.Target) error {
	return b.ikeAct(t, (*ikenode.Manager).Terminate)
}
func (b *backend) IKERekey(t ikenode.Target) error { return b.ikeAct(t, (*ikenode.Manager).Rekey) }

func (b *backend) ikeAct(t ikenode.Target, f func(*ikenode.Manager, ikenode.Target) error) error {
	m, err := b.ikeManager()
	if err != nil {
		return err
	}
	return f(m, t)
}

// cmdIKE is `ipsecd ike list|initiate|terminate|rekey`.
func cmdIKE(args []string, stdout, stderr io.Writer) error {
	verb, args, err := subcommand("ike", args, stderr, "list", "initiate", "terminate", "rekey")
	if err != nil {
		return err
	}
	if verb == "list" {
		fs := newFlags("ike list", "ike list [--json] [--control PATH | --config FILE]", stderr)
		cf := addCtlFlags(fs)
		if err := parse(fs, args); err != nil {
			return err
		}
		c, err := cf.dial()
		if err != nil {
			return err
		}
		defer c.Close()
		sas, err := c.IKEList()
		if err != nil {
			return err
		}
		if cf.json {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			if sas == nil {
				sas = []ikenode.SAInfo{}
			}
			return enc.Encode(sas)
		}
		writeIKESAs(stdout, sas)
		return nil
	}
	fs := newFlags("ike "+verb, "ike "+verb+" --ike NAME | --child NAME [--control PATH | --config FILE]", stderr)
	cf := addCtlFlags(fs)
	var t ikenode.Target
	fs.StringVar(&t.IKE, "ike", "", "the connection `NAME` (its IKE SA, with its children)")
	fs.StringVar(&t.Child, "child", "", "the child `NAME`")
	if err := parse(fs, args); err != nil {
		return err
	}
	if (t.IKE == "") == (t.Child == "") {
		return usagef("ike %s: want one of --ike NAME and --child NAME", verb)
	}
	c, err := cf.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	return c.IKEAction("ike."+verb, t)
}

// writeIKESAs prints the SAs as swanctl --list-sas does, roughly. Each
// line is escaped (printable.Escape): identities are the peer's text,
// which must not reach the terminal with control characters in it.
func writeIKESAs(w io.Writer, sas []ikenode.SAInfo) {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	defer tw.Flush()
	printf := func(format string, args ...any) {
		io.WriteString(tw, printable.Escape(fmt.Sprintf(format, args...))+"\n")
	}
	for _, s := range sas {
		role := "responder"
		if s.Initiator {
			role = "initiator"
		}
		printf("%s: %s, IKEv2, %s_i%s %s_r%s", s.Name, s.State, s.SPIInitiator, star(s.Initiator), s.SPIResponder, star(!s.Initiator))
		printf("  local  '%s' @ %s", s.LocalID, s.Local)
		printf("  remote '%s' @ %s", s.RemoteID, s.Remote)
		if s.Algorithms != "" {
			printf("  %s", s.Algorithms)
		}
		line := "  " + role
		if !s.Established.IsZero() {
			line += fmt.Sprintf(", established %ds ago", int64(time.Since(s.Established)/time.Second))
		}
		if s.RekeyIn > 0 {
			line += fmt.Sprintf(", rekeying in %ds", s.RekeyIn)
		}
		if s.NAT {
			line += ", NAT-T"
		}
		printf("%s", line)
		for _, c := range s.Children {
			encap := ""
			if c.Encap {
				encap = "-in-UDP"
			}
			printf("  %s: %s, %s, ESP%s, if_id %d, SPIs: %s_i %s_o", c.Name, c.State, c.Mode, encap, c.IfID, c.SPIIn, c.SPIOut)
			printf("    %s", c.Algorithms)
			printf("    in  %s, %d bytes, %d packets", c.SPIIn, c.BytesIn, c.PacketsIn)
			printf("    out %s, %d bytes, %d packets", c.SPIOut, c.BytesOut, c.PacketsOut)
			times := fmt.Sprintf("    installed %ds ago", int64(time.Since(c.Installed)/time.Second))
			if c.RekeyIn > 0 {
				times += fmt.Sprintf(", rekeying in %ds", c.RekeyIn)
			}
			if c.ExpiresIn > 0 {
				times += fmt.Sprintf(", expires in %ds", c.ExpiresIn)
			}
			printf("%s", times)
			printf("    local  %s", strings.Join(c.LocalTS, " "))
			printf("    remote %s", strings.Join(c.RemoteTS, " "))
		}
	}
}

// star marks our SPI, as swanctl does.
func star(ours bool) string {
	if ours {
		return "*"
	}
	return ""
}
