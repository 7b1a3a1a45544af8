package ike

import (
	"crypto/sha256"
	"net/netip"
	"time"

	"github.com/ipsecd/ipsecd/ike/keys"
	"github.com/ipsecd/ipsecd/ike/message"
	"github.com/ipsecd/ipsecd/ike/proposal"
)

// State is where an IKE SA is in its life.
type State uint8

const (
	StateInitSent    State = iota + 1 // initiator: IKE_SA_INIT request sent
	StateAuthSent                     // initiator: IKE_AUTH request sent
	StateInitDone                     // responder: IKE_SA_INIT answered, IKE_AUTH awaited
	StateEstablished                  // authenticated; Children may be up
	StateDeleted                      // deleted by either side
	StateFailed                       // an exchange failed; Err says why
)

func (s State) String() string {
	return [...]string{"INVALID", "CONNECTING", "CONNECTING", "CONNECTING", "ESTABLISHED", "DELETED", "FAILED"}[min(int(s), 6)]
}

// SA is one IKE SA, from either side. The zero value is not usable; see
// Initiate and Respond.
type SA struct {
	cfg       *Config
	initiator bool
	local     netip.AddrPort
	remote    netip.AddrPort
	state     State
	err       error
	ispi      uint64
	rspi      uint64

	// hs is the state of IKE_SA_INIT and IKE_AUTH, nil once the SA is
	// established or ended (and for an SA a rekey made).
	hs *handshake

	ikeSuite   proposal.Suite
	prf        keys.PRF
	keys       keys.IKEKeys
	seal, open *keys.SKCipher
	natLocal   bool     // a NAT rewrites our address (or encap is forced)
	natRemote  bool     // a NAT rewrites the peer's address
	localID    Identity // ours, as our ID payload carries it
	peerID     Identity // the peer's, once authenticated (%any before)
	fragOK     bool     // both sides announced FRAGMENTATION_SUPPORTED
	// peerAuth is how the peer proved peerID; eapID the EAP identity
	// it proved with EAP (eap.go), leases the virtual IPs it holds
	// (cp.go), given back when the SA ends.
	peerAuth AuthClass
	eapID    string
	leases   []Lease
	released bool // leases went back to VirtualIPs
	// deferred is the IKE_AUTH request whose answer waits for the AAA
	// server (eaprelay.go), nil when none does.
	deferred *deferredAnswer
	cfgReply Configuration // what the gateway gave us (cp_client.go)
	// fragments are the fragments of our last fragmented request
	// ([0]) and response ([1]), for Packets; reasm collects the peer's.
	fragments [2][][]byte
	reasm     *reassembly
	// reasmFirst is the SHA-256 of the first fragment of the last
	// message reassembled (for lastReq).
	reasmFirst [sha256.Size]byte

	// active is our exchange under way after the handshake (a child's
	// creation, rekey or delete, an IKE rekey or delete, a liveness
	// check), nil when none; its request is pending. queue holds ours
	// that wait for it (Next).
	active task
	queue  []work
	// keylogEarlier are the keylog lines of the key sets IKE_INTERMEDIATE
	// replaced, with Config.Keylog, until TakeKeylog.
	keylogEarlier []string
	// followup is the peer's CREATE_CHILD_SA whose additional key
	// exchanges its IKE_FOLLOWUP_KE requests run (followup.go).
	followup *followupAnswer
	children []*Child
	events   []Event

	// Our requests: a window of one (RFC 7296 §2.3).
	nextID    uint32
	pending   []byte // the outstanding request, nil when none
	pendingEx message.ExchangeType
	deadline  time.Time
	tries     int

	// The peer's requests.
	peerNextID uint32
	lastResp   []byte // answer to request peerNextID-1
	// lastReq is the SHA-256 of request peerNextID-1 as it arrived (of
	// its first fragment, when fragmented): only a byte-identical
	// repeat gets lastResp again.
	lastReq [sha256.Size]byte

	from [2]netip.AddrPort // local and remote address of the message in hand

	now time.Time // the time of the message in hand
	// retiredUntil, when set, is when an SA the peer is to delete (see
	// retire) deletes itself.
	retiredUntil time.Time
	lastHeard    time.Time // when a message of the peer last authenticated
}

// LastHeard returns when the peer last sent a message that authenticated
// (or, before that, when the SA was made): a liveness check (Ping) is due
// when it lies dpd_delay in the past.
func (s *SA) LastHeard() time.Time { return s.lastHeard }

// PeerID returns the identity the peer authenticated with, or %any
// before IKE_AUTH completed.
func (s *SA) PeerID() Identity { return s.peerID }

// PeerAuth returns how the peer proved PeerID: AuthPSK or AuthPubkey;
// "" before IKE_AUTH completed.
func (s *SA) PeerAuth() AuthClass { return s.peerAuth }

// EAPIdentity returns the EAP identity the peer authenticated with
// (remote auth EAP), "" otherwise. It is the peer's text: escape it
// where shown.
func (s *SA) EAPIdentity() string { return s.eapID }

// LocalID returns our identity as our ID payload carries it (with a
// certificate and no local id, the certificate's subject).
func (s *SA) LocalID() Identity { return s.localID }

// State returns the SA's state.
func (s *SA) State() State { return s.state }

// Err returns why the SA failed (or, when Deleted, why the peer ended
// it: AUTHENTICATION_FAILED), or nil.
func (s *SA) Err() error { return s.err }

// SPIs returns the IKE SPIs (initiator's, responder's).
func (s *SA) SPIs() (uint64, uint64) { return s.ispi, s.rspi }

// IsInitiator reports whether we are the original initiator.
func (s *SA) IsInitiator() bool { return s.initiator }

// Suite returns the IKE SA's algorithms.
func (s *SA) Suite() proposal.Suite { return s.ikeSuite }

// Keys returns the IKE SA's keys (for a keylog); they belong to the SA,
// which zeroes them when it ends.
func (s *SA) Keys() keys.IKEKeys { return s.keys }

// NAT reports whether NAT detection saw a NAT in front of us or the peer
// (or encapsulation was forced): IKE moves to port 4500 and ESP goes in
// UDP (RFC 7296 §2.23).
func (s *SA) NAT() bool { return s.natLocal || s.natRemote }

// Children returns the CHILD_SAs that are up.
func (s *SA) Children() []*Child { return s.children }

// TakeEvents returns the events since the last call and forgets them.
func (s *SA) TakeEvents() []Event {
	e := s.events
	s.events = nil
	return e
}

// fail ends the SA with err. An SA already Deleted (waiting for the
// answer to its delete) only stops waiting: its end was reported.
func (s *SA) fail(err error) error {
	s.pending, s.queue = nil, nil
	if s.state != StateFailed && s.state != StateDeleted {
		s.state, s.err = StateFailed, err
		s.events = append(s.events, Event{Kind: EventIKEDown})
	}
	return err
}

// Wipe zeroes the keys the SA holds, whatever its state, for a caller
// that forgets it (one that failed or was deleted has wiped them
// itself, but for a half-open SA or one the caller dropped without the
// engine's knowing, this is the only way). The SA is of no use
// afterwards: it seals nothing and opens nothing.
func (s *SA) Wipe() {
	s.pending = nil
	s.releaseLeases()
	s.keys.Clear()
	if s.hs != nil {
		s.hs.clear()
		s.hs = nil
	}
	s.dropActive()
	s.dropFollowup()
	s.seal.Clear()
	s.open.Clear()
	s.reasm = nil
}

// wipeEnded drops the handshake's state of an SA past it (endHandshake)
// and wipes the keys of an SA that is over, at the end of each call
// that may have ended it (the answer of that call is sealed by then):
// once it failed, or was deleted with nothing outstanding, all of
// them; while our delete waits for its answer (Delete), all but the SK
// ciphers, which open that answer and answer what the peer sends
// meanwhile. What crypto objects hold (AES and AEAD key schedules, a
// curve's scalar) cannot be zeroed: those are dropped.
func (s *SA) wipeEnded() {
	s.endHandshake()
	if s.state != StateFailed && s.state != StateDeleted {
		return
	}
	s.releaseLeases()
	if s.pending != nil {
		// Our delete waits for its answer: the SK ciphers open it.
		s.keys.Clear()
		return
	}
	s.Wipe()
}
