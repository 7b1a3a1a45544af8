//go:build linux

package integration

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The streams of TestIKECharonRekey: slower than TestRotation's, as
// charon's userspace data plane is the bottleneck here.
const (
	ikeUDPRate = 1000 // datagrams per second, each way
	ikeUDPSize = 256
)

// rekeyBound bounds the wait for each rekey of TestIKECharonRekey to be
// done on both sides: about 5.2 s for a child (ipsecd's old inbound SA
// lingers 5 s) and 0.1-0.8 s for the IKE SA here, but once, with the
// CPU pressure at 75%, each ipsecd and swanctl command the wait runs
// took seconds and a child rekey was not seen done within 10 s.
const rekeyBound = 30 * time.Second

// charonIKERE finds the unique id of charon's IKE SA: "test: #3, ESTABLISHED".
var charonIKERE = regexp.MustCompile(`test: #(\d+), ESTABLISHED`)

// charonIKE returns the unique ids of the IKE SAs charon lists as ESTABLISHED.
func (r *ikeRig) charonIKE() []string {
	var ids []string
	for _, m := range charonIKERE.FindAllStringSubmatch(r.ch.ListSAs(), -1) {
		ids = append(ids, m[1])
	}
	return ids
}

// waitIKERekeyed waits up to rekeyBound for charon to list one
// established IKE SA that is not old, with the child still matching
// ipsecd's.
func (r *ikeRig) waitIKERekeyed(t *testing.T, what, old string) string {
	t.Helper()
	deadline := time.Now().Add(rekeyBound)
	for {
		ids := r.charonIKE()
		ours, one := r.ipsecdChild()
		theirs := r.charonChildren()
		if len(ids) == 1 && ids[0] != old && one && len(theirs) == 1 && theirs[0] == (childSPIs{ours.out, ours.in}) {
			return ids[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: charon lists IKE SAs %v (old #%s) and children %+v, ipsecd %+v; charon:\n%s\nipsecd ike list:\n%s",
				what, ids, old, theirs, ours, r.ch.ListSAs(), r.ikeList())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestIKECharonRekey: while a numbered UDP stream runs each way through
// the tunnel, the child and then the IKE SA are rekeyed, each first by
// ipsecd (`ipsecd ike rekey`) and then by charon (`swanctl --rekey`).
// Every datagram arrives, once (make-before-break on both sides), but
// for those charon's namespace counted as dropped before charon read
// them (charonStreams: charon stalls on a loaded machine).
func TestIKECharonRekey(t *testing.T) {
	r := newIKERig(t, ikeSpec{})
	child := r.up(t, "ipsecd")
	ike := r.charonIKE()[0]
	st := startCharonStreams(t, r.p, r.d, r.ch.Pid, ikeUDPRate, ikeUDPSize)
	time.Sleep(time.Second)

	for _, step := range []struct {
		by, what string
		rekey    func()
	}{
		{"ipsecd", "child", func() { r.ipsecdIKE(t, "rekey", "--child", "net") }},
		{"charon", "child", func() { r.swanctl(t, "--rekey", "--child", "net") }},
		{"ipsecd", "ike", func() { r.ipsecdIKE(t, "rekey", "--ike", "charon") }},
		{"charon", "ike", func() { r.swanctl(t, "--rekey", "--ike", "test") }},
	} {
		began := time.Now()
		step.rekey()
		what := step.by + " rekeying the " + step.what

		if step.what == "child" {
			child = r.waitUpWithin(t, what, child, rekeyBound)
		} else {
			ike = r.waitIKERekeyed(t, what, ike)
		}
		t.Logf("%s: done in %v: child in %08x out %08x, charon's IKE SA #%s", what, time.Since(began).Round(time.Millisecond), child.in, child.out, ike)
		time.Sleep(time.Second)
	}

	for i, sent := range st.stopAndCheck(t) {
		if least := int64(ikeUDPRate * 4); sent.Sent < least {
			t.Errorf("UDP %s: sent only %d datagrams, want at least %d to span the rekeys", []string{"A→B", "B→A"}[i], sent.Sent, least)
		}
	}
	if list := r.ch.ListSAs(); strings.Count(list, "INSTALLED") != 1 {
		t.Errorf("charon lists old children after the rekeys:\n%s", list)
	}
}

// udpRcvbufErrors is the count of UDP datagrams dropped for a full socket
// receive buffer in the network namespace of process pid
// (/proc/PID/net/snmp, Udp: RcvbufErrors).
func udpRcvbufErrors(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/snmp", pid))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) == 0 || f[0] != "Udp:" {
			continue
		}
		if names == nil {
			names = f
			continue
		}
		for i, name := range names {
			if name == "RcvbufErrors" && i < len(f) {
				v, _ := strconv.ParseInt(f[i], 10, 64)
				return v
			}
		}
	}
	t.Fatalf("no Udp: RcvbufErrors in /proc/%d/net/snmp", pid)
	return 0
}
