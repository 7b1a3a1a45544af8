package tcpcheck

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"
)

// flipping is a connection that inverts one byte of what it sends: the
// far end's digest must then differ.
type flipping struct {
	net.Conn
	done bool
}

func (f *flipping) Write(p []byte) (int, error) {
	if !f.done && len(p) > 0 {
		q := append([]byte(nil), p...)
		q[0] ^= 0xff
		f.done = true
		return f.Conn.Write(q)
	}
	return f.Conn.Write(p)
}

func (f *flipping) CloseWrite() error { return f.Conn.(*net.TCPConn).CloseWrite() }

// TestStream: a stream over loopback TCP arrives whole, mid runs once
// half is sent and before the last eighth; one byte changed on the way
// is a digest mismatch.
func TestStream(t *testing.T) {
	const size = 1 << 20
	for _, tt := range []struct {
		name    string
		corrupt bool
		want    string
	}{
		{"whole", false, ""},
		{"one byte changed", true, "far end got SHA-256"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			dial := func(ctx context.Context) (net.Conn, error) {
				var d net.Dialer
				c, err := d.DialContext(ctx, "tcp", ln.Addr().String())
				if err != nil || !tt.corrupt {
					return c, err
				}
				return &flipping{Conn: c}, nil
			}
			var atMid int64
			_, err = Stream(context.Background(), ln, dial, size, func(sent *atomic.Int64) error {
				atMid = sent.Load()
				return nil
			})
			if tt.want == "" && err != nil {
				t.Fatalf("got %v, want the digests equal", err)
			}
			if tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Fatalf("got %v, want an error naming %q", err, tt.want)
			}
			if atMid < size/2 || atMid > size-size/8 {
				t.Errorf("mid ran with %d bytes sent, want between %d and %d", atMid, size/2, size-size/8)
			}
		})
	}
}
