//go:build linux

package ike

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/ipsecd/ipsecd/internal/charontest"
)

// TestSidCharonPQ negotiates post-quantum IKE SAs with strongSwan 6.1's
// charon (Debian sid's, in the chroot scripts/sid-strongswan.sh builds),
// with us as initiator and as responder: ML-KEM as an additional key
// exchange in IKE_INTERMEDIATE (RFC 9370, RFC 9242, fragmented by RFC
// 7383 both ways), two of them, and ML-KEM alone in IKE_SA_INIT. After
// IKE_AUTH the IKE keys we derived must equal the last ones charon
// logged (the key update after each exchange) and the child's too;
// charon must list our SAs with the exchanges (ake1=ML_KEM_768); the
// child is rekeyed from both sides (PFS with the ESP proposal's group,
// ML-KEM alone included, and additional key exchanges in IKE_FOLLOWUP_KE),
// and so is the IKE SA, with its additional exchanges run again in
// IKE_FOLLOWUP_KE.
func TestSidCharonPQ(t *testing.T) {
	charontest.RequireSid(t)
	ch, d, _, _ := charonNamespacesStart(t, charontest.StartSid, "")
	for _, tc := range []struct {
		ike, esp string
		raw      []string // what swanctl --list-sas --raw shows of the IKE SA's exchanges
	}{
		{"aes256-sha384-x25519-ke1_mlkem768", "aes256gcm16-x25519-ke1_mlkem768", []string{"dh-group=CURVE_25519", "ake1=ML_KEM_768"}},
		{"aes256-sha384-ecp384-ke1_mlkem1024", "aes256gcm16-ecp384-ke1_mlkem1024-ke2_mlkem768", []string{"dh-group=ECP_384", "ake1=ML_KEM_1024"}},
		{"aes256gcm16-prfsha384-x25519-ke1_mlkem768-ke2_mlkem1024", "aes256gcm16", []string{"dh-group=CURVE_25519", "ake1=ML_KEM_768", "ake2=ML_KEM_1024"}},
		{"aes256-sha384-mlkem768", "aes256gcm16-mlkem768", []string{"dh-group=ML_KEM_768"}},
		{"aes256-sha384-mlkem1024", "aes256gcm16", []string{"dh-group=ML_KEM_1024"}},
	} {
		loadTest(ch, tc.ike, tc.esp)
		cfg := peerConfig(t, tc.ike, tc.esp)
		for _, role := range []string{"initiator", "responder"} {
			t.Run(tc.ike+"/"+role, func(t *testing.T) {
				from := ch.LogSize()
				d.establish(t, ch, cfg, role)
				d.listed(t, ch)
				ei, er := ch.Keys(from, "Sk_ei secret"), ch.Keys(from, "Sk_er secret")
				if want := 1 + len(tc.raw) - 1; len(ei) != want {
					t.Errorf("charon derived %d key sets, want %d (one per key exchange)", len(ei), want)
				}
				if len(ei) == 0 || string(ei[len(ei)-1]) != string(d.sa.Keys().EI) || string(er[len(er)-1]) != string(d.sa.Keys().ER) {
					t.Fatalf("our IKE keys are not charon's last ones")
				}
				checkChildKeys(t, ch, from, d.sa.Children()[0])
				if got, want := strings.Join(d.sa.Suite().KeyExchanges(), " "), strings.Join(tc.raw, " "); got != want {
					t.Errorf("our key exchanges %q, want %q", got, want)
				}
				raw, _ := ch.Swanctl("--list-sas", "--raw")
				for _, w := range tc.raw {
					if !strings.Contains(raw, w) {
						t.Errorf("charon's --list-sas --raw lacks %s:\n%s", w, raw)
					}
				}
				d.rekeyChild(t, ch, false)
				d.rekeyChild(t, ch, true)
				d.listed(t, ch)
				d.rekeyIKEBothWays(t, ch)
				if got, want := strings.Join(d.sa.Suite().KeyExchanges(), " "), strings.Join(tc.raw, " "); got != want {
					t.Errorf("after the IKE rekeys: key exchanges %q, want %q", got, want)
				}
				d.while(t, ch, func() bool { return d.sa.State() == StateDeleted }, "--terminate", "--ike", "test", "--timeout", "10")
			})
		}
	}
}

// TestSidCharonPQRefusals: what cannot be negotiated fails cleanly on
// both sides: charon requires ML-KEM and we offer none, and the other
// way round: NO_PROPOSAL_CHOSEN in IKE_SA_INIT, in both roles.
func TestSidCharonPQRefusals(t *testing.T) {
	charontest.RequireSid(t)
	ch, d, _, _ := charonNamespacesStart(t, charontest.StartSid, "")
	for _, tc := range []struct{ theirs, ours string }{
		{"aes256-sha384-x25519-ke1_mlkem768", "aes256-sha384-x25519"},
		{"aes256-sha384-x25519", "aes256-sha384-x25519-ke1_mlkem768"},
	} {
		loadTest(ch, tc.theirs, "aes256gcm16")
		cfg := peerConfig(t, tc.ours, "aes256gcm16")
		for _, role := range []string{"initiator", "responder"} {
			t.Run(tc.theirs+"/"+tc.ours+"/"+role, func(t *testing.T) {
				d.fail(t, ch, cfg, role, func() bool {
					return slices.ContainsFunc(d.errs, func(err error) bool { return errors.Is(err, ErrNoProposalChosen) })
				})
			})
		}
	}
}

// TestCharonOptionalMLKEM: against strongSwan 5.9.8, which knows no
// additional key exchange, a proposal that makes ML-KEM optional
// (ke1_mlkem768-ke1_none) connects in both roles with x25519 alone: as
// initiator we send it twice, with and without transform type 6, and
// 5.9.8, which refuses a proposal with an unknown transform type,
// chooses the second; as responder we take 5.9.8's x25519 proposal,
// whose missing type 6 matches our NONE. The child rekeys with x25519 PFS.
func TestCharonOptionalMLKEM(t *testing.T) {
	ch, d := charonPair(t)
	loadTest(ch, "aes256-sha384-x25519", "aes256gcm16-x25519")
	cfg := peerConfig(t, "aes256-sha384-x25519-ke1_mlkem768-ke1_none", "aes256gcm16-x25519")
	for _, role := range []string{"initiator", "responder"} {
		t.Run(role, func(t *testing.T) {
			d.establishChecked(t, ch, cfg, role)
			if got := strings.Join(d.sa.Suite().KeyExchanges(), " "); got != "dh-group=CURVE_25519" {
				t.Errorf("key exchanges %q, want x25519 alone", got)
			}
			d.rekeyChild(t, ch, false)
			d.rekeyChild(t, ch, true)
			d.rekeyIKEBothWays(t, ch)
			d.while(t, ch, func() bool { return d.sa.State() == StateDeleted }, "--terminate", "--ike", "test", "--timeout", "10")
		})
	}
}

// TestCharonRequiredMLKEM: ML-KEM required (x25519-ke1_mlkem768, no
// ke1_none) against strongSwan 5.9.8, which has none, fails cleanly in
// both roles with NO_PROPOSAL_CHOSEN: as initiator 5.9.8 refuses our
// only proposal (it names transform type 6), as responder we refuse its
// x25519 without the additional exchange; swanctl's initiate fails too.
func TestCharonRequiredMLKEM(t *testing.T) {
	ch, d := charonPair(t)
	loadTest(ch, "aes256-sha384-x25519", "aes256gcm16")
	cfg := peerConfig(t, "aes256-sha384-x25519-ke1_mlkem768", "aes256gcm16")
	for _, role := range []string{"initiator", "responder"} {
		t.Run(role, func(t *testing.T) {
			d.fail(t, ch, cfg, role, func() bool {
				return slices.ContainsFunc(d.errs, func(err error) bool { return errors.Is(err, ErrNoProposalChosen) })
			})
			if list := ch.ListSAs(); strings.Contains(list, "ESTABLISHED") {
				t.Errorf("charon lists an SA:\n%s", list)
			}
		})
	}
}
