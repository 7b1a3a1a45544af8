package control_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/control"
	"github.com/ipsecd/ipsecd/control/controltest"
)

// TestHalfSentRequestsAreBounded opens 64 connections that each send most
// of a request and never finish it, and measures what the daemon holds for
// them: the heap and the goroutines must stay within the bound of the
// connection cap and the line limit, not grow by a megabyte and a
// goroutine per connection. Two sizes: just under the 1 MiB line limit the
// server once had, and just under today's.
func TestHalfSentRequestsAreBounded(t *testing.T) {
	for _, size := range []int{1 << 20, control.MaxLine} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			srv := controltest.Start(t, &controltest.Backend{})
			const conns = 64
			payload := append([]byte(`{"cmd":"ping","x":"`), bytes.Repeat([]byte("a"), size-64)...)

			runtime.GC()
			var before runtime.MemStats
			runtime.ReadMemStats(&before)
			goroutines := runtime.NumGoroutine()

			held := make([]net.Conn, 0, conns)
			defer func() {
				for _, c := range held {
					c.Close()
				}
			}()
			var wg sync.WaitGroup
			for range conns {
				c, err := net.Dial("unix", srv.Path())
				if err != nil {
					t.Fatal(err)
				}
				held = append(held, c)
				wg.Add(1)
				go func() {
					defer wg.Done()
					// The write ends when the server has read it all, or
					// has refused or cut the connection short.
					c.SetWriteDeadline(time.Now().Add(10 * time.Second))
					c.Write(payload)
				}()
			}
			wg.Wait()
			// The writes return once the data is in the server's
			// socket; give its goroutines a moment to read it.
			time.Sleep(100 * time.Millisecond)

			runtime.GC()
			var after runtime.MemStats
			runtime.ReadMemStats(&after)
			grown := int64(after.HeapInuse) - int64(before.HeapInuse)
			server := runtime.NumGoroutine() - goroutines
			t.Logf("%d half-sent requests of %d bytes: heap grew by %.1f MiB, %d goroutines more", conns, len(payload), float64(grown)/(1<<20), server)
			if grown > 8<<20 {
				t.Errorf("heap grew by %.1f MiB for %d half-sent requests, want at most 8 MiB", float64(grown)/(1<<20), conns)
			}
			if max := control.MaxConns; server > max {
				t.Errorf("%d goroutines more for %d half-sent requests, want at most %d (the connection cap)", server, conns, max)
			}
		})
	}
}

// startLimited serves b on a fresh socket with the limits set changes.
func startLimited(t *testing.T, set func(*control.Server)) *control.Server {
	t.Helper()
	dir, err := os.MkdirTemp("", "ipsecd-ctl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	srv, err := control.Listen(filepath.Join(dir, "ipsecd.sock"), &controltest.Backend{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	set(srv)
	done := make(chan error, 1)
	go func() { done <- srv.Serve() }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return srv
}

// readAll reads what the server sends on c until it closes c, waiting at
// most 5 s, and returns it with the time it took.
func readAll(t *testing.T, c net.Conn) (string, time.Duration) {
	t.Helper()
	start := time.Now()
	c.SetReadDeadline(start.Add(5 * time.Second))
	data, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("the server did not close the connection: %v (read %q)", err, data)
	}
	return string(data), time.Since(start)
}

// assertBusy checks that a new client is refused at once with ErrBusy.
func assertBusy(t *testing.T, srv *control.Server) {
	t.Helper()
	c, err := control.Dial(srv.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	err = c.Ping()
	if !errors.Is(err, control.ErrBusy) || !strings.Contains(err.Error(), "too many connections") {
		t.Fatalf("Ping over the cap: got %v, want ErrBusy", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Ping over the cap took %v; the refusal must be immediate", d)
	}
}

// TestHalfSentRequestTimesOut: a connection that starts a request and
// never finishes it holds the only slot until the request timeout, gets an
// error naming the timeout, and frees the slot.
func TestHalfSentRequestTimesOut(t *testing.T) {
	const timeout = 300 * time.Millisecond
	srv := startLimited(t, func(s *control.Server) { s.MaxConns = 1; s.RequestTimeout = timeout })
	// The server's clock starts once it has accepted the connection, so
	// after dialed: the time from dialed to the close is never shorter
	// than the timeout, however long the steps between take on a loaded
	// machine (timed from the read alone, it was).
	dialed := time.Now()
	half, err := net.Dial("unix", srv.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer half.Close()
	if _, err := half.Write([]byte(`{"cmd":"pi`)); err != nil {
		t.Fatal(err)
	}
	// While it is pending, it holds the slot.
	time.Sleep(50 * time.Millisecond)
	assertBusy(t, srv)

	got, _ := readAll(t, half)
	took := time.Since(dialed)
	want := `{"ok":false,"error":"control: request not complete within 300ms","code":"timeout"}` + "\n"
	if got != want {
		t.Errorf("half-sent request: got %q, want %q", got, want)
	}
	if took < timeout {
		t.Errorf("closed %v after the dial, before the request timeout of %v", took, timeout)
	}
	c := dialClient(t, srv)
	if err := c.Ping(); err != nil {
		t.Errorf("Ping once the half-sent request timed out: %v", err)
	}
}

// waitConns waits up to 5 s until srv serves n connections.
func waitConns(t *testing.T, srv *control.Server, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for srv.NumConns() != n {
		if time.Now().After(deadline) {
			t.Fatalf("the server serves %d connections after 5 s, want %d", srv.NumConns(), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func dialClient(t *testing.T, srv *control.Server) *control.Client {
	t.Helper()
	c, err := control.Dial(srv.Path())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestIdleConnectionClosed: a connection that stops sending requests is
// closed after the idle timeout, which frees its slot, and a Client that
// finds its connection closed this way dials again for its next request.
func TestIdleConnectionClosed(t *testing.T) {
	const idle = 200 * time.Millisecond
	srv := startLimited(t, func(s *control.Server) { s.MaxConns = 1; s.IdleTimeout = idle })
	raw, err := net.Dial("unix", srv.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	fmt.Fprintln(raw, `{"cmd":"ping"}`)
	got, took := readAll(t, raw)
	if got != `{"ok":true,"result":"pong"}`+"\n" {
		t.Errorf("got %q, want the answer to the ping and nothing else", got)
	}
	if took < idle-60*time.Millisecond {
		t.Errorf("closed after %v, before the idle timeout of %v", took, idle)
	}

	c := dialClient(t, srv)
	if err := c.Ping(); err != nil {
		t.Fatal(err)
	}
	waitConns(t, srv, 0) // the server closed c's connection as idle
	if err := c.Ping(); err != nil {
		t.Errorf("Ping on a connection the server closed as idle: %v, want a new connection", err)
	}
}

// TestUnreadAnswersTimeOut: a client that sends requests and never reads
// the answers fills the socket, and the server gives up on it after the
// write timeout instead of holding its slot for good.
func TestUnreadAnswersTimeOut(t *testing.T) {
	const timeout = 200 * time.Millisecond
	srv := startLimited(t, func(s *control.Server) { s.MaxConns = 1; s.WriteTimeout = timeout })
	c, err := net.Dial("unix", srv.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// 100,000 pings (1.5 MB, 2.7 MB of answers) fill both directions'
	// socket buffers when nobody reads.
	requests := bytes.Repeat([]byte(`{"cmd":"ping"}`+"\n"), 100_000)
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		c.SetWriteDeadline(time.Now().Add(5 * time.Second))
		c.Write(requests)
	}()
	time.Sleep(100 * time.Millisecond)
	assertBusy(t, srv)
	<-wrote // the write fails once the server gives up and closes

	deadline := time.Now().Add(5 * time.Second)
	for {
		other := dialClient(t, srv)
		err := other.Ping()
		if err == nil {
			break
		}
		if !errors.Is(err, control.ErrBusy) || time.Now().After(deadline) {
			t.Fatalf("the slot of a client that does not read was not freed: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestConnectionCap fills every slot with clients that keep their
// connections: the next client is told the daemon is busy at once (also
// one that sends nothing), the clients in the slots keep being answered,
// and a slot given back is served again.
func TestConnectionCap(t *testing.T) {
	srv := controltest.Start(t, &controltest.Backend{})
	clients := make([]*control.Client, control.MaxConns)
	for i := range clients {
		clients[i] = dialClient(t, srv)
		if err := clients[i].Ping(); err != nil {
			t.Fatalf("client %d: %v", i, err)
		}
	}
	assertBusy(t, srv)

	raw, err := net.Dial("unix", srv.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	got, _ := readAll(t, raw)
	want := fmt.Sprintf(`{"ok":false,"error":"control: too many connections: %d open, the most the daemon serves at once; try again","code":"busy"}`+"\n", control.MaxConns)
	if got != want {
		t.Errorf("a connection over the cap that sends nothing: got %q, want %q", got, want)
	}

	for i, c := range clients {
		if _, err := c.Stats(); err != nil {
			t.Errorf("client %d while over the cap: %v", i, err)
		}
	}
	clients[0].Close()
	// The server notices the close on its next read, at once.
	deadline := time.Now().Add(5 * time.Second)
	for {
		c := dialClient(t, srv)
		err := c.Ping()
		if err == nil {
			break
		}
		if !errors.Is(err, control.ErrBusy) || time.Now().After(deadline) {
			t.Fatalf("after a client closed: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestClientClosed: a closed Client fails its requests rather than
// dialing again.
func TestClientClosed(t *testing.T) {
	srv := controltest.Start(t, &controltest.Backend{})
	c := dialClient(t, srv)
	c.Close()
	for range 2 {
		if err := c.Ping(); !errors.Is(err, net.ErrClosed) {
			t.Errorf("Ping after Close: got %v, want net.ErrClosed", err)
		}
	}
	waitConns(t, srv, 0) // no connection dialed anew
}
