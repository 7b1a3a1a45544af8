package ikenode

import (
	"errors"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/ipsecd/ipsecd/eapradius"
	"github.com/ipsecd/ipsecd/ike"
	"github.com/ipsecd/ipsecd/ike/eap"
	"github.com/ipsecd/ipsecd/ike/message"
)

// radiusRelay is the engine's EAPRelay of a connection with remote auth
// eap-radius: one peer's EAP conversation relayed by the daemon's RADIUS
// client (Config.RADIUS). The client answers from its own goroutine;
// the answer is handed to the Run goroutine, which gives it to the SA
// (EAPAnswer) and sends what that returns. A dead server never holds up
// the Run goroutine: it waits only for what arrives.
type radiusRelay struct {
	m       *Daemon
	sa      *ike.SA
	cv      *eapradius.Conversation
	nasPort uint32
}

// nasPorts numbers the relayed conversations (NAS-Port), so that the
// server's logs and accounting tell sessions of one user apart.
var nasPorts atomic.Uint32

// eapRelay is the engine's Config.EAPRelay for sa.
func (m *Daemon) eapRelay(sa *ike.SA) ike.EAPRelay {
	local, remote := sa.Addrs()
	peer := eapradius.Peer{NASPort: nasPorts.Add(1), Calling: remote, Called: local}
	r := &radiusRelay{m: m, sa: sa, cv: m.cfg.RADIUS.NewConversation(peer), nasPort: peer.NASPort}
	m.relays[sa] = r // until the SA is up (accounting) or gone
	return r
}

func (r *radiusRelay) Start() ([]byte, error) { return r.cv.Start() }
func (r *radiusRelay) Identity() string       { return r.cv.Identity() }
func (r *radiusRelay) MSK() []byte            { return r.cv.MSK() }
func (r *radiusRelay) Wipe()                  { r.cv.Wipe() }

// FramedIPs are the Access-Accept's Framed-IP-Address and
// Framed-IPv6-Address.
func (r *radiusRelay) FramedIPs() []netip.Addr {
	a := r.cv.Accept()
	if a == nil {
		return nil
	}
	var out []netip.Addr
	for _, ip := range []netip.Addr{a.FramedIP, a.FramedIPv6} {
		if ip.IsValid() {
			out = append(out, ip)
		}
	}
	return out
}

// Relay sends the peer's response to RADIUS; the answer goes to the Run
// goroutine.
func (r *radiusRelay) Relay(in []byte) {
	r.cv.Handle(in, func(st eapradius.Step) {
		select {
		case r.m.control <- func() { r.m.eapAnswered(r.sa, st, r.m.clock.Now()) }:
		case <-r.m.done:
		}
	})
}

// eapAnswered gives sa, if it still runs, the RADIUS server's answer and
// sends the IKE_AUTH response it makes.
func (m *Daemon) eapAnswered(sa *ike.SA, st eapradius.Step, now time.Time) {
	ispi, rspi := sa.SPIs()
	x := m.index.bySPIs[[2]uint64{ispi, rspi}]
	if x == nil || x.sa != sa {
		return // gone meanwhile (half-open timeout, a reload)
	}
	out, err := sa.EAPAnswer(ike.EAPStep{Packet: st.Packet, Status: st.Status, Err: st.Err}, now)
	if err != nil && !errors.Is(err, ike.ErrDropped) {
		if errors.Is(err, ike.ErrAuthFailed) {
			m.ctr.authFailures.Add(1)
		}
		l := m.log.WithError(err).WithFields(x.fields())
		if st.Status == eap.Failed {
			reason := relayFailure(st.Err)
			m.ctr.countEAPFailure(reason)
			if ae := (*eap.AuthError)(nil); errors.As(st.Err, &ae) {
				m.ctr.countEAP(ae.Method, false)
			}
			l = l.WithField("reason", reason)
		}
		l.Warn("ike: EAP relayed to RADIUS failed")
	}
	m.afterCall(x, now)
	if out != nil {
		l, r := sa.Addrs()
		m.sendAll(x, out, l, r)
	}
}

// eapMethodOf is the EAP method x's peer logged in with: the
// connection's, or for eap-radius the one the client ran with the server
// (its relay is kept until x is up).
func (m *Daemon) eapMethodOf(x *ikeSA) message.EAPType {
	if r := m.relays[x.sa]; r != nil {
		return r.cv.Method()
	}
	return x.sa.PeerAuth().EAPType()
}

// relayFailure names why a login relayed to RADIUS failed, one of
// EAPFailureReasons.
func relayFailure(err error) string {
	var ae *eap.AuthError
	switch {
	case errors.As(err, &ae) && ae.Failure == eap.FailureRejected:
		return "radius_reject"
	case errors.Is(err, eapradius.ErrMismatch):
		return "radius_bad_authenticator"
	case errors.Is(err, eapradius.ErrNoAnswer):
		return "radius_timeout"
	case errors.Is(err, eapradius.ErrMalformed):
		return "radius_malformed"
	case errors.Is(err, eap.ErrProtocol):
		return "protocol"
	}
	return "other"
}

// assigned leases the address RADIUS assigned (Framed-IP-Address) with
// the attributes of the connection's first pool of its family that has
// radius: true; the pools' own addresses are left alone.
func (v *poolVIPs) Assigned(identity string, addr netip.Addr, peer netip.AddrPort) (ike.Lease, error) {
	attrs := v.attrs.Load()
	for _, name := range v.names {
		if attrs == nil {
			break
		}
		at, ok := (*attrs)[name]
		if !ok || !at.RADIUS || at.Addrs.First.Is4() != addr.Is4() {
			continue
		}
		return ike.Lease{Addr: addr, Identity: identity, Pool: name, DNS: at.DNS, Subnets: at.SplitInclude, Domains: at.DNSDomains, Assigned: true}, nil
	}
	// No pool of the connection takes RADIUS's address: one of the
	// pools' own.
	want := netip.IPv6Unspecified()
	if addr.Is4() {
		want = netip.IPv4Unspecified()
	}
	return v.Acquire(identity, want, peer)
}
