package profile

import (
	"testing"

	"github.com/ipsecd/ipsecd/ike/message"
	"github.com/ipsecd/ipsecd/ike/proposal"
)

// TestPick: the suite a single-suite client is given is the first of the
// proposals it can make whole, with each kind's first algorithm it
// knows, the PRF of the integrity's hash, and a proposal's group only
// when it has one.
func TestPick(t *testing.T) {
	for _, tc := range []struct {
		proto     message.ProtocolID
		proposals []string
		ok        names
		want      string // encr integ prf dh, or the error
	}{
		{message.ProtoIKE, []string{"aes256-sha256-x25519"}, appleNames, "aes256 sha256 prfsha256 x25519"},
		{message.ProtoIKE, []string{"aes256-sha256-x25519"}, windowsIKE, "error"},
		{message.ProtoIKE, []string{"aes256-sha256-x25519", "aes128gcm16-prfsha384-prfsha256-ecp384"}, windowsIKE, "aes128gcm16  prfsha384 ecp384"},
		// sha512 is first, but Windows has it neither as integrity nor PRF.
		{message.ProtoIKE, []string{"aes256-sha512-sha256-modp2048"}, windowsIKE, "aes256 sha256 prfsha256 modp2048"},
		// An integrity algorithm whose PRF the proposal lacks is skipped.
		{message.ProtoIKE, []string{"aes256-sha384-sha256-prfsha256-modp2048"}, appleNames, "aes256 sha256 prfsha256 modp2048"},
		{message.ProtoESP, []string{"aes256gcm16"}, windowsESP, "aes256gcm16   "},
		{message.ProtoESP, []string{"aes256gcm16-x25519", "aes128-sha256-ecp256-modp2048"}, windowsESP, "aes128 sha256  ecp256"},
		{message.ProtoESP, []string{"aes128-sha256-esn"}, appleNames, "error"},
	} {
		ps, err := proposal.ParseList(tc.proto, tc.proposals)
		if err != nil {
			t.Fatal(err)
		}
		s, err := pick(ps, "proposals", "test", tc.ok)
		got := "error"
		if err == nil {
			got = s.encr.Name + " " + s.integ.Name + " " + s.prf.Name + " " + s.dh.Name
		}
		if got != tc.want {
			t.Errorf("%v: got %q (%v), want %q", tc.proposals, got, err, tc.want)
		}
	}
}
