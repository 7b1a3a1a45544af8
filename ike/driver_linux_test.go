//go:build linux

package ike

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/ike/message"
)

// driver runs our IKE SAs over UDP sockets on ports 500 and 4500 in the
// driver namespace, as the daemon will: messages on 4500 carry the
// non-ESP marker, and messages go to the SA their SPIs name.
type driver struct {
	c500, c4500 *net.UDPConn
	in          chan packet
	cfg         *Config
	sa          *SA      // the current IKE SA (the newest after a rekey)
	sas         []*SA    // every SA still able to talk
	cookies     *Cookies // when set, requests for no SA pass its Check
	cookiesSent int
	events      []Event
	errs        []error
}

type packet struct {
	b         []byte
	from      netip.AddrPort
	localPort uint16
}

var nonESPMarker = []byte{0, 0, 0, 0}

func newDriver(c500, c4500 *net.UDPConn) *driver {
	d := &driver{c500: c500, c4500: c4500, in: make(chan packet, 16)}
	for _, c := range []*net.UDPConn{c500, c4500} {
		go d.read(c)
	}
	return d
}

func (d *driver) reset(cfg *Config) {
	d.cfg, d.sa, d.sas, d.events, d.errs = cfg, nil, nil, nil, nil
	d.cookies, d.cookiesSent = nil, 0
}

// read feeds the packets of one socket to the driver until it is closed.
func (d *driver) read(c *net.UDPConn) {
	port := netip.MustParseAddrPort(c.LocalAddr().String()).Port()
	for {
		buf := make([]byte, 65536)
		n, from, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			return
		}
		b := buf[:n]
		if port == NATTPort {
			if n < 4 || !bytes.Equal(b[:4], nonESPMarker) {
				continue // ESP or a keepalive, not IKE
			}
			b = b[4:]
		}
		d.in <- packet{b: b, from: from, localPort: port}
	}
}

func (d *driver) send(b []byte, to netip.AddrPort, localPort uint16) {
	if localPort == NATTPort {
		d.c4500.WriteToUDPAddrPort(append(append([]byte(nil), nonESPMarker...), b...), to)
		return
	}
	d.c500.WriteToUDPAddrPort(b, to)
}

// request sends a request an SA made, to the SA's peer.
func (d *driver) request(sa *SA, b []byte) {
	l, r := sa.Addrs()
	for _, p := range sa.Packets(b) {
		d.send(p, r, l.Port())
	}
}

func (d *driver) add(sa *SA) {
	d.sa = sa
	d.sas = append(d.sas, sa)
}

// start sends our IKE_SA_INIT request.
func (d *driver) start() error {
	sa, msg, err := Initiate(d.cfg, driverAddr, charonAddr, time.Now())
	if err != nil {
		return err
	}
	d.add(sa)
	d.request(sa, msg)
	return nil
}

func (d *driver) find(h message.Header) *SA {
	for i := len(d.sas) - 1; i >= 0; i-- {
		sa := d.sas[i]
		ispi, rspi := sa.SPIs()
		if h.ISPI() == ispi && (h.RSPI() == rspi || h.ExchangeType() == message.IKESAInit) {
			return sa
		}
	}
	return nil
}

// halfOpen counts our responder SAs waiting for IKE_AUTH.
func (d *driver) halfOpen() int {
	n := 0
	for _, sa := range d.sas {
		if sa.State() == StateInitDone {
			n++
		}
	}
	return n
}

func (d *driver) collect(sa *SA) {
	for _, e := range sa.TakeEvents() {
		d.events = append(d.events, e)
		if e.Kind == EventIKERekeyed {
			d.add(e.SA)
		}
	}
}

// serve answers and retransmits until done reports true or ten seconds
// pass (an error).
func (d *driver) serve(done func() bool) error { return d.serveWithin(10*time.Second, done) }

// serveWithin is serve with a bound of bound, for a done that waits on
// something slower than an exchange with charon (a scapy flood).
func (d *driver) serveWithin(bound time.Duration, done func() bool) error {
	until := time.Now().Add(bound)
	for !done() {
		if time.Now().After(until) {
			return fmt.Errorf("timed out after %v; errors so far: %v", bound, d.errs)
		}
		var p packet
		select {
		case p = <-d.in:
		case <-time.After(100 * time.Millisecond):
			for _, sa := range d.sas {
				out, err := sa.Tick(time.Now())
				if err != nil {
					return err
				}
				if out != nil {
					d.request(sa, out)
				}
			}
			continue
		}
		h := message.Header(p.b)
		if !h.IsValid() {
			continue
		}
		local := netip.AddrPortFrom(driverAddr.Addr(), p.localPort)
		sa := d.find(h)
		var out []byte
		var err error
		if sa == nil && d.cookies != nil {
			if reply, pass := d.cookies.Check(p.b, p.from, d.halfOpen(), time.Now()); !pass {
				if reply != nil {
					d.cookiesSent++
					d.send(reply, p.from, p.localPort)
				}
				continue
			}
		}
		if sa == nil {
			sa, out, err = Respond(d.cfg, local, p.from, p.b, time.Now())
			if sa != nil {
				d.add(sa)
			}
		} else {
			out, err = sa.HandleFrom(p.b, local, p.from, time.Now())
		}
		if err != nil {
			d.errs = append(d.errs, err)
		}
		if sa != nil {
			d.collect(sa)
		}
		switch {
		case out == nil:
		case h.Flags()&message.FlagResponse != 0:
			// What we send after a response is our next request
			// (IKE_AUTH after IKE_SA_INIT, a delete after a rekey).
			d.request(sa, out)
		case sa != nil:
			for _, b := range sa.Packets(out) {
				d.send(b, p.from, p.localPort)
			}
		default:
			d.send(out, p.from, p.localPort)
		}
	}
	return nil
}

// up reports whether the current IKE SA is established with one child.
func (d *driver) up() bool {
	return d.sa != nil && d.sa.State() == StateEstablished && len(d.sa.Children()) == 1
}

// ask sends the request that makeReq makes on the current IKE SA and
// serves until done; both must succeed.
func (d *driver) ask(t *testing.T, done func() bool, makeReq func(time.Time) ([]byte, error)) {
	t.Helper()
	req, err := makeReq(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	d.request(d.sa, req)
	if err := d.serve(done); err != nil {
		t.Fatal(err)
	}
}

// while runs swanctl with args in the background and serves until done;
// both must succeed.
func (d *driver) while(t *testing.T, ch *charon, done func() bool, args ...string) {
	t.Helper()
	type result struct {
		out string
		err error
	}
	rc := make(chan result, 1)
	go func() {
		out, err := ch.Swanctl(args...)
		rc <- result{out, err}
	}()
	serr := d.serve(done)
	r := <-rc
	if serr != nil || r.err != nil {
		t.Fatalf("swanctl %v: %v\n%s\ndriver: %v", args, r.err, r.out, serr)
	}
}
