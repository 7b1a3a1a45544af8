// The values of IKE's fields as swanctl writes them: durations,
// address lists with %any, proposal lists and presets.

package config

import (
	"math"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/ipsecd/ipsecd/ike/message"
	"github.com/ipsecd/ipsecd/ike/proposal"
)

// durationRE is a duration as swanctl writes one: a number of seconds, or
// a number with s, m, h or d.
var durationRE = regexp.MustCompile(`^([0-9]+(?:\.[0-9]+)?)(ms|[smhd]?)$`)

func (d *decoder) duration(n *yaml.Node, field string) (time.Duration, bool) {
	s, ok := d.scalar(n, field, "a duration (30s, 66m, 4h, 1d)")
	if !ok {
		return 0, false
	}
	mt := durationRE.FindStringSubmatch(s)
	if mt == nil {
		d.errorf(n, field, "want a duration as swanctl writes it (30s, 66m, 4h, 1d; a bare number is seconds), got %s", describe(n))
		return 0, false
	}
	f, err := strconv.ParseFloat(mt[1], 64)
	unit := map[string]time.Duration{"": time.Second, "s": time.Second, "ms": time.Millisecond,
		"m": time.Minute, "h": time.Hour, "d": 24 * time.Hour}[mt[2]]
	if err != nil || f*float64(unit) > float64(math.MaxInt64/2) {
		d.errorf(n, field, "%s is out of range", s)
		return 0, false
	}
	return time.Duration(f * float64(unit)), true
}

// ikeAddrs decodes local_addrs or remote_addrs: addresses and %any.
func (d *decoder) ikeAddrs(n *yaml.Node, field string) (addrs []netip.Addr, any bool) {
	items, ok := d.list(n, field)
	if !ok {
		return nil, false
	}
	for j, an := range items {
		if an.Kind == yaml.ScalarNode && an.Value == "%any" {
			any = true
			continue
		}
		if a, ok := d.addr(an, index(field, j)); ok {
			addrs = append(addrs, a)
		}
	}
	if len(items) == 0 {
		d.errorf(n, field, "empty; want addresses or %%any")
	}
	return addrs, any
}

func sharedFamily(a, b []netip.Addr) bool {
	for _, x := range a {
		for _, y := range b {
			if x.Is4() == y.Is4() {
				return true
			}
		}
	}
	return false
}

// presetNames lists the presets' names for an error: "aws, gcp, azure".
func presetNames() string {
	var names []string
	for _, p := range proposal.Presets() {
		names = append(names, p.Name)
	}
	return strings.Join(names, ", ")
}

// proposals decodes a list of proposal strings and preset names (see
// proposal.Expand); an error names the item and its bad algorithm
// (proposal.Parse's message). A legacy algorithm (modp1024) is refused
// unless a preset that needs it or allowLegacy (the connection's
// allow_legacy) asks for it, and is then warned about.
func (d *decoder) proposals(n *yaml.Node, field string, proto message.ProtocolID, allowLegacy bool) []proposal.Proposal {
	items, ok := d.list(n, field)
	if !ok {
		return nil
	}
	if len(items) == 0 {
		d.errorf(n, field, "empty")
	}
	var ps []proposal.Proposal
	for j, pn := range items {
		f := index(field, j)
		s, ok := d.str(pn, f)
		if !ok {
			continue
		}
		expanded, err := proposal.ExpandLegacy(proto, s, allowLegacy)
		if err != nil {
			d.errorf(pn, f, "%s", strings.TrimPrefix(err.Error(), "proposal: "))
			continue
		}
		var legacy []string
		for _, p := range expanded {
			for _, name := range p.Legacy() {
				if !slices.Contains(legacy, name) {
					legacy = append(legacy, name)
				}
			}
		}
		preset, isPreset := proposal.LookupPreset(s)
		if isPreset && !allowLegacy && len(preset.LegacyIKE) > 0 && proto == message.ProtoIKE {
			d.warnf(pn, f, "preset %s leaves out its legacy proposals (%s): %s; set allow_legacy: true on the connection to accept them", s, strings.Join(preset.LegacyIKE, ", "), preset.Why)
		}
		if len(legacy) > 0 {
			names := strings.Join(legacy, ", ")
			switch {
			case isPreset:
				d.warnf(pn, f, "preset %s offers %s, a legacy group (1024-bit MODP, about 80-bit strength; RFC 8247 says SHOULD NOT use it): %s", s, names, preset.Why)
			case allowLegacy:
				d.warnf(pn, f, "%q offers %s, a legacy group (1024-bit MODP, about 80-bit strength; RFC 8247 says SHOULD NOT use it), because allow_legacy is set", s, names)
			default:
				d.errorf(pn, f, "%q names %s, a legacy group (1024-bit MODP, about 80-bit strength); use a modern group (modp2048, ecp256, x25519), or set allow_legacy: true on the connection if the peer offers nothing else", s, names)
				continue
			}
		}
		ps = append(ps, expanded...)
	}
	return ps
}
