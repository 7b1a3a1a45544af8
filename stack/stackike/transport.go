package stackike

import (
	"net/netip"

	"github.com/ipsecd/ipsecd/ikenode"
	"github.com/ipsecd/ipsecd/underlay"
)

// underlayTransport is the ikenode.Transport of a sidecar: IKE on the
// netstack's ESP-in-UDP socket, which is already bound and read by the
// data path. It binds nothing; what arrives for IKE comes through the
// node's non-ESP handler (Daemon.DeliverNonESP), so Listen's deliver is
// never called.
type underlayTransport struct{ conn *underlay.Conn }

func (u underlayTransport) Listen(_ []netip.Addr, _ uint16, _ func(b []byte, local, remote netip.AddrPort)) (ikenode.Bind, error) {
	return underlayBind(u), nil
}

// underlayBind sends IKE after the non-ESP marker on the underlay socket.
type underlayBind struct{ conn *underlay.Conn }

func (b underlayBind) Send(p []byte, local netip.Addr, remote netip.AddrPort) error {
	return b.conn.WriteNonESP(p, remote, local)
}

func (b underlayBind) Port() uint16 { return b.conn.Port() }

// Close leaves the socket open: it is the netstack's, closed with it.
func (b underlayBind) Close() error { return nil }
