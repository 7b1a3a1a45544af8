package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// A path is one way from A to B that iperf3 measures: the veth itself, a
// wireguard-go tunnel or an ipsecd tunnel. stop tears it down, leaving the
// two namespaces and their veth pair as they were.
type path struct {
	target  string     // B's address that A's iperf3 client sends to
	daemons []*process // the ipsecd processes, for their memory
	// tunnel are the processes that carry the tunnel at both ends, whose
	// CPU time is counted; none for the veth.
	tunnel []*process
	// profiled are the daemons -profile can take CPU profiles of.
	profiled []profiledDaemon
	stop     func() error
}

// MTU of the tunnel interfaces: wireguard-go's default, used for ipsecd
// too so both carry the same TCP segment size.
const tunnelMTU = 1420

// vethPath is the plain veth pair.
func vethPath() *path {
	return &path{target: underlayB, stop: func() error { return nil }}
}

// The inner networks of the wireguard-go tunnel.
const (
	wgInnerA = "10.1.0.1"
	wgInnerB = "10.2.0.1"
	wgPort   = "51820"
)

// startWireGuard runs `wireguard-go -f` in each namespace and configures it
// with wg(8): fresh keys, the peer's veth address as endpoint, the inner
// /24s as allowed IPs.
func startWireGuard(ctx context.Context, l *lab, bins string) (*path, error) {
	type side struct {
		ns        *netns
		dev       string
		inner     string // own address on the tunnel
		peerNet   string // the peer's inner /24: allowed IPs and route
		endpoint  string // the peer's veth address
		priv, pub string
		proc      *process
	}
	// The UAPI socket is /var/run/wireguard/DEV.sock, one directory for
	// all namespaces: the device names carry the PID to stay unique.
	sides := []*side{
		{ns: l.a, dev: fmt.Sprintf("wgb%da", os.Getpid()%1000000), inner: wgInnerA, peerNet: "10.2.0.0/24", endpoint: underlayB},
		{ns: l.b, dev: fmt.Sprintf("wgb%db", os.Getpid()%1000000), inner: wgInnerB, peerNet: "10.1.0.0/24", endpoint: underlayA},
	}
	stop := func() error {
		var errs []error
		for _, s := range sides {
			if s.proc != nil {
				errs = append(errs, l.remove(s.proc))
			}
		}
		return errors.Join(errs...)
	}
	fail := func(err error) (*path, error) {
		for _, s := range sides {
			if s.proc != nil {
				err = fmt.Errorf("%w\n%s log:\n%s", err, s.proc.name, s.proc.logTail(20))
			}
		}
		stop()
		return nil, err
	}
	for _, s := range sides {
		priv, err := s.ns.output(ctx, "wg", "genkey")
		if err != nil {
			return fail(err)
		}
		s.priv = strings.TrimSpace(priv)
		cmd := s.ns.command(ctx, "wg", "pubkey")
		cmd.Stdin = strings.NewReader(s.priv + "\n")
		pub, err := output(cmd)
		if err != nil {
			return fail(err)
		}
		s.pub = strings.TrimSpace(pub)
	}
	for i, s := range sides {
		peer := sides[1-i]
		p, err := l.start(s.ns, "wireguard-go-"+s.dev, []string{"WG_PROCESS_FOREGROUND=1", "LOG_LEVEL=error"},
			filepath.Join(bins, "wireguard-go"), "-f", s.dev)
		if err != nil {
			return fail(err)
		}
		s.proc = p
		sock := "/var/run/wireguard/" + s.dev + ".sock"
		if err := waitFor(ctx, 15*time.Second, "wireguard-go socket "+sock, func() bool {
			_, err := os.Stat(sock)
			done, _ := p.exited()
			return err == nil || done
		}); err != nil {
			return fail(err)
		}
		if done, err := p.exited(); done {
			return fail(fmt.Errorf("wireguard-go exited during start-up: %v", err))
		}
		keyFile := filepath.Join(l.dir, s.dev+".key")
		if err := os.WriteFile(keyFile, []byte(s.priv+"\n"), 0o600); err != nil {
			return fail(err)
		}
		for _, args := range [][]string{
			{"wg", "set", s.dev, "listen-port", wgPort, "private-key", keyFile,
				"peer", peer.pub, "endpoint", s.endpoint + ":" + wgPort, "allowed-ips", s.peerNet},
			{"ip", "addr", "add", s.inner + "/24", "dev", s.dev},
			{"ip", "link", "set", s.dev, "mtu", fmt.Sprint(tunnelMTU), "up"},
			{"ip", "route", "add", s.peerNet, "dev", s.dev},
		} {
			if err := s.ns.run(ctx, args[0], args[1:]...); err != nil {
				return fail(err)
			}
		}
	}
	if err := waitPing(ctx, l.a, wgInnerB); err != nil {
		return fail(err)
	}
	return &path{target: wgInnerB, tunnel: []*process{sides[0].proc, sides[1].proc}, stop: stop}, nil
}

// The inner networks of the ipsecd tunnel (configs.go).
const (
	ipsecInnerA = "10.10.0.1"
	ipsecInnerB = "10.20.0.1"
)

// startIPsec writes the two configs of spec and runs `ipsecd run` in
// each namespace. It returns once the control sockets answer and a ping
// crosses the tunnel.
func startIPsec(ctx context.Context, l *lab, bins string, spec ipsecSpec) (*path, error) {
	cfgA, cfgB := spec.configs()
	ipsecd := filepath.Join(bins, "ipsecd")
	var procs []*process
	var profiled []profiledDaemon
	stop := func() error {
		var errs []error
		for _, p := range procs {
			if err := l.remove(p); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w\n%s", p.name, err, p.logTail(20)))
			}
		}
		return errors.Join(errs...)
	}
	fail := func(err error) (*path, error) {
		for _, p := range procs {
			err = fmt.Errorf("%w\n%s log:\n%s", err, p.name, p.logTail(20))
		}
		stop()
		return nil, err
	}
	for _, side := range []struct {
		ns    *netns
		label string
		cfg   string
		role  string
	}{{l.a, "a", cfgA, "A, the sender: seals"}, {l.b, "b", cfgB, "B, the receiver: opens"}} {
		label := "ipsecd-" + spec.name() + "-" + side.label
		control := filepath.Join(l.dir, label+".sock")
		file := filepath.Join(l.dir, label+".yaml")
		// Each daemon its own state directory in the scratch directory:
		// two cannot share one, and the default (/var/lib/ipsecd) is
		// not the benchmark's to make.
		state := filepath.Join(l.dir, label+".state")
		head := "control: " + control + "\nstate_dir: " + state + "\n"
		if spec.profiled {
			head += "metrics: " + metricsAddr + "\npprof: true\n"
			profiled = append(profiled, profiledDaemon{ns: side.ns, label: label, role: side.role})
		}
		if err := os.WriteFile(file, []byte(head+side.cfg), 0o600); err != nil {
			return fail(err)
		}
		p, err := l.start(side.ns, label, nil, ipsecd, "run", "--config", file)
		if err != nil {
			return fail(err)
		}
		// Removing interfaces takes the kernel about 20 ms each at
		// 10,000 (docs/design.md, "Many interfaces").
		p.stopWait = 10*time.Second + time.Duration(max(spec.ifaces, 1))*25*time.Millisecond
		procs = append(procs, p)
		// Ready when the control socket answers; 1,000 interfaces take a
		// while to create.
		if err := waitFor(ctx, 120*time.Second+time.Duration(spec.ifaces)*20*time.Millisecond, label+" control socket", func() bool {
			if done, _ := p.exited(); done {
				return true
			}
			return run(ctx, ipsecd, "stats", "--control", control) == nil
		}); err != nil {
			return fail(err)
		}
		if done, err := p.exited(); done {
			return fail(fmt.Errorf("%s exited during start-up: %v", label, err))
		}
	}
	if err := waitPing(ctx, l.a, ipsecInnerB); err != nil {
		return fail(err)
	}
	return &path{target: ipsecInnerB, daemons: procs, tunnel: procs, profiled: profiled, stop: stop}, nil
}

// waitPing pings dst from ns until one answer comes back, for up to 20 s.
func waitPing(ctx context.Context, ns *netns, dst string) error {
	var last error
	err := waitFor(ctx, 20*time.Second, "ping "+dst, func() bool {
		last = ns.run(ctx, "ping", "-c", "1", "-W", "1", dst)
		return last == nil
	})
	if err != nil && last != nil {
		return fmt.Errorf("%w: %v", err, last)
	}
	return err
}
