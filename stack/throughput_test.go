package stack

import (
	"io"
	"net"
	"net/netip"
	"testing"

	"github.com/ipsecd/ipsecd/sa"
)

// BenchmarkStackTCP measures one TCP stream from one netstack to the
// other through ESP over loopback (tunnel mode, inner IPv4), per suite:
// each op writes 64 KiB. Allocations are the whole process's (both
// netstacks, their data paths and the test's reader) per 64 KiB.
func BenchmarkStackTCP(b *testing.B) {
	for _, s := range suites {
		b.Run(s.Name, func(b *testing.B) {
			p := startPair(b, pairSpec{suite: s, mode: sa.ModeTunnel, outer: lo4, inner: doc4})
			ln, err := p.nets[1].ListenTCP(&net.TCPAddr{Port: 5003})
			if err != nil {
				b.Fatal(err)
			}
			defer ln.Close()
			done := make(chan int64, 1)
			go func() {
				c, err := ln.Accept()
				if err != nil {
					done <- 0
					return
				}
				n, _ := io.Copy(io.Discard, c)
				c.Close()
				done <- n
			}()
			c, err := p.nets[0].Dial("tcp", netip.AddrPortFrom(doc4[1], 5003).String())
			if err != nil {
				b.Fatal(err)
			}
			buf := make([]byte, 64<<10)
			b.SetBytes(int64(len(buf)))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := c.Write(buf); err != nil {
					b.Fatal(err)
				}
			}
			c.Close()
			if n := <-done; n != int64(b.N*len(buf)) {
				b.Fatalf("received %d bytes, sent %d", n, b.N*len(buf))
			}
			b.StopTimer()
		})
	}
}
