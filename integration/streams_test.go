//go:build linux

package integration

// Long-running traffic for tests that change a tunnel under load (see
// TestRotation): a UDP stream of numbered datagrams each way, whose sink
// reports every gap, duplicate and reorder, and a paced, checksummed TCP
// stream.

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/internal/syncbuf"
)

// Ports of the streams on the inner addresses.
const (
	udpPortAB = 5301 // A → B
	udpPortBA = 5302 // B → A
	tcpPort   = 5201 // A → B
)

// streams are the traffic helpers of one test: a UDP sequence stream
// each way and a paced TCP stream from A to B.
type streams struct {
	udpSrcAB, udpSrcBA, udpSinkAB, udpSinkBA *helperProc
	tcpSrc, tcpSink                          *helperProc
}

func startStreams(t *testing.T, p *pair) *streams {
	t.Helper()
	s := &streams{}
	s.udpSinkAB = startHelperProc(t, p.b, "udp-seq-sink", true, fmt.Sprintf("%s:%d", innerB4, udpPortAB))
	s.udpSinkBA = startHelperProc(t, p.a, "udp-seq-sink", true, fmt.Sprintf("%s:%d", innerA4, udpPortBA))
	s.tcpSink = startHelperProc(t, p.b, "tcp-sink", true, fmt.Sprintf("%s:%d", innerB4, tcpPort))
	s.udpSrcAB = startHelperProc(t, p.a, "udp-seq-source", false, fmt.Sprintf("%s:%d", innerB4, udpPortAB), fmt.Sprint(udpRate), fmt.Sprint(udpSize))
	s.udpSrcBA = startHelperProc(t, p.b, "udp-seq-source", false, fmt.Sprintf("%s:%d", innerA4, udpPortBA), fmt.Sprint(udpRate), fmt.Sprint(udpSize))
	s.tcpSrc = startHelperProc(t, p.a, "tcp-paced", false, fmt.Sprintf("%s:%d", innerB4, tcpPort), fmt.Sprint(tcpBitrate), fmt.Sprint(time.Now().UnixNano()))
	return s
}

// stopAndCheck ends the streams (sources first, then the sinks once what
// is in flight has landed) and checks what arrived; with allRotations,
// also that the streams lasted through them.
func (s *streams) stopAndCheck(t *testing.T, allRotations bool) {
	t.Helper()
	var srcAB, srcBA udpSourceReport
	var tcpSent tcpPacedReport
	s.udpSrcAB.finishJSON(t, &srcAB)
	s.udpSrcBA.finishJSON(t, &srcBA)
	s.tcpSrc.finishJSON(t, &tcpSent)
	var sinkAB, sinkBA udpSinkReport
	s.udpSinkAB.finishJSON(t, &sinkAB)
	s.udpSinkBA.finishJSON(t, &sinkBA)
	tcpGot := strings.TrimSpace(s.tcpSink.finish(t))

	for _, u := range []struct {
		dir  string
		src  udpSourceReport
		sink udpSinkReport
	}{{"A→B", srcAB, sinkAB}, {"B→A", srcBA, sinkBA}} {
		t.Logf("UDP %s: sent %d (%d sends retried on a full queue, at most %d ms late), received %d, missing %d, duplicates %d, reordered %d, max delay %.1f ms",
			u.dir, u.src.Sent, u.src.Retries, u.src.MaxLateMS, u.sink.Received, u.sink.Missing, u.sink.Duplicates, u.sink.Reorders, u.sink.MaxDelayMS)
		// No reorder is tolerated: each flow stays on one queue and one
		// receiving worker, which keep their order, and the old and new
		// SAs of a rotation share both.
		if u.sink.Received != u.src.Sent || u.sink.Missing != 0 || u.sink.Duplicates != 0 || u.sink.Reorders != 0 {
			t.Errorf("UDP %s: sent %d, received %d, missing %d (first %v), duplicates %d, reordered %d (deepest %d): want all received once, in order",
				u.dir, u.src.Sent, u.sink.Received, u.sink.Missing, u.sink.FirstMissing, u.sink.Duplicates, u.sink.Reorders, u.sink.MaxReorderDepth)
		}
		if least := int64(udpRate * rotations * rotationPeriod / time.Second / 2); allRotations && u.src.Sent < least {
			t.Errorf("UDP %s: sent only %d datagrams, want at least %d to span the rotations", u.dir, u.src.Sent, least)
		}
	}
	want := fmt.Sprintf("%s %d", tcpSent.SHA256, tcpSent.Bytes)
	t.Logf("TCP A→B: %d bytes, longest write %d ms", tcpSent.Bytes, tcpSent.MaxWriteMS)
	if tcpGot != want {
		t.Errorf("TCP A→B: far end got %q, sent %q", tcpGot, want)
	}
	if least := int64(tcpBitrate / 8 * rotations * rotationPeriod / time.Second / 4); allRotations && tcpSent.Bytes < least {
		t.Errorf("TCP A→B: sent only %d bytes, want at least %d to span the rotations", tcpSent.Bytes, least)
	}
}

// logDropCounters logs the counters of a daemon (who) that say why it
// dropped a packet and that moved from before to after (d.stats()):
// where a stream lost a datagram, they say at which step.
func logDropCounters(t *testing.T, who string, before, after map[string]uint64) {
	t.Helper()
	for _, c := range []string{"XfrmInNoStates", "XfrmOutNoStates", "XfrmInStateProtoError", "XfrmInError", "XfrmOutError", "XfrmInStateSeqError", "XfrmOutPolBlock", "XfrmInTmplMismatch"} {
		if d := after[c] - before[c]; d != 0 {
			t.Logf("%s: %s went up by %d during the streams", who, c, d)
		}
	}
}

// helperProc is the test binary running a helper mode in a namespace. Its
// standard input stays open until finish: closing it ends the helper.
type helperProc struct {
	name   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout syncbuf.Buffer
	stderr syncbuf.Buffer
	done   chan error
}

// startHelperProc starts mode in ns; with listening, it returns once the
// helper printed "listening". The helper is killed when the test ends.
func startHelperProc(t *testing.T, ns *netns, mode string, listening bool, args ...string) *helperProc {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	h := &helperProc{name: mode + " in " + ns.name, done: make(chan error, 1)}
	h.cmd = exec.Command("ip", append([]string{"netns", "exec", ns.name, self}, args...)...)
	h.cmd.Env = append(os.Environ(), helperEnv+"="+mode)
	h.cmd.Stdout, h.cmd.Stderr = &h.stdout, &h.stderr
	if h.stdin, err = h.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := h.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { h.done <- h.cmd.Wait() }()
	t.Cleanup(func() {
		h.cmd.Process.Kill()
		<-h.done
		h.done <- nil
	})
	if !listening {
		return h
	}
	for deadline := time.Now().Add(10 * time.Second); !strings.HasPrefix(h.stdout.String(), "listening\n"); time.Sleep(20 * time.Millisecond) {
		select {
		case err := <-h.done:
			h.done <- err
			t.Fatalf("%s exited before listening: %v\n%s", h.name, err, h.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not listen within 10 s\n%s", h.name, h.stderr.String())
		}
	}
	return h
}

// finish closes the helper's standard input, waits up to 30 s of
// running time (awaitRunning: a stall of the machine does not count,
// helperMaxRun in all) for it to exit with status 0 and returns what it
// printed after "listening".
func (h *helperProc) finish(t *testing.T) string {
	t.Helper()
	h.stdin.Close()
	err, ok, stalled := awaitRunning(h.done, 30*time.Second, helperMaxRun)
	if !ok {
		t.Fatalf("%s did not finish within 30 s of its input closing (the machine stalled %v meanwhile, not counted)\n%s",
			h.name, stalled.Round(time.Millisecond), h.stderr.String())
	}
	h.done <- err
	if err != nil {
		t.Fatalf("%s: %v\n%s", h.name, err, h.stderr.String())
	}
	if stalled > 0 {
		t.Logf("%s: the machine stalled %v while it finished", h.name, stalled.Round(time.Millisecond))
	}
	return strings.TrimPrefix(h.stdout.String(), "listening\n")
}

func (h *helperProc) finishJSON(t *testing.T, v any) {
	t.Helper()
	out := h.finish(t)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("%s printed %q: %v", h.name, out, err)
	}
}

// The reports the helpers print, as JSON.
type (
	udpSourceReport struct {
		Sent      int64 `json:"sent"`
		Retries   int64 `json:"retries"` // sends that met a full queue (ENOBUFS) or socket buffer and were retried
		MaxLateMS int64 `json:"max_late_ms"`
	}
	udpSinkReport struct {
		Received        int64    `json:"received"` // distinct sequence numbers
		Highest         int64    `json:"highest"`
		Missing         int64    `json:"missing"` // below the highest, never arrived
		FirstMissing    []uint64 `json:"first_missing"`
		Duplicates      int64    `json:"duplicates"`
		Reorders        int64    `json:"reorders"` // arrived after a higher one
		MaxReorderDepth uint64   `json:"max_reorder_depth"`
		MaxDelayMS      float64  `json:"max_delay_ms"`
		// MaxGapMS is the longest time between two arrivals: how long
		// the stream paused (TestIKENAT's mapping change).
		MaxGapMS float64 `json:"max_gap_ms"`
	}
	tcpPacedReport struct {
		SHA256     string `json:"sha256"`
		Bytes      int64  `json:"bytes"`
		MaxWriteMS int64  `json:"max_write_ms"`
	}
)

// streamHelper runs the helper modes of this file (see runHelper). Each
// runs until its standard input closes, so the test decides how long the
// streams last, and at most helperMaxRun.
func streamHelper(mode string, args []string) error {
	stop := make(chan struct{})
	go func() {
		io.Copy(io.Discard, os.Stdin)
		close(stop)
	}()
	var report any
	var err error
	switch mode {
	case "udp-seq-source":
		if len(args) != 3 {
			return fmt.Errorf("want DST RATE SIZE, got %q", args)
		}
		rate, err1 := strconv.Atoi(args[1])
		size, err2 := strconv.Atoi(args[2])
		if err1 != nil || err2 != nil || rate <= 0 || size < udpSeqHeader {
			return fmt.Errorf("RATE %q must be a positive integer and SIZE %q at least %d", args[1], args[2], udpSeqHeader)
		}
		report, err = udpSeqSource(args[0], rate, size, stop)
	case "udp-seq-sink":
		if len(args) != 1 {
			return fmt.Errorf("want ADDR, got %q", args)
		}
		report, err = udpSeqSink(args[0], stop)
	case "tcp-paced":
		if len(args) != 3 {
			return fmt.Errorf("want ADDR BITRATE SEED, got %q", args)
		}
		rate, err1 := strconv.ParseInt(args[1], 10, 64)
		seed, err2 := strconv.ParseUint(args[2], 10, 64)
		if err1 != nil || err2 != nil || rate < 8 {
			return fmt.Errorf("BITRATE %q must be an integer of at least 8 and SEED %q an unsigned integer", args[1], args[2])
		}
		report, err = tcpPaced(args[0], rate, seed, stop)
	default:
		return fmt.Errorf("not a rotation helper mode")
	}
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(report)
}

// helperMaxRun bounds a helper whose input never closes.
const helperMaxRun = 5 * time.Minute

// udpSeqHeader: a datagram starts with its sequence number and the
// sender's clock (Unix nanoseconds), 8 bytes each, big-endian.
const udpSeqHeader = 16

// udpSeqSource sends datagrams of size bytes to dst, rate per second,
// numbered from 0, until stop closes. A datagram late on its schedule is
// sent at once, so the average rate holds. A send that meets a full
// device queue is retried, not lost: with IP_RECVERR set, Linux reports
// ENOBUFS to a UDP sender instead of dropping the datagram silently
// (udp_send_skb), so local queueing never passes for loss in the tunnel.
// Told to stop, it ends at once, even while a send is being retried
// (sendSeq). (Its helper once did not finish within 30 s of being told,
// on a starved machine, why is not known: a TUN device orphans what it
// queues, so a write into the tunnel does not wait for ipsecd, which a
// 40 s SIGSTOP of ipsecd under the streams confirmed.)
func udpSeqSource(dst string, rate, size int, stop <-chan struct{}) (udpSourceReport, error) {
	var r udpSourceReport
	c, err := net.Dial("udp", dst)
	if err != nil {
		return r, err
	}
	defer c.Close()
	if err := setSockopt(c.(*net.UDPConn), syscall.IPPROTO_IP, syscall.IP_RECVERR, 1); err != nil {
		return r, fmt.Errorf("IP_RECVERR: %w", err)
	}
	buf := make([]byte, size)
	interval := time.Second / time.Duration(rate)
	start := time.Now()
	for seq := uint64(0); ; seq++ {
		due := start.Add(time.Duration(seq) * interval)
		if d := time.Until(due); d > 0 {
			time.Sleep(d)
		} else {
			r.MaxLateMS = max(r.MaxLateMS, -d.Milliseconds())
		}
		select {
		case <-stop:
			return r, nil
		default:
		}
		if time.Since(start) > helperMaxRun {
			return r, fmt.Errorf("still running after %v", helperMaxRun)
		}
		binary.BigEndian.PutUint64(buf[0:], seq)
		if sent, err := sendSeq(c, buf, stop, &r); err != nil || !sent {
			return r, err
		}
		r.Sent++
	}
}

// sendSeq sends one datagram of udpSeqSource, stamped with the time,
// until it goes or stop closes (sent false: it was not sent and is not
// counted). A full device queue (ENOBUFS) or socket buffer (the write
// would block past its deadline) is retried, counted in r.Retries, for
// up to a minute: on a loaded machine a tunnel's TUN device may drain
// slowly for seconds, and the source must still end when told.
func sendSeq(c net.Conn, buf []byte, stop <-chan struct{}, r *udpSourceReport) (sent bool, err error) {
	for first := time.Now(); ; {
		binary.BigEndian.PutUint64(buf[8:], uint64(time.Now().UnixNano()))
		c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
		_, err := c.Write(buf)
		switch {
		case err == nil:
			return true, nil
		case !errors.Is(err, syscall.ENOBUFS) && !errors.Is(err, os.ErrDeadlineExceeded):
			return false, fmt.Errorf("datagram %d: %w", binary.BigEndian.Uint64(buf), err)
		case time.Since(first) > time.Minute:
			return false, fmt.Errorf("datagram %d: not sent within a minute: %w", binary.BigEndian.Uint64(buf), err)
		}
		select {
		case <-stop:
			return false, nil
		default:
		}
		r.Retries++
		time.Sleep(time.Millisecond)
	}
}

// udpSeqSink receives udpSeqSource's datagrams on addr until stop closes
// and then nothing arrived for a second, and reports what was missing,
// repeated or out of order.
func udpSeqSink(addr string, stop <-chan struct{}) (udpSinkReport, error) {
	r := udpSinkReport{Highest: -1}
	la, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return r, err
	}
	c, err := net.ListenUDP("udp", la)
	if err != nil {
		return r, err
	}
	defer c.Close()
	// A large receive buffer, forced past rmem_max (we are root), so
	// that a reader descheduled on a loaded machine does not drop.
	if err := setSockopt(c, syscall.SOL_SOCKET, syscall.SO_RCVBUFFORCE, 8<<20); err != nil {
		return r, fmt.Errorf("SO_RCVBUFFORCE: %w", err)
	}
	fmt.Println("listening")
	var seen []bool
	buf := make([]byte, 65536)
	start, last := time.Now(), time.Now()
	stopped := false
	for {
		if !stopped {
			select {
			case <-stop:
				stopped = true
			default:
			}
		}
		if stopped && time.Since(last) > time.Second {
			break
		}
		if time.Since(start) > helperMaxRun {
			return r, fmt.Errorf("still running after %v", helperMaxRun)
		}
		c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		n, err := c.Read(buf)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			continue
		}
		if err != nil {
			return r, err
		}
		now := time.Now()
		if r.Highest >= 0 {
			r.MaxGapMS = max(r.MaxGapMS, float64(now.Sub(last).Microseconds())/1000)
		}
		last = now
		if n < udpSeqHeader {
			return r, fmt.Errorf("a datagram of %d bytes, want at least %d", n, udpSeqHeader)
		}
		seq := binary.BigEndian.Uint64(buf[0:])
		sent := time.Unix(0, int64(binary.BigEndian.Uint64(buf[8:])))
		r.MaxDelayMS = max(r.MaxDelayMS, float64(now.Sub(sent).Microseconds())/1000)
		if seq > 1<<32 {
			return r, fmt.Errorf("sequence number %d is not from udp-seq-source", seq)
		}
		for uint64(len(seen)) <= seq {
			seen = append(seen, false)
		}
		switch {
		case seen[seq]:
			r.Duplicates++
			continue
		case int64(seq) < r.Highest:
			r.Reorders++
			r.MaxReorderDepth = max(r.MaxReorderDepth, uint64(r.Highest)-seq)
		default:
			r.Highest = int64(seq)
		}
		seen[seq] = true
		r.Received++
	}
	for seq, ok := range seen {
		if !ok {
			r.Missing++
			if len(r.FirstMissing) < 10 {
				r.FirstMissing = append(r.FirstMissing, uint64(seq))
			}
		}
	}
	return r, nil
}

// tcpPaced sends pseudo-random bytes (seed) to addr at rate bit/s until
// stop closes, then closes its side and waits for the far end to close.
// A reset or a broken pipe ends it with that error.
func tcpPaced(addr string, rate int64, seed uint64, stop <-chan struct{}) (tcpPacedReport, error) {
	var r tcpPacedReport
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return r, err
	}
	defer c.Close()
	h := sha256.New()
	src := rand.NewChaCha8(seedBytes(seed))
	buf := make([]byte, 16<<10)
	bytesPerSec := float64(rate) / 8
	start := time.Now()
	for {
		select {
		case <-stop:
			if err := c.(*net.TCPConn).CloseWrite(); err != nil {
				return r, err
			}
			c.SetReadDeadline(time.Now().Add(30 * time.Second))
			if _, err := io.Copy(io.Discard, c); err != nil {
				return r, fmt.Errorf("waiting for the far end to close: %w", err)
			}
			r.SHA256 = hex.EncodeToString(h.Sum(nil))
			return r, nil
		default:
		}
		elapsed := time.Since(start)
		if elapsed > helperMaxRun {
			return r, fmt.Errorf("still running after %v", helperMaxRun)
		}
		if ahead := time.Duration(float64(r.Bytes)/bytesPerSec*float64(time.Second)) - elapsed; ahead > 0 {
			time.Sleep(min(ahead, 50*time.Millisecond))
			continue
		}
		src.Read(buf)
		c.SetWriteDeadline(time.Now().Add(30 * time.Second))
		t0 := time.Now()
		n, err := c.Write(buf)
		r.MaxWriteMS = max(r.MaxWriteMS, time.Since(t0).Milliseconds())
		h.Write(buf[:n])
		r.Bytes += int64(n)
		if err != nil {
			return r, fmt.Errorf("after %d bytes: %w", r.Bytes, err)
		}
	}
}

// setSockopt sets an integer socket option on c.
func setSockopt(c syscall.Conn, level, opt, value int) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), level, opt, value) }); err != nil {
		return err
	}
	return serr
}
