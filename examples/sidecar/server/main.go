// Command server is the server half of the sidecar example: an HTTP server
// whose listener lives in an ipsecd netstack, so the only way to reach it
// is the ESP tunnel its config file describes. It needs no root and no TUN
// device: ipsecd is linked in as a library and its ESP travels over an
// ordinary UDP socket.
//
// From the module root, in two terminals:
//
//	go run ./examples/sidecar/server --config examples/sidecar/server.yaml
//	go run ./examples/sidecar/client --config examples/sidecar/client.yaml
//
// The server prints one "serving" line once it listens, and its SA
// counters when it stops (SIGINT or SIGTERM).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/stack"
	"github.com/ipsecd/ipsecd/stack/stackfile"
)

func main() {
	cfgPath := flag.String("config", "examples/sidecar/server.yaml", "ipsecd config file (one interface): the tunnel")
	port := flag.Int("port", 8080, "TCP port to serve HTTP on, on the netstack's addresses")
	flag.Parse()
	if err := serve(*cfgPath, *port); err != nil {
		fmt.Fprintln(os.Stderr, "server:", err)
		os.Exit(1)
	}
}

func serve(cfgPath string, port int) error {
	if port <= 0 || port > 65535 {
		return fmt.Errorf("--port %d: want 1..65535", port)
	}
	cfg, err := config.Load(cfgPath)
	if err != nil {
		return err
	}
	tnet, err := stackfile.New(cfg)
	if err != nil {
		return fmt.Errorf("%s: %w", cfgPath, err)
	}
	defer tnet.Close()

	// The listener is in the netstack, not in the kernel: nothing on the
	// host can connect to it, only a peer holding the SA's keys.
	ln, err := tnet.ListenTCP(&net.TCPAddr{Port: port})
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "hello %s, this is %s: your request and this answer crossed ESP\n", r.RemoteAddr, r.Host)
		}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(shutdown)
	}()

	addrs := make([]string, len(cfg.Interfaces[0].Addresses))
	for i, a := range cfg.Interfaces[0].Addresses {
		addrs[i] = net.JoinHostPort(a.Addr().String(), fmt.Sprint(port))
	}
	fmt.Printf("serving HTTP on %v inside the netstack; ESP in UDP on %s\n", addrs, tnet.UnderlayAddr())
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	printCounters(tnet)
	return nil
}

// printCounters prints each SA's traffic and the xfrm_stat counters that
// are not zero, as `ipsecd state list` and `ipsecd stats` would.
func printCounters(tnet *stack.Net) {
	for _, s := range tnet.SAD().States() {
		c, st := s.Config(), s.Stats()
		fmt.Printf("SA %-3s spi %#x %s → %s: %d packets, %d bytes, integrity-failed %d\n",
			c.Dir, c.SPI, c.Src, c.Dst, st.Packets, st.Bytes, st.IntegrityFailed)
	}
	tnet.Counters().Each(func(name string, v uint64) {
		if v != 0 {
			fmt.Printf("%s\t%d\n", name, v)
		}
	})
}
