package ike

import (
	"crypto/sha256"
	"fmt"
	"net/netip"
	"time"

	"github.com/ipsecd/ipsecd/ike/eap"
	"github.com/ipsecd/ipsecd/ike/message"
)

// EAP relayed to an AAA server (remote auth eap-radius, strongSwan's
// eap-radius): the gateway asks the EAP identity itself, then hands each
// EAP response of the peer to an EAPRelay and answers the IKE_AUTH
// request only when the server's answer comes back, through EAPAnswer.
// The engine stays without I/O: Handle returns nothing for such a
// request, the caller sends it on (the relay is the daemon's RADIUS
// client) and calls EAPAnswer from its own loop with what came back.
// Retransmissions of the request meanwhile are dropped: the answer is
// not there to repeat yet. The half-open deadline bounds the whole
// conversation, waits included.

// EAPRelay is one peer's EAP conversation relayed to an AAA server, in
// the shape of eap.Server but answered later.
type EAPRelay interface {
	// Start returns the first request (EAP-Identity).
	Start() ([]byte, error)
	// Relay sends the peer's EAP response on; what answers it comes
	// back through the SA's EAPAnswer, from the caller's loop.
	Relay(in []byte)
	// Identity is the peer's EAP identity once it gave one.
	Identity() string
	// MSK is the key the server sent with its Accept (nil for none).
	MSK() []byte
	// FramedIPs are the addresses the server assigned the peer
	// (RADIUS's Framed-IP-Address), which a CFG_REQUEST gets through
	// AssignedVirtualIPs.
	FramedIPs() []netip.Addr
	// Wipe zeroes the keys held.
	Wipe()
}

// EAPStep is what an AAA server answered to one relayed EAP response, as
// eap.Server's Handle returns it: the packet for the peer and whether
// the method goes on, succeeded or failed (Err says why).
type EAPStep struct {
	Packet []byte
	Status eap.Status
	Err    error
}

// AssignedVirtualIPs is a VirtualIPs that also leases an address an AAA
// server assigned (pools with radius: true): the pool's attributes with
// the server's address.
type AssignedVirtualIPs interface {
	Assigned(identity string, addr netip.Addr, peer netip.AddrPort) (Lease, error)
}

// deferredAnswer is the IKE_AUTH request whose answer waits for the AAA
// server: its ID and the digest a retransmission is recognised by.
type deferredAnswer struct {
	id  uint32
	req [sha256.Size]byte
}

// errDeferred is eapRound's word that the answer comes later, through
// EAPAnswer.
var errDeferred = fmt.Errorf("%w: the answer waits for the AAA server", ErrDropped)

// WaitsForEAP reports whether an IKE_AUTH answer waits for EAPAnswer.
func (s *SA) WaitsForEAP() bool { return s.deferred != nil }

// relayRound hands the peer's EAP response to the relay; the answer
// comes through EAPAnswer.
func (s *SA) relayRound(in []byte) ([]message.Payload, error) {
	s.hs.relay().Relay(in)
	return nil, errDeferred
}

// EAPAnswer takes the AAA server's answer to the EAP response relayed
// last and returns the IKE_AUTH response that carries it, to send as a
// response to the SA's addresses. An SA that no longer waits (it failed,
// timed out, or this came twice) drops it.
func (s *SA) EAPAnswer(st EAPStep, now time.Time) ([]byte, error) {
	s.now = now
	defer s.wipeEnded()
	d := s.deferred
	if d == nil || s.state != StateInitDone || s.hs == nil || s.hs.relay() == nil {
		return nil, dropped("no IKE_AUTH waits for an EAP answer")
	}
	s.deferred = nil
	var reply []message.Payload
	var handleErr error
	switch st.Status {
	case eap.Failed:
		reply, handleErr = s.refuseEAP(fmt.Errorf("%w: %w", ErrAuthFailed, st.Err), message.Payload{Type: message.TypeEAP, Body: st.Packet})
	case eap.Succeeded:
		reply, handleErr = s.eapSucceeded(st.Packet, s.hs.eap.Identity(), s.hs.eap.MSK())
		if handleErr == nil {
			s.hs.framed = s.hs.relay().FramedIPs()
			s.hs.eap.Wipe()
		}
	default:
		reply = []message.Payload{{Type: message.TypeEAP, Body: st.Packet}}
	}
	out, err := s.sealed(s.header(message.IKEAuth, d.id, true), reply)
	if err != nil {
		return nil, err
	}
	s.peerNextID++
	s.lastResp, s.lastReq = out, d.req
	return out, handleErr
}

// assignedLease leases the address the AAA server assigned of want's
// family, if it did and the VirtualIPs takes such addresses.
func (s *SA) assignedLease(identity string, want netip.Addr) (Lease, bool, error) {
	av, ok := s.cfg.VirtualIPs.(AssignedVirtualIPs)
	if !ok || s.hs == nil {
		return Lease{}, false, nil
	}
	for _, a := range s.hs.framed {
		if a.Is4() == want.Is4() {
			l, err := av.Assigned(identity, a, s.remote)
			return l, true, err
		}
	}
	return Lease{}, false, nil
}
