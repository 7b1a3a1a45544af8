package ike

import (
	"net/netip"

	"github.com/ipsecd/ipsecd/ike/keys"
	"github.com/ipsecd/ipsecd/ike/message"
	"github.com/ipsecd/ipsecd/ike/proposal"
)

// Child describes a negotiated CHILD_SA pair, ready to install: the
// inbound SA (packets from the peer, opened with In) and the outbound SA
// (sealed with Out). Its key slices belong to the Child; Clear wipes them.
type Child struct {
	// Name is the name of the child config it was made from
	// (ChildConfig.Name): a rekey keeps it.
	Name string
	// Suite holds the ESP algorithms: Encr (aes128gcm16, aes256gcm16,
	// chacha20poly1305, aes128, aes256), Integ (sha256, absent for an
	// AEAD) and ESN.
	Suite proposal.Suite
	// InSPI is the SPI the peer puts on packets to us; OutSPI the one we
	// put on packets to it.
	InSPI, OutSPI uint32
	// In and Out are the keys as sa.Algorithm.Key takes them: the cipher
	// key followed by the 4-byte salt for the AEADs.
	In, Out   keys.ESPKeys
	Transport bool
	ESN       bool
	// LocalTS and RemoteTS are the negotiated selectors: inner sources
	// on our side and on the peer's.
	LocalTS, RemoteTS []message.Selector
	// Local and Remote are the outer addresses; Encap says ESP goes in
	// UDP (a NAT was detected or encapsulation forced) between the
	// ports IKE moved to.
	Local, Remote netip.AddrPort
	Encap         bool
	// InitiatorKeys and ResponderKeys are the same keys by RFC role (the
	// initiator of the exchange that made the child), as strongSwan logs
	// them ("encryption initiator key"): for tests and a keylog.
	InitiatorKeys, ResponderKeys keys.ESPKeys
	// Replaces is, for a rekeyed child, the child it replaces, until
	// that one is deleted. The events say what to install and when
	// (make-before-break): EventChildUp the new pair, or its inbound SA
	// alone (InboundOnly) while the peer may not have it yet, then
	// EventChildOutbound its outbound SA, then EventChildDown the old
	// pair.
	Replaces *Child
	// Redundant: the child is the loser of simultaneous rekeys (§2.8.1),
	// ours or the peer's: it replaces nothing, carries none of our
	// traffic (its outbound SA is never installed), and its maker's
	// delete ends it.
	Redundant bool

	// cfg is the child config it was made from: its proposals serve
	// its rekeys.
	cfg   *ChildConfig
	state ChildState
	// rekeyedBy is the side whose rekey made the child that replaces
	// this one (SideNone while none does).
	rekeyedBy Side
	// outboundWaits: only the inbound SA is to be installed yet
	// (EventChildUp's InboundOnly); EventChildOutbound ends it.
	outboundWaits bool
}

// ChildState is where a child is in its life; the engine alone moves it.
type ChildState uint8

const (
	ChildInstalled ChildState = iota // up (its outbound SA may wait: EventChildUp's InboundOnly)
	ChildRekeying                    // our rekey of it is under way
	ChildRekeyed                     // a child that replaces it was made; it waits for its delete
	ChildDeleting                    // our delete of it is under way
	ChildDeleted                     // gone (EventChildDown reported it)
)

func (s ChildState) String() string {
	return [...]string{"INSTALLED", "REKEYING", "REKEYED", "DELETING", "DELETED"}[min(int(s), 4)]
}

// Side is one end of an IKE SA.
type Side uint8

const (
	SideNone Side = iota
	SideUs
	SidePeer
)

// State returns where c is in its life.
func (c *Child) State() ChildState { return c.state }

// RekeyedBy returns the side whose rekey made the child that replaces c
// and carries its traffic (after simultaneous rekeys, the winner's), or
// SideNone while no child replaces c.
func (c *Child) RekeyedBy() Side { return c.rekeyedBy }

// OutboundWaits reports whether c's outbound SA is not to be installed
// yet: EventChildOutbound says when (never for a Redundant child).
func (c *Child) OutboundWaits() bool { return c.outboundWaits }

// replacedBy records that a child of side's rekey replaces c.
func (c *Child) replacedBy(side Side) {
	c.state, c.rekeyedBy = ChildRekeyed, side
}

// gone forgets what c replaced, now that c itself is deleted: a chain
// of rekeys keeps no more than the newest child and the one it replaces
// alive.
func (c *Child) gone() { c.Replaces, c.state = nil, ChildDeleted }

// Clear zeroes the child's keys.
func (c *Child) Clear() {
	for _, b := range [][]byte{c.In.Enc, c.In.Integ, c.Out.Enc, c.Out.Integ} {
		clear(b)
	}
}

// newChild derives a child's keys from KEYMAT (RFC 7296 §2.17): the first
// child of IKE_AUTH with the IKE_SA_INIT nonces and no g^ir; a rekeyed
// child with the CREATE_CHILD_SA nonces and, with PFS, its g^ir.
// weInitiated says whether we initiated the exchange that made the child:
// its initiator's keys come first in KEYMAT.
func (s *SA) newChild(cc *ChildConfig, esp proposal.Suite, inSPI, outSPI uint32, localTS, remoteTS []message.Selector, transport bool,
	gir, ni, nr []byte, weInitiated bool, addKE ...[]byte) *Child {
	i2r, r2i := keys.ChildKeys(s.prf, s.keys.D, gir, ni, nr, esp, addKE...)
	c := &Child{
		Name: cc.Name, cfg: cc,
		Suite: esp, InSPI: inSPI, OutSPI: outSPI, Transport: transport,
		ESN:     esp.ESN.ID == proposal.ESN && esp.ESN.Name != "",
		LocalTS: localTS, RemoteTS: remoteTS, Local: s.local, Remote: s.remote, Encap: s.NAT(),
		InitiatorKeys: i2r, ResponderKeys: r2i,
	}
	if weInitiated {
		c.Out, c.In = i2r, r2i
	} else {
		c.Out, c.In = r2i, i2r
	}
	return c
}

// childConfig returns the config c was made from (the Child of the
// connection for a Child made elsewhere).
func (s *SA) childConfig(c *Child) *ChildConfig {
	if c.cfg != nil {
		return c.cfg
	}
	return &s.cfg.Child
}

// narrowTo returns a peer's offer (TSi and TSr as the initiator of the
// exchange sent them) narrowed to cc's selectors, ours and the peer's,
// or nils when they meet nowhere, or only in selectors the SAD cannot
// hold exactly (installable): TS_UNACCEPTABLE.
func narrowTo(cc *ChildConfig, tsi, tsr []message.Selector) (local, remote []message.Selector) {
	remote, local = narrow(tsi, prefixSelectors(cc.RemoteTS)), narrow(tsr, prefixSelectors(cc.LocalTS))
	if len(remote) == 0 || len(local) == 0 || !installable(local, remote) {
		return nil, nil
	}
	return local, remote
}

// selectChild returns the child config a peer's offer of a new child
// (TSi and TSr as the initiator of the exchange sent them) gets, with
// the selectors narrowed to it: of the connection's children whose
// remote_ts and local_ts the offer meets, the first that holds it whole,
// else the first it meets (as strongSwan's select_child_cfg prefers the
// best match). nil when it meets none (narrowTo).
func (s *SA) selectChild(tsi, tsr []message.Selector) (cc *ChildConfig, local, remote []message.Selector) {
	ccs := s.cfg.childConfigs()
	for pass := 0; pass < 2; pass++ {
		for i := range ccs {
			c := &ccs[i]
			if len(s.cfg.Children) == 0 {
				c = &s.cfg.Child
			}
			l, r := narrowTo(c, tsi, tsr)
			if l == nil || pass == 0 && !(within(tsi, prefixSelectors(c.RemoteTS)) && within(tsr, prefixSelectors(c.LocalTS))) {
				continue
			}
			return c, l, r
		}
	}
	return nil, nil, nil
}
