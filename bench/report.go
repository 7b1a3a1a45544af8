package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// row is one measurement: a path (or sweep point) and a stream count.
type row struct {
	name    string
	streams int
	m       measurement
	err     error
	setup   time.Duration // how long the daemons took to come up (sweeps)
}

// point is one point of a sweep.
type point struct {
	label string
	row   row
}

// sweep is one of the three ipsecd sweeps.
type sweep struct {
	key, title, unit string
	points           []point
}

// report collects the results of one run and renders them.
type report struct {
	o       options
	started time.Time
	env     [][2]string // name, value: machine and versions
	rows    []row
	sweeps  []*sweep
	notes   []string
	// profiles are -profile's results, one per daemon.
	profiles []profile
}

// profile is one daemon's CPU profile under load.
type profile struct {
	title, file, top string
}

func newReport(o options, root string) *report {
	r := &report{o: o, started: time.Now()}
	r.env = [][2]string{
		{"date", r.started.UTC().Format("2006-01-02 15:04 MST")},
		{"kernel", readTrim("/proc/sys/kernel/osrelease")},
		{"CPU", fmt.Sprintf("%s, %d logical CPUs", cpuModel(), runtime.NumCPU())},
		{"Go", firstLine(inDir(root, exec.Command("go", "env", "GOVERSION")))},
		{"iperf3", firstLine(exec.Command("iperf3", "--version"))},
		{"wireguard-go", "golang.zx2c4.com/wireguard " + wireguardVersion(root)},
		{"load average at start (1, 5, 15 min)", loadAverage()},
		{"command", strings.TrimSpace("go run ./bench " + strings.Join(os.Args[1:], " "))},
		{"settings", fmt.Sprintf("%v per measurement after %v warm-up, median of %d; tunnel MTU %d; ipsecd queues %d (table and interface/SA sweeps)",
			o.duration, o.omit, o.repeat, tunnelMTU, o.queues)},
	}
	return r
}

// finish records the machine's load at the end of the run: the figures
// are only as steady as the machine was quiet.
func (r *report) finish() {
	r.env = append(r.env, [2]string{"load average at end (1, 5, 15 min)", loadAverage()})
}

// busyNote says, when the 1-minute load average at the start or the end
// of the run was above the number of CPUs, that the machine was shared:
// absolute figures then fall (the veth's most of all, which lifts every
// ratio to veth), and only ratios between tunnels of the same run mean
// much.
func (r *report) busyNote() string {
	var peak float64
	for _, e := range r.env {
		if strings.HasPrefix(e[0], "load average") {
			var one float64
			if _, err := fmt.Sscan(e[1], &one); err == nil {
				peak = max(peak, one)
			}
		}
	}
	if peak <= float64(runtime.NumCPU()) {
		return ""
	}
	return fmt.Sprintf("This run shared the machine with other work (1-minute load average up to\n"+
		"%.1f on %d CPUs): every figure is lower than on a quiet machine, the veth's\n"+
		"most, which inflates the ratios to veth. Compare the tunnels with each\n"+
		"other (ratios to wireguard-go, CPU-seconds per GB), not with other runs.\n", peak, runtime.NumCPU())
}

// loadAverage is the first three fields of /proc/loadavg.
func loadAverage() string {
	f := strings.Fields(readTrim("/proc/loadavg"))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func (r *report) add(x row) { r.rows = append(r.rows, x) }

func (r *report) addSweep(key, title, unit string) *sweep {
	s := &sweep{key: key, title: title, unit: unit}
	r.sweeps = append(r.sweeps, s)
	return s
}

func (r *report) notef(format string, args ...any) {
	r.notes = append(r.notes, fmt.Sprintf(format, args...))
}

// find returns the table row of name with n streams, if it succeeded.
func (r *report) find(name string, n int) (row, bool) {
	for _, x := range r.rows {
		if x.name == name && x.streams == n && x.err == nil {
			return x, true
		}
	}
	return row{}, false
}

func (r *report) sweep(key string) *sweep {
	for _, s := range r.sweeps {
		if s.key == key {
			return s
		}
	}
	return nil
}

// printLine prints a row as it is measured.
func (x row) printLine() {
	if x.err != nil {
		fmt.Printf("  %-44s P%-2d FAILED: %v\n", x.name, x.streams, x.err)
		return
	}
	fmt.Printf("  %-44s P%-2d %7.3f Gbit/s  retransmits %-6d%s%s\n", x.name, x.streams, x.m.gbps(), x.m.retransmits, cpuText(x.m), memText(x.m))
}

func cpuText(m measurement) string {
	v, ok := m.cpuPerGB()
	if !ok {
		return ""
	}
	return fmt.Sprintf("  CPU %.2f s/GB (%.2f s)", v, m.cpu.Seconds())
}

func memText(m measurement) string {
	if m.hwm == 0 {
		return ""
	}
	return fmt.Sprintf("  ipsecd VmRSS %s MiB, VmHWM %s MiB", mib(m.rss), mib(m.hwm))
}

func mib(b uint64) string { return fmt.Sprintf("%.1f", float64(b)/(1<<20)) }

// ratio formats a/b, or "–" when either is missing.
func ratio(a row, aok bool, b row, bok bool) string {
	if !aok || !bok || b.m.bitsPerSecond == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", a.m.bitsPerSecond/b.m.bitsPerSecond)
}

// cpuRatio formats a's CPU-seconds per GB over b's, or "–" when either
// is missing.
func cpuRatio(a row, aok bool, b row, bok bool) string {
	av, aok2 := a.m.cpuPerGB()
	bv, bok2 := b.m.cpuPerGB()
	if !aok || !bok || !aok2 || !bok2 || bv == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", av/bv)
}

// tableMarkdown is the main table. The CPU columns come last so that the
// columns before them stay where they were.
func (r *report) tableMarkdown() string {
	var b strings.Builder
	b.WriteString("| case | streams | Gbit/s | ratio to wireguard-go | ratio to veth | ipsecd VmRSS / VmHWM (MiB) | tunnel CPU-s/GB | CPU ratio to wireguard-go |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, x := range r.rows {
		gbps := "failed"
		if x.err == nil {
			gbps = fmt.Sprintf("%.3f", x.m.gbps())
		}
		wg, wok := r.find("wireguard-go", x.streams)
		veth, vok := r.find("veth", x.streams)
		mem := "–"
		if x.m.hwm != 0 {
			mem = mib(x.m.rss) + " / " + mib(x.m.hwm)
		}
		cpu := "–"
		if v, ok := x.m.cpuPerGB(); ok && x.err == nil {
			cpu = fmt.Sprintf("%.2f", v)
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s | %s | %s |\n", x.name, x.streams, gbps,
			ratio(x, x.err == nil, wg, wok), ratio(x, x.err == nil, veth, vok), mem,
			cpu, cpuRatio(x, x.err == nil, wg, wok))
	}
	return b.String()
}

// sweepsMarkdown has a table per sweep.
func (r *report) sweepsMarkdown() string {
	var b strings.Builder
	for _, s := range r.sweeps {
		fmt.Fprintf(&b, "\n%s:\n\n| %s | Gbit/s | ratio to first | ipsecd VmRSS / VmHWM (MiB) | start-up (s) |\n|---:|---:|---:|---:|---:|\n", s.title, s.unit)
		for _, p := range s.points {
			gbps, rel, mem := "failed", "–", "–"
			if p.row.err == nil {
				gbps = fmt.Sprintf("%.3f", p.row.m.gbps())
				first := s.points[0].row
				rel = ratio(p.row, true, first, first.err == nil)
				mem = mib(p.row.m.rss) + " / " + mib(p.row.m.hwm)
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %.1f |\n", p.label, gbps, rel, mem, p.row.setup.Seconds())
		}
	}
	return b.String()
}

// errorsText lists every failure, one paragraph each; a path that failed
// to come up is listed once, not once per stream count.
func (r *report) errorsText() string {
	var b strings.Builder
	seen := map[string]bool{}
	each := func(x row) {
		if x.err == nil || seen[x.name+x.err.Error()] {
			return
		}
		seen[x.name+x.err.Error()] = true
		fmt.Fprintf(&b, "- %s, %d stream(s): %v\n", x.name, x.streams, x.err)
	}
	for _, x := range r.rows {
		each(x)
	}
	for _, s := range r.sweeps {
		for _, p := range s.points {
			each(p.row)
		}
	}
	for _, n := range r.notes {
		fmt.Fprintf(&b, "- %s\n", n)
	}
	return b.String()
}

// print writes the results to a terminal.
func (r *report) print(w io.Writer) {
	fmt.Fprintln(w)
	for _, e := range r.env {
		fmt.Fprintf(w, "%-13s %s\n", e[0]+":", e[1])
	}
	if n := r.busyNote(); n != "" {
		fmt.Fprintf(w, "\n%s", n)
	}
	fmt.Fprintf(w, "\n%s", r.tableMarkdown())
	fmt.Fprint(w, r.sweepsMarkdown())
	fmt.Fprintf(w, "\nTargets:\n\n%s", r.targetsMarkdown())
	fmt.Fprintf(w, "\nLine rate II targets:\n\n%s", targetsTable(r.lineRate2()))
	for _, p := range r.profiles {
		fmt.Fprintf(w, "\nCPU profile of %s: %s\n", p.title, p.file)
	}
	if e := r.errorsText(); e != "" {
		fmt.Fprintf(w, "\nFailures:\n\n%s", e)
	}
}

// write writes benchmark.md and benchmark.svg into dir.
func (r *report) write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString("# ipsecd benchmark\n\n")
	b.WriteString("Written by `go run ./bench` (how to run it: docs/operations.md). TCP throughput measured with\n" +
		"iperf3 between two network namespaces joined by a veth pair: over the\n" +
		"veth itself, through wireguard-go, through ipsecd in tunnel mode with\n" +
		"ESP in UDP and through strongSwan's charon with kernel-libipsec (its\n" +
		"userspace ESP, AES-GCM-128 in UDP; TUN MTU 1400, its fixed default), all\n" +
		"in one run on one machine. Each side's daemon and iperf3\n" +
		"share the same CPUs, so the numbers measure CPU cost per byte more than\n" +
		"any link. On a small machine shared with other work they vary by 10-30%\n" +
		"from run to run: compare rows of the same run, and use -repeat.\n\n")
	for _, e := range r.env {
		fmt.Fprintf(&b, "- %s: %s\n", e[0], e[1])
	}
	if n := r.busyNote(); n != "" {
		fmt.Fprintf(&b, "\n%s", n)
	}
	fmt.Fprintf(&b, "\n## Throughput\n\n%s", r.tableMarkdown())
	if len(r.sweeps) != 0 {
		fmt.Fprintf(&b, "\n## Sweeps\n\n![sweeps](benchmark.svg)\n%s", r.sweepsMarkdown())
	}
	fmt.Fprintf(&b, "\n## Targets\n\n%s", r.targetsMarkdown())
	fmt.Fprintf(&b, "\n### Line rate II\n\n%s", targetsTable(r.lineRate2()))
	b.WriteString("\nAllocations per packet are not measured here but by the AllocsPerRun\n" +
		"tests of the data path.\n")
	b.WriteString("\nMemory is read from /proc/PID/status of both ipsecd processes: VmRSS is the\n" +
		"largest seen while iperf3 ran, VmHWM the peak since start-up; the larger\n" +
		"of the two daemons is shown.\n")
	b.WriteString("\nTunnel CPU is utime + stime from /proc/PID/stat of the tunnel's process at\n" +
		"both ends (ipsecd, wireguard-go, or charon with kernel-libipsec), all\n" +
		"threads, sampled only when iperf3's warm-up ends and when it is done,\n" +
		"divided by the bytes iperf3 received in the counted seconds (GB = 10^9\n" +
		"bytes). It includes the system time of the tunnel's TUN and UDP system\n" +
		"calls, but not iperf3's own CPU nor softirq work the kernel accounts\n" +
		"elsewhere; the clock tick is 10 ms, so a 10 s run reads to about 1%.\n")
	if len(r.profiles) != 0 {
		b.WriteString("\n## CPU profiles\n\nTaken by `go run ./bench -profile DIR` in an extra run of the case after\n" +
			"its table rows, through each daemon's metrics listener (`pprof: true`), over\n" +
			"the counted seconds; `go tool pprof -top`:\n")
		for _, p := range r.profiles {
			fmt.Fprintf(&b, "\n%s:\n\n```\n%s\n```\n", p.title, p.top)
		}
	}
	if e := r.errorsText(); e != "" {
		fmt.Fprintf(&b, "\n## Failures\n\n%s", e)
	}
	if old, err := os.ReadFile(filepath.Join(dir, "benchmark.md")); err == nil {
		b.WriteString(keptPart(string(old)))
	}
	if err := os.WriteFile(filepath.Join(dir, "benchmark.md"), []byte(b.String()), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "benchmark.svg"), []byte(r.svg()), 0o644)
}

func readTrim(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(data))
}

func cpuModel() string {
	data, _ := os.ReadFile("/proc/cpuinfo")
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

func firstLine(cmd *exec.Cmd) string {
	out, err := cmd.Output()
	if err != nil {
		return "unknown"
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return line
}

// wireguardVersion is the version of golang.zx2c4.com/wireguard the main
// module requires (what `go build golang.zx2c4.com/wireguard` builds).
func wireguardVersion(root string) string {
	return firstLine(inDir(root, exec.Command("go", "list", "-m", "-f", "{{.Version}}", "golang.zx2c4.com/wireguard")))
}

func inDir(dir string, cmd *exec.Cmd) *exec.Cmd {
	cmd.Dir = dir
	return cmd
}
