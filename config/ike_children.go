package config

import (
	"math"
	"net/netip"

	"go.yaml.in/yaml/v3"

	"github.com/ipsecd/ipsecd/ike/message"
)

// maxTS is the most prefixes of a local_ts or remote_ts: IKE sends them
// in one TS payload, which counts its selectors in one byte.
const maxTS = 255

var childFields = []string{"name", "if_id", "mode", "local_ts", "remote_ts", "esp_proposals",
	"rekey_time", "life_time", "replay_window", "start_action", "dpd_action"}

// children decodes a connection's children: (swanctl's children.<name>)
// into cn; names maps the child names taken so far, in every connection,
// to the fields that took them.
func (d *decoder) children(n *yaml.Node, field string, cn *Connection, ifaces map[uint32]bool, names map[string]string) {
	items, ok := d.list(n, field)
	if !ok {
		return
	}
	if len(items) == 0 {
		d.errorf(n, field, "empty; a connection needs a child to carry traffic")
	}
	for i, it := range items {
		f := index(field, i)
		m, ok := d.fields(it, f, childFields...)
		if !ok {
			continue
		}
		ch := Child{RekeyTime: DefaultChildRekeyTime, ReplayWindow: DefaultReplayWindow,
			StartAction: StartActionNone, DPDAction: DPDActionClear, Line: it.Line}
		ch.Name = d.uniqueName(it, m["name"], f, names, " (children are named by name alone, as in swanctl)")
		if v := m["if_id"]; v == nil {
			d.errorf(it, join(f, "if_id"), "missing; want the if_id of the interface whose traffic the child carries")
		} else if id, ok := d.uint(v, join(f, "if_id"), 1, math.MaxUint32); ok {
			if ifaces != nil && !ifaces[uint32(id)] {
				d.errorf(v, join(f, "if_id"), "no interface has if_id %d", id)
			}
			ch.IfID = uint32(id)
		}
		if v := m["mode"]; v != nil {
			mode, _ := d.oneOf(v, join(f, "mode"), "tunnel", "transport")
			ch.Transport = mode == "transport"
		}
		for _, ts := range []struct {
			key string
			dst *[]netip.Prefix
		}{{"local_ts", &ch.LocalTS}, {"remote_ts", &ch.RemoteTS}} {
			v := m[ts.key]
			if v == nil {
				d.errorf(it, join(f, ts.key), "missing; want the prefixes (10.10.0.0/24)")
				continue
			}
			tf := join(f, ts.key)
			items, _ := d.list(v, tf)
			for j, pn := range items {
				if pn.Kind == yaml.ScalarNode && pn.Value == "dynamic" {
					d.dynamicTS(pn, index(tf, j), ts.key, cn, &ch)
					continue
				}
				p, ok := d.prefix(pn, index(tf, j), false)
				switch {
				case !ok:
				case p.Masked() != p:
					d.errorf(pn, index(tf, j), "%s has host bits set; did you mean %s?", p, p.Masked())
				default:
					*ts.dst = append(*ts.dst, p)
				}
			}
			switch {
			case len(items) == 0:
				d.errorf(v, tf, "empty")
			case len(items) > maxTS:
				d.errorf(v, tf, "%d prefixes; at most %d, what a TS payload carries", len(items), maxTS)
			}
		}
		if len(ch.LocalTS) > 0 && len(ch.RemoteTS) > 0 && !sharedPrefixFamily(ch.LocalTS, ch.RemoteTS) {
			d.errorf(m["remote_ts"], join(f, "remote_ts"), "no prefix of the family of local_ts: no packet could match")
		}
		if v := m["esp_proposals"]; v == nil {
			d.errorf(it, join(f, "esp_proposals"), "missing; want ESP proposals as swanctl writes them (aes128gcm16-x25519), or a preset (%s)", presetNames())
		} else {
			ch.ESPProposals = d.proposals(v, join(f, "esp_proposals"), message.ProtoESP, cn.AllowLegacy)
		}
		if v := m["rekey_time"]; v != nil {
			ch.RekeyTime, _ = d.duration(v, join(f, "rekey_time"))
		}
		ch.LifeTime = ch.RekeyTime + ch.RekeyTime/10 // swanctl's default: 110% of rekey_time
		if v := m["life_time"]; v != nil {
			if lt, ok := d.duration(v, join(f, "life_time")); ok {
				if lt < ch.RekeyTime {
					d.errorf(v, join(f, "life_time"), "%s is shorter than rekey_time (%s): the child would expire before it is rekeyed", lt, ch.RekeyTime)
				}
				ch.LifeTime = lt
			}
		}
		if v := m["replay_window"]; v != nil {
			w, _ := d.uint(v, join(f, "replay_window"), 0, MaxReplayWindow)
			ch.ReplayWindow = uint32(w)
		}
		if v := m["start_action"]; v != nil {
			var ok bool
			ch.StartAction, ok = oneOfTyped(d, v, join(f, "start_action"), StartActionStart, StartActionTrap, StartActionNone)
			if ok && ch.StartAction != StartActionNone && len(cn.RemoteAddrs) == 0 {
				d.errorf(v, join(f, "start_action"), "%s initiates, and remote_addrs has no address to initiate to (only %%any: the connection can only respond); want none, or give the peer's address", ch.StartAction)
			}
		}
		if v := m["dpd_action"]; v != nil {
			ch.DPDAction, _ = oneOfTyped(d, v, join(f, "dpd_action"), DPDActionClear, DPDActionRestart, DPDActionTrap)
		}
		cn.Children = append(cn.Children, ch)
	}
}

func sharedPrefixFamily(a, b []netip.Prefix) bool {
	for _, x := range a {
		for _, y := range b {
			if x.Addr().Is4() == y.Addr().Is4() {
				return true
			}
		}
	}
	return false
}

// dynamicTS decodes dynamic in a child's local_ts or remote_ts (key):
// in remote_ts of a connection with pools, the clients' virtual IPs; in
// local_ts of a connection with vips, ours (what the gateway gives).
func (d *decoder) dynamicTS(n *yaml.Node, field, key string, cn *Connection, ch *Child) {
	switch {
	case key == "local_ts" && len(cn.VIPs) == 0:
		d.errorf(n, field, "dynamic in local_ts stands for the virtual IPs the gateway gives us and needs the connection's vips; give vips: [0.0.0.0], or write the prefixes")
	case key == "local_ts" && ch.LocalDynamic:
		d.errorf(n, field, "dynamic is given twice")
	case key == "local_ts":
		ch.LocalDynamic = true
	case len(cn.Pools) == 0:
		d.errorf(n, field, "dynamic stands for the clients' virtual IPs and needs the connection's pools; give pools: [NAME], or write the prefixes")
	case ch.RemoteDynamic:
		d.errorf(n, field, "dynamic is given twice")
	default:
		ch.RemoteDynamic = true
	}
}
