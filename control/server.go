package control

import (
	"cmp"
	"encoding/json"
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

// Limits of the control socket. Only root and the socket's owner may
// connect (SO_PEERCRED), so these guard against stuck or runaway clients
// of those, not strangers: together they bound what the daemon holds for
// its clients to MaxConns goroutines and about MaxConns × (MaxLine + 8 KiB)
// of buffers (TestHalfSentRequestsAreBounded measures 2.5 MiB for 64
// half-sent requests), and free a slot that a client stopped using.
const (
	// MaxLine is the longest request line the server reads; a longer one
	// is answered with an error and ends the connection. The largest
	// request, a state.add with two hex keys and selectors, is under
	// 1 KiB: 64 KiB leaves a wide margin without letting a half-sent
	// line hold a megabyte.
	MaxLine = 64 << 10

	// MaxConns is how many connections are served at once; the next one
	// is answered "busy" and closed. Each command of the CLI and each
	// probe is one connection answered in milliseconds, so even a node
	// with probes, an operator and scripts that run commands in parallel
	// seldom has more than a handful open.
	MaxConns = 32

	// IdleTimeout is how long a connection may wait between requests (or
	// before its first) before it is closed. The CLI sends its request
	// as soon as it connects; a minute still lets a person type requests
	// into socat by hand. Client dials again when it finds its connection
	// closed this way.
	IdleTimeout = time.Minute

	// RequestTimeout is how long a request may take to arrive once its
	// first byte has: Client writes a request in one write, so it arrives
	// at once; 10 s allows for a client stopped or swapped out midway.
	RequestTimeout = 10 * time.Second

	// WriteTimeout bounds writing one answer, so that a client that sends
	// requests but never reads the answers does not hold a goroutine
	// forever. A list of 10,000 SAs (a few MB) takes milliseconds to a
	// client that reads.
	WriteTimeout = 10 * time.Second
)

const (
	// refuseTimeout bounds the write of a refusal from the accept loop.
	// The answer (under 200 bytes) goes into a fresh socket's empty
	// buffer and does not block; the deadline makes sure of it.
	refuseTimeout = 100 * time.Millisecond

	// refusalLogInterval spaces the log lines of refused connections, so
	// that a client that reconnects in a loop cannot flood the log.
	refusalLogInterval = 10 * time.Second
)

// Server answers requests on a unix socket with a Backend. Create it with
// Listen, run Serve, stop it with Close. Safe for concurrent use.
//
// It serves connections only from root and the socket's owner (the uid
// the daemon runs as), at most MaxConns at once, and closes those that
// stay idle past IdleTimeout or take longer than RequestTimeout to send a
// request; the fields below change those limits for tests and embedders.
type Server struct {
	// MaxConns, IdleTimeout, RequestTimeout and WriteTimeout override the
	// package's constants of the same names when non-zero. Set them
	// before Serve.
	MaxConns       int
	IdleTimeout    time.Duration
	RequestTimeout time.Duration
	WriteTimeout   time.Duration
	// Events is what the monitor command streams (monitor.go); nil
	// refuses it. Set it before Serve.
	Events *Monitor

	backend Backend
	log     logrus.FieldLogger
	ln      *net.UnixListener
	path    string
	owner   uint32 // the uid that, besides root, may connect

	// mu guards:
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	// lastRefusalLog and refusalsNotLogged rate-limit logRefusal.
	lastRefusalLog    time.Time
	refusalsNotLogged int

	wg sync.WaitGroup // one per connection goroutine
}

// Listen creates the control socket at path: the parent directory is
// created with mode 0700 if missing, a stale socket (one nobody answers
// on) is removed, and the socket gets mode 0600 before it appears at path
// (it is bound under a temporary name, chmodded, then renamed). It fails if
// another process answers on path or path is not a socket. log may be nil.
func Listen(path string, b Backend, log logrus.FieldLogger) (*Server, error) {
	if log == nil {
		l := logrus.New()
		l.SetOutput(io.Discard)
		log = l
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("control: %w", err)
	}
	if err := removeStale(path); err != nil {
		return nil, err
	}
	tmp := filepath.Join(dir, fmt.Sprintf(".%s.%d.tmp", filepath.Base(path), os.Getpid()))
	os.Remove(tmp)
	if len(tmp) > 107 {
		tmp = path // no room for a temporary name: chmod after bind instead
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("control: %w", err)
	}
	ln.SetUnlinkOnClose(false) // Close removes path itself
	if err := os.Chmod(tmp, 0o600); err != nil {
		ln.Close()
		os.Remove(tmp)
		return nil, fmt.Errorf("control: %w", err)
	}
	if tmp != path {
		if err := os.Rename(tmp, path); err != nil {
			ln.Close()
			os.Remove(tmp)
			return nil, fmt.Errorf("control: %w", err)
		}
	}
	return &Server{backend: b, log: log, ln: ln, path: path, owner: uint32(os.Geteuid()), conns: map[net.Conn]struct{}{}}, nil
}

// removeStale removes a socket at path that no process answers on.
func removeStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("control: %w", err)
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return fmt.Errorf("control: %s exists and is not a socket", path)
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return fmt.Errorf("control: %s is in use by another process (is ipsecd already running?)", path)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("control: removing stale socket: %w", err)
	}
	return nil
}

// Path returns the socket's path.
func (s *Server) Path() string { return s.path }

// Serve accepts connections until Close, and then returns nil. A
// connection from a uid that is neither root nor the socket's owner, or
// one past the connection cap, is answered with an error ("denied" or
// "busy") and closed at once.
func (s *Server) Serve() error {
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
				s.log.WithError(err).Warnf("control: accept failed; retrying in %v", backoff)
				time.Sleep(backoff)
				continue
			}
			return fmt.Errorf("control: %w", err)
		}
		backoff = 0
		if err := s.checkPeer(c); err != nil {
			s.refuse(c, errorResponse(err))
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
			s.refuse(c, errorResponse(fmt.Errorf("%w: %d open, the most the daemon serves at once; try again", ErrBusy, n)))
			continue
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serveConn(c)
	}
}

func (s *Server) maxConns() int                 { return cmp.Or(s.MaxConns, MaxConns) }
func (s *Server) idleTimeout() time.Duration    { return cmp.Or(s.IdleTimeout, IdleTimeout) }
func (s *Server) requestTimeout() time.Duration { return cmp.Or(s.RequestTimeout, RequestTimeout) }
func (s *Server) writeTimeout() time.Duration   { return cmp.Or(s.WriteTimeout, WriteTimeout) }

// checkPeer returns an error wrapping ErrDenied unless c's peer runs as
// root or as the socket's owner. The socket's mode (0600, in a 0700
// directory) already keeps others out; this holds when the mode was
// loosened, the socket was bind-mounted elsewhere, or the peer can
// override file permissions without being root (CAP_DAC_OVERRIDE).
func (s *Server) checkPeer(c *net.UnixConn) error {
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

// refuse answers c with resp, logs it and closes c, from the accept loop:
// the write is bounded by refuseTimeout.
func (s *Server) refuse(c net.Conn, resp Response) {
	s.logRefusal(resp.Error)
	out, _ := json.Marshal(resp)
	c.SetWriteDeadline(time.Now().Add(refuseTimeout))
	c.Write(append(out, '\n'))
	c.Close()
}

// logRefusal logs why a connection was refused, at most once per
// refusalLogInterval, with the number of refusals not logged since.
func (s *Server) logRefusal(why string) {
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
	l.Warn("control: connection refused: " + why)
}

// Close stops listening, closes every connection, waits for their
// goroutines and removes the socket.
func (s *Server) Close() error {
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

// handler answers one command. The result is marshalled as the answer's
// "result"; an error becomes its "error" and "code" (errorResponse).
type handler func(s *Server, req *Request) (any, error)

// handlers lists every command the server answers, one line each; the
// handlers live in the file of their concept (states.go, policies.go,
// stats.go, ike.go, pool.go).
var handlers = map[string]handler{
	"ping":          func(*Server, *Request) (any, error) { return "pong", nil },
	"state.list":    (*Server).stateList,
	"state.get":     (*Server).stateGet,
	"state.add":     (*Server).stateAdd,
	"state.delete":  (*Server).stateDelete,
	"policy.list":   (*Server).policyList,
	"policy.add":    (*Server).policyAdd,
	"policy.delete": (*Server).policyDelete,
	"state.flush":   (*Server).stateFlush,
	"state.count":   (*Server).stateCount,
	"state.update":  (*Server).stateUpdate,
	"reload":        (*Server).reload,
	// "monitor" turns its connection into an event stream (conn.go,
	// monitor.go) rather than getting one answer here.
	"stats":          (*Server).stats,
	"interface.list": (*Server).interfaceList,
	"ike.list":       (*Server).dispatchIKE, // ike.go
	"ike.initiate":   (*Server).dispatchIKE,
	"ike.terminate":  (*Server).dispatchIKE,
	"ike.rekey":      (*Server).dispatchIKE,
	"pool.list":      (*Server).poolList, // pool.go
}

func (s *Server) dispatch(req *Request) (any, error) {
	if req.Cmd == "" {
		return nil, invalid(errors.New(`missing "cmd"`))
	}
	h, ok := handlers[req.Cmd]
	if !ok {
		return nil, invalid(fmt.Errorf("unknown cmd %q", req.Cmd))
	}
	return h(s, req)
}
