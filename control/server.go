package control

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net"
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
	sock    *Socket // socket.go: who may connect, how many, and Close
}

// Listen creates the control socket at path (ListenSocket: a 0700
// directory, mode 0600, a stale socket replaced, one in use refused).
// log may be nil.
func Listen(path string, b Backend, log logrus.FieldLogger) (*Server, error) {
	sock, err := ListenSocket("control", path, log)
	if err != nil {
		return nil, err
	}
	return &Server{backend: b, log: sock.log, sock: sock}, nil
}

// Path returns the socket's path.
func (s *Server) Path() string { return s.sock.Path() }

// Serve accepts connections until Close, and then returns nil. A
// connection from a uid that is neither root nor the socket's owner, or
// one past the connection cap, is answered with an error ("denied" or
// "busy") and closed at once.
func (s *Server) Serve() error {
	s.sock.MaxConns = s.MaxConns
	return s.sock.Serve(s.serveConn, func(c net.Conn, why error) {
		out, _ := json.Marshal(errorResponse(why))
		c.Write(append(out, '\n'))
	})
}

func (s *Server) idleTimeout() time.Duration    { return cmp.Or(s.IdleTimeout, IdleTimeout) }
func (s *Server) requestTimeout() time.Duration { return cmp.Or(s.RequestTimeout, RequestTimeout) }
func (s *Server) writeTimeout() time.Duration   { return cmp.Or(s.WriteTimeout, WriteTimeout) }

// Close stops listening, closes every connection, waits for their
// goroutines and removes the socket.
func (s *Server) Close() error { return s.sock.Close() }

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
