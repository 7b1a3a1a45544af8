package vici_test

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/vici"
)

// The test binary doubles as TestStrangerRefused's helper, run again as
// another uid: IPSECD_VICI_HELPER names the socket it asks for version.
const helperEnv = "IPSECD_VICI_HELPER"

func TestMain(m *testing.M) {
	if path := os.Getenv(helperEnv); path != "" {
		helperVersion(path)
		return
	}
	os.Exit(m.Run())
}

// helperVersion sends a version request to path and prints what came
// back: "answered", "closed" (EOF with no answer) or the error.
func helperVersion(path string) {
	c, err := net.Dial("unix", path)
	if err != nil {
		fmt.Println("dial:", err)
		return
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	req := []byte{0, 0, 0, 9, 0, 7, 'v', 'e', 'r', 's', 'i', 'o', 'n'}
	c.Write(req) // may fail once refused: the read says how
	if _, err := vici.ReadSegment(c, nil); err == nil {
		fmt.Println("answered")
	} else if err == io.EOF || strings.Contains(err.Error(), "reset") {
		fmt.Println("closed")
	} else {
		fmt.Println(err)
	}
}

// TestStrangerRefused: a uid that is neither root nor the socket's owner
// is refused (closed without an answer), even when the socket's mode lets
// it connect; root is answered. The rule is control.Socket's, which the
// vici socket shares with the control socket.
func TestStrangerRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: runs a helper process as another uid")
	}
	const stranger = 65533
	dir, err := os.MkdirTemp("", "ipsecd-vici-peer")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	// go test keeps its binary in a 0700 directory: a copy the
	// stranger can run.
	bin := filepath.Join(dir, "vici.test")
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "s", "charon.vici")
	s, err := vici.Listen(path, &fakeIKE{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve()
	t.Cleanup(func() { s.Close() })
	for p, mode := range map[string]os.FileMode{dir: 0o755, filepath.Dir(path): 0o755, path: 0o666} {
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	run := func(uid uint32) string {
		cmd := exec.Command(bin)
		cmd.Env = append(os.Environ(), helperEnv+"="+path)
		if uid != 0 {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid, Groups: []uint32{}}}
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("helper as uid %d: %v\n%s", uid, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if got := run(0); got != "answered" {
		t.Errorf("root: %s, want answered", got)
	}
	if got := run(stranger); got != "closed" {
		t.Errorf("uid %d: %s, want closed without an answer", stranger, got)
	}
}
