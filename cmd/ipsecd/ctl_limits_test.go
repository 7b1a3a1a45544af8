package main

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/control"
	"github.com/ipsecd/ipsecd/control/controltest"
)

// TestControlBusy: with every slot of the control socket taken, a command
// fails at once with a message that says why, and runs again once a slot
// is free.
func TestControlBusy(t *testing.T) {
	srv := controltest.Start(t, &controltest.Backend{})
	sock := srv.Path()
	held := make([]net.Conn, control.MaxConns)
	for i := range held {
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		// An answered ping shows the server serves this connection.
		fmt.Fprintln(c, `{"cmd":"ping"}`)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if line, err := bufio.NewReader(c).ReadString('\n'); err != nil || !strings.Contains(line, "pong") {
			t.Fatalf("connection %d: %q, %v", i, line, err)
		}
		held[i] = c
	}
	var o, e bytes.Buffer
	start := time.Now()
	code := run([]string{"stats", "--control", sock}, &o, &e)
	want := fmt.Sprintf("ipsecd stats: control: too many connections: %d open, the most the daemon serves at once; try again\n", control.MaxConns)
	if code != 1 || e.String() != want {
		t.Errorf("stats with every slot taken: exit %d, stderr %q; want exit 1, %q", code, e.String(), want)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("stats with every slot taken took %v; want an answer at once", d)
	}

	held[0].Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		o.Reset()
		e.Reset()
		if run([]string{"stats", "--control", sock}, &o, &e) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stats after a slot was freed: %s", e.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
