//go:build linux

package integration

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/ike"
	"github.com/ipsecd/ipsecd/ike/message"
	"github.com/ipsecd/ipsecd/ike/proposal"
	"github.com/ipsecd/ipsecd/internal/charontest"
)

// engineConfig is the IKE engine's config as the peer of ipsecd's side of
// the test connection (b.test, 203.0.113.0/24), or, with asA, of charon's
// (a.test, 198.51.100.0/24): the engine stands in for one of them.
func engineConfig(t testing.TB, ikeProposal, espProposal string, asA bool) *ike.Config {
	t.Helper()
	ikeP, err := proposal.ParseList(message.ProtoIKE, []string{ikeProposal})
	if err != nil {
		t.Fatal(err)
	}
	espP, err := proposal.ParseList(message.ProtoESP, []string{espProposal})
	if err != nil {
		t.Fatal(err)
	}
	a, b := netip.MustParsePrefix("198.51.100.0/24"), netip.MustParsePrefix("203.0.113.0/24")
	cfg := &ike.Config{LocalID: ike.MustParseIdentity("b.test"), RemoteID: ike.MustParseIdentity("a.test"), PSK: []byte(charontest.PSK), Proposals: ikeP,
		Child: ike.ChildConfig{Proposals: espP, LocalTS: []netip.Prefix{b}, RemoteTS: []netip.Prefix{a}}}
	if asA {
		cfg.LocalID, cfg.RemoteID = ike.MustParseIdentity("a.test"), ike.MustParseIdentity("b.test")
		cfg.Child.LocalTS, cfg.Child.RemoteTS = cfg.Child.RemoteTS, cfg.Child.LocalTS
	}
	return cfg
}

// engineHandshake runs one IKE_SA_INIT and IKE_AUTH from c (bound to
// local, port 500) to remote with the engine as initiator, and deletes
// nothing: the responder keeps the SA. It returns the time from the
// first request to the established SA. Without a NAT the exchange stays
// on port 500; with c4500 (bound to local's address, port 4500) a peer
// that reports a NAT (charon 6's kernel-libipsec fakes one) is followed
// to port 4500, with the non-ESP marker.
func engineHandshake(c, c4500 *net.UDPConn, cfg *ike.Config, local, remote netip.AddrPort) (time.Duration, error) {
	start := time.Now()
	sa, msg, err := ike.Initiate(cfg, local, remote, start)
	if err != nil {
		return 0, err
	}
	buf := make([]byte, 65536)
	deadline := start.Add(10 * time.Second)
	natt := func() bool { _, r := sa.Addrs(); return c4500 != nil && r.Port() == ike.NATTPort }
	send := func(b []byte) error {
		_, to := sa.Addrs()
		for _, p := range sa.Packets(b) {
			var err error
			if natt() {
				_, err = c4500.WriteToUDPAddrPort(append([]byte{0, 0, 0, 0}, p...), to)
			} else {
				_, err = c.WriteToUDPAddrPort(p, remote)
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
	if err := send(msg); err != nil {
		return 0, err
	}
	for sa.State() != ike.StateEstablished {
		if sa.Err() != nil {
			return 0, sa.Err()
		}
		conn, at := c, local
		if natt() {
			conn, at = c4500, netip.AddrPortFrom(local.Addr(), ike.NATTPort)
		}
		conn.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		n, from, err := conn.ReadFromUDPAddrPort(buf)
		if time.Now().After(deadline) {
			return 0, errors.New("no established SA within 10 s")
		}
		if err != nil {
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				return 0, err
			}
			out, err := sa.Tick(time.Now())
			if err != nil {
				return 0, err
			}
			if out != nil {
				if err := send(out); err != nil {
					return 0, err
				}
			}
			continue
		}
		in := buf[:n]
		if conn == c4500 {
			if n < 4 || in[0]|in[1]|in[2]|in[3] != 0 {
				continue // ESP, not IKE
			}
			in = in[4:]
		}
		out, err := sa.HandleFrom(in, at, from, time.Now())
		if err != nil && !errors.Is(err, ike.ErrDropped) {
			return 0, fmt.Errorf("%w (from %v)", err, from)
		}
		if out != nil {
			if err := send(out); err != nil {
				return 0, err
			}
		}
	}
	return time.Since(start), nil
}
