package vici

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/ipsecd/ipsecd/control"
)

// conn is one client's connection. Its reader (serve) runs one command
// at a time; events of the daemon come from a pump goroutine of its own
// once the client registers for one of them. Packets are written whole,
// one at a time, under wmu.
type conn struct {
	s    *Server
	c    net.Conn
	done chan struct{} // closed when the connection ends

	wmu sync.Mutex // serialises writes

	mu sync.Mutex
	// mu guards:
	registered map[string]bool // the events the client registered for
	pumping    bool            // the event pump runs
	pumpDone   chan struct{}
}

// serve reads packets until the client closes, idles past the idle
// timeout, sends a segment slower than the request timeout, or breaks
// the protocol.
func (cn *conn) serve() {
	r := bufio.NewReaderSize(cn.c, 4096)
	var buf []byte
	for {
		// Wait for a segment's first byte, then give the rest its own,
		// shorter, deadline.
		cn.c.SetReadDeadline(time.Now().Add(cn.s.idleTimeout()))
		if _, err := r.Peek(1); err != nil {
			return
		}
		cn.c.SetReadDeadline(time.Now().Add(cn.s.requestTimeout()))
		var err error
		buf, err = ReadSegment(r, buf)
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			cn.s.log.Debugf("vici: packet not complete within %v; closing", cn.s.requestTimeout())
			return
		case err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF):
			cn.s.log.WithError(err).Debug("vici: closing the connection")
			return
		case err != nil:
			return
		}
		cn.c.SetReadDeadline(time.Time{})
		if !cn.handle(buf) {
			return
		}
	}
}

// handle answers one packet; false ends the connection. A panic (a bug:
// the codec is fuzzed so that none is left) ends the connection, not the
// daemon.
func (cn *conn) handle(seg []byte) (ok bool) {
	defer func() {
		if r := recover(); r != nil {
			cn.s.log.WithField("panic", r).Error("vici: packet handling panicked; closing the connection")
			ok = false
		}
	}()
	p, err := ParsePacket(seg)
	if err != nil {
		cn.s.log.WithError(err).Debug("vici: malformed packet")
		// The segment was read whole, so the stream is in step: a
		// request or registration gets its answer, anything else
		// from a client that breaks the protocol ends it.
		switch PacketType(seg[0]) {
		case CmdRequest:
			return cn.write(&Packet{Type: CmdResponse, Message: failure(err.Error())}) == nil
		case EventRegister, EventUnregister:
			return cn.write(&Packet{Type: EventUnknown}) == nil
		}
		return false
	}
	switch p.Type {
	case CmdRequest:
		resp, ok := cn.command(p)
		if !ok {
			return cn.write(&Packet{Type: CmdUnknown}) == nil
		}
		return cn.write(&Packet{Type: CmdResponse, Message: resp}) == nil
	case EventRegister, EventUnregister:
		if !events[p.Name] {
			return cn.write(&Packet{Type: EventUnknown}) == nil
		}
		cn.register(p.Name, p.Type == EventRegister)
		return cn.write(&Packet{Type: EventConfirm}) == nil
	}
	cn.s.log.Debugf("vici: a client sent %v, which only the server sends; closing", p.Type)
	return false
}

// command runs a request's command and returns its answer; false for a
// command there is no handler for (CMD_UNKNOWN). A panic is answered as
// an internal error: the daemon keeps running.
func (cn *conn) command(p *Packet) (resp *Message, ok bool) {
	h, ok := commands[p.Name]
	if !ok {
		return nil, false
	}
	defer func() {
		if r := recover(); r != nil {
			cn.s.log.WithField("panic", r).WithField("cmd", p.Name).Error("vici: command panicked")
			resp = failure("internal error")
		}
	}()
	return h(&request{conn: cn, name: p.Name, msg: p.Message}), true
}

// write sends p within the write timeout. A packet too large for a
// segment is logged and not sent: it is the server's fault, not the
// client's.
func (cn *conn) write(p *Packet) error {
	seg, err := EncodeSegment(p)
	if err != nil {
		cn.s.log.WithError(err).Error("vici: answer not sent")
		if p.Type != CmdResponse {
			return nil
		}
		if seg, err = EncodeSegment(&Packet{Type: CmdResponse, Message: failure("answer too large: " + err.Error())}); err != nil {
			return err
		}
	}
	cn.wmu.Lock()
	defer cn.wmu.Unlock()
	cn.c.SetWriteDeadline(time.Now().Add(cn.s.writeTimeout()))
	_, err = cn.c.Write(seg)
	return err
}

// isRegistered reports whether the client registered for event.
func (cn *conn) isRegistered(event string) bool {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	return cn.registered[event]
}

// emit sends event to the client if it registered for it.
func (cn *conn) emit(event string, m *Message) error {
	if !cn.isRegistered(event) {
		return nil
	}
	return cn.write(&Packet{Type: Event, Name: event, Message: m})
}

// register records a (de)registration, and starts the event pump at the
// first registration for one of the daemon's events.
func (cn *conn) register(event string, on bool) {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	if !on {
		delete(cn.registered, event)
		return
	}
	cn.registered[event] = true
	if daemonEvents[event] && !cn.pumping && cn.s.Events != nil {
		cn.pumping = true
		cn.pumpDone = make(chan struct{})
		sub := cn.s.Events.Subscribe()
		go cn.pumpEvents(sub)
	}
}

// pumpEvents turns the daemon's events into the client's, until the
// connection ends. A client that does not take an event within the
// write timeout is dropped; one that falls MonitorQueue events behind
// loses those beyond (vici has no way to say so; the log does).
func (cn *conn) pumpEvents(sub control.Subscription) {
	defer close(cn.pumpDone)
	defer sub.Cancel(cn.s.Events)
	for {
		select {
		case <-cn.done:
			return
		case ev := <-sub.Events():
			for _, out := range cn.s.translate(ev, cn.isRegistered) {
				if err := cn.write(&Packet{Type: Event, Name: out.name, Message: out.msg}); err != nil {
					cn.c.Close() // ends the reader too
					return
				}
			}
			if lost := sub.Lost(); lost != 0 {
				cn.s.log.Warnf("vici: a client fell behind and lost %d events", lost)
			}
		}
	}
}

// close ends the connection and waits for its event pump.
func (cn *conn) close() {
	close(cn.done)
	cn.c.Close()
	cn.mu.Lock()
	pumping, done := cn.pumping, cn.pumpDone
	cn.mu.Unlock()
	if pumping {
		<-done
	}
}

// failure is the answer of a command that failed: success=no and errmsg.
func failure(errmsg string) *Message {
	return NewMessage().Set("success", "no").Set("errmsg", errmsg)
}

// success is the answer of a command that did what it was asked.
func success() *Message { return NewMessage().Set("success", "yes") }
