package stack_test

import (
	"fmt"
	"log"
	"net"
	"net/http"
	"net/netip"

	"github.com/ipsecd/ipsecd/sa"
	"github.com/ipsecd/ipsecd/stack"
)

// A sidecar built in code: a TCP server reachable only through an ESP
// tunnel (AES-GCM-128, tunnel mode, ESP in UDP) to a peer at 127.0.0.2.
func ExampleNew() {
	outKey := []byte("0123456789abcdef" + "salt") // ipsecd genkey makes real ones
	inKey := []byte("fedcba9876543210" + "tlas")
	state := func(dir sa.Dir, spi uint32, src, dst string, key []byte) sa.Config {
		return sa.Config{
			Src: netip.MustParseAddr(src), Dst: netip.MustParseAddr(dst),
			SPI: spi, Dir: dir, Mode: sa.ModeTunnel,
			AEAD:         &sa.Algorithm{Name: sa.AlgGCM, Key: key, Bits: 128},
			Encap:        &sa.Encap{SrcPort: 4500, DstPort: 4500},
			ReplayWindow: 1024, ESN: true,
		}
	}
	tnet, err := stack.New(stack.Config{
		Underlay:  netip.MustParseAddrPort("127.0.0.1:4500"),
		Addresses: []netip.Prefix{netip.MustParsePrefix("198.51.100.1/24")},
		Routes:    []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")},
		// Static keys: how far their sequence numbers went must
		// survive a restart (nonces are never reused).
		StateDir: "/var/lib/myserver/ipsecd",
		States: []sa.Config{
			state(sa.DirOut, 0x1001, "127.0.0.1", "127.0.0.2", outKey),
			state(sa.DirIn, 0x2001, "127.0.0.2", "127.0.0.1", inKey),
		},
	})
	if err != nil {
		log.Fatal(err) // names the field, wraps stack.ErrInvalidConfig
	}
	defer tnet.Close()

	ln, err := tnet.ListenTCP(&net.TCPAddr{Port: 8080})
	if err != nil {
		log.Fatal(err)
	}
	log.Fatal(http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello %s, through ESP\n", r.RemoteAddr)
	})))
}
