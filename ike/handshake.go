package ike

import (
	"net/netip"
	"slices"
	"time"

	"github.com/ipsecd/ipsecd/ike/dh"
	"github.com/ipsecd/ipsecd/ike/eap"
	"github.com/ipsecd/ipsecd/ike/message"
	"github.com/ipsecd/ipsecd/ike/proposal"
)

// handshake is what IKE_SA_INIT and IKE_AUTH need and nothing after them
// does: the SA holds it from Initiate or Respond until it is established
// or fails, then drops it (endHandshake), so that an established SA keeps
// only what it lives by (SPIs, suite, SK_d and the PRF, the SK ciphers,
// the message IDs, the children). Rekeys use new nonces and key
// exchanges of their own; a rekeyed SA never has one.
type handshake struct {
	priv   *dh.Private // our key exchange, cleared once the keys are derived
	ni, nr []byte
	// initReq and initResp are the IKE_SA_INIT messages as sent, signed
	// by the AUTH payloads (RFC 7296 §2.15).
	initReq, initResp []byte
	cookie            []byte   // the responder's COOKIE, sent back in IKE_SA_INIT
	peerHashes        []uint16 // the peer's SIGNATURE_HASH_ALGORITHMS (RFC 7427 §4)
	peerCertReq       [][]byte // CA key hashes of the peer's CERTREQs
	halfOpenUntil     time.Time
	childInSPI        uint32 // initiator: our inbound SPI of the first child

	// The additional key exchanges (RFC 9370), one IKE_INTERMEDIATE
	// exchange each (intermediate.go).
	addKEs []proposal.Alg // those still to run, in order
	done   int            // IKE_INTERMEDIATE exchanges completed
	// intAuthI and intAuthR are the last links of RFC 9242's IntAuth
	// chains (IntAuth_iN, IntAuth_rN), which AUTH signs.
	intAuthI, intAuthR []byte
	// peerIntermediate: the peer announced IKE_INTERMEDIATE.
	peerIntermediate bool
	// lastPlain and lastInner are the decrypted payloads of the last
	// message opened (whole, after reassembly) and the type of its first
	// payload, from which IntAuth is computed.
	lastPlain []byte
	lastInner message.PayloadType
	// shared is, for a responder, the secret of the additional key
	// exchange just answered, used once the answer is sealed.
	shared []byte
	// A responder's EAP (eap.go): the method (or the relay to RADIUS),
	// the first IKE_AUTH request's payloads (copied) that the last
	// answer needs, whether the method succeeded and the MSK it left;
	// framed are the addresses a RADIUS server assigned (eaprelay.go).
	eap     eapServer
	authReq []message.Payload
	eapDone bool
	msk     []byte
	framed  []netip.Addr
	// An initiator's EAP (eap_client.go): the method, and the gateway's
	// IDr, which its last AUTH covers; eapDone and msk as above.
	eapClient eapPeer
	peerIDr   []byte
}

// eapServer is the gateway's side of one EAP conversation as the engine
// drives it: eap.Server (EAP-MSCHAPv2, EAP-MD5) and eap.TLSServer
// (EAP-TLS), which answer in the call (eapMethod), or an EAPRelay to
// RADIUS, which answers later through EAPAnswer.
type eapServer interface {
	// Start returns the first request (EAP-Identity).
	Start() ([]byte, error)
	// Identity is the peer's EAP identity once it gave one.
	Identity() string
	// MSK is a copy of the key the method left, nil for none.
	MSK() []byte
	// Wipe zeroes the keys held and ends what the method runs.
	Wipe()
}

// eapMethod is an eapServer that runs its method here.
type eapMethod interface {
	eapServer
	Handle(in []byte) ([]byte, eap.Status, error)
	Method() message.EAPType
}

// eapPeer is the client's side of one EAP conversation: eap.Client
// (EAP-MSCHAPv2, EAP-MD5) or eap.TLSClient (EAP-TLS).
type eapPeer interface {
	Handle(in []byte) ([]byte, eap.Status, error)
	MSK() []byte
	Wipe()
}

// relay returns the conversation's relay to RADIUS, nil for a method run
// here.
func (h *handshake) relay() EAPRelay {
	r, _ := h.eap.(EAPRelay)
	return r
}

// clear wipes the secret the handshake may still hold: the DH private
// key (its shared secret is wiped where it is computed).
func (h *handshake) clear() {
	h.priv.Clear()
	h.priv = nil
	clear(h.shared)
	h.shared = nil
	clear(h.msk)
	if h.eap != nil {
		h.eap.Wipe()
	}
	if h.eapClient != nil {
		h.eapClient.Wipe()
	}
}

// endHandshake drops the handshake's state once the SA is past it:
// established, failed or deleted.
func (s *SA) endHandshake() {
	if s.hs == nil || s.state == StateInitSent || s.state == StateAuthSent || s.state == StateInitDone {
		return
	}
	if spi := s.hs.childInSPI; spi != 0 && !slices.ContainsFunc(s.children, func(c *Child) bool { return c.InSPI == spi }) {
		s.unusedSPI(spi) // our IKE_AUTH's child was refused, or never came
	}
	s.hs.clear()
	s.hs = nil
}
