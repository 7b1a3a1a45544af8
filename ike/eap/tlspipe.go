package eap

import (
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"time"
)

// tlsStepTimeout bounds how long one EAP packet may keep crypto/tls
// busy: a handshake step is CPU work on bytes already here, never a wait
// on the network.
const tlsStepTimeout = 10 * time.Second

var errPipeClosed = errors.New("eap: TLS conversation closed")

// tlsPipe runs crypto/tls over EAP packets. crypto/tls wants a net.Conn
// and blocks in Handshake, so it runs in one goroutine per conversation
// whose Read waits for the next reassembled EAP-TLS message; step feeds
// one and returns what TLS wrote in answer once it asks for more or the
// handshake (and the RFC 9190 success byte) is done. close ends the
// goroutine; it never outlives the conversation.
type tlsPipe struct {
	conn   *tls.Conn
	in     chan []byte   // a message for the goroutine's Read
	idle   chan struct{} // the goroutine waits in Read for more
	done   chan struct{} // the goroutine returned; err says how
	closed chan struct{}
	once   sync.Once
	err    error

	mu  sync.Mutex
	out []byte // what TLS wrote since the last step
	buf []byte // the message being read
}

// newTLSPipe starts run(conn) in its goroutine; run does the handshake
// and whatever the side reads or writes after it.
func newTLSPipe(wrap func(net.Conn) *tls.Conn, run func(*tls.Conn) error) *tlsPipe {
	p := &tlsPipe{in: make(chan []byte), idle: make(chan struct{}), done: make(chan struct{}), closed: make(chan struct{})}
	p.conn = wrap(pipeConn{p})
	go func() {
		defer close(p.done)
		p.err = run(p.conn)
	}()
	return p
}

// step hands msg (nil for none: the first step) to TLS and returns what
// it wrote, and finished once run returned (its error in p.err).
func (p *tlsPipe) step(msg []byte) (out []byte, finished bool, err error) {
	timer := time.NewTimer(tlsStepTimeout)
	defer timer.Stop()
	if msg != nil {
		select {
		case p.in <- msg:
		case <-p.done:
			return nil, true, p.err
		case <-timer.C:
			return nil, false, errors.New("eap: TLS did not read the message")
		}
	}
	select {
	case <-p.idle:
	case <-p.done:
		finished = true
	case <-timer.C:
		return nil, false, errors.New("eap: TLS step timed out")
	}
	p.mu.Lock()
	out, p.out = p.out, nil
	p.mu.Unlock()
	if finished {
		return out, true, p.err
	}
	return out, false, nil
}

// close ends the goroutine (its Read returns an error) and waits for it.
func (p *tlsPipe) close() {
	p.once.Do(func() { close(p.closed) })
	<-p.done
}

// pipeConn is the net.Conn crypto/tls sees.
type pipeConn struct{ p *tlsPipe }

func (c pipeConn) Read(b []byte) (int, error) {
	p := c.p
	if len(p.buf) == 0 {
		select {
		case p.idle <- struct{}{}:
		case <-p.closed:
			return 0, errPipeClosed
		}
		select {
		case p.buf = <-p.in:
		case <-p.closed:
			return 0, errPipeClosed
		}
	}
	n := copy(b, p.buf)
	p.buf = p.buf[n:]
	return n, nil
}

func (c pipeConn) Write(b []byte) (int, error) {
	select {
	case <-c.p.closed:
		return 0, errPipeClosed
	default:
	}
	c.p.mu.Lock()
	c.p.out = append(c.p.out, b...)
	c.p.mu.Unlock()
	return len(b), nil
}

func (c pipeConn) Close() error {
	c.p.once.Do(func() { close(c.p.closed) })
	return nil
}

func (pipeConn) LocalAddr() net.Addr              { return eapAddr{} }
func (pipeConn) RemoteAddr() net.Addr             { return eapAddr{} }
func (pipeConn) SetDeadline(time.Time) error      { return nil }
func (pipeConn) SetReadDeadline(time.Time) error  { return nil }
func (pipeConn) SetWriteDeadline(time.Time) error { return nil }

type eapAddr struct{}

func (eapAddr) Network() string { return "eap" }
func (eapAddr) String() string  { return "eap-tls" }
