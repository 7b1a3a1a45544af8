package ikenode

import (
	"slices"
	"sync/atomic"

	"github.com/ipsecd/ipsecd/ike/eap"
	"github.com/ipsecd/ipsecd/ike/message"
)

// Results of a handled message, for Counters.Exchanges.
const (
	resultOK      = iota // processed
	resultDropped        // ignored: malformed, replayed, out of window, not authentic
	resultFailed         // an exchange failed on it (refused, authentication failed)
	numResults
)

// ResultNames name the results as the metrics label them.
var ResultNames = [numResults]string{"ok", "dropped", "failed"}

// exchangeTypes are the exchanges counted one by one; others count as
// "other".
var exchangeTypes = []message.ExchangeType{message.IKESAInit, message.IKEAuth, message.CreateChildSA, message.Informational}

// counters are the IKE daemon's counters, written by its goroutines and
// read by Counters.
type counters struct {
	exchanges                              [5][numResults]atomic.Uint64
	retransmits, authFailures              atomic.Uint64
	malformed, noSA, noConnection, cookies atomic.Uint64
	blocked, halfOpenFull                  atomic.Uint64
	queueDrops, sendErrors, sent           atomic.Uint64
	childrenInstalled, childrenRemoved     atomic.Uint64
	uniqueRefused, uniqueReplaced          atomic.Uint64
	// eap counts EAP logins of road warriors by method (eapMethods) and
	// outcome: [0] succeeded, [1] failed.
	eap [len(eapMethods)][2]atomic.Uint64
	// eapFailures counts failed EAP logins by EAPFailureReasons.
	eapFailures [len(EAPFailureReasons)]atomic.Uint64
}

// eapMethods are the EAP methods a gateway runs, or relays to RADIUS,
// counted by Counters.EAP.
var eapMethods = [...]message.EAPType{message.EAPMSCHAPv2, message.EAPMD5, message.EAPTLS}

// EAPFailureReasons name why EAP logins failed, as Counters.EAPFailures
// and the metrics label them: the eap.Failure of the gateway's own
// check (unknown_user, wrong_password, method_refused, tls, rejected:
// ours refused as a client, other), and for logins relayed to RADIUS
// radius_reject (Access-Reject), radius_timeout (no server answered),
// radius_bad_authenticator (answers came but failed their
// Message-Authenticator or Response Authenticator: a wrong shared
// secret), radius_malformed (an answer broke RFC 3579) and protocol
// (the client's EAP broke the method).
var EAPFailureReasons = [...]string{"unknown_user", "wrong_password", "method_refused", "tls", "rejected", "other",
	"radius_reject", "radius_timeout", "radius_bad_authenticator", "radius_malformed", "protocol"}

// countEAPFailure counts one failed login for reason, one of
// EAPFailureReasons ("other" for another).
func (c *counters) countEAPFailure(reason string) {
	i := slices.Index(EAPFailureReasons[:], reason)
	if i < 0 {
		i = slices.Index(EAPFailureReasons[:], "other")
	}
	c.eapFailures[i].Add(1)
}

// countEAP counts one EAP login of method: ok or failed.
func (c *counters) countEAP(method message.EAPType, ok bool) {
	for i, m := range eapMethods {
		if m == method {
			res := 1
			if ok {
				res = 0
			}
			c.eap[i][res].Add(1)
		}
	}
}

func (c *counters) exchange(t message.ExchangeType, res int) {
	i := len(exchangeTypes)
	for k, e := range exchangeTypes {
		if e == t {
			i = k
		}
	}
	c.exchanges[i][res].Add(1)
}

// Counters is a snapshot of the IKE daemon's counters.
type Counters struct {
	// Exchanges counts the IKE messages handled (requests of the peer
	// and responses to ours) by exchange type ("IKE_SA_INIT",
	// "IKE_AUTH", "CREATE_CHILD_SA", "INFORMATIONAL", "other") and
	// result (ResultNames).
	Exchanges map[string][numResults]uint64
	// Retransmits counts our requests sent again.
	Retransmits uint64
	// AuthFailures counts IKE_AUTH exchanges that failed authentication,
	// either side's.
	AuthFailures uint64
	// Malformed: not an IKE header; NoSA: a message for no SA that is
	// not an IKE_SA_INIT request; NoConnection: an IKE_SA_INIT that no
	// connection admits; Cookies: IKE_SA_INIT requests answered with a
	// cookie (or dropped) under load.
	Malformed, NoSA, NoConnection, Cookies uint64
	// Blocked: IKE_SA_INIT requests dropped because their source
	// address held ike.block_threshold half-open IKE SAs;
	// HalfOpenFull: because ike.init_limit_half_open were half-open in
	// all.
	Blocked, HalfOpenFull uint64
	// QueueDrops: datagrams dropped because the IKE goroutine's queue
	// was full; Sent: datagrams sent; SendErrors: those the kernel
	// refused.
	QueueDrops, Sent, SendErrors uint64
	// ChildrenInstalled and ChildrenRemoved count CHILD_SA pairs.
	ChildrenInstalled, ChildrenRemoved uint64
	// UniqueRefused counts new IKE SAs refused because their identity
	// held one (unique: keep); UniqueReplaced the old IKE SAs a new one
	// of their identity replaced (unique: replace).
	UniqueRefused, UniqueReplaced uint64
	// EAP counts road warriors' EAP logins by method ("EAP-MSCHAPv2",
	// "EAP-MD5", "EAP-TLS") and outcome: [0] succeeded, [1] failed (a
	// wrong password, an unknown user, a method refused, an
	// Access-Reject).
	EAP map[string][2]uint64
	// EAPFailures counts failed EAP logins by reason
	// (EAPFailureReasons), RADIUS's timeouts included.
	EAPFailures map[string]uint64
}

// Counters returns the counters.
func (m *Daemon) Counters() Counters {
	c := &m.ctr
	out := Counters{
		Exchanges:   map[string][numResults]uint64{},
		Retransmits: c.retransmits.Load(), AuthFailures: c.authFailures.Load(),
		Malformed: c.malformed.Load(), NoSA: c.noSA.Load(), NoConnection: c.noConnection.Load(), Cookies: c.cookies.Load(),
		Blocked: c.blocked.Load(), HalfOpenFull: c.halfOpenFull.Load(),
		QueueDrops: c.queueDrops.Load(), Sent: c.sent.Load(), SendErrors: c.sendErrors.Load(),
		ChildrenInstalled: c.childrenInstalled.Load(), ChildrenRemoved: c.childrenRemoved.Load(),
		UniqueRefused: c.uniqueRefused.Load(), UniqueReplaced: c.uniqueReplaced.Load(),
	}
	out.EAP = map[string][2]uint64{}
	for i, m := range eapMethods {
		out.EAP[eap.MethodName(m)] = [2]uint64{c.eap[i][0].Load(), c.eap[i][1].Load()}
	}
	out.EAPFailures = map[string]uint64{}
	for i, r := range EAPFailureReasons {
		out.EAPFailures[r] = c.eapFailures[i].Load()
	}
	for i := range c.exchanges {
		name := "other"
		if i < len(exchangeTypes) {
			name = exchangeTypes[i].String()
		}
		var v [numResults]uint64
		for r := range v {
			v[r] = c.exchanges[i][r].Load()
		}
		out.Exchanges[name] = v
	}
	return out
}
