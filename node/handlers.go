package node

import (
	"net/netip"

	"github.com/ipsecd/ipsecd/sa"
)

// The handlers IKE gives the node once it runs. The node is built
// first (IKE installs its children through it) and IKE may start later
// (a reload that adds the first connection) or stop, so they are set on
// a running node rather than in Config; the data path reads them with
// one atomic load.

// nonESPHandler is the function SetNonESPHandler set.
type nonESPHandler struct {
	fn func(b []byte, peer netip.AddrPort, local netip.Addr)
}

// SetNonESPHandler sets the function that receives every datagram on the
// underlay's ESP-in-UDP socket that starts with the non-ESP marker (IKE
// on port 4500, RFC 3948 §2.2), marker included, as underlay.Config.NonESP
// describes it; nil: none (they are counted and dropped). It applies to
// an underlay the node opens (Start), not to a Config.Conn the caller
// opened. It is called on a receive worker and must not block. Safe for
// concurrent use, before or after Start.
func (n *Node) SetNonESPHandler(fn func(b []byte, peer netip.AddrPort, local netip.Addr)) {
	if fn == nil {
		n.nonESP.Store(nil)
		return
	}
	n.nonESP.Store(&nonESPHandler{fn})
}

// deliverNonESP is the underlay's NonESP hook: it hands b to the handler
// SetNonESPHandler set, if any.
func (n *Node) deliverNonESP(b []byte, peer netip.AddrPort, local netip.Addr) {
	if h := n.nonESP.Load(); h != nil {
		h.fn(b, peer, local)
	}
}

// SetAcquireHandler sets the function that receives a request for an SA
// (sa.Acquire, Linux's acquire) when a packet routed into an interface is
// let through by an out policy and no SA serves it: the packet is dropped
// and counted (XfrmOutNoStates), and IKE should negotiate the child whose
// policy it is (start_action: trap). At most one per policy every
// sa.DefaultAcquireInterval; setting a handler starts every policy's
// interval afresh. fn runs on a data-path worker and must not block:
// hand the request to the IKE loop with a non-blocking send on a
// buffered channel. nil: no requests. Safe for concurrent use.
func (n *Node) SetAcquireHandler(fn func(sa.Acquire)) { n.sad.SetAcquireHandler(fn, 0) }
