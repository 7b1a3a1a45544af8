package vici

import (
	"net/netip"
	"strconv"
	"strings"

	"github.com/ipsecd/ipsecd/control"
)

// getPools answers the config file's address pools as charon's
// get-pools does: per pool its base address, size, online and offline
// leases, and with leases=yes each lease (address, identity, status)
// under its index; name selects one. Pools come from the config file
// (pools:): load-pool and unload-pool say so.
func getPools(r *request) *Message {
	b, ok := r.conn.s.backend.(control.PoolBackend)
	if !ok {
		return NewMessage()
	}
	pools, err := b.PoolList(yes(r.msg.String("leases")))
	if err != nil {
		return NewMessage() // no pools: charon answers an empty message alike
	}
	want := r.msg.String("name")
	out := NewMessage()
	for _, p := range pools {
		if want != "" && p.Name != want {
			continue
		}
		m := NewMessage().Set("base", poolBase(p.Addrs)).
			Set("size", strconv.FormatUint(uint64(p.Size), 10)).
			Set("online", strconv.Itoa(p.Online)).
			Set("offline", strconv.Itoa(p.Offline))
		if p.Leases != nil {
			leases := NewMessage()
			for i, l := range p.Leases {
				leases.Set(strconv.Itoa(i), NewMessage().Set("address", l.Address.String()).
					Set("identity", l.Identity).Set("status", l.Status))
			}
			m.Set("leases", leases)
		}
		out.Set(p.Name, m)
	}
	return out
}

// poolBase is a pool's first address as its addrs write it: a prefix's
// address, a range's start.
func poolBase(addrs string) string {
	if p, err := netip.ParsePrefix(addrs); err == nil {
		return p.Addr().String()
	}
	start, _, _ := strings.Cut(addrs, "-")
	return start
}
