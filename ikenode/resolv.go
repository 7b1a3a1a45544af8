package ikenode

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/ipsecd/ipsecd/internal/printable"
)

// The DNS servers and domains our gateways gave (CFG_REPLY's
// INTERNAL_IP4/6_DNS and INTERNAL_DNS_DOMAIN) go into the resolv.conf
// file that ike.resolve_file names, as strongSwan's resolve plugin does:
// a "nameserver" line per server and a "search" line, each marked
// resolvMark, before what the file held; they leave when the last IKE SA
// that gave them ends. The file is rewritten in place (a symbolic link
// such as /etc/resolv.conf is followed, not replaced), our lines first,
// so that they are tried first. A file that was not there is removed
// again when nothing of ours is left. Lines of ours found on the first
// write (a daemon that died before it cleaned up) are replaced.

// resolvMark ends every line we write.
const resolvMark = "# by ipsecd"

// resolvState is what the daemon knows of the file.
type resolvState struct {
	path    string // the file we last wrote, "" for none
	created bool   // it was not there before our first line
}

// updateResolv makes the file hold the servers and domains of the live
// IKE SAs, and nothing of ours when there are none.
func (m *Daemon) updateResolv() {
	path := m.resolveFile
	if path == "" && m.resolv.path == "" {
		return
	}
	var servers, domains []string
	for _, x := range m.sas {
		if x.ended {
			continue
		}
		c := x.sa.Configuration()
		for _, a := range c.DNS {
			if s := a.String(); !slices.Contains(servers, s) {
				servers = append(servers, s)
			}
		}
		for _, d := range c.Domains {
			switch {
			case !dnsName(d):
				// The gateway's bytes: a newline in them would be a
				// line of its own in the file.
				m.log.WithFields(x.fields()).WithField("domain", printable.Escape(d)).Warn("ike: the gateway's DNS domain is no DNS name; left out of resolve_file")
			case !slices.Contains(domains, d):
				domains = append(domains, d)
			}
		}
	}
	if m.resolv.path != "" && m.resolv.path != path {
		// Reloaded with another file: ours leave the old one.
		if err := m.resolv.write(nil, nil); err != nil {
			m.log.WithError(err).Warn("ike: removing our DNS servers from the old resolve_file")
		}
		m.resolv = resolvState{}
	}
	if path == "" {
		return
	}
	if m.resolv.path == "" && len(servers) == 0 && len(domains) == 0 {
		return // nothing to add, nothing of ours to remove
	}
	if m.resolv.path == "" {
		_, err := os.Stat(path)
		m.resolv = resolvState{path: path, created: errors.Is(err, fs.ErrNotExist)}
	}
	if err := m.resolv.write(servers, domains); err != nil {
		m.log.WithError(err).Error("ike: writing the DNS servers the gateway gave to resolve_file")
	}
	if len(servers) == 0 && len(domains) == 0 {
		m.resolv = resolvState{}
	}
}

// write makes the file hold our lines for servers and domains before
// the lines not ours, or, with none and a file we created holding
// nothing else, removes it.
func (r *resolvState) write(servers, domains []string) error {
	old, err := os.ReadFile(r.path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	var b bytes.Buffer
	for _, s := range servers {
		fmt.Fprintf(&b, "nameserver %s %s\n", s, resolvMark)
	}
	if len(domains) > 0 {
		fmt.Fprintf(&b, "search %s %s\n", strings.Join(domains, " "), resolvMark)
	}
	ours := b.Len()
	for _, l := range strings.SplitAfter(string(old), "\n") {
		if l != "" && !strings.HasSuffix(strings.TrimRight(l, "\n"), resolvMark) {
			b.WriteString(l)
		}
	}
	if ours == 0 && b.Len() == 0 && r.created {
		if err := os.Remove(r.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	return os.WriteFile(r.path, b.Bytes(), 0o644)
}

// dnsName reports whether d is a DNS name that a search line may hold:
// labels of letters, digits, hyphens and underscores of 1 to 63 bytes,
// 253 bytes at most, an ending dot allowed.
func dnsName(d string) bool {
	d = strings.TrimSuffix(d, ".")
	if d == "" || len(d) > 253 {
		return false
	}
	for _, l := range strings.Split(d, ".") {
		if l == "" || len(l) > 63 {
			return false
		}
		for _, c := range []byte(l) {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}
