package daemon

import (
	"net/netip"

	"github.com/ipsecd/ipsecd/control"
	"github.com/ipsecd/ipsecd/ikenode"
	ipnode "github.com/ipsecd/ipsecd/node"
)

// MonitorEvent turns the node's event into the control socket's (what
// ipsecd monitor streams).
func MonitorEvent(ev ipnode.Event) control.Event {
	out := control.Event{Type: string(ev.Kind), Expire: ev.Expire, Reason: ev.Reason}
	switch {
	case ev.SA != nil:
		s := ev.SA
		out.State = &control.EventState{SPI: control.FormatSPI(s.SPI()), Dir: s.Dir().String(), Dst: s.Dst().String(),
			Src: s.Src().String(), IfID: s.IfID(), Mode: s.Mode().String()}
	case ev.Kind == ipnode.EventPolicyAdded || ev.Kind == ipnode.EventPolicyDeleted:
		p := control.NewPolicySpec(ev.Policy)
		out.Policy = &p
	default:
		out.Interface, out.IfID = ev.Interface, ev.IfID
	}
	return out
}

// IKEEvent turns IKE's event (an IKE SA or a child up, down, rekeyed or
// failed) into the control socket's: its type (ike_*, child_*), its
// reason, and the rest in Detail under the keys control.Event documents,
// those that are set.
func IKEEvent(ev ikenode.Event) control.Event {
	out := control.Event{Type: ev.Type, Reason: ev.Reason, Detail: map[string]string{}}
	for _, kv := range [...]struct{ k, v string }{
		{control.DetailConnection, ev.Connection}, {control.DetailChild, ev.Child},
		{control.DetailIKESPII, ev.SPIInitiator}, {control.DetailIKESPIR, ev.SPIResponder},
		{control.DetailOldIKESPII, ev.OldSPIInitiator}, {control.DetailOldIKESPIR, ev.OldSPIResponder},
		{control.DetailLocal, addrPort(ev.Local)}, {control.DetailRemote, addrPort(ev.Remote)},
		{control.DetailLocalID, ev.LocalID}, {control.DetailPeerID, ev.PeerID},
		{control.DetailEAPID, ev.EAPID}, {control.DetailVIPs, ev.VIPs},
		{control.DetailSPIIn, ev.SPIIn}, {control.DetailSPIOut, ev.SPIOut},
		{control.DetailOldSPIIn, ev.OldSPIIn}, {control.DetailOldSPIOut, ev.OldSPIOut},
		{control.DetailError, ev.Error},
	} {
		if kv.v != "" {
			out.Detail[kv.k] = kv.v
		}
	}
	return out
}

// addrPort writes a; "" when unset.
func addrPort(a netip.AddrPort) string {
	if !a.IsValid() {
		return ""
	}
	return a.String()
}
