package control

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/ipsecd/ipsecd/sa"
)

// DefaultTimeout bounds one request's round trip.
const DefaultTimeout = 30 * time.Second

// Client talks to a Server. Safe for concurrent use: requests are sent one
// at a time over one connection.
type Client struct {
	Timeout time.Duration // per request; zero means DefaultTimeout

	path string // to dial again after the server closed an idle connection

	mu     sync.Mutex // guards conn, r, broken, closed
	conn   net.Conn
	r      *bufio.Reader
	broken bool // conn failed midway: dial again before the next request
	closed bool // Close was called: dial no more
}

// RemoteError is an error the server answered with. errors.Is matches it
// against ErrNotFound, ErrExists and ErrInvalid by its code.
type RemoteError struct {
	Code string
	Msg  string
}

func (e *RemoteError) Error() string { return e.Msg }

// Is matches the sentinel errors by code.
func (e *RemoteError) Is(target error) bool {
	switch target {
	case ErrNotFound:
		return e.Code == "not_found"
	case ErrExists:
		return e.Code == "exists"
	case ErrInvalid:
		return e.Code == "invalid"
	case ErrBusy:
		return e.Code == "busy"
	case ErrDenied:
		return e.Code == "denied"
	}
	return false
}

// Dial connects to the control socket at path.
func Dial(path string) (*Client, error) {
	conn, r, err := dial(path)
	if err != nil {
		return nil, err
	}
	return &Client{path: path, conn: conn, r: r}, nil
}

func dial(path string) (net.Conn, *bufio.Reader, error) {
	c, err := net.DialTimeout("unix", path, 5*time.Second)
	if err != nil {
		return nil, nil, fmt.Errorf("control: %w (is ipsecd running?)", err)
	}
	return c, bufio.NewReaderSize(c, 64<<10), nil
}

// Close closes the connection; later requests fail.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	return c.conn.Close()
}

// Do sends req and returns the result of a successful answer, as JSON, or
// the server's error as a *RemoteError.
func (c *Client) Do(req Request) (json.RawMessage, error) {
	line, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	timeout := c.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	answer, err := c.roundTripLocked(append(line, '\n'), time.Now().Add(timeout))
	if err != nil {
		return nil, err
	}
	var resp Response
	if err := json.Unmarshal(answer, &resp); err != nil {
		return nil, fmt.Errorf("control: bad answer: %w", err)
	}
	if !resp.OK {
		return nil, &RemoteError{Code: resp.Code, Msg: resp.Error}
	}
	return resp.Result, nil
}

// roundTripLocked sends line and reads the answer line. A connection
// that failed midway is closed and replaced at the next request, so that a
// late answer is never taken for the next request's.
func (c *Client) roundTripLocked(line []byte, deadline time.Time) ([]byte, error) {
	if c.closed {
		return nil, fmt.Errorf("control: %w", net.ErrClosed)
	}
	if c.broken {
		if err := c.redialLocked(); err != nil {
			return nil, err
		}
	}
	c.conn.SetDeadline(deadline)
	_, err := c.conn.Write(line)
	if err != nil && errors.Is(err, syscall.EPIPE) {
		// The server closed the connection before this request. If it
		// refused it (busy, denied), its answer is waiting and says more
		// than EPIPE; if it closed it for being idle, the request never
		// reached it and is safe to send once more on a new connection.
		if answer, rerr := c.r.ReadBytes('\n'); rerr == nil {
			return answer, nil
		}
		if err := c.redialLocked(); err != nil {
			return nil, err
		}
		c.conn.SetDeadline(deadline)
		_, err = c.conn.Write(line)
	}
	if err != nil {
		c.broken = true
		if answer, rerr := c.r.ReadBytes('\n'); rerr == nil {
			return answer, nil // a refusal sent before the close
		}
		return nil, fmt.Errorf("control: %w", err)
	}
	answer, err := c.r.ReadBytes('\n')
	if err != nil {
		c.broken = true
		return nil, fmt.Errorf("control: reading answer: %w", err)
	}
	return answer, nil
}

// redialLocked replaces the connection with a new one to the same path.
func (c *Client) redialLocked() error {
	conn, r, err := dial(c.path)
	if err != nil {
		return err
	}
	c.conn.Close()
	c.conn, c.r, c.broken = conn, r, false
	return nil
}

func (c *Client) call(req Request, result any) error {
	raw, err := c.Do(req)
	if err != nil {
		return err
	}
	if result == nil || len(raw) == 0 {
		return nil
	}
	if err := json.Unmarshal(raw, result); err != nil {
		return fmt.Errorf("control: bad result: %w", err)
	}
	return nil
}

// Ping checks that the daemon answers.
func (c *Client) Ping() error { return c.call(Request{Cmd: "ping"}, nil) }

// States lists the SAs, with keys only if keys is true.
func (c *Client) States(keys bool) ([]StateInfo, error) {
	var out []StateInfo
	err := c.call(Request{Cmd: "state.list", Keys: keys}, &out)
	return out, err
}

// GetState returns one SA.
func (c *Client) GetState(id StateID, keys bool) (StateInfo, error) {
	var out StateInfo
	err := c.call(Request{Cmd: "state.get", ID: NewStateIDSpec(id), Keys: keys}, &out)
	return out, err
}

// AddState installs an SA.
func (c *Client) AddState(cfg sa.Config) error {
	spec := NewStateSpec(cfg, true)
	return c.call(Request{Cmd: "state.add", State: &spec}, nil)
}

// DeleteState removes an SA.
func (c *Client) DeleteState(id StateID) error {
	return c.call(Request{Cmd: "state.delete", ID: NewStateIDSpec(id)}, nil)
}

// Policies lists the policies.
func (c *Client) Policies() ([]sa.Policy, error) {
	var specs []PolicySpec
	if err := c.call(Request{Cmd: "policy.list"}, &specs); err != nil {
		return nil, err
	}
	ps := make([]sa.Policy, len(specs))
	for i := range specs {
		p, err := specs[i].Policy()
		if err != nil {
			return nil, fmt.Errorf("control: bad policy in answer: %w", err)
		}
		ps[i] = p
	}
	return ps, nil
}

// AddPolicy installs a policy.
func (c *Client) AddPolicy(p sa.Policy) error {
	spec := NewPolicySpec(p)
	return c.call(Request{Cmd: "policy.add", Policy: &spec}, nil)
}

// DeletePolicy removes the policy with p's Dir, IfID and Selector.
func (c *Client) DeletePolicy(p sa.Policy) error {
	spec := NewPolicySpec(p)
	if p.Action == 0 {
		spec.Action = ""
	}
	return c.call(Request{Cmd: "policy.delete", Policy: &spec}, nil)
}

// Stats returns the global counters in /proc/net/xfrm_stat order.
func (c *Client) Stats() ([]Counter, error) {
	var out Counters
	err := c.call(Request{Cmd: "stats"}, &out)
	return out, err
}

// Interfaces lists the interfaces with their counters.
func (c *Client) Interfaces() ([]InterfaceInfo, error) {
	var out []InterfaceInfo
	err := c.call(Request{Cmd: "interface.list"}, &out)
	return out, err
}
