// Command roadwarrior joins a remote-access VPN from a Go program, as a
// laptop's VPN client would, with no root, no TUN device and no kernel
// ESP: its userspace netstack (package stack/stackike) negotiates IKEv2
// with the gateway, takes the virtual IP and DNS servers the gateway
// gives, resolves a name with those servers and fetches a URL, all
// through the tunnel. See roadwarrior.yaml for the connection.
//
//	go run ./examples/roadwarrior --config examples/roadwarrior/roadwarrior.yaml \
//	    --url http://intranet.corp.example/
package main

import (
	"context"
	"crypto/sha256"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/ikenode"
	"github.com/ipsecd/ipsecd/stack/stackike"
)

func main() {
	cfgPath := flag.String("config", "examples/roadwarrior/roadwarrior.yaml", "ipsecd config file: one interface, the connection to the gateway")
	url := flag.String("url", "http://10.4.0.1/", "what to fetch through the tunnel; its host name is resolved by the gateway's DNS servers")
	timeout := flag.Duration("timeout", 30*time.Second, "give up after this long")
	flag.Parse()
	cfg, err := config.Load(*cfgPath)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), *timeout)
		err = run(ctx, cfg, *url, os.Stdout)
		cancel()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "roadwarrior:", err)
		os.Exit(1)
	}
}

// run brings the VPN up with cfg's first connection, fetches url through
// it, prints what it got, and brings the VPN down.
func run(ctx context.Context, cfg *config.Config, url string, out io.Writer) error {
	tnet, err := stackike.New(stackike.Config{File: cfg})
	if err != nil {
		return err
	}
	defer tnet.Close() // deletes the IKE SA with the gateway
	if err := tnet.Initiate(ikenode.Target{IKE: cfg.Connections[0].Name}); err != nil {
		return err
	}
	vips, err := tnet.WaitVirtualIP(ctx) // or why none came: a wrong password, no answer
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "virtual IP %v, DNS servers %v\n", vips, tnet.DNS())

	// tnet.DialContext resolves names with the gateway's DNS servers,
	// through the tunnel, and connects from the virtual IP.
	client := &http.Client{Transport: &http.Transport{DialContext: tnet.DialContext}}
	defer client.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, msg)
	}
	sum := sha256.New()
	n, err := io.Copy(sum, resp.Body)
	if err != nil {
		return fmt.Errorf("GET %s: after %d bytes: %w", url, n, err)
	}
	fmt.Fprintf(out, "GET %s through the VPN: %s, %d bytes, sha256 %x\n", url, resp.Status, n, sum.Sum(nil))
	return nil
}
