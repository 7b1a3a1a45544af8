package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	crand "crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	_ "embed"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"text/template"
	"time"

	"github.com/ipsecd/ipsecd/control"
)

var (
	//go:embed demo/ra-gateway.yaml.tmpl
	demoRAGatewayTemplate string
	//go:embed demo/ra-client.yaml.tmpl
	demoRAClientTemplate string

	demoRAGatewayTmpl = template.Must(template.New("ra-gateway").Parse(demoRAGatewayTemplate))
	demoRAClientTmpl  = template.Must(template.New("ra-client").Parse(demoRAClientTemplate))
)

// demoRAEnd is an endpoint of the remote-access demo with the files of
// its certificate, key and the run's CA, for its template.
type demoRAEnd struct {
	*demoEndpoint
	Cert, Key, CA, DNS string
}

// runDemoRemoteAccess runs demoRemoteAccess when this machine can, and
// otherwise says what is missing.
func runDemoRemoteAccess(size int64, other bool) int {
	err := demoCanRun()
	switch {
	case other:
		err = errors.New("--remote-access runs two daemons in network namespaces; it takes neither --netstack nor --static")
	case os.Geteuid() != 0:
		err = errors.New("--remote-access needs root: it makes network namespaces, a veth pair and TUN devices (CAP_SYS_ADMIN and CAP_NET_ADMIN); there is no netstack variant yet")
	case err == nil:
		err = demoRemoteAccess(size)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "ipsecd demo:", err)
		return 1
	}
	return 0
}

// demoRemoteAccess is `ipsecd demo --remote-access`: a gateway and a road
// warrior, each an `ipsecd run` in a network namespace joined by a veth
// pair. The road warrior asks for a virtual IP, gets one of the
// gateway's pool with its DNS server (demoRADNS), resolves a name through
// that server, and from it pings 10.4.0.1 behind the gateway and sends it
// a checksummed TCP stream. It logs in as alice
// with EAP-MSCHAPv2, the gateway with its certificate: both, and the
// password, made fresh for the run. It prints what happened as a story, and "0 lost" only when
// neither end's Xfrm counters dropped a packet.
func demoRemoteAccess(size int64) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "ipsecd-demo-ra-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	tag := fmt.Sprint(os.Getpid())
	gw := &demoEndpoint{Name: "gateway", NS: "ipsecd-demo-gw-" + tag, Dev: "veth-gw", Local: "192.0.2.1", Peer: "192.0.2.2", Port: 4500, Mark: "0x100",
		Inner: "10.4.0.1", Remote: "10.3.0.0", Net: "10.4.0.0", ID: "vpn.demo.example", PeerID: "alice",
		Control: filepath.Join(dir, "gw.sock"), StateDir: filepath.Join(dir, "gw-state")}
	rw := &demoEndpoint{Name: "road warrior", NS: "ipsecd-demo-rw-" + tag, Dev: "veth-rw", Local: "192.0.2.2", Peer: "192.0.2.1", Port: 4500, Mark: "0x100",
		Remote: "10.4.0.0", ID: "alice", PeerID: gw.ID,
		Control: filepath.Join(dir, "rw.sock"), StateDir: filepath.Join(dir, "rw-state")}
	cert, key, err := demoRACert(dir, gw.ID)
	if err != nil {
		return err
	}
	password, err := demoSecret(dir, "alice.secret", "")
	if err != nil {
		return err
	}
	gw.PSKFile, rw.PSKFile = password, password
	render := func(e *demoEndpoint) ([]byte, error) { return demoRAConfig(e, e == gw, cert, key) }

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGPIPE)
	defer stop()
	defer demoCleanup(gw, rw)
	fmt.Printf("ipsecd demo --remote-access: a gateway (namespace %s) and a road warrior (%s), both ipsecd daemons, joined by a veth pair\n", gw.NS, rw.NS)
	fmt.Printf("  made for this run in %s (mode 0600, removed at the end): the gateway's self-signed certificate for %s and its key, and %s's EAP-MSCHAPv2 password\n", dir, gw.ID, rw.ID)
	if err := demoNetwork(gw, rw); err != nil {
		return err
	}
	if err := demoStart(ctx, self, dir, render, gw, rw); err != nil {
		return err
	}
	fmt.Printf("  gateway: underlay %s:4500, pool %s/24 with DNS %s, %s/24 behind it (its ipsec1 %s stands for the host there, %s for the DNS server)\n", gw.Local, gw.Remote, demoRADNS, gw.Net, gw.Inner, demoRADNS)
	fmt.Printf("  road warrior: underlay %s:4500, ipsec1 without an address, %s/24 routed into it\n", rw.Local, rw.Remote)
	fmt.Println()

	gwEnd, rwEnd := daemonEnd{gw, self}, daemonEnd{rw, self}
	fmt.Print("the road warrior initiates (ipsecd ike initiate --ike rw); waiting for its IKE SA, its virtual IP and the address on its ipsec1 ... ")
	start := time.Now()
	if err := rwEnd.ikeAction("ike.initiate", control.IKETarget{IKE: "rw"}); err != nil {
		fmt.Println()
		return err
	}
	sa, err := demoRAWait(ctx, rwEnd)
	if err != nil {
		fmt.Println()
		return fmt.Errorf("%w; the daemons' logs:\ngateway:\n%s\nroad warrior:\n%s", err, gwEnd.log(), rwEnd.log())
	}
	rw.Inner = sa.LocalVIPs[0]
	fmt.Printf("up in %v\n\n", demoSinceMS(start))

	gwSAs, err := gwEnd.ikeList()
	if err != nil || len(gwSAs) != 1 {
		return fmt.Errorf("the gateway's ike list: %v, %d IKE SAs, want 1", err, len(gwSAs))
	}
	fmt.Printf("The gateway proved itself with its certificate (%s); the road warrior logged in with EAP-MSCHAPv2 as '%s' (the gateway's ike list: remote EAP identity '%s').\n",
		gw.ID, rw.ID, gwSAs[0].RemoteEAPID)
	fmt.Println("The gateway leased it an address (ipsecd pool list --leases):")
	out, err := exec.Command(self, "pool", "list", "--leases", "--control", gw.Control).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ipsecd pool list --leases: %v: %s", err, bytes.TrimSpace(out))
	}
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		fmt.Println("  " + line)
	}
	fmt.Printf("The road warrior holds virtual IP %s on its ipsec1, and the gateway named DNS server %s.\n", rw.Inner, strings.Join(sa.DNS, ", "))
	if len(sa.DNS) == 0 {
		return errors.New("the gateway named no DNS server")
	}
	stopDNS, err := demoRAServeDNS(gw)
	if err != nil {
		return err
	}
	defer stopDNS()
	names, err := demoRAResolve(ctx, rw, sa.DNS[0])
	if err != nil {
		return err
	}
	fmt.Printf("%s resolved through DNS server %s, in the tunnel: %v\n", demoRADNSName, sa.DNS[0], names)
	ping, err := demoRAPing(rw, gw.Inner)
	if err != nil {
		return err
	}
	fmt.Printf("ping %s from %s: %s\n", gw.Inner, rw.Inner, ping)
	took, err := demoTCP(ctx, rw, gw, size, nil)
	if err != nil {
		return fmt.Errorf("TCP to %s: %w", gw.Inner, err)
	}
	demoPrintTransfer(rw, gw, size, took)
	fmt.Println()
	if err := demoIKEList(rwEnd, "with its virtual IP"); err != nil {
		return err
	}
	fmt.Println()
	if err := demoNoneLost(gwEnd, rwEnd); err != nil {
		return err
	}
	fmt.Println("0 lost: every ping answered, the stream arrived whole (SHA-256 equal), and no ESP packet was dropped at either end (every Xfrm error counter 0)")
	return nil
}

// demoRAConfig renders the remote-access demo's config for e, the
// gateway's or the road warrior's, with the gateway's self-signed
// certificate and key (the road warrior's trust anchor).
func demoRAConfig(e *demoEndpoint, gateway bool, cert, key string) ([]byte, error) {
	t := demoRAClientTmpl
	if gateway {
		t = demoRAGatewayTmpl
	}
	var cfg bytes.Buffer
	err := t.Execute(&cfg, demoRAEnd{e, cert, key, cert, demoRADNS})
	return cfg.Bytes(), err
}

// demoRAWait waits until the road warrior has an established IKE SA with
// a virtual IP and an installed child, and the address is on its ipsec1.
func demoRAWait(ctx context.Context, rw daemonEnd) (control.IKESAInfo, error) {
	deadline := time.Now().Add(demoIKEWait)
	state := "no IKE SA"
	for time.Now().Before(deadline) && ctx.Err() == nil {
		sa, err := demoIKESA(rw)
		switch {
		case err != nil:
			state = err.Error()
		case len(sa.LocalVIPs) == 0:
			state = "an IKE SA without a virtual IP"
		default:
			out, _ := exec.Command("ip", "-n", rw.e.NS, "addr", "show", "dev", "ipsec1").Output()
			if bytes.Contains(out, []byte(" "+sa.LocalVIPs[0]+"/")) {
				return sa, nil
			}
			state = "virtual IP " + sa.LocalVIPs[0] + " not yet on ipsec1"
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := ctx.Err(); err != nil {
		return control.IKESAInfo{}, err
	}
	return control.IKESAInfo{}, fmt.Errorf("no virtual IP within %v (%s)", demoIKEWait, state)
}

var demoPingSummary = regexp.MustCompile(`(\d+) packets transmitted, (\d+) received[^\n]*`)

// demoRAPing pings dst 3 times from e's namespace and returns ping's
// summary; an unanswered ping is an error.
func demoRAPing(e *demoEndpoint, dst string) (string, error) {
	out, err := exec.Command("ip", "netns", "exec", e.NS, "ping", "-n", "-c", "3", "-i", "0.2", "-w", "10", dst).CombinedOutput()
	m := demoPingSummary.FindSubmatch(out)
	if err != nil || m == nil || string(m[1]) != string(m[2]) {
		return "", fmt.Errorf("ping %s from the %s: %v\n%s", dst, e.Name, err, out)
	}
	return string(m[0]), nil
}

// demoRACert writes a self-signed certificate for id (ECDSA P-256, a
// day's validity, its own CA) and its key into dir, mode 0600, and
// returns their paths.
func demoRACert(dir, id string) (cert, key string, err error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), crand.Reader)
	if err != nil {
		return "", "", err
	}
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: id}, DNSNames: []string{id},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(crand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		return "", "", err
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return "", "", err
	}
	defer clear(pkcs8)
	write := func(name, typ string, der []byte) (string, error) {
		p := filepath.Join(dir, name)
		return p, os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
	}
	if cert, err = write("gw.pem", "CERTIFICATE", der); err != nil {
		return "", "", err
	}
	key, err = write("gw.key", "PRIVATE KEY", pkcs8)
	return cert, key, err
}
