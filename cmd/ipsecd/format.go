package main

import (
	"encoding/hex"
	"fmt"
	"io"
	"net/netip"
	"time"

	"github.com/ipsecd/ipsecd/control"
	"github.com/ipsecd/ipsecd/sa"
)

// writeState prints an SA the way `ip -s xfrm state` does. Keys appear only
// if st carries them (state list --keys).
func writeState(w io.Writer, st *control.StateInfo) {
	c := &st.Config
	fmt.Fprintf(w, "src %s dst %s\n", c.Src, c.Dst)
	fmt.Fprintf(w, "\tproto esp spi %s dir %s mode %s if_id %#x\n", control.FormatSPI(c.SPI), c.Dir, c.Mode, c.IfID)
	fmt.Fprintf(w, "\treplay-window %d", c.ReplayWindow)
	if c.ESN {
		fmt.Fprint(w, " flag esn")
	}
	fmt.Fprintln(w)
	if c.AEAD != nil {
		fmt.Fprintf(w, "\taead %s%s %d\n", c.AEAD.Name, keyText(c.AEAD.Key), c.AEAD.Bits)
	}
	if c.Auth != nil {
		fmt.Fprintf(w, "\tauth-trunc %s%s %d\n", c.Auth.Name, keyText(c.Auth.Key), c.Auth.Bits)
	}
	if c.Enc != nil {
		fmt.Fprintf(w, "\tenc %s%s\n", c.Enc.Name, keyText(c.Enc.Key))
	}
	if c.Encap != nil {
		fmt.Fprintf(w, "\tencap type espinudp sport %d dport %d\n", c.Encap.SrcPort, c.Encap.DstPort)
	}
	if !c.Selector.MatchesAll() {
		fmt.Fprintf(w, "\tsel %v\n", c.Selector)
	}
	lt := &c.Lifetime
	fmt.Fprintf(w, "\tlifetime config:\n")
	fmt.Fprintf(w, "\t  limit: soft %s(bytes), hard %s(bytes)\n", limit(lt.SoftBytes), limit(lt.HardBytes))
	fmt.Fprintf(w, "\t  limit: soft %s(packets), hard %s(packets)\n", limit(lt.SoftPackets), limit(lt.HardPackets))
	fmt.Fprintf(w, "\t  expire add: soft %d(sec), hard %d(sec)\n", lt.SoftAdd/time.Second, lt.HardAdd/time.Second)
	s := &st.Stats
	fmt.Fprintf(w, "\tlifetime current:\n\t  %d(bytes), %d(packets)\n", s.Bytes, s.Packets)
	fmt.Fprintf(w, "\t  add %s use %s\n", timeText(&s.Added), timeText(s.LastUsed))
	if l := s.LifetimeLeft; l != nil {
		fmt.Fprintf(w, "\tlifetime left:\n")
		fmt.Fprintf(w, "\t  limit: soft %s(bytes), hard %s(bytes)\n", left(l.SoftBytes), left(l.HardBytes))
		fmt.Fprintf(w, "\t  limit: soft %s(packets), hard %s(packets)\n", left(l.SoftPackets), left(l.HardPackets))
		fmt.Fprintf(w, "\t  expire add: soft %s(sec), hard %s(sec)\n", left(l.SoftAddSeconds), left(l.HardAddSeconds))
	}
	fmt.Fprintf(w, "\tstats:\n\t  replay-window %d replay %d failed %d\n", s.ReplayWindow, s.Replay, s.IntegrityFailed)
	fmt.Fprintf(w, "\t  seq %#x", s.Seq)
	if s.HardExpired {
		fmt.Fprint(w, " expired hard")
	} else if s.SoftExpired {
		fmt.Fprint(w, " expired soft")
	}
	fmt.Fprintln(w)
}

func keyText(k []byte) string {
	if len(k) == 0 {
		return ""
	}
	return " 0x" + hex.EncodeToString(k)
}

func limit(v uint64) string {
	if v == 0 {
		return "(INF)"
	}
	return fmt.Sprint(v)
}

// timeText writes a time as ip -s xfrm state does ("2026-12-01
// 13:44:33"), or "-" for none (an SA never used).
func timeText(t *time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return t.Format(time.DateTime)
}

// left writes what is left of a limit, or (INF) for one not set.
func left(v *uint64) string {
	if v == nil {
		return "(INF)"
	}
	return fmt.Sprint(*v)
}

func prefixText(p netip.Prefix) string {
	if !p.IsValid() {
		return "any"
	}
	return p.String()
}

// writePolicy prints a policy the way `ip xfrm policy` does.
func writePolicy(w io.Writer, p *sa.Policy) {
	fmt.Fprintf(w, "src %s dst %s\n\tdir %s action %s if_id %#x\n",
		prefixText(p.Selector.Src), prefixText(p.Selector.Dst), p.Dir, p.Action, p.IfID)
}

// writeInterface prints an interface the way `ip -s link` does.
func writeInterface(w io.Writer, ifc *control.InterfaceInfo) {
	fmt.Fprintf(w, "%s: if_id %#x mtu %d queues %d qlen %d\n", ifc.Name, ifc.IfID, ifc.MTU, ifc.Queues, ifc.TxQueueLen)
	for _, a := range ifc.Addresses {
		family := "inet"
		if a.Addr().Is6() {
			family = "inet6"
		}
		fmt.Fprintf(w, "\t%s %s\n", family, a)
	}
	for _, r := range ifc.Routes {
		fmt.Fprintf(w, "\troute %s\n", r)
	}
	fmt.Fprintf(w, "\tRX: packets %d bytes %d errors %d dropped %d\n", ifc.RX.Packets, ifc.RX.Bytes, ifc.RX.Errors, ifc.RX.Drops)
	fmt.Fprintf(w, "\tTX: packets %d bytes %d errors %d dropped %d\n", ifc.TX.Packets, ifc.TX.Bytes, ifc.TX.Errors, ifc.TX.Drops)
}
