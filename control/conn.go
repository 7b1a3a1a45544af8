package control

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"
)

// serveConn answers c's requests in order until it closes, stays idle
// past the idle timeout, takes longer than the request timeout to send a
// request, sends a line longer than MaxLine, or does not take an answer
// within the write timeout.
// The Socket closes c once it returns.
func (s *Server) serveConn(c net.Conn) {
	r := bufio.NewReaderSize(c, 4096)
	w := bufio.NewWriter(c)
	answer := func(resp Response) error {
		out, err := json.Marshal(resp)
		if err != nil {
			out, _ = json.Marshal(Response{Error: "control: " + err.Error(), Code: "internal"})
		}
		c.SetWriteDeadline(time.Now().Add(s.writeTimeout()))
		w.Write(out)
		w.WriteByte('\n')
		return w.Flush()
	}
	var buf []byte
	for {
		// Wait for the first byte of a request, then give the rest of
		// the line its own, shorter, deadline.
		c.SetReadDeadline(time.Now().Add(s.idleTimeout()))
		if _, err := r.Peek(1); err != nil {
			return // closed, or idle too long: nothing to answer
		}
		c.SetReadDeadline(time.Now().Add(s.requestTimeout()))
		var err error
		buf, err = readLine(r, buf[:0], MaxLine)
		switch {
		case errors.Is(err, errLineTooLong):
			answer(Response{Error: fmt.Sprintf("request longer than %d bytes", MaxLine), Code: "invalid"})
			return
		case errors.Is(err, os.ErrDeadlineExceeded):
			answer(Response{Error: fmt.Sprintf("control: request not complete within %v", s.requestTimeout()), Code: "timeout"})
			return
		case err != nil && !errors.Is(err, io.EOF):
			return
		}
		// A last line without a newline before EOF is still a request,
		// as `printf '{"cmd":"ping"}' | socat - UNIX:...` sends it.
		if line := bytes.TrimSpace(buf); len(line) > 0 {
			if isMonitor(line) {
				// The connection is the monitor's from here on.
				s.stream(c, w)
				return
			}
			if answer(s.handle(line)) != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// errLineTooLong is readLine's error for a line past its limit.
var errLineTooLong = errors.New("line too long")

// readLine appends to buf the bytes of r up to the next newline (left
// out), and fails with errLineTooLong once they pass max. At EOF it
// returns what there was with io.EOF.
func readLine(r *bufio.Reader, buf []byte, max int) ([]byte, error) {
	for {
		frag, err := r.ReadSlice('\n')
		frag = bytes.TrimSuffix(frag, []byte{'\n'})
		if len(buf)+len(frag) > max {
			return buf, errLineTooLong
		}
		buf = append(buf, frag...)
		if err != bufio.ErrBufferFull {
			return buf, err
		}
	}
}

// handle answers one request line. A panic in the Backend is answered as
// an internal error: the daemon keeps running.
func (s *Server) handle(line []byte) (resp Response) {
	defer func() {
		if r := recover(); r != nil {
			s.log.WithField("panic", r).Error("control: request panicked")
			resp = Response{Error: "internal error", Code: "internal"}
		}
	}()
	var req Request
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return errorResponse(fmt.Errorf("%w: bad JSON: %v", ErrInvalid, err))
	}
	result, err := s.dispatch(&req)
	if err != nil {
		s.log.WithField("cmd", req.Cmd).WithError(err).Debug("control: request failed")
		return errorResponse(err)
	}
	raw, err := json.Marshal(result)
	if err != nil {
		return errorResponse(err)
	}
	return Response{OK: true, Result: raw}
}

func errorResponse(err error) Response {
	r := Response{Error: err.Error(), Code: "internal"}
	switch {
	case errors.Is(err, ErrNotFound):
		r.Code = "not_found"
	case errors.Is(err, ErrExists):
		r.Code = "exists"
	case errors.Is(err, ErrInvalid):
		r.Code = "invalid"
	case errors.Is(err, ErrBusy):
		r.Code = "busy"
	case errors.Is(err, ErrDenied):
		r.Code = "denied"
	}
	return r
}

func invalid(err error) error { return fmt.Errorf("%w: %v", ErrInvalid, err) }

// isMonitor reports whether line is a monitor request, which turns its
// connection into an event stream rather than getting one answer.
func isMonitor(line []byte) bool {
	var req struct {
		Cmd string `json:"cmd"`
	}
	return json.Unmarshal(line, &req) == nil && req.Cmd == "monitor"
}
