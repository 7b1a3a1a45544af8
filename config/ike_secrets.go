package config

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"os"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/ipsecd/ipsecd/ike"
)

// secrets decodes secrets:.
func (d *decoder) secrets(n *yaml.Node, ic *IKEConfig) {
	items, ok := d.list(n, "secrets")
	if !ok {
		return
	}
	seen := map[string]string{} // sorted ids → field
	for i, it := range items {
		f := index("secrets", i)
		m, ok := d.fields(it, f, "type", "ids", "secret", "secret_file")
		if !ok {
			continue
		}
		s := Secret{Type: SecretIKE, Line: it.Line}
		good := true
		if v := m["type"]; v != nil {
			s.Type, good = oneOfTyped(d, v, join(f, "type"), SecretIKE, SecretEAP)
		}
		if v := m["ids"]; v != nil {
			ids, ok := d.list(v, join(f, "ids"))
			for j, idn := range ids {
				if id, ok := d.str(idn, index(join(f, "ids"), j)); ok && id != "" && s.Type == SecretEAP {
					s.IDs = append(s.IDs, id) // an EAP identity: any text, compared as it is
				} else if ok && id != "" {
					ident, err := ike.ParseIdentity(id)
					if err != nil {
						d.errorf(idn, index(join(f, "ids"), j), "%s", strings.TrimPrefix(err.Error(), ike.ErrBadIdentity.Error()+": "))
						good = false
					}
					s.IDs = append(s.IDs, id)
					s.Identities = append(s.Identities, ident)
				} else {
					if ok {
						d.errorf(idn, index(join(f, "ids"), j), "empty")
					}
					good = false
				}
			}
			good = good && ok
		}
		switch sv, fv := m["secret"], m["secret_file"]; {
		case sv != nil && fv != nil:
			d.errorf(fv, join(f, "secret_file"), "given together with secret; use one")
			good = false
		case sv != nil:
			d.inlineKeys = true
			if v, ok := d.scalar(sv, join(f, "secret"), "a string"); ok {
				s.Secret, ok = d.secretValue(sv, join(f, "secret"), []byte(v))
				good = good && ok
			} else {
				good = false
			}
		case fv != nil:
			s.Secret, ok = d.secretFile(fv, join(f, "secret_file"))
			good = good && ok
		default:
			d.errorf(it, join(f, "secret"), "missing; want secret: or secret_file:")
			good = false
		}
		if s.Type == SecretEAP && len(s.IDs) == 0 && good {
			d.errorf(it, join(f, "ids"), "missing; an eap secret names the EAP identities (eap_id) whose password it is")
			good = false
		}
		key := string(s.Type) + "\x00" + strings.Join(slices.Sorted(slices.Values(s.IDs)), "\x00")
		if prev, dup := seen[key]; dup && good {
			d.errorf(it, join(f, "ids"), "the same ids as %s", prev)
			good = false
		}
		if !good {
			clear(s.Secret)
			continue
		}
		seen[key] = f
		ic.Secrets = append(ic.Secrets, s)
	}
}

// secretValue decodes a secret as swanctl.conf writes one: 0x-prefixed
// hex, 0s-prefixed base64, or else the text itself. Its errors never show
// the value.
func (d *decoder) secretValue(n *yaml.Node, field string, v []byte) (Key, bool) {
	var k []byte
	var err error
	switch {
	case len(v) >= 2 && v[0] == '0' && (v[1] == 'x' || v[1] == 'X'):
		k = make([]byte, hex.DecodedLen(len(v)-2))
		if _, err = hex.Decode(k, v[2:]); err != nil {
			err = errors.New("0x but not hex")
		}
	case len(v) >= 2 && v[0] == '0' && (v[1] == 's' || v[1] == 'S'):
		k = make([]byte, base64.StdEncoding.DecodedLen(len(v)-2))
		var nk int
		nk, err = base64.StdEncoding.Decode(k, v[2:])
		if err != nil {
			err = errors.New("0s but not base64")
		}
		clear(k[nk:])
		k = k[:nk]
	default:
		k = slices.Clone(v)
	}
	if err == nil && len(k) == 0 {
		err = errors.New("empty")
	}
	if err != nil {
		clear(k)
		d.errorf(n, field, "%v (the value is not shown)", err)
		return nil, false
	}
	return Key(k), true
}

// secretFile reads a secret from a file, written as secret: writes it
// (white space around it is dropped), with the bounded reader of key
// files, and warns when others can read or change the file.
func (d *decoder) secretFile(n *yaml.Node, field string) (Key, bool) {
	path, ok := d.secretPath(n, field, "write it as secret:")
	if !ok {
		return nil, false
	}
	data, fi, ok := d.readKeyFile(n, field, path, maxKeyFile, "a secret file")
	defer clear(data)
	if !ok {
		return nil, false
	}
	k, ok := d.secretValue(n, field, trimSpace(data))
	if !ok {
		return nil, false
	}
	d.warnExposed(path, fi, "secret_file ")
	return k, true
}

// readKeyFile reads a file that holds a secret or a private key with the
// bounded reader (at most limit bytes; what names the kind of file). An
// error names the field and never the path, which may be a key pasted
// into the wrong field. The caller zeroes the bytes.
func (d *decoder) readKeyFile(n *yaml.Node, field, path string, limit int64, what string) ([]byte, os.FileInfo, bool) {
	data, fi, err := d.read(path, limit, what)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		d.errorf(n, field, "%v", err)
		return data, nil, false
	}
	return data, fi, true
}

// trimSpace is bytes.TrimSpace for ASCII white space, which returns a
// subslice (no copy of the secret).
func trimSpace(b []byte) []byte {
	isSpace := func(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f' }
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

// warnExposed adds exposedKeys' warnings for a file that holds keys, named
// as the field that names it.
func (d *decoder) warnExposed(path string, fi os.FileInfo, name string) {
	if fi == nil {
		return // given in memory
	}
	for _, w := range exposedKeys(path, fi, false, true) {
		w = strings.Replace(w, "key_file ", name, 1)
		if !slices.Contains(d.warnings, w) {
			d.warnings = append(d.warnings, w)
		}
	}
}

// bestSecret returns the index of the secret that serves a connection
// between local and remote ids, or -1, as strongSwan ranks them: one whose
// ids include both, then one with a single id that is one of them, then
// one without ids; the first in the file among equals. Ids compare as
// identities (ike.Identity.Equal: "@gw" is the name gw). A remote id %any
// matches every id, so that a responder for any peer finds its secret by
// its local id alone.
func bestSecret(secrets []Secret, local, remote ike.Identity) int {
	best, bestRank := -1, 0
	has := func(ids []ike.Identity, id ike.Identity) bool { return slices.ContainsFunc(ids, id.Equal) }
	for i, s := range secrets {
		if s.Type == SecretEAP {
			continue
		}
		rank := 0
		switch hasL, hasR := has(s.Identities, local), has(s.Identities, remote) || remote.IsAny(); {
		case len(s.IDs) == 0:
			rank = 1
		case hasL && hasR:
			rank = 3
		case len(s.IDs) == 1 && (hasL || hasR):
			rank = 2
		}
		if rank > bestRank {
			best, bestRank = i, rank
		}
	}
	return best
}

// EAPSecret returns the secret of the EAP identity id: the first EAP
// secret whose ids hold it exactly, as strongSwan's eap secrets are
// found; false when none does.
func (c *IKEConfig) EAPSecret(id string) (Key, bool) {
	for _, s := range c.Secrets {
		if s.Type == SecretEAP && slices.Contains(s.IDs, id) {
			return s.Secret, true
		}
	}
	return nil, false
}

// eapSecret is EAPSecret as the engine's lookup, over the file's bytes.
func (c *IKEConfig) eapSecret(id string) ([]byte, bool) { return c.EAPSecret(id) }

// EAPUsers returns copies of the eap secrets by identity, the first in
// the file for an identity listed twice (as EAPSecret finds it), so that
// WipeKeys on the file's Config leaves them alone: the caller zeroes
// them when it drops them.
func (c *IKEConfig) EAPUsers() map[string][]byte {
	users := map[string][]byte{}
	for _, s := range c.Secrets {
		for _, id := range s.IDs {
			if _, dup := users[id]; s.Type == SecretEAP && !dup {
				users[id] = slices.Clone([]byte(s.Secret))
			}
		}
	}
	return users
}

// eapSecrets returns an EAPSecret over copies of the eap secrets
// (EAPUsers), for EngineConfig.
func eapSecrets(secrets []Secret) func(string) ([]byte, bool) {
	users := (&IKEConfig{Secrets: secrets}).EAPUsers()
	return func(id string) ([]byte, bool) {
		k, ok := users[id]
		return k, ok
	}
}
