package datapath

import (
	"time"

	"github.com/ipsecd/ipsecd/underlay"
)

// Underlay is what the engine needs from the outer sockets, as
// wireguard-go's conn.Bind is what its device needs: receivers to read
// batches from, one worker each, and a batch writer. The sockets of
// package underlay are one (FromConn); datapathtest.Pipe is an in-memory
// one, so that the data path is tested without sockets.
type Underlay interface {
	// Receivers returns the receiving ends; their number does not change.
	Receivers() []Receiver
	// WriteBatch sends the messages (underlay.Conn.WriteBatch). The
	// caller keeps the buffers.
	WriteBatch(msgs []underlay.Message) error
}

// Receiver is one receiving end of an Underlay (*underlay.Reader is one).
// It is read by one goroutine.
type Receiver interface {
	// ReadBatch blocks until at least one message is read into msgs,
	// each at msgs[i].Off (underlay.Reader.ReadBatch), and returns how
	// many, or an error matching underlay.ErrClosed once it is closed.
	ReadBatch(msgs []underlay.Message) (int, error)
	// BatchSize is the most messages one ReadBatch returns.
	BatchSize() int
	// SetReadDeadline makes a blocked or later ReadBatch return an error
	// once t has passed; the engine sets a past time to stop.
	SetReadDeadline(t time.Time) error
	// String names the receiver in logs.
	String() string
}

// FromConn returns the sockets of package underlay as an Underlay.
func FromConn(c *underlay.Conn) Underlay {
	rs := c.Readers()
	u := connUnderlay{Conn: c, receivers: make([]Receiver, len(rs))}
	for i, r := range rs {
		u.receivers[i] = r
	}
	return u
}

type connUnderlay struct {
	*underlay.Conn
	receivers []Receiver
}

func (u connUnderlay) Receivers() []Receiver { return u.receivers }
