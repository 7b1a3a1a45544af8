package daemon

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ipsecd/ipsecd/control"
	ipnode "github.com/ipsecd/ipsecd/node"
	"github.com/ipsecd/ipsecd/sa"
	"github.com/ipsecd/ipsecd/underlay"
)

// backend is the node as the control socket sees it.
type backend Daemon

var _ control.Backend = (*backend)(nil)

// stateInfo describes s. Without keys, the copy of the keys that
// s.Config made is zeroed and dropped here, rather than left to the
// garbage collector after the server redacts it.
func stateInfo(s *sa.SA, keys bool) control.StateInfo {
	st := s.Stats()
	c := s.Config()
	if !keys {
		c.ClearKeys()
		for _, a := range []*sa.Algorithm{c.AEAD, c.Enc, c.Auth} {
			if a != nil {
				a.Key = nil
			}
		}
	}
	info := control.StateInfo{
		Config: c,
		Stats: control.StateStats{
			Bytes:           st.Bytes,
			Packets:         st.Packets,
			ReplayWindow:    st.ReplayWindow,
			Replay:          st.Replay,
			IntegrityFailed: st.IntegrityFailed,
			Seq:             st.Seq,
			SoftExpired:     st.SoftExpired,
			HardExpired:     st.HardExpired,
			Added:           st.Added.Round(0),
			LifetimeLeft:    control.NewLifetimeLeft(c.Lifetime, st.Added, time.Now(), st.Bytes, st.Packets),
		},
	}
	if !st.LastUsed.IsZero() {
		used := st.LastUsed.Round(0)
		info.Stats.LastUsed = &used
	}
	return info
}

// States returns every SA; the server strips the keys unless asked.
func (b *backend) States(keys bool) []control.StateInfo {
	states := b.sad.States()
	out := make([]control.StateInfo, len(states))
	for i, s := range states {
		out[i] = stateInfo(s, keys)
	}
	return out
}

func (b *backend) GetState(id control.StateID, keys bool) (control.StateInfo, error) {
	s, err := b.find(id)
	if err != nil {
		return control.StateInfo{}, err
	}
	return stateInfo(s, keys), nil
}

// find returns the SA id names. Without a direction, id is SPI and
// destination as ip xfrm names a state; an inbound and an outbound SA
// that share both need the direction to tell them apart.
func (b *backend) find(id control.StateID) (*sa.SA, error) {
	var found []*sa.SA
	for _, s := range b.sad.States() {
		if (id.Dir == 0 || s.Dir() == id.Dir) && s.SPI() == id.SPI && (!id.Dst.IsValid() || s.Dst() == id.Dst) {
			found = append(found, s)
		}
	}
	switch len(found) {
	case 0:
		return nil, fmt.Errorf("state %s: %w", id, control.ErrNotFound)
	case 1:
		return found[0], nil
	}
	return nil, fmt.Errorf("%w: state %s: names an inbound and an outbound SA; give its dir", control.ErrInvalid, id)
}

// AddState installs an SA on a running interface (`ipsecd state add`),
// owned by the control socket: a reload of the config file leaves it.
// The node refuses a key that any SA had in this daemon, of either
// direction, from the config file or an earlier `state add`, running or
// removed, as a reload refuses it: a second SA with it would start its
// sequence numbers, the AEADs' nonces, again at 1 (ipnode.ErrKeyUsed).
//
// c's key bytes are zeroed before AddState returns (the SA keeps a copy
// of its own). What cannot be zeroed: the request's JSON text and the hex
// strings decoded from it, which Go keeps as immutable strings until the
// garbage collector reuses their memory.
func (b *backend) AddState(c sa.Config) error {
	err := b.core.AddState(ipnode.OwnerControl, c)
	switch {
	case errors.Is(err, ipnode.ErrNoRawESP):
		return fmt.Errorf("%w: encap: missing, and this daemon's underlay has no raw ESP socket (underlay.raw_esp is off): "+
			"without encap the SA is raw ESP (IP protocol 50) and its traffic would be dropped; "+
			"add --encap espinudp:4500:4500, or set underlay.raw_esp: true and restart the daemon", control.ErrInvalid)
	}
	if ku := (*ipnode.KeyUsedError)(nil); errors.As(err, &ku) {
		return fmt.Errorf("%w: %s: %s: key material already used by an earlier SA (%s); "+
			"a second SA with it, of either direction, would start its sequence numbers again at 1, which AES-GCM and "+
			"ChaCha20-Poly1305 take as nonces (an inbound SA would accept the old packets again): generate a new key with ipsecd genkey",
			control.ErrInvalid, ku.Field, "SA "+ku.State.String(), ku.Prev)
	}
	return mapSAError(err)
}

func (b *backend) DeleteState(id control.StateID) error {
	s, err := b.find(id)
	if err != nil {
		return err
	}
	return mapSAError(b.core.DeleteState(ipnode.IDOf(s)))
}

func (b *backend) Policies() []sa.Policy { return b.sad.Policies() }

// AddPolicy adds a policy owned by the control socket: a reload of the
// config file leaves it, unless the file names the same policy, which
// then passes to the file.
func (b *backend) AddPolicy(p sa.Policy) error {
	return mapSAError(b.core.AddPolicy(ipnode.OwnerControl, p))
}

func (b *backend) DeletePolicy(p sa.Policy) error {
	return mapSAError(b.core.DeletePolicy(p))
}

// Stats returns the xfrm counters. Bad datagrams the underlay drops
// before the SAD sees them (too short, SPI 0) count as XfrmInHdrError and
// messages it fails to send as XfrmOutError, as in Linux; the underlay's
// own counters follow under ipsecd's names.
func (b *backend) Stats() []control.Counter {
	var u underlay.Counters // none before the underlay opens
	if b.conn != nil {
		u = b.conn.Counters()
	}
	var out []control.Counter
	b.counters.Each(func(name string, v uint64) {
		switch name {
		case "XfrmInHdrError":
			v += u.HeaderErrors
		case "XfrmOutError":
			v += u.SendErrors
		}
		out = append(out, control.Counter{Name: name, Value: v})
	})
	for _, c := range []control.Counter{
		{Name: "IpsecdUnderlayRxPackets", Value: u.RxPackets},
		{Name: "IpsecdUnderlayRxBytes", Value: u.RxBytes},
		{Name: "IpsecdUnderlayTxPackets", Value: u.TxPackets},
		{Name: "IpsecdUnderlayTxBytes", Value: u.TxBytes},
		{Name: "IpsecdUnderlayKeepalives", Value: u.Keepalives},
		{Name: "IpsecdUnderlayNonESP", Value: u.NonESP},
		{Name: "IpsecdUnderlayOversize", Value: u.Oversize},
		{Name: "IpsecdUnderlayTxGSO", Value: u.TxGSO},
		{Name: "IpsecdUnderlayRxGRO", Value: u.RxGRO},
	} {
		out = append(out, c)
	}
	return out
}

func (b *backend) Interfaces() []control.InterfaceInfo {
	ifcs := b.reg.All()
	out := make([]control.InterfaceInfo, len(ifcs))
	for i, ifc := range ifcs {
		st := ifc.Stats()
		out[i] = control.InterfaceInfo{
			Name: ifc.Name(), IfID: ifc.IfID(), MTU: ifc.MTU(), Queues: ifc.NumQueues(), TxQueueLen: ifc.Config().TxQueueLen,
			Addresses: ifc.Addresses(), Routes: ifc.Routes(),
			RX: control.LinkStats{Packets: st.RxPackets, Bytes: st.RxBytes, Errors: st.RxErrors, Drops: st.RxDrops},
			TX: control.LinkStats{Packets: st.TxPackets, Bytes: st.TxBytes, Errors: st.TxErrors, Drops: st.TxDrops},
		}
	}
	return out
}

// mapSAError turns the SAD's sentinels into the control socket's.
func mapSAError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, sa.ErrExists):
		return coded{control.ErrExists, err}
	case errors.Is(err, sa.ErrNotFound):
		return coded{control.ErrNotFound, err}
	case errors.Is(err, ipnode.ErrInvalid):
		// The node's message starts with ErrInvalid's text.
		return fmt.Errorf("%w: %v", control.ErrInvalid, strings.TrimPrefix(err.Error(), ipnode.ErrInvalid.Error()+": "))
	}
	return fmt.Errorf("%w: %v", control.ErrInvalid, err)
}

// coded gives err, whose message already ends in the same words ("state
// ...: already exists"), the control socket's sentinel without repeating
// them ("already exists: state ...: already exists").
type coded struct{ code, err error }

func (c coded) Error() string   { return c.err.Error() }
func (c coded) Unwrap() []error { return []error{c.code, c.err} }
