package control_test

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/control"
	"github.com/ipsecd/ipsecd/control/controltest"
)

// The test binary doubles as the helper processes of TestPeerCredentials,
// which run it again under other uids: IPSECD_CONTROL_HELPER says which
// part to play, IPSECD_CONTROL_SOCKET where.
const (
	helperEnv = "IPSECD_CONTROL_HELPER"
	socketEnv = "IPSECD_CONTROL_SOCKET"
)

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "":
		os.Exit(m.Run())
	case "serve":
		helperServe(os.Getenv(socketEnv))
	case "ping":
		helperPing(os.Getenv(socketEnv))
	default:
		fmt.Println("unknown helper", os.Getenv(helperEnv))
		os.Exit(2)
	}
	os.Exit(0)
}

// helperServe serves a control socket at path as whatever uid it runs
// under, with the socket and its directory opened to everyone (as an
// administrator might loosen them for a group): only the peer credential
// check then stands between another uid and the daemon. It prints
// "ready" once it accepts connections and stops when stdin closes.
func helperServe(path string) {
	srv, err := control.Listen(path, &controltest.Backend{}, nil)
	if err != nil {
		fmt.Println("listen:", err)
		os.Exit(1)
	}
	for p, mode := range map[string]os.FileMode{path: 0o666, filepath.Dir(path): 0o755} {
		if err := os.Chmod(p, mode); err != nil {
			fmt.Println("chmod:", err)
			os.Exit(1)
		}
	}
	go srv.Serve()
	fmt.Println("ready")
	io.Copy(io.Discard, os.Stdin)
	srv.Close()
}

// helperPing prints "ok" if the daemon at path answers a ping, else the
// error the client saw.
func helperPing(path string) {
	c, err := control.Dial(path)
	if err != nil {
		fmt.Println("dial:", err)
		return
	}
	defer c.Close()
	c.Timeout = 5 * time.Second
	if err := c.Ping(); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("ok")
}

// helperCmd runs the test binary at bin as a helper under uid (and the
// same gid).
func helperCmd(bin, role, path string, uid uint32) *exec.Cmd {
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), helperEnv+"="+role, socketEnv+"="+path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid, Groups: []uint32{}}}
	return cmd
}

// TestPeerCredentials runs a daemon's control socket as an unprivileged
// uid (65534, nobody) in a helper process and connects to it from three
// processes: root (this test) and the owner are served; uid 65533,
// neither, is refused with an error that names its uid, even though the
// socket's mode lets it connect. A socket served by root refuses uid
// 65534 the same way.
func TestPeerCredentials(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: runs helper processes as other uids")
	}
	const owner, stranger = 65534, 65533

	// The helpers run this test binary, which must be reachable by the
	// owner and the stranger: go test keeps it in a 0700 directory.
	dir, err := os.MkdirTemp("", "ipsecd-peer")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "control.test")
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	sockDir := filepath.Join(dir, "s")
	if err := os.Mkdir(sockDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(sockDir, owner, owner); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(sockDir, "run", "ipsecd.sock")

	server := helperCmd(bin, "serve", path, owner)
	stdin, err := server.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := server.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	server.Stderr = os.Stderr
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { server.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			server.Process.Kill()
			<-done
		}
	})
	ready := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		ready <- strings.TrimSpace(line)
	}()
	select {
	case line := <-ready:
		if line != "ready" {
			t.Fatalf("server helper: %q", line)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("server helper did not start within 10 s")
	}
	if fi, err := os.Stat(path); err != nil || fi.Sys().(*syscall.Stat_t).Uid != owner {
		t.Fatalf("socket %s: %v, want it owned by uid %d", path, err, owner)
	}

	c, err := control.Dial(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Ping(); err != nil {
		t.Errorf("root: Ping: %v", err)
	}

	// And a daemon that runs as root, as it usually does, serves root
	// alone: the owner of the other socket is a stranger here.
	rootSrv := controltest.Start(t, &controltest.Backend{})
	for _, p := range []string{rootSrv.Path(), filepath.Dir(rootSrv.Path()), filepath.Dir(filepath.Dir(rootSrv.Path()))} {
		mode := os.FileMode(0o755)
		if p == rootSrv.Path() {
			mode = 0o666
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}

	for _, tt := range []struct {
		name string
		path string
		uid  uint32
		want string
	}{
		{"owner", path, owner, "ok"},
		{"stranger", path, stranger, fmt.Sprintf("control: permission denied: uid %d is neither root nor the socket's owner (uid %d)", stranger, owner)},
		{"not root", rootSrv.Path(), owner, fmt.Sprintf("control: permission denied: uid %d is not root (root owns the socket)", owner)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, err := helperCmd(bin, "ping", tt.path, tt.uid).CombinedOutput()
			if err != nil {
				t.Fatalf("ping helper: %v\n%s", err, out)
			}
			if got := strings.TrimSpace(string(out)); got != tt.want {
				t.Errorf("uid %d: got %q, want %q", tt.uid, got, tt.want)
			}
		})
	}
}
