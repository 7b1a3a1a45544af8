package config

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/ipsecd/ipsecd/ike"
	"github.com/ipsecd/ipsecd/ike/message"
)

// ikeSections decodes ike:, connections: and secrets: into c.IKEConfig.
// ifaces are the if_ids the children may name (nil when the interfaces
// had errors of their own). A file with none of them leaves c.IKEConfig
// zero: the daemon speaks no IKE.
func (d *decoder) ikeSections(m map[string]*yaml.Node, c *Config, ifaces map[uint32]bool) {
	if m["ike"] == nil && m["connections"] == nil && m["secrets"] == nil && m["pools"] == nil && m["eap_radius"] == nil {
		return
	}
	ic := &c.IKEConfig
	ic.IKE = IKE{Port: DefaultIKEPort, Retransmit: ike.DefaultRetransmit, CookieThreshold: DefaultCookieThreshold,
		BlockThreshold: DefaultBlockThreshold, InitLimitHalfOpen: DefaultInitLimitHalfOpen,
		MaxChildren: DefaultMaxChildren, MaxIKESAsPerPeer: DefaultMaxIKESAsPerPeer}
	if v := m["ike"]; v != nil {
		d.ikeSection(v, &ic.IKE, c.Underlay.UDP.Port())
	}
	if v := m["secrets"]; v != nil {
		d.secrets(v, ic)
	}
	if v := m["eap_radius"]; v != nil {
		d.eapRADIUS(v, ic) // eapradius.go
	}
	poolErrs := len(d.errs)
	if v := m["pools"]; v != nil {
		d.pools(v, ic) // pools.go
	}
	if v := m["connections"]; v != nil {
		d.connections(v, ic, ifaces, len(d.errs) > poolErrs)
		d.unreachableDNS(ic) // pools.go
	}
	d.eapRADIUSUsed(m["eap_radius"], ic)
}

// ikeSection decodes ike:, the settings all connections share.
func (d *decoder) ikeSection(n *yaml.Node, i *IKE, udpPort uint16) {
	m, ok := d.fields(n, "ike", "port", "retransmit", "cookie_threshold", "block_threshold", "init_limit_half_open",
		"max_children", "max_ike_sas_per_peer", "keylog", "resolve_file")
	if !ok {
		return
	}
	if v := m["port"]; v != nil {
		if p, ok := d.uint(v, "ike.port", 1, 65535); ok {
			if uint16(p) == udpPort {
				d.errorf(v, "ike.port", "%d is underlay.udp's port, where IKE moves after NAT detection; IKE_SA_INIT needs a port of its own (500)", p)
			}
			i.Port = uint16(p)
		}
	}
	if v := m["retransmit"]; v != nil {
		if r, ok := d.fields(v, "ike.retransmit", "timeout", "base", "tries"); ok {
			if t := r["timeout"]; t != nil {
				if dur, ok := d.duration(t, "ike.retransmit.timeout"); ok {
					if dur < 100*time.Millisecond || dur > time.Hour {
						d.errorf(t, "ike.retransmit.timeout", "%s is out of range; want 100ms..1h", dur)
					}
					i.Retransmit.Timeout = dur
				}
			}
			if b := r["base"]; b != nil {
				if s, ok := d.scalar(b, "ike.retransmit.base", "a number"); ok {
					f, err := strconv.ParseFloat(s, 64)
					switch {
					case err != nil || math.IsNaN(f):
						d.errorf(b, "ike.retransmit.base", "want a number, got %s", describe(b))
					case f < 1 || f > 10:
						d.errorf(b, "ike.retransmit.base", "%s is out of range; want 1..10", s)
					default:
						i.Retransmit.Base = f
					}
				}
			}
			if t := r["tries"]; t != nil {
				n, _ := d.uint(t, "ike.retransmit.tries", 1, 100)
				i.Retransmit.Tries = int(n)
			}
		}
	}
	if v := m["cookie_threshold"]; v != nil {
		t, _ := d.uint(v, "ike.cookie_threshold", 0, 1<<20)
		i.CookieThreshold = int(t)
	}
	if v := m["block_threshold"]; v != nil {
		t, _ := d.uint(v, "ike.block_threshold", 0, 65535)
		i.BlockThreshold = int(t)
	}
	if v := m["init_limit_half_open"]; v != nil {
		t, _ := d.uint(v, "ike.init_limit_half_open", 0, 1<<20)
		i.InitLimitHalfOpen = int(t)
	}
	if v := m["max_children"]; v != nil {
		if t, ok := d.uint(v, "ike.max_children", ike.MinMaxChildren, 65535); ok {
			i.MaxChildren = int(t)
		}
	}
	if v := m["max_ike_sas_per_peer"]; v != nil {
		if t, ok := d.uint(v, "ike.max_ike_sas_per_peer", 0, 65535); ok {
			if t != 0 && t < MinMaxIKESAsPerPeer {
				d.errorf(v, "ike.max_ike_sas_per_peer", "%d is too few: simultaneous IKE rekeys hold %d for a moment; want 0 (no limit) or %d..65535", t, MinMaxIKESAsPerPeer, MinMaxIKESAsPerPeer)
			}
			i.MaxIKESAsPerPeer = int(t)
		}
	}
	if v := m["resolve_file"]; v != nil {
		if s, ok := d.str(v, "ike.resolve_file"); ok && s != "" {
			if !filepath.IsAbs(s) {
				s = filepath.Join(d.dir, s)
			}
			i.ResolveFile = s
			if fi, err := os.Stat(filepath.Dir(s)); err != nil || !fi.IsDir() {
				d.warnings = append(d.warnings, fmt.Sprintf("ike.resolve_file %s: its directory is not there: the DNS servers a gateway gives cannot be written", s))
			}
		}
	}
	if v := m["keylog"]; v != nil {
		if s, ok := d.str(v, "ike.keylog"); ok && s != "" {
			if !filepath.IsAbs(s) {
				s = filepath.Join(d.dir, s)
			}
			i.Keylog = s
			d.warnings = append(d.warnings, fmt.Sprintf("ike.keylog writes every negotiated IKE and ESP key to %s*: "+
				"whoever reads those files decrypts the traffic; for debugging only", s))
		}
	}
}

var connectionFields = []string{"name", "version", "local_addrs", "remote_addrs", "proposals", "encap",
	"dpd_delay", "rekey_time", "unique", "local", "remote", "children", "allow_legacy", "pools", "vips"}

// connections decodes connections: (swanctl's connections.<name>); a
// connection with errors is left out of ic. poolErrs: pools: had errors,
// so a connection's pools are not checked against what is left of it.
func (d *decoder) connections(n *yaml.Node, ic *IKEConfig, ifaces map[uint32]bool, poolErrs bool) {
	items, ok := d.list(n, "connections")
	if !ok {
		return
	}
	names := map[string]string{}
	children := map[string]string{} // swanctl finds children by name alone
	for i, it := range items {
		f := index("connections", i)
		m, ok := d.fields(it, f, connectionFields...)
		if !ok {
			continue
		}
		before := len(d.errs)
		cn := Connection{Version: 2, RekeyTime: DefaultIKERekeyTime, Unique: UniqueNo, Line: it.Line}
		cn.Name = d.uniqueName(it, m["name"], f, names, "")
		if v := m["version"]; v != nil {
			if ver, ok := d.uint(v, join(f, "version"), 0, math.MaxUint32); ok && ver != 2 {
				d.errorf(v, join(f, "version"), "%d is not supported; ipsecd speaks IKEv2 only (version: 2)", ver)
			}
		}
		if v := m["local_addrs"]; v != nil {
			cn.LocalAddrs, cn.LocalAny = d.ikeAddrs(v, join(f, "local_addrs"))
		} else {
			cn.LocalAny = true
		}
		if v := m["remote_addrs"]; v != nil {
			cn.RemoteAddrs, cn.RemoteAny = d.ikeAddrs(v, join(f, "remote_addrs"))
		} else {
			cn.RemoteAny = true
		}
		if !cn.LocalAny && !cn.RemoteAny && len(cn.LocalAddrs) > 0 && len(cn.RemoteAddrs) > 0 && !sharedFamily(cn.LocalAddrs, cn.RemoteAddrs) {
			d.errorf(m["remote_addrs"], join(f, "remote_addrs"), "no address of the family of local_addrs: an IKE SA runs between addresses of one family")
		}
		if v := m["allow_legacy"]; v != nil {
			cn.AllowLegacy, _ = d.bool(v, join(f, "allow_legacy"))
		}
		if v := m["proposals"]; v == nil {
			d.errorf(it, join(f, "proposals"), "missing; want IKE proposals as swanctl writes them (aes256-sha256-x25519), or a preset (%s)", presetNames())
		} else {
			cn.Proposals = d.proposals(v, join(f, "proposals"), message.ProtoIKE, cn.AllowLegacy)
		}
		if v := m["encap"]; v != nil {
			cn.Encap, _ = d.bool(v, join(f, "encap"))
		}
		if v := m["dpd_delay"]; v != nil {
			cn.DPDDelay, _ = d.duration(v, join(f, "dpd_delay"))
		}
		if v := m["rekey_time"]; v != nil {
			cn.RekeyTime, _ = d.duration(v, join(f, "rekey_time"))
		}
		if v := m["unique"]; v != nil {
			cn.Unique, _ = oneOfTyped(d, v, join(f, "unique"), UniqueNo, UniqueNever, UniqueKeep, UniqueReplace)
		}
		for _, side := range []struct {
			key   string
			ep    *Endpoint
			known []string
		}{
			{"local", &cn.Local, []string{"auth", "id", "cert", "key", "eap_id"}},
			{"remote", &cn.Remote, []string{"auth", "id", "cacerts", "certs", "eap_id"}},
		} {
			if v := m[side.key]; v == nil {
				d.errorf(it, join(f, side.key), "missing; want {auth: psk|pubkey, id: ...}")
			} else {
				d.endpoint(v, join(f, side.key), side.ep, side.known)
			}
		}
		if v := m["pools"]; v != nil {
			cn.Pools = d.connectionPools(v, join(f, "pools"), ic, poolErrs)
		}
		if v := m["vips"]; v != nil {
			cn.VIPs = d.vips(v, join(f, "vips"))

		}
		if v := m["children"]; v == nil {
			d.errorf(it, join(f, "children"), "missing; a connection needs a child to carry traffic")
		} else {
			d.children(v, join(f, "children"), &cn, ifaces, children)
		}
		for i := range cn.Children {
			if ch := &cn.Children[i]; ch.RemoteDynamic {
				ch.RemoteTS = append(ch.RemoteTS, ic.dynamicPrefixes(cn.Pools)...)
			}
			if ch := &cn.Children[i]; ch.LocalDynamic {
				ch.LocalTS = append(ch.LocalTS, anyOfFamilies(cn.VIPs)...)
			}
		}
		if len(d.errs) > before {
			continue
		}
		if !d.eapUsers(it, f, &cn, ic) { // eapradius.go
			continue
		}
		if cn.Local.Auth == ike.AuthPSK || cn.Remote.Auth == ike.AuthPSK {
			s := bestSecret(ic.Secrets, cn.Local.Identity, cn.Remote.Identity)
			if s < 0 {
				d.errorf(it, f, "auth psk, and no item of secrets has ids matching local id %q and remote id %q", cn.Local.ID, cn.Remote.ID)
				continue
			}
			cn.PSK = ic.Secrets[s].Secret
		}
		// The engine's own checks: the key is the certificate's, the
		// certificate proves the local id, the client's eap secret is
		// there, ... (with the file's secrets, no copy: only checked).
		if vc := pendingPools(cn); len(vc.Children) > 0 {
			if err := vc.engineConfig(ic.IKE, &vc.Children[0], ic.eapSecret).Validate(); err != nil {
				d.errorf(it, f, "%s", strings.TrimPrefix(err.Error(), "ike: "))
				continue
			}
		}
		ic.Connections = append(ic.Connections, cn)
	}
}

// warnf adds a warning in the shape of an error: FILE:LINE: field: message.
func (d *decoder) warnf(n *yaml.Node, field, format string, args ...any) {
	w := (&Error{File: d.file, Line: n.Line, Field: field, Msg: fmt.Sprintf(format, args...)}).Error()
	if !slices.Contains(d.warnings, w) {
		d.warnings = append(d.warnings, w)
	}
}

// uniqueName decodes the name field v of item it (at field f), which
// must be there, not empty, and not in names, which maps the names taken
// so far to the fields that took them; why follows the duplicate error.
func (d *decoder) uniqueName(it, v *yaml.Node, f string, names map[string]string, why string) string {
	if v == nil {
		d.errorf(it, join(f, "name"), "missing")
		return ""
	}
	s, ok := d.str(v, join(f, "name"))
	if !ok {
		return ""
	}
	switch prev, dup := names[s]; {
	case s == "":
		d.errorf(v, join(f, "name"), "empty")
	case dup:
		d.errorf(v, join(f, "name"), "%q is already the name of %s%s", s, prev, why)
	default:
		names[s] = f
	}
	return s
}
