package vici

import (
	"fmt"
	"strconv"
	"strings"
)

// PoolLoader is what a Backend adds to take address pools over vici
// (load-pool, unload-pool). Loaded pools are vici's, as its connections
// are: a reload of the config file leaves them. A Backend without it
// answers those commands success=no.
type PoolLoader interface {
	// LoadPool adds or replaces the pool name, given as one item of the
	// config file's pools: (YAML), checked as the file's are.
	LoadPool(name string, item []byte) error
	// UnloadPool removes a pool loaded over vici.
	UnloadPool(name string) error
}

// poolLoader returns the backend's PoolLoader, or an answer saying there
// is none.
func (r *request) poolLoader() (PoolLoader, *Message) {
	l, ok := r.conn.s.backend.(PoolLoader)
	if !ok {
		return nil, failure(r.name + ": this daemon takes no address pools over vici")
	}
	return l, nil
}

// poolAttrs maps the attributes of a pool of swanctl.conf (lists, as
// swanctl sends them) to the config file's pool keys. 25 is
// INTERNAL_DNS_DOMAIN (RFC 8598), which charon takes only by number.
var poolAttrs = map[string]string{"dns": "dns", "subnet": "split_include", "25": "dns_domains"}

// poolRefused says why ipsecd refuses an attribute charon takes.
var poolRefused = map[string]string{
	"address":       "INTERNAL_IP4_ADDRESS/INTERNAL_IP6_ADDRESS come from addrs alone",
	"nbns":          "ipsecd sends no NetBIOS name servers (INTERNAL_IP4_NBNS)",
	"dhcp":          "ipsecd does not relay DHCP (INTERNAL_IP4_DHCP)",
	"netmask":       "ipsecd sends no INTERNAL_IP4_NETMASK; a client's address is a host address",
	"server":        "ipsecd sends no INTERNAL_IP4_SERVER",
	"split_include": "it is Cisco Unity's attribute, which ipsecd does not send; subnet sends INTERNAL_IP4_SUBNET/INTERNAL_IP6_SUBNET",
	"split_exclude": "it is Cisco Unity's attribute (UNITY_LOCAL_LAN), which ipsecd does not send",
}

// loadPool takes pools of swanctl.conf, as swanctl --load-pools sends
// them: one section per pool, addrs a key/value, every other attribute
// a list. Pools are loaded in order; the first refused ends the command
// (charon's does the same).
func loadPool(r *request) *Message {
	l, fail := r.poolLoader()
	if fail != nil {
		return fail
	}
	if r.msg.Len() == 0 {
		return failure("load-pool: no pool section")
	}
	for _, name := range r.msg.Keys() {
		sec := r.msg.Section(name)
		if sec == nil {
			return failure(fmt.Sprintf("load-pool: %q is not a section", name))
		}
		item, err := poolItem(name, sec)
		if err != nil {
			return failure(fmt.Sprintf("load-pool: %s: %v", name, err))
		}
		if err := l.LoadPool(name, item); err != nil {
			return failure(fmt.Sprintf("load-pool: %s: %v", name, err))
		}
		r.conn.s.log.WithField("pool", name).Info("vici: loaded pool")
	}
	return success()
}

// poolItem writes a pool of swanctl.conf as one item of the config
// file's pools:, in YAML's flow style with JSON-quoted values.
func poolItem(name string, sec *Message) ([]byte, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "{name: %s", quote(name))
	if sec.Get("addrs") == nil {
		return nil, fmt.Errorf("missing addrs (a prefix, 10.3.0.0/24, or a range, 10.3.0.10-10.3.0.200)")
	}
	for _, k := range sec.Keys() {
		v := sec.Get(k)
		if k == "addrs" {
			s, ok := v.(string)
			if !ok {
				return nil, fmt.Errorf("addrs: want one value, a prefix or a range")
			}
			fmt.Fprintf(&b, ", addrs: %s", quote(s))
			continue
		}
		if why, ok := poolRefused[k]; ok {
			return nil, fmt.Errorf("%s is not supported by ipsecd: %s", k, why)
		}
		to, ok := poolAttrs[k]
		if !ok {
			if _, err := strconv.ParseUint(k, 10, 16); err == nil {
				return nil, fmt.Errorf("attribute %s is not supported by ipsecd, which sends dns, subnet and 25 (INTERNAL_DNS_DOMAIN)", k)
			}
			return nil, fmt.Errorf("invalid attribute: %s", k)
		}
		if _, ok := v.([]string); !ok {
			return nil, fmt.Errorf("%s: want a list, as swanctl sends it", k)
		}
		if err := writeValue(&b, to, v); err != nil {
			return nil, fmt.Errorf("%s: %v", k, err)
		}
	}
	b.WriteString("}")
	return []byte(b.String()), nil
}

// unloadPool removes a pool vici loaded, refused while it has online
// leases (as charon's).
func unloadPool(r *request) *Message {
	l, fail := r.poolLoader()
	if fail != nil {
		return fail
	}
	name := r.msg.String("name")
	if name == "" {
		return failure("unload-pool: missing pool name to unload")
	}
	if err := l.UnloadPool(name); err != nil {
		return failure(fmt.Sprintf("unload-pool: %v", err))
	}
	return success()
}
