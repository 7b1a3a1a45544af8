package config

import (
	"path/filepath"
	"slices"

	"go.yaml.in/yaml/v3"

	"github.com/ipsecd/ipsecd/internal/keytext"
	"github.com/ipsecd/ipsecd/sa"
)

// algorithm decodes {name, key | key_file, icv_bits | trunc_bits}. It
// records its subfields in fn so that key length errors name the key's line.
func (d *decoder) algorithm(n *yaml.Node, field string, kind sa.AlgorithmKind, fn *fieldNodes) (*sa.Algorithm, bool) {
	known := []string{"name", "key", "key_file"}
	bitsKey := kind.BitsField()
	if bitsKey != "" {
		known = append(known, bitsKey)
	}
	m, ok := d.fields(n, field, known...)
	if !ok {
		return nil, false
	}
	prefix := string(kind) + "."
	a := &sa.Algorithm{}
	good := true
	fn.field(m, "name", prefix, func(v *yaml.Node, f string) bool {
		a.Name, ok = d.str(v, f)
		return ok
	})
	if m["key"] != nil && m["key_file"] != nil {
		d.errorf(m["key_file"], join(field, "key_file"), "given together with key; use one")
		fn.bad[prefix+"key"] = true
		good = false
	} else {
		fn.field(m, "key", prefix, func(v *yaml.Node, f string) bool {
			text, ok := d.scalar(v, f, "0x-prefixed hex")
			if !ok {
				return false
			}
			k, err := keytext.ParseHex(text)
			if err != nil {
				d.errorf(v, f, "%v", err)
				return false
			}
			d.inlineKeys = true
			a.Key = k
			return true
		})
		fn.field(m, "key_file", prefix, func(v *yaml.Node, f string) bool {
			a.Key, ok = d.keyFile(v, f)
			return ok
		})
		if n := fn.nodes[prefix+"key_file"]; n != nil {
			fn.nodes[prefix+"key"] = n // a length error names the key_file line
			if fn.bad[prefix+"key_file"] {
				fn.bad[prefix+"key"] = true
			}
		}
	}
	if bitsKey != "" {
		fn.field(m, bitsKey, prefix, func(v *yaml.Node, f string) bool {
			b, ok := d.uint(v, f, 1, 1024)
			a.Bits = int(b)
			return ok
		})
	}
	return a, good
}

// keyFile reads a key_file, relative to the config file's directory, with
// keytext.ReadFile (as the CLI reads @FILE): a file that others could
// read or change gets a warning. Errors name the field and never the
// path, which may be a key pasted into the wrong field, nor the file's
// content.
func (d *decoder) keyFile(n *yaml.Node, field string) ([]byte, bool) {
	path, ok := d.secretPath(n, field, `write the key as key: "0x..."`)
	if !ok {
		return nil, false
	}
	k, warnings, err := keytext.ReadFile(path)
	if err != nil {
		d.errorf(n, field, "%v", err)
		return nil, false
	}
	for _, w := range warnings {
		if !slices.Contains(d.warnings, w) {
			d.warnings = append(d.warnings, w)
		}
	}
	return k, true
}

// secretPath decodes the path of a file that holds a secret (key_file,
// secret_file), taken from the config file's directory when relative. A
// value that looks like key material is refused without being shown:
// instead says where such a value belongs.
func (d *decoder) secretPath(n *yaml.Node, field, instead string) (string, bool) {
	path, ok := d.str(n, field)
	if !ok {
		return "", false
	}
	switch {
	case path == "":
		d.errorf(n, field, "empty path")
		return "", false
	case keytext.LooksLikeKey(path):
		d.errorf(n, field, "the value looks like key material (not shown), not a path: "+
			"%s, or put it in a file of its own and name that file here", instead)
		return "", false
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(d.dir, path)
	}
	return path, true
}
