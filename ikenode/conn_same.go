package ikenode

import (
	"crypto"
	"crypto/subtle"
	"crypto/x509"
	"reflect"
	"slices"

	"github.com/ipsecd/ipsecd/config"
)

// same reports whether fresh, a connection a reload made, is old
// unchanged, so that old's IKE SAs stay: the ike: settings it was made
// with, every setting of the connection and its children alike but where
// they stand in the file, the PSK, the certificates byte for byte and
// the private key equal. Compared field by field rather than through a
// formatted text, so that a reload of n connections is O(n), not a
// printf of each (a vici load-conn reloads them all).
func (old *conn) same(fresh *conn) bool {
	if old.ike != fresh.ike || subtle.ConstantTimeCompare(old.ec.PSK, fresh.ec.PSK) != 1 ||
		!sameEndpoint(&old.cfg.Local, &fresh.cfg.Local) || !sameEndpoint(&old.cfg.Remote, &fresh.cfg.Remote) ||
		len(old.cfg.Children) != len(fresh.cfg.Children) {
		return false
	}
	for i := range old.cfg.Children {
		a, b := old.cfg.Children[i], fresh.cfg.Children[i]
		a.Line, b.Line = 0, 0
		if !reflect.DeepEqual(a, b) {
			return false
		}
	}
	a, b := old.cfg, fresh.cfg
	for _, c := range []*config.Connection{&a, &b} {
		// Compared above; the file's PSK is zeroed when its config goes
		// (config.WipeKeys), the engine's copy (ec.PSK) is not.
		c.Line, c.Children, c.PSK = 0, nil, nil
		c.Local.Certs, c.Local.PrivateKey, c.Local.CACertList = nil, nil, nil
		c.Remote.Certs, c.Remote.PrivateKey, c.Remote.CACertList = nil, nil, nil
	}
	return reflect.DeepEqual(a, b)
}

// engineSettings is the ike: section as it shapes a connection: without
// the daemon's own limits, which take effect on reload without touching
// the connections (Reload sets them).
func engineSettings(i config.IKE) config.IKE {
	i.BlockThreshold, i.InitLimitHalfOpen, i.MaxIKESAsPerPeer = 0, 0, 0
	return i
}

func sameEndpoint(a, b *config.Endpoint) bool {
	return slices.EqualFunc(a.Certs, b.Certs, (*x509.Certificate).Equal) &&
		slices.EqualFunc(a.CACertList, b.CACertList, (*x509.Certificate).Equal) && sameKey(a.PrivateKey, b.PrivateKey)
}

// sameKey: the private keys of crypto/ecdsa, rsa and ed25519 have Equal.
func sameKey(a, b crypto.Signer) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	k, ok := a.(interface{ Equal(crypto.PrivateKey) bool })
	return ok && k.Equal(b)
}
