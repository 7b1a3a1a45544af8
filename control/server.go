package control

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/ipsecd/ipsecd/config"
)

// MaxLine is the longest request line the server reads; a longer one ends
// the connection.
const MaxLine = 1 << 20

// Server answers requests on a unix socket with a Backend. Create it with
// Listen, run Serve, stop it with Close. Safe for concurrent use.
type Server struct {
	backend Backend
	log     logrus.FieldLogger
	ln      *net.UnixListener
	path    string

	// mu guards:
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool

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
	return &Server{backend: b, log: log, ln: ln, path: path, conns: map[net.Conn]struct{}{}}, nil
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

// Serve accepts connections until Close, and then returns nil.
func (s *Server) Serve() error {
	for {
		c, err := s.ln.Accept()
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
			return fmt.Errorf("control: %w", err)
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return nil
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serveConn(c)
	}
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

func (s *Server) serveConn(c net.Conn) {
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.Close()
		s.wg.Done()
	}()
	sc := bufio.NewScanner(c)
	sc.Buffer(make([]byte, 0, 4096), MaxLine)
	w := bufio.NewWriter(c)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		resp := s.handle(line)
		out, err := json.Marshal(resp)
		if err != nil {
			out, _ = json.Marshal(Response{Error: "control: " + err.Error(), Code: "internal"})
		}
		w.Write(out)
		w.WriteByte('\n')
		if err := w.Flush(); err != nil {
			return
		}
	}
	if errors.Is(sc.Err(), bufio.ErrTooLong) {
		out, _ := json.Marshal(Response{Error: fmt.Sprintf("request longer than %d bytes", MaxLine), Code: "invalid"})
		w.Write(append(out, '\n'))
		w.Flush()
	}
}

// handle answers one request line. A panic in the Backend is answered as
// an internal error: the daemon keeps running.
func (s *Server) handle(line []byte) (resp Response) {
	defer func() {
		if r := recover(); r != nil {
			s.log.WithField("panic", r).Error("control: request panicked")
			resp = Response{Error: "internal error", Code: "internal"}
		}
	}()
	var req Request
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return errorResponse(fmt.Errorf("%w: bad JSON: %v", ErrInvalid, err))
	}
	result, err := s.dispatch(&req)
	if err != nil {
		s.log.WithField("cmd", req.Cmd).WithError(err).Debug("control: request failed")
		return errorResponse(err)
	}
	raw, err := json.Marshal(result)
	if err != nil {
		return errorResponse(err)
	}
	return Response{OK: true, Result: raw}
}

func errorResponse(err error) Response {
	r := Response{Error: err.Error(), Code: "internal"}
	switch {
	case errors.Is(err, ErrNotFound):
		r.Code = "not_found"
	case errors.Is(err, ErrExists):
		r.Code = "exists"
	case errors.Is(err, ErrInvalid):
		r.Code = "invalid"
	}
	return r
}

func invalid(err error) error { return fmt.Errorf("%w: %v", ErrInvalid, err) }

func (s *Server) dispatch(req *Request) (any, error) {
	b := s.backend
	switch req.Cmd {
	case "ping":
		return "pong", nil
	case "state.list":
		states := b.States(req.Keys)
		for i := range states {
			redact(&states[i], req.Keys)
		}
		return nonNil(states), nil
	case "state.get", "state.delete":
		if req.ID == nil {
			return nil, invalid(errors.New(`missing "id"`))
		}
		id, err := req.ID.StateID()
		if err != nil {
			return nil, invalid(err)
		}
		if req.Cmd == "state.delete" {
			return nil, b.DeleteState(id)
		}
		st, err := b.GetState(id, req.Keys)
		if err != nil {
			return nil, err
		}
		redact(&st, req.Keys)
		return st, nil
	case "state.add":
		if req.State == nil {
			return nil, invalid(errors.New(`missing "state"`))
		}
		c, err := req.State.Config()
		if err != nil {
			return nil, invalid(err)
		}
		if err := config.CheckState(&c); err != nil {
			return nil, invalid(err)
		}
		return nil, b.AddState(c)
	case "policy.list":
		ps := b.Policies()
		specs := make([]PolicySpec, len(ps))
		for i, p := range ps {
			specs[i] = NewPolicySpec(p)
		}
		return specs, nil
	case "policy.add", "policy.delete":
		if req.Policy == nil {
			return nil, invalid(errors.New(`missing "policy"`))
		}
		p, err := req.Policy.Policy()
		if err != nil {
			return nil, invalid(err)
		}
		if req.Cmd == "policy.delete" {
			return nil, b.DeletePolicy(p)
		}
		if err := config.CheckPolicy(&p); err != nil {
			return nil, invalid(err)
		}
		return nil, b.AddPolicy(p)
	case "stats":
		return nonNil(b.Stats()), nil
	case "interface.list":
		return nonNil(b.Interfaces()), nil
	case "":
		return nil, invalid(errors.New(`missing "cmd"`))
	}
	return nil, invalid(fmt.Errorf("unknown cmd %q", req.Cmd))
}

// redact removes the keys of st unless they were asked for.
func redact(st *StateInfo, keys bool) {
	if !keys {
		st.Config = config.RedactState(st.Config)
	}
}

// nonNil makes an empty list marshal as [] rather than null.
func nonNil[T any](xs []T) []T {
	if xs == nil {
		return []T{}
	}
	return xs
}
