package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/internal/charontest"
)

// TestRemoteAccessContainer runs examples/remote-access-container.sh as
// a newcomer would: up starts the gateway of examples/remote-access.yaml
// in the project's image (with only CAP_NET_ADMIN and /dev/net/tun), a
// charon 5.9.8 road warrior logs in as alice with EAP-MSCHAPv2 and pings
// the server behind the gateway; the gateway lists alice's lease. down
// then leaves no container, namespace, charon or file behind.
func TestRemoteAccessContainer(t *testing.T) {
	for _, tool := range []string{"podman", "runc", "git", "openssl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("skipping: %s not found; the container test needs Debian's podman, runc, git and openssl (scripts/test.sh installs them)", tool)
		}
	}
	charontest.Require(t)
	img := buildImage(t, goBuilderImage(t))
	tag := fmt.Sprintf("ipsecd-t%d-ra", os.Getpid())
	nss := []string{tag + "-client", tag + "-gw", tag + "-lan"}
	dir := filepath.Join(t.TempDir(), "ra")
	script := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "bash", append([]string{"../examples/remote-access-container.sh"}, append(args, dir)...)...)
		cmd.Env = append(os.Environ(), "IMAGE="+img, "PODMAN_FLAGS="+strings.Join(podmanGlobal, " "),
			"PODMAN_RUN_FLAGS=--ulimit nofile=1024:1024 --ulimit nproc=4096:4096", // as runContainer
			"NS_CLIENT="+nss[0], "NS_GW="+nss[1], "NS_LAN="+nss[2], "CONTAINER="+tag)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	t.Cleanup(func() { script("down") })

	start := time.Now()
	out, err := script("up")
	if err != nil {
		t.Fatalf("up: %v\n%s", err, out)
	}
	t.Logf("up (gateway container, charon, EAP-MSCHAPv2, ping) in %v", time.Since(start).Round(time.Millisecond))
	if !strings.Contains(out, "3 packets transmitted, 3 received") || !strings.Contains(out, "10.3.0.1/32") {
		t.Errorf("up's output lacks the 3 pings answered by 10.4.0.2 or the virtual IP 10.3.0.1:\n%s", out)
	}
	leases := mustPodman(t, "exec", tag, "/ipsecd", "pool", "list", "--leases", "--config", "/etc/ipsecd/ipsecd.yaml")
	if !strings.Contains(leases, "10.3.0.1") || !strings.Contains(leases, "alice") {
		t.Errorf("the gateway's leases do not show alice's 10.3.0.1:\n%s", leases)
	}

	if out, err := script("down"); err != nil {
		t.Fatalf("down: %v\n%s", err, out)
	}
	if names, _ := podman("ps", "--all", "--format", "{{.Names}}"); strings.Contains(names, tag) {
		t.Errorf("container %s left after down: %s", tag, names)
	}
	list, _ := exec.Command("ip", "netns", "list").Output()
	for _, ns := range nss {
		if strings.Contains(string(list), ns) {
			t.Errorf("namespace %s left after down", ns)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s left after down (%v)", dir, err)
	}
	if ps, _ := exec.Command("pgrep", "-f", dir).Output(); len(ps) != 0 {
		t.Errorf("processes of %s left after down: %s", dir, ps)
	}
}
