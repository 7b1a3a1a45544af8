package stackike_test

import (
	"log"
	"net/http"

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
