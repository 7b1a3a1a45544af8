package sa

import (
	"testing"
	"time"
)

// TestLastUsedByTick: an SA's last use is dated by the SAD's Tick, to the
// Tick that first sees its packet counter move, and not touched by a Tick
// that sees no new packet; the data path itself reads no clock.
func TestLastUsedByTick(t *testing.T) {
	out, _ := pair(t, ModeTunnel, false, true, 0, suites[0].set)
	d := NewSAD(nil)
	if err := d.Add(out); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	d.Tick(t0)
	if got := out.Stats().LastUsed; !got.IsZero() {
		t.Fatalf("unused SA: LastUsed %v, want zero", got)
	}
	sealOne(t, out, ipv4Packet(16))
	if got := out.Stats().LastUsed; !got.IsZero() {
		t.Fatalf("LastUsed %v before any Tick saw the packet, want zero", got)
	}
	t1 := t0.Add(time.Second)
	d.Tick(t1)
	if got := out.Stats().LastUsed; !got.Equal(t1) {
		t.Errorf("after a packet and a Tick: LastUsed %v, want %v", got, t1)
	}
	d.Tick(t1.Add(time.Second))
	if got := out.Stats().LastUsed; !got.Equal(t1) {
		t.Errorf("after a Tick without packets: LastUsed %v, want still %v", got, t1)
	}
}

// TestSetLifetime: SetLifetime changes the limits in place (the next
// packet meets the new hard limit), refuses a soft limit above its hard
// one without changing anything, and Config reports the limits in force.
func TestSetLifetime(t *testing.T) {
	out, _ := pair(t, ModeTunnel, false, true, 0, suites[0].set)
	sealOne(t, out, ipv4Packet(16))
	if err := out.SetLifetime(Lifetime{SoftPackets: 5, HardPackets: 2}); err == nil {
		t.Fatal("soft_packets 5 above hard_packets 2 was taken")
	}
	if got := out.Config().Lifetime; got != (Lifetime{}) {
		t.Fatalf("a refused SetLifetime changed the limits to %+v", got)
	}
	if err := out.SetLifetime(Lifetime{HardPackets: 2}); err != nil {
		t.Fatal(err)
	}
	if got := out.Config().Lifetime; got != (Lifetime{HardPackets: 2}) {
		t.Errorf("Config().Lifetime %+v, want hard_packets 2", got)
	}
	sealOne(t, out, ipv4Packet(16)) // the second packet: within the limit
	ps := []Packet{mkPacket(ipv4Packet(16))}
	out.SealBatch(ps)
	if ps[0].Drop != XfrmOutStateExpired {
		t.Errorf("third packet under hard_packets 2: drop %v, want %v", ps[0].Drop, XfrmOutStateExpired)
	}
}
