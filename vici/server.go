package vici

import (
	"cmp"
	"net"
	"sync"
	"time"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/control"
	"github.com/sirupsen/logrus"
)

// Backend is what the commands act on: the daemon's IKE (the control
// socket's ike commands) and its config. Package daemon implements it.
type Backend interface {
	control.IKEBackend
	// Connections returns the connections the daemon runs (list-conns).
	Connections() []config.Connection
	// ReloadConfig reads the daemon's config file again, as ipsecd
	// reload does (reload-settings).
	ReloadConfig() error
}

// Server serves vici on a unix socket with the control socket's rules
// (control.Socket). Create it with Listen, run Serve, stop it with
// Close. Safe for concurrent use.
type Server struct {
	// MaxConns, IdleTimeout, RequestTimeout and WriteTimeout override
	// the control socket's limits of the same names (package control)
	// when non-zero; MaxWait overrides MaxWait. Set them before Serve.
	MaxConns       int
	IdleTimeout    time.Duration
	RequestTimeout time.Duration
	WriteTimeout   time.Duration
	MaxWait        time.Duration
	// Events is the daemon's event stream: IKE's events become
	// ike-updown, child-updown, ike-rekey and child-rekey, and initiate
	// and terminate wait on it for their outcome. nil: no events, and
	// those commands answer as soon as the request is sent. Set it
	// before Serve.
	Events *control.Monitor

	backend Backend
	log     logrus.FieldLogger
	sock    *control.Socket
	started time.Time
	ids     uniqueIDs     // ids.go
	creds   creds         // creds.go
	closing chan struct{} // closed by Close: commands that wait stop waiting
	once    sync.Once
}

// MaxWait bounds how long initiate and terminate wait for their outcome
// when the client asks to wait forever (timeout 0, swanctl's default):
// a connection is not held longer than that by one command.
const MaxWait = 2 * time.Minute

// Listen creates the vici socket at path (control.ListenSocket: a 0700
// directory, mode 0600, a stale socket replaced, one in use refused).
// log may be nil.
func Listen(path string, b Backend, log logrus.FieldLogger) (*Server, error) {
	sock, err := control.ListenSocket("vici", path, log)
	if err != nil {
		return nil, err
	}
	if log == nil {
		l := logrus.New()
		l.SetLevel(logrus.PanicLevel)
		log = l
	}
	return &Server{backend: b, log: log, sock: sock, started: time.Now(), closing: make(chan struct{})}, nil
}

// Path returns the socket's path.
func (s *Server) Path() string { return s.sock.Path() }

// Serve accepts connections until Close, and then returns nil. A
// connection from a uid that is neither root nor the socket's owner, or
// one past the connection cap, is closed at once (vici has no packet to
// say why; the daemon's log does).
func (s *Server) Serve() error {
	s.sock.MaxConns = s.MaxConns
	return s.sock.Serve(s.serveConn, nil)
}

// Close stops listening, ends the commands that wait, closes every
// connection, waits for their goroutines and removes the socket.
func (s *Server) Close() error {
	s.once.Do(func() { close(s.closing) })
	return s.sock.Close()
}

func (s *Server) idleTimeout() time.Duration { return cmp.Or(s.IdleTimeout, control.IdleTimeout) }
func (s *Server) requestTimeout() time.Duration {
	return cmp.Or(s.RequestTimeout, control.RequestTimeout)
}
func (s *Server) writeTimeout() time.Duration { return cmp.Or(s.WriteTimeout, control.WriteTimeout) }
func (s *Server) maxWait() time.Duration      { return cmp.Or(s.MaxWait, MaxWait) }

// serveConn serves one client until it closes, breaks the protocol or
// outstays a timeout.
func (s *Server) serveConn(c net.Conn) {
	cn := &conn{s: s, c: c, registered: map[string]bool{}, done: make(chan struct{})}
	defer cn.close()
	cn.serve()
}
