package ike

import (
	"time"

	"github.com/ipsecd/ipsecd/ike/dh"
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
}

// clear wipes the secret the handshake may still hold: the DH private
// key (its shared secret is wiped where it is computed).
func (h *handshake) clear() {
	h.priv.Clear()
	h.priv = nil
}

// endHandshake drops the handshake's state once the SA is past it:
// established, failed or deleted.
func (s *SA) endHandshake() {
	if s.hs == nil || s.state == StateInitSent || s.state == StateAuthSent || s.state == StateInitDone {
		return
	}
	s.hs.clear()
	s.hs = nil
}
