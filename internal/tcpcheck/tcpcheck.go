// Package tcpcheck sends a checksummed TCP stream through a tunnel: size
// pseudo-random bytes one way, their SHA-256 compared at both ends. The
// demo and the sidecar's tests use it to show that what crossed a rekey
// arrived whole. Safe for concurrent use (each Stream is its own).
package tcpcheck

import (
	"context"
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync/atomic"
	"time"
)

// Timeouts: dialing, and the far end's digest after the last byte.
const (
	dialWait   = 10 * time.Second
	digestWait = 60 * time.Second
)

// Stream accepts one connection on ln (and closes ln), sends size
// pseudo-random bytes to it over a connection from dial, and compares the
// SHA-256 digests at both ends. It returns the time from the first byte
// sent to the far end's digest. If mid is not nil, it starts once half
// the bytes are sent and runs while the rest go out (sent counts the
// bytes sent so far), all but the last eighth, which waits for it: what
// mid does happens under the stream's load, the stream goes on after it,
// and its error is the stream's. ctx ending closes the connection.
func Stream(ctx context.Context, ln net.Listener, dial func(context.Context) (net.Conn, error), size int64, mid func(sent *atomic.Int64) error) (time.Duration, error) {
	defer ln.Close()
	got := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- err.Error()
			return
		}
		defer c.Close()
		h := sha256.New()
		io.Copy(h, c)
		got <- hex.EncodeToString(h.Sum(nil))
	}()

	dialCtx, cancel := context.WithTimeout(ctx, dialWait)
	c, err := dial(dialCtx)
	cancel()
	if err != nil {
		return 0, err
	}
	defer c.Close()
	context.AfterFunc(ctx, func() { c.Close() })
	var seed [32]byte
	crand.Read(seed[:])
	h := sha256.New()
	var sent atomic.Int64
	w := io.MultiWriter(c, h, counter{&sent})
	src := rand.NewChaCha8(seed)
	send := func(n int64) error { _, err := io.Copy(w, io.LimitReader(src, n)); return err }
	start := time.Now()
	first := size
	if mid != nil {
		first = size / 2
	}
	if err := send(first); err != nil {
		return 0, err
	}
	if mid != nil {
		// The last eighth waits for mid, so that it crosses after
		// whatever mid did (the rekeyed SAs), however fast the rest went.
		tail := size / 8
		midErr := make(chan error, 1)
		go func() { midErr <- mid(&sent) }()
		if err := send(size - first - tail); err != nil {
			return 0, err
		}
		if err := <-midErr; err != nil {
			return 0, err
		}
		if err := send(tail); err != nil {
			return 0, err
		}
	}
	// The far end's copy ends at our FIN.
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	} else {
		c.Close()
	}
	select {
	case digest := <-got:
		took := time.Since(start)
		if want := hex.EncodeToString(h.Sum(nil)); digest != want {
			return 0, fmt.Errorf("far end got SHA-256 %s, sent %s", digest, want)
		}
		return took, nil
	case <-time.After(digestWait):
		return 0, fmt.Errorf("no digest from the far end within %v", digestWait)
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// counter is an io.Writer that counts what is written to it.
type counter struct{ n *atomic.Int64 }

func (c counter) Write(p []byte) (int, error) {
	c.n.Add(int64(len(p)))
	return len(p), nil
}
