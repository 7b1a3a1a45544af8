package config

import (
	"errors"
	"math"
	"net/netip"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/ipsecd/ipsecd/sa"
)

// stateFields are the keys of a state, as ip xfrm state add names them.
var stateFields = []string{"src", "dst", "spi", "dir", "mode", "if_id", "aead", "enc", "auth",
	"encap", "replay_window", "esn", "lifetime", "selector"}

// fieldNodes remembers which node each field of one state or policy came
// from, so that checks on the decoded value can name the line, and which
// fields already had an error, so that they are not reported twice.
type fieldNodes struct {
	base  string
	whole *yaml.Node
	nodes map[string]*yaml.Node
	bad   map[string]bool
}

func newFieldNodes(base string, whole *yaml.Node) *fieldNodes {
	return &fieldNodes{base: base, whole: whole, nodes: map[string]*yaml.Node{}, bad: map[string]bool{}}
}

// reportSA reports the field errors of err (sa.Check's, or of another sa
// rule; nil is none) each at the line of its field, or of the nearest
// enclosing field given, with the state's or policy's path before it.
// A field that already had an error is not reported again.
func (d *decoder) reportSA(fn *fieldNodes, err error) {
	var fes sa.FieldErrors
	errors.As(err, &fes)
next:
	for _, fe := range fes {
		for b := range fn.bad {
			if fe.Field == b || strings.HasPrefix(fe.Field, b+".") || strings.HasPrefix(b, fe.Field+".") {
				continue next
			}
		}
		at := fn.whole
		for f := fe.Field; f != ""; {
			if n := fn.nodes[f]; n != nil {
				at = n
				break
			}
			i := strings.LastIndexByte(f, '.')
			if i < 0 {
				break
			}
			f = f[:i]
		}
		d.errorf(at, join(fn.base, fe.Field), "%s", fe.Msg)
	}
}

// field decodes one optional field with dec, recording its node, and marks
// it bad when dec fails.
func (fn *fieldNodes) field(m map[string]*yaml.Node, key, prefix string, dec func(v *yaml.Node, field string) bool) {
	v := m[key]
	if v == nil {
		return
	}
	name := prefix + key
	fn.nodes[name] = v
	if !dec(v, join(fn.base, name)) {
		fn.bad[name] = true
	}
}

// direction decodes the dir of a state or policy.
func (d *decoder) direction(n *yaml.Node, field string, dst *sa.Dir) bool {
	s, ok := d.oneOf(n, field, "in", "out")
	*dst, _ = sa.ParseDir(s)
	return ok
}

// ifID decodes the if_id of a state or policy; whether an interface has
// it is the file's check (states, policies).
func (d *decoder) ifID(n *yaml.Node, field string, dst *uint32) bool {
	id, ok := d.uint(n, field, 1, math.MaxUint32)
	*dst = uint32(id)
	return ok
}

func (d *decoder) states(n *yaml.Node, c *Config, ifaces map[uint32]bool) {
	items, ok := d.list(n, "states")
	if !ok {
		return
	}
	type stateID struct {
		dir sa.Dir
		dst netip.Addr
		spi uint32
	}
	seen := map[stateID]string{}
	keys := sa.KeyOwners{} // digests: the map holds no key
	for i, it := range items {
		base := index("states", i)
		m, ok := d.fields(it, base, stateFields...)
		if !ok {
			continue
		}
		fn := newFieldNodes(base, it)
		before := len(d.errs)
		s := d.state(m, fn)
		if m["replay_window"] == nil {
			s.ReplayWindow = sa.DefaultReplayWindowFor(s.Dir)
		}
		s.FillDefaults()
		d.reportSA(fn, sa.Check(&s))
		if ifaces != nil && s.IfID != 0 && !ifaces[s.IfID] && !fn.bad["if_id"] {
			d.errorf(fn.nodes["if_id"], join(base, "if_id"), "no interface has if_id %d", s.IfID)
		}
		if s.Encap == nil && !fn.bad["encap"] && !c.Underlay.RawESP {
			d.errorf(it, join(base, "encap"), "%s", NoRawESP)
		}
		if len(d.errs) > before {
			continue
		}
		id := stateID{s.Dir, s.Dst, s.SPI}
		if s.Dir == sa.DirIn {
			id.dst = netip.Addr{} // inbound SAs are found by SPI alone
		}
		if prev, dup := seen[id]; dup {
			if s.Dir == sa.DirIn {
				d.errorf(fn.nodes["spi"], join(base, "spi"), "%s already has dir in and spi %#x (inbound SAs are found by SPI alone, whatever their dst)", prev, s.SPI)
			} else {
				d.errorf(fn.nodes["spi"], join(base, "spi"), "%s already has dir %s, dst %s and spi %#x", prev, s.Dir, s.Dst, s.SPI)
			}
			continue
		}
		seen[id] = base
		if f, prev, used := keys.Conflict(&s); used {
			d.errorf(fn.nodes[f], join(base, f), "the same key as %s: each SA needs keys of its own, in either direction: "+
				"every SA starts its sequence numbers at 1, which AES-GCM and ChaCha20-Poly1305 use as nonces "+
				"(make a key with ipsecd genkey)", prev)
			continue
		}
		keys.Add(&s, base)
		c.States = append(c.States, State{Config: s, Line: it.Line})
	}
}

// NoRawESP says why a state without encap (raw ESP, IP protocol 50) is
// refused when the underlay has no raw ESP socket: its packets could
// neither leave nor arrive, and the data path would drop them, counted
// only as XfrmOutError.
const NoRawESP = "missing, and underlay.raw_esp is off: without encap the SA is raw ESP (IP protocol 50), " +
	"which only a raw socket sends and receives, so its traffic would be dropped; " +
	"add encap: {type: espinudp} (ESP in UDP, RFC 3948), or set underlay.raw_esp: true"

// state decodes the fields of one state, checking only their syntax:
// sa.Check checks the result.
func (d *decoder) state(m map[string]*yaml.Node, fn *fieldNodes) sa.Config {
	var s sa.Config
	var ok bool
	fn.field(m, "src", "", func(v *yaml.Node, f string) bool { s.Src, ok = d.addr(v, f); return ok })
	fn.field(m, "dst", "", func(v *yaml.Node, f string) bool { s.Dst, ok = d.addr(v, f); return ok })
	fn.field(m, "spi", "", func(v *yaml.Node, f string) bool {
		spi, ok := d.uint(v, f, 0, math.MaxUint32)
		s.SPI = uint32(spi)
		return ok
	})
	fn.field(m, "dir", "", func(v *yaml.Node, f string) bool { return d.direction(v, f, &s.Dir) })
	fn.field(m, "mode", "", func(v *yaml.Node, f string) bool {
		mode, ok := d.oneOf(v, f, "tunnel", "transport")
		s.Mode, _ = sa.ParseMode(mode)
		return ok
	})
	fn.field(m, "if_id", "", func(v *yaml.Node, f string) bool { return d.ifID(v, f, &s.IfID) })
	fn.field(m, "aead", "", func(v *yaml.Node, f string) bool { s.AEAD, ok = d.algorithm(v, f, sa.KindAEAD, fn); return ok })
	fn.field(m, "enc", "", func(v *yaml.Node, f string) bool { s.Enc, ok = d.algorithm(v, f, sa.KindEnc, fn); return ok })
	fn.field(m, "auth", "", func(v *yaml.Node, f string) bool { s.Auth, ok = d.algorithm(v, f, sa.KindAuth, fn); return ok })
	fn.field(m, "encap", "", func(v *yaml.Node, f string) bool { s.Encap, ok = d.encap(v, f); return ok })
	fn.field(m, "replay_window", "", func(v *yaml.Node, f string) bool {
		w, ok := d.uint(v, f, 0, math.MaxUint32)
		s.ReplayWindow = uint32(w)
		return ok
	})
	fn.field(m, "esn", "", func(v *yaml.Node, f string) bool { s.ESN, ok = d.bool(v, f); return ok })
	fn.field(m, "lifetime", "", func(v *yaml.Node, f string) bool { return d.lifetime(v, f, &s.Lifetime, fn) })
	fn.field(m, "selector", "", func(v *yaml.Node, f string) bool {
		return d.selector(v, f, &s.Selector, fn, "selector.")
	})
	return s
}

func (d *decoder) encap(n *yaml.Node, field string) (*sa.Encap, bool) {
	m, ok := d.fields(n, field, "type", "sport", "dport")
	if !ok {
		return nil, false
	}
	e := &sa.Encap{SrcPort: sa.DefaultEncapPort, DstPort: sa.DefaultEncapPort}
	good := true
	if v := m["type"]; v == nil {
		d.errorf(n, join(field, "type"), "missing; want espinudp")
		good = false
	} else if _, ok := d.oneOf(v, join(field, "type"), "espinudp"); !ok {
		good = false
	}
	for _, p := range []struct {
		key string
		dst *uint16
	}{{"sport", &e.SrcPort}, {"dport", &e.DstPort}} {
		if v := m[p.key]; v != nil {
			port, ok := d.uint(v, join(field, p.key), 1, 65535)
			*p.dst = uint16(port)
			good = good && ok
		}
	}
	return e, good
}

// lifetime decodes the limits of a state; sa converts the seconds.
func (d *decoder) lifetime(n *yaml.Node, field string, lt *sa.Lifetime, fn *fieldNodes) bool {
	m, ok := d.fields(n, field, "soft_bytes", "hard_bytes", "soft_packets", "hard_packets",
		"soft_add_seconds", "hard_add_seconds")
	if !ok {
		return false
	}
	var secs sa.LifetimeSeconds
	for _, l := range []struct {
		key string
		dst *uint64
	}{{"soft_bytes", &secs.SoftBytes}, {"hard_bytes", &secs.HardBytes}, {"soft_packets", &secs.SoftPackets},
		{"hard_packets", &secs.HardPackets}, {"soft_add_seconds", &secs.SoftAddSeconds}, {"hard_add_seconds", &secs.HardAddSeconds}} {
		fn.field(m, l.key, "lifetime.", func(v *yaml.Node, f string) bool {
			*l.dst, ok = d.uint(v, f, 0, math.MaxUint64)
			return ok
		})
	}
	var err error
	*lt, err = secs.Lifetime()
	d.reportSA(fn, err)
	return true
}

func (d *decoder) selector(n *yaml.Node, field string, s *sa.Selector, fn *fieldNodes, prefix string) bool {
	m, ok := d.fields(n, field, "src", "dst")
	if !ok {
		return false
	}
	fn.field(m, "src", prefix, func(v *yaml.Node, f string) bool { s.Src, ok = d.prefix(v, f, false); return ok })
	fn.field(m, "dst", prefix, func(v *yaml.Node, f string) bool { s.Dst, ok = d.prefix(v, f, false); return ok })
	return true
}
