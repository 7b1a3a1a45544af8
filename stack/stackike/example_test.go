package stackike_test

import (
	"context"
	"log"
	"net/http"
	"net/netip"
	"os"
	"time"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/stack/stackike"
)

// A sidecar that negotiates its keys with IKEv2, in ten lines: sidecar.yaml
// is a daemon config with one interface, underlay.udp on port 4500 and
// connections: and secrets: as `ipsecd run` reads them. With the child's
// start_action: trap, the first request starts IKE.
func ExampleNew() {
	cfg, err := config.Load("sidecar.yaml")
	if err != nil {
		log.Fatal(err) // FILE:LINE: field: what is wrong
	}
	tnet, err := stackike.New(stackike.Config{File: cfg})
	if err != nil {
		log.Fatal(err)
	}
	defer tnet.Close()
	client := &http.Client{Transport: &http.Transport{DialContext: tnet.DialContext}}
	resp, err := client.Get("http://203.0.113.1:8080/")
	if err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()
}

// A program joins a company's VPN as a laptop does, with no config file:
// the user's name and password (from a prompt or a keyring), the
// gateway's address and identity and the CA that issued its
// certificate. The gateway gives the netstack an address and DNS
// servers; names then resolve through the tunnel.
func ExampleNew_roadWarrior() {
	ca, err := os.ReadFile("corp-ca.pem")
	if err != nil {
		log.Fatal(err)
	}
	var password []byte // e.g. golang.org/x/term's ReadPassword
	tnet, err := stackike.New(stackike.Config{RoadWarrior: &stackike.RoadWarrior{
		Gateway:   netip.MustParseAddr("192.0.2.1"),
		GatewayID: "vpn.corp.example",
		CA:        ca,
		User:      "alice",
		Password:  password,
	}})
	if err != nil {
		log.Fatal(err) // RoadWarrior.FIELD: what is wrong
	}
	defer tnet.Close() // logs out: deletes the IKE SA with the gateway
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	vips, err := tnet.WaitVirtualIP(ctx)
	if err != nil {
		log.Fatal(err) // and why: authentication failed, no answer, ...
	}
	log.Printf("on the VPN as %v, DNS servers %v", vips, tnet.DNS())
	client := &http.Client{Transport: &http.Transport{DialContext: tnet.DialContext}}
	resp, err := client.Get("https://intranet.corp.example/")
	if err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()
}
