//go:build linux

package charontest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/ipsecd/ipsecd/internal/syncbuf"
)

// strongSwan 6 from Debian sid, in a chroot: Debian 12's charon (5.9.8)
// knows neither ML-KEM nor RFC 9370's additional key exchanges, sid's
// (6.1, ML-KEM through OpenSSL 3.5 and later) does. scripts/sid-strongswan.sh
// builds the chroot (scripts/test.sh runs it); StartSid runs its charon
// in a namespace like Start, with the test's directory bind-mounted on
// the chroot's /etc/swanctl.

// SidRoot is where scripts/sid-strongswan.sh builds the chroot
// (SID_SWAN_ROOT overrides it, for both).
func SidRoot() string {
	if r := os.Getenv("SID_SWAN_ROOT"); r != "" {
		return r
	}
	return "/opt/sid-swan"
}

// sidConfDir is where the chroot sees the Charon's Dir.
const sidConfDir = "/etc/swanctl"

// sidPlugins are the plugins of the sid charon: ML-KEM comes from
// openssl; eap-identity and eap-tls (libcharon-extra-plugins) make it an
// EAP-TLS peer of TLS 1.3 as RFC 9190 has it, which 5.9.8 is not.
const sidPlugins = "random nonce openssl pem pkcs1 pkcs8 x509 pubkey curve25519 gcm chapoly aes sha2 sha1 hmac kdf kernel-libipsec kernel-netlink socket-default vici eap-identity eap-tls"

// RequireSid skips the test without root or the sid chroot.
func RequireSid(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: network namespaces, chroot and charon")
	}
	if _, err := os.Stat(filepath.Join(SidRoot(), "usr/lib/ipsec/charon")); err != nil {
		t.Skipf("no strongSwan 6 chroot at %s (scripts/test.sh builds it with scripts/sid-strongswan.sh)", SidRoot())
	}
}

// StartSid is Start with the sid chroot's charon: it logs the keys it
// derives (level 4), ML-KEM's and IKE_INTERMEDIATE's included.
func StartSid(t testing.TB, ns, extra string) *Charon {
	t.Helper()
	return startSid(t, ns, extra, 4)
}

// StartSidQuiet is StartSid with charon's default log levels, for
// measurements (StartQuiet).
func StartSidQuiet(t testing.TB, ns, extra string) *Charon {
	t.Helper()
	return startSid(t, ns, extra, 1)
}

func startSid(t testing.TB, ns, extra string, level int) *Charon {
	t.Helper()
	RequireSid(t)
	dir := t.TempDir()
	c := &Charon{t: t, Dir: dir, Log: filepath.Join(dir, "charon.log"), out: &syncbuf.Buffer{}, root: SidRoot()}
	text := fmt.Sprintf(conf, extra, filepath.Join(sidConfDir, "charon.log"), level, sidPlugins)
	if err := os.WriteFile(filepath.Join(dir, "strongswan.conf"), []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	// Private mounts in charon's own mount namespace: a /run of its own
	// (pid file, vici socket), the test's directory as /etc/swanctl, the
	// host's /dev (kernel-libipsec opens /dev/net/tun) and a /proc.
	script := `R=$1; C=$2
mount -t tmpfs tmpfs "$R/run" && mount --bind "$C" "$R/etc/swanctl" &&
mount --rbind /dev "$R/dev" && mount -t proc proc "$R/proc" &&
exec chroot "$R" env STRONGSWAN_CONF=/etc/swanctl/strongswan.conf /usr/lib/ipsec/charon`
	c.run(exec.Command("ip", "netns", "exec", ns, "unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", c.root, dir))
	return c
}
