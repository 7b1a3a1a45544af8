package eapradius

import (
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/ike/eap"
	"github.com/ipsecd/ipsecd/ike/message"
	"github.com/ipsecd/ipsecd/internal/radiustest"
)

// EAP-TLS flags (RFC 5216 §3.1).
const (
	tlsLength = 0x80
	tlsMore   = 0x40
	tlsStart  = 0x20
)

// tlsPeer is a test's EAP-TLS peer (RFC 5216, TLS 1.2): crypto/tls's
// client over a conn that the EAP packets fill and drain, with the
// fragments acknowledged each way. ike/eap has no EAP-TLS yet; this one
// exists to carry TLS's large messages through the relay.
type tlsPeer struct {
	conn    *pipeConn
	tls     *tls.Conn
	done    chan error // the handshake's end
	in      []byte     // the server's fragments so far
	out     []byte     // what TLS wrote, to send in fragments
	msk     []byte
	started bool
}

// pipeConn is the TLS client's transport: Read takes what the peer feeds
// and says, on wantRead, that it waits for more.
type pipeConn struct {
	net.Conn
	feed     chan []byte
	wantRead chan struct{}
	buf      []byte
	written  bytes.Buffer
}

func (c *pipeConn) Read(b []byte) (int, error) {
	if len(c.buf) == 0 {
		c.wantRead <- struct{}{}
		d, ok := <-c.feed
		if !ok {
			return 0, io.EOF
		}
		c.buf = d
	}
	n := copy(b, c.buf)
	c.buf = c.buf[n:]
	return n, nil
}

func (c *pipeConn) Write(b []byte) (int, error) { return c.written.Write(b) }
func (c *pipeConn) Close() error                { return nil }

func newTLSPeer(fr *radiustest.Server) *tlsPeer {
	c := &pipeConn{feed: make(chan []byte), wantRead: make(chan struct{})}
	cfg := &tls.Config{
		RootCAs: fr.PKI.CA, ServerName: "radius.test", Certificates: []tls.Certificate{fr.PKI.Client},
		MinVersion: tls.VersionTLS12, MaxVersion: tls.VersionTLS12,
	}
	return &tlsPeer{conn: c, tls: tls.Client(c, cfg), done: make(chan error, 1)}
}

// step runs TLS until it waits for the server again or finishes, and
// returns what it wrote.
func (p *tlsPeer) step() ([]byte, error) {
	select {
	case <-p.conn.wantRead:
	case err := <-p.done:
		if err != nil {
			return nil, err
		}
		st := p.tls.ConnectionState()
		msk, err := st.ExportKeyingMaterial("client EAP encryption", nil, 64)
		if err != nil {
			return nil, err
		}
		p.msk = msk
	case <-time.After(10 * time.Second):
		return nil, errors.New("TLS stalled")
	}
	out := bytes.Clone(p.conn.written.Bytes())
	p.conn.written.Reset()
	return out, nil
}

// Handle answers one EAP request, as eap.Client does.
func (p *tlsPeer) Handle(in []byte) ([]byte, eap.Status, error) {
	e := message.EAP(in)
	if !e.IsValid() {
		return nil, eap.Failed, errors.New("invalid EAP")
	}
	switch {
	case e.Code() == message.EAPSuccess && p.msk != nil:
		return nil, eap.Succeeded, nil
	case e.Code() != message.EAPRequest:
		return nil, eap.Failed, errors.New("EAP code " + string(rune('0'+e.Code())))
	case e.Type() == message.EAPIdentity:
		return message.AppendEAP(nil, message.EAPResponse, e.Identifier(), message.EAPIdentity, []byte("alice")), eap.Continue, nil
	case e.Type() != message.EAPTLS:
		// Nak: we do EAP-TLS.
		return message.AppendEAP(nil, message.EAPResponse, e.Identifier(), message.EAPNak, []byte{byte(message.EAPTLS)}), eap.Continue, nil
	}
	d := e.Data()
	flags, data := d[0], d[1:]
	if flags&tlsLength != 0 {
		data = data[4:]
	}
	resp := func(b []byte) []byte {
		return message.AppendEAP(nil, message.EAPResponse, e.Identifier(), message.EAPTLS, b)
	}
	switch {
	case flags&tlsStart != 0 && !p.started:
		p.started = true
		go func() { p.done <- p.tls.Handshake() }()
	case flags&tlsMore != 0:
		p.in = append(p.in, data...)
		return resp([]byte{0}), eap.Continue, nil // acknowledge the fragment
	case len(p.out) > 0:
		// The server acknowledged our fragment: send the next.
		return resp(p.nextFragment()), eap.Continue, nil
	default:
		p.in = append(p.in, data...)
		p.conn.feed <- p.in
		p.in = nil
	}
	out, err := p.step()
	if err != nil {
		return nil, eap.Failed, err
	}
	p.out = out
	if len(p.out) == 0 {
		return resp([]byte{0}), eap.Continue, nil // the handshake's end: acknowledge
	}
	return resp(p.nextFragment()), eap.Continue, nil
}

// nextFragment takes up to 1000 bytes of out, flagged with the whole
// length first and More while some remain.
func (p *tlsPeer) nextFragment() []byte {
	n := min(len(p.out), 1000)
	flags := byte(0)
	var hdr []byte
	if n < len(p.out) {
		flags |= tlsMore
	}
	hdr = append(hdr, flags|tlsLength)
	hdr = binary.BigEndian.AppendUint32(hdr, uint32(len(p.out)))
	b := append(hdr, p.out[:n]...)
	p.out = p.out[n:]
	return b
}

// TestFreeRADIUSEAPTLS: EAP-TLS (TLS 1.2, ECDSA certificates the test
// made) relayed to FreeRADIUS: the TLS flights, over a kilobyte each,
// cross in EAP-Messages of 253 bytes both ways, and the MSK from the
// MPPE keys is the 64 bytes of RFC 5216 §2.3 the client exported.
func TestFreeRADIUSEAPTLS(t *testing.T) {
	fr := radiustest.Start(t, radiustest.Options{Users: testUsers})
	c := testClient(t, Config{Servers: []Server{{Address: fr.Auth, Secret: []byte(fr.Secret)}}})
	cv := c.NewConversation(testPeer)
	peer := newTLSPeer(fr)
	req, err := cv.Start()
	if err != nil {
		t.Fatal(err)
	}
	rounds := 0
	for ; rounds < 30; rounds++ {
		resp, pst, perr := peer.Handle(req)
		if pst != eap.Continue {
			t.Fatalf("peer %v: %v", pst, perr)
		}
		ch := make(chan Step, 1)
		cv.Handle(resp, func(s Step) { ch <- s })
		st := <-ch
		if st.Status == eap.Failed {
			t.Fatalf("round %d: %v", rounds, st.Err)
		}
		if st.Status == eap.Succeeded {
			if _, pst, perr := peer.Handle(st.Packet); pst != eap.Succeeded {
				t.Fatalf("peer on EAP-Success: %v %v", pst, perr)
			}
			break
		}
		req = st.Packet
	}
	if msk := cv.MSK(); len(msk) != 64 || !bytes.Equal(msk, peer.msk) {
		t.Fatalf("MSK from RADIUS %x\nwant the client's %x", msk, peer.msk)
	}
	if s := c.Stats()[0]; s.Accepts != 1 {
		t.Errorf("stats %+v", s)
	}
	t.Logf("EAP-TLS in %d rounds; MSK of 64 bytes matches", rounds+1)
}
