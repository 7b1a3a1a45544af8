// Package ike is an IKEv2 protocol engine (RFC 7296) for pre-shared keys
// and X.509 certificates: IKE_SA_INIT and IKE_AUTH as initiator and as
// responder, with the
// INVALID_KE_PAYLOAD retry in the responder's group, NO_PROPOSAL_CHOSEN,
// AUTHENTICATION_FAILED, traffic selectors narrowed by the responder
// (§2.9), NAT detection (§2.23) and the move to port 4500, message IDs
// with a window of one, a retransmit cache for answers (§2.1, §2.2),
// CREATE_CHILD_SA for rekeying a child (with and without PFS) and the IKE
// SA (§1.3.2, §1.3.3, §2.18) from either side, and for a connection's
// further children (§1.3.1; CreateChild, Config.Children: the responder
// gives a new child the first config whose selectors the offer meets),
// and INFORMATIONAL
// exchanges: liveness checks and deletes of children and IKE SAs, both
// ways. Certificates (auth pubkey): RSA and ECDSA keys sign AUTH with RFC
// 7427's Digital Signature method when the peer's
// SIGNATURE_HASH_ALGORITHMS names a hash we use, else with the classic
// methods (RSA with SHA-1, ECDSA on P-256/P-384/P-521); all of them and
// RSASSA-PSS are verified. We send our certificate and its chain in CERT
// payloads (cut short at a CA the peer's CERTREQ names) and a CERTREQ for
// our trust anchors; the peer's certificate must chain to them, be valid
// at the time given, and prove the peer's ID (subject DN, or a
// subjectAltName DNS name, e-mail or IP address). Cookies (§2.6) stop
// IKE_SA_INIT floods before Respond keeps any state. IKE fragmentation
// (RFC 7383) splits large encrypted messages into SKF payloads, each
// authenticated, and reassembles the peer's within bounds; Packets gives
// the datagrams of a message. Simultaneous rekeys of one child or of the IKE SA are settled by
// the lowest nonce (§2.8.1, §2.8.2); any other CREATE_CHILD_SA that
// overlaps one of ours, or a delete in progress, is answered
// TEMPORARY_FAILURE and the peer retries (§2.25). So is a rekey of a
// child that was rekeyed already, any CREATE_CHILD_SA on an IKE SA a
// rekey replaced, and one that would give an IKE SA more than
// Config.MaxChildren children; an IKE SA the peer is to delete after a
// rekey deletes itself after ReplacedTimeout: what an authenticated
// peer makes us hold is bounded. The wire format is in ike/message, the
// algorithms in ike/proposal, ike/dh and ike/keys.
//
// The engine is transport-agnostic: an SA takes whole IKE messages (after
// any non-ESP marker) and returns the messages to send, and is told the
// time rather than reading a clock, so that retransmission is driven by
// its caller through NextTimeout and Tick. It opens no socket and starts no
// goroutine. Notifies it does not understand in a response, and the status
// notifies charon sends that we do not act on (REDIRECT_SUPPORTED,
// MOBIKE_SUPPORTED, MULTIPLE_AUTH_SUPPORTED, EAP_ONLY_AUTHENTICATION,
// ...), are ignored as §3.10.1 says; an unknown
// critical payload in a request is answered UNSUPPORTED_CRITICAL_PAYLOAD.
//
// What an established IKE_AUTH or a child rekey yields is a Child: the
// SPIs, keys, mode, selectors and ESN of a CHILD_SA pair, which the daemon
// installs in its SAD, reported by an Event (EventChildUp, and
// EventChildDown when it must go; a rekeyed child names the one it
// Replaces). The engine is the only owner of a child's life: it keeps
// its state (Child.State) and says what to install when
// (make-before-break): a child the peer's rekey made goes in inbound
// only (InboundOnly) until EventChildOutbound, when the peer deletes the
// child it replaces; the loser of simultaneous rekeys is Redundant and
// never gets its outbound SA; EventSPIUnused gives back an SPI no child
// will use. An IKE rekey reports EventIKERekeyed with the new SA, to
// which the children move (EventChildMoved); the old SA's EventIKEDown
// then concerns only itself; a new SA of ours that lost simultaneous rekeys is reported by
// EventIKEDeleting, to be routed while its delete is retransmitted. Every
// delete of an IKE SA is retransmitted until answered (Delete). A peer that restarted says so with INITIAL_CONTACT in its
// IKE_AUTH (§2.4), reported as EventInitialContact: the daemon deletes
// its other IKE SAs of the same connection with that peer. We send it
// when Config.HasContact says the daemon holds no other IKE SA with the
// peer. Before a responder's IKE_AUTH answer establishes an SA,
// Config.Admit may refuse it with AUTHENTICATION_FAILED (ErrDuplicate:
// the daemon's unique = keep) or end the user's other SAs so that their
// virtual IPs go to this one (unique = replace). The package does not
// install anything itself.
//
// Remote access: EAP in IKE_AUTH (§2.16) as the gateway (eap.go, and
// eaprelay.go for RADIUS) and as the client (eap_client.go), with
// EAP-MSCHAPv2, EAP-MD5 and EAP-TLS (eap_methods.go: certificates inside
// EAP, held to the same identity rule as AUTH's), and EAP-only
// authentication (RFC 5998, eaponly.go: a gateway of local auth eap
// proves itself by a mutual method and its MSK-keyed AUTH alone, to
// clients that sent EAP_ONLY_AUTHENTICATION); configuration payloads
// (cp.go, cp_client.go) hand out and take virtual IPs.
//
// Identities (§3.5) are Identity values, an ID type and its bytes,
// parsed once from the config's strings (ParseIdentity) or from the
// peer's ID payload (IdentityOf) and compared by value (Equal), never by
// the text they print as; String escapes what is not printable, since
// the peer chooses the bytes.
//
// An SA keeps what IKE_SA_INIT and IKE_AUTH alone need (the DH private
// key, the nonces and IKE_SA_INIT messages that AUTH signs, the peer's
// CERTREQs and signature hashes, a responder's half-open deadline) apart
// from what it lives by (SPIs, suite, SK_d and the PRF, the SK ciphers,
// the message IDs, the children), and drops the first once it is
// established or has failed, as crypto/tls keeps its handshake state
// apart from Conn: an established SA holds no handshake secret, and less
// memory.
//
// Inside, the long-lived SA (sa.go: SPIs, keys, the message-ID window
// and its retransmissions in window.go, the children, the queue of our
// requests in queue.go) is apart from the exchanges it runs after the
// handshake, each a small type in a file of its own: childCreate
// (child_create.go), childRekey (child_rekey.go), ikeRekey
// (ike_rekey.go), childDelete and ikeDelete (delete.go), liveness
// (liveness.go). A task builds our request and handles the response;
// the same file answers the peer's request of that exchange. Collisions
// between ours and the peer's (simultaneous rekeys, a request that
// overlaps ours) are settled in collide.go alone.
//
// To add an exchange (an IKE_FOLLOWUP_KE round of a rekey, an EAP round
// of IKE_AUTH): write a type with the three methods of task (request,
// response, clear) in a file of its own; start it with s.start (the
// only way a request is sent and retransmitted), or, for one the caller
// asks for, through startOrQueue with a work kind of its own that Next
// builds again; let response start the task that follows, if any; route
// the peer's request of that exchange to its answer in handleRequest
// (answerCreate for CREATE_CHILD_SA); and say in admit (collide.go) what
// of the peer's may run beside it.
//
// Concurrency: an SA is not safe for concurrent use; one goroutine (the
// daemon's IKE loop) owns it. Buffers passed to Handle are not retained;
// returned messages belong to the caller. Allocation is not a concern
// here: IKE runs a few messages per SA per rekey interval.
package ike
