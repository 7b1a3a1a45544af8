package ikenode

import (
	"errors"
	"testing"

	"github.com/ipsecd/ipsecd/control"
)

// TestControlErrorCodes: the control requests' errors carry the control
// socket's codes themselves (ErrNotFound is a control.ErrNotFound,
// ErrState a control.ErrInvalid), with the text the client has always
// shown, so the daemon passes them on as they are.
func TestControlErrorCodes(t *testing.T) {
	a, _ := pairUp(t, sideOpts{}, sideOpts{})
	for _, tt := range []struct {
		name      string
		err       error
		own, code error
		text      string
	}{
		{"rekey of an unknown connection", a.m.Rekey(Target{IKE: "nope"}), ErrNotFound, control.ErrNotFound,
			`not found: no such connection or child: connection "nope"`},
		{"initiate of an unknown child", a.m.Initiate(Target{Child: "nope"}), ErrNotFound, control.ErrNotFound,
			`not found: no such connection or child: child "nope"`},
		{"terminate of a connection that is not up", a.m.Terminate(Target{IKE: "peer"}), ErrState, control.ErrInvalid,
			`invalid request: not possible in this state: peer is not up`},
		{"rekey of a child that is not up", a.m.Rekey(Target{Child: "net"}), ErrState, control.ErrInvalid,
			`invalid request: not possible in this state: peer is not up`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if !errors.Is(tt.err, tt.own) || !errors.Is(tt.err, tt.code) || tt.err.Error() != tt.text {
				t.Errorf("got %v, want %q, matching %v and %v", tt.err, tt.text, tt.own, tt.code)
			}
		})
	}
}
