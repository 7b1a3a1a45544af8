package sa

import "testing"

// Benchmarks of the inner-header readers the seal and open paths call once
// per packet: what an IP header reading costs beside the cipher.

// benchDatagrams are one datagram of each shape the readers meet: IPv4
// and IPv6 with TCP and UDP, and IPv6 with a destination options header
// that the transport-mode walk goes through.
var benchDatagrams = []struct {
	name string
	pkt  []byte
}{
	{"v4udp", v4(protoUDP, udp(1400))},
	{"v4tcp", v4(protoTCP, tcp(8, 1400))},
	{"v6udp", v6(protoUDP, udp(1400))},
	{"v6destopts", v6(ipv6DestOpts, ext(protoTCP, 1), tcp(8, 1400))},
}

// benchReader runs read, which must accept, on each of benchDatagrams.
// The call through a func value costs the same for every reader.
func benchReader(b *testing.B, read func([]byte) bool) {
	for _, d := range benchDatagrams {
		b.Run(d.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if !read(d.pkt) {
					b.Fatal("refused")
				}
			}
		})
	}
}

func BenchmarkTransportHeader(b *testing.B) {
	benchReader(b, func(p []byte) bool { _, _, ok := transportHeader(p); return ok })
}

func BenchmarkInnerAddrs(b *testing.B) {
	benchReader(b, func(p []byte) bool { _, _, ok := innerAddrs(p); return ok })
}

func BenchmarkTunnelNextHeader(b *testing.B) {
	benchReader(b, func(p []byte) bool { _, ok := tunnelNextHeader(p); return ok })
}
