package daemon

import (
	"github.com/ipsecd/ipsecd/control"
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
