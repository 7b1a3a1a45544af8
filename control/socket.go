package control

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"
)

// Socket is a unix stream socket served only to root and its owner (the
// uid the daemon runs as), at most MaxConns connections at once: the
// control socket's, and any other the daemon serves with the same rules
// (package vici's). It accepts, checks and counts connections and hands
// each to the protocol's serve function; the protocol reads and writes
// with its own deadlines. Create it with ListenSocket, run Serve, stop it
// with Close. Safe for concurrent use.
type Socket struct {
	// MaxConns overrides the package's MaxConns when non-zero. Set it
	// before Serve.
	MaxConns int

	name  string // the protocol's name, which starts its errors and log lines
	log   logrus.FieldLogger
	ln    *net.UnixListener
	path  string
	owner uint32 // the uid that, besides root, may connect

	// mu guards:
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	// lastRefusalLog and refusalsNotLogged rate-limit logRefusal.
	lastRefusalLog    time.Time
	refusalsNotLogged int

	wg sync.WaitGroup // one per connection goroutine
}

// ListenSocket creates a socket at path for the protocol name (it starts
// the errors and log lines: "control", "vici"): the parent directory is
// created with mode 0700 if missing, a stale socket (one nobody answers
// on) is removed, and the socket gets mode 0600 before it appears at path
// (it is bound under a temporary name, chmodded, then renamed). It fails
// if another process answers on path or path is not a socket. log may be
// nil.
func ListenSocket(name, path string, log logrus.FieldLogger) (*Socket, error) {
	if log == nil {
		l := logrus.New()
		l.SetOutput(io.Discard)
		log = l
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if err := removeStale(name, path); err != nil {
		return nil, err
	}
	tmp := filepath.Join(dir, fmt.Sprintf(".%s.%d.tmp", filepath.Base(path), os.Getpid()))
	os.Remove(tmp)
	if len(tmp) > 107 {
		tmp = path // no room for a temporary name: chmod after bind instead
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	ln.SetUnlinkOnClose(false) // Close removes path itself
	if err := os.Chmod(tmp, 0o600); err != nil {
		ln.Close()
		os.Remove(tmp)
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if tmp != path {
		if err := os.Rename(tmp, path); err != nil {
			ln.Close()
			os.Remove(tmp)
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	return &Socket{name: name, log: log, ln: ln, path: path, owner: uint32(os.Geteuid()), conns: map[net.Conn]struct{}{}}, nil
}

// removeStale removes a socket at path that no process answers on.
func removeStale(name, path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return fmt.Errorf("%s: %s exists and is not a socket", name, path)
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return fmt.Errorf("%s: %s is in use by another process (is ipsecd already running?)", name, path)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("%s: removing stale socket: %w", name, err)
	}
	return nil
}

// Path returns the socket's path.
func (s *Socket) Path() string { return s.path }

// NumConns returns how many connections are served now.
func (s *Socket) NumConns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

func (s *Socket) maxConns() int { return cmp.Or(s.MaxConns, MaxConns) }

// Serve accepts connections until Close, and then returns nil. Each
// connection from root or the owner, within MaxConns, is served by serve
// on a goroutine of its own, and closed when serve returns; Close closes
// the connections and waits for those goroutines. A connection from
// another uid, or one past the cap, is handed to refuse (with an error
// wrapping ErrDenied or ErrBusy) in the accept loop, which bounds its
// write to 100 ms, and closed.
func (s *Socket) Serve(serve func(net.Conn), refuse func(net.Conn, error)) error {
	var backoff time.Duration
	for {
		c, err := s.ln.AcceptUnix()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) ||
				errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.ENOMEM) || errors.Is(err, syscall.ECONNABORTED) {
				// Out of descriptors or memory for now, perhaps for
				// reasons outside this socket: wait and try again
				// rather than stop answering for good.
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.log.WithError(err).Warnf("%s: accept failed; retrying in %v", s.name, backoff)
				time.Sleep(backoff)
				continue
			}
			return fmt.Errorf("%s: %w", s.name, err)
		}
		backoff = 0
		if err := s.checkPeer(c); err != nil {
			s.refuse(c, err, refuse)
			continue
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return nil
		}
		if n := len(s.conns); n >= s.maxConns() {
			s.mu.Unlock()
			s.refuse(c, fmt.Errorf("%w: %d open, the most the daemon serves at once; try again", ErrBusy, n), refuse)
			continue
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serveConn(c, serve)
	}
}

// serveConn runs serve on c, then forgets and closes c.
func (s *Socket) serveConn(c net.Conn, serve func(net.Conn)) {
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.Close()
		s.wg.Done()
	}()
	serve(c)
}

// checkPeer returns an error wrapping ErrDenied unless c's peer runs as
// root or as the socket's owner. The socket's mode (0600, in a 0700
// directory) already keeps others out; this holds when the mode was
// loosened, the socket was bind-mounted elsewhere, or the peer can
// override file permissions without being root (CAP_DAC_OVERRIDE).
func (s *Socket) checkPeer(c *net.UnixConn) error {
	uid, err := peerUID(c)
	if err != nil {
		return fmt.Errorf("%w: cannot tell who connected: %v", ErrDenied, err)
	}
	if uid == 0 || uid == s.owner {
		return nil
	}
	if s.owner == 0 {
		return fmt.Errorf("%w: uid %d is not root (root owns the socket)", ErrDenied, uid)
	}
	return fmt.Errorf("%w: uid %d is neither root nor the socket's owner (uid %d)", ErrDenied, uid, s.owner)
}

// refuse logs why c is refused, lets the protocol answer within
// refuseTimeout, and closes c.
func (s *Socket) refuse(c net.Conn, why error, answer func(net.Conn, error)) {
	s.logRefusal(why.Error())
	c.SetWriteDeadline(time.Now().Add(refuseTimeout))
	if answer != nil {
		answer(c, why)
	}
	c.Close()
}

// logRefusal logs why a connection was refused, at most once per
// refusalLogInterval, with the number of refusals not logged since.
func (s *Socket) logRefusal(why string) {
	s.mu.Lock()
	now := time.Now()
	if now.Sub(s.lastRefusalLog) < refusalLogInterval {
		s.refusalsNotLogged++
		s.mu.Unlock()
		return
	}
	s.lastRefusalLog = now
	skipped := s.refusalsNotLogged
	s.refusalsNotLogged = 0
	s.mu.Unlock()
	l := s.log
	if skipped > 0 {
		l = l.WithField("refused_since_last_log", skipped)
	}
	l.Warn(s.name + ": connection refused: " + why)
}

// Close stops listening, closes every connection, waits for their
// goroutines and removes the socket.
func (s *Socket) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	err := s.ln.Close()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	os.Remove(s.path)
	return err
}
