package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStartNamesMissingCapability: a start-up that fails for want of a
// capability says which (CAP_NET_ADMIN for the TUN devices, CAP_NET_RAW
// for raw ESP) and how to grant it, once. The real binary runs in a
// network namespace of its own (unshare -n) with the capability dropped
// from its bounding set (setpriv), so that even as root it lacks it.
func TestStartNamesMissingCapability(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: runs the daemon in a new network namespace")
	}
	dir := t.TempDir()
	for _, tt := range []struct {
		drop, underlay, want string
	}{
		{"net_admin", "{udp: 127.0.0.1:4500}", "CAP_NET_ADMIN"},
		{"net_raw", "{udp: 127.0.0.1:4500, raw_esp: true}", "CAP_NET_RAW"},
	} {
		t.Run(tt.drop, func(t *testing.T) {
			cfg := filepath.Join(dir, tt.drop+".yaml")
			text := "control: " + filepath.Join(dir, tt.drop+".sock") + "\nstate_dir: " + filepath.Join(dir, "state-"+tt.drop) +
				"\nunderlay: " + tt.underlay + "\ninterfaces:\n  - {name: capt1, if_id: 1}\n"
			if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
			code, _, stderr := execCommand(t, "unshare", "-n", "setpriv", "--bounding-set=-"+tt.drop, "--inh-caps=-"+tt.drop,
				"--", ipsecdBinary(t), "run", "--config", cfg)
			if code != 1 {
				t.Fatalf("exit %d, want 1:\n%s", code, stderr)
			}
			for _, want := range []string{"lacks " + tt.want, "setcap cap_" + tt.drop + "+p", "--cap-add " + strings.ToUpper(tt.drop)} {
				if n := strings.Count(stderr, want); n != 1 {
					t.Errorf("%q appears %d times, want once:\n%s", want, n, stderr)
				}
			}
		})
	}
}
