package eapradius

import (
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/ike/eap"
	"github.com/ipsecd/ipsecd/internal/radiustest"
)

// converse runs a conversation to the end: an error unless both sides
// succeeded.
func converse(cv *Conversation, peer *eap.Client) error {
	st, pst, perr, err := exchange(cv, peer)
	if err == nil && (st.Status != eap.Succeeded || pst != eap.Succeeded) {
		err = fmt.Errorf("gateway %v (%v), peer %v (%v)", st.Status, st.Err, pst, perr)
	}
	return err
}

// TestFreeRADIUSSQLPool: two gateways (two clients, NAS-Identifier gw1
// and gw2, NAS-IP-Address 198.51.100.1 and .2) authenticate 100 users
// with EAP-MSCHAPv2 at once, 50 each, against one FreeRADIUS whose
// sqlippool leases Framed-IP-Address from one SQLite pool of 10.9.0.0/25
// keyed by User-Name: 100 distinct addresses. A user whose session
// stops on gw1 (Accounting-Stop) and who comes back on gw2 gets the same
// address again (the lease is the user's), and the address the Stop
// released goes to nobody else meanwhile. gw1's Accounting-On (a
// restart) releases the leases it held, not gw2's.
func TestFreeRADIUSSQLPool(t *testing.T) {
	const n = 100
	var users []radiustest.User
	for i := range n + 1 {
		users = append(users, radiustest.User{Name: fmt.Sprintf("user%03d", i), Password: fmt.Sprintf("pw-%d", i)})
	}
	fr := radiustest.Start(t, radiustest.Options{Users: users, IPPool: &radiustest.IPPool{Name: "ra", Prefix: netip.MustParsePrefix("10.9.0.0/25"), Key: "%{User-Name}"}})
	var gws [2]*Client
	var peers [2]Peer
	for i := range gws {
		gws[i] = testClient(t, Config{NASIdentifier: fmt.Sprintf("gw%d", i+1), Servers: []Server{{Address: fr.Auth, AcctAddress: fr.Acct, Secret: []byte(fr.Secret)}}})
		peers[i] = Peer{Calling: netip.MustParseAddrPort("192.0.2.10:4500"), Called: netip.AddrPortFrom(netip.AddrFrom4([4]byte{198, 51, 100, byte(i + 1)}), 4500)}
	}
	addrs := make([]netip.Addr, n)
	errs := make([]error, n)
	start := time.Now()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			p := peers[i%2]
			p.NASPort = uint32(i + 1)
			cv := gws[i%2].NewConversation(p)
			if errs[i] = converse(cv, eap.NewClient(eap.ClientConfig{Identity: users[i].Name, Secret: []byte(users[i].Password)})); errs[i] == nil {
				addrs[i] = cv.Accept().FramedIP
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	seen := map[netip.Addr]string{}
	for i, a := range addrs {
		if errs[i] != nil {
			t.Fatalf("%s: %v", users[i].Name, errs[i])
		}
		if !netip.MustParsePrefix("10.9.0.0/25").Contains(a) {
			t.Fatalf("%s: Framed-IP-Address %v; want one of the pool", users[i].Name, a)
		}
		if other, ok := seen[a]; ok {
			t.Fatalf("%v given to %s and %s", a, other, users[i].Name)
		}
		seen[a] = users[i].Name
	}
	if l := fr.Leases(t); len(l) != n || l[addrs[0]] != users[0].Name {
		t.Errorf("%d leases in the SQL pool, %v user000's %q; want %d", len(l), addrs[0], l[addrs[0]], n)
	}
	t.Logf("%d users through 2 gateways: %d distinct addresses in %v", n, len(seen), took)

	// user000 (on gw1) hangs up: its Stop releases the lease on gw1.
	acct := gws[0].NewAccounting()
	p := peers[0]
	p.NASPort = 1
	if err := acct.Start(Session{ID: "s0", UserName: users[0].Name, FramedIP: addrs[0], Peer: p}); err != nil {
		t.Fatal(err)
	}
	// Each request goes on its own: a Stop sent at once may overtake
	// the Start, whose lease renewal would then follow the release.
	for deadline := time.Now().Add(5 * time.Second); len(fr.Detail(t)) < 1; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no Start recorded in 5 s")
		}
	}
	if !acct.Stop("s0", Usage{}, CauseUserRequest) {
		t.Fatal("Stop: no such session")
	}
	// The Stop goes out in the background: wait for its release.
	deadline := time.Now().Add(5 * time.Second)
	for l := fr.Leases(t); len(l) != n-1 || l[addrs[0]] != ""; l = fr.Leases(t) {
		if time.Now().After(deadline) {
			t.Fatalf("5 s after user000's Stop: %d leases, %v user000's %q; want %d, released; accounting %v", len(l), addrs[0], l[addrs[0]], n-1, fr.Detail(t))
		}
		time.Sleep(20 * time.Millisecond)
	}
	// A newcomer gets one never leased (the pool gives the longest
	// free first).
	cv := gws[1].NewConversation(peers[1])
	if err := converse(cv, eap.NewClient(eap.ClientConfig{Identity: users[n].Name, Secret: []byte(users[n].Password)})); err != nil {
		t.Fatal(err)
	}
	if a := cv.Accept().FramedIP; !a.IsValid() || seen[a] != "" {
		t.Errorf("the newcomer got %v, held by %q; want a free address", a, seen[a])
	}
	// user000 comes back on gw2: the same address.
	cv = gws[1].NewConversation(peers[1])
	if err := converse(cv, eap.NewClient(eap.ClientConfig{Identity: users[0].Name, Secret: []byte(users[0].Password)})); err != nil {
		t.Fatal(err)
	}
	if a := cv.Accept().FramedIP; a != addrs[0] {
		t.Errorf("user000 on gw2 got %v; want its %v again", a, addrs[0])
	}
	if l := fr.Leases(t); len(l) != n+1 || l[addrs[0]] != users[0].Name {
		t.Errorf("then: %d leases, %v user000's %q; want %d", len(l), addrs[0], l[addrs[0]], n+1)
	}
	// gw1 restarts: its Accounting-On releases its 49 leases (NAS-Identifier
	// gw1), gw2's 52 stay.
	on := make(chan error, 1)
	gws[0].NewAccounting().On(func(err error) { on <- err })
	if err := <-on; err != nil {
		t.Fatalf("Accounting-On: %v", err)
	}
	l := fr.Leases(t)
	for i := 2; i < n; i += 2 {
		if l[addrs[i]] != "" {
			t.Errorf("after gw1's Accounting-On %v is still %s's", addrs[i], l[addrs[i]])
			break
		}
	}
	if len(l) != n/2+2 || l[addrs[0]] != users[0].Name {
		t.Errorf("after gw1's Accounting-On: %d leases, user000's %v %q; want %d, user000's kept (on gw2)", len(l), addrs[0], l[addrs[0]], n/2+2)
	}
}

// TestFreeRADIUSStockSQLPool: Debian's sqlippool queries as shipped key
// a lease by NAS-IP-Address, and a gateway's Accounting-On clears the
// leases of its NAS-IP-Address. Two gateways behind one address that
// clients reach (203.0.113.1, the Called-Station-Id of both), each with
// its nas_ip (198.51.100.1 and .2), lease 4 users' addresses, 2 each,
// and start their sessions; gw1's Accounting-On, carrying its nas_ip,
// releases its 2 leases and leaves gw2's. Before nas_ip, On carried no
// NAS-IP-Address and released nothing, and without it the sessions of
// both gateways name the same address.
func TestFreeRADIUSStockSQLPool(t *testing.T) {
	var users []radiustest.User
	for i := range 4 {
		users = append(users, radiustest.User{Name: fmt.Sprintf("user%d", i), Password: fmt.Sprintf("pw-%d", i)})
	}
	fr := radiustest.Start(t, radiustest.Options{Users: users, IPPool: &radiustest.IPPool{Name: "ra", Prefix: netip.MustParsePrefix("10.9.0.0/28"), Key: "%{NAS-Port}", Stock: true}})
	var gws [2]*Client
	var accts [2]*Accounting
	for i := range gws {
		gws[i] = testClient(t, Config{NASIdentifier: fmt.Sprintf("gw%d", i+1), NASIP: netip.AddrFrom4([4]byte{198, 51, 100, byte(i + 1)}),
			Servers: []Server{{Address: fr.Auth, AcctAddress: fr.Acct, Secret: []byte(fr.Secret)}}})
		accts[i] = gws[i].NewAccounting()
		t.Cleanup(accts[i].Close)
	}
	addrs := make([]netip.Addr, len(users))
	for i, u := range users {
		p := Peer{NASPort: uint32(i + 1), Calling: netip.AddrPortFrom(netip.AddrFrom4([4]byte{192, 0, 2, byte(10 + i)}), 4500), Called: netip.MustParseAddrPort("203.0.113.1:4500")}
		cv := gws[i%2].NewConversation(p)
		if err := converse(cv, eap.NewClient(eap.ClientConfig{Identity: u.Name, Secret: []byte(u.Password)})); err != nil {
			t.Fatalf("%s: %v", u.Name, err)
		}
		addrs[i] = cv.Accept().FramedIP
		if err := accts[i%2].Start(Session{ID: u.Name, UserName: u.Name, FramedIP: addrs[i], Peer: p}); err != nil {
			t.Fatal(err)
		}
	}
	waitRecords(t, fr, len(users))
	if l := fr.Leases(t); len(l) != len(users) {
		t.Fatalf("%d leases after %d logins: %v", len(l), len(users), l)
	}
	on := make(chan error, 1)
	gws[0].NewAccounting().On(func(err error) { on <- err })
	if err := <-on; err != nil {
		t.Fatalf("Accounting-On: %v", err)
	}
	recs := waitRecords(t, fr, len(users)+1)
	if r := recs[len(users)]; r["Acct-Status-Type"] != "Accounting-On" || r["NAS-IP-Address"] != "198.51.100.1" {
		t.Errorf("gw1's On: %s from NAS-IP-Address %q; want Accounting-On from 198.51.100.1", r["Acct-Status-Type"], r["NAS-IP-Address"])
	}
	for _, r := range recs[:len(users)] {
		if want := map[string]string{"user0": "198.51.100.1", "user2": "198.51.100.1", "user1": "198.51.100.2", "user3": "198.51.100.2"}[r["User-Name"]]; r["NAS-IP-Address"] != want {
			t.Errorf("%s's Start from NAS-IP-Address %q; want its gateway's nas_ip %s", r["User-Name"], r["NAS-IP-Address"], want)
		}
	}
	l := fr.Leases(t)
	for i, a := range addrs {
		if kept := l[a] != ""; kept != (i%2 == 1) {
			t.Errorf("after gw1's Accounting-On %s's %v leased %v; want %v (gw%d's)", users[i].Name, a, kept, i%2 == 1, i%2+1)
		}
	}
}
