package eapradius

import (
	"bytes"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
	"layeh.com/radius"
)

// server is one configured server and what the client learnt of it.
type server struct {
	name        string
	address     string
	acctAddress string
	secret      []byte
	stats       serverCounters
	// mu guards deadUntil (asked only after the others until then)
	// and mismatchLogged (the first authenticator mismatch was logged).
	mu             sync.Mutex
	deadUntil      time.Time
	mismatchLogged bool
}

func newServer(s Server) (*server, error) {
	if s.Address == "" || len(s.Secret) == 0 {
		return nil, errors.New("eapradius: a server needs an address and a secret")
	}
	acct, err := acctAddress(s)
	if err != nil {
		return nil, err
	}
	name := s.Name
	if name == "" {
		name = s.Address
	}
	return &server{name: name, address: s.Address, acctAddress: acct, secret: bytes.Clone(s.Secret)}, nil
}

func (s *server) isDead(now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return now.Before(s.deadUntil)
}

// markDead marks s dead until t; true when it was alive (the news worth
// a log line).
func (s *server) markDead(t time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	wasAlive := !time.Now().Before(s.deadUntil)
	s.deadUntil = t
	return wasAlive
}

// answered counts a verified answer and marks s alive.
func (s *server) answered(code radius.Code) {
	s.mu.Lock()
	s.deadUntil = time.Time{}
	s.mu.Unlock()
	switch code {
	case radius.CodeAccessAccept:
		s.stats.accepts.Add(1)
	case radius.CodeAccessReject:
		s.stats.rejects.Add(1)
	case radius.CodeAccessChallenge:
		s.stats.challenges.Add(1)
	case radius.CodeAccountingResponse:
		s.stats.acctResponses.Add(1)
	}
}

// rejected counts an answer dropped for err; the first mismatch of a
// server is logged, since it most likely means a wrong shared secret,
// and later ones only counted (a forger must not flood the log).
func (s *server) rejected(err error, log logrus.FieldLogger) {
	if !errors.Is(err, ErrMismatch) {
		s.stats.malformed.Add(1)
		return
	}
	s.stats.mismatches.Add(1)
	s.mu.Lock()
	first := !s.mismatchLogged
	s.mismatchLogged = true
	s.mu.Unlock()
	if first {
		log.WithFields(logrus.Fields{"server": s.name, "error": err.Error()}).Error("radius: answer failed authentication; check the shared secret (logged once per server, counted in mismatches)")
	}
}

type serverCounters struct {
	requests, retransmits, timeouts             atomic.Uint64
	accepts, rejects, challenges, acctResponses atomic.Uint64
	mismatches, malformed                       atomic.Uint64
}

// ServerStats are one server's counters since the client started.
type ServerStats struct {
	Name string
	// Requests counts datagrams sent, Retransmits those of them that
	// were repeats, Timeouts the requests the server never answered.
	Requests, Retransmits, Timeouts uint64
	// Accepts, Rejects, Challenges and AcctResponses count verified
	// answers by code.
	Accepts, Rejects, Challenges, AcctResponses uint64
	// Mismatches counts answers dropped for a Response Authenticator or
	// Message-Authenticator that did not check out (a wrong shared
	// secret, or forgery); Malformed those that broke the format.
	Mismatches, Malformed uint64
}

func (s *server) snapshot() ServerStats {
	c := &s.stats
	return ServerStats{
		Name: s.name, Requests: c.requests.Load(), Retransmits: c.retransmits.Load(), Timeouts: c.timeouts.Load(),
		Accepts: c.accepts.Load(), Rejects: c.rejects.Load(), Challenges: c.challenges.Load(), AcctResponses: c.acctResponses.Load(),
		Mismatches: c.mismatches.Load(), Malformed: c.malformed.Load(),
	}
}
