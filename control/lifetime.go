package control

import (
	"fmt"
	"time"

	"github.com/ipsecd/ipsecd/sa"
)

// LifetimeLeft is what is left of an SA's limits: bytes and packets
// until each limit, and seconds until each add-time limit (0 once
// passed). A limit the SA does not have is absent (nil).
type LifetimeLeft struct {
	SoftBytes      *uint64 `json:"soft_bytes,omitempty"`
	HardBytes      *uint64 `json:"hard_bytes,omitempty"`
	SoftPackets    *uint64 `json:"soft_packets,omitempty"`
	HardPackets    *uint64 `json:"hard_packets,omitempty"`
	SoftAddSeconds *uint64 `json:"soft_add_seconds,omitempty"`
	HardAddSeconds *uint64 `json:"hard_add_seconds,omitempty"`
}

// NewLifetimeLeft works out what is left of lt at now for an SA added
// at added that has counted bytes and packets; nil when lt sets no limit.
func NewLifetimeLeft(lt sa.Lifetime, added, now time.Time, bytes, packets uint64) *LifetimeLeft {
	if lt == (sa.Lifetime{}) {
		return nil
	}
	left := func(limit, used uint64) *uint64 {
		if limit == 0 {
			return nil
		}
		v := limit - min(used, limit)
		return &v
	}
	age := uint64(max(now.Sub(added), 0) / time.Second)
	return &LifetimeLeft{
		SoftBytes: left(lt.SoftBytes, bytes), HardBytes: left(lt.HardBytes, bytes),
		SoftPackets: left(lt.SoftPackets, packets), HardPackets: left(lt.HardPackets, packets),
		SoftAddSeconds: left(uint64(lt.SoftAdd/time.Second), age), HardAddSeconds: left(uint64(lt.HardAdd/time.Second), age),
	}
}

// lifetime converts l to sa.Lifetime.
func (l *LifetimeSpec) lifetime() (sa.Lifetime, error) {
	const maxSeconds = uint64(1<<63-1) / uint64(time.Second)
	if l.SoftAddSeconds > maxSeconds || l.HardAddSeconds > maxSeconds {
		return sa.Lifetime{}, fmt.Errorf("lifetime: seconds out of range")
	}
	return sa.Lifetime{SoftBytes: l.SoftBytes, HardBytes: l.HardBytes, SoftPackets: l.SoftPackets, HardPackets: l.HardPackets,
		SoftAdd: time.Duration(l.SoftAddSeconds) * time.Second, HardAdd: time.Duration(l.HardAddSeconds) * time.Second}, nil
}

// NewLifetimeSpec converts l for the wire.
func NewLifetimeSpec(l sa.Lifetime) *LifetimeSpec {
	return &LifetimeSpec{SoftBytes: l.SoftBytes, HardBytes: l.HardBytes, SoftPackets: l.SoftPackets, HardPackets: l.HardPackets,
		SoftAddSeconds: uint64(l.SoftAdd / time.Second), HardAddSeconds: uint64(l.HardAdd / time.Second)}
}
