// Command bench is ipsecd's namespace benchmark. As root, from the module
// root:
//
//	go run ./bench            # 10 s per measurement, several minutes
//	go run ./bench -quick     # 2 s per measurement, a smoke test
//
// It builds ipsecd and wireguard-go, makes two network namespaces joined
// by a veth pair and measures TCP throughput with iperf3 (1 and 4 streams)
// over the plain veth, through wireguard-go, through ipsecd (AES-GCM-128
// and ChaCha20-Poly1305, tunnel mode, ESP in UDP) and through strongSwan's
// charon with kernel-libipsec (AES-GCM-128, ESP in UDP), all in the same
// run, and the CPU-seconds the tunnel processes spend per GB moved.
// Then three sweeps of ipsecd AES-GCM-128: TUN queues 1..16 on one SA, 1
// against 10,000 interfaces, 1 against 10,000 SAs (-interfaces, -sas). It prints a table, the
// ratios ipsecd's targets are judged by and the daemons' memory, and
// writes docs/benchmark.md and docs/benchmark.svg. -profile adds CPU
// profiles of both ipsecd daemons under load. -handshakes N adds the IKE
// handshake cost, ipsecd beside strongSwan 6.1 as responders (integration's
// TestIKEHandshakeCostPQ), into its own section; with -handshakes-only
// nothing else is measured and only that section is rewritten:
//
//	go run ./bench -handshakes 300 -handshakes-only
//
// Traffic stays inside the two namespaces. Everything the benchmark makes
// (namespaces, processes, a scratch directory) is removed when it ends,
// also on an error or a Ctrl-C.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"
)

// options are the command-line flags.
type options struct {
	duration time.Duration // per measurement, after omit
	omit     time.Duration // warm-up not counted (TCP slow start)
	queues   int           // TUN queues of ipsecd's interface outside the queue sweep
	ifaces   int           // the many-interfaces point of sweep (b)
	sas      int           // the many-SAs point of sweep (c)
	repeat   int           // measurements per row; the median counts
	sweeps   bool
	out      string // directory of benchmark.md and benchmark.svg; "" writes none
	profile  string // directory of the CPU profiles of profiledCase; "" takes none
	timeout  time.Duration

	handshakes     int  // IKE handshakes per sample; 0 skips the handshake cost
	hsRounds       int  // rounds of the handshake cost; the median counts
	handshakesOnly bool // measure only the handshake cost, rewrite only its section
}

// Streams of the main table, of the queue sweep and of the interface and
// SA sweeps.
var (
	tableStreams = []int{1, 4}
	queueSweep   = []int{1, 2, 4, 8, 16}
)

const (
	queueStreams = 8
	scaleStreams = 4
)

func main() {
	os.Exit(runMain())
}

func runMain() int {
	var o options
	quick := flag.Bool("quick", false, "2 s per measurement and no docs written unless -out is given: a smoke test")
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "time each iperf3 measurement counts (whole seconds)")
	flag.DurationVar(&o.omit, "omit", time.Second, "warm-up before each measurement, not counted")
	flag.IntVar(&o.queues, "queues", runtime.NumCPU(), "TUN queues of ipsecd's interfaces in the table and the interface/SA sweeps")
	flag.IntVar(&o.ifaces, "interfaces", 10000, "interfaces per side in the many-interfaces case")
	flag.IntVar(&o.sas, "sas", 10000, "SA pairs on one interface in the many-SAs case")
	flag.IntVar(&o.repeat, "repeat", 1, "measure each row `N` times and keep the median (steadier on a busy machine)")
	flag.BoolVar(&o.sweeps, "sweeps", true, "run the queue, interface and SA sweeps")
	flag.StringVar(&o.out, "out", "docs", "write benchmark.md and benchmark.svg into `DIR`, relative to the module root; empty: do not write")
	flag.StringVar(&o.profile, "profile", "", "take CPU profiles of both ipsecd daemons of the "+profiledCase+" case, 1 stream, in an extra run, into `DIR` (relative to the module root); the report shows `go tool pprof -top` of each")
	flag.DurationVar(&o.timeout, "timeout", 45*time.Minute, "give up after this long")
	flag.IntVar(&o.handshakes, "handshakes", 0, "measure the IKE handshake cost, ipsecd beside strongSwan 6.1 (the sid chroot of scripts/sid-strongswan.sh), `N` handshakes per responder, proposal and round; 0 skips it")
	flag.IntVar(&o.hsRounds, "handshake-rounds", 3, "rounds of the handshake cost; the median counts")
	flag.BoolVar(&o.handshakesOnly, "handshakes-only", false, "measure only the handshake cost and rewrite only its section of benchmark.md")
	flag.Parse()
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *quick {
		if !set["duration"] {
			o.duration = 2 * time.Second
		}
		if !set["out"] {
			o.out = ""
		}
	}
	if o.ifaces > maxIfaces {
		fmt.Fprintf(os.Stderr, "bench: -interfaces %d: at most %d (the idle interfaces' /26s fill 100.64.0.0/11 and 100.96.0.0/11)\n", o.ifaces, maxIfaces)
		return 2
	}
	if flag.NArg() != 0 || o.duration < time.Second || o.repeat < 1 || o.queues < 1 || o.ifaces < 2 || o.sas < 2 ||
		o.handshakes < 0 || o.hsRounds < 1 || (o.handshakesOnly && o.handshakes == 0) {
		flag.Usage()
		return 2
	}

	if err := preflight(o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	sigCtx, stopSignals := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stopSignals()
	ctx, cancel := context.WithTimeoutCause(sigCtx, o.timeout, fmt.Errorf("gave up after -timeout %v", o.timeout))
	defer cancel()
	if o.handshakesOnly {
		return handshakesMain(ctx, o)
	}

	rep, err := runBench(ctx, o)
	if rep != nil {
		rep.finish()
		rep.print(os.Stdout)
	}
	if err != nil {
		if sigCtx.Err() != nil {
			fmt.Fprintf(os.Stderr, "bench: %v: stopped; namespaces and processes removed\n", context.Cause(sigCtx))
			return 130
		}
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	if o.out != "" {
		if err := rep.write(o.out); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 1
		}
		fmt.Printf("\nwrote %s and %s\n", filepath.Join(o.out, "benchmark.md"), filepath.Join(o.out, "benchmark.svg"))
	}
	if o.handshakes > 0 {
		return handshakesMain(ctx, o)
	}
	return 0
}

// handshakesMain measures the handshake cost, prints its section and
// writes it into benchmark.md under o.out.
func handshakesMain(ctx context.Context, o options) int {
	root, err := moduleRoot(ctx)
	if err == nil {
		var section string
		section, err = runHandshakes(ctx, root, o.handshakes, o.hsRounds)
		if err == nil {
			fmt.Print(section)
			if o.out != "" && !filepath.IsAbs(o.out) {
				o.out = filepath.Join(root, o.out)
			}
			if o.out != "" {
				err = writeHandshakes(o.out, section)
			}
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	return 0
}

// preflight checks what the benchmark needs before it changes anything.
func preflight(o options) error {
	if os.Geteuid() != 0 {
		return errors.New("run as root: it creates network namespaces and TUN devices")
	}
	var missing []string
	tools := []string{"go", "ip", "ss", "ping", "iperf3", "wg"}
	if o.handshakesOnly {
		tools = []string{"go", "ip"}
	}
	if o.profile != "" {
		tools = append(tools, "curl")
	}
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	if len(missing) != 0 {
		return fmt.Errorf("missing %s (Debian: apt-get install iproute2 iputils-ping iperf3 wireguard-tools curl)", strings.Join(missing, ", "))
	}
	return nil
}

// runBench builds the binaries, makes the namespaces and runs every case.
// On an error or a signal it returns what was measured so far with the
// error; the namespaces and processes are gone either way.
func runBench(ctx context.Context, o options) (*report, error) {
	root, err := moduleRoot(ctx)
	if err != nil {
		return nil, err
	}
	if o.out != "" && !filepath.IsAbs(o.out) {
		o.out = filepath.Join(root, o.out)
	}
	if o.profile != "" {
		if !filepath.IsAbs(o.profile) {
			o.profile = filepath.Join(root, o.profile)
		}
		if err := os.MkdirAll(o.profile, 0o755); err != nil {
			return nil, err
		}
	}
	dir, err := os.MkdirTemp("", "ipsecd-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)

	fmt.Println("building ipsecd and wireguard-go ...")
	for _, b := range [][2]string{{"ipsecd", "./cmd/ipsecd"}, {"wireguard-go", "golang.zx2c4.com/wireguard"}} {
		cmd := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(dir, b[0]), b[1])
		cmd.Dir = root
		if _, err := output(cmd); err != nil {
			return nil, err
		}
	}
	rep := newReport(o, root)
	l, err := newLab(ctx, dir)
	if err != nil {
		return rep, err
	}
	defer l.close()
	b := &bench{ctx: ctx, lab: l, bins: dir, root: root, o: o, rep: rep}

	// The table: the same iperf3 runs over each path.
	b.table("veth", func() (*path, error) { return vethPath(), nil })
	b.table("wireguard-go", func() (*path, error) { return startWireGuard(ctx, l, dir) })
	for _, s := range []suite{aesGCM128, chacha20} {
		spec := ipsecSpec{suite: s, queues: o.queues, profiled: o.profile != "" && "ipsecd "+s.label == profiledCase}
		b.table("ipsecd "+s.label, func() (*path, error) { return startIPsec(ctx, l, dir, spec) })
	}
	b.table(strongSwanCase, func() (*path, error) { return startStrongSwan(ctx, l) })
	if !o.sweeps || ctx.Err() != nil {
		return rep, context.Cause(ctx)
	}

	// (a) Queues on one SA.
	qs := rep.addSweep("queues", fmt.Sprintf("ipsecd AES-GCM-128, TUN queues on one SA, %d streams", queueStreams), "queues")
	for _, q := range queueSweep {
		b.point(qs, fmt.Sprint(q), queueStreams, ipsecSpec{suite: aesGCM128, queues: q})
	}
	// (b) Interfaces: traffic on one, the others idle with their own SAs.
	is := rep.addSweep("interfaces", fmt.Sprintf("ipsecd AES-GCM-128, 1 vs %d interfaces, %d streams on one", o.ifaces, scaleStreams), "interfaces")
	for _, n := range []int{1, o.ifaces} {
		b.point(is, fmt.Sprint(n), scaleStreams, ipsecSpec{suite: aesGCM128, queues: o.queues, ifaces: n})
	}
	// (c) SAs on one interface, told apart by their selectors.
	ss := rep.addSweep("sas", fmt.Sprintf("ipsecd AES-GCM-128, 1 vs %d SA pairs with selectors on one interface, %d streams on one", o.sas, scaleStreams), "SA pairs")
	for _, n := range []int{1, o.sas} {
		b.point(ss, fmt.Sprint(n), scaleStreams, ipsecSpec{suite: aesGCM128, queues: o.queues, sas: n, selectors: true})
	}
	return rep, context.Cause(ctx)
}

// bench runs cases and records them in rep. A case that fails is
// recorded with its error and the run goes on, unless ctx is done.
type bench struct {
	ctx  context.Context
	lab  *lab
	bins string
	root string // the module root
	o    options
	rep  *report
}

// table brings a path up, measures it with each of tableStreams and
// tears it down.
func (b *bench) table(name string, up func() (*path, error)) {
	if b.ctx.Err() != nil {
		return
	}
	fmt.Printf("%s: setting up\n", name)
	p, err := up()
	for _, n := range tableStreams {
		r := row{name: name, streams: n, err: err}
		if err == nil {
			r.m, r.err = b.measure(p, n)
		}
		if b.ctx.Err() != nil {
			break // interrupted: not a result
		}
		b.rep.add(r)
		r.printLine()
	}
	if p != nil && err == nil && b.o.profile != "" && name == profiledCase && b.ctx.Err() == nil {
		b.profile(name, p)
	}
	if p != nil {
		if err := p.stop(); err != nil {
			b.rep.notef("%s: stopping: %v", name, err)
		}
	}
}

// point measures one point of a sweep on its own pair of daemons.
func (b *bench) point(s *sweep, label string, streams int, spec ipsecSpec) {
	if b.ctx.Err() != nil {
		return
	}
	r := row{name: fmt.Sprintf("%s: %s", s.unit, label), streams: streams}
	fmt.Printf("%s: setting up\n", r.name)
	start := time.Now()
	p, err := startIPsec(b.ctx, b.lab, b.bins, spec)
	r.setup = time.Since(start)
	r.err = err
	if err == nil {
		r.m, r.err = b.measure(p, streams)
		if err := p.stop(); err != nil {
			b.rep.notef("%s: stopping: %v", r.name, err)
		}
	}
	if b.ctx.Err() != nil {
		return // interrupted: not a result
	}
	s.points = append(s.points, point{label: label, row: r})
	r.printLine()
}

// measure runs iperf3 through p o.repeat times and returns the run with
// the median throughput, with the largest memory figures of all runs.
func (b *bench) measure(p *path, streams int) (measurement, error) {
	var ms []measurement
	for range b.o.repeat {
		m, err := measure(b.ctx, b.lab, p, streams, b.o.duration, b.o.omit, nil)
		if err != nil {
			return m, err
		}
		ms = append(ms, m)
	}
	slices.SortFunc(ms, func(x, y measurement) int { return cmp.Compare(x.bitsPerSecond, y.bitsPerSecond) })
	med := ms[len(ms)/2]
	for _, m := range ms {
		med.rss, med.hwm = max(med.rss, m.rss), max(med.hwm, m.hwm)
	}
	return med, nil
}

// profile measures p with one stream once more, taking CPU profiles of
// its daemons, and adds `go tool pprof -top` of each to the report.
func (b *bench) profile(name string, p *path) {
	fmt.Printf("%s: profiling, 1 stream\n", name)
	pr := &profiler{dir: b.o.profile}
	m, err := measure(b.ctx, b.lab, p, 1, b.o.duration, b.o.omit, pr)
	if err != nil {
		b.rep.notef("%s: profile run: %v", name, err)
		return
	}
	for _, t := range p.profiled {
		top, err := pprofTop(b.ctx, b.root, pr.file(t), 30)
		if err != nil {
			b.rep.notef("%s: %s: %v", name, t.label, err)
			continue
		}
		b.rep.profiles = append(b.rep.profiles, profile{
			title: fmt.Sprintf("%s, %s, 1 stream at %.3f Gbit/s", name, t.role, m.gbps()),
			file:  pr.file(t),
			top:   top,
		})
	}
}

// moduleRoot is the directory of the main module's go.mod.
func moduleRoot(ctx context.Context) (string, error) {
	out, err := output(exec.CommandContext(ctx, "go", "env", "GOMOD"))
	if err != nil {
		return "", err
	}
	gomod := strings.TrimSpace(out)
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("run from inside the ipsecd module (go env GOMOD is empty)")
	}
	return filepath.Dir(gomod), nil
}
