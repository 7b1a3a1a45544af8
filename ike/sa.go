package ike

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"slices"
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

// Errors an exchange ends with. ErrDropped wraps the reason a message was
// ignored (the caller counts it); the others end the SA (State Failed).
var (
	ErrDropped           = errors.New("ike: message dropped")
	ErrNoProposalChosen  = errors.New("ike: no proposal chosen")
	ErrAuthFailed        = errors.New("ike: authentication failed")
	ErrTSUnacceptable    = errors.New("ike: traffic selectors unacceptable")
	ErrTimeout           = errors.New("ike: peer did not answer")
	ErrInvalidKE         = errors.New("ike: peer asked for a group we did not offer")
	ErrProtocol          = errors.New("ike: peer violated the protocol")
	ErrChildFailed       = errors.New("ike: IKE SA up, CHILD_SA refused")
	ErrUnsupportedChange = errors.New("ike: exchange not supported yet")
)

// EventKind says what an Event reports.
type EventKind uint8

const (
	EventIKEUp     EventKind = iota + 1 // the IKE SA is established
	EventChildUp                        // Child is ready to install
	EventChildDown                      // Child was deleted by the peer: remove it
	EventIKEDown                        // the IKE SA and all its children are gone
	// EventIKERekeyed: SA is a new IKE SA that replaces this one; route
	// its SPIs to it. The children move to it (see Children) once the
	// rekey settles; after simultaneous rekeys (§2.8.2) one of the two
	// new SAs is deleted again, and the other gets the children. This
	// SA then only waits to be deleted.
	EventIKERekeyed
	// EventInitialContact: the peer, authenticated as Peer, said in its
	// IKE_AUTH request that this is the only IKE SA between its
	// identity and ours (INITIAL_CONTACT, RFC 7296 §2.4): it restarted,
	// and the other IKE SAs the daemon holds of the same connection
	// between the same two identities (Identity.Equal), proven the same
	// way (PeerAuth), are stale. Delete those and their children (not
	// this SA, nor SAs of other connections). It comes after EventIKEUp
	// and before the EventChildUp of the same IKE_AUTH, so that stale
	// children with the same selectors are gone before the new one is
	// installed.
	EventInitialContact
	// EventIKEDeleting: SA is a new IKE SA of ours that lost
	// simultaneous rekeys (§2.8.2) and is deleted at once: it holds no
	// children and is Deleted already, but its delete, which this
	// call returned, is retransmitted by its own Tick. Route its SPIs to
	// it while its NextTimeout is set, then forget it.
	EventIKEDeleting
)

func (k EventKind) String() string {
	names := []string{"EventKind(0)", "IKEUp", "ChildUp", "ChildDown", "IKEDown", "IKERekeyed", "InitialContact", "IKEDeleting"}
	if int(k) < len(names) {
		return names[k]
	}
	return fmt.Sprintf("EventKind(%d)", k)
}

// Event is a change the daemon acts on.
type Event struct {
	Kind  EventKind
	Child *Child
	SA    *SA      // EventIKERekeyed
	Peer  Identity // EventInitialContact: the peer's identity, as PeerID
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
	// peerAuth is how the peer proved peerID.
	peerAuth AuthClass
	// fragments are the fragments of our last fragmented request
	// ([0]) and response ([1]), for Packets; reasm collects the peer's.
	fragments [2][][]byte
	reasm     *reassembly
	// reasmFirst is the SHA-256 of the first fragment of the last
	// message reassembled (for lastReq).
	reasmFirst [sha256.Size]byte

	create   *pendingCreate
	deleting *Child // the child our outstanding INFORMATIONAL deletes
	queue    []work // our requests that wait for the outstanding one (Next)
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
	s.keys.Clear()
	if s.hs != nil {
		s.hs.clear()
		s.hs = nil
	}
	if s.create != nil {
		s.create.priv.Clear()
		s.create = nil
	}
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
	if s.pending != nil {
		// Our delete waits for its answer: the SK ciphers open it.
		s.keys.Clear()
		if s.create != nil {
			s.create.priv.Clear()
			s.create = nil
		}
		return
	}
	s.Wipe()
}

func dropped(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrDropped}, args...)...)
}

// Busy reports whether a request of ours is outstanding: the next one
// (Delete, a rekey, a liveness check) waits in the queue for its answer
// or its last retransmission (RFC 7296 §2.3: a window of one).
func (s *SA) Busy() bool { return s.pending != nil }

// NextTimeout returns when Tick must be called next, or the zero time
// when no request is outstanding.
func (s *SA) NextTimeout() time.Time {
	if s.state == StateInitDone {
		return s.halfOpenUntil()
	}
	if s.pending == nil {
		return s.retiredDeadline()
	}
	return s.deadline
}

// HalfOpenTimeout is how long a responder waits for IKE_AUTH after
// answering IKE_SA_INIT before it forgets the SA (strongSwan's
// half_open_timeout).
const HalfOpenTimeout = 30 * time.Second

// halfOpenUntil is when a responder in StateInitDone gives up waiting
// for IKE_AUTH: at once when Wipe dropped its handshake.
func (s *SA) halfOpenUntil() time.Time {
	if s.hs == nil {
		return time.Time{}
	}
	return s.hs.halfOpenUntil
}

// Tick retransmits the outstanding request when its time has come, and
// fails the SA with ErrTimeout after the last try, or when a responder's
// half-open SA waited HalfOpenTimeout for IKE_AUTH. An SA that a rekey
// replaced, and that the peer did not delete within ReplacedTimeout, is
// deleted: Tick returns the delete to send, and the SA is Deleted. A
// Deleted SA's delete that went unanswered ends its retransmissions with
// ErrTimeout too, and nothing else: the SA was over already.
func (s *SA) Tick(now time.Time) ([]byte, error) {
	defer s.wipeEnded()
	if s.state == StateInitDone && !now.Before(s.halfOpenUntil()) {
		return nil, s.fail(fmt.Errorf("%w: no IKE_AUTH within %v", ErrTimeout, HalfOpenTimeout))
	}
	if s.pending == nil && s.retiredExpired(now) {
		return s.Delete(now)
	}
	if s.pending == nil || now.Before(s.deadline) {
		return nil, nil
	}
	r := s.cfg.retransmit()
	if s.tries >= r.Tries {
		if s.state == StateDeleted {
			return nil, s.fail(fmt.Errorf("%w: the delete was not answered", ErrTimeout))
		}
		return nil, s.fail(ErrTimeout)
	}
	s.tries++
	s.deadline = now.Add(time.Duration(float64(r.Timeout) * math.Pow(r.Base, float64(s.tries))))
	return s.pending, nil
}

// startRequest records msg as the outstanding request.
func (s *SA) startRequest(msg []byte, ex message.ExchangeType, now time.Time) []byte {
	s.pending, s.pendingEx, s.tries = msg, ex, 0
	s.deadline = now.Add(s.cfg.retransmit().Timeout)
	return msg
}

func (s *SA) header(ex message.ExchangeType, id uint32, response bool) message.HeaderFields {
	h := message.HeaderFields{ISPI: s.ispi, RSPI: s.rspi, Exchange: ex, MessageID: id}
	if s.initiator {
		h.Flags |= message.FlagInitiator
	}
	if response {
		h.Flags |= message.FlagResponse
	}
	return h
}

// request sends a new encrypted request of exchange ex.
func (s *SA) request(ex message.ExchangeType, ps []message.Payload, now time.Time) ([]byte, error) {
	if s.pending != nil {
		return nil, ErrBusy
	}
	msg, err := s.sealed(s.header(ex, s.nextID, false), ps)
	if err != nil {
		return nil, err
	}
	s.nextID++
	return s.startRequest(msg, ex, now), nil
}

// NATTPort is the port IKE moves to, on both sides, once NAT detection
// saw a NAT (RFC 7296 §2.23); messages there follow a 4-byte non-ESP
// marker (RFC 3948), which the caller strips and adds.
const NATTPort = 4500

// Addrs returns the addresses the SA talks between: where to send its
// requests and retransmissions. After a NAT was detected the ports are
// NATTPort.
func (s *SA) Addrs() (local, remote netip.AddrPort) { return s.local, s.remote }

// Handle is HandleFrom with the SA's current addresses.
func (s *SA) Handle(raw []byte, now time.Time) ([]byte, error) {
	return s.HandleFrom(raw, s.local, s.remote, now)
}

// HandleFrom processes one message from the peer that arrived at local
// from remote, and returns the message to send back (to remote, from
// local), if any. A message that authenticates moves the SA to its
// addresses when a NAT was detected (the peer's mapping may change,
// §2.23). A dropped message gives an error wrapping ErrDropped and
// changes nothing. Any other error says why an exchange failed; the SA
// itself failed only when State is StateFailed (then Err says the same).
// An error may come with a message to send (a notify refusing the
// request). Events say what changed; read them with TakeEvents.
func (s *SA) HandleFrom(raw []byte, local, remote netip.AddrPort, now time.Time) ([]byte, error) {
	m, err := message.Parse(raw)
	if err != nil {
		return nil, dropped("%v", err)
	}
	s.now = now
	defer s.wipeEnded()
	if s.state == StateFailed || s.state == StateDeleted && s.pending == nil {
		// Only our last answer is still given, to a retransmission of
		// the request that ended the SA (its answer may have been lost).
		if !m.IsResponse() && m.ISPI == s.ispi && m.RSPI == s.rspi && s.repeated(m, raw, remote) {
			return s.lastResp, nil
		}
		return nil, dropped("IKE SA is %v", s.state)
	}
	if m.ISPI != s.ispi || m.RSPI != s.rspi && !(m.Exchange == message.IKESAInit && (m.RSPI == 0 || s.state == StateInitSent)) {
		return nil, dropped("SPIs %016x_i %016x_r are not this SA's", m.ISPI, m.RSPI)
	}
	if m.Flags&message.FlagInitiator != 0 == s.initiator {
		return nil, dropped("I flag says the message is our own")
	}
	if m.Exchange != message.IKESAInit {
		s.from = [2]netip.AddrPort{local, remote}
	}
	if m.IsResponse() {
		return s.handleResponse(m, raw, now)
	}
	return s.handleRequest(m, raw, remote, now)
}

// repeated reports whether request m, raw as it arrived from remote, is
// a retransmission of the request lastResp answers (RFC 7296 §2.1): the
// same bytes (for a fragmented request, those of its first fragment:
// the answer goes once, RFC 7383 §2.6.1), from the address the SA's
// peer is at. Anything less would let anyone who saw a header draw the
// whole answer, fragments and all, to any address: a header of 28 bytes
// drew 3.6 KB. A peer that a NAT moved between its request and the
// repeat is not answered; its next new message moves the SA.
func (s *SA) repeated(m *message.Message, raw []byte, remote netip.AddrPort) bool {
	return s.lastResp != nil && m.MessageID == s.peerNextID-1 && remote == s.remote &&
		sha256.Sum256(raw) == s.lastReq
}

// authenticated is called when a message passed its integrity check: the
// addresses it came by become the SA's when a NAT is in the way.
func (s *SA) authenticated() {
	s.lastHeard = s.now
	if s.NAT() && s.from[1].IsValid() {
		s.local, s.remote = s.from[0], s.from[1]
	}
}

func (s *SA) handleResponse(m *message.Message, raw []byte, now time.Time) ([]byte, error) {
	if s.pending == nil || m.MessageID != s.nextID-1 && !(m.Exchange == message.IKESAInit && m.MessageID == 0) || m.Exchange != s.pendingEx {
		return nil, dropped("unexpected response %v id %d", m.Exchange, m.MessageID)
	}
	if m.Exchange == message.IKESAInit {
		return s.handleInitResponse(m, raw, now)
	}
	ps, err := s.decrypt(m, raw)
	if err == errFragmentHeld {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	s.pending = nil
	switch m.Exchange {
	case message.IKEAuth:
		return s.handleAuthResponse(ps, now)
	case message.CreateChildSA:
		return s.handleCreateResponse(ps, now)
	case message.Informational:
		if c := s.deleting; c != nil {
			s.deleting = nil
			s.removeChild(c)
		}
	}
	return nil, nil
}

func (s *SA) removeChild(c *Child) {
	if i := slices.Index(s.children, c); i >= 0 {
		s.children = slices.Delete(s.children, i, i+1)
		c.gone()
		s.events = append(s.events, Event{Kind: EventChildDown, Child: c})
	}
}

// decrypt opens the SK payload of an authenticated exchange.
func (s *SA) decrypt(m *message.Message, raw []byte) ([]message.Payload, error) {
	if s.open != nil && len(m.Payloads) > 0 && m.Payloads[len(m.Payloads)-1].Type == message.TypeSKF {
		return s.reassemble(m, raw, m.Payloads[len(m.Payloads)-1])
	}
	if s.open == nil || len(m.Payloads) == 0 || m.Payloads[len(m.Payloads)-1].Type != message.TypeSK {
		return nil, dropped("%v without an SK payload", m.Exchange)
	}
	sk := m.Payloads[len(m.Payloads)-1]
	plain, err := s.open.Open(raw, sk.Body)
	if err != nil {
		return nil, dropped("%v", err)
	}
	s.authenticated()
	return message.ParsePayloads(sk.Inner, plain)
}

func (s *SA) handleRequest(m *message.Message, raw []byte, remote netip.AddrPort, now time.Time) ([]byte, error) {
	if s.lastResp != nil && m.MessageID == s.peerNextID-1 {
		// A retransmission: the same answer (§2.1); to a fragmented
		// request only once, on its first fragment (RFC 7383 §2.6.1).
		switch {
		case laterFragment(m):
			return nil, dropped("a later fragment of a repeated request")
		case !s.repeated(m, raw, remote):
			return nil, dropped("request %d again, but not the bytes answered or not from the peer's address %v", m.MessageID, s.remote)
		}
		return s.lastResp, nil
	}
	if m.MessageID != s.peerNextID || m.Exchange == message.IKESAInit {
		return nil, dropped("request id %d, want %d", m.MessageID, s.peerNextID)
	}
	ps, err := s.decrypt(m, raw)
	var ce *message.CriticalError
	var reply []message.Payload
	var handleErr error
	switch {
	case err == errFragmentHeld:
		return nil, nil
	case errors.As(err, &ce):
		reply = []message.Payload{notify(message.UnsupportedCriticalPayload, []byte{byte(ce.Type)})}
	case err != nil:
		if errors.Is(err, ErrDropped) {
			return nil, err
		}
		reply = []message.Payload{notify(message.InvalidSyntax, nil)}
	case m.Exchange == message.IKEAuth && s.state == StateInitDone:
		reply, handleErr = s.handleAuthRequest(ps)
	case s.state == StateDeleted:
		// Our delete is on its way: the peer's request crossed it.
		// A delete or liveness check needs nothing more than an
		// answer; anything else waits for an SA that will not come.
		if m.Exchange != message.Informational {
			reply = []message.Payload{notify(message.TemporaryFailure, nil)}
		}
	case s.state != StateEstablished:
		return nil, dropped("%v request before the IKE SA is up", m.Exchange)
	case m.Exchange == message.Informational:
		reply = s.handleInformational(ps)
	case m.Exchange == message.CreateChildSA:
		reply, handleErr = s.handleCreateRequest(ps)
	default:
		reply = []message.Payload{notify(message.InvalidSyntax, nil)}
	}
	out, err := s.sealed(s.header(m.Exchange, m.MessageID, true), reply)
	if err != nil {
		return nil, err
	}
	s.peerNextID++
	s.lastResp = out
	s.lastReq = sha256.Sum256(raw)
	if isFragment(m) {
		s.lastReq = s.reasmFirst
	}
	return out, handleErr
}

func notify(t message.NotifyType, data []byte) message.Payload {
	return message.Payload{Type: message.TypeN, Body: message.AppendNotify(nil, 0, t, nil, data)}
}

// notifyOf returns the first notify of type t among ps.
func notifyOf(ps []message.Payload, t message.NotifyType) (message.Notify, bool) {
	for _, n := range message.Notifies(ps) {
		if n.IsValid() && n.Type() == t {
			return n, true
		}
	}
	return nil, false
}

// firstError returns the first error notify among ps.
func firstError(ps []message.Payload) (message.NotifyType, bool) {
	for _, n := range message.Notifies(ps) {
		if n.IsValid() && n.Type().IsError() {
			return n.Type(), true
		}
	}
	return 0, false
}

// Delete starts an INFORMATIONAL exchange that deletes the IKE SA and its
// children; the SA is Deleted at once (RFC 7296 §1.4.1: the answer only
// confirms), and its children go with it. While a request of ours is
// outstanding the delete waits in the queue (one exchange at a time,
// §2.3), Delete returns no message and the SA stays Established until
// Next starts it. Send the returned message; it
// is a request like any other (§2.4): Tick retransmits it until the
// answer comes (HandleFrom takes it) or the tries run out, and a request
// of the peer's that crosses it is answered. Keep routing the SA's
// messages to it while NextTimeout is set. Its keys are wiped then, all
// but the SK ciphers at once.
func (s *SA) Delete(now time.Time) ([]byte, error) {
	if s.state != StateEstablished {
		return nil, ErrNotEstablished
	}
	if s.pending != nil {
		s.enqueue(work{op: workDelete})
		return nil, nil
	}
	msg, err := s.request(message.Informational, []message.Payload{{Type: message.TypeD, Body: message.AppendDelete(nil, message.ProtoIKE, nil)}}, now)
	if err != nil {
		return nil, err
	}
	s.deleted()
	s.wipeEnded()
	return msg, nil
}

// Ping starts a liveness check (an empty INFORMATIONAL request, §1.4),
// queued while a request of ours is outstanding (see Next).
func (s *SA) Ping(now time.Time) ([]byte, error) {
	if s.state != StateEstablished {
		return nil, ErrNotEstablished
	}
	if s.pending != nil {
		s.enqueue(work{op: workPing})
		return nil, nil
	}
	return s.request(message.Informational, nil, now)
}

// deleted ends the SA and its children. A request of ours that is
// outstanding stays so: the caller's own delete, retransmitted until
// answered (anything else the caller drops first).
func (s *SA) deleted() {
	s.state = StateDeleted
	s.queue = nil
	for _, c := range s.children {
		s.events = append(s.events, Event{Kind: EventChildDown, Child: c})
	}
	s.children = nil
	s.events = append(s.events, Event{Kind: EventIKEDown})
	s.keys.Clear()
}
