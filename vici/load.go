package vici

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Loader is what a Backend adds to take connections and secrets over
// vici (load-conn, unload-conn, get-conns, load-shared, unload-shared,
// get-shared, clear-creds). Loaded connections are vici's, as the
// file's are the file's: a reload of the config file leaves them, and
// loading one unchanged leaves its SAs up. A Backend without it answers
// those commands success=no.
type Loader interface {
	// LoadConn adds or replaces the connection name, given as one item
	// of the config file's connections: (YAML), checked as the file's
	// are. files holds the certificates and key it names (cert:, key:,
	// cacerts:) by path, read instead of files (config.ParseMem); they
	// are the caller's to zero after.
	LoadConn(name string, item []byte, files map[string][]byte) error
	// UnloadConn removes a connection loaded over vici.
	UnloadConn(name string) error
	// ViciConns returns the names of the connections loaded over vici.
	ViciConns() []string
	// LoadShared adds or replaces the IKE pre-shared key id (an item of
	// secrets: as YAML), used by connections loaded from then on.
	LoadShared(id string, item []byte) error
	// UnloadShared removes one; ClearShared all of them.
	UnloadShared(id string) error
	ClearShared()
	// SharedIDs returns the ids of the secrets loaded over vici.
	SharedIDs() []string
}

// loader returns the backend's Loader, or an answer saying there is none.
func (r *request) loader() (Loader, *Message) {
	l, ok := r.conn.s.backend.(Loader)
	if !ok {
		return nil, failure(r.name + ": this daemon takes no connections or secrets over vici")
	}
	return l, nil
}

// loadConn translates a connection of swanctl.conf, as swanctl sends it,
// into the config file's connection item and loads it.
func loadConn(r *request) *Message {
	l, fail := r.loader()
	if fail != nil {
		return fail
	}
	if r.msg.Len() != 1 {
		return failure(fmt.Sprintf("load-conn: want one connection section, got %d keys", r.msg.Len()))
	}
	name := r.msg.Keys()[0]
	sec := r.msg.Section(name)
	if sec == nil {
		return failure(fmt.Sprintf("load-conn: %q is not a section", name))
	}
	files := connFiles{}
	defer files.wipe()
	item, err := connItem(name, sec, &r.conn.s.creds, files)
	if err != nil {
		return failure(fmt.Sprintf("load-conn: %s: %v", name, err))
	}
	if err := l.LoadConn(name, item, files); err != nil {
		return failure(fmt.Sprintf("load-conn: %s: %v", name, err))
	}
	return success()
}

func unloadConn(r *request) *Message {
	l, fail := r.loader()
	if fail != nil {
		return fail
	}
	name := r.msg.String("name")
	if name == "" {
		return failure("unload-conn: missing name")
	}
	if err := l.UnloadConn(name); err != nil {
		return failure(fmt.Sprintf("unload-conn: %s: %v", name, err))
	}
	return success()
}

// getConns answers the names of the connections loaded over vici, not
// those of the config file (charon leaves out other backends' alike).
func getConns(r *request) *Message {
	l, ok := r.conn.s.backend.(Loader)
	if !ok {
		return NewMessage().Set("conns", []string{})
	}
	return NewMessage().Set("conns", nonNil(l.ViciConns()))
}

// loadShared takes an IKE pre-shared key or an EAP password: type IKE
// or EAP, data (the secret's bytes), owners (the identities; an EAP
// secret's are EAP identities), and id, what unload-shared names it by
// (swanctl sends the secret's section name).
func loadShared(r *request) *Message {
	l, fail := r.loader()
	if fail != nil {
		return fail
	}
	typ := strings.ToLower(r.msg.String("type"))
	if typ != "ike" && typ != "eap" {
		return failure(fmt.Sprintf("load-shared: type %q is not supported; ipsecd takes IKE pre-shared keys and EAP passwords (no XAuth, no private key passphrases)", r.msg.String("type")))
	}
	data := r.msg.String("data")
	if data == "" {
		return failure("load-shared: missing data")
	}
	owners := r.msg.List("owners")
	id := r.msg.String("id")
	if id == "" {
		id = "ike-" + strings.Join(owners, ",")
	}
	ids, _ := json.Marshal(nonNil(owners))
	// The secret as hex, so that any bytes survive YAML; the text
	// holding it is the backend's to drop once parsed.
	item := []byte(fmt.Sprintf(`{type: %s, ids: %s, secret: "0x%s"}`, typ, ids, hex.EncodeToString([]byte(data))))
	if err := l.LoadShared(id, item); err != nil {
		return failure(fmt.Sprintf("load-shared: %s: %v", id, err))
	}
	return success()
}

func unloadShared(r *request) *Message {
	l, fail := r.loader()
	if fail != nil {
		return fail
	}
	id := r.msg.String("id")
	if id == "" {
		return failure("unload-shared: missing id")
	}
	if err := l.UnloadShared(id); err != nil {
		return failure(fmt.Sprintf("unload-shared: %s: %v", id, err))
	}
	return success()
}

func getShared(r *request) *Message {
	l, ok := r.conn.s.backend.(Loader)
	if !ok {
		return NewMessage().Set("keys", []string{})
	}
	return NewMessage().Set("keys", nonNil(l.SharedIDs()))
}

// clearCreds drops the secrets, certificates and keys loaded over vici,
// as charon's does. The SAs they served stay up, as in charon: their
// keys are derived; the next authentication needs them loaded again.
func clearCreds(r *request) *Message {
	r.conn.s.creds.clear()
	if l, ok := r.conn.s.backend.(Loader); ok {
		l.ClearShared()
	}
	return success()
}

// connKeys maps swanctl.conf's connection keys to the config file's;
// childKeys a child's. Keys not here are refused by name: ipsecd does
// not do what they ask for.
var (
	connKeys = map[string]string{"local_addrs": "local_addrs", "remote_addrs": "remote_addrs", "version": "version",
		"proposals": "proposals", "encap": "encap", "dpd_delay": "dpd_delay", "rekey_time": "rekey_time", "unique": "unique"}
	childKeys = map[string]string{"local_ts": "local_ts", "remote_ts": "remote_ts", "esp_proposals": "esp_proposals",
		"mode": "mode", "rekey_time": "rekey_time", "life_time": "life_time", "replay_window": "replay_window",
		"start_action": "start_action", "dpd_action": "dpd_action"}
	authKeys = map[string]string{"auth": "auth", "id": "id"}
	// asIpsecdDoes are keys taken, and left out, when their value asks
	// for what ipsecd does anyway (charon's defaults, mostly).
	asIpsecdDoes = map[string][]string{"mobike": {"no"}, "reauth_time": {"0", "0s"}, "unique": {"no"},
		"fragmentation": {"yes", "accept"}}
)

// connItem writes a connection of swanctl.conf as one item of the config
// file's connections: in YAML's flow style, each value JSON-quoted (a
// JSON string is a YAML string: nothing in a value is read as YAML).
func connItem(name string, sec *Message, store *creds, files connFiles) ([]byte, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "{name: %s", quote(name))
	var locals, remotes []string
	for _, k := range sec.Keys() {
		_, isSection := sec.Get(k).(*Message)
		switch {
		case k == "children":
			continue
		case isSection && strings.HasPrefix(k, "local"):
			locals = append(locals, k)
			continue
		case isSection && strings.HasPrefix(k, "remote"):
			remotes = append(remotes, k)
			continue
		case k == "local_port" || k == "remote_port":
			if v := sec.String(k); v != "" && v != "500" {
				return nil, fmt.Errorf("%s %s: ipsecd's IKE port is ike.port in the config file", k, v)
			}
			continue
		}
		if slices.Contains(asIpsecdDoes[k], sec.String(k)) {
			continue
		}
		to, ok := connKeys[k]
		if !ok {
			return nil, fmt.Errorf("%s is not supported by ipsecd", describeKey(k, sec.Get(k)))
		}
		if k == "version" && sec.String(k) == "0" {
			continue // any version: ipsecd's is 2
		}
		if err := writeValue(&b, to, sec.Get(k)); err != nil {
			return nil, fmt.Errorf("%s: %v", k, err)
		}
	}
	for _, side := range []struct {
		key   string
		found []string
	}{{"local", locals}, {"remote", remotes}} {
		if len(side.found) != 1 {
			return nil, fmt.Errorf("want one %s section (ipsecd has one round of authentication), got %d", side.key, len(side.found))
		}
		auth := sec.Section(side.found[0])
		fmt.Fprintf(&b, ", %s: {", side.key)
		first := true
		sep := func() {
			if !first {
				b.WriteString(", ")
			}
			first = false
		}
		for _, k := range auth.Keys() {
			switch certKey := side.key + "." + k; certKey {
			case "local.certs", "remote.cacerts", "remote.certs":
				sep()
				if err := sideCerts(&b, store, files, certKey, auth.Get(k)); err != nil {
					return nil, fmt.Errorf("%s.%s: %v", side.found[0], k, err)
				}
				continue
			case "local.cacerts":
				if err := localCAs(auth.Get("certs"), auth.Get(k)); err != nil {
					return nil, fmt.Errorf("%s.%s: %v", side.found[0], k, err)
				}
				continue // a check: it picks no other certificate of ours
			case "local.pubkeys", "remote.pubkeys":
				return nil, fmt.Errorf("%s.%s: raw public keys are not supported by ipsecd, whose IKE authenticates with X.509 certificates (RFC 7670's raw keys are not implemented); %s", side.found[0], k,
					map[string]string{"local": "use local.certs, with the certificate's key loaded (load-key)", "remote": "pin the peer's certificate with remote.certs"}[side.key])
			}
			to, ok := authKeys[k]
			if !ok {
				return nil, fmt.Errorf("%s.%s is not supported by ipsecd", side.found[0], k)
			}
			sep()
			if err := writeValueBare(&b, to, auth.Get(k)); err != nil {
				return nil, fmt.Errorf("%s.%s: %v", side.found[0], k, err)
			}
		}
		if side.key == "remote" && auth.String("auth") == "pubkey" && auth.Get("cacerts") == nil && auth.Get("certs") == nil {
			sep()
			if err := store.remoteCAs(&b, files, nil); err != nil {
				return nil, fmt.Errorf("%s.cacerts: %v", side.found[0], err)
			}
		}
		b.WriteString("}")
	}
	children := sec.Section("children")
	if children == nil || children.Len() == 0 {
		return nil, fmt.Errorf("no children: a connection needs a child to carry traffic")
	}
	b.WriteString(", children: [")
	for i, cname := range children.Keys() {
		ch := children.Section(cname)
		if ch == nil {
			return nil, fmt.Errorf("children.%s is not a section", cname)
		}
		if i > 0 {
			b.WriteString(", ")
		}
		if err := childItem(&b, cname, ch); err != nil {
			return nil, fmt.Errorf("children.%s: %v", cname, err)
		}
	}
	b.WriteString("]}")
	return []byte(b.String()), nil
}

// childItem writes a child. if_id_in and if_id_out name the interface
// (ipsecd's if_id), and must be equal.
func childItem(b *strings.Builder, name string, ch *Message) error {
	fmt.Fprintf(b, "{name: %s", quote(name))
	in, out := ch.String("if_id_in"), ch.String("if_id_out")
	if in == "" || in != out {
		return fmt.Errorf("if_id_in %q and if_id_out %q: ipsecd wants both, equal, naming the interface (an if_id of the config file's interfaces) the child's traffic uses", in, out)
	}
	fmt.Fprintf(b, ", if_id: %s", quote(in))
	keys := append([]string(nil), ch.Keys()...)
	for _, k := range keys {
		if k == "if_id_in" || k == "if_id_out" {
			continue
		}
		to, ok := childKeys[k]
		if !ok {
			return fmt.Errorf("%s is not supported by ipsecd", k)
		}
		if err := writeValue(b, to, ch.Get(k)); err != nil {
			return fmt.Errorf("%s: %v", k, err)
		}
	}
	b.WriteString("}")
	return nil
}

// writeValue writes ", key: value"; writeValueBare "key: value".
func writeValue(b *strings.Builder, key string, v any) error {
	b.WriteString(", ")
	return writeValueBare(b, key, v)
}

func writeValueBare(b *strings.Builder, key string, v any) error {
	switch v := v.(type) {
	case string:
		if key == "encap" {
			v = map[string]string{"yes": "true", "no": "false"}[v]
			if v == "" {
				return fmt.Errorf("want yes or no")
			}
			fmt.Fprintf(b, "%s: %s", key, v)
			return nil
		}
		fmt.Fprintf(b, "%s: %s", key, quote(v))
	case []string:
		q := make([]string, len(v))
		for i, s := range v {
			q[i] = quote(s)
		}
		fmt.Fprintf(b, "%s: [%s]", key, strings.Join(q, ", "))
	default:
		return fmt.Errorf("a section where a value belongs")
	}
	return nil
}

// describeKey names a key refused, with its value when it has one.
func describeKey(k string, v any) string {
	if s, ok := v.(string); ok {
		return k + " = " + s
	}
	return k
}

func quote(s string) string {
	out, _ := json.Marshal(s)
	return string(out)
}
