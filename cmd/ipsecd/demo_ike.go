package main

import (
	"bytes"
	"context"
	crand "crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"text/template"
	"time"

	"github.com/ipsecd/ipsecd/control"
)

//go:embed demo/ike-endpoint.yaml.tmpl
var demoIKETemplate string

var demoIKETmpl = template.Must(template.New("ike-endpoint").Parse(demoIKETemplate))

// demoIKEConfig renders the IKE demo's embedded config for e.
func demoIKEConfig(e *demoEndpoint) ([]byte, error) {
	var cfg bytes.Buffer
	if err := demoIKETmpl.Execute(&cfg, e); err != nil {
		return nil, err
	}
	return cfg.Bytes(), nil
}

// demoPSK writes a fresh random pre-shared key of 32 bytes, as 0x-hex,
// to a file of mode 0600 in dir (the demo's temporary directory, removed
// with it) and returns its path.
func demoPSK(dir string) (string, error) {
	return demoSecret(dir, "demo.psk", "0x")
}

// demoSecret writes prefix and 32 fresh random bytes in hex to the new
// file name in dir, mode 0600, and returns its path. Without a prefix
// the hex is the secret's text (a password).
func demoSecret(dir, name, prefix string) (string, error) {
	k := make([]byte, 32)
	crand.Read(k)
	path := filepath.Join(dir, name)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", err
	}
	_, err = fmt.Fprintf(f, "%s%s\n", prefix, hex.EncodeToString(k))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	clear(k)
	return path, err
}

// demoIKEWait bounds each wait of the IKE demo: for the IKE SA, for a
// rekey. Between two namespaces on one machine each takes milliseconds.
const demoIKEWait = 15 * time.Second

// demoIKEEnd is one end of the IKE demo: a daemon in a network namespace,
// driven over its control socket (daemonEnd), or a sidecar in this
// process (netstackEnd, demo_netstack_ike.go).
type demoIKEEnd interface {
	endpoint() *demoEndpoint
	// ikeAction runs `ipsecd ike initiate|rekey` (cmd ike.initiate,
	// ike.rekey).
	ikeAction(cmd string, t control.IKETarget) error
	ikeList() ([]control.IKESAInfo, error)
	// ikeListText is what `ipsecd ike list` prints.
	ikeListText() (string, error)
	// counters are the end's counters, as `ipsecd stats` lists them,
	// and what shows them (the command, for a daemon).
	counters() (what string, cs []control.Counter, err error)
	// tcp sends a checksummed stream of size bytes to to (tcpcheck.Stream).
	tcp(ctx context.Context, to demoIKEEnd, size int64, mid func(sent *atomic.Int64) error) (time.Duration, error)
	// log is what the end logged, for an error.
	log() string
}

// demoIKE is the IKE demo once both ends run: it has A initiate the
// IKE SA, sends a checksummed TCP stream each way and, half-way through,
// rekeys: the child and then the IKE SA from A in the stream A → B, the
// child from B in the stream B → A. Then it prints `ipsecd ike list`
// before and after, the SPIs, the counters, and whether any packet was
// lost: a drop counted by either data path fails the demo.
func demoIKE(ctx context.Context, a, b demoIKEEnd, size int64) error {
	fmt.Printf("  IKE SA aes128gcm16-prfsha256-x25519, authenticated by a pre-shared key made for this run (%s, mode 0600, removed at the end)\n", a.endpoint().PSKFile)
	fmt.Println("  child ESP aes128gcm16-x25519 (X25519 again at each rekey), tunnel mode, ESP in UDP, replay window 1024")
	fmt.Println()

	fmt.Print("initiating from A (ipsecd ike initiate --ike demo), waiting for the IKE SA and its child ... ")
	start := time.Now()
	if err := a.ikeAction("ike.initiate", control.IKETarget{IKE: "demo"}); err != nil {
		fmt.Println()
		return err
	}
	before, err := demoSettled(ctx, a, b, "the IKE SA", demoAny)
	if err != nil {
		fmt.Println()
		return err
	}
	fmt.Printf("up in %v\n", demoSinceMS(start))
	fmt.Println()
	if err := demoIKEList(a, "before the rekeys"); err != nil {
		return err
	}
	fmt.Println()

	plan := map[demoIKEEnd][]demoRekey{
		a: {{by: a, what: "the child", target: control.IKETarget{Child: "net"}}, {by: a, what: "the IKE SA", target: control.IKETarget{IKE: "demo"}}},
		b: {{by: b, what: "the child", target: control.IKETarget{Child: "net"}}},
	}
	for _, dir := range [][2]demoIKEEnd{{a, b}, {b, a}} {
		if err := ctx.Err(); err != nil {
			return err
		}
		from, to := dir[0], dir[1]
		fe, te := from.endpoint(), to.endpoint()
		fmt.Printf("TCP %s → %s: sending %d MiB ...\n", fe.Name, te.Name, size>>20)
		took, err := from.tcp(ctx, to, size, func(sent *atomic.Int64) error {
			for _, r := range plan[from] {
				if err := r.run(ctx, a, b, sent, size); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("TCP %s → %s: %w", fe.Name, te.Name, err)
		}
		demoPrintTransfer(fe, te, size, took)
	}
	fmt.Println()

	after, err := demoSettled(ctx, a, b, "the rekeyed SAs", demoAny)
	if err != nil {
		return err
	}
	if err := demoIKEList(a, "after the rekeys"); err != nil {
		return err
	}
	fmt.Println()
	fmt.Printf("SPIs before and after (A's view):\n")
	fmt.Printf("  IKE SA %s_i %s_r → %s_i %s_r\n", before.SPIInitiator, before.SPIResponder, after.SPIInitiator, after.SPIResponder)
	bc, ac := before.Children[0], after.Children[0]
	fmt.Printf("  child  %s_i %s_o → %s_i %s_o\n", bc.SPIIn, bc.SPIOut, ac.SPIIn, ac.SPIOut)
	fmt.Println()

	if err := demoNoneLost(a, b); err != nil {
		return err
	}
	fmt.Println("0 lost: both streams arrived whole (SHA-256 equal) across three rekeys, and no ESP packet was dropped at either end (XfrmInNoStates, XfrmInStateSeqError, XfrmInStateProtoError and every other Xfrm error counter 0)")
	return nil
}

// demoRekey is one rekey of the demo, started over by's control socket.
type demoRekey struct {
	by     demoIKEEnd
	what   string // for the progress line
	target control.IKETarget
}

// run starts the rekey and waits until both ends have only the new SAs:
// one established IKE SA with one installed child, whose SPIs (the IKE
// SA's for target.IKE, the child's otherwise) differ from before.
func (r demoRekey) run(ctx context.Context, a, b demoIKEEnd, sent *atomic.Int64, size int64) error {
	old, err := demoIKESA(r.by)
	if err != nil {
		return err
	}
	fmt.Printf("  rekeying %s from %s in the middle of the stream (%d of %d MiB sent) ... ", r.what, r.by.endpoint().Name, sent.Load()>>20, size>>20)
	start, at := time.Now(), sent.Load()
	if err := r.by.ikeAction("ike.rekey", r.target); err != nil {
		fmt.Println()
		return err
	}
	// The SPIs as r.by saw them before, against r.by's view now.
	changed := func(sa, sb control.IKESAInfo) bool {
		s := sa
		if r.by == b {
			s = sb
		}
		if r.target.IKE != "" {
			return s.SPIInitiator != old.SPIInitiator || s.SPIResponder != old.SPIResponder
		}
		return s.Children[0].SPIIn != old.Children[0].SPIIn
	}
	if _, err := demoSettled(ctx, a, b, "the rekey of "+r.what, changed); err != nil {
		fmt.Println()
		return err
	}
	fmt.Printf("done in %v, %.1f MiB crossing meanwhile\n", demoSinceMS(start), float64(sent.Load()-at)/(1<<20))
	return nil
}

// demoIKESA returns e's established IKE SA, if there is one and it has
// one installed child and nothing else (no child being rekeyed). An IKE
// SA that a rekey replaced stays listed for a moment (REKEYED, ended: the
// answer to its delete may still come) and does not count.
func demoIKESA(e demoIKEEnd) (control.IKESAInfo, error) {
	sas, err := e.ikeList()
	if err != nil {
		return control.IKESAInfo{}, err
	}
	var up []control.IKESAInfo
	for _, s := range sas {
		if s.State != "REKEYED" {
			up = append(up, s)
		}
	}
	if len(up) != 1 || up[0].State != "ESTABLISHED" || len(up[0].Children) != 1 || up[0].Children[0].State != "INSTALLED" {
		return control.IKESAInfo{}, fmt.Errorf("%w: %s", errNotSettled, demoIKEStates(sas))
	}
	return up[0], nil
}

var errNotSettled = errors.New("not one established IKE SA with one installed child")

// demoIKEStates sums up sas for a progress line or an error: "none", or
// each SA's state with its children's, as "ESTABLISHED (INSTALLED,
// REKEYING)".
func demoIKEStates(sas []control.IKESAInfo) string {
	if len(sas) == 0 {
		return "no IKE SA"
	}
	var parts []string
	for _, s := range sas {
		var children []string
		for _, c := range s.Children {
			children = append(children, c.State)
		}
		parts = append(parts, fmt.Sprintf("%s (%s)", s.State, strings.Join(children, ", ")))
	}
	return strings.Join(parts, "; ")
}

// demoSettled waits until both ends hold one established IKE SA with one
// installed child and nothing else, and done(A's, B's) holds; it returns
// A's. It gives up after demoIKEWait, with both daemons' logs.
func demoSettled(ctx context.Context, a, b demoIKEEnd, what string, done func(sa, sb control.IKESAInfo) bool) (control.IKESAInfo, error) {
	deadline := time.Now().Add(demoIKEWait)
	for {
		sa, errA := demoIKESA(a)
		sb, errB := demoIKESA(b)
		if errA == nil && errB == nil && done(sa, sb) {
			return sa, nil
		}
		if err := ctx.Err(); err != nil {
			return control.IKESAInfo{}, err
		}
		if time.Now().After(deadline) {
			return control.IKESAInfo{}, fmt.Errorf("no end to %s within %v (A: %v, B: %v); the daemons' logs:\nA:\n%s\nB:\n%s",
				what, demoIKEWait, errOrOK(errA), errOrOK(errB), a.log(), b.log())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// demoAny is demoSettled's done for any settled SAs.
func demoAny(_, _ control.IKESAInfo) bool { return true }

func errOrOK(err error) string {
	if err == nil {
		return "settled"
	}
	return err.Error()
}

// demoSinceMS is the time since start, rounded to a tenth of a millisecond.
func demoSinceMS(start time.Time) time.Duration {
	return time.Since(start).Round(100 * time.Microsecond)
}

// demoIKEList prints e's `ipsecd ike list`.
func demoIKEList(e demoIKEEnd, when string) error {
	out, err := e.ikeListText()
	if err != nil {
		return err
	}
	fmt.Printf("endpoint %s (ipsecd ike list), %s:\n", e.endpoint().Name, when)
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		fmt.Println("  " + line)
	}
	return nil
}

// demoNoneLost prints the ends' counters (demoIKEReport) and fails when
// any end's data path dropped a packet.
func demoNoneLost(ends ...demoIKEEnd) error {
	lost := 0
	for _, e := range ends {
		n, err := demoIKEReport(e)
		if err != nil {
			return err
		}
		lost += n
	}
	if lost != 0 {
		return fmt.Errorf("%d packets dropped by the data path (the counters above)", lost)
	}
	return nil
}

// demoIKEReport prints e's non-zero counters and returns the sum of its
// Xfrm counters, which count packets the data path dropped: in the IKE
// demo all of them must be 0.
func demoIKEReport(e demoIKEEnd) (int, error) {
	what, stats, err := e.counters()
	if err != nil {
		return 0, err
	}
	fmt.Printf("endpoint %s (%s, non-zero):\n", e.endpoint().Name, what)
	dropped, shown := 0, 0
	for _, s := range stats {
		if s.Value == 0 {
			continue
		}
		fmt.Printf("  %s\t%d\n", s.Name, s.Value)
		shown++
		if strings.HasPrefix(s.Name, "Xfrm") {
			dropped += int(s.Value)
		}
	}
	if shown == 0 {
		fmt.Println("  (all zero)")
	}
	return dropped, nil
}

// daemonEnd is an end of the IKE demo that is an `ipsecd run` in a
// network namespace, driven over its control socket.
type daemonEnd struct {
	e    *demoEndpoint
	self string // this binary, for `ipsecd ike list`
}

func (d daemonEnd) endpoint() *demoEndpoint { return d.e }

func (d daemonEnd) ikeAction(cmd string, t control.IKETarget) error {
	c, err := control.Dial(d.e.Control)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.IKEAction(cmd, t); err != nil {
		return fmt.Errorf("ipsecd %s at %s: %w", strings.Replace(cmd, ".", " ", 1), d.e.Name, err)
	}
	return nil
}

func (d daemonEnd) ikeList() ([]control.IKESAInfo, error) {
	c, err := control.Dial(d.e.Control)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.IKEList()
}

// ikeListText runs `ipsecd ike list`, as a user would.
func (d daemonEnd) ikeListText() (string, error) {
	out, err := exec.Command(d.self, "ike", "list", "--control", d.e.Control).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("ipsecd ike list at %s: %v: %s", d.e.Name, err, bytes.TrimSpace(out))
	}
	return string(out), nil
}

func (d daemonEnd) counters() (string, []control.Counter, error) {
	c, err := control.Dial(d.e.Control)
	if err != nil {
		return "", nil, err
	}
	defer c.Close()
	cs, err := c.Stats()
	return "ipsecd stats", cs, err
}

func (d daemonEnd) tcp(ctx context.Context, to demoIKEEnd, size int64, mid func(sent *atomic.Int64) error) (time.Duration, error) {
	return demoTCP(ctx, d.e, to.endpoint(), size, mid)
}

func (d daemonEnd) log() string { return d.e.log.String() }
