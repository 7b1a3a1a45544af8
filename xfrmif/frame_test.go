package xfrmif

import (
	"errors"
	"os"
	"testing"

	"github.com/ipsecd/ipsecd/internal/gso"
	"github.com/ipsecd/ipsecd/internal/vnet"
)

// frameQueue is a fakeQueue read a frame at a time, as a TUN queue.
type frameQueue struct {
	fakeQueue
	frames chan []byte
}

func (q *frameQueue) ReadFrame(buf []byte) (int, error) {
	f, ok := <-q.frames
	if !ok {
		return 0, os.ErrClosed
	}
	return copy(buf, f), nil
}

// A queue that reads frames is read with ReadQueueFrame: a super-packet
// counts as its segments, a frame the parser refuses as one tx error,
// and neither is read by ReadQueue's path.
func TestReadQueueFrame(t *testing.T) {
	l := newFakeLink(2)
	fq := &frameQueue{frames: make(chan []byte, 2)}
	l.queues[1] = fq
	ifc, err := NewInterface(Config{Name: "ipsec1", IfID: 1, Queues: 2}, l)
	if err != nil {
		t.Fatal(err)
	}
	defer ifc.Close()
	if ifc.ReadsFrames(0) || !ifc.ReadsFrames(1) {
		t.Fatalf("ReadsFrames = %v, %v, want false, true", ifc.ReadsFrames(0), ifc.ReadsFrames(1))
	}

	// A UDP over IPv4 super-packet of 100 payload bytes at 40 a segment:
	// 3 segments of 68, 68 and 48 bytes.
	pkt := make([]byte, 28+100)
	pkt[0], pkt[9] = 0x45, 17
	h := vnet.Header{Flags: vnet.FlagNeedsCsum, GSOType: vnet.GSOUDPL4, HdrLen: 28, GSOSize: 40, CsumStart: 20, CsumOffset: 6}
	frame := make([]byte, vnet.HeaderLen+len(pkt))
	h.Encode(frame)
	copy(frame[vnet.HeaderLen:], pkt)
	fq.frames <- frame
	fq.frames <- frame[:vnet.HeaderLen+20] // headers cut short

	buf := make([]byte, vnet.HeaderLen+MaxPacketSize+gso.Tailroom)
	var f gso.Frame
	if err := ifc.ReadQueueFrame(1, buf, &f, 128, 1500); err != nil || f.Segments() != 3 {
		t.Fatalf("ReadQueueFrame: %d segments, %v; want 3", f.Segments(), err)
	}
	if err := ifc.ReadQueueFrame(1, buf, &f, 128, 1500); !errors.Is(err, gso.ErrFrame) {
		t.Fatalf("ReadQueueFrame of a short frame: %v, want gso.ErrFrame", err)
	}
	if st := ifc.QueueStats()[1]; st != (Stats{TxPackets: 3, TxBytes: 68 + 68 + 48, TxErrors: 1}) {
		t.Errorf("queue stats %+v, want 3 packets, 184 bytes, 1 error", st)
	}
	if err := ifc.ReadQueueFrame(0, buf, &f, 128, 1500); err == nil {
		t.Error("ReadQueueFrame of a queue without frames succeeded")
	}
	close(fq.frames)
	if err := ifc.ReadQueueFrame(1, buf, &f, 128, 1500); !errors.Is(err, ErrClosed) {
		t.Errorf("ReadQueueFrame of a closed queue: %v, want ErrClosed", err)
	}
}
