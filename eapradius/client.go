package eapradius

import (
	"crypto/rand"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	"layeh.com/radius"
	"layeh.com/radius/rfc2865"
)

// Server is one RADIUS server (strongSwan's eap-radius servers.<name>).
type Server struct {
	// Name names the server in logs and counters; "" is its address.
	Name string
	// Address is host:port of authentication (port 1812 by
	// convention); AcctAddress host:port of accounting, "" for
	// Address's host on port 1813.
	Address     string
	AcctAddress string
	// Secret is the shared secret; the Client keeps a copy.
	Secret []byte
}

// Config is how a Client talks to its servers. The zero values of the
// durations and counts are strongSwan's defaults.
type Config struct {
	// Servers, in order of preference: a request goes to the first one
	// that is not marked dead, and to the next when it does not answer.
	Servers []Server
	// NASIdentifier is sent in every request (RFC 2865 §5.32); "" is
	// "ipsecd".
	NASIdentifier string
	// NASIP is the NAS-IP-Address (or NAS-IPv6-Address, RFC 3162)
	// of every request. The zero Addr leaves each session's requests
	// the gateway's address its client reached (Peer.Called, as
	// strongSwan's eap-radius sends), and a request of no session
	// (Accounting-On and -Off) the address of the socket it leaves
	// from. Set it when the server keys anything by it (FreeRADIUS's
	// sqlippool clears a gateway's leases by it on Accounting-On), so
	// that every request of the gateway names the same.
	NASIP netip.Addr
	// Timeout is the first wait for an answer (retransmit_timeout, 2 s);
	// each retransmission waits Base times longer (retransmit_base,
	// 1.4), and a server gets Tries sends in all (retransmit_tries, 4)
	// before the next is asked.
	Timeout time.Duration
	Base    float64
	Tries   int
	// DeadTime is how long a server that did not answer is asked only
	// after the others (60 s).
	DeadTime time.Duration
	// MaxInFlight bounds the requests waiting for an answer at once
	// (1024); more wait their turn. Each holds a UDP socket.
	MaxInFlight int
	// Log receives the client's warnings; nil discards them.
	Log logrus.FieldLogger
}

// ErrNoAnswer is wrapped by the error of a request no server answered
// within its tries: the conversation or record is lost, not the client.
// When answers came but failed authentication (a wrong shared secret),
// the error wraps ErrMismatch too.
var ErrNoAnswer = errors.New("eapradius: no RADIUS server answered")

// ErrClosed is the error of a request cut short by Close.
var ErrClosed = errors.New("eapradius: client closed")

// Client sends RADIUS requests to a list of servers with retransmission
// and failover, each request in a goroutine of its own, so that a dead
// server delays only the requests waiting for it. Safe for concurrent
// use; Close ends it.
type Client struct {
	cfg     Config
	servers []*server
	slots   chan struct{} // a token per request in flight
	closed  chan struct{}
	once    sync.Once
	wg      sync.WaitGroup
	// mu guards conns, the sockets of the requests in flight, which
	// Close closes to end their waits, and orders wg.Add before Close.
	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

// New returns a Client for cfg; it fails on a config without servers
// or with a server without an address or secret.
func New(cfg Config) (*Client, error) {
	if len(cfg.Servers) == 0 {
		return nil, errors.New("eapradius: no servers")
	}
	if cfg.NASIdentifier == "" {
		cfg.NASIdentifier = "ipsecd"
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2 * time.Second
	}
	if cfg.Base < 1 {
		cfg.Base = 1.4
	}
	if cfg.Tries <= 0 {
		cfg.Tries = 4
	}
	if cfg.DeadTime <= 0 {
		cfg.DeadTime = time.Minute
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = 1024
	}
	if cfg.Log == nil {
		l := logrus.New()
		l.SetOutput(discard{})
		cfg.Log = l
	}
	c := &Client{cfg: cfg, slots: make(chan struct{}, cfg.MaxInFlight), closed: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	for _, s := range cfg.Servers {
		srv, err := newServer(s)
		if err != nil {
			return nil, err
		}
		c.servers = append(c.servers, srv)
	}
	return c, nil
}

type discard struct{}

func (discard) Write(b []byte) (int, error) { return len(b), nil }

// Close ends the requests in flight with ErrClosed, waits for their
// callbacks, and zeroes the secrets.
func (c *Client) Close() {
	c.once.Do(func() {
		close(c.closed)
		c.mu.Lock()
		for conn := range c.conns {
			conn.Close()
		}
		c.mu.Unlock()
	})
	c.wg.Wait()
	for _, s := range c.servers {
		clear(s.secret)
	}
}

// Stats returns each server's counters, in the order of the config.
func (c *Client) Stats() []ServerStats {
	out := make([]ServerStats, len(c.servers))
	for i, s := range c.servers {
		out[i] = s.snapshot()
	}
	return out
}

// answer is what an exchange ends with: the verified answer, the
// request as sent (for the Request Authenticator the MPPE keys are
// encrypted with) and the server that answered, or an error.
type answer struct {
	p   *radius.Packet
	req []byte
	srv *server
	err error
}

// exchange sends p to srv, or when srv is nil to the servers in order
// of preference, and calls done with the answer from its own goroutine.
// p's Identifier, Authenticator and Secret are set per server.
func (c *Client) exchange(p *radius.Packet, srv *server, done func(answer)) {
	c.mu.Lock()
	select {
	case <-c.closed:
		c.mu.Unlock()
		done(answer{err: ErrClosed})
		return
	default:
	}
	c.wg.Add(1) // under mu, so that Close's Wait comes after it
	c.mu.Unlock()
	go func() {
		defer c.wg.Done()
		done(c.runExchange(p, srv))
	}()
}

// runExchange waits for a slot, then asks each candidate server in turn.
func (c *Client) runExchange(p *radius.Packet, srv *server) answer {
	select {
	case c.slots <- struct{}{}:
		defer func() { <-c.slots }()
	case <-c.closed:
		return answer{err: ErrClosed}
	}
	candidates := []*server{srv}
	if srv == nil {
		candidates = c.byPreference(time.Now())
	}
	var tried []string
	mismatched := false
	for _, s := range candidates {
		a := c.ask(p, s)
		if a.err == nil || errors.Is(a.err, ErrClosed) {
			return a
		}
		tried = append(tried, s.name)
		mismatched = mismatched || errors.Is(a.err, ErrMismatch)
	}
	if mismatched {
		// Not silence: answers came and failed authentication, most
		// likely a wrong shared secret; the error says so, and
		// counters tell it from a server that is down.
		return answer{err: fmt.Errorf("%w (asked %v), %w of an answer", ErrNoAnswer, tried, ErrMismatch)}
	}
	return answer{err: fmt.Errorf("%w (asked %v)", ErrNoAnswer, tried)}
}

// byPreference returns the servers alive first, then the dead ones, each
// in the config's order: a dead server is still asked when all are.
func (c *Client) byPreference(now time.Time) []*server {
	var alive, dead []*server
	for _, s := range c.servers {
		if s.isDead(now) {
			dead = append(dead, s)
		} else {
			alive = append(alive, s)
		}
	}
	return append(alive, dead...)
}

// ask sends p to s up to Tries times and returns its verified answer.
// Answers that fail verification are counted, logged once per server,
// and waited past.
func (c *Client) ask(p *radius.Packet, s *server) answer {
	addr := s.address
	if p.Code == radius.CodeAccountingRequest {
		addr = s.acctAddress
	}
	var id [1 + authLen]byte
	if _, err := rand.Read(id[:]); err != nil {
		return answer{err: fmt.Errorf("eapradius: %w", err)}
	}
	p.Identifier, p.Secret = id[0], s.secret
	copy(p.Authenticator[:], id[1:])
	conn, err := net.Dial("udp", addr)
	if err != nil {
		return answer{err: fmt.Errorf("eapradius: %s: %w", s.name, err)}
	}
	if !c.track(conn) {
		conn.Close()
		return answer{err: ErrClosed}
	}
	defer c.untrack(conn)
	wire, err := encodeRequest(withNASAddr(p, conn.LocalAddr()))
	if err != nil {
		return answer{err: err}
	}
	buf := make([]byte, radius.MaxPacketLength)
	wait := c.cfg.Timeout
	mismatched := false
	for try := 0; try < c.cfg.Tries; try++ {
		if try > 0 {
			s.stats.retransmits.Add(1)
			wait = time.Duration(math.Min(float64(wait)*c.cfg.Base, float64(time.Hour)))
		}
		s.stats.requests.Add(1)
		if _, err := conn.Write(wire); err != nil {
			// ICMP port unreachable from an earlier send shows up
			// here: the try waits as if it met silence.
			if !c.sleep(wait) {
				return answer{err: ErrClosed}
			}
			continue
		}
		deadline := time.Now().Add(wait)
		conn.SetReadDeadline(deadline)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				// A refused port reads as an error at once:
				// sleep out the wait, as for silence.
				if !c.sleep(time.Until(deadline)) {
					return answer{err: ErrClosed}
				}
				break
			}
			ans, err := verifyAnswer(buf[:n], wire, s.secret)
			if err != nil {
				s.rejected(err, c.cfg.Log)
				mismatched = mismatched || errors.Is(err, ErrMismatch)
				continue
			}
			s.answered(ans.Code)
			return answer{p: ans, req: wire, srv: s}
		}
	}
	s.stats.timeouts.Add(1)
	if s.markDead(time.Now().Add(c.cfg.DeadTime)) {
		c.cfg.Log.WithFields(logrus.Fields{"server": s.name, "tries": c.cfg.Tries}).Warn("radius: server not answering (down, or dropping our requests for a wrong shared secret); trying the next")
	}
	if mismatched {
		return answer{err: fmt.Errorf("%w: %s after %d tries, %w of its answers", ErrNoAnswer, s.name, c.cfg.Tries, ErrMismatch)}
	}
	return answer{err: fmt.Errorf("%w: %s after %d tries", ErrNoAnswer, s.name, c.cfg.Tries)}
}

// sleep waits d, false when Close came first.
func (c *Client) sleep(d time.Duration) bool {
	if d <= 0 {
		select {
		case <-c.closed:
			return false
		default:
			return true
		}
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-c.closed:
		return false
	}
}

func (c *Client) track(conn net.Conn) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-c.closed:
		return false
	default:
	}
	c.conns[conn] = struct{}{}
	return true
}

func (c *Client) untrack(conn net.Conn) {
	c.mu.Lock()
	delete(c.conns, conn)
	c.mu.Unlock()
	conn.Close()
}

// acctAddress returns the accounting address of s: AcctAddress, or
// Address's host on port 1813.
func acctAddress(s Server) (string, error) {
	if s.AcctAddress != "" {
		return s.AcctAddress, nil
	}
	host, _, err := net.SplitHostPort(s.Address)
	if err != nil {
		return "", fmt.Errorf("eapradius: server %q: %w", s.Address, err)
	}
	return net.JoinHostPort(host, strconv.Itoa(1813)), nil
}

// nasAddr returns the NAS address of a session's requests: the config's
// NASIP, else called, the gateway's address its client reached.
func (c *Client) nasAddr(called netip.Addr) netip.Addr {
	if c.cfg.NASIP.IsValid() {
		return c.cfg.NASIP
	}
	return called
}

// withNASAddr returns p, or when p names no NAS address (a request of no
// session, without Config.NASIP) a copy of p with local's: every request
// carries one, which the server's logs and lease queries key by.
func withNASAddr(p *radius.Packet, local net.Addr) *radius.Packet {
	for _, a := range p.Attributes {
		if a.Type == rfc2865.NASIPAddress_Type || a.Type == nasIPv6AddressType {
			return p
		}
	}
	u, ok := local.(*net.UDPAddr)
	if !ok {
		return p
	}
	q := *p
	q.Attributes = slices.Clone(p.Attributes)
	addNASAddr(&q, u.AddrPort().Addr())
	return &q
}
