package control

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/ipsecd/ipsecd/sa"
)

// DefaultTimeout bounds one request's round trip.
const DefaultTimeout = 30 * time.Second

// Client talks to a Server. Safe for concurrent use: requests are sent one
// at a time over one connection.
type Client struct {
	Timeout time.Duration // per request; zero means DefaultTimeout

	mu   sync.Mutex // guards conn, r
	conn net.Conn
	r    *bufio.Reader
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
	}
	return false
}

// Dial connects to the control socket at path.
func Dial(path string) (*Client, error) {
	c, err := net.DialTimeout("unix", path, 5*time.Second)
	if err != nil {
		return nil, fmt.Errorf("control: %w (is ipsecd running?)", err)
	}
	return &Client{conn: c, r: bufio.NewReaderSize(c, 64<<10)}, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

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
	c.conn.SetDeadline(time.Now().Add(timeout))
	if _, err := c.conn.Write(append(line, '\n')); err != nil {
		return nil, fmt.Errorf("control: %w", err)
	}
	answer, err := c.r.ReadBytes('\n')
	if err != nil {
		return nil, fmt.Errorf("control: reading answer: %w", err)
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

// Stats returns the global counters.
func (c *Client) Stats() ([]Counter, error) {
	var out []Counter
	err := c.call(Request{Cmd: "stats"}, &out)
	return out, err
}

// Interfaces lists the interfaces with their counters.
func (c *Client) Interfaces() ([]InterfaceInfo, error) {
	var out []InterfaceInfo
	err := c.call(Request{Cmd: "interface.list"}, &out)
	return out, err
}
