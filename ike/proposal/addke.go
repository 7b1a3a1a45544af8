package proposal

import (
	"strconv"
	"strings"

	"github.com/ipsecd/ipsecd/ike/dh"
	"github.com/ipsecd/ipsecd/ike/message"
)

// Multiple key exchanges (RFC 9370 §2.2.1): transform types 6 to 12 are
// the Additional Key Exchanges 1 to 7, each holding key exchange methods
// of transform type 4's kind (an ML-KEM beside a classical group).
// swanctl writes them keN_METHOD: "aes256-sha384-x25519-ke1_mlkem768",
// and keN_none (transform ID 0) makes exchange N optional.

// MaxAddKE is the number of additional key exchanges a proposal can
// hold.
const MaxAddKE = 7

// addKEType returns the transform type of additional exchange n (1..7).
func addKEType(n int) message.TransformType {
	return message.TransADDKE1 + message.TransformType(n-1)
}

// AddKENumber returns n of an ADDKEn transform type (0 for another
// type).
func AddKENumber(t message.TransformType) int {
	if !t.IsAddKE() {
		return 0
	}
	return int(t-message.TransADDKE1) + 1
}

// lookupAddKE parses "keN_METHOD" and "keN_none".
func lookupAddKE(name string) (Alg, bool) {
	if len(name) < 5 || !strings.HasPrefix(name, "ke") || name[3] != '_' {
		return Alg{}, false
	}
	n, err := strconv.Atoi(name[2:3])
	if err != nil || n < 1 || n > MaxAddKE {
		return Alg{}, false
	}
	if name[4:] == "none" {
		return addKEOf(addKEType(n), dh.None)
	}
	for _, a := range algs {
		if a.Name == name[4:] && a.Type == message.TransDH {
			return addKEOf(addKEType(n), a.ID)
		}
	}
	if a, ok := aliases[name[4:]]; ok && a.Type == message.TransDH {
		return addKEOf(addKEType(n), a.ID)
	}
	return Alg{}, false
}

// addKEOf returns the Alg of method id (dh.None for NONE) as additional
// exchange type t, and false for a method ipsecd does not implement.
func addKEOf(t message.TransformType, id uint16) (Alg, bool) {
	prefix := "ke" + strconv.Itoa(AddKENumber(t)) + "_"
	if id == dh.None {
		return Alg{Name: prefix + "none", Type: t}, true
	}
	for _, a := range algs {
		if a.Type == message.TransDH && a.ID == id {
			return Alg{Name: prefix + a.Name, Type: t, ID: id}, true
		}
	}
	return Alg{}, false
}

// IsNone reports whether a is an additional exchange's NONE (keN_none).
func (a Alg) IsNone() bool { return a.Type.IsAddKE() && a.ID == dh.None }

// HasAddKE reports whether p names an additional key exchange other
// than NONE: an IKE SA from it may need IKE_INTERMEDIATE, a
// CREATE_CHILD_SA IKE_FOLLOWUP_KE.
func (p Proposal) HasAddKE() bool {
	for _, a := range p.Algs {
		if a.Type.IsAddKE() && !a.IsNone() {
			return true
		}
	}
	return false
}

// AddKEs returns the additional key exchanges a suite negotiated, in
// order (ADDKE1 first), without those that chose NONE: one
// IKE_INTERMEDIATE or IKE_FOLLOWUP_KE exchange each.
func (s Suite) AddKEs() []Alg {
	var out []Alg
	for _, a := range s.AddKE {
		if a.Name != "" && !a.IsNone() {
			out = append(out, a)
		}
	}
	return out
}

// swanNames are strongSwan's names of the key exchange methods, as
// swanctl --list-sas shows them (dh-group=CURVE_25519 ake1=ML_KEM_768).
var swanNames = map[uint16]string{
	dh.MODP1024: "MODP_1024", dh.MODP2048: "MODP_2048", dh.ECP256: "ECP_256", dh.ECP384: "ECP_384",
	dh.X25519: "CURVE_25519", dh.MLKEM768: "ML_KEM_768", dh.MLKEM1024: "ML_KEM_1024",
}

// KeyExchanges names the suite's key exchange methods as swanctl
// --list-sas does: "dh-group=CURVE_25519", then "ake1=ML_KEM_768" for
// each additional exchange that ran (NONE left out); nothing for a
// suite without key exchange (a child without PFS).
func (s Suite) KeyExchanges() []string {
	var out []string
	if s.DH.Name != "" {
		out = append(out, "dh-group="+swanNames[s.DH.ID])
	}
	for _, a := range s.AddKEs() {
		out = append(out, "ake"+strconv.Itoa(AddKENumber(a.Type))+"="+swanNames[a.ID])
	}
	return out
}
