package config

import (
	"crypto"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/ipsecd/ipsecd/ike"
	"github.com/ipsecd/ipsecd/ike/message"
	"github.com/ipsecd/ipsecd/ike/proposal"
)

// ikeSections decodes ike:, connections: and secrets: into c.IKEConfig.
// ifaces are the if_ids the children may name (nil when the interfaces
// had errors of their own). A file with none of them leaves c.IKEConfig
// zero: the daemon speaks no IKE.
func (d *decoder) ikeSections(m map[string]*yaml.Node, c *Config, ifaces map[uint32]bool) {
	if m["ike"] == nil && m["connections"] == nil && m["secrets"] == nil {
		return
	}
	ic := &c.IKEConfig
	ic.IKE = IKE{Port: DefaultIKEPort, Retransmit: DefaultRetransmit, CookieThreshold: DefaultCookieThreshold}
	if v := m["ike"]; v != nil {
		d.ikeSection(v, &ic.IKE, c.Underlay.UDP.Port())
	}
	if v := m["secrets"]; v != nil {
		d.secrets(v, ic)
	}
	if v := m["connections"]; v != nil {
		d.connections(v, ic, ifaces)
	}
}

func (d *decoder) ikeSection(n *yaml.Node, i *IKE, udpPort uint16) {
	m, ok := d.fields(n, "ike", "port", "retransmit", "cookie_threshold", "keylog")
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

// secrets decodes secrets:.
func (d *decoder) secrets(n *yaml.Node, ic *IKEConfig) {
	items, ok := d.list(n, "secrets")
	if !ok {
		return
	}
	seen := map[string]string{} // sorted ids → field
	for i, it := range items {
		f := index("secrets", i)
		m, ok := d.fields(it, f, "ids", "secret", "secret_file")
		if !ok {
			continue
		}
		s := Secret{Line: it.Line}
		good := true
		if v := m["ids"]; v != nil {
			ids, ok := d.list(v, join(f, "ids"))
			for j, idn := range ids {
				if id, ok := d.str(idn, index(join(f, "ids"), j)); ok && id != "" {
					s.IDs = append(s.IDs, id)
				} else {
					if ok {
						d.errorf(idn, index(join(f, "ids"), j), "empty")
					}
					good = false
				}
			}
			good = good && ok
		}
		switch sv, fv := m["secret"], m["secret_file"]; {
		case sv != nil && fv != nil:
			d.errorf(fv, join(f, "secret_file"), "given together with secret; use one")
			good = false
		case sv != nil:
			d.inlineKeys = true
			if v, ok := d.scalar(sv, join(f, "secret"), "a string"); ok {
				s.Secret, ok = d.secretValue(sv, join(f, "secret"), []byte(v))
				good = good && ok
			} else {
				good = false
			}
		case fv != nil:
			s.Secret, ok = d.secretFile(fv, join(f, "secret_file"))
			good = good && ok
		default:
			d.errorf(it, join(f, "secret"), "missing; want secret: or secret_file:")
			good = false
		}
		key := strings.Join(slices.Sorted(slices.Values(s.IDs)), "\x00")
		if prev, dup := seen[key]; dup && good {
			d.errorf(it, join(f, "ids"), "the same ids as %s", prev)
			good = false
		}
		if !good {
			clear(s.Secret)
			continue
		}
		seen[key] = f
		ic.Secrets = append(ic.Secrets, s)
	}
}

// secretValue decodes a secret as swanctl.conf writes one: 0x-prefixed
// hex, 0s-prefixed base64, or else the text itself. Its errors never show
// the value.
func (d *decoder) secretValue(n *yaml.Node, field string, v []byte) (Key, bool) {
	var k []byte
	var err error
	switch {
	case len(v) >= 2 && v[0] == '0' && (v[1] == 'x' || v[1] == 'X'):
		k = make([]byte, hex.DecodedLen(len(v)-2))
		if _, err = hex.Decode(k, v[2:]); err != nil {
			err = errors.New("0x but not hex")
		}
	case len(v) >= 2 && v[0] == '0' && (v[1] == 's' || v[1] == 'S'):
		k = make([]byte, base64.StdEncoding.DecodedLen(len(v)-2))
		var nk int
		nk, err = base64.StdEncoding.Decode(k, v[2:])
		if err != nil {
			err = errors.New("0s but not base64")
		}
		clear(k[nk:])
		k = k[:nk]
	default:
		k = slices.Clone(v)
	}
	if err == nil && len(k) == 0 {
		err = errors.New("empty")
	}
	if err != nil {
		clear(k)
		d.errorf(n, field, "%v (the value is not shown)", err)
		return nil, false
	}
	return Key(k), true
}

// secretFile reads a secret from a file, written as secret: writes it
// (white space around it is dropped), with the bounded reader of key
// files, and warns when others can read or change the file.
func (d *decoder) secretFile(n *yaml.Node, field string) (Key, bool) {
	path, ok := d.secretPath(n, field, "write it as secret:")
	if !ok {
		return nil, false
	}
	data, fi, err := readRegular(path, maxKeyFile, "a secret file")
	defer clear(data)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		d.errorf(n, field, "%v", err)
		return nil, false
	}
	k, ok := d.secretValue(n, field, trimSpace(data))
	if !ok {
		return nil, false
	}
	d.warnExposed(path, fi, "secret_file ")
	return k, true
}

// trimSpace is bytes.TrimSpace for ASCII white space, which returns a
// subslice (no copy of the secret).
func trimSpace(b []byte) []byte {
	isSpace := func(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f' }
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

// warnExposed adds exposedKeys' warnings for a file that holds keys, named
// as the field that names it.
func (d *decoder) warnExposed(path string, fi os.FileInfo, name string) {
	for _, w := range exposedKeys(path, fi, false, true) {
		w = strings.Replace(w, "key_file ", name, 1)
		if !slices.Contains(d.warnings, w) {
			d.warnings = append(d.warnings, w)
		}
	}
}

var connectionFields = []string{"name", "version", "local_addrs", "remote_addrs", "proposals", "encap",
	"dpd_delay", "rekey_time", "local", "remote", "children"}

var childFields = []string{"name", "if_id", "mode", "local_ts", "remote_ts", "esp_proposals",
	"rekey_time", "life_time", "replay_window", "start_action", "dpd_action"}

func (d *decoder) connections(n *yaml.Node, ic *IKEConfig, ifaces map[uint32]bool) {
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
		cn := Connection{Version: 2, RekeyTime: DefaultIKERekeyTime, Line: it.Line}
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
		if v := m["proposals"]; v == nil {
			d.errorf(it, join(f, "proposals"), "missing; want IKE proposals as swanctl writes them (aes256-sha256-x25519)")
		} else {
			cn.Proposals = d.proposals(v, join(f, "proposals"), message.ProtoIKE)
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
		for _, side := range []struct {
			key   string
			ep    *Endpoint
			known []string
		}{
			{"local", &cn.Local, []string{"auth", "id", "cert", "key"}},
			{"remote", &cn.Remote, []string{"auth", "id", "cacerts"}},
		} {
			if v := m[side.key]; v == nil {
				d.errorf(it, join(f, side.key), "missing; want {auth: psk|pubkey, id: ...}")
			} else {
				d.endpoint(v, join(f, side.key), side.ep, side.known)
			}
		}
		if v := m["children"]; v == nil {
			d.errorf(it, join(f, "children"), "missing; a connection needs a child to carry traffic")
		} else {
			d.children(v, join(f, "children"), &cn, ifaces, children)
		}
		if len(d.errs) > before {
			continue
		}
		if cn.Local.Auth == ike.AuthPSK || cn.Remote.Auth == ike.AuthPSK {
			s := bestSecret(ic.Secrets, cn.Local.ID, cn.Remote.ID)
			if s < 0 {
				d.errorf(it, f, "auth psk, and no item of secrets has ids matching local id %q and remote id %q", cn.Local.ID, cn.Remote.ID)
				continue
			}
			cn.PSK = ic.Secrets[s].Secret
		}
		// The engine's own checks: the key is the certificate's, the
		// certificate proves the local id, ...
		if len(cn.Children) > 0 {
			if err := cn.engineConfig(ic.IKE, &cn.Children[0]).Validate(); err != nil {
				d.errorf(it, f, "%s", strings.TrimPrefix(err.Error(), "ike: "))
				continue
			}
		}
		ic.Connections = append(ic.Connections, cn)
	}
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

// proposals decodes a list of proposal strings; an error names the
// proposal and its bad algorithm (proposal.Parse's message).
func (d *decoder) proposals(n *yaml.Node, field string, proto message.ProtocolID) []proposal.Proposal {
	items, ok := d.list(n, field)
	if !ok {
		return nil
	}
	if len(items) == 0 {
		d.errorf(n, field, "empty")
	}
	var ps []proposal.Proposal
	for j, pn := range items {
		s, ok := d.str(pn, index(field, j))
		if !ok {
			continue
		}
		p, err := proposal.Parse(proto, s)
		if err != nil {
			d.errorf(pn, index(field, j), "%s", strings.TrimPrefix(err.Error(), "proposal: "))
			continue
		}
		ps = append(ps, p)
	}
	return ps
}

func (d *decoder) endpoint(n *yaml.Node, field string, ep *Endpoint, known []string) {
	m, ok := d.fields(n, field, known...)
	if !ok {
		return
	}
	ep.Auth = ike.AuthPSK
	if v := m["auth"]; v != nil {
		if a, ok := d.oneOf(v, join(field, "auth"), "psk", "pubkey"); ok {
			ep.Auth = ike.AuthClass(a)
		}
	}
	if v := m["id"]; v != nil {
		ep.ID, _ = d.str(v, join(field, "id"))
	}
	if ep.ID == "" && ep.Auth == ike.AuthPSK {
		d.errorf(n, join(field, "id"), "missing; auth psk needs ids on both sides, to find the secret")
	}
	path := func(v *yaml.Node, f string) (string, bool) {
		s, ok := d.str(v, f)
		switch {
		case !ok:
			return "", false
		case s == "":
			d.errorf(v, f, "empty path")
			return "", false
		case filepath.IsAbs(s):
			return s, true
		}
		return filepath.Join(d.dir, s), true
	}
	if v := m["cert"]; v != nil {
		if p, ok := path(v, join(field, "cert")); ok {
			ep.Cert = p
			ep.Certs = d.certFile(v, join(field, "cert"), p)
		}
	}
	if v := m["key"]; v != nil {
		if p, ok := path(v, join(field, "key")); ok {
			ep.Key = p
			ep.PrivateKey = d.privateKeyFile(v, join(field, "key"), p)
		}
	}
	if v := m["cacerts"]; v != nil {
		items, _ := d.list(v, join(field, "cacerts"))
		for j, cn := range items {
			if p, ok := path(cn, index(join(field, "cacerts"), j)); ok {
				ep.CACerts = append(ep.CACerts, p)
				ep.CACertList = append(ep.CACertList, d.certFile(cn, index(join(field, "cacerts"), j), p)...)
			}
		}
	}
	if ep.Auth == ike.AuthPubkey {
		switch {
		case slices.Contains(known, "cert") && (m["cert"] == nil || m["key"] == nil):
			d.errorf(n, field, "auth pubkey needs cert: and key: (the certificate and its private key)")
		case slices.Contains(known, "cacerts") && m["cacerts"] == nil:
			d.errorf(n, join(field, "cacerts"), "missing; auth pubkey needs the trust anchors the peer's certificate chains to")
		}
	} else {
		for _, k := range []string{"cert", "key", "cacerts"} {
			if m[k] != nil {
				d.errorf(m[k], join(field, k), "only with auth: pubkey")
			}
		}
	}
}

func (d *decoder) certFile(n *yaml.Node, field, path string) []*x509.Certificate {
	data, _, err := readRegular(path, maxPEMFile, "a certificate file")
	if err != nil {
		d.errorf(n, field, "%v", err)
		return nil
	}
	cs, err := ike.ParseCertificatesPEM(data)
	if err != nil {
		d.errorf(n, field, "%s: %v", path, err)
		return nil
	}
	return cs
}

// privateKeyFile reads a private key with the bounded reader, zeroes the
// bytes read, and warns when others can read or change the file. As for
// key_file, errors do not show the path, which may be a key pasted into
// the wrong field.
func (d *decoder) privateKeyFile(n *yaml.Node, field, path string) crypto.Signer {
	data, fi, err := readRegular(path, maxPEMFile, "a private key file")
	defer clear(data)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		d.errorf(n, field, "%v", err)
		return nil
	}
	k, err := ike.ParsePrivateKeyPEM(data)
	if err != nil {
		d.errorf(n, field, "%v", err)
		return nil
	}
	d.warnExposed(path, fi, "key ")
	return k
}

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
			StartAction: "none", DPDAction: "clear", Line: it.Line}
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
				p, ok := d.prefix(pn, index(tf, j), false)
				switch {
				case !ok:
				case p.Masked() != p:
					d.errorf(pn, index(tf, j), "%s has host bits set; did you mean %s?", p, p.Masked())
				default:
					*ts.dst = append(*ts.dst, p)
				}
			}
			if len(items) == 0 {
				d.errorf(v, tf, "empty")
			}
		}
		if len(ch.LocalTS) > 0 && len(ch.RemoteTS) > 0 && !sharedPrefixFamily(ch.LocalTS, ch.RemoteTS) {
			d.errorf(m["remote_ts"], join(f, "remote_ts"), "no prefix of the family of local_ts: no packet could match")
		}
		if v := m["esp_proposals"]; v == nil {
			d.errorf(it, join(f, "esp_proposals"), "missing; want ESP proposals as swanctl writes them (aes128gcm16-x25519)")
		} else {
			ch.ESPProposals = d.proposals(v, join(f, "esp_proposals"), message.ProtoESP)
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
			ch.StartAction, ok = d.oneOf(v, join(f, "start_action"), "start", "trap", "none")
			if ok && ch.StartAction != "none" && len(cn.RemoteAddrs) == 0 {
				d.errorf(v, join(f, "start_action"), "%s initiates, and remote_addrs has no address to initiate to (only %%any: the connection can only respond); want none, or give the peer's address", ch.StartAction)
			}
		}
		if v := m["dpd_action"]; v != nil {
			ch.DPDAction, _ = d.oneOf(v, join(f, "dpd_action"), "clear", "restart", "trap")
		}
		cn.Children = append(cn.Children, ch)
	}
}

// bestSecret returns the index of the secret that serves a connection
// between local and remote ids, or -1, as strongSwan ranks them: one whose
// ids include both, then one with a single id that is one of them, then
// one without ids; the first in the file among equals. A remote id %any
// matches every id, so that a responder for any peer finds its secret by
// its local id alone.
func bestSecret(secrets []Secret, local, remote string) int {
	best, bestRank := -1, 0
	for i, s := range secrets {
		rank := 0
		switch hasL, hasR := slices.Contains(s.IDs, local), slices.Contains(s.IDs, remote) || remote == "%any"; {
		case len(s.IDs) == 0:
			rank = 1
		case hasL && hasR:
			rank = 3
		case len(s.IDs) == 1 && (hasL || hasR):
			rank = 2
		}
		if rank > bestRank {
			best, bestRank = i, rank
		}
	}
	return best
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
