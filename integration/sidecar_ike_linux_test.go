package integration

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/control"
	"github.com/ipsecd/ipsecd/ikenode"
	"github.com/ipsecd/ipsecd/internal/tcpcheck"
	"github.com/ipsecd/ipsecd/stack/stackike"
)

// TestSidecarIKE joins a sidecar that negotiates with IKEv2 (package
// stack/stackike, linked into this test) and a real `ipsecd run` daemon
// in namespace A. The sidecar's underlay socket is bound at
// 192.0.2.2:4500 in namespace B; its netstack and IKE goroutine stay in
// the test's. The sidecar initiates on port 4500 from its first message
// and the daemon answers there; a checksummed TCP stream goes each way
// between the netstack and a kernel socket behind the daemon's TUN, the
// child rekeyed by the daemon in the middle of the first and by the
// sidecar in the middle of the second, and the daemon drops nothing.
func TestSidecarIKE(t *testing.T) {
	const n = 8 << 20
	p := newPair(t)
	d := startDaemon(t, p.a, ikeSideRaw(false, "0.0.0.0", underlayA4, underlayB4, "a.example.net", "b.example.net", innerA4, prefix24(innerB4), "none", ""))

	text := ikeSideRaw(false, underlayB4, underlayB4, underlayA4, "b.example.net", "a.example.net", innerB4, prefix24(innerA4), "none", "") +
		"state_dir: " + t.TempDir() + "\n"
	cfg, err := config.Parse("sidecar.yaml", []byte(text))
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	var sc *stackike.Net
	if err := p.b.Do(func() (err error) {
		sc, err = stackike.New(stackike.Config{File: cfg})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer sc.Close()

	if err := sc.Initiate(ikenode.Target{IKE: "peer"}); err != nil {
		t.Fatal(err)
	}
	before := d.waitIKE("the sidecar's child", anyChild)
	if before.Initiator {
		t.Errorf("the daemon lists itself as the initiator of the sidecar's IKE SA")
	}

	// Sidecar → the daemon's side, the daemon rekeying.
	var ln net.Listener
	if err := p.a.Do(func() (err error) { ln, err = net.Listen("tcp", innerA4+":5201"); return err }); err != nil {
		t.Fatal(err)
	}
	_, err = tcpcheck.Stream(context.Background(), ln, func(ctx context.Context) (net.Conn, error) {
		return sc.DialContext(ctx, "tcp", innerA4+":5201")
	}, n, func(*atomic.Int64) error {
		if out, err := d.ctl("ike", "rekey", "--child", "net"); err != nil {
			return fmt.Errorf("ipsecd ike rekey: %v: %s", err, out)
		}
		return sidecarRekeyed(sc, before.Children[0].SPIOut)
	})
	if err != nil {
		t.Fatalf("TCP sidecar → daemon across the daemon's child rekey: %v", err)
	}
	mid, err := sidecarSettled(sc, func(control.IKESAInfo) bool { return true })
	if err != nil {
		t.Fatal(err)
	}

	// The daemon's side → sidecar, the sidecar rekeying.
	if ln, err = sc.ListenTCP(&net.TCPAddr{IP: net.ParseIP(innerB4), Port: 5201}); err != nil {
		t.Fatal(err)
	}
	_, err = tcpcheck.Stream(context.Background(), ln, func(ctx context.Context) (c net.Conn, err error) {
		err = p.a.Do(func() (err error) {
			var dl net.Dialer
			c, err = dl.DialContext(ctx, "tcp", innerB4+":5201")
			return err
		})
		return c, err
	}, n, func(*atomic.Int64) error {
		if err := sc.Rekey(ikenode.Target{Child: "net"}); err != nil {
			return err
		}
		return sidecarRekeyed(sc, mid.Children[0].SPIIn)
	})
	if err != nil {
		t.Fatalf("TCP daemon → sidecar across the sidecar's child rekey: %v", err)
	}
	after := d.waitIKE("the rekeyed child", anyChild)
	if after.Children[0].SPIIn == before.Children[0].SPIIn {
		t.Errorf("the daemon's child %s before and after two rekeys", after.Children[0].SPIIn)
	}
	st := d.stats()
	for c, v := range st {
		if strings.HasPrefix(c, "Xfrm") && v != 0 {
			t.Errorf("daemon: %s = %d, want 0", c, v)
		}
	}
}

// sidecarSettled waits up to 20 s until sc lists one established IKE SA
// with one installed child and nothing else, for which done holds.
func sidecarSettled(sc *stackike.Net, done func(control.IKESAInfo) bool) (control.IKESAInfo, error) {
	deadline := time.Now().Add(20 * time.Second)
	for {
		sas, err := sc.List()
		if err != nil {
			return control.IKESAInfo{}, err
		}
		var up []control.IKESAInfo
		for _, s := range sas {
			if s.State != "REKEYED" {
				up = append(up, s)
			}
		}
		if len(up) == 1 && up[0].State == "ESTABLISHED" && len(up[0].Children) == 1 && up[0].Children[0].State == "INSTALLED" && done(up[0]) {
			return up[0], nil
		}
		if time.Now().After(deadline) {
			return control.IKESAInfo{}, fmt.Errorf("the sidecar's SAs did not settle within 20 s: %+v", sas)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// sidecarRekeyed waits until the sidecar's child no longer has the SPI
// old, in or out.
func sidecarRekeyed(sc *stackike.Net, old string) error {
	_, err := sidecarSettled(sc, func(s control.IKESAInfo) bool {
		c := s.Children[0]
		return c.SPIIn != old && c.SPIOut != old
	})
	return err
}
