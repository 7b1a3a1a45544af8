package stack

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"

	"github.com/sirupsen/logrus"

	"github.com/ipsecd/ipsecd/node"
	"github.com/ipsecd/ipsecd/sa"
	"github.com/ipsecd/ipsecd/underlay"
	"github.com/ipsecd/ipsecd/xfrmif"
)

// defaultName names the netstack's xfrm interface in logs, errors and
// counters when Config.Name is empty.
const defaultName = "netstack"

// ErrInvalidConfig is wrapped by the errors New (and stackfile.New)
// return
// about the Config itself; errors.Is also matches the sa or xfrmif
// error underneath when there is one. Fix the named field.
var ErrInvalidConfig = errors.New("stack: invalid config")

// Config is what a sidecar needs; the types are the daemon's.
type Config struct {
	// Name names the netstack's xfrm interface in logs, errors and
	// counters; empty means "netstack". stackfile.New uses the config
	// file's interface name.
	Name string
	// Underlay is the local UDP address for ESP in UDP (RFC 3948); port 0
	// picks a free one (see UnderlayAddr). An unspecified address also
	// binds the other family, as the daemon does.
	Underlay netip.AddrPort
	// Addresses are the netstack's own addresses: the inner addresses in
	// tunnel mode, the underlay address in transport mode. At least one,
	// unless AddressesLater.
	Addresses []netip.Prefix
	// AddressesLater lets Addresses be empty: the netstack's address
	// comes later through Interface().Reconfigure, as a road warrior's
	// virtual IP does from its gateway (package stackike). Until then
	// nothing can be dialled.
	AddressesLater bool
	// Routes are the destinations routed into the tunnel; empty means
	// everything (0.0.0.0/0 and ::/0).
	Routes []netip.Prefix
	// MTU is the inner MTU; 0 means xfrmif.DefaultMTU.
	MTU int
	// IfID is the if_id of the states and policies; 0 means 1. A state or
	// policy whose IfID is 0 gets this one.
	IfID uint32
	// States and Policies are the SAs and policies, as `ip xfrm state`
	// and `ip xfrm policy` describe them. More can be added later
	// through SAD (make-before-break rekeying).
	States   []sa.Config
	Policies []sa.Policy
	// Log receives the data path's diagnostics and the SAs' lifetime
	// events (logged off the data path, by the node's ticker); nil
	// discards them.
	Log logrus.FieldLogger
	// StateDir keeps, across restarts of the program, how far each
	// static key's sequence numbers went (package seqstate), so that a
	// restart does not seal new packets under nonces already used, nor
	// accept the peer's old packets again. stackfile.New takes it from
	// the file's state_dir. Without a usable StateDir, New refuses AES-GCM
	// and ChaCha20-Poly1305 states unless EphemeralKeys is set.
	StateDir string
	// EphemeralKeys says that the caller makes fresh keys for every run
	// (negotiated, or random and handed to the peer), so no state needs
	// to survive a restart: StateDir is not used.
	EphemeralKeys bool
}

// Net is a userspace network stack whose only way out is ESP: what a
// program dials or listens to through it is sealed and sent over the
// underlay, and what arrives there is opened and delivered to it. Its
// methods are safe for concurrent use.
//
// It is a netstack link over a node (package node), the composition root
// the daemon uses too: the node owns the SAD, the underlay, the data
// path, the lifetime ticker, the key-use memory and the state directory.
type Net struct {
	core     *node.Node
	conn     *underlay.Conn
	link     *link
	ifc      *xfrmif.Interface
	underlay netip.AddrPort

	closeOnce sync.Once
	closeErr  error
}

// The owners of a Net's SAs in its node: those of Config.States, and
// those of AddState.
const (
	ownerConfig   node.Owner = "stack.Config"
	ownerAddState node.Owner = "stack.AddState"
)

// New brings a netstack up over ESP: it checks cfg, binds the underlay
// socket and starts the daemon's data path (one send worker, one receive
// worker per underlay socket). A bad Config is refused with an error
// naming the field, wrapping ErrInvalidConfig; on any error nothing is
// left running or bound.
func New(cfg Config) (_ *Net, err error) {
	cfg, states, err := prepare(cfg)
	if err != nil {
		return nil, err
	}
	// One key twice among States is refused here, with the names the
	// caller gave; keys of earlier runs are the state directory's.
	keys := sa.KeyOwners{}
	for i := range states {
		if f, prev, used := keys.Conflict(&states[i]); used {
			return nil, keyReuse(fmt.Sprintf("States[%d].%s", i, f), prev)
		}
		keys.Add(&states[i], fmt.Sprintf("States[%d]", i))
	}
	core, err := node.New(node.Config{
		Underlay:      underlay.Config{UDP: cfg.Underlay},
		StateDir:      cfg.StateDir,
		EphemeralKeys: cfg.EphemeralKeys,
		Log:           cfg.Log,
	})
	if err != nil {
		return nil, fmt.Errorf("stack: %w", err)
	}
	defer func() {
		if err != nil {
			core.Close() // empties the SAD: the SAs' keys are zeroed
		}
	}()
	n := &Net{core: core}
	b, err := core.BuildStates(ownerConfig, states)
	if err != nil {
		return nil, stateError(err)
	}
	if _, err := core.Sync(b, cfg.Policies); err != nil {
		return nil, fmt.Errorf("%w: States/Policies: %w", ErrInvalidConfig, err)
	}
	lk, err := newLink(cfg.MTU)
	if err != nil {
		return nil, err
	}
	n.link = lk
	ifc, err := xfrmif.NewInterface(interfaceConfig(cfg), lk) // owns lk, also on error
	if err != nil {
		return nil, fmt.Errorf("stack: %w", err)
	}
	n.ifc = ifc
	if err := core.AddInterface(ifc); err != nil { // owns ifc, also on error
		return nil, fmt.Errorf("stack: %w", err)
	}
	if err := core.Start(); err != nil {
		return nil, fmt.Errorf("stack: Underlay %v: %w", cfg.Underlay, err)
	}
	n.conn = core.Underlay()
	n.underlay = netip.AddrPortFrom(cfg.Underlay.Addr(), n.conn.Port())
	return n, nil
}

// stateError is the error of the node's BuildStates for New's States:
// the first refused state, named as the caller named it.
func stateError(err error) error {
	var fes node.FieldErrors
	if !errors.As(err, &fes) || len(fes) == 0 {
		return fmt.Errorf("%w: States: %w", ErrInvalidConfig, err)
	}
	fe := fes[0]
	field := fmt.Sprintf("States[%d]", fe.Index)
	if fe.Field != "" {
		field += "." + goNames.Replace(fe.Field)
	}
	if fe.Err != nil {
		msg := fe.Err.Error()
		if strings.Contains(msg, "state_dir") {
			msg += " (a caller that makes fresh keys for every run sets EphemeralKeys)"
			return fmt.Errorf("%w: %s: %s: %w", ErrInvalidConfig, field, msg, fe.Err)
		}
		return fmt.Errorf("%w: %s: %w", ErrInvalidConfig, field, fe.Err)
	}
	return fmt.Errorf("%w: %s: %s", ErrInvalidConfig, field, goNames.Replace(fe.Msg))
}

// goNames turns the config file's field names into sa.Config's.
var goNames = strings.NewReplacer("aead.key", "AEAD.Key", "enc.key", "Enc.Key", "auth.key", "Auth.Key", "encap", "Encap")

// prepare checks cfg, fills in its defaults and returns the states with
// their if_id set.
func prepare(cfg Config) (Config, []sa.Config, error) {
	bad := func(field, format string, args ...any) (Config, []sa.Config, error) {
		return cfg, nil, fmt.Errorf("%w: %s: %s", ErrInvalidConfig, field, fmt.Sprintf(format, args...))
	}
	if !cfg.Underlay.IsValid() {
		return bad("Underlay", "not set: want a local ip:port (port 0 picks a free one)")
	}
	if cfg.Underlay.Addr().Is4In6() {
		return bad("Underlay", "%v is IPv4-mapped: write it as IPv4", cfg.Underlay)
	}
	if len(cfg.Addresses) == 0 && !cfg.AddressesLater {
		return bad("Addresses", "empty: the netstack needs an address of its own")
	}
	for i, p := range cfg.Addresses {
		if !p.IsValid() || p.Addr().Is4In6() || p.Addr().Zone() != "" {
			return bad(fmt.Sprintf("Addresses[%d]", i), "not an IPv4 or IPv6 prefix (%v)", p)
		}
	}
	for i, p := range cfg.Routes {
		if !p.IsValid() || p.Addr().Is4In6() || p.Addr().Zone() != "" {
			return bad(fmt.Sprintf("Routes[%d]", i), "not an IPv4 or IPv6 prefix (%v)", p)
		}
	}
	if cfg.IfID == 0 {
		cfg.IfID = 1
	}
	if cfg.Name == "" {
		cfg.Name = defaultName
	}
	if cfg.MTU == 0 {
		cfg.MTU = xfrmif.DefaultMTU
	}
	if len(cfg.Routes) == 0 {
		cfg.Routes = []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}
	}
	if err := interfaceConfig(cfg).Validate(); err != nil {
		return cfg, nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	states := make([]sa.Config, len(cfg.States))
	for i, st := range cfg.States {
		switch st.IfID {
		case 0:
			st.IfID = cfg.IfID
		case cfg.IfID:
		default:
			return bad(fmt.Sprintf("States[%d].IfID", i), "%d, but the netstack's IfID is %d", st.IfID, cfg.IfID)
		}
		if st.Encap == nil {
			return bad(fmt.Sprintf("States[%d].Encap", i), "raw ESP is not supported by the netstack: set ESP in UDP")
		}
		states[i] = st
	}
	policies := make([]sa.Policy, len(cfg.Policies))
	for i, p := range cfg.Policies {
		switch p.IfID {
		case 0:
			p.IfID = cfg.IfID
		case cfg.IfID:
		default:
			return bad(fmt.Sprintf("Policies[%d].IfID", i), "%d, but the netstack's IfID is %d", p.IfID, cfg.IfID)
		}
		policies[i] = p
	}
	cfg.Policies = policies
	return cfg, states, nil
}

// interfaceConfig is the xfrm interface of a prepared Config. The routes
// of the addresses' own subnets are added, as the kernel adds them for a
// TUN's addresses, so peers in the same subnet are reached through ESP.
func interfaceConfig(cfg Config) xfrmif.Config {
	routes := append([]netip.Prefix(nil), cfg.Routes...)
	for _, p := range cfg.Addresses {
		if m := p.Masked(); m.Bits() < m.Addr().BitLen() && !containsPrefix(routes, m) {
			routes = append(routes, m)
		}
	}
	return xfrmif.Config{Name: cfg.Name, IfID: cfg.IfID, MTU: cfg.MTU, Addresses: cfg.Addresses, Routes: routes, Queues: 1}
}

func containsPrefix(ps []netip.Prefix, p netip.Prefix) bool {
	for _, q := range ps {
		if q.Masked() == p {
			return true
		}
	}
	return false
}

// UnderlayAddr returns the bound underlay address, its port resolved when
// Config.Underlay had port 0.
func (n *Net) UnderlayAddr() netip.AddrPort { return n.underlay }

// SAD returns the security association database, to read SAs, policies
// and counters, and to delete SAs (a deleted SA's key stays used). Add
// SAs with AddState, which refuses a key that an earlier SA had and
// resumes the key's sequence numbers from the state directory; an SA made
// with sa.New(cfg, n.Counters()) and added here directly skips both (and
// starts at 1 after every restart).
func (n *Net) SAD() *sa.SAD { return n.core.SAD() }

// Node returns the node the netstack runs on: its SAD, underlay socket
// and the hooks where a control plane attaches (SetNonESPHandler for IKE
// on the ESP-in-UDP port, SetAcquireHandler, InstallChild). Package
// stack/stackike runs IKEv2 on it; a program adds static SAs through
// AddState instead. The node is the Net's: Close closes it.
func (n *Net) Node() *node.Node { return n.core }

// Counters returns the global xfrm counters (/proc/net/xfrm_stat names).
func (n *Net) Counters() *sa.Counters { return n.core.Counters() }

// AddState makes an SA from cfg and adds it to the SAD (make-before-break
// rekeying: add the new inbound SA before the outbound one changes). An
// IfID of 0 is the netstack's. A key that an SA of New or AddState had,
// running or deleted, of either direction, is refused with
// ErrInvalidConfig. The SA continues its key's sequence numbers from
// StateDir; without one, an AES-GCM or ChaCha20-Poly1305 key is refused
// unless the Net was made with EphemeralKeys. cfg's key bytes stay the
// caller's (the SA keeps a copy of its own).
func (n *Net) AddState(cfg sa.Config) error {
	if cfg.IfID == 0 {
		cfg.IfID = n.ifc.IfID()
	}
	// The node zeroes the keys it is given; the caller may still use
	// its own (one key both as an SA here and as the peer's).
	for _, a := range []**sa.Algorithm{&cfg.AEAD, &cfg.Enc, &cfg.Auth} {
		if *a != nil {
			c := **a
			c.Key = bytes.Clone(c.Key)
			*a = &c
		}
	}
	err := n.core.AddState(ownerAddState, cfg)
	if ku := (*node.KeyUsedError)(nil); errors.As(err, &ku) {
		return keyReuse(ku.Field, ku.Prev)
	}
	if errors.Is(err, node.ErrInvalid) {
		msg := strings.TrimPrefix(err.Error(), node.ErrInvalid.Error()+": ")
		return &invalidError{ErrInvalidConfig.Error() + ": " + goNames.Replace(msg), err}
	}
	if err != nil {
		return fmt.Errorf("stack: %w", err)
	}
	return nil
}

// invalidError is a node's refusal as the netstack words it: it
// matches ErrInvalidConfig and what the node's error matches.
type invalidError struct {
	msg string
	err error
}

func (e *invalidError) Error() string   { return e.msg }
func (e *invalidError) Unwrap() []error { return []error{ErrInvalidConfig, e.err} }

// keyReuse is the error for a key (in field, as sa.Config names it) that
// prev holds or held. Each SA needs keys of its own, whatever its
// direction: every SA starts its sequence numbers at 1, and AES-GCM and
// ChaCha20-Poly1305 take their nonces from them (see sa.KeyUse).
func keyReuse(field string, prev sa.KeyOwner) error {
	return fmt.Errorf("%w: %s: the same key as %s: each SA needs keys of its own, in either direction, or the "+
		"second starts its sequence numbers, which AES-GCM and ChaCha20-Poly1305 take as nonces, at 1 again",
		ErrInvalidConfig, goNames.Replace(field), goNames.Replace(prev.String()))
}

// Interface returns the netstack's xfrm interface, for its counters
// (Stats) and configuration.
func (n *Net) Interface() *xfrmif.Interface { return n.ifc }

// Close closes every connection and listener of the netstack, stops its
// goroutines, closes the underlay socket and empties the SAD, which zeroes
// the SAs' keys. It waits for the workers up to 5 s and is idempotent.
func (n *Net) Close() error {
	n.closeOnce.Do(func() {
		if err := n.core.Close(); err != nil {
			n.closeErr = fmt.Errorf("stack: %w", err)
		}
	})
	return n.closeErr
}
