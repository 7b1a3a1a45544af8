package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sirupsen/logrus"
	"go.yaml.in/yaml/v3"
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

// ParseMem is Parse with files given in memory: a cert:, key: or
// cacerts: path that mem holds (as the path the file would have) is
// read from it, with the same checks as a file's. Package vici's
// certificates and keys come so, and its connections may name pools
// the document lacks (vici's: the caller checks and adds them with
// IKEConfig.AddPools). mem is left as it is.
func ParseMem(name string, data []byte, mem map[string][]byte) (*Config, error) {
	cfg, _, err := parseWith(name, data, mem, true)
	return cfg, err
}

// parse is Parse, with the decoder for what Load adds.
func parse(name string, data []byte) (cfg *Config, d *decoder, err error) {
	return parseWith(name, data, nil, false)
}

func parseWith(name string, data []byte, mem map[string][]byte, externalPools bool) (cfg *Config, d *decoder, err error) {
	d = &decoder{file: name, dir: filepath.Dir(name), mem: mem, externalPools: externalPools}
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
	m, ok := d.fields(n, "", "log", "control", "vici", "metrics", "pprof", "state_dir", "underlay", "fail_closed", "interfaces", "states", "policies", "ike", "connections", "secrets", "pools", "eap_radius")
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
	if v := m["vici"]; v != nil {
		if s, ok := d.str(v, "vici"); ok && s != "" {
			switch {
			case len(s) > maxUnixPath:
				d.errorf(v, "vici", "%d bytes long; a unix socket path has at most %d", len(s), maxUnixPath)
			case filepath.Clean(s) == filepath.Clean(c.Control):
				d.errorf(v, "vici", "%s is the control socket's path; vici needs a socket of its own", s)
			default:
				c.Vici = s
				d.externalPools = true // vici may load the pools a connection names
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
	if d.errs == nil {
		d.roadWarriorRoutes(c) // routes.go
	}
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
