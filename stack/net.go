package stack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/datapath"
	"github.com/ipsecd/ipsecd/sa"
	"github.com/ipsecd/ipsecd/seqstate"
	"github.com/ipsecd/ipsecd/underlay"
	"github.com/ipsecd/ipsecd/xfrmif"
)

// defaultName names the netstack's xfrm interface in logs, errors and
// counters when Config.Name is empty.
const defaultName = "netstack"

// ErrInvalidConfig is wrapped by the errors New and FromConfig return
// about the Config itself; errors.Is also matches the sa or xfrmif
// error underneath when there is one. Fix the named field.
var ErrInvalidConfig = errors.New("stack: invalid config")

// Config is what a sidecar needs; the types are the daemon's.
type Config struct {
	// Name names the netstack's xfrm interface in logs, errors and
	// counters; empty means "netstack". FromConfig uses the config
	// file's interface name.
	Name string
	// Underlay is the local UDP address for ESP in UDP (RFC 3948); port 0
	// picks a free one (see UnderlayAddr). An unspecified address also
	// binds the other family, as the daemon does.
	Underlay netip.AddrPort
	// Addresses are the netstack's own addresses: the inner addresses in
	// tunnel mode, the underlay address in transport mode. At least one.
	Addresses []netip.Prefix
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
	// Log receives the data path's diagnostics; nil discards them.
	Log *logrus.Entry
	// StateDir keeps, across restarts of the program, how far each
	// static key's sequence numbers went (package seqstate), so that a
	// restart does not seal new packets under nonces already used, nor
	// accept the peer's old packets again. FromConfig takes it from the
	// file's state_dir. Without a usable StateDir, New refuses AES-GCM
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
type Net struct {
	counters *sa.Counters
	sad      *sa.SAD
	conn     *underlay.Conn
	link     *link
	ifc      *xfrmif.Interface
	reg      *xfrmif.Registry
	engine   *datapath.Engine
	underlay netip.AddrPort
	// seq is the state directory; nil with EphemeralKeys or when it
	// cannot be used (seqErr, stateDir: then AEAD states are refused).
	seq      *seqstate.Dir
	seqErr   error
	stateDir string
	log      *logrus.Entry

	cancel context.CancelFunc
	ticker sync.WaitGroup

	keysMu sync.Mutex
	// keysMu guards: keys, the keys of every SA that New or AddState
	// installed, running or not (see claimKeys).
	keys config.KeyOwners

	closeOnce sync.Once
	closeErr  error
}

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
	n := &Net{counters: &sa.Counters{}, reg: &xfrmif.Registry{}, keys: config.KeyOwners{}}
	for i := range states {
		if err := n.claimKeys(&states[i], fmt.Sprintf("States[%d]", i)); err != nil {
			return nil, err
		}
	}
	defer func() {
		if err != nil && n.seq != nil {
			n.seq.Close() // for another Net, or a later run
		}
	}()
	n.sad = sa.NewSAD(n.counters)
	log := cfg.Log
	if log == nil {
		l := logrus.New()
		l.SetOutput(io.Discard)
		log = logrus.NewEntry(l)
	}
	n.sad.SetEventHandler(func(ev sa.Event) {
		log.WithFields(logrus.Fields{"sa": ev.SA.String(), "reason": ev.Reason}).Warnf("SA %s lifetime expired", ev.Kind)
	})
	n.log = log
	if !cfg.EphemeralKeys {
		n.stateDir = cfg.StateDir
		if n.seq, n.seqErr = seqstate.Open(cfg.StateDir); n.seqErr != nil {
			log.WithError(n.seqErr).Warn("StateDir cannot be used: CBC and NULL states run, but after a restart " +
				"their sequence numbers start again at 1 and their replay windows forget the old packets")
		}
	}
	built := make([]*sa.SA, 0, len(states))
	discard := func() { // zero the keys of SAs that will not run
		for _, s := range built {
			s.Discard()
		}
	}
	for i, st := range states {
		s, err := n.newSA(st)
		if err != nil {
			discard()
			return nil, fmt.Errorf("%w: States[%d]: %w", ErrInvalidConfig, i, err)
		}
		built = append(built, s)
	}
	if err := n.sad.Replace(built, cfg.Policies); err != nil {
		discard()
		return nil, fmt.Errorf("%w: States/Policies: %w", ErrInvalidConfig, err)
	}
	// From here on the SAs are in the SAD: emptying it zeroes their keys.
	empty := func() { n.sad.Replace(nil, nil) }

	n.conn, err = underlay.Open(underlay.Config{UDP: cfg.Underlay}, log.WithField("part", "underlay").Debugf)
	if err != nil {
		empty()
		return nil, fmt.Errorf("stack: Underlay %v: %w", cfg.Underlay, err)
	}
	n.underlay = netip.AddrPortFrom(cfg.Underlay.Addr(), n.conn.Port())

	lk, err := newLink(cfg.MTU)
	if err != nil {
		n.conn.Close()
		empty()
		return nil, err
	}
	n.link = lk
	ifc, err := xfrmif.NewInterface(interfaceConfig(cfg), lk) // owns lk, also on error
	if err != nil {
		n.conn.Close()
		empty()
		return nil, fmt.Errorf("stack: %w", err)
	}
	n.ifc = ifc
	if err := n.reg.Add(ifc); err != nil {
		ifc.Close()
		n.conn.Close()
		empty()
		return nil, fmt.Errorf("stack: %w", err)
	}

	var ctx context.Context
	ctx, n.cancel = context.WithCancel(context.Background())
	n.engine = datapath.New(n.sad, n.reg, n.conn, log.WithField("part", "datapath"))
	n.engine.Start(ctx)
	n.engine.StartInterface(ctx, ifc)
	n.ticker.Add(1)
	go n.tick(ctx)
	if n.seq != nil {
		n.ticker.Add(1)
		go n.routineSaveTops(ctx)
	}
	return n, nil
}

// newSA makes an SA that shares the counters, resumed from its key's
// record in the state directory; without one, AEAD states are refused
// unless the keys are ephemeral (seqstate.Without).
func (n *Net) newSA(c sa.Config) (*sa.SA, error) {
	if n.seqErr != nil {
		if err := seqstate.Without(&c, n.stateDir, n.seqErr); err != nil {
			return nil, fmt.Errorf("%w (a caller that makes fresh keys for every run sets EphemeralKeys)", err)
		}
	}
	s, err := sa.New(c, n.counters)
	if err != nil || n.seq == nil {
		return s, err
	}
	if err := n.seq.Attach(s); err != nil {
		s.Discard()
		return nil, err
	}
	return s, nil
}

// routineSaveTops saves the inbound SAs' replay-window tops off the
// packet path until the Net closes.
func (n *Net) routineSaveTops(ctx context.Context) {
	defer n.ticker.Done()
	n.seq.RoutineSaveTops(ctx, n.log.WithField("part", "state").Warnf)
}

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
	if len(cfg.Addresses) == 0 {
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

// FromConfig is New for a parsed daemon config file with exactly one
// interface: its addresses, routes, mtu and if_id, the states, the
// policies and underlay.udp. The interface's queues are ignored (a
// netstack has one); raw_esp and mark are refused, as a netstack's ESP
// goes over UDP and can never loop back into a TUN. Log, control and
// metrics are the daemon's and are ignored.
func FromConfig(c *config.Config) (*Net, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: nil config", ErrInvalidConfig)
	}
	if len(c.Interfaces) != 1 {
		return nil, fmt.Errorf("%w: %s: interfaces: %d, want exactly one", ErrInvalidConfig, c.File, len(c.Interfaces))
	}
	if c.Underlay.RawESP {
		return nil, fmt.Errorf("%w: %s: underlay.raw_esp: not supported by the netstack (ESP in UDP only)", ErrInvalidConfig, c.File)
	}
	if c.Underlay.Mark != 0 {
		return nil, fmt.Errorf("%w: %s: underlay.mark: not supported by the netstack (it needs CAP_NET_ADMIN and has no TUN to loop into)", ErrInvalidConfig, c.File)
	}
	ifc := c.Interfaces[0]
	cfg := Config{
		Name:      ifc.Name,
		Underlay:  c.Underlay.UDP,
		Addresses: ifc.Addresses,
		Routes:    ifc.Routes,
		MTU:       ifc.MTU,
		IfID:      ifc.IfID,
		Policies:  c.Policies,
		StateDir:  c.StateDir,
	}
	for _, st := range c.States {
		cfg.States = append(cfg.States, st.Config)
	}
	n, err := New(cfg)
	if err != nil && c.File != "" {
		return nil, fmt.Errorf("%s: %w", c.File, err)
	}
	return n, err
}

// UnderlayAddr returns the bound underlay address, its port resolved when
// Config.Underlay had port 0.
func (n *Net) UnderlayAddr() netip.AddrPort { return n.underlay }

// SAD returns the security association database, to add and delete SAs
// and policies (rekeying: add the new inbound SA before the outbound one
// changes) and read their counters. Add SAs with AddState, which refuses
// a key that an earlier SA had and resumes the key's sequence numbers from
// the state directory; an SA made with sa.New(cfg, n.Counters()) and added
// here directly skips both (and starts at 1 after every restart).
func (n *Net) SAD() *sa.SAD { return n.sad }

// Counters returns the global xfrm counters (/proc/net/xfrm_stat names).
func (n *Net) Counters() *sa.Counters { return n.counters }

// AddState makes an SA from cfg and adds it to the SAD. An IfID of 0 is
// the netstack's. A key that an SA of New or AddState had, running or
// deleted, of either direction, is refused with ErrInvalidConfig. The SA
// continues its key's sequence numbers from StateDir; without one, an
// AES-GCM or ChaCha20-Poly1305 key is refused unless the Net was made with
// EphemeralKeys.
func (n *Net) AddState(cfg sa.Config) error {
	if cfg.IfID == 0 {
		cfg.IfID = n.ifc.IfID()
	}
	n.keysMu.Lock()
	defer n.keysMu.Unlock()
	if f, prev, used := n.keys.Conflict(&cfg); used {
		return keyReuse(f, prev)
	}
	s, err := n.newSA(cfg)
	if err != nil {
		return fmt.Errorf("stack: %w", err)
	}
	if err := n.sad.Add(s); err != nil {
		s.Discard()
		return err
	}
	n.keys.Add(&cfg, fmt.Sprintf("spi 0x%08x dir %s dst %s", cfg.SPI, cfg.Dir, cfg.Dst))
	return nil
}

// claimKeys records the keys of state, named owner (States[i]), for New,
// or refuses a key that an earlier state has.
func (n *Net) claimKeys(state *sa.Config, owner string) error {
	if f, prev, used := n.keys.Conflict(state); used {
		return keyReuse(owner+"."+f, prev)
	}
	n.keys.Add(state, owner)
	return nil
}

// keyReuse is the error for a key (in field, as config names it) that
// prev holds or held. Each SA needs keys of its own, whatever its
// direction: every SA starts its sequence numbers at 1, and AES-GCM and
// ChaCha20-Poly1305 take their nonces from them (see config.KeyUse).
func keyReuse(field string, prev config.KeyOwner) error {
	goName := strings.NewReplacer("aead.key", "AEAD.Key", "enc.key", "Enc.Key", "auth.key", "Auth.Key")
	return fmt.Errorf("%w: %s: the same key as %s: each SA needs keys of its own, in either direction, or the "+
		"second starts its sequence numbers, which AES-GCM and ChaCha20-Poly1305 take as nonces, at 1 again",
		ErrInvalidConfig, goName.Replace(field), goName.Replace(prev.String()))
}

// Interface returns the netstack's xfrm interface, for its counters
// (Stats) and configuration.
func (n *Net) Interface() *xfrmif.Interface { return n.ifc }

// Close closes every connection and listener of the netstack, stops its
// goroutines, closes the underlay socket and empties the SAD, which zeroes
// the SAs' keys. It waits for the workers up to 5 s and is idempotent.
func (n *Net) Close() error {
	n.closeOnce.Do(func() {
		n.cancel()
		errs := []error{n.conn.Close(), n.reg.Close()}
		done := make(chan struct{})
		go func() {
			n.engine.Wait()
			n.ticker.Wait()
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			errs = append(errs, errors.New("stack: workers did not stop within 5 s"))
		}
		if n.seq != nil {
			n.seq.Flush(n.log.WithField("part", "state").Warnf) // the final tops
			errs = append(errs, n.seq.Close())
		}
		errs = append(errs, n.sad.Replace(nil, nil))
		n.closeErr = errors.Join(errs...)
	})
	return n.closeErr
}

// tick runs the SAs' add-time lifetimes once a second and removes the SAs
// whose hard lifetime expired, as the daemon does (a fresh SA with the
// same selectors takes over as soon as it is added).
func (n *Net) tick(ctx context.Context) {
	defer n.ticker.Done()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			n.sad.Tick(now)
			n.sad.RemoveExpired()
		}
	}
}
