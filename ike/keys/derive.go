package keys

import (
	"encoding/binary"

	"github.com/ipsecd/ipsecd/ike/proposal"
)

// IKEKeys are the keys of an IKE SA (RFC 7296 §2.14). AI and AR are empty
// with an AEAD; EI and ER then end in the 4-byte salt.
type IKEKeys struct {
	D, AI, AR, EI, ER, PI, PR []byte
}

// Clear zeroes every key.
func (k *IKEKeys) Clear() {
	for _, b := range [][]byte{k.D, k.AI, k.AR, k.EI, k.ER, k.PI, k.PR} {
		clear(b)
	}
}

// SKEYSEED returns prf(Ni | Nr, g^ir) for a new IKE SA.
func SKEYSEED(prf PRF, ni, nr, gir []byte) []byte {
	key := append(append([]byte(nil), ni...), nr...)
	defer clear(key)
	return prf.Sum(key, gir)
}

// RekeySKEYSEED returns prf(SK_d (old), g^ir (new) | Ni | Nr [| SK(1) |
// ... | SK(n)]) for an IKE SA that replaces the one whose SK_d is given
// (RFC 7296 §2.18), with the PRF of the old SA; addKE are the secrets of
// RFC 9370's additional key exchanges (IKE_FOLLOWUP_KE), after the
// nonces.
func RekeySKEYSEED(oldPRF PRF, oldD, gir, ni, nr []byte, addKE ...[]byte) []byte {
	return oldPRF.Sum(oldD, append([][]byte{gir, ni, nr}, addKE...)...)
}

// DeriveIKE splits prf+(SKEYSEED, Ni | Nr | SPIi | SPIr) into the seven
// keys, with the sizes suite s gives them.
func DeriveIKE(s proposal.Suite, skeyseed, ni, nr []byte, spii, spir uint64) IKEKeys {
	prf := NewPRF(s.PRF)
	integ := 0
	if s.Integ.Name != "" {
		integ = s.Integ.KeySize()
	}
	enc := s.Encr.KeySize()
	seed := append(append([]byte(nil), ni...), nr...)
	seed = binary.BigEndian.AppendUint64(seed, spii)
	seed = binary.BigEndian.AppendUint64(seed, spir)
	n := 3*prf.Size() + 2*integ + 2*enc
	km := prf.Plus(skeyseed, seed, n)
	var k IKEKeys
	take := func(l int) []byte {
		b := km[:l:l]
		km = km[l:]
		return b
	}
	k.D = take(prf.Size())
	k.AI, k.AR = take(integ), take(integ)
	k.EI, k.ER = take(enc), take(enc)
	k.PI, k.PR = take(prf.Size()), take(prf.Size())
	return k
}

// ESPKeys are the keys of one direction of an ESP SA, as ipsecd's
// sa.Algorithm.Key takes them: Enc is the cipher key (for an AEAD, the
// key followed by the 4-byte salt, RFC 4106 §8.1 and RFC 7634 §2), Integ
// the HMAC key (empty for an AEAD).
type ESPKeys struct {
	Enc, Integ []byte
}

// ChildKeys returns the keys of a CHILD_SA pair from
// KEYMAT = prf+(SK_d, [g^ir (new) |] Ni | Nr [| SK(1) | ... | SK(n)])
// (RFC 7296 §2.17; RFC 9370 §2.2.4 appends the secrets of the
// additional key exchanges, addKE, after the nonces): first the
// keys of the SA that carries data from the initiator to the responder,
// then the other; within one, the encryption key before the integrity
// key. gir is nil without PFS. Ni and Nr are those of the exchange that
// created the child (IKE_SA_INIT's for the first child).
func ChildKeys(prf PRF, skd, gir, ni, nr []byte, esp proposal.Suite, addKE ...[]byte) (initToResp, respToInit ESPKeys) {
	enc := esp.Encr.KeySize()
	integ := 0
	if esp.Integ.Name != "" {
		integ = esp.Integ.KeySize()
	}
	seed := append(append(append([]byte(nil), gir...), ni...), nr...)
	for _, k := range addKE {
		seed = append(seed, k...)
	}
	defer clear(seed)
	km := prf.Plus(skd, seed, 2*(enc+integ))
	initToResp = ESPKeys{Enc: km[:enc:enc], Integ: km[enc : enc+integ : enc+integ]}
	km = km[enc+integ:]
	respToInit = ESPKeys{Enc: km[:enc:enc], Integ: km[enc : enc+integ : enc+integ]}
	return
}

// keyPad is the constant of RFC 7296 §2.15.
const keyPad = "Key Pad for IKEv2"

// PSKAuth returns the AUTH data of a pre-shared-key signer (RFC 7296
// §2.15): prf(prf(PSK, "Key Pad for IKEv2"), message | nonce |
// prf(SK_p, ID)). For the initiator: its IKE_SA_INIT request, Nr, SK_pi
// and its IDi body; for the responder: its IKE_SA_INIT response, Ni, SK_pr
// and its IDr body. The verifier computes the same with the peer's values
// and compares with hmac.Equal. When IKE_INTERMEDIATE exchanges ran,
// intAuth is RFC 9242's IntAuth (§3.3.2), which the signed octets end
// in.
func PSKAuth(prf PRF, psk, initMessage, peerNonce, skp, idBody []byte, intAuth ...[]byte) []byte {
	k := prf.Sum(psk, []byte(keyPad))
	defer clear(k)
	return prf.Sum(k, SignedOctets(prf, initMessage, peerNonce, skp, idBody, intAuth...))
}

// SignedOctets returns what a signature in AUTH covers (RFC 7296 §2.15,
// RFC 9242 §3.3.2): message | nonce | prf(SK_p, ID) [| IntAuth], with
// the same arguments as PSKAuth.
func SignedOctets(prf PRF, initMessage, peerNonce, skp, idBody []byte, intAuth ...[]byte) []byte {
	out := make([]byte, 0, len(initMessage)+len(peerNonce)+prf.Size())
	out = append(append(out, initMessage...), peerNonce...)
	out = append(out, prf.Sum(skp, idBody)...)
	for _, b := range intAuth {
		out = append(out, b...)
	}
	return out
}
