//go:build linux

package ike

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestCharonInitialContact: INITIAL_CONTACT both ways with charon.
//
// charon as initiator sends it in its first IKE_AUTH (ike_auth.c,
// build_i) when the connection names the peer's id without wildcards, its
// unique policy is not never, and it holds no IKE SA between the two ids
// (ike_sa_manager's has_contact). Older charons also skipped it with
// unique = no; 5.9.8 sends it with swanctl's default, unique = no, as
// this test shows. We report it as EventInitialContact.
//
// charon as responder (process_r, then check_uniqueness with
// force_replace) destroys its other IKE SAs between the two ids when our
// IKE_AUTH carries it, even with unique = no: the SA of our previous life
// goes at once instead of after its liveness checks fail.
func TestCharonInitialContact(t *testing.T) {
	ch, d := charonPair(t)
	const ike, esp = "aes256-sha256-x25519", "aes128gcm16"
	cfg := peerConfig(t, ike, esp)
	// loadUnique loads the test connection with swanctl's unique =
	// unique ("" leaves charon's default, no).
	loadUnique := func(unique string) {
		conn := testConn(ike, esp)
		conn.Unique = unique
		ch.Load(conn.String())
	}
	// clear has charon forget every IKE SA, without waiting for us.
	clear := func(t *testing.T) {
		for i := 0; i < 50; i++ {
			list, _ := ch.Swanctl("--list-sas")
			if !strings.Contains(list, "test:") {
				return
			}
			ch.Swanctl("--terminate", "--ike", "test", "--force", "--timeout", "1")
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatal("charon keeps IKE SAs after --terminate --force")
	}

	for _, tc := range []struct {
		unique string
		want   bool
	}{{"", true}, {"never", false}} {
		t.Run("charon initiates with unique="+tc.unique, func(t *testing.T) {
			loadUnique(tc.unique)
			clear(t)
			d.establish(t, ch, cfg, "responder")
			var got []Event
			for _, e := range d.events {
				if e.Kind == EventInitialContact {
					got = append(got, e)
				}
			}
			if tc.want && (len(got) != 1 || got[0].Peer.String() != "a.test") || !tc.want && len(got) != 0 {
				t.Fatalf("EventInitialContact %+v, want one naming a.test: %t", got, tc.want)
			}
		})
	}

	// We "restart": the first IKE SA is forgotten without a delete, and a
	// second one comes up; charon drops the first only when the second's
	// IKE_AUTH carries INITIAL_CONTACT.
	for _, tc := range []struct {
		name      string
		contact   func(l, r Identity) bool
		remaining int // ESTABLISHED IKE SAs charon lists
	}{
		{"we restart without INITIAL_CONTACT", nil, 2},
		{"we restart with INITIAL_CONTACT", func(l, r Identity) bool { return false }, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			loadUnique("")
			clear(t)
			d.establish(t, ch, cfg, "initiator")
			first, _ := d.sa.SPIs()
			second := *cfg
			var asked string
			if tc.contact != nil {
				second.HasContact = func(l, r Identity) bool { asked = l.String() + " " + r.String(); return tc.contact(l, r) }
			}
			d.establish(t, ch, &second, "initiator")
			if tc.contact != nil && asked != "b.test a.test" {
				t.Errorf("HasContact asked %q, want \"b.test a.test\"", asked)
			}
			ispi, _ := d.sa.SPIs()
			var list string
			for i := 0; i < 30; i++ {
				list, _ = ch.Swanctl("--list-sas")
				if strings.Count(list, "ESTABLISHED") == tc.remaining {
					break
				}
				stop := time.Now().Add(100 * time.Millisecond)
				d.serve(func() bool { return time.Now().After(stop) })
			}
			if n := strings.Count(list, "ESTABLISHED"); n != tc.remaining || !strings.Contains(list, fmt.Sprintf("%016x_i", ispi)) {
				t.Fatalf("charon lists %d IKE SAs, want %d with ours %016x_i (the first was %016x_i):\n%s", n, tc.remaining, ispi, first, list)
			}
			if tc.remaining == 1 && strings.Contains(list, fmt.Sprintf("%016x_i", first)) {
				t.Fatalf("charon kept the stale IKE SA %016x_i:\n%s", first, list)
			}
		})
	}
}
