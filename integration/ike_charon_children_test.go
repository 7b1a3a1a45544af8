//go:build linux

package integration

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/internal/charontest"
)

// childrenNames are the children of TestIKECharonChildren: child N
// carries 198.51.100.N <-> 203.0.113.N.
var childrenNames = []string{"one", "two", "three"}

// childrenESP are their ESP proposals, each its own.
var childrenESP = []string{"aes128gcm16", "aes256gcm16", "aes128gcm16-x25519"}

// ipsecdChildrenConfig is ipsecd's side: one connection with the three
// children.
func ipsecdChildrenConfig() string {
	var b strings.Builder
	b.WriteString(`log: {level: debug}
ike:
  port: 500
  retransmit: {timeout: 500ms, base: 1, tries: 2}
underlay: {udp: "0.0.0.0:4500"}
interfaces:
  - {name: ipsec1, if_id: 1, addresses: [198.51.100.1/24, 198.51.100.2/32, 198.51.100.3/32], routes: [203.0.113.0/24]}
connections:
  - name: charon
    version: 2
    local_addrs: [192.0.2.1]
    remote_addrs: [192.0.2.2]
    proposals: [aes256-sha256-x25519]
    encap: true
    local:  {auth: psk, id: a.test}
    remote: {auth: psk, id: b.test}
    children:
`)
	for i, name := range childrenNames {
		fmt.Fprintf(&b, "      - {name: %s, if_id: 1, local_ts: [198.51.100.%d/32], remote_ts: [203.0.113.%d/32], esp_proposals: [%s], start_action: none}\n",
			name, i+1, i+1, childrenESP[i])
	}
	fmt.Fprintf(&b, "secrets:\n  - {ids: [a.test, b.test], secret: %q}\n", charontest.PSK)
	return b.String()
}

// charonChildrenConn is charon's side of it.
func charonChildrenConn() charontest.Conn {
	c := charontest.Conn{LocalAddrs: underlayB4, RemoteAddrs: underlayA4, Proposals: "aes256-sha256-x25519", Encap: true,
		Local: charontest.Peer{ID: "b.test"}, Remote: charontest.Peer{ID: "a.test"}}
	for i, name := range childrenNames {
		c.Children = append(c.Children, charontest.Child{Name: name, LocalTS: fmt.Sprintf("203.0.113.%d/32", i+1),
			RemoteTS: fmt.Sprintf("198.51.100.%d/32", i+1), ESP: childrenESP[i]})
	}
	return c
}

// charonNamedChildRE matches an installed child in swanctl --list-sas
// with its name and its in and out SPIs.
var charonNamedChildRE = regexp.MustCompile(`(?m)^\s+(\w+): #\d+, reqid \d+, INSTALLED, [^\n]*\n[^\n]*\n\s*in  ([0-9a-f]{8}),[^\n]*\n\s*out ([0-9a-f]{8}),`)

// childrenState is what each side holds: child name -> SPIs (ipsecd's
// in and out), and the IKE SAs each lists.
type childrenState struct {
	ipsecd, charon map[string][]childSPIs
	ipsecdIKE      int
	charonIKE      int
}

func (r *ikeRig) childrenState(t *testing.T) childrenState {
	t.Helper()
	s := childrenState{ipsecd: map[string][]childSPIs{}, charon: map[string][]childSPIs{}}
	out, err := r.d.ctl("ike", "list", "--json")
	if err != nil {
		t.Fatalf("ipsecd ike list --json: %v\n%s", err, out)
	}
	var sas []struct {
		State    string `json:"state"`
		Children []struct {
			Name   string `json:"name"`
			SPIIn  string `json:"spi_in"`
			SPIOut string `json:"spi_out"`
		} `json:"children"`
	}
	if err := json.Unmarshal([]byte(out), &sas); err != nil {
		t.Fatalf("ipsecd ike list --json: %v\n%s", err, out)
	}
	for _, sa := range sas {
		if sa.State == "ESTABLISHED" {
			s.ipsecdIKE++
		}
		for _, c := range sa.Children {
			in, _ := strconv.ParseUint(c.SPIIn, 0, 32)
			o, _ := strconv.ParseUint(c.SPIOut, 0, 32)
			s.ipsecd[c.Name] = append(s.ipsecd[c.Name], childSPIs{uint32(in), uint32(o)})
		}
	}
	list := r.ch.ListSAs()
	s.charonIKE = strings.Count(list, "ESTABLISHED")
	for _, m := range charonNamedChildRE.FindAllStringSubmatch(list, -1) {
		in, _ := strconv.ParseUint(m[2], 16, 32)
		o, _ := strconv.ParseUint(m[3], 16, 32)
		// As ipsecd's: charon's in is ipsecd's out.
		s.charon[m[1]] = append(s.charon[m[1]], childSPIs{uint32(o), uint32(in)})
	}
	return s
}

// matches reports whether both sides hold one IKE SA and exactly the
// children names, one pair each, the same pair on both sides.
func (s childrenState) matches(names []string) bool {
	if s.ipsecdIKE != 1 || s.charonIKE != 1 || len(s.ipsecd) != len(names) || len(s.charon) != len(names) {
		return false
	}
	for _, n := range names {
		a, b := s.ipsecd[n], s.charon[n]
		if len(a) != 1 || len(b) != 1 || a[0] != b[0] {
			return false
		}
	}
	return true
}

// waitChildren waits up to 15 s for both sides to hold exactly names,
// matching, and cond of the state, and returns ipsecd's pairs by name.
func (r *ikeRig) waitChildren(t *testing.T, what string, names []string, cond func(map[string]childSPIs) bool) map[string]childSPIs {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		s := r.childrenState(t)
		if s.matches(names) {
			got := map[string]childSPIs{}
			for n, p := range s.ipsecd {
				got[n] = p[0]
			}
			if cond == nil || cond(got) {
				return got
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: want children %v on both sides; ipsecd %+v, charon %+v; charon:\n%s\nipsecd ike list:\n%s",
				what, names, s.ipsecd, s.charon, r.ch.ListSAs(), r.ikeList())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// pingChildren pings through each child of names from A, from its own
// inner address to B's.
func (r *ikeRig) pingChildren(t *testing.T, names []string) {
	t.Helper()
	for _, n := range names {
		i := slices.Index(childrenNames, n) + 1
		out, err := r.p.a.run("ping", "-n", "-q", "-c", "3", "-i", "0.2", "-w", "15", "-I", fmt.Sprintf("198.51.100.%d", i), fmt.Sprintf("203.0.113.%d", i))
		if m := pingReceived.FindStringSubmatch(out); err != nil || m == nil || m[1] == "0" {
			t.Fatalf("ping through child %s: %v\n%s\ncharon:\n%s\nipsecd ike list:\n%s", n, err, out, r.ch.ListSAs(), r.ikeList())
		}
	}
}

// TestIKECharonChildren: a connection with three children of different
// traffic selectors and ESP proposals, against charon, initiated by each
// side: all three come up under one IKE SA (the first in IKE_AUTH, the
// others by CREATE_CHILD_SA) and carry pings; each is rekeyed and
// deleted on its own, from either side (ipsecd ike rekey|terminate
// --child, swanctl --rekey|--terminate --child), while the others keep
// their SPIs and their traffic.
func TestIKECharonChildren(t *testing.T) {
	for _, initiator := range []string{"ipsecd", "charon"} {
		t.Run(initiator, func(t *testing.T) {
			charontest.Require(t)
			r := &ikeRig{p: newPair(t)}
			for i := range childrenNames {
				r.p.b.mustRun(t, "ip", "addr", "add", fmt.Sprintf("203.0.113.%d/32", i+1), "dev", "lo")
			}
			r.p.b.mustRun(t, "ip", "route", "add", "default", "via", underlayA4)
			r.ch = charontest.Start(t, r.p.b.name, "")
			r.ch.Load(charonChildrenConn().String())
			r.d = startDaemon(t, r.p.a, ipsecdChildrenConfig())

			if initiator == "ipsecd" {
				r.ipsecdIKE(t, "initiate", "--ike", "charon")
			} else {
				for _, n := range childrenNames {
					r.swanctl(t, "--initiate", "--child", n, "--timeout", "10")
				}
			}
			kids := r.waitChildren(t, initiator+" initiating", childrenNames, nil)
			r.pingChildren(t, childrenNames)

			same := func(names ...string) func(map[string]childSPIs) bool {
				before := kids
				return func(got map[string]childSPIs) bool {
					for _, n := range childrenNames {
						if _, ok := got[n]; !ok {
							continue
						}
						if slices.Contains(names, n) == (got[n] == before[n]) {
							return false
						}
					}
					return true
				}
			}
			for _, step := range []struct {
				what   string
				do     func()
				left   []string
				rekeys string
			}{
				{"ipsecd rekeying two", func() { r.ipsecdIKE(t, "rekey", "--child", "two") }, childrenNames, "two"},
				{"charon rekeying three", func() { r.swanctl(t, "--rekey", "--child", "three") }, childrenNames, "three"},
				{"ipsecd terminating one", func() { r.ipsecdIKE(t, "terminate", "--child", "one") }, []string{"two", "three"}, ""},
				{"charon terminating two", func() { r.swanctl(t, "--terminate", "--child", "two", "--timeout", "10") }, []string{"three"}, ""},
				{"ipsecd initiating one again", func() { r.ipsecdIKE(t, "initiate", "--child", "one") }, []string{"one", "three"}, "one"},
				{"charon initiating two again", func() { r.swanctl(t, "--initiate", "--child", "two", "--timeout", "10") }, childrenNames, "two"},
			} {
				step.do()
				// The child named changed its SPIs (or came); the
				// others kept theirs.
				kids = r.waitChildren(t, step.what, step.left, same(step.rekeys))
				r.pingChildren(t, step.left)
				t.Logf("%s: %d children up, their pings answered", step.what, len(step.left))
			}
		})
	}
}
