// Command client is the client half of the sidecar example: it fetches a
// URL through an ipsecd netstack, so the request and the answer cross the
// ESP tunnel its config file describes, then prints the body and the SA
// counters. It needs no root and no TUN device. See examples/sidecar/server
// for the other half.
//
//	go run ./examples/sidecar/client --config examples/sidecar/client.yaml
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/stack/stackfile"
)

func main() {
	cfgPath := flag.String("config", "examples/sidecar/client.yaml", "ipsecd config file (one interface): the tunnel")
	url := flag.String("url", "http://198.51.100.1:8080/", "what to fetch through the tunnel")
	timeout := flag.Duration("timeout", 15*time.Second, "give up after this long")
	flag.Parse()
	if err := fetch(*cfgPath, *url, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		os.Exit(1)
	}
}

func fetch(cfgPath, url string, timeout time.Duration) error {
	cfg, err := config.Load(cfgPath)
	if err != nil {
		return err
	}
	tnet, err := stackfile.New(cfg)
	if err != nil {
		return fmt.Errorf("%s: %w", cfgPath, err)
	}
	defer tnet.Close()

	// Every connection the client makes goes through the netstack: the
	// Transport never touches the host's own TCP.
	client := &http.Client{
		Transport: &http.Transport{DialContext: tnet.DialContext},
		Timeout:   timeout,
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	fmt.Printf("GET %s through ESP (underlay %s): %s\n%s", url, tnet.UnderlayAddr(), resp.Status, body)
	client.CloseIdleConnections()

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
	return nil
}
