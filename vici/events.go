package vici

import (
	"net/netip"
	"strconv"
	"time"

	"github.com/ipsecd/ipsecd/control"
)

// The daemon's IKE event types (control.Event.Type, ikenode's).
const (
	evIKEUp        = "ike_up"
	evIKEDown      = "ike_down"
	evIKEFailed    = "ike_failed"
	evIKERekeyed   = "ike_rekeyed"
	evChildUp      = "child_up"
	evChildDown    = "child_down"
	evChildRekeyed = "child_rekeyed"
	evChildFailed  = "child_failed"
)

// outEvent is one vici event to send.
type outEvent struct {
	name string
	msg  *Message
}

// translate turns one of the daemon's events into the vici events a
// client registered for (wants): ike_up, ike_down and ike_failed into
// ike-updown (up=yes for the first), child_up and child_down into
// child-updown, ike_rekeyed into ike-rekey and child_rekeyed into
// child-rekey, with the keys of list-sa that the event carries (the
// event is written from what it says, not from a listing, so that an
// event costs the same with 10 SAs as with 10,000).
func (s *Server) translate(ev control.Event, wants func(string) bool) []outEvent {
	d := ev.Detail
	conn := d[control.DetailConnection]
	if conn == "" {
		return nil
	}
	now := ev.Time
	if now.IsZero() {
		now = time.Now()
	}
	var out []outEvent
	switch ev.Type {
	case evIKEUp, evIKEDown, evIKEFailed:
		if !wants("ike-updown") {
			break
		}
		m, state := upDown(ev.Type == evIKEUp, "ESTABLISHED", "DELETING")
		m.Set(conn, s.eventIKE(d, d[control.DetailIKESPII], d[control.DetailIKESPIR], state, now))
		out = append(out, outEvent{"ike-updown", m})
	case evIKERekeyed:
		if !wants("ike-rekey") {
			break
		}
		m := NewMessage().Set("old", s.eventIKE(d, d[control.DetailOldIKESPII], d[control.DetailOldIKESPIR], "REKEYED", now)).
			Set("new", s.eventIKE(d, d[control.DetailIKESPII], d[control.DetailIKESPIR], "ESTABLISHED", now))
		out = append(out, outEvent{"ike-rekey", NewMessage().Set(conn, m)})
	case evChildUp, evChildDown:
		if !wants("child-updown") {
			break
		}
		m, state := upDown(ev.Type == evChildUp, "INSTALLED", "DELETED")
		ike := s.eventIKE(d, d[control.DetailIKESPII], d[control.DetailIKESPIR], "ESTABLISHED", now)
		c := s.eventChild(d, d[control.DetailSPIIn], d[control.DetailSPIOut], state, now)
		ike.Set("child-sas", NewMessage().Set(d[control.DetailChild]+"-"+c.String("uniqueid"), c))
		out = append(out, outEvent{"child-updown", m.Set(conn, ike)})
	case evChildRekeyed:
		if !wants("child-rekey") {
			break
		}
		ike := s.eventIKE(d, d[control.DetailIKESPII], d[control.DetailIKESPIR], "ESTABLISHED", now)
		pair := NewMessage().Set("old", s.eventChild(d, d[control.DetailOldSPIIn], d[control.DetailOldSPIOut], "REKEYED", now)).
			Set("new", s.eventChild(d, d[control.DetailSPIIn], d[control.DetailSPIOut], "INSTALLED", now))
		ike.Set("child-sas", NewMessage().Set(d[control.DetailChild], pair))
		out = append(out, outEvent{"child-rekey", NewMessage().Set(conn, ike)})
	}
	// An SA that ended keeps its id a while, then none.
	switch ev.Type {
	case evIKEDown, evIKEFailed:
		s.ids.forgetIKE(d[control.DetailIKESPII], hostOf(d[control.DetailRemote]), now)
	case evIKERekeyed:
		s.ids.forgetIKE(d[control.DetailOldIKESPII], hostOf(d[control.DetailRemote]), now)
	case evChildDown:
		s.ids.forgetChild(d[control.DetailSPIIn], now)
	case evChildRekeyed:
		s.ids.forgetChild(d[control.DetailOldSPIIn], now)
	}
	return out
}

// upDown starts an *-updown event: up=yes when up (charon leaves the
// key out when down), and the state the SA is in.
func upDown(up bool, upState, downState string) (*Message, string) {
	if up {
		return NewMessage().Set("up", "yes"), upState
	}
	return NewMessage(), downState
}

// eventIKE writes the IKE SA an event names, with the keys of list-sa
// the event has.
func (s *Server) eventIKE(d map[string]string, spiI, spiR, state string, now time.Time) *Message {
	local, remote := addrPort(d[control.DetailLocal]), addrPort(d[control.DetailRemote])
	id := s.ids.ikeID(spiI, remote.Addr().String(), now)
	m := NewMessage().
		Set("uniqueid", strconv.FormatUint(uint64(id), 10)).
		Set("version", "2").
		Set("state", state).
		Set("local-host", remote0(local.Addr())).
		Set("local-port", strconv.Itoa(int(local.Port()))).
		Set("local-id", orAny(d[control.DetailLocalID])).
		Set("remote-host", remote0(remote.Addr())).
		Set("remote-port", strconv.Itoa(int(remote.Port()))).
		Set("remote-id", orAny(d[control.DetailPeerID])).
		Set("initiator-spi", spiI).
		Set("responder-spi", spiR)
	if e := d[control.DetailError]; e != "" {
		m.Set("errmsg", e) // not charon's: why an IKE SA failed
	}
	return m
}

// eventChild writes the child an event names.
func (s *Server) eventChild(d map[string]string, spiIn, spiOut, state string, now time.Time) *Message {
	id := s.ids.childID(spiIn, now)
	return NewMessage().
		Set("name", d[control.DetailChild]).
		Set("uniqueid", strconv.FormatUint(uint64(id), 10)).
		Set("state", state).
		Set("protocol", "ESP").
		Set("spi-in", spi8(spiIn)).
		Set("spi-out", spi8(spiOut))
}

func addrPort(s string) netip.AddrPort {
	ap, _ := netip.ParseAddrPort(s)
	return ap
}

// hostOf is the address of "addr:port", as ikeSA keys ids by it.
func hostOf(s string) string { return addrPort(s).Addr().String() }

// remote0 writes an address, "%any" when there is none.
func remote0(a netip.Addr) string {
	if !a.IsValid() {
		return "%any"
	}
	return a.String()
}
