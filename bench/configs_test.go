package main

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/sa"
)

// The generated configs must be valid, and each side's out SAs must be the
// other side's in SAs with the same keys.
func TestConfigs(t *testing.T) {
	tests := []struct {
		name               string
		spec               ipsecSpec
		ifaces, outPerSide int
	}{
		{"basic", ipsecSpec{suite: aesGCM128, queues: 2}, 1, 1},
		{"chacha", ipsecSpec{suite: chacha20, queues: 1}, 1, 1},
		{"one SA with selector", ipsecSpec{suite: aesGCM128, queues: 1, sas: 1, selectors: true}, 1, 1},
		{"1000 interfaces", ipsecSpec{suite: aesGCM128, queues: 1, ifaces: 1000}, 1000, 1000},
		{"10000 interfaces", ipsecSpec{suite: aesGCM128, queues: 1, ifaces: 10000}, 10000, 10000},
		{"1000 SAs", ipsecSpec{suite: aesGCM128, queues: 1, sas: 1000}, 1, 1000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := tt.spec.configs()
			ca, err := config.Parse("a.yaml", []byte("control: /tmp/a.sock\n"+a))
			if err != nil {
				t.Fatalf("A: %v", err)
			}
			cb, err := config.Parse("b.yaml", []byte("control: /tmp/b.sock\n"+b))
			if err != nil {
				t.Fatalf("B: %v", err)
			}
			if got := len(ca.Interfaces); got != tt.ifaces {
				t.Errorf("interfaces: got %d, want %d", got, tt.ifaces)
			}
			// One side's addresses and routes never meet: the kernel
			// would refuse a route the same as another's, or send
			// traffic into the wrong interface. (The prefixes are /24
			// and /26 in separate ranges, so equal masked /24s would
			// show any overlap.)
			for _, c := range []*config.Config{ca, cb} {
				seen := map[netip.Prefix]string{}
				for _, ifc := range c.Interfaces {
					var ps []netip.Prefix
					for _, a := range ifc.Addresses {
						ps = append(ps, a.Masked())
					}
					ps = append(ps, ifc.Routes...)
					for _, p := range ps {
						key, _ := p.Addr().Prefix(min(p.Bits(), 24))
						if p.Bits() == 26 {
							key = p
						}
						if other, ok := seen[key]; ok && other != ifc.Name {
							t.Fatalf("%s: %s of %s meets a prefix of %s", c.File, p, ifc.Name, other)
						}
						seen[key] = ifc.Name
					}
				}
			}
			in := map[uint32]sa.Config{}
			for _, s := range cb.States {
				if s.Dir == sa.DirIn {
					in[s.SPI] = s.Config
				}
			}
			out := 0
			for _, s := range ca.States {
				if s.Dir != sa.DirOut {
					continue
				}
				out++
				peer, ok := in[s.SPI]
				if !ok {
					t.Fatalf("A's out SPI %#x: no in SA on B", s.SPI)
				}
				if !bytes.Equal(peer.AEAD.Key, s.AEAD.Key) || peer.IfID != s.IfID {
					t.Errorf("SPI %#x: B's in SA differs in key or if_id", s.SPI)
				}
			}
			if out != tt.outPerSide {
				t.Errorf("out SAs: got %d, want %d", out, tt.outPerSide)
			}
		})
	}
}
