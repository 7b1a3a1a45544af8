package config

import (
	"fmt"
	"math"
	"net/netip"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/ipsecd/ipsecd/internal/hint"
	"github.com/ipsecd/ipsecd/internal/keytext"
)

// decoder walks yaml.v3 nodes and collects every error with its line.
type decoder struct {
	file string
	dir  string // for relative key_file paths
	errs ErrorList
	// warnings: key files that group or others can read, once each.
	warnings []string
	// inlineKeys: the file itself holds a key (key:, not key_file:).
	inlineKeys bool
	// mem: files given in memory by path (ParseMem), read instead of
	// the file system: vici's certificates and keys.
	mem map[string][]byte
	// externalPools: a connection's pools may name a pool that pools:
	// lacks, one that vici loads (load-pool): the file has vici:, or the
	// document is vici's own (ParseMem). IKEConfig.AddPools adds them.
	externalPools bool
}

// read reads path from mem or, when mem has none, the file system with
// the bounded reader; fi is nil for a file of mem.
func (d *decoder) read(path string, limit int64, what string) ([]byte, os.FileInfo, error) {
	if b, ok := d.mem[path]; ok {
		if int64(len(b)) > limit {
			return nil, nil, fmt.Errorf("%s: %s of %d bytes; at most %d", path, what, len(b), limit)
		}
		return slices.Clone(b), nil, nil
	}
	return readRegular(path, limit, what)
}

// errorf records an error. The messages are built not to hold values of
// fields that may hold keys; as a last guard, a run of hex digits as long
// as a key's is cut out of the message and the field (hideKeys).
func (d *decoder) errorf(n *yaml.Node, field, format string, args ...any) {
	line := 0
	if n != nil {
		line = n.Line
	}
	d.errs = append(d.errs, &Error{File: d.file, Line: line, Field: hideKeys(field), Msg: hideKeys(fmt.Sprintf(format, args...))})
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// yamlQuoted is what yaml.v3 quotes of the file in its messages (an
// anchor's name: 'name'; a value: `value`), which may be a pasted key.
var yamlQuoted = regexp.MustCompile("'[^']*'|`[^`]*`")

// syntaxError turns a yaml.v3 error into an Error with the line it names,
// without what the message quotes of the file.
func (d *decoder) syntaxError(err error) {
	msg := err.Error()
	line := 0
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = "yaml: " + m[2]
	}
	msg = strings.Join(strings.Fields(yamlQuoted.ReplaceAllString(msg, "")), " ")
	d.errs = append(d.errs, &Error{File: d.file, Line: line, Msg: hideKeys(msg)})
}

var hexRun = regexp.MustCompile(fmt.Sprintf("[0-9a-fA-F]{%d,}", keytext.HexDigits))

// hideKeys replaces every run of hex digits that looksLikeKey in s.
func hideKeys(s string) string {
	if !keytext.LooksLikeKey(s) {
		return s
	}
	return hexRun.ReplaceAllString(s, "(hex not shown)")
}

// notShown stands for a value that looks like key material.
const notShown = "a value that looks like key material (not shown)"

func join(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + "." + key
}

func index(parent string, i int) string { return fmt.Sprintf("%s[%d]", parent, i) }

// isNull reports whether n is absent or an explicit null (`key:`, `key: ~`),
// which every field treats as absent.
func isNull(n *yaml.Node) bool {
	return n == nil || (n.Kind == yaml.ScalarNode && n.Tag == "!!null")
}

// describe names what n is, for "want X, got Y" messages. Scalars are
// quoted, unless they look like key material; a caller decoding a field
// that may hold a key must use describeKind.
func describe(n *yaml.Node) string {
	if n.Kind == yaml.ScalarNode && keytext.LooksLikeKey(n.Value) {
		return notShown
	}
	return describeNode(n)
}

// describeKind is describe without the value of a scalar.
func describeKind(n *yaml.Node) string {
	if n.Kind == yaml.ScalarNode {
		return "a value"
	}
	return describeNode(n)
}

func describeNode(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	case yaml.ScalarNode:
		return strconv.Quote(n.Value)
	}
	return "nothing"
}

// fields checks that n is a mapping with only the known keys, each at most
// once, and returns its values by key. Null values are left out. ok is
// false when n is not a mapping.
func (d *decoder) fields(n *yaml.Node, field string, known ...string) (m map[string]*yaml.Node, ok bool) {
	if n.Kind != yaml.MappingNode {
		d.errorf(n, field, "want a mapping, got %s", describe(n))
		return nil, false
	}
	m = make(map[string]*yaml.Node, len(n.Content)/2)
	seen := make(map[string]int, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			d.errorf(k, field, "want a plain key, got %s", describe(k))
			continue
		}
		name := k.Value
		if keytext.LooksLikeKey(name) {
			// A key pasted without its "key:", as in {name: X, 0x...}.
			d.errorf(k, field, "unknown field: %s; want %s", notShown, hint.OrList(known))
			continue
		}
		if prev, dup := seen[name]; dup {
			d.errorf(k, join(field, name), "given twice (first at line %d)", prev)
			continue
		}
		seen[name] = k.Line
		if !containsString(known, name) {
			if s := hint.Closest(name, known); s != "" {
				d.errorf(k, join(field, name), "unknown field; did you mean %s?", s)
			} else {
				d.errorf(k, join(field, name), "unknown field; want %s", hint.OrList(known))
			}
			continue
		}
		if v.Kind == yaml.AliasNode {
			d.errorf(v, join(field, name), "YAML aliases are not supported")
			continue
		}
		if isNull(v) {
			continue
		}
		m[name] = v
	}
	return m, true
}

// list checks that n is a sequence and returns its items.
func (d *decoder) list(n *yaml.Node, field string) ([]*yaml.Node, bool) {
	if n.Kind != yaml.SequenceNode {
		d.errorf(n, field, "want a list, got %s", describe(n))
		return nil, false
	}
	for i, it := range n.Content {
		if it.Kind == yaml.AliasNode {
			d.errorf(it, index(field, i), "YAML aliases are not supported")
			return nil, false
		}
	}
	return n.Content, true
}

func (d *decoder) scalar(n *yaml.Node, field, want string) (string, bool) {
	if n.Kind != yaml.ScalarNode {
		d.errorf(n, field, "want %s, got %s", want, describe(n))
		return "", false
	}
	return n.Value, true
}

func (d *decoder) str(n *yaml.Node, field string) (string, bool) {
	return d.scalar(n, field, "a string")
}

// uint decodes a non-negative integer in decimal or with a 0x, 0o or 0b
// prefix, between lo and hi.
func (d *decoder) uint(n *yaml.Node, field string, lo, hi uint64) (uint64, bool) {
	s, ok := d.scalar(n, field, "an integer")
	if !ok {
		return 0, false
	}
	if keytext.LooksLikeKey(s) {
		d.errorf(n, field, "want an integer (%s), got %s", rangeString(lo, hi), notShown)
		return 0, false
	}
	v, err := strconv.ParseUint(s, 0, 64)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			d.errorf(n, field, "%s is out of range; want %s", s, rangeString(lo, hi))
		} else {
			d.errorf(n, field, "want an integer, got %s", describe(n))
		}
		return 0, false
	}
	if v < lo || v > hi {
		d.errorf(n, field, "%s is out of range; want %s", s, rangeString(lo, hi))
		return 0, false
	}
	return v, true
}

func rangeString(lo, hi uint64) string {
	if hi > 0xffff {
		return fmt.Sprintf("%#x..%#x", lo, hi)
	}
	return fmt.Sprintf("%d..%d", lo, hi)
}

func (d *decoder) uint32(n *yaml.Node, field string) (uint32, bool) {
	v, ok := d.uint(n, field, 0, math.MaxUint32)
	return uint32(v), ok
}

func (d *decoder) bool(n *yaml.Node, field string) (bool, bool) {
	s, ok := d.scalar(n, field, "true or false")
	if !ok {
		return false, false
	}
	switch strings.ToLower(s) {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	d.errorf(n, field, "want true or false, got %s", describe(n))
	return false, false
}

// oneOf decodes a string that must be one of choices.
func (d *decoder) oneOf(n *yaml.Node, field string, choices ...string) (string, bool) {
	s, ok := d.scalar(n, field, hint.OrList(choices))
	if !ok {
		return "", false
	}
	if !containsString(choices, s) {
		d.errorf(n, field, "want %s, got %s", hint.OrList(choices), describe(n))
		return "", false
	}
	return s, true
}

// oneOfTyped is oneOf for a string type's constants.
func oneOfTyped[T ~string](d *decoder, n *yaml.Node, field string, choices ...T) (T, bool) {
	ss := make([]string, len(choices))
	for i, c := range choices {
		ss[i] = string(c)
	}
	s, ok := d.oneOf(n, field, ss...)
	return T(s), ok
}

func (d *decoder) addr(n *yaml.Node, field string) (netip.Addr, bool) {
	s, ok := d.scalar(n, field, "an IP address")
	if !ok {
		return netip.Addr{}, false
	}
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		d.errorf(n, field, "want an IP address, got %s", describe(n))
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

// prefix decodes a CIDR prefix. With host, the address keeps its host bits
// (an interface address); otherwise a bare address is taken as a /32 or
// /128, and host bits are left for the checks to report.
func (d *decoder) prefix(n *yaml.Node, field string, host bool) (netip.Prefix, bool) {
	want := "a CIDR prefix (10.0.0.0/24)"
	if host {
		want = "an address with prefix length (10.0.0.1/24)"
	}
	s, ok := d.scalar(n, field, want)
	if !ok {
		return netip.Prefix{}, false
	}
	p, err := netip.ParsePrefix(s)
	if err != nil && !host {
		if a, aerr := netip.ParseAddr(s); aerr == nil && a.Zone() == "" {
			a = a.Unmap()
			return netip.PrefixFrom(a, a.BitLen()), true
		}
	}
	if err != nil {
		d.errorf(n, field, "want %s, got %s", want, describe(n))
		return netip.Prefix{}, false
	}
	if p.Addr().Is4In6() {
		p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		if p.Bits() < 0 {
			d.errorf(n, field, "want %s, got %s", want, describe(n))
			return netip.Prefix{}, false
		}
	}
	return p, true
}

func (d *decoder) prefixes(n *yaml.Node, field string, host bool) []netip.Prefix {
	items, ok := d.list(n, field)
	if !ok {
		return nil
	}
	var ps []netip.Prefix
	for i, it := range items {
		if p, ok := d.prefix(it, index(field, i), host); ok {
			ps = append(ps, p)
		}
	}
	return ps
}

func containsString(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
