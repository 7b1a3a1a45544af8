//go:build linux

package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	govici "github.com/strongswan/govici/vici"

	"github.com/ipsecd/ipsecd/internal/charontest"
	"github.com/ipsecd/ipsecd/internal/syncbuf"
	"github.com/ipsecd/ipsecd/internal/testpki"
)

// viciSwanctl runs the real swanctl against ipsecd's vici socket and
// fails the test if it fails.
func viciSwanctl(t *testing.T, sock string, args ...string) string {
	t.Helper()
	out, err := viciSwanctlErr(sock, args...)
	if err != nil {
		t.Fatalf("swanctl %s (ipsecd): %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func viciSwanctlErr(sock string, args ...string) (string, error) {
	cmd := exec.Command("timeout", append([]string{"30", "swanctl"}, append(args, "--uri", "unix://"+sock)...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// rawTokens are the tokens of swanctl --raw: "name {", "}", key=value and
// key=[list items].
var rawTokens = regexp.MustCompile(`(\S+?)=(\[[^\]]*\]|\S+)|(\S+) \{|\}`)

// parseRaw flattens the first event of swanctl --raw output into
// path → value; the first section (the connection's name) and a child's
// section (NAME-UNIQUEID) are written as "ike" and "child", so that both
// daemons' listings compare.
func parseRaw(out string) map[string]string {
	line, _, _ := strings.Cut(out, "\n")
	_, body, _ := strings.Cut(line, " event {")
	m := map[string]string{}
	var path []string
	for _, tok := range rawTokens.FindAllStringSubmatch(body, -1) {
		switch {
		case tok[0] == "}":
			if len(path) > 0 {
				path = path[:len(path)-1]
			}
		case tok[3] != "":
			name := tok[3]
			switch {
			case len(path) == 0:
				name = "ike"
			case len(path) == 2 && path[1] == "child-sas":
				name = "child"
			}
			path = append(path, name)
		default:
			m[strings.Join(append(append([]string{}, path...), tok[1]), ".")] = tok[2]
		}
	}
	return m
}

// TestViciSwanctl drives ipsecd with the real swanctl (5.9.8) over vici,
// against charon in the other namespace: --version, --initiate --child
// (waiting for the child, with control-log lines), --list-sas and
// --list-sas --raw beside charon's own for the same SA, --stats,
// --rekey of the child and the IKE SA (govici sees child-rekey and
// ike-rekey with the SPIs both sides installed), --monitor-sa through
// it all, --terminate --ike, and --load-conns of a child without an
// interface refused with a reason.
func TestViciSwanctl(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "charon.vici")
	r := newIKERig(t, ikeSpec{vici: sock})

	monitor := exec.Command("swanctl", "--monitor-sa", "--raw", "--uri", "unix://"+sock)
	var monitored syncbuf.Buffer
	monitor.Stdout, monitor.Stderr = &monitored, &monitored
	if err := monitor.Start(); err != nil {
		t.Fatal(err)
	}
	defer monitor.Process.Kill()
	sess, err := govici.NewSession(govici.WithSocketPath(sock))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	events := make(chan govici.Event, 64)
	sess.NotifyEvents(events)
	if err := sess.Subscribe("child-rekey", "ike-rekey"); err != nil {
		t.Fatal(err)
	}

	if out := viciSwanctl(t, sock, "--version", "--daemon"); !strings.Contains(out, "ipsecd (Linux") {
		t.Errorf("swanctl --version --daemon: %q, want ipsecd's", out)
	}
	out := viciSwanctl(t, sock, "--initiate", "--child", "net")
	for _, want := range []string{"[CFG] initiating 'net'", "[CHD] CHILD_SA net established with SPIs", "initiate completed successfully"} {
		if !strings.Contains(out, want) {
			t.Errorf("swanctl --initiate: no %q in\n%s", want, out)
		}
	}
	child := r.waitUp(t, "swanctl --initiate through vici", childSPIs{})

	// --list-sas: the lines charon prints for the same SA, seen from the
	// other end (SPIs and selectors swapped).
	ours, theirs := viciSwanctl(t, sock, "--list-sas"), r.swanctl(t, "--list-sas")
	for _, want := range []string{
		fmt.Sprintf("in  %08x", child.in), fmt.Sprintf("out %08x", child.out),
		"local  198.51.100.0/24", "remote 203.0.113.0/24", "local  'a.test' @ 192.0.2.1[4500]", "remote 'b.test' @ 192.0.2.2[4500]",
	} {
		if !strings.Contains(ours, want) {
			t.Errorf("swanctl --list-sas (ipsecd) has no %q:\n%s", want, ours)
		}
	}
	for _, line := range []string{"AES_CBC-256/HMAC_SHA2_256_128/PRF_HMAC_SHA2_256/CURVE_25519", "net: #1, reqid 1, INSTALLED, TUNNEL-in-UDP, ESP:AES_GCM_16-128"} {
		if !strings.Contains(theirs, line) || !strings.Contains(ours, line) {
			t.Errorf("%q is not in both listings:\nipsecd:\n%s\ncharon:\n%s", line, ours, theirs)
		}
	}

	// --list-sas --raw: charon's keys, with the same values, or the
	// other end's where a key names one end.
	a, b := parseRaw(viciSwanctl(t, sock, "--list-sas", "--raw")), parseRaw(r.swanctl(t, "--list-sas", "--raw"))
	swapped := map[string]string{"local-host": "remote-host", "remote-host": "local-host", "local-id": "remote-id", "remote-id": "local-id",
		"spi-in": "spi-out", "spi-out": "spi-in", "local-ts": "remote-ts", "remote-ts": "local-ts"}
	// What ipsecd does not know (docs/vici.md): on which side a NAT is;
	// tasks; times that vary by a second between the two listings.
	unknown := regexp.MustCompile(`\.(nat-local|nat-remote|tasks-\w+|use-in|use-out)$`)
	timing := regexp.MustCompile(`\.(established|rekey-time|life-time|install-time|reauth-time|bytes-\w+|packets-\w+|uniqueid)$`)
	for k, theirV := range b {
		if unknown.MatchString(k) {
			continue
		}
		ourV, ok := a[k]
		if !ok {
			t.Errorf("--list-sas --raw: charon has %s=%s, ipsecd has no %s", k, theirV, k)
			continue
		}
		leaf := k[strings.LastIndex(k, ".")+1:]
		if other, ok := swapped[leaf]; ok {
			theirV = b[strings.TrimSuffix(k, leaf)+other]
		}
		if !timing.MatchString(k) && ourV != theirV {
			t.Errorf("--list-sas --raw: %s is %s at ipsecd, %s at charon's end", k, ourV, theirV)
		}
	}
	t.Logf("--list-sas --raw: %d keys at ipsecd, %d at charon", len(a), len(b))

	if out := viciSwanctl(t, sock, "--stats"); !strings.Contains(out, "IKE_SAs: 1 total, 0 half-open") {
		t.Errorf("swanctl --stats: %s", out)
	}

	// --rekey of the child, then of the IKE SA, each seen as its event.
	if out := viciSwanctl(t, sock, "--rekey", "--child", "net"); !strings.Contains(out, "rekey completed successfully") {
		t.Errorf("swanctl --rekey --child: %s", out)
	}
	rekeyed := r.waitUp(t, "swanctl --rekey --child through vici", child)
	ev := nextViciEvent(t, events, "child-rekey")
	pair := ev.Message.Get("charon").(*govici.Message).Get("child-sas").(*govici.Message).Get("net").(*govici.Message)
	if o, n := pair.Get("old").(*govici.Message), pair.Get("new").(*govici.Message); o.Get("spi-in") != fmt.Sprintf("%08x", child.in) ||
		n.Get("spi-in") != fmt.Sprintf("%08x", rekeyed.in) || n.Get("spi-out") != fmt.Sprintf("%08x", rekeyed.out) {
		t.Errorf("child-rekey: %v, want old in %08x, new %08x/%08x", pair, child.in, rekeyed.in, rekeyed.out)
	}
	ike := r.charonIKE()[0]
	if out := viciSwanctl(t, sock, "--rekey", "--ike", "charon"); !strings.Contains(out, "rekey completed successfully") {
		t.Errorf("swanctl --rekey --ike: %s", out)
	}
	r.waitIKERekeyed(t, "swanctl --rekey --ike through vici", ike)
	ev = nextViciEvent(t, events, "ike-rekey")
	sides := ev.Message.Get("charon").(*govici.Message)
	if o, n := sides.Get("old").(*govici.Message), sides.Get("new").(*govici.Message); o.Get("initiator-spi") == n.Get("initiator-spi") ||
		!strings.Contains(r.ch.ListSAs(), fmt.Sprint(n.Get("initiator-spi"))) {
		t.Errorf("ike-rekey: old %v new %v; want the new SPIs charon lists:\n%s", o, n, r.ch.ListSAs())
	}

	out = viciSwanctl(t, sock, "--terminate", "--ike", "charon")
	for _, want := range []string{"[IKE] IKE_SA charon deleted (terminated)", "terminate completed successfully"} {
		if !strings.Contains(out, want) {
			t.Errorf("swanctl --terminate: no %q in\n%s", want, out)
		}
	}
	r.waitDown(t, "swanctl --terminate --ike through vici", 10*time.Second, true)

	// --monitor-sa saw the tunnel come up and go, and nothing else: a
	// rekey is not an up or down.
	monitor.Process.Signal(syscall.SIGINT)
	monitor.Wait()
	var seen []string
	for _, l := range strings.Split(monitored.String(), "\n") {
		if name, rest, ok := strings.Cut(l, " event {"); ok {
			up := strings.HasPrefix(rest, "up=yes")
			seen = append(seen, fmt.Sprintf("%s up=%v", name, up))
		}
	}
	if got, want := strings.Join(seen, ", "), "ike-updown up=true, child-updown up=true, child-updown up=false, ike-updown up=false"; got != want {
		t.Errorf("swanctl --monitor-sa saw %s; want %s:\n%s", got, want, monitored.String())
	}

	// --load-conns of charon's own swanctl.conf: refused, saying why
	// (ipsecd's child needs its interface).
	conf := filepath.Join(t.TempDir(), "swanctl.conf")
	os.WriteFile(conf, []byte(r.spec.charonConn().String()), 0o600)
	out, err = viciSwanctlErr(sock, "--load-conns", "--file", conf)
	if err == nil || !strings.Contains(out, `loading connection 'test' failed: load-conn: test: children.net: if_id_in "" and if_id_out ""`) {
		t.Errorf("swanctl --load-conns: %v\n%s\nwant a failure saying why", err, out)
	}
}

// nextViciEvent waits up to 10 s for an event named name.
func nextViciEvent(t *testing.T, events chan govici.Event, name string) govici.Event {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev := <-events:
			if ev.Name == name {
				return ev
			}
		case <-timeout:
			t.Fatalf("no %s event within 10 s", name)
		}
	}
}

// viciSwanctlConf is ipsecd's side of the test connection as
// swanctl.conf, which swanctl --load-all loads into ipsecd over vici;
// esp is the child's ESP proposal, start its start_action.
func viciSwanctlConf(esp, start string) string {
	return fmt.Sprintf(`connections {
  gw {
    local_addrs = %s
    remote_addrs = %s
    version = 2
    proposals = aes256-sha256-x25519
    encap = yes
    local {
      auth = psk
      id = a.test
    }
    remote {
      auth = psk
      id = b.test
    }
    children {
      net {
        local_ts = 198.51.100.0/24
        remote_ts = 203.0.113.0/24
        esp_proposals = %s
        start_action = %s
        if_id_in = 1
        if_id_out = 1
      }
    }
  }
}
secrets {
  ike-gw {
    id-a = a.test
    id-b = b.test
    secret = %s
  }
}
`, underlayA4, underlayB4, esp, start, charontest.PSK)
}

// writeSwanctlCreds puts a CA certificate (PEM), a certificate (DER) and
// an ECDSA key (PEM, SEC1) where swanctl --load-all finds them under dir.
func writeSwanctlCreds(t *testing.T, dir string) {
	t.Helper()
	for _, sub := range []string{"x509ca", "x509", "ecdsa"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	ca := testpki.NewCA(t, "gw CA", testpki.Opts{})
	gw := ca.Issue(t, "gw", testpki.Opts{})
	ca.WriteCert(t, filepath.Join(dir, "x509ca", "ca.pem"))
	if err := os.WriteFile(filepath.Join(dir, "x509", "gw.der"), gw.DER, 0o600); err != nil {
		t.Fatal(err)
	}
	gw.WriteKey(t, filepath.Join(dir, "ecdsa", "gw.pem"), testpki.SEC1)
}

// TestViciLoadAll: with no connection in ipsecd's file, swanctl
// --load-all loads one (PSK, from swanctl.conf) over vici and --initiate
// brings it up against charon. Loaded again unchanged, and after a reload
// of ipsecd's file, the SAs stay (same SPIs); changed (another ESP
// proposal, start_action start), it is re-established with the new
// proposal; left out of swanctl.conf, --load-conns unloads it and its
// SAs go.
func TestViciLoadAll(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "charon.vici")
	// charon takes either ESP proposal, so that ipsecd's may change.
	r := newIKERig(t, ikeSpec{vici: sock, viciOnly: true, ike: "aes256-sha256-x25519", esp: "aes128gcm16,aes256gcm16"})
	dir := t.TempDir()
	conf := filepath.Join(dir, "swanctl.conf")
	load := func(text string, args ...string) string {
		t.Helper()
		if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("timeout", append([]string{"30", "swanctl"}, append(args, "--file", conf, "--uri", "unix://"+sock)...)...)
		cmd.Env = append(os.Environ(), "SWANCTL_DIR="+dir)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("swanctl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	writeSwanctlCreds(t, dir)
	out := load(viciSwanctlConf("aes128gcm16", "none"), "--load-all")
	for _, want := range []string{"loaded ike secret 'ike-gw'", "loaded connection 'gw'", "successfully loaded 1 connections, 0 unloaded",
		"loaded certificate from '" + dir + "/x509ca/ca.pem'", "loaded certificate from '" + dir + "/x509/gw.der'",
		"loaded ECDSA key from '" + dir + "/ecdsa/gw.pem'"} {
		if !strings.Contains(out, want) {
			t.Errorf("swanctl --load-all: no %q in\n%s", want, out)
		}
	}
	if out := viciSwanctl(t, sock, "--list-conns"); !strings.Contains(out, "gw: IKEv2") {
		t.Errorf("swanctl --list-conns after --load-all:\n%s", out)
	}
	viciSwanctl(t, sock, "--initiate", "--child", "net")
	child := r.waitUp(t, "initiating the connection vici loaded", childSPIs{})

	load(viciSwanctlConf("aes128gcm16", "none"), "--load-all")
	r.d.mustCtl(t, "reload")
	time.Sleep(time.Second) // an SA a reload deleted would be gone by now
	if now, one := r.ipsecdChild(); !one || now != child {
		t.Fatalf("after loading the connection unchanged and a reload of the file: child %08x/%08x (one: %v), want %08x/%08x kept",
			now.in, now.out, one, child.in, child.out)
	}

	out = load(viciSwanctlConf("aes256gcm16", "start"), "--load-all")
	changed := r.waitUp(t, "the changed connection re-established", child)
	if ours := viciSwanctl(t, sock, "--list-sas"); !strings.Contains(ours, "ESP:AES_GCM_16-256") {
		t.Errorf("after loading a changed ESP proposal:\n%s", ours)
	}
	t.Logf("changed: child %08x/%08x replaced by %08x/%08x", child.in, child.out, changed.in, changed.out)

	out = load("connections {}\n", "--load-conns")
	if !strings.Contains(out, "unloaded 1") && !strings.Contains(out, "1 unloaded") {
		t.Errorf("swanctl --load-conns without gw: %s", out)
	}
	r.waitDown(t, "the connection unloaded", 10*time.Second, true)
	if out := viciSwanctl(t, sock, "--list-conns"); strings.Contains(out, "gw:") {
		t.Errorf("swanctl --list-conns after unloading:\n%s", out)
	}
}

// TestViciRoadWarrior: with charon as a road warrior of the real binary
// (EAP-MSCHAPv2, a virtual IP from the pool), swanctl over vici lists
// the client as charon's own swanctl would: --list-pools --leases shows
// its lease online under its EAP identity, --list-sas its EAP identity
// and virtual IP, --list-conns the EAP class.
func TestViciRoadWarrior(t *testing.T) {
	rw, d, sock := viciRoadWarrior(t, func(gw string) string { return gw })
	rw.up(t, d, "connect", "alice", "10.3.0.1")

	out := viciSwanctl(t, sock, "--list-pools", "--leases")
	t.Logf("swanctl --list-pools --leases:\n%s", out)
	for _, want := range []string{"rw ", "10.3.0.0", "1 / 0 / 254", "10.3.0.1", "online", "'alice'"} {
		if !strings.Contains(out, want) {
			t.Errorf("swanctl --list-pools --leases: no %q in\n%s", want, out)
		}
	}
	if out := viciSwanctl(t, sock, "--list-sas"); !strings.Contains(out, "EAP: 'alice' [10.3.0.1]") {
		t.Errorf("swanctl --list-sas does not show alice's EAP identity and virtual IP:\n%s", out)
	}
	if out := viciSwanctl(t, sock, "--list-conns"); !strings.Contains(out, "remote EAP_MSCHAPV2 authentication") &&
		!strings.Contains(out, "remote EAP authentication") {
		t.Errorf("swanctl --list-conns does not show the EAP class:\n%s", out)
	}
	rw.down(t, d, "alice")
	if out := viciSwanctl(t, sock, "--list-pools", "--leases"); !strings.Contains(out, "offline") {
		t.Errorf("after the disconnect, swanctl --list-pools --leases:\n%s", out)
	}
}

// viciRoadWarrior starts charon in b as alice's road warrior and the
// real binary in a as its gateway (raGateway, edited by edit) with a
// vici socket, which it returns.
func viciRoadWarrior(t *testing.T, edit func(gw string) string) (rw *roadWarrior, d *daemon, sock string) {
	t.Helper()
	charontest.Require(t)
	p := newPair(t)
	caFile, cert, key := raPKI(t, t.TempDir())
	rw = newRoadWarrior(t, p.b, underlayB4, "alice", "alice-mschapv2-pw", caFile)
	sock = filepath.Join(t.TempDir(), "charon.vici")
	d = startDaemon(t, p.a, edit(raGateway(cert, key))+"vici: "+sock+"\n")
	return rw, d, sock
}
