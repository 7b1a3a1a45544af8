package dh

import (
	"crypto/mlkem"
	"errors"
)

// ML-KEM as an IKEv2 key exchange (draft-ietf-ipsecme-ikev2-mlkem §2):
// the initiator's KE data is the encapsulation key, the responder's the
// ciphertext, and the shared secret is the 32-byte shared key, used as
// g^ir is. The sizes are FIPS 203's; a KE payload of any other length is
// ErrBadPublic, which the exchange answers with INVALID_SYNTAX.
//
// A Private of a KEM takes its role from its first call:
//
//   - Public first: the initiator's. It generates a decapsulation key
//     and returns the encapsulation key; Shared then decapsulates the
//     responder's ciphertext.
//   - Shared first: the responder's. It encapsulates to the initiator's
//     encapsulation key and keeps the ciphertext, which Public then
//     returns.
//
// That is the order the engine calls a Diffie-Hellman Private in anyway
// (an initiator sends before it computes; a responder computes before
// it answers), so both kinds go through one type without the engine
// asking which it holds.

// KEM sizes (FIPS 203 §8, Table 3).
const (
	mlkem768EncapKeySize   = mlkem.EncapsulationKeySize768
	mlkem768CiphertextSize = mlkem.CiphertextSize768
	mlkem1024EncapKeySize  = mlkem.EncapsulationKeySize1024
	mlkem1024Ciphertext    = mlkem.CiphertextSize1024
)

// ErrRole means a KEM's Private was used out of its role: Shared twice,
// or Shared after its ciphertext went out.
var ErrRole = errors.New("dh: KEM used out of its role")

func isKEM(group uint16) bool { return group == MLKEM768 || group == MLKEM1024 }

// IsKEM reports whether group is a key encapsulation method, whose
// initiator and responder send different things (the encapsulation key
// and the ciphertext).
func IsKEM(group uint16) bool { return isKEM(group) }

// kem is one side of an ML-KEM exchange.
type kem struct {
	dk768  *mlkem.DecapsulationKey768  // initiator
	dk1024 *mlkem.DecapsulationKey1024 // initiator
	ct     []byte                      // responder: the ciphertext to send
	done   bool                        // the shared key was computed
	// encapsulate768 and encapsulate1024, when set, replace the
	// encapsulation's randomness for known-answer tests
	// (crypto/mlkem/mlkemtest).
	encapsulate768  func(*mlkem.EncapsulationKey768) (key, ct []byte, err error)
	encapsulate1024 func(*mlkem.EncapsulationKey1024) (key, ct []byte, err error)
}

// public returns the encapsulation key (generating the decapsulation
// key on the first call) or, for a responder, the ciphertext.
func (k *kem) public(group uint16) []byte {
	if k.ct != nil {
		return k.ct
	}
	if k.done {
		return nil
	}
	switch group {
	case MLKEM768:
		if k.dk768 == nil {
			dk, err := mlkem.GenerateKey768()
			if err != nil {
				return nil
			}
			k.dk768 = dk
		}
		return k.dk768.EncapsulationKey().Bytes()
	case MLKEM1024:
		if k.dk1024 == nil {
			dk, err := mlkem.GenerateKey1024()
			if err != nil {
				return nil
			}
			k.dk1024 = dk
		}
		return k.dk1024.EncapsulationKey().Bytes()
	}
	return nil
}

// shared decapsulates peer (initiator) or encapsulates to it
// (responder), once.
func (k *kem) shared(group uint16, peer []byte) ([]byte, error) {
	if k.done {
		return nil, ErrRole
	}
	k.done = true
	switch {
	case k.dk768 != nil:
		if len(peer) != mlkem768CiphertextSize {
			return nil, ErrBadPublic
		}
		return k.dk768.Decapsulate(peer)
	case k.dk1024 != nil:
		if len(peer) != mlkem1024Ciphertext {
			return nil, ErrBadPublic
		}
		return k.dk1024.Decapsulate(peer)
	case group == MLKEM768:
		if len(peer) != mlkem768EncapKeySize {
			return nil, ErrBadPublic
		}
		ek, err := mlkem.NewEncapsulationKey768(peer)
		if err != nil { // a coefficient not reduced mod q (FIPS 203 §7.2)
			return nil, ErrBadPublic
		}
		if k.encapsulate768 != nil {
			key, ct, err := k.encapsulate768(ek)
			k.ct = ct
			return key, err
		}
		key, ct := ek.Encapsulate()
		k.ct = ct
		return key, nil
	case group == MLKEM1024:
		if len(peer) != mlkem1024EncapKeySize {
			return nil, ErrBadPublic
		}
		ek, err := mlkem.NewEncapsulationKey1024(peer)
		if err != nil {
			return nil, ErrBadPublic
		}
		if k.encapsulate1024 != nil {
			key, ct, err := k.encapsulate1024(ek)
			k.ct = ct
			return key, err
		}
		key, ct := ek.Encapsulate()
		k.ct = ct
		return key, nil
	}
	return nil, ErrUnsupported
}

// clear drops the decapsulation key (crypto/mlkem keeps it where it
// cannot be zeroed from here) and the ciphertext. Clear of nil does
// nothing.
func (k *kem) clear() {
	if k == nil {
		return
	}
	k.dk768, k.dk1024, k.ct = nil, nil, nil
	k.done = true
}
