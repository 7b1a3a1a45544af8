//go:build linux

package integration

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The container image (Dockerfile, scripts/image.sh) is run here the way
// the README and deploy/kubernetes run it: podman with runc, one container
// in each namespace of a pair, joined to it with --network ns:PATH.

// imageUser is the uid and gid the Dockerfile's USER names.
const imageUser = 65532

// Capability bits, as /proc/PID/status prints them.
const (
	capNetAdmin = 1 << unix.CAP_NET_ADMIN
	capNetRaw   = 1 << unix.CAP_NET_RAW
)

// podmanGlobal are the flags podman needs on these machines (see
// REFERENCES.md): crun, its default runtime, fails on cgroups in hybrid
// mode and on setrlimit.
var podmanGlobal = []string{"--runtime", "runc", "--cgroup-manager", "cgroupfs"}

// podman runs a podman command with a 2-minute bound.
func podman(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "podman", append(slices.Clone(podmanGlobal), args...)...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

func mustPodman(t *testing.T, args ...string) string {
	t.Helper()
	out, err := podman(args...)
	if err != nil {
		t.Fatalf("podman %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// TestContainer builds the image and runs it as a VPN node: two containers,
// each in one namespace of a veth pair, pass ping and a checksummed TCP
// stream between the namespaces through ESP; the daemons run as the
// image's non-root user with exactly the capabilities --cap-add grants.
func TestContainer(t *testing.T) {
	for _, tool := range []string{"podman", "runc", "git"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("skipping: %s not found; the container test needs Debian's podman, runc and git (scripts/test.sh installs them)", tool)
		}
	}
	goImage := goBuilderImage(t)
	img := buildImage(t, goImage)
	t.Run("image.sh", func(t *testing.T) { checkImageScript(t, goImage) })

	t.Run("espinudp", func(t *testing.T) {
		start := time.Now()
		spec := tunnelSpec{suite: suiteByName("aes-gcm-256")}
		cfgA, cfgB := spec.configs()
		// B names its own outer address 0.0.0.0, as a Kubernetes pod
		// whose IP is not known in advance does (deploy/kubernetes).
		cfgB = replaceOnce(t, cfgB, fmt.Sprintf("src: %q", underlayB4), `src: "0.0.0.0"`)
		cfgB = replaceOnce(t, cfgB, fmt.Sprintf("dst: %q", underlayB4), `dst: "0.0.0.0"`)
		keys := map[string][]byte{"ab.key": spec.keyAB, "ba.key": spec.keyBA}

		p := newPair(t)
		// A as the README runs it; B locked down as the Kubernetes
		// example runs it: no other capability in the bounding set, no
		// privilege gain on exec, a read-only root file system with a
		// tmpfs for the control socket and a volume for state_dir (the
		// static keys' sequence numbers, which must outlive it).
		a := runContainer(t, img, p.a, containerEtc(t, cfgA, keys), "--cap-add", "NET_ADMIN")
		b := runContainer(t, img, p.b, containerEtc(t, cfgB, keys),
			"--cap-drop", "ALL", "--cap-add", "NET_ADMIN", "--security-opt", "no-new-privileges",
			"--read-only", "--tmpfs", "/run/ipsecd:rw,mode=0700,U",
			"--volume", t.TempDir()+":/var/lib/ipsecd:U")
		a.waitReady()
		b.waitReady()
		// The image's HEALTHCHECK, as podman runs it.
		for _, c := range []*container{a, b} {
			out, err := podman("healthcheck", "run", c.name)
			status, _ := podman("inspect", "--format", "{{.State.Health.Status}}", c.name)
			if err != nil || status != "healthy" {
				t.Errorf("%s: podman healthcheck run: %v %s; status %q, want healthy", c.name, err, out, status)
			}
		}
		t.Logf("two containers up in %v", time.Since(start).Round(time.Millisecond))
		a.checkProcess(capNetAdmin, false)
		b.checkProcess(capNetAdmin, true)

		ping(t, p.a, innerB4, 3)
		ping(t, p.b, innerA4, 3)
		ping(t, p.a, innerB6, 3)
		n := min(tcpBytes(), 32<<20)
		d := tcpTransfer(t, p.a, p.b, innerB4, n)
		t.Logf("A→B %d bytes in %v (%.0f Mbit/s)", n, d, float64(n*8)/d.Seconds()/1e6)
		d = tcpTransfer(t, p.b, p.a, innerA4, n)
		t.Logf("B→A %d bytes in %v (%.0f Mbit/s)", n, d, float64(n*8)/d.Seconds()/1e6)

		// The stream went through the SAs, and nothing was dropped as
		// bad on the way.
		if s := a.state(spiAB, "out"); s.Stats.Bytes < uint64(n) {
			t.Errorf("A's out SA sealed %d bytes, want at least the %d sent", s.Stats.Bytes, n)
		}
		if s := b.state(spiAB, "in"); s.Stats.Bytes < uint64(n) {
			t.Errorf("B's in SA opened %d bytes, want at least the %d sent", s.Stats.Bytes, n)
		}
		for _, c := range []*container{a, b} {
			c.checkCounters()
		}

		// SIGTERM (podman stop) stops the daemon cleanly: exit 0, its
		// interface removed from the namespace.
		mustPodman(t, "stop", "--time", "10", a.name)
		if code := mustPodman(t, "inspect", "--format", "{{.State.ExitCode}}", a.name); code != "0" {
			t.Errorf("A exited with %s after podman stop, want 0", code)
		}
		if out, err := p.a.run("ip", "link", "show", "ipsec1"); err == nil {
			t.Errorf("ipsec1 is still in %s after the container stopped:\n%s", p.a.name, out)
		}
		t.Logf("espinudp done in %v", time.Since(start).Round(time.Millisecond))
	})

	t.Run("raw-esp", func(t *testing.T) {
		spec := tunnelSpec{suite: suiteByName("chacha20-poly1305"), raw: true}
		cfgA, cfgB := spec.configs()
		keys := map[string][]byte{"ab.key": spec.keyAB, "ba.key": spec.keyBA}
		p := newPair(t)
		caps := []string{"--cap-add", "NET_ADMIN", "--cap-add", "NET_RAW"}
		a := runContainer(t, img, p.a, containerEtc(t, cfgA, keys), caps...)
		b := runContainer(t, img, p.b, containerEtc(t, cfgB, keys), caps...)
		a.waitReady()
		b.waitReady()
		a.checkProcess(capNetAdmin|capNetRaw, false)
		ping(t, p.a, innerB4, 3)
		ping(t, p.b, innerA4, 3)
		tcpTransfer(t, p.a, p.b, innerB4, 8<<20)
		for _, c := range []*container{a, b} {
			c.checkCounters()
		}
	})

	t.Run("raw-esp-without-NET_RAW", func(t *testing.T) {
		// raw_esp needs NET_RAW: without it the daemon stops at start-up
		// and says why.
		spec := tunnelSpec{suite: suiteByName("aes-gcm-128"), raw: true}
		cfgA, _ := spec.configs()
		keys := map[string][]byte{"ab.key": spec.keyAB, "ba.key": spec.keyBA}
		ns := newNetns(t)
		c := runContainer(t, img, ns, containerEtc(t, cfgA, keys), "--cap-add", "NET_ADMIN")
		code, log := c.waitExit(20 * time.Second)
		i := strings.Index(log, "level=error")
		if code != "1" || i < 0 || !strings.Contains(log[i:], "underlay") || !strings.Contains(log[i:], "operation not permitted") {
			t.Fatalf("raw_esp without NET_RAW: exit code %s, want 1 and an error naming the underlay and \"operation not permitted\":\n%s", code, log)
		}
		t.Logf("without NET_RAW: %s", strings.TrimSpace(log[i:]))
	})
}

// vfsCapFlagsEffective is VFS_CAP_FLAGS_EFFECTIVE of linux/capability.h:
// the file's permitted capabilities become effective on exec.
const vfsCapFlagsEffective = 0x000001

// fileCaps decodes the security.capability attribute of a file (struct
// vfs_cap_data in linux/capability.h: magic_etc, then permitted and
// inheritable for each 32-bit half).
func fileCaps(path string) (permitted uint64, effective bool, err error) {
	b := make([]byte, 64)
	n, err := unix.Getxattr(path, "security.capability", b)
	if err != nil {
		return 0, false, fmt.Errorf("security.capability: %w", err)
	}
	if n < 20 {
		return 0, false, fmt.Errorf("security.capability: %d bytes, want at least 20", n)
	}
	magic := binary.LittleEndian.Uint32(b)
	lo, hi := binary.LittleEndian.Uint32(b[4:]), binary.LittleEndian.Uint32(b[12:])
	return uint64(lo) | uint64(hi)<<32, magic&vfsCapFlagsEffective != 0, nil
}

// containerEtc writes cfg into a new directory to mount at /etc/ipsecd,
// with each key of keys moved out of the config into keys/NAME (a
// key_file): the config readable by all, the keys only by the image's
// user.
func containerEtc(t *testing.T, cfg string, keys map[string][]byte) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "etc-ipsecd")
	if err := os.MkdirAll(filepath.Join(dir, "keys"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, k := range keys {
		cfg = replaceOnce(t, cfg, fmt.Sprintf("key: %q", hexKey(k)), "key_file: keys/"+name)
		path := filepath.Join(dir, "keys", name)
		if err := os.WriteFile(path, []byte(hexKey(k)+"\n"), 0o400); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(path, imageUser, imageUser); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "ipsecd.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// replaceOnce replaces old in s, which must hold it exactly once.
func replaceOnce(t *testing.T, s, old, new string) string {
	t.Helper()
	if n := strings.Count(s, old); n != 1 {
		t.Fatalf("config holds %s %d times, want once:\n%s", old, n, s)
	}
	return strings.Replace(s, old, new, 1)
}

// container is one ipsecd container in a test namespace.
type container struct {
	t    *testing.T
	name string
	ns   *netns
}

// containerSeq numbers the containers of this test process.
var containerSeq atomic.Int64

// runContainer starts the image in ns with its default command, etc
// mounted at /etc/ipsecd, and the flags given; it removes the container
// when the test ends.
func runContainer(t *testing.T, img string, ns *netns, etc string, flags ...string) *container {
	t.Helper()
	c := &container{t: t, name: fmt.Sprintf("ipsecd-t%d-%d", os.Getpid(), containerSeq.Add(1)), ns: ns}
	args := []string{"run", "--detach", "--name", c.name,
		"--network", "ns:/run/netns/" + ns.name,
		"--ulimit", "nofile=1024:1024", "--ulimit", "nproc=4096:4096",
		"--device", "/dev/net/tun",
		"--volume", etc + ":/etc/ipsecd:ro"}
	args = append(append(args, flags...), img)
	t.Cleanup(func() {
		if t.Failed() {
			log, _ := podman("logs", c.name)
			t.Logf("container %s (in %s) log:\n%s", c.name, ns.name, log)
		}
		podman("rm", "--force", "--time", "5", c.name)
	})
	mustPodman(t, args...)
	return c
}

// ctl runs an ipsecd control command inside the container, as its user.
func (c *container) ctl(args ...string) (string, error) {
	return podman(append([]string{"exec", c.name, "/ipsecd"}, args...)...)
}

// waitReady returns once the daemon answers on its control socket, and
// fails the test if the container stops first or 20 s pass.
func (c *container) waitReady() {
	c.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, err := c.ctl("stats")
		if err == nil {
			return
		}
		if running, _ := podman("inspect", "--format", "{{.State.Running}}", c.name); running != "true" {
			log, _ := podman("logs", c.name)
			c.t.Fatalf("container %s stopped during start-up:\n%s", c.name, log)
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("ipsecd in container %s did not answer within 20 s: %v\n%s", c.name, err, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitExit waits up to d for the container to stop and returns its exit
// code and log.
func (c *container) waitExit(d time.Duration) (code, log string) {
	c.t.Helper()
	for deadline := time.Now().Add(d); ; time.Sleep(100 * time.Millisecond) {
		if running, err := podman("inspect", "--format", "{{.State.Running}}", c.name); err != nil || running != "true" {
			break
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("container %s still runs after %v", c.name, d)
		}
	}
	code = mustPodman(c.t, "inspect", "--format", "{{.State.ExitCode}}", c.name)
	log, _ = podman("logs", c.name)
	return code, log
}

// checkProcess checks the daemon's process from the host: it runs as the
// image's user, every thread has exactly caps effective, no ambient
// capability is left (they came from the binary's file capabilities, as
// under Kubernetes, not from podman's ambient set), and no_new_privs is
// as wanted.
func (c *container) checkProcess(caps uint64, noNewPrivs bool) {
	c.t.Helper()
	pid := mustPodman(c.t, "inspect", "--format", "{{.State.Pid}}", c.name)
	main := procStatus(c.t, "/proc/"+pid+"/status")
	for _, f := range []string{"Uid", "Gid"} {
		want := strings.Repeat(strconv.Itoa(imageUser)+" ", 4)
		if got := strings.Join(strings.Fields(main[f]), " ") + " "; got != want {
			c.t.Errorf("%s: %s %s, want %s (real, effective, saved, filesystem)", c.name, f, main[f], want)
		}
	}
	if want := map[bool]string{false: "0", true: "1"}[noNewPrivs]; main["NoNewPrivs"] != want {
		c.t.Errorf("%s: NoNewPrivs %s, want %s", c.name, main["NoNewPrivs"], want)
	}
	tasks, err := filepath.Glob("/proc/" + pid + "/task/*/status")
	if err != nil || len(tasks) == 0 {
		c.t.Fatalf("%s: no threads under /proc/%s/task: %v", c.name, pid, err)
	}
	for _, task := range tasks {
		st := procStatus(c.t, task)
		for _, f := range []struct {
			name string
			want uint64
		}{{"CapEff", caps}, {"CapPrm", caps}, {"CapAmb", 0}} {
			if got, err := strconv.ParseUint(st[f.name], 16, 64); err != nil || got != f.want {
				c.t.Errorf("%s: %s: %s %s, want %016x", c.name, task, f.name, st[f.name], f.want)
			}
		}
	}
	c.t.Logf("%s: uid %d, %d threads with capabilities %#x effective", c.name, imageUser, len(tasks), caps)
}

// procStatus reads a /proc status file into name → value.
func procStatus(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok {
			m[k] = strings.TrimSpace(v)
		}
	}
	return m
}

// state returns the container's SA with spi and dir, from state list --json.
func (c *container) state(spi int, dir string) stateJSON {
	c.t.Helper()
	out, err := c.ctl("state", "list", "--json")
	if err != nil {
		c.t.Fatalf("%s: ipsecd state list --json: %v\n%s", c.name, err, out)
	}
	var states []stateJSON
	if err := json.Unmarshal([]byte(out), &states); err != nil {
		c.t.Fatalf("%s: ipsecd state list --json: %v\n%s", c.name, err, out)
	}
	for _, s := range states {
		if v, _ := strconv.ParseUint(s.SPI, 0, 32); int(v) == spi && s.Dir == dir {
			return s
		}
	}
	c.t.Fatalf("%s: no SA spi 0x%x dir %s in:\n%s", c.name, spi, dir, out)
	return stateJSON{}
}

// checkCounters fails the test if the daemon counted bad packets or
// packets without an SA.
func (c *container) checkCounters() {
	c.t.Helper()
	out, err := c.ctl("stats")
	if err != nil {
		c.t.Fatalf("%s: ipsecd stats: %v\n%s", c.name, err, out)
	}
	st := map[string]uint64{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if name, v, ok := strings.Cut(sc.Text(), "\t"); ok {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				c.t.Fatalf("%s: ipsecd stats: line %q: %v", c.name, sc.Text(), err)
			}
			st[name] = n
		}
	}
	if len(st) == 0 {
		c.t.Fatalf("%s: ipsecd stats printed no counters:\n%s", c.name, out)
	}
	for _, name := range []string{"XfrmInError", "XfrmInHdrError", "XfrmInStateSeqError", "XfrmInNoStates", "XfrmInStateProtoError", "XfrmOutNoStates", "XfrmOutError"} {
		if v, ok := st[name]; !ok || v != 0 {
			c.t.Errorf("%s: %s = %d (present: %v), want 0", c.name, name, v, ok)
		}
	}
}
