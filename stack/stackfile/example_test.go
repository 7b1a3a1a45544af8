package stackfile_test

import (
	"fmt"
	"io"
	"log"
	"net/http"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/stack/stackfile"
)

// A sidecar built from a daemon config file: an HTTP client whose
// connections go through ESP (see examples/sidecar for the pair).
func ExampleNew() {
	cfg, err := config.Load("client.yaml")
	if err != nil {
		log.Fatal(err) // FILE:LINE: field: what is wrong
	}
	tnet, err := stackfile.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer tnet.Close()

	client := &http.Client{Transport: &http.Transport{DialContext: tnet.DialContext}}
	resp, err := client.Get("http://203.0.113.1:8080/")
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Printf("%s", body)
}
