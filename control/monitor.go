package control

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// MonitorQueue is how many events wait for one monitor client. A client
// that falls further behind (a slow terminal, a stopped process) loses
// the events beyond, and is told how many in an "events_lost" event once
// it reads again: the daemon never waits for a monitor client.
const MonitorQueue = 1024

// Event is one line of `ipsecd monitor --json`: what changed in the
// daemon, as ip xfrm monitor reports it. Type says which fields are set.
type Event struct {
	Time time.Time `json:"time"`
	// Type is state_added, state_deleted, state_updated, state_expired,
	// policy_added, policy_deleted, interface_up, interface_down or
	// events_lost; or IKE's own: ike_up, ike_down, ike_failed,
	// ike_rekeyed, child_up, child_down, child_rekeyed, child_failed,
	// whose Reason says why (ike_down, ike_failed, child_down,
	// child_failed: deleted by peer, terminated, reload, shutdown,
	// expired, timeout, initial contact, limit, authentication failed,
	// no proposal chosen, TS unacceptable, invalid KE, install failed,
	// error; child_rekeyed: rekeyed by us, rekeyed by peer) and Detail
	// the rest (the Detail* keys).
	Type string `json:"type"`
	// State names the SA of the state_* events.
	State *EventState `json:"state,omitempty"`
	// Policy is the policy of the policy_* events.
	Policy *PolicySpec `json:"policy,omitempty"`
	// Interface and IfID name the interface of the interface_* events.
	Interface string `json:"interface,omitempty"`
	IfID      uint32 `json:"if_id,omitempty"`
	// Expire is soft or hard (state_expired); Reason the limit reached,
	// or why a state was deleted (deleted, flushed, reload, hard lifetime
	// expired, ...).
	Expire string `json:"expire,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Lost counts the events this client missed (events_lost).
	Lost uint64 `json:"lost,omitempty"`
	// Detail holds what an event type without fields of its own says:
	// IKE's events, under the Detail* keys, those that are set.
	Detail map[string]string `json:"detail,omitempty"`
}

// Keys of Event.Detail for IKE's events. The identities are as ike list
// shows them (escaped: a peer chooses its identity's bytes), IKE SPIs
// as 16 hex digits, ESP SPIs as 0x... .
const (
	DetailConnection = "connection" // the connection's name
	DetailChild      = "child"      // the child's name (child_*; child_failed: when it is ours)
	DetailIKESPII    = "ike_spi_i"  // the IKE SA's initiator SPI
	DetailIKESPIR    = "ike_spi_r"  // its responder SPI (0000000000000000 before IKE_SA_INIT's answer)
	DetailOldIKESPII = "old_ike_spi_i"
	DetailOldIKESPIR = "old_ike_spi_r" // the IKE SA ike_rekeyed replaced
	DetailLocal      = "local"         // our address and IKE port
	DetailRemote     = "remote"        // the peer's
	DetailLocalID    = "local_id"      // our identity
	DetailPeerID     = "peer_id"       // the peer's, once authenticated
	DetailEAPID      = "eap_id"        // the EAP identity the peer proved (a road warrior's user)
	DetailVIPs       = "vips"          // the virtual IPs leased to the peer, or given to us (space-separated)
	DetailSPIIn      = "spi_in"        // the child's inbound ESP SPI
	DetailSPIOut     = "spi_out"       // its outbound ESP SPI
	DetailOldSPIIn   = "old_spi_in"
	DetailOldSPIOut  = "old_spi_out" // the child child_rekeyed replaced
	DetailError      = "error"       // the error that ended or refused it
)

// DetailOrder is the order in which ipsecd monitor prints the Detail
// keys it knows (others follow, sorted); the error comes last, after
// the reason.
var DetailOrder = []string{DetailConnection, DetailChild, DetailIKESPII, DetailIKESPIR, DetailOldIKESPII, DetailOldIKESPIR,
	DetailLocal, DetailRemote, DetailLocalID, DetailPeerID, DetailEAPID, DetailVIPs, DetailSPIIn, DetailSPIOut, DetailOldSPIIn, DetailOldSPIOut}

// EventState names an SA in an event: as every message names it, with
// its source and if_id.
type EventState struct {
	SPI  string `json:"spi"`
	Dir  string `json:"dir"`
	Dst  string `json:"dst"`
	Src  string `json:"src"`
	IfID uint32 `json:"if_id"`
	Mode string `json:"mode,omitempty"`
}

// errNoMonitor refuses a monitor request of a Server without Events.
var errNoMonitor = errors.New("this server has no event stream")

// Monitor hands the daemon's events to the clients of the monitor
// command. Publish never blocks: each client has a queue of MonitorQueue
// events, and one that is full drops the event and counts it. The zero
// value is ready to use; safe for concurrent use.
type Monitor struct {
	mu sync.Mutex
	// mu guards: subs.
	subs map[*subscription]struct{}
}

// subscription is one monitor client's queue.
type subscription struct {
	ch chan Event
	mu sync.Mutex
	// mu guards: lost.
	lost uint64
}

// Publish sends ev to every client, stamping its time if unset. It
// never blocks.
func (m *Monitor) Publish(ev Event) {
	if ev.Time.IsZero() {
		ev.Time = time.Now()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for s := range m.subs {
		select {
		case s.ch <- ev:
		default:
			s.mu.Lock()
			s.lost++
			s.mu.Unlock()
		}
	}
}

// Clients returns how many clients are subscribed.
func (m *Monitor) Clients() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.subs)
}

func (m *Monitor) subscribe() *subscription {
	s := &subscription{ch: make(chan Event, MonitorQueue)}
	m.mu.Lock()
	if m.subs == nil {
		m.subs = map[*subscription]struct{}{}
	}
	m.subs[s] = struct{}{}
	m.mu.Unlock()
	return s
}

func (m *Monitor) unsubscribe(s *subscription) {
	m.mu.Lock()
	delete(m.subs, s)
	m.mu.Unlock()
}

// Subscription is one subscriber's queue of events (Monitor.Subscribe),
// for consumers of the events other than the monitor command (package
// vici). Safe for concurrent use.
type Subscription struct{ s *subscription }

// Subscribe returns a new queue of MonitorQueue events; Cancel ends it.
func (m *Monitor) Subscribe() Subscription { return Subscription{m.subscribe()} }

// Events is where the events arrive.
func (s Subscription) Events() <-chan Event { return s.s.ch }

// Lost returns how many events were dropped, the queue being full,
// since the last call.
func (s Subscription) Lost() uint64 { return s.s.takeLost() }

// Cancel ends the subscription of m: no event is queued after it.
func (s Subscription) Cancel(m *Monitor) { m.unsubscribe(s.s) }

// takeLost returns the events dropped since the last call.
func (s *subscription) takeLost() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.lost
	s.lost = 0
	return n
}

// stream answers a monitor request on c: an "ok" line, then one Event per
// line until the client closes the connection, a write takes longer than
// the write timeout (the client stopped reading: it is dropped), or the
// server closes. What the client sends after the request is ignored, but
// read, so that its close is seen at once.
func (s *Server) stream(c net.Conn, w *bufio.Writer) {
	if s.Events == nil {
		s.writeLine(c, w, errorResponse(invalid(errNoMonitor)))
		return
	}
	sub := s.Events.subscribe()
	defer s.Events.unsubscribe(sub)
	if s.writeLine(c, w, Response{OK: true}) != nil {
		return
	}
	closed := make(chan struct{})
	go func() {
		// The reader: it sees the client close (EOF) or the server
		// close the connection.
		c.SetReadDeadline(time.Time{})
		buf := make([]byte, 512)
		for {
			if _, err := c.Read(buf); err != nil {
				close(closed)
				return
			}
		}
	}()
	for {
		select {
		case <-closed:
			return
		case ev := <-sub.ch:
			if s.writeLine(c, w, ev) != nil {
				return
			}
			// Events were dropped only while the queue was full, so
			// they come after what it held: say so once it is drained.
			if len(sub.ch) == 0 {
				if lost := sub.takeLost(); lost != 0 {
					if s.writeLine(c, w, Event{Time: time.Now(), Type: "events_lost", Lost: lost}) != nil {
						return
					}
				}
			}
		}
	}
}

// writeLine writes v as one JSON line within the write timeout.
func (s *Server) writeLine(c net.Conn, w *bufio.Writer, v any) error {
	out, err := json.Marshal(v)
	if err != nil {
		return err
	}
	c.SetWriteDeadline(time.Now().Add(s.writeTimeout()))
	w.Write(out)
	w.WriteByte('\n')
	return w.Flush()
}

// EventStream is a monitor connection: the daemon's events as they come.
// Not safe for concurrent use; Close may be called from another
// goroutine to end a blocked Next.
type EventStream struct {
	conn net.Conn
	r    *bufio.Reader
}

// OpenMonitor opens an event stream from the daemon at path, on a connection
// of its own.
func OpenMonitor(path string) (*EventStream, error) {
	conn, r, err := dial(path)
	if err != nil {
		return nil, err
	}
	conn.SetDeadline(time.Now().Add(DefaultTimeout))
	if _, err := conn.Write([]byte(`{"cmd":"monitor"}` + "\n")); err != nil {
		conn.Close()
		return nil, fmt.Errorf("control: %w", err)
	}
	line, err := r.ReadBytes('\n')
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("control: reading answer: %w", err)
	}
	var resp Response
	if err := json.Unmarshal(line, &resp); err != nil {
		conn.Close()
		return nil, fmt.Errorf("control: bad answer: %w", err)
	}
	if !resp.OK {
		conn.Close()
		return nil, &RemoteError{Code: resp.Code, Msg: resp.Error}
	}
	conn.SetDeadline(time.Time{}) // events come when they come
	return &EventStream{conn: conn, r: r}, nil
}

// Next waits for the next event. It returns io.EOF when the daemon
// closed the stream (it stopped).
func (es *EventStream) Next() (Event, error) {
	var ev Event
	line, err := es.r.ReadBytes('\n')
	if err != nil {
		return ev, err
	}
	if err := json.Unmarshal(line, &ev); err != nil {
		return ev, fmt.Errorf("control: bad event: %w", err)
	}
	return ev, nil
}

// Close ends the stream.
func (es *EventStream) Close() error { return es.conn.Close() }
