package ikenode

import (
	"fmt"
	"net/netip"

	"github.com/sirupsen/logrus"

	"github.com/ipsecd/ipsecd/node"
	"github.com/ipsecd/ipsecd/sa"
)

// peerOf is where an outbound SA made from c sends: its destination and
// encapsulation port; the zero AddrPort for raw ESP, which never moves.
func peerOf(c *sa.Config) netip.AddrPort {
	if c.Encap == nil {
		return netip.AddrPort{}
	}
	return netip.AddrPortFrom(c.Dst, c.Encap.DstPort)
}

// followPeer moves x's children's outbound SAs to where x's peer now is.
// The engine moves the IKE SA itself when an authenticated message comes
// from a new address or port behind a NAT (RFC 7296 §2.23: the peer's
// NAT changed its mapping); the outbound ESP SAs must follow, or the
// peer receives nothing until the child is rekeyed. Only a peer that an
// authenticated IKE message placed is followed, never ESP's source (the
// RFC's rule: unauthenticated packets would let anyone redirect the
// traffic).
func (m *Daemon) followPeer(x *ikeSA) {
	_, r := x.sa.Addrs()
	if r == x.remote {
		return
	}
	x.remote = r
	for _, rec := range m.children {
		if rec.owner == x {
			m.moveChild(x, rec)
		}
	}
}

// moveChild moves rec's outbound SA to x's peer (x holds rec), if it is
// not there yet: followPeer, and down when a rekeyed IKE SA hands its
// children over to its successor, which may have followed the peer
// already.
func (m *Daemon) moveChild(x *ikeSA, rec *installed) {
	r := x.remote
	if !rec.peer.IsValid() || !r.IsValid() || rec.peer == r {
		return
	}
	from := rec.peer
	rec.peer = r
	if !rec.outbound {
		return // childOutbound moves it when it installs it
	}
	l := m.log.WithFields(x.fields()).WithFields(logrus.Fields{"spi_out": fmt.Sprintf("%#x", rec.out.SPI), "from": from, "to": r})
	if err := m.cfg.Node.SetPeer(node.OwnerIKE, rec.out, r); err != nil {
		l.WithError(err).Warn("ike: moving the child's outbound SA to the peer's new address failed")
		return
	}
	l.Info("ike: peer moved (NAT mapping changed): the child's outbound SA follows")
}
