package config

import (
	"crypto"
	"crypto/x509"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/ipsecd/ipsecd/ike"
	"github.com/ipsecd/ipsecd/ike/eap"
)

// endpoint decodes local: or remote: (swanctl's local/remote sections)
// with the keys known on that side, and reads the certificate and key
// files they name.
func (d *decoder) endpoint(n *yaml.Node, field string, ep *Endpoint, known []string) {
	m, ok := d.fields(n, field, known...)
	if !ok {
		return
	}
	ep.Auth = ike.AuthPSK
	local := slices.Contains(known, "key")
	if v := m["auth"]; v != nil {
		// eap: a gateway that proves itself by EAP alone (local), or the
		// client that accepts it (remote); RFC 5998.
		auths := []string{"psk", "pubkey", string(ike.AuthEAPMSCHAPv2), string(ike.AuthEAPMD5), string(ike.AuthEAPTLS), string(ike.AuthEAPOnly)}
		if !local {
			auths = append(auths, string(ike.AuthEAPRADIUS))
		} else if s, ok := d.str(v, join(field, "auth")); ok && s == string(ike.AuthEAPRADIUS) {
			d.errorf(v, join(field, "auth"), "eap-radius is a gateway's (remote: {auth: eap-radius}); a client runs eap-mschapv2, eap-md5 or eap-tls")
			return
		}
		if a, ok := d.oneOf(v, join(field, "auth"), auths...); ok {
			ep.Auth = ike.AuthClass(a)
		}
	}
	if v := m["eap_id"]; v != nil {
		if s, ok := d.str(v, join(field, "eap_id")); ok {
			switch {
			case !ep.Auth.IsEAP():
				d.errorf(v, join(field, "eap_id"), "only with auth: eap-mschapv2, eap-md5, eap-tls or eap-radius")
			case len(s) > eap.MaxIdentity:
				d.errorf(v, join(field, "eap_id"), "%d bytes; an EAP identity has at most %d", len(s), eap.MaxIdentity)
			case s != "%any":
				ep.EAPID = s
			}
		}
	}
	if v := m["id"]; v != nil {
		var ok bool
		if ep.ID, ok = d.str(v, join(field, "id")); ok {
			id, err := ike.ParseIdentity(ep.ID)
			if err != nil {
				d.errorf(v, join(field, "id"), "%s", strings.TrimPrefix(err.Error(), ike.ErrBadIdentity.Error()+": "))
			}
			ep.Identity = id
		}
	}
	switch {
	case ep.ID == "" && ep.Auth == ike.AuthPSK:
		d.errorf(n, join(field, "id"), "missing; auth psk needs ids on both sides, to find the secret")
	case ep.ID == "" && local && ep.Auth == ike.AuthEAPOnly:
		d.errorf(n, join(field, "id"), "missing; auth eap needs our id: the IDr that the last AUTH, keyed by the EAP method, proves")
	case ep.ID == "" && local && ep.Auth.IsEAP() && ep.EAPID == "":
		d.errorf(n, join(field, "id"), "missing; auth %s needs an id (our IDi) or an eap_id, which is then the id too", ep.Auth)
	case ep.ID == "" && local && ep.Auth.IsEAP():
		// strongSwan's IDi would be our address; the EAP identity
		// names us better and is known here.
		id, err := ike.ParseIdentity(ep.EAPID)
		if err != nil {
			d.errorf(m["eap_id"], join(field, "eap_id"), "as our id: %s", strings.TrimPrefix(err.Error(), ike.ErrBadIdentity.Error()+": "))
		}
		ep.ID, ep.Identity = ep.EAPID, id
	}
	path := func(v *yaml.Node, f string) (string, bool) {
		s, ok := d.str(v, f)
		switch {
		case !ok:
			return "", false
		case s == "":
			d.errorf(v, f, "empty path")
			return "", false
		case filepath.IsAbs(s):
			return s, true
		}
		return filepath.Join(d.dir, s), true
	}
	if v := m["cert"]; v != nil {
		if p, ok := path(v, join(field, "cert")); ok {
			ep.Cert = p
			ep.Certs = d.certFile(v, join(field, "cert"), p)
		}
	}
	if v := m["key"]; v != nil {
		if p, ok := path(v, join(field, "key")); ok {
			ep.Key = p
			ep.PrivateKey = d.privateKeyFile(v, join(field, "key"), p)
		}
	}
	if v := m["cacerts"]; v != nil {
		items, _ := d.list(v, join(field, "cacerts"))
		for j, cn := range items {
			if p, ok := path(cn, index(join(field, "cacerts"), j)); ok {
				ep.CACerts = append(ep.CACerts, p)
				ep.CACertList = append(ep.CACertList, d.certFile(cn, index(join(field, "cacerts"), j), p)...)
			}
		}
	}
	if v := m["certs"]; v != nil { // remote's: pinned
		items, _ := d.list(v, join(field, "certs"))
		for j, cn := range items {
			if p, ok := path(cn, index(join(field, "certs"), j)); ok {
				ep.PeerCerts = append(ep.PeerCerts, p)
				ep.Certs = append(ep.Certs, d.certFile(cn, index(join(field, "certs"), j), p)...)
			}
		}
		if !ep.Identity.IsAny() && len(ep.Certs) > 0 && !slices.ContainsFunc(ep.Certs, func(c *x509.Certificate) bool { return ike.CertProves(c, ep.Identity) }) {
			d.errorf(v, join(field, "certs"), "no certificate of them proves id %q (its subject or a subjectAltName): the peer could never authenticate", ep.ID)
		}
	}
	d.endpointCerts(n, m, field, ep, known)
}

// endpointCerts checks that cert:, key: and cacerts: are there when the
// side's auth needs them and only then: pubkey and eap-tls need ours and
// the peer's trust anchors; a gateway with auth eap (EAP-only) may hold
// the certificate of its EAP-TLS, which the engine's checks require;
// remote auth eap takes the anchors of the gateway's EAP-TLS
// certificate.
func (d *decoder) endpointCerts(n *yaml.Node, m map[string]*yaml.Node, field string, ep *Endpoint, known []string) {
	local := slices.Contains(known, "key")
	certs := ep.Auth == ike.AuthPubkey || ep.Auth == ike.AuthEAPTLS
	switch {
	case certs && local && (m["cert"] == nil || m["key"] == nil):
		d.errorf(n, field, "auth %s needs cert: and key: (the certificate and its private key)", ep.Auth)
	case m["certs"] != nil && ep.Auth != ike.AuthPubkey:
		d.errorf(m["certs"], join(field, "certs"), "only with auth: pubkey (the peer's certificate, pinned)")
	case ep.Auth == ike.AuthPubkey && !local && m["cacerts"] == nil && m["certs"] == nil:
		d.errorf(n, join(field, "cacerts"), "missing; auth pubkey needs the trust anchors the peer's certificate chains to, or certs: the peer's certificate, pinned")
	case certs && !local && ep.Auth != ike.AuthPubkey && m["cacerts"] == nil:
		d.errorf(n, join(field, "cacerts"), "missing; auth %s needs the trust anchors the peer's certificate chains to", ep.Auth)
	case certs || ep.Auth == ike.AuthEAPOnly:
	default:
		for _, k := range []string{"cert", "key", "cacerts"} {
			if m[k] != nil {
				d.errorf(m[k], join(field, k), "only with auth: pubkey, eap-tls or eap")
			}
		}
	}
}

// certFile reads the PEM certificates of a file, with the bounded reader.
func (d *decoder) certFile(n *yaml.Node, field, path string) []*x509.Certificate {
	data, _, err := d.read(path, maxPEMFile, "a certificate file")
	if err != nil {
		d.errorf(n, field, "%v", err)
		return nil
	}
	cs, err := ike.ParseCertificatesPEM(data)
	if err != nil {
		d.errorf(n, field, "%s: %v", path, err)
		return nil
	}
	return cs
}

// privateKeyFile reads a private key with the bounded reader, zeroes the
// bytes read, and warns when others can read or change the file. As for
// key_file, errors do not show the path, which may be a key pasted into
// the wrong field.
func (d *decoder) privateKeyFile(n *yaml.Node, field, path string) crypto.Signer {
	data, fi, ok := d.readKeyFile(n, field, path, maxPEMFile, "a private key file")
	defer clear(data)
	if !ok {
		return nil
	}
	k, err := ike.ParsePrivateKeyPEM(data)
	if err != nil {
		d.errorf(n, field, "%v", err)
		return nil
	}
	d.warnExposed(path, fi, "key ")
	return k
}
