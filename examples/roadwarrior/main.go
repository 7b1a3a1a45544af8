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
	"flag"
	"fmt"
	"io"
	"net"
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
	vips, err := tnet.WaitVirtualIP(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "virtual IP %v, DNS servers %v\n", vips, tnet.DNS())

	// Names are resolved by the gateway's DNS servers, through the
	// tunnel; connections leave from the virtual IP.
	dialer := func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		ips, err := tnet.Resolver().LookupNetIP(ctx, "ip", host)
		if err != nil {
			return nil, err
		}
		return tnet.DialContext(ctx, network, net.JoinHostPort(ips[0].String(), port))
	}
	client := &http.Client{Transport: &http.Transport{DialContext: dialer}}
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
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	fmt.Fprintf(out, "GET %s through the VPN: %s\n%s", url, resp.Status, body)
	return nil
}
