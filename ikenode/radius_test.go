package ikenode

import (
	"fmt"
	"testing"

	"github.com/ipsecd/ipsecd/eapradius"
	"github.com/ipsecd/ipsecd/ike/eap"
	"github.com/ipsecd/ipsecd/ike/message"
)

// TestRelayFailure: each way a relayed login fails has its reason, the
// errors built as eapradius builds them (its own tests check that it
// does: TestMismatchLoggedOnce, TestFreeRADIUSWrongSecret,
// TestFreeRADIUSRejectReplyMessage); a mismatch wraps ErrNoAnswer too
// and must not read as a timeout.
func TestRelayFailure(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want string
	}{
		{&eap.AuthError{Identity: "alice", Method: message.EAPMSCHAPv2, Reason: "the RADIUS server sent Access-Reject", Failure: eap.FailureRejected}, "radius_reject"},
		{fmt.Errorf("%w (asked [a b])", eapradius.ErrNoAnswer), "radius_timeout"},
		{fmt.Errorf("%w (asked [a]), %w of an answer", eapradius.ErrNoAnswer, eapradius.ErrMismatch), "radius_bad_authenticator"},
		{fmt.Errorf("%w: Access-Challenge without an EAP request", eapradius.ErrMalformed), "radius_malformed"},
		{fmt.Errorf("%w: not an EAP response (3 bytes)", eap.ErrProtocol), "protocol"},
		{eapradius.ErrClosed, "other"},
	} {
		if got := relayFailure(tt.err); got != tt.want {
			t.Errorf("relayFailure(%v) = %s; want %s", tt.err, got, tt.want)
		}
	}
}
