package sa

import (
	"fmt"
	"net/netip"
)

// SetPeer moves an outbound ESP-in-UDP SA's destination to peer: the
// address and port the peer's NAT now maps it to (RFC 7296 §2.23: after
// an authenticated IKE message from a new address or port, the IKE SA
// and its outbound ESP SAs follow it). Packets sealed from then on go to
// peer; a batch in flight goes to either. Keys, SPI and sequence numbers
// stay, so no (key, nonce) pair is used twice, which a re-install under
// the same keys could not promise. The SA keeps its identity: Dst and
// Config still name the destination it was made with.
func (s *SA) SetPeer(peer netip.AddrPort) error {
	switch {
	case s.cfg.Dir != DirOut:
		return fmt.Errorf("%w: set peer: %s is not outbound", ErrInvalidConfig, s)
	case s.cfg.Encap == nil:
		return fmt.Errorf("%w: set peer: %s is raw ESP, whose peer has no port to move to", ErrInvalidConfig, s)
	case !peer.IsValid() || peer.Port() == 0 || peer.Addr().Is4() != s.cfg.Src.Is4():
		return fmt.Errorf("%w: set peer: %s: %v is not an address and port of the SA's family", ErrInvalidConfig, s, peer)
	}
	p := peer
	s.peer.Store(&p)
	return nil
}
