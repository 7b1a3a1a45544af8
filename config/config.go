package config

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/ipsecd/ipsecd/sa"
	"github.com/ipsecd/ipsecd/xfrmif"
)

// Defaults of the keys a config file may leave out.
const (
	DefaultControl = "/run/ipsecd/ipsecd.sock"
	// DefaultStateDir keeps the sequence reservations of static keys
	// (package seqstate).
	DefaultStateDir   = "/var/lib/ipsecd"
	DefaultLogLevel   = "info"
	DefaultLogFmt     = "text"
	DefaultMTU        = 1400
	DefaultQueues     = 1
	DefaultTxQueueLen = xfrmif.DefaultTxQueueLen // the interface's limits are xfrmif's
	MaxTxQueueLen     = xfrmif.MaxTxQueueLen
	MaxQueues         = 64
	MinMTU            = xfrmif.MinMTU  // the interface's limits are xfrmif's
	MinMTU6           = xfrmif.MinMTU6 // (with IPv6 addresses or routes)
	MaxMTU            = xfrmif.MaxMTU
)

// DefaultUDP is the underlay's ESP-in-UDP address when the file names none.
var DefaultUDP = netip.MustParseAddrPort("0.0.0.0:4500")

// Config is a parsed and validated config file. Parse returns it with every
// default filled in. It holds keys: print it with String or Redacted, never
// with its fields.
type Config struct {
	File    string // the name it was parsed from
	Log     Log
	Control string // unix socket path of the control socket
	// Vici is the unix socket path where strongSwan's vici protocol is
	// served (package vici); "" (the default) serves none.
	Vici    string
	Metrics string // host:port of the Prometheus listener; "" disables it
	Pprof   bool   // also serve Go's profiler at /debug/pprof/ on the Metrics listener
	// StateDir is the directory of the static keys' sequence
	// reservations and replay tops (package seqstate); a relative path
	// in the file is taken from the file's directory.
	StateDir   string
	Underlay   Underlay
	FailClosed FailClosed
	Interfaces []Interface
	States     []State
	Policies   []sa.Policy
	IKEConfig  // ike:, connections:, secrets: (ike.go)
	// Warnings are problems that do not refuse the file: the file itself
	// when it holds keys, or a key_file, that group or others can read.
	// Each names the file and its mode. `ipsecd check` prints them and
	// `ipsecd run` logs them; they never hold key material.
	Warnings []string
}

// Log configures logrus.
type Log struct {
	Level  string // a logrus level: panic, fatal, error, warn, info, debug, trace
	Format string // text or json
}

// Underlay configures the outer (ESP) sockets.
type Underlay struct {
	UDP    netip.AddrPort // ESP in UDP (RFC 3948)
	RawESP bool           // also IP protocol 50
	Mark   uint32         // SO_MARK on the underlay sockets
}

// FailClosed configures the guard routes that keep the interfaces'
// prefixes off every other route once the daemon is gone (tun.Guard).
type FailClosed struct {
	// KeepOnStop leaves the guards in the kernel on a clean stop (SIGTERM,
	// SIGINT), for hosts that must never route those prefixes in clear;
	// by default a clean stop removes them. A crash always leaves them.
	KeepOnStop bool
}

// Interface is one xfrm interface.
type Interface struct {
	Name       string
	IfID       uint32
	MTU        int
	Addresses  []netip.Prefix // the interface's own addresses, with prefix length
	Routes     []netip.Prefix // routed into the interface; masked
	Queues     int            // TUN queues, each with a worker
	Table      uint32         // routing table of Routes (and their guards); 0 is main
	TxQueueLen int            // the TUN's transmit queue, in packets
	// RulePriority is the priority of the routing rule the daemon adds
	// to reach Table (rule_priority); 0: none, the operator's own.
	RulePriority uint32
	Line         int // where it is in the file
}

// State is one SA of the file. The embedded sa.Config is what sa.New takes.
type State struct {
	sa.Config
	Line int // where it is in the file
}

// String describes s without its keys.
func (s State) String() string { return FormatState(&s.Config) }

// GoString is String, so that %#v does not print keys either.
func (s State) GoString() string { return s.String() }

// Load reads and parses the config file at path: a regular file of at
// most MaxConfigFile bytes. Relative key_file paths are taken from path's
// directory. When the file holds keys itself and group or others can
// read it, the first of the Warnings says so; so do warnings for a file
// that others could change (exposedKeys). The bytes read are zeroed once
// parsed.
func Load(path string) (*Config, error) {
	data, fi, err := readRegular(path, MaxConfigFile, "a config file")
	defer clear(data)
	if err != nil {
		return nil, ErrorList{{File: path, Msg: err.Error()}}
	}
	c, d, err := parse(path, data)
	if err != nil {
		return nil, err
	}
	c.Warnings = append(exposedKeys(path, fi, true, d.inlineKeys), c.Warnings...)
	return c, nil
}

// WipeKeys zeroes the key bytes of every state of c (the sa.SAs made from
// them hold copies of their own). The daemon calls it when c is no longer
// the running config. A nil c is fine.
func (c *Config) WipeKeys() {
	if c == nil {
		return
	}
	for i := range c.States {
		c.States[i].ClearKeys()
	}
	c.IKEConfig.wipe()
}

// Summary is the one-line summary `ipsecd check` prints: "N interfaces,
// M states, K policies".
func (c *Config) Summary() string {
	return fmt.Sprintf("%d interfaces, %d states, %d policies", len(c.Interfaces), len(c.States), len(c.Policies)) + c.IKEConfig.summary()
}

// Redacted returns a deep copy of c with every key removed (nil), safe to
// print or log.
func (c *Config) Redacted() *Config {
	r := *c
	r.Interfaces = append([]Interface(nil), c.Interfaces...)
	r.Policies = append([]sa.Policy(nil), c.Policies...)
	r.IKEConfig = c.IKEConfig.redacted()
	r.States = make([]State, len(c.States))
	for i, s := range c.States {
		s.Config = s.Config.Redacted()
		r.States[i] = s
	}
	return &r
}

// String renders c in the shape of the config file, without keys.
func (c *Config) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "log: {level: %s, format: %s}\n", c.Log.Level, c.Log.Format)
	fmt.Fprintf(&b, "control: %s\n", c.Control)
	if c.Vici != "" {
		fmt.Fprintf(&b, "vici: %s\n", c.Vici)
	}
	fmt.Fprintf(&b, "state_dir: %s\n", c.StateDir)
	if c.Metrics != "" {
		fmt.Fprintf(&b, "metrics: %s\n", c.Metrics)
	}
	if c.Pprof {
		b.WriteString("pprof: true\n")
	}
	fmt.Fprintf(&b, "underlay: {udp: %s, raw_esp: %t, mark: %#x}\n", c.Underlay.UDP, c.Underlay.RawESP, c.Underlay.Mark)
	fmt.Fprintf(&b, "fail_closed: {keep_on_stop: %t}\n", c.FailClosed.KeepOnStop)
	for _, ifc := range c.Interfaces {
		fmt.Fprintf(&b, "interface %s if_id %d mtu %d queues %d txqueuelen %d addresses %v routes %v",
			ifc.Name, ifc.IfID, ifc.MTU, ifc.Queues, ifc.TxQueueLen, ifc.Addresses, ifc.Routes)
		if ifc.Table != 0 {
			fmt.Fprintf(&b, " table %d", ifc.Table)
		}
		if ifc.RulePriority != 0 {
			fmt.Fprintf(&b, " rule_priority %d", ifc.RulePriority)
		}
		b.WriteString("\n")
	}
	for _, s := range c.States {
		fmt.Fprintf(&b, "state %s\n", FormatState(&s.Config))
	}
	for _, p := range c.Policies {
		fmt.Fprintf(&b, "policy %s\n", FormatPolicy(&p))
	}
	b.WriteString(c.IKEConfig.String())
	return b.String()
}

// GoString is String, so that %#v does not print keys either.
func (c *Config) GoString() string { return c.String() }

// FormatState describes an SA on one line in ip xfrm words, without keys.
func FormatState(c *sa.Config) string {
	var b strings.Builder
	fmt.Fprintf(&b, "src %s dst %s spi %#x dir %s mode %s if_id %d", c.Src, c.Dst, c.SPI, c.Dir, c.Mode, c.IfID)
	if c.AEAD != nil {
		fmt.Fprintf(&b, " aead %s %d", c.AEAD.Name, c.AEAD.Bits)
	}
	if c.Enc != nil {
		fmt.Fprintf(&b, " enc %s", c.Enc.Name)
	}
	if c.Auth != nil {
		fmt.Fprintf(&b, " auth-trunc %s %d", c.Auth.Name, c.Auth.Bits)
	}
	if c.Encap != nil {
		fmt.Fprintf(&b, " encap espinudp %d %d", c.Encap.SrcPort, c.Encap.DstPort)
	}
	fmt.Fprintf(&b, " replay-window %d", c.ReplayWindow)
	if c.ESN {
		b.WriteString(" flag esn")
	}
	if !c.Selector.MatchesAll() {
		fmt.Fprintf(&b, " sel %v", c.Selector)
	}
	return b.String()
}

// FormatPolicy describes a policy on one line in ip xfrm words.
func FormatPolicy(p *sa.Policy) string {
	return fmt.Sprintf("src %s dst %s dir %s if_id %d action %s",
		prefixOrAny(p.Selector.Src), prefixOrAny(p.Selector.Dst), p.Dir, p.IfID, p.Action)
}

func prefixOrAny(p netip.Prefix) string {
	if !p.IsValid() {
		return "any"
	}
	return p.String()
}
