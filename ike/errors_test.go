package ike

import (
	"errors"
	"testing"
)

// TestStartErrors: a call that starts an exchange on an SA that cannot
// take it returns the sentinel that says why, and sends nothing.
func TestStartErrors(t *testing.T) {
	ci, cr := pairConfigs(t, []string{"aes128gcm16-prfsha256-x25519"}, []string{"aes128gcm16"})
	half, _, err := Initiate(ci, addrA, addrB, t0)
	if err != nil {
		t.Fatal(err)
	}
	ini, res := establishedSides(t, ci, cr, false)
	stranger := &Child{}
	check := func(what string, out []byte, err, want error) {
		t.Helper()
		if !errors.Is(err, want) || out != nil {
			t.Errorf("%s: %v, %d bytes; want %v and nothing to send", what, err, len(out), want)
		}
	}
	out, err := half.Ping(t0)
	check("Ping before IKE_AUTH", out, err, ErrNotEstablished)
	out, err = half.RekeyIKE(t0)
	check("RekeyIKE before IKE_AUTH", out, err, ErrNotEstablished)
	out, err = half.Delete(t0)
	check("Delete before IKE_AUTH", out, err, ErrNotEstablished)
	out, err = ini.RekeyChild(stranger, t0)
	check("RekeyChild of a child not the SA's", out, err, ErrNoChild)
	out, err = ini.DeleteChild(stranger, t0)
	check("DeleteChild of a child not the SA's", out, err, ErrNoChild)

	// Rekeyed: the responder's old SA, waiting for the initiator's
	// delete, refuses a rekey of its own and new children.
	req, err := ini.RekeyIKE(t0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := res.Handle(req, t0); err != nil {
		t.Fatal(err)
	}
	out, err = res.RekeyIKE(t0)
	check("RekeyIKE of a rekeyed SA", out, err, ErrRekeyed)
	out, err = res.CreateChild("", t0)
	check("CreateChild on a rekeyed SA", out, err, ErrRekeyed)
}
