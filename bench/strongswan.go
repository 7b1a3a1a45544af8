package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// The strongSwan tunnel: charon in each namespace with kernel-libipsec,
// strongSwan's ESP data plane in user space behind a TUN device (ipsec0),
// the same shape as ipsecd and wireguard-go. IKEv2 with a PSK sets up one
// AES-GCM-128 child SA pair; encap = yes forces ESP into UDP 4500 as
// ipsecd's tunnel has it.

// strongSwanCase is the table's name of the strongSwan tunnel.
const strongSwanCase = "strongSwan kernel-libipsec AES-GCM-128"

// charonBin is Debian's charon (strongswan-charon); it is not on PATH.
const charonBin = "/usr/lib/ipsec/charon"

// The inner networks of the strongSwan tunnel: kernel-libipsec routes
// remote_ts into ipsec0 from an address of local_ts, which lives on lo.
const (
	swanInnerA = "10.30.0.1"
	swanInnerB = "10.40.0.1"
)

// charonConf is strongswan.conf. openssl comes first and strongSwan's
// own aes and gcm plugins are not loaded, so that ESP uses OpenSSL's
// AES-NI code, the fastest strongSwan has.
const charonConf = `charon {
  load = random nonce openssl pem pkcs1 x509 pubkey curve25519 sha2 hmac kdf kernel-libipsec kernel-netlink socket-default vici
  install_routes = yes
  filelog {
    bench {
      path = %s
      time_format = %%T
      default = 1
      flush_line = yes
    }
  }
  syslog { daemon { default = -1 } }
}
`

const swanctlConf = `connections {
  bench {
    version = 2
    local_addrs = %s
    remote_addrs = %s
    proposals = aes128gcm16-prfsha256-x25519
    encap = yes
    mobike = no
    local { auth = psk
            id = %s.bench }
    remote { auth = psk
             id = %s.bench }
    children {
      net {
        mode = tunnel
        local_ts = %s/24
        remote_ts = %s/24
        esp_proposals = aes128gcm16
        start_action = none
      }
    }
  }
}
secrets {
  ike-bench {
    id-a = a.bench
    id-b = b.bench
    secret = "%s"
  }
}
`

// swanSide is one end of the strongSwan tunnel.
type swanSide struct {
	ns             *netns
	name, peerName string // a or b: IKE identities name.bench
	local, peer    string // underlay addresses
	inner, remote  string // own and peer's inner address
	dir, conf, log string
	proc           *process
}

// swanctl runs swanctl against this side's charon: in its network
// namespace and its mount namespace, where /run (the vici socket) is
// charon's own.
func (s *swanSide) swanctl(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	return output(exec.CommandContext(ctx, "nsenter", append([]string{"-t", fmt.Sprint(s.proc.pid()), "-m", "-n", "swanctl"}, args...)...))
}

// startStrongSwan runs charon in each namespace, loads the connection,
// initiates it from A and returns once a ping crosses the tunnel.
func startStrongSwan(ctx context.Context, l *lab) (*path, error) {
	for _, tool := range []string{charonBin, "swanctl", "nsenter", "unshare"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("%s is missing (Debian: apt-get install strongswan-charon strongswan-swanctl libstrongswan-extra-plugins util-linux)", tool)
		}
	}
	psk := make([]byte, 24)
	rand.Read(psk)
	sides := []*swanSide{
		{ns: l.a, name: "a", peerName: "b", local: underlayA, peer: underlayB, inner: swanInnerA, remote: swanInnerB},
		{ns: l.b, name: "b", peerName: "a", local: underlayB, peer: underlayA, inner: swanInnerB, remote: swanInnerA},
	}
	var added []*swanSide // sides whose inner address is on lo
	stop := func() error {
		var errs []error
		for _, s := range sides {
			if s.proc != nil {
				if err := l.remove(s.proc); err != nil {
					errs = append(errs, fmt.Errorf("charon-%s: %w\n%s", s.name, err, s.proc.logTail(20)))
				}
			}
		}
		// charon takes its routes and ipsec0 with it; the addresses
		// on lo are the benchmark's.
		for _, s := range added {
			errs = append(errs, s.ns.run(context.Background(), "ip", "addr", "del", s.inner+"/32", "dev", "lo"))
		}
		return errors.Join(errs...)
	}
	fail := func(err error) (*path, error) {
		for _, s := range sides {
			if s.proc != nil {
				log, _ := os.ReadFile(s.log)
				err = fmt.Errorf("%w\ncharon-%s output:\n%s\ncharon-%s log (tail):\n%s", err, s.name, s.proc.logTail(10), s.name, tail(string(log), 30))
			}
		}
		stop()
		return nil, err
	}
	for _, s := range sides {
		s.dir = filepath.Join(l.dir, "charon-"+s.name)
		s.conf = filepath.Join(s.dir, "strongswan.conf")
		s.log = filepath.Join(s.dir, "charon.log")
		if err := os.MkdirAll(s.dir, 0o700); err != nil {
			return fail(err)
		}
		if err := os.WriteFile(s.conf, []byte(fmt.Sprintf(charonConf, s.log)), 0o600); err != nil {
			return fail(err)
		}
		swanctl := fmt.Sprintf(swanctlConf, s.local, s.peer, s.name, s.peerName, prefix24(s.inner), prefix24(s.remote), fmt.Sprintf("0x%x", psk))
		if err := os.WriteFile(filepath.Join(s.dir, "swanctl.conf"), []byte(swanctl), 0o600); err != nil {
			return fail(err)
		}
		if err := s.ns.run(ctx, "ip", "addr", "add", s.inner+"/32", "dev", "lo"); err != nil {
			return fail(err)
		}
		added = append(added, s)
		// A private /run per charon: its pid file and vici socket
		// live there, and two charons cannot share one. ip netns exec,
		// unshare and sh all exec, so the PID is charon's.
		p, err := l.start(s.ns, "charon-"+s.name, nil, "unshare", "-m", "sh", "-c",
			"mount -t tmpfs tmpfs /run && exec env STRONGSWAN_CONF="+s.conf+" "+charonBin)
		if err != nil {
			return fail(err)
		}
		s.proc = p
		if err := waitFor(ctx, 15*time.Second, "charon-"+s.name+" vici socket", func() bool {
			if done, _ := p.exited(); done {
				return true
			}
			_, err := s.swanctl(ctx, "--stats")
			return err == nil
		}); err != nil {
			return fail(err)
		}
		if done, err := p.exited(); done {
			return fail(fmt.Errorf("charon-%s exited during start-up: %v", s.name, err))
		}
		if _, err := s.swanctl(ctx, "--load-all", "--clear", "--file", filepath.Join(s.dir, "swanctl.conf")); err != nil {
			return fail(err)
		}
	}
	if _, err := sides[0].swanctl(ctx, "--initiate", "--child", "net", "--timeout", "20"); err != nil {
		return fail(err)
	}
	if err := waitPing(ctx, l.a, swanInnerB); err != nil {
		return fail(err)
	}
	// Traffic must go through the tunnel, not around it.
	if route, err := l.a.output(ctx, "ip", "route", "get", swanInnerB); err != nil || !strings.Contains(route, "dev ipsec") {
		return fail(fmt.Errorf("%s is not routed into charon's TUN device: %s %v", swanInnerB, strings.TrimSpace(route), err))
	}
	return &path{target: swanInnerB, tunnel: []*process{sides[0].proc, sides[1].proc}, stop: stop}, nil
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
