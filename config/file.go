package config

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	"go.yaml.in/yaml/v3"

	"github.com/ipsecd/ipsecd/sa"
)

// maxUnixPath is the longest path a unix socket can have (sun_path is 108
// bytes with its terminating NUL).
const maxUnixPath = 107

// Parse parses and validates a config file. name is used in error messages
// and to find relative key_file paths. On any problem it returns a nil
// Config and an ErrorList with every problem found. Warnings of the Config
// name key files that group or others can read; Load adds the file itself.
// data is left as it is: zeroing it, if it holds keys, is the caller's job.
func Parse(name string, data []byte) (cfg *Config, err error) {
	cfg, _, err = parse(name, data)
	return cfg, err
}

// parse is Parse, with the decoder for what Load adds.
func parse(name string, data []byte) (cfg *Config, d *decoder, err error) {
	d = &decoder{file: name, dir: filepath.Dir(name)}
	c := &Config{
		File:     name,
		Log:      Log{Level: DefaultLogLevel, Format: DefaultLogFmt},
		Control:  DefaultControl,
		StateDir: DefaultStateDir,
		Underlay: Underlay{UDP: DefaultUDP},
	}
	defer func() {
		// go.yaml.in/yaml/v3 is not known to panic, but a bad file must
		// never take the daemon down with it.
		if r := recover(); r != nil {
			err = ErrorList{{File: name, Msg: fmt.Sprintf("yaml: internal error: %v", r)}}
		}
		if err != nil {
			c.WipeKeys() // the keys decoded before the file was refused
			cfg = nil
		}
	}()
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	switch err := dec.Decode(&doc); {
	case errors.Is(err, io.EOF):
		return c, d, nil // an empty file: all defaults
	case err != nil:
		d.syntaxError(err)
		return c, d, d.errs
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
	case err != nil:
		d.syntaxError(err)
	default:
		d.errorf(&extra, "", "more than one YAML document; ipsecd reads one")
	}
	if len(doc.Content) == 1 && !isNull(doc.Content[0]) {
		d.root(doc.Content[0], c)
	}
	if d.errs != nil {
		d.errs.sortByLine()
		return c, d, d.errs
	}
	c.Warnings = d.warnings
	return c, d, nil
}

// ControlPath returns the control key of the config file at path (or the
// default), reading nothing else, so that the control commands reach a
// running daemon even while its file is being edited. Like Load, it
// refuses what is not a regular file of at most MaxConfigFile bytes, and
// its errors show no value of the file.
func ControlPath(path string) (string, error) {
	data, _, err := readRegular(path, MaxConfigFile, "a config file")
	defer clear(data) // the file may hold keys
	var pe *os.PathError
	switch {
	case errors.As(err, &pe):
		return "", err // names the path already
	case err != nil:
		return "", fmt.Errorf("%s: %w", path, err)
	}
	d := &decoder{file: path}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		d.syntaxError(err)
		return "", d.errs
	}
	if len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return DefaultControl, nil // Load says what is wrong
	}
	root := doc.Content[0]
	for i := 0; i+1 < len(root.Content); i += 2 {
		if k, v := root.Content[i], root.Content[i+1]; k.Value == "control" && !isNull(v) {
			if s, ok := d.str(v, "control"); ok && s != "" {
				return s, nil
			}
			if d.errs != nil {
				return "", d.errs
			}
		}
	}
	return DefaultControl, nil
}

func (d *decoder) root(n *yaml.Node, c *Config) {
	m, ok := d.fields(n, "", "log", "control", "metrics", "pprof", "state_dir", "underlay", "fail_closed", "interfaces", "states", "policies", "ike", "connections", "secrets")
	if !ok {
		return
	}
	if v := m["log"]; v != nil {
		d.log(v, &c.Log)
	}
	if v := m["control"]; v != nil {
		if s, ok := d.str(v, "control"); ok {
			switch {
			case s == "":
				d.errorf(v, "control", "empty; want a unix socket path")
			case len(s) > maxUnixPath:
				d.errorf(v, "control", "%d bytes long; a unix socket path has at most %d", len(s), maxUnixPath)
			default:
				c.Control = s
			}
		}
	}
	metricsErrs := len(d.errs)
	if v := m["metrics"]; v != nil {
		if s, ok := d.str(v, "metrics"); ok && s != "" {
			if _, port, err := net.SplitHostPort(s); err != nil {
				d.errorf(v, "metrics", "want host:port, got %q", s)
			} else if p, err := strconv.ParseUint(port, 10, 16); err != nil || p == 0 {
				d.errorf(v, "metrics", "port %q is not 1..65535", port)
			} else {
				c.Metrics = s
			}
		}
	}
	metricsErrs = len(d.errs) - metricsErrs
	if v := m["pprof"]; v != nil {
		// pprof without a listener would do nothing: say so, unless
		// metrics has an error of its own.
		if on, ok := d.bool(v, "pprof"); ok && on {
			switch {
			case c.Metrics != "":
				c.Pprof = true
			case metricsErrs == 0:
				d.errorf(v, "pprof", "true needs metrics: the profiler is served on the metrics listener")
			}
		}
	}
	if v := m["state_dir"]; v != nil {
		if s, ok := d.str(v, "state_dir"); ok {
			switch {
			case s == "":
				d.errorf(v, "state_dir", "empty; want the directory that keeps the sequence numbers of static keys across restarts")
			case strings.ContainsRune(s, 0):
				d.errorf(v, "state_dir", "holds a NUL byte")
			case filepath.IsAbs(s):
				c.StateDir = filepath.Clean(s)
			default:
				c.StateDir = filepath.Join(d.dir, s)
			}
		}
	}
	if v := m["underlay"]; v != nil {
		d.underlay(v, &c.Underlay)
	}
	if v := m["fail_closed"]; v != nil {
		if fc, ok := d.fields(v, "fail_closed", "keep_on_stop"); ok && fc["keep_on_stop"] != nil {
			c.FailClosed.KeepOnStop, _ = d.bool(fc["keep_on_stop"], "fail_closed.keep_on_stop")
		}
	}
	// ifaces holds the if_ids states and policies may name; nil when the
	// interfaces had errors, as a wrong if_id there would be reported
	// again at every state and policy that uses it.
	ifaces := map[uint32]bool{}
	if v := m["interfaces"]; v != nil {
		before := len(d.errs)
		d.interfaces(v, c)
		for _, ifc := range c.Interfaces {
			ifaces[ifc.IfID] = true
		}
		if len(d.errs) > before {
			ifaces = nil
		}
	}
	if v := m["states"]; v != nil {
		d.states(v, c, ifaces)
	}
	if v := m["policies"]; v != nil {
		d.policies(v, c, ifaces)
	}
	d.ikeSections(m, c, ifaces) // ike.go
}

func (d *decoder) log(n *yaml.Node, l *Log) {
	m, ok := d.fields(n, "log", "level", "format")
	if !ok {
		return
	}
	if v := m["level"]; v != nil {
		if s, ok := d.str(v, "log.level"); ok {
			if _, err := logrus.ParseLevel(s); err != nil {
				d.errorf(v, "log.level", "want panic, fatal, error, warn, info, debug or trace, got %q", s)
			} else {
				l.Level = s
			}
		}
	}
	if v := m["format"]; v != nil {
		if s, ok := d.oneOf(v, "log.format", "text", "json"); ok {
			l.Format = s
		}
	}
}

func (d *decoder) underlay(n *yaml.Node, u *Underlay) {
	m, ok := d.fields(n, "underlay", "udp", "raw_esp", "mark")
	if !ok {
		return
	}
	if v := m["udp"]; v != nil {
		if s, ok := d.str(v, "underlay.udp"); ok {
			if strings.HasPrefix(s, ":") {
				s = "0.0.0.0" + s
			}
			ap, err := netip.ParseAddrPort(s)
			switch {
			case err != nil || ap.Addr().Zone() != "":
				d.errorf(v, "underlay.udp", "want address:port (0.0.0.0:4500), got %s", describe(v))
			case ap.Port() == 0:
				d.errorf(v, "underlay.udp", "port must not be 0")
			default:
				u.UDP = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
			}
		}
	}
	if v := m["raw_esp"]; v != nil {
		u.RawESP, _ = d.bool(v, "underlay.raw_esp")
	}
	if v := m["mark"]; v != nil {
		u.Mark, _ = d.uint32(v, "underlay.mark")
	}
}

func (d *decoder) interfaces(n *yaml.Node, c *Config) {
	items, ok := d.list(n, "interfaces")
	if !ok {
		return
	}
	names := map[string]string{} // name → field of its first use
	ids := map[uint32]string{}   // if_id → field
	routes := map[netip.Prefix]string{}
	for i, it := range items {
		f := index("interfaces", i)
		m, ok := d.fields(it, f, "name", "if_id", "mtu", "addresses", "routes", "queues", "table", "txqueuelen")
		if !ok {
			continue
		}
		ifc := Interface{MTU: DefaultMTU, Queues: DefaultQueues, TxQueueLen: DefaultTxQueueLen, Line: it.Line}
		good := true
		if v := m["name"]; v == nil {
			d.errorf(it, join(f, "name"), "missing")
			good = false
		} else if s, ok := d.str(v, join(f, "name")); ok {
			if msg := checkIfName(s); msg != "" {
				d.errorf(v, join(f, "name"), "%s", msg)
			} else if prev, dup := names[s]; dup {
				d.errorf(v, join(f, "name"), "%q is already the name of %s", s, prev)
			} else {
				names[s] = f
			}
			ifc.Name = s
		}
		if v := m["if_id"]; v == nil {
			d.errorf(it, join(f, "if_id"), "missing; want a non-zero number")
			good = false
		} else if id, ok := d.uint(v, join(f, "if_id"), 1, math.MaxUint32); ok {
			if prev, dup := ids[uint32(id)]; dup {
				d.errorf(v, join(f, "if_id"), "%d is already the if_id of %s", id, prev)
			} else {
				ids[uint32(id)] = f
			}
			ifc.IfID = uint32(id)
		} else {
			good = false
		}
		var mtuNode *yaml.Node
		if v := m["mtu"]; v != nil {
			mtuNode = v
			mtu, _ := d.uint(v, join(f, "mtu"), MinMTU, MaxMTU)
			ifc.MTU = int(mtu)
		}
		if v := m["queues"]; v != nil {
			q, _ := d.uint(v, join(f, "queues"), 1, MaxQueues)
			ifc.Queues = int(q)
		}
		if v := m["txqueuelen"]; v != nil {
			q, _ := d.uint(v, join(f, "txqueuelen"), 1, MaxTxQueueLen)
			ifc.TxQueueLen = int(q)
		}
		if v := m["addresses"]; v != nil {
			ifc.Addresses = d.prefixes(v, join(f, "addresses"), true)
		}
		if v := m["table"]; v != nil {
			if t, ok := d.uint(v, join(f, "table"), 1, math.MaxUint32); ok {
				switch t {
				case 253, 255:
					d.errorf(v, join(f, "table"), "%d is the kernel's %s table; want main (254) or a table of your own", t, map[uint64]string{253: "default", 255: "local"}[t])
				case 254:
					// main, the default
				default:
					ifc.Table = uint32(t)
				}
			}
		}
		if v := m["routes"]; v != nil {
			field := join(f, "routes")
			items, _ := d.list(v, field)
			for j, rn := range items {
				p, ok := d.prefix(rn, index(field, j), false)
				switch {
				case !ok:
				case p.Masked() != p:
					d.errorf(rn, index(field, j), "%s has host bits set; did you mean %s?", p, p.Masked())
				case routes[p] != "":
					d.errorf(rn, index(field, j), "%s is already routed into %s", p, routes[p])
				default:
					routes[p] = f
					ifc.Routes = append(ifc.Routes, p)
				}
			}
		}
		if ifc.MTU != 0 && ifc.MTU < MinMTU6 && (hasIPv6(ifc.Addresses) || hasIPv6(ifc.Routes)) {
			at := mtuNode
			if at == nil {
				at = it
			}
			d.errorf(at, join(f, "mtu"), "%d is below %d, the minimum for IPv6, and the interface has IPv6 addresses or routes", ifc.MTU, MinMTU6)
		}
		if good {
			c.Interfaces = append(c.Interfaces, ifc)
		}
	}
}

// checkIfName applies Linux's rules for interface names (dev_valid_name).
func checkIfName(s string) string {
	switch {
	case s == "":
		return "empty"
	case len(s) > 15:
		return fmt.Sprintf("%q is longer than 15 bytes", s)
	case s == "." || s == "..":
		return fmt.Sprintf("%q is not a valid interface name", s)
	case strings.ContainsAny(s, "/: \t\n\r\v\f"):
		return fmt.Sprintf("%q contains '/', ':' or white space", s)
	}
	return ""
}

func hasIPv6(ps []netip.Prefix) bool {
	for _, p := range ps {
		if p.Addr().Is6() {
			return true
		}
	}
	return false
}

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

// report is a reporter that finds the line of field, or of the nearest
// enclosing field given.
func (d *decoder) report(fn *fieldNodes) reporter {
	return func(field, msg string) {
		for b := range fn.bad {
			if field == b || strings.HasPrefix(field, b+".") || strings.HasPrefix(b, field+".") {
				return
			}
		}
		at := fn.whole
		for f := field; f != ""; {
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
		d.errorf(at, join(fn.base, field), "%s", msg)
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
	keys := KeyOwners{} // digests: the map holds no key
	for i, it := range items {
		base := index("states", i)
		m, ok := d.fields(it, base, stateFields...)
		if !ok {
			continue
		}
		fn := newFieldNodes(base, it)
		before := len(d.errs)
		s := d.state(m, fn)
		if s.Dir == sa.DirIn && m["replay_window"] == nil {
			s.ReplayWindow = DefaultReplayWindow
		}
		checkState(&s, d.report(fn))
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
				d.errorf(fn.nodes["spi"], join(base, "spi"), "%s already has dir in and spi %#08x (inbound SAs are found by SPI alone, whatever their dst)", prev, s.SPI)
			} else {
				d.errorf(fn.nodes["spi"], join(base, "spi"), "%s already has dir %s, dst %s and spi %#08x", prev, s.Dir, s.Dst, s.SPI)
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

// state decodes the fields of one state; checkState checks the result.
func (d *decoder) state(m map[string]*yaml.Node, fn *fieldNodes) sa.Config {
	var s sa.Config
	var ok bool
	fn.field(m, "src", "", func(v *yaml.Node, f string) bool { s.Src, ok = d.addr(v, f); return ok })
	fn.field(m, "dst", "", func(v *yaml.Node, f string) bool { s.Dst, ok = d.addr(v, f); return ok })
	fn.field(m, "spi", "", func(v *yaml.Node, f string) bool {
		spi, ok := d.uint(v, f, MinSPI, math.MaxUint32)
		s.SPI = uint32(spi)
		return ok
	})
	fn.field(m, "dir", "", func(v *yaml.Node, f string) bool {
		dir, ok := d.oneOf(v, f, "in", "out")
		s.Dir = ParseDir(dir)
		return ok
	})
	fn.field(m, "mode", "", func(v *yaml.Node, f string) bool {
		mode, ok := d.oneOf(v, f, "tunnel", "transport")
		s.Mode = ParseMode(mode)
		return ok
	})
	fn.field(m, "if_id", "", func(v *yaml.Node, f string) bool {
		id, ok := d.uint(v, f, 1, math.MaxUint32)
		s.IfID = uint32(id)
		return ok
	})
	fn.field(m, "aead", "", func(v *yaml.Node, f string) bool { s.AEAD, ok = d.algorithm(v, f, KindAEAD, fn); return ok })
	fn.field(m, "enc", "", func(v *yaml.Node, f string) bool { s.Enc, ok = d.algorithm(v, f, KindEnc, fn); return ok })
	fn.field(m, "auth", "", func(v *yaml.Node, f string) bool { s.Auth, ok = d.algorithm(v, f, KindAuth, fn); return ok })
	fn.field(m, "encap", "", func(v *yaml.Node, f string) bool { s.Encap, ok = d.encap(v, f); return ok })
	fn.field(m, "replay_window", "", func(v *yaml.Node, f string) bool {
		w, ok := d.uint(v, f, 0, MaxReplayWindow)
		s.ReplayWindow = uint32(w)
		return ok
	})
	fn.field(m, "esn", "", func(v *yaml.Node, f string) bool { s.ESN, ok = d.bool(v, f); return ok })
	fn.field(m, "lifetime", "", func(v *yaml.Node, f string) bool { return d.lifetime(v, f, &s.Lifetime) })
	fn.field(m, "selector", "", func(v *yaml.Node, f string) bool {
		return d.selector(v, f, &s.Selector, fn, "selector.")
	})
	return s
}

// algorithm decodes {name, key | key_file, icv_bits | trunc_bits}. It
// records its subfields in fn so that key length errors name the key's line.
func (d *decoder) algorithm(n *yaml.Node, field string, kind AlgorithmKind, fn *fieldNodes) (*sa.Algorithm, bool) {
	known := []string{"name", "key", "key_file"}
	bitsKey := ""
	switch kind {
	case KindAEAD:
		bitsKey = "icv_bits"
	case KindAuth:
		bitsKey = "trunc_bits"
	}
	if bitsKey != "" {
		known = append(known, bitsKey)
	}
	m, ok := d.fields(n, field, known...)
	if !ok {
		return nil, false
	}
	prefix := string(kind) + "."
	a := &sa.Algorithm{}
	good := true
	fn.field(m, "name", prefix, func(v *yaml.Node, f string) bool {
		a.Name, ok = d.str(v, f)
		return ok
	})
	if m["key"] != nil && m["key_file"] != nil {
		d.errorf(m["key_file"], join(field, "key_file"), "given together with key; use one")
		fn.bad[prefix+"key"] = true
		good = false
	} else {
		fn.field(m, "key", prefix, func(v *yaml.Node, f string) bool {
			s, ok := d.scalar(v, f, "0x-prefixed hex")
			if !ok {
				return false
			}
			if !strings.HasPrefix(s, "0x") && !strings.HasPrefix(s, "0X") {
				d.errorf(v, f, "want 0x-prefixed hex")
				return false
			}
			d.inlineKeys = true
			a.Key, ok = d.hexKey(v, f, s[2:])
			return ok
		})
		fn.field(m, "key_file", prefix, func(v *yaml.Node, f string) bool {
			a.Key, ok = d.keyFile(v, f)
			return ok
		})
		if n := fn.nodes[prefix+"key_file"]; n != nil {
			fn.nodes[prefix+"key"] = n // a length error names the key_file line
			if fn.bad[prefix+"key_file"] {
				fn.bad[prefix+"key"] = true
			}
		}
	}
	if bitsKey != "" {
		fn.field(m, bitsKey, prefix, func(v *yaml.Node, f string) bool {
			b, ok := d.uint(v, f, 1, 1024)
			a.Bits = int(b)
			return ok
		})
	}
	if info, known := LookupAlgorithm(a.Name); known && a.Bits == 0 {
		a.Bits = info.DefaultBits
	}
	return a, good
}

// hexKey decodes key hex without ever putting it into a message.
func (d *decoder) hexKey(n *yaml.Node, field, s string) ([]byte, bool) {
	if len(s)%2 != 0 {
		d.errorf(n, field, "odd number of hex digits (%d)", len(s))
		return nil, false
	}
	k, err := hex.DecodeString(s)
	if err != nil {
		d.errorf(n, field, "not hex")
		return nil, false
	}
	return k, true
}

// keyFile reads a key from a file of hex text (0x optional, whitespace
// trimmed), relative to the config file's directory. The file's bytes are
// zeroed once decoded; a file that others could read or change gets a
// warning (exposedKeys). Errors name the field and never the path, which
// may be a key pasted into the wrong field, nor the file's content.
func (d *decoder) keyFile(n *yaml.Node, field string) ([]byte, bool) {
	path, ok := d.secretPath(n, field, `write the key as key: "0x..."`)
	if !ok {
		return nil, false
	}
	k, fi, err := readKey(path)
	if err != nil {
		d.errorf(n, field, "%v", err)
		return nil, false
	}
	for _, w := range exposedKeys(path, fi, false, true) {
		if !slices.Contains(d.warnings, w) {
			d.warnings = append(d.warnings, w)
		}
	}
	return k, true
}

// secretPath decodes the path of a file that holds a secret (key_file,
// secret_file), taken from the config file's directory when relative. A
// value that looks like key material is refused without being shown:
// instead says where such a value belongs.
func (d *decoder) secretPath(n *yaml.Node, field, instead string) (string, bool) {
	path, ok := d.str(n, field)
	if !ok {
		return "", false
	}
	switch {
	case path == "":
		d.errorf(n, field, "empty path")
		return "", false
	case looksLikeKey(path):
		d.errorf(n, field, "the value looks like key material (not shown), not a path: "+
			"%s, or put it in a file of its own and name that file here", instead)
		return "", false
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(d.dir, path)
	}
	return path, true
}

func (d *decoder) encap(n *yaml.Node, field string) (*sa.Encap, bool) {
	m, ok := d.fields(n, field, "type", "sport", "dport")
	if !ok {
		return nil, false
	}
	e := &sa.Encap{SrcPort: 4500, DstPort: 4500}
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

func (d *decoder) lifetime(n *yaml.Node, field string, lt *sa.Lifetime) bool {
	m, ok := d.fields(n, field, "soft_bytes", "hard_bytes", "soft_packets", "hard_packets",
		"soft_add_seconds", "hard_add_seconds")
	if !ok {
		return false
	}
	good := true
	for key, dst := range map[string]*uint64{"soft_bytes": &lt.SoftBytes, "hard_bytes": &lt.HardBytes,
		"soft_packets": &lt.SoftPackets, "hard_packets": &lt.HardPackets} {
		if v := m[key]; v != nil {
			var ok bool
			*dst, ok = d.uint(v, join(field, key), 0, math.MaxUint64)
			good = good && ok
		}
	}
	for key, dst := range map[string]*time.Duration{"soft_add_seconds": &lt.SoftAdd, "hard_add_seconds": &lt.HardAdd} {
		if v := m[key]; v != nil {
			secs, ok := d.uint(v, join(field, key), 0, maxSeconds)
			*dst = time.Duration(secs) * time.Second
			good = good && ok
		}
	}
	return good
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

func (d *decoder) policies(n *yaml.Node, c *Config, ifaces map[uint32]bool) {
	items, ok := d.list(n, "policies")
	if !ok {
		return
	}
	seen := map[sa.Policy]string{}
	for i, it := range items {
		base := index("policies", i)
		m, ok := d.fields(it, base, "dir", "if_id", "src", "dst", "action")
		if !ok {
			continue
		}
		fn := newFieldNodes(base, it)
		before := len(d.errs)
		p := sa.Policy{Action: sa.ActionAllow}
		fn.field(m, "dir", "", func(v *yaml.Node, f string) bool {
			dir, ok := d.oneOf(v, f, "in", "out")
			p.Dir = ParseDir(dir)
			return ok
		})
		fn.field(m, "if_id", "", func(v *yaml.Node, f string) bool {
			id, ok := d.uint(v, f, 1, math.MaxUint32)
			p.IfID = uint32(id)
			return ok
		})
		fn.field(m, "action", "", func(v *yaml.Node, f string) bool {
			a, ok := d.oneOf(v, f, "allow", "block")
			p.Action = ParseAction(a)
			return ok
		})
		fn.field(m, "src", "", func(v *yaml.Node, f string) bool { p.Selector.Src, ok = d.prefix(v, f, false); return ok })
		fn.field(m, "dst", "", func(v *yaml.Node, f string) bool { p.Selector.Dst, ok = d.prefix(v, f, false); return ok })
		checkPolicy(&p, d.report(fn))
		if ifaces != nil && p.IfID != 0 && !ifaces[p.IfID] && !fn.bad["if_id"] {
			d.errorf(fn.nodes["if_id"], join(base, "if_id"), "no interface has if_id %d", p.IfID)
		}
		if len(d.errs) > before {
			continue
		}
		if prev, dup := seen[p]; dup {
			d.errorf(it, base, "same as %s", prev)
			continue
		}
		seen[p] = base
		c.Policies = append(c.Policies, p)
	}
}

// ParseDir returns the direction named "in" or "out", or 0 (sa.ParseDir).
func ParseDir(s string) sa.Dir { d, _ := sa.ParseDir(s); return d }

// ParseMode returns the mode named "tunnel" or "transport", or 0
// (sa.ParseMode).
func ParseMode(s string) sa.Mode { m, _ := sa.ParseMode(s); return m }

// ParseAction returns the action named "allow" or "block", or 0
// (sa.ParseAction).
func ParseAction(s string) sa.Action { a, _ := sa.ParseAction(s); return a }
