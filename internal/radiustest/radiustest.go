// Package radiustest runs Debian's FreeRADIUS 3.2 (freeradius -X) on
// loopback ports for tests: a config directory of its own made in the
// test's temporary directory (radiusd.conf with one client, the eap module
// with EAP-MD5, EAP-MSCHAPv2 and EAP-TLS with a test CA made here, mschap,
// files with the test's users, and the detail module writing accounting
// to one file; optionally an SQL address pool, ippool.go), so that nothing of /etc/freeradius is read or changed
// (Debian's eap module wants ssl-cert's snakeoil files, which a machine
// without recommends lacks). Tests skip when freeradius is not
// installed (scripts/test.sh installs it).
package radiustest

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// User is one line of the users file: a password and reply attributes in
// FreeRADIUS's syntax, e.g. {"Framed-IP-Address", "10.3.0.7"}.
type User struct {
	Name, Password string
	Reply          [][2]string
}

// Options is what the server is made with.
type Options struct {
	Secret string // the client's shared secret; "" is "testing123"
	Users  []User
	// NetNS runs FreeRADIUS in that named network namespace (ip netns
	// exec; its loopback is brought up), "" in the test's own.
	NetNS string
	// TLSNames are DNS names the EAP-TLS server certificate holds
	// besides radius.test.
	TLSNames []string
	// IPPool assigns addresses from an SQL pool (ippool.go); nil for
	// none.
	IPPool *IPPool
	// Listen, when valid, is the address FreeRADIUS listens on, at the
	// standard ports 1812 and 1813, in place of 127.0.0.1 at free ports:
	// a server in its own namespace (NetNS, which must then be set and
	// hold the address) that gateways in other namespaces reach.
	Listen netip.Addr
	// Clients are networks whose requests FreeRADIUS takes besides
	// 127.0.0.1's, with the same secret: the gateways' addresses as
	// Listen sees them.
	Clients []netip.Prefix
}

// Server is a running FreeRADIUS.
type Server struct {
	Dir      string // its config directory
	Auth     string // address:port of authentication (127.0.0.1 unless Options.Listen)
	Acct     string // address:port of accounting
	Secret   string
	PKI      PKI // the EAP-TLS CA and a client's certificate
	cmd      *exec.Cmd
	mu       sync.Mutex
	log      bytes.Buffer // freeradius -X's output
	stopOnce sync.Once
}

// Start runs FreeRADIUS for the test and stops it in t.Cleanup; its log
// is written to the test's log when the test fails.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	bin, err := exec.LookPath("freeradius")
	if err != nil {
		t.Skip("freeradius is not installed (Debian package freeradius; scripts/test.sh installs it)")
	}
	if o.Secret == "" {
		o.Secret = "testing123"
	}
	for attempt := 0; ; attempt++ {
		s, err := start(t, bin, o)
		if err == nil {
			return s
		}
		if attempt == 2 {
			t.Fatal(err)
		}
		t.Logf("freeradius: %v; again on other ports", err)
	}
}

func start(t testing.TB, bin string, o Options) (*Server, error) {
	dir := t.TempDir()
	listen, auth, acct := netip.AddrFrom4([4]byte{127, 0, 0, 1}), 1812, 1813
	if o.Listen.IsValid() {
		if o.NetNS == "" {
			t.Fatal("radiustest: Listen needs NetNS: the standard ports of the test's own namespace may be taken")
		}
		listen = o.Listen
	} else {
		auth, acct = freePort(t), freePort(t)
	}
	s := &Server{Dir: dir, Auth: netip.AddrPortFrom(listen, uint16(auth)).String(), Acct: netip.AddrPortFrom(listen, uint16(acct)).String(), Secret: o.Secret, PKI: makePKI(t, dir, o.TLSNames)}
	files := map[string]string{
		"radiusd.conf": radiusdConf(dir, o.Secret, listen, auth, acct, o.IPPool, o.Clients),
		"users":        usersFile(o.Users),
		"dictionary":   "$INCLUDE /usr/share/freeradius/dictionary\n",
	}
	if o.IPPool != nil {
		db := exec.Command("sqlite3", filepath.Join(dir, "ippool.db"))
		db.Stdin = strings.NewReader(ippoolSQL(o.IPPool))
		if out, err := db.CombinedOutput(); err != nil {
			t.Fatalf("sqlite3 (Debian package sqlite3; scripts/test.sh installs it): %v\n%s", err, out)
		}
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s.cmd = exec.Command(bin, "-X", "-d", dir)
	if o.NetNS != "" {
		if out, err := exec.Command("ip", "-n", o.NetNS, "link", "set", "lo", "up").CombinedOutput(); err != nil {
			t.Fatalf("ip -n %s link set lo up: %v\n%s", o.NetNS, err, out)
		}
		s.cmd = exec.Command("ip", "netns", "exec", o.NetNS, bin, "-X", "-d", dir)
	}
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	s.cmd.Stderr = s.cmd.Stdout
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	go s.readLog(out, ready)
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			t.Logf("freeradius -X:\n%s", s.Log())
		}
	})
	select {
	case <-ready:
		return s, nil
	case <-time.After(20 * time.Second):
		s.Stop()
		return nil, fmt.Errorf("freeradius not ready after 20 s:\n%s", s.Log())
	}
}

// readLog keeps freeradius's output and closes ready at "Ready to
// process requests", or when the output ends.
func (s *Server) readLog(out interface{ Read([]byte) (int, error) }, ready chan struct{}) {
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	closed := false
	for sc.Scan() {
		s.mu.Lock()
		s.log.Write(sc.Bytes())
		s.log.WriteByte('\n')
		s.mu.Unlock()
		if !closed && strings.Contains(sc.Text(), "Ready to process requests") {
			close(ready)
			closed = true
		}
	}
	if !closed {
		close(ready)
	}
}

// Log returns what freeradius -X printed so far.
func (s *Server) Log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.String()
}

// Stop ends the server and waits for it.
func (s *Server) Stop() {
	s.stopOnce.Do(func() {
		s.cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { s.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			s.cmd.Process.Kill()
			<-done
		}
	})
}

// Detail returns the accounting records FreeRADIUS wrote so far: each a
// map of attribute name to value as the detail file shows it (quotes
// removed), in order.
func (s *Server) Detail(t testing.TB) []map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(s.Dir, "detail"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var recs []map[string]string
	for _, block := range strings.Split(strings.TrimSpace(string(b)), "\n\n") {
		rec := map[string]string{}
		for _, line := range strings.Split(block, "\n") {
			k, v, ok := strings.Cut(strings.TrimSpace(line), " = ")
			if ok {
				rec[k] = strings.Trim(v, `"`)
			}
		}
		if len(rec) > 0 {
			recs = append(recs, rec)
		}
	}
	return recs
}

// freePort returns a UDP port free on 127.0.0.1 a moment ago.
func freePort(t testing.TB) int {
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port
}

func usersFile(users []User) string {
	var b strings.Builder
	for _, u := range users {
		fmt.Fprintf(&b, "%s\tCleartext-Password := %q\n", u.Name, u.Password)
		for i, r := range u.Reply {
			sep := ","
			if i == len(u.Reply)-1 {
				sep = ""
			}
			fmt.Fprintf(&b, "\t%s = %s%s\n", r[0], r[1], sep)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// radiusdConf is a whole FreeRADIUS config in one file: no include of
// /etc/freeradius, one client (127.0.0.1 with the secret, which must
// send Message-Authenticator) and one per network of clients, alike,
// EAP-MSCHAPv2 by default, EAP-MD5 and EAP-TLS (TLS 1.2, fragments of
// 1024 bytes), the users file, and accounting to DIR/detail.
func radiusdConf(dir, secret string, listen netip.Addr, auth, acct int, pool *IPPool, clients []netip.Prefix) string {
	mods, authz, post, acctMods := "", "", "", ""
	if pool != nil {
		mods, authz, post, acctMods = ippoolModules(dir, pool), ippoolAuthorize(pool), "\t\tsqlippool\n", "\t\tsqlippool\n"
	}
	var more strings.Builder
	for i, c := range clients {
		fmt.Fprintf(&more, "client net%d {\n\tipaddr = %s\n\tsecret = \"%s\"\n\trequire_message_authenticator = yes\n}\n", i, c.Masked(), secret)
	}
	return strings.NewReplacer("@CLIENTS@", more.String(), "@LISTEN@", listen.String(), "@POOLMODS@", mods, "@POOLAUTHZ@", authz, "@POOLPOST@", post, "@POOLACCT@", acctMods, "@DIR@", dir, "@SECRET@", secret, "@AUTH@", strconv.Itoa(auth), "@ACCT@", strconv.Itoa(acct)).Replace(`
prefix = /usr
exec_prefix = /usr
sysconfdir = /etc
localstatedir = /var
sbindir = /usr/sbin
logdir = @DIR@
raddbdir = @DIR@
radacctdir = @DIR@
confdir = @DIR@
run_dir = @DIR@
db_dir = @DIR@
libdir = /usr/lib/freeradius
pidfile = @DIR@/radiusd.pid
name = freeradius
max_request_time = 30
cleanup_delay = 5
max_requests = 16384
hostname_lookups = no
log {
	destination = stdout
	auth = yes
}
security {
	allow_core_dumps = no
	max_attributes = 200
	reject_delay = 0
	status_server = no
}
thread pool {
	start_servers = 2
	max_servers = 4
	min_spare_servers = 1
	max_spare_servers = 3
	max_requests_per_server = 0
}
client test {
	ipaddr = 127.0.0.1
	secret = "@SECRET@"
	require_message_authenticator = yes
}
@CLIENTS@modules {
	eap {
		default_eap_type = mschapv2
		timer_expire = 60
		max_sessions = 4096
		md5 {
		}
		mschapv2 {
		}
		tls-config tls-common {
			private_key_file = @DIR@/server.key
			certificate_file = @DIR@/server.pem
			ca_file = @DIR@/ca.pem
			cipher_list = "DEFAULT"
			tls_min_version = "1.2"
			tls_max_version = "1.2"
			ecdh_curve = "prime256v1"
			fragment_size = 1024
			cache {
				enable = no
			}
		}
		tls {
			tls = tls-common
		}
	}
	mschap {
	}
	files {
		filename = @DIR@/users
	}
	detail {
		filename = @DIR@/detail
		permissions = 0600
		header = "%t"
	}
@POOLMODS@
}
server default {
	listen {
		type = auth
		ipaddr = @LISTEN@
		port = @AUTH@
	}
	listen {
		type = acct
		ipaddr = @LISTEN@
		port = @ACCT@
	}
	authorize {
		eap {
			ok = return
		}
		files
@POOLAUTHZ@	}
	authenticate {
		Auth-Type EAP {
			eap
		}
		Auth-Type MS-CHAP {
			mschap
		}
	}
	preacct {
	}
	accounting {
		detail
@POOLACCT@	}
	post-auth {
@POOLPOST@		Post-Auth-Type REJECT {
			eap
		}
	}
}
`)
}
