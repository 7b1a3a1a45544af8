//go:build linux

package integration

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"testing"
	"time"
)

// officeServer is TestRATwoGateways' server in the office namespace: an
// echo of one line per connection (one exchange per client) and a sink
// of one stream (the mover's), each noting the source address it saw.
// Its sockets live in the office's namespace; its goroutines are the
// test's, ended when the test ends.
type officeServer struct {
	echo, sink net.Listener
	// mu guards:
	mu       sync.Mutex
	echoed   map[netip.Addr]bool
	sinkFrom netip.Addr
	sunk     int64
	sinkSum  string // the SHA-256 of what the sink got, once its peer closed
}

func startOfficeServer(t *testing.T, office *netns) *officeServer {
	t.Helper()
	s := &officeServer{echoed: map[netip.Addr]bool{}}
	err := office.Do(func() (err error) {
		if s.echo, err = net.Listen("tcp", net.JoinHostPort(twoGWServer, strconv.Itoa(twoGWEchoPort))); err != nil {
			return err
		}
		s.sink, err = net.Listen("tcp", net.JoinHostPort(twoGWServer, strconv.Itoa(twoGWSinkPort)))
		return err
	})
	if err != nil {
		t.Fatalf("listening in %s: %v", office.name, err)
	}
	t.Cleanup(func() { s.echo.Close(); s.sink.Close() })
	go s.serveEcho()
	go s.serveSink()
	return s
}

func remoteAddr(c net.Conn) netip.Addr {
	return c.RemoteAddr().(*net.TCPAddr).AddrPort().Addr().Unmap()
}

// serveEcho answers each connection's line with the same line.
func (s *officeServer) serveEcho() {
	for {
		c, err := s.echo.Accept()
		if err != nil {
			return // closed at the test's end
		}
		go func() {
			defer c.Close()
			c.SetDeadline(time.Now().Add(10 * time.Second))
			line, err := bufio.NewReader(c).ReadString('\n')
			if err != nil {
				return
			}
			if _, err := io.WriteString(c, line); err == nil {
				s.mu.Lock()
				s.echoed[remoteAddr(c)] = true
				s.mu.Unlock()
			}
		}()
	}
}

func (s *officeServer) sawEcho(a netip.Addr) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.echoed[a]
}

// countingWriter counts into the server's sunk bytes.
type countingWriter struct{ s *officeServer }

func (w countingWriter) Write(b []byte) (int, error) {
	w.s.mu.Lock()
	w.s.sunk += int64(len(b))
	w.s.mu.Unlock()
	return len(b), nil
}

// serveSink takes one stream, hashes it to its end and closes.
func (s *officeServer) serveSink() {
	c, err := s.sink.Accept()
	if err != nil {
		return
	}
	defer c.Close()
	s.mu.Lock()
	s.sinkFrom = remoteAddr(c)
	s.mu.Unlock()
	c.SetDeadline(time.Now().Add(2 * time.Minute))
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(h, countingWriter{s}), c); err != nil {
		return
	}
	s.mu.Lock()
	s.sinkSum = hex.EncodeToString(h.Sum(nil))
	s.mu.Unlock()
}

func (s *officeServer) sinkBytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sunk
}

// waitSink waits until the sink got at least n bytes.
func (s *officeServer) waitSink(t *testing.T, n int64, bound time.Duration) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for got := s.sinkBytes(); got < n; got = s.sinkBytes() {
		if time.Now().After(deadline) {
			t.Fatalf("the server's sink got %d bytes in %v; want %d", got, bound, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// echoFrom makes one exchange with the office's echo from each address
// of from, in ns, one after the other.
func echoFrom(ns *netns, from []netip.Addr) error {
	to := net.JoinHostPort(twoGWServer, strconv.Itoa(twoGWEchoPort))
	return ns.Do(func() error {
		for _, a := range from {
			d := net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(a, 0)), Timeout: 10 * time.Second}
			c, err := d.Dial("tcp", to)
			if err != nil {
				return fmt.Errorf("from %v: %w", a, err)
			}
			c.SetDeadline(time.Now().Add(10 * time.Second))
			line := fmt.Sprintf("hello from %v\n", a)
			_, err = io.WriteString(c, line)
			var got string
			if err == nil {
				got, err = bufio.NewReader(c).ReadString('\n')
			}
			c.Close()
			if err != nil || got != line {
				return fmt.Errorf("from %v: echo %q, %v; want %q", a, got, err, line)
			}
		}
		return nil
	})
}

// streamFrom is a paced TCP stream to the office's sink from one
// address: 8 KiB every 10 ms until finish.
type streamFrom struct {
	c    *net.TCPConn
	h    hash.Hash
	sent int64
	stop chan struct{}
	done chan error
}

func startStreamFrom(t *testing.T, ns *netns, from netip.Addr, srv *officeServer) *streamFrom {
	t.Helper()
	st := &streamFrom{h: sha256.New(), stop: make(chan struct{}), done: make(chan error, 1)}
	err := ns.Do(func() error {
		d := net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(from, 0)), Timeout: 10 * time.Second}
		c, err := d.Dial("tcp", net.JoinHostPort(twoGWServer, strconv.Itoa(twoGWSinkPort)))
		if err == nil {
			st.c = c.(*net.TCPConn)
		}
		return err
	})
	if err != nil {
		t.Fatalf("stream from %v: %v", from, err)
	}
	t.Cleanup(func() { st.c.Close() })
	go st.send()
	return st
}

func (st *streamFrom) send() {
	src := rand.NewChaCha8(seedBytes(25))
	buf := make([]byte, 8<<10)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-st.stop:
			st.done <- nil
			return
		case <-tick.C:
		}
		src.Read(buf)
		st.c.SetWriteDeadline(time.Now().Add(30 * time.Second))
		n, err := st.c.Write(buf)
		st.h.Write(buf[:n])
		st.sent += int64(n)
		if err != nil {
			st.done <- fmt.Errorf("after %d bytes: %w", st.sent, err)
			return
		}
	}
}

// finish ends the stream and checks that the sink got all of it, from
// the stream's own source address.
func (st *streamFrom) finish(t *testing.T, srv *officeServer) {
	t.Helper()
	close(st.stop)
	if err := <-st.done; err != nil {
		t.Fatalf("the stream: %v", err)
	}
	if err := st.c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	st.c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.Copy(io.Discard, st.c); err != nil && !errors.Is(err, io.EOF) {
		t.Fatalf("waiting for the sink to close: %v", err)
	}
	want := hex.EncodeToString(st.h.Sum(nil))
	srv.mu.Lock()
	sum, n, from := srv.sinkSum, srv.sunk, srv.sinkFrom
	srv.mu.Unlock()
	if sum != want || n != st.sent {
		t.Fatalf("the sink got %d bytes, SHA-256 %s; sent %d, %s", n, sum, st.sent, want)
	}
	if local := st.c.LocalAddr().(*net.TCPAddr).AddrPort().Addr().Unmap(); from != local {
		t.Fatalf("the server saw the stream from %v; it left from %v", from, local)
	}
}
