package radiustest

import (
	"fmt"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// IPPool makes FreeRADIUS assign Framed-IP-Address from an SQL pool
// (rlm_sqlippool on rlm_sql_sqlite, a database in the config directory):
// the addresses of Prefix but its first, leased per pool key (Key, a
// FreeRADIUS expansion: "%{User-Name}" gives a user the same address on
// every gateway while a lease of it lasts, "%{NAS-Identifier}:%{NAS-Port}"
// one per session), released by Accounting-Stop and by the gateway's
// Accounting-On and Off.
type IPPool struct {
	Name   string
	Prefix netip.Prefix
	Key    string
	// Lease is how long a lease lasts without accounting renewing it,
	// in seconds; 0 is an hour.
	Lease int
	// Stock takes Debian's queries as shipped (stockQueries): a lease
	// is the NAS-IP-Address's and the key's, and a gateway's
	// Accounting-On and Off clear the leases of its NAS-IP-Address.
	// Without it, the queries of ippoolModules.
	Stock bool
}

// ippoolSQL is the pool's database: Debian's sqlite schema of radippool
// and a row per address, expired long ago: allocate_find takes the
// address expired longest, so that a never leased one goes before one a
// Stop released just now (which its user, coming back, gets again).
func ippoolSQL(p *IPPool) string {
	var b strings.Builder
	b.WriteString(`CREATE TABLE radippool (
  id INTEGER PRIMARY KEY,
  pool_name varchar(30) NOT NULL,
  framedipaddress varchar(15) NOT NULL default '',
  nasipaddress varchar(15) NOT NULL default '',
  calledstationid VARCHAR(30) NOT NULL default '',
  callingstationid VARCHAR(30) NOT NULL default '',
  expiry_time DATETIME NOT NULL default (DATETIME('now')),
  username varchar(64) NOT NULL default '',
  pool_key varchar(30) NOT NULL default ''
);
CREATE INDEX radippool_poolname_expire ON radippool(pool_name, expiry_time);
BEGIN;
`)
	a := p.Prefix.Masked().Addr().Next()
	for ; p.Prefix.Contains(a); a = a.Next() {
		fmt.Fprintf(&b, "INSERT INTO radippool (pool_name, framedipaddress, expiry_time) VALUES ('%s', '%s', '2000-01-01 00:00:00');\n", p.Name, a)
	}
	b.WriteString("COMMIT;\n")
	return b.String()
}

// ippoolModules are the sql and sqlippool modules, with stockQueries
// when p.Stock, else keyQueries: Debian's for sqlite, whose
// allocate_find lacks an AND in 3.2.1 (the shipped file fails with a
// syntax error), and whose allocate_existing and clears match the lease
// by NAS-IP-Address, changed so that a lease is the pool key's wherever
// it was made and the key decides alone (a user's address follows them
// to the other gateway).
func ippoolModules(dir string, p *IPPool) string {
	lease := p.Lease
	if lease == 0 {
		lease = 3600
	}
	queries := keyQueries
	if p.Stock {
		queries = stockQueries
	}
	// The queries go in first: a Replacer does not look again at what
	// it put in.
	return strings.NewReplacer("@DIR@", dir, "@KEY@", p.Key, "@LEASE@", fmt.Sprint(lease)).Replace(strings.Replace(`
	sql {
		driver = "rlm_sql_sqlite"
		dialect = "sqlite"
		sqlite {
			filename = "@DIR@/ippool.db"
			busy_timeout = 2000
		}
		radius_db = "radius"
		read_clients = no
		pool {
			start = 1
			min = 1
			max = 4
			spare = 1
			uses = 0
			lifetime = 0
			idle_timeout = 0
		}
	}
	sqlippool {
		sql_module_instance = "sql"
		ippool_table = "radippool"
		lease_duration = @LEASE@
		pool_name = "Pool-Name"
		attribute_name = Framed-IP-Address
@QUERIES@		messages {
		}
	}
`, "@QUERIES@", queries, 1))
}

// keyQueries make a lease the pool key's wherever it was made (see
// ippoolModules), cleared on Accounting-On and Off by NAS-Identifier.
const keyQueries = `		allocate_begin = "BEGIN EXCLUSIVE"
		allocate_commit = "COMMIT"
		allocate_existing = "SELECT framedipaddress FROM radippool WHERE pool_name = '%{control:Pool-Name}' AND pool_key = '@KEY@' ORDER BY expiry_time DESC LIMIT 1"
		allocate_find = "SELECT framedipaddress FROM radippool WHERE pool_name = '%{control:Pool-Name}' AND expiry_time < datetime('now') ORDER BY expiry_time LIMIT 1"
		pool_check = "SELECT id FROM radippool WHERE pool_name = '%{control:Pool-Name}' LIMIT 1"
		allocate_update = "UPDATE radippool SET nasipaddress = '%{NAS-IP-Address}', calledstationid = '%{NAS-Identifier}', pool_key = '@KEY@', callingstationid = '%{Calling-Station-Id}', username = '%{User-Name}', expiry_time = datetime(strftime('%%s', 'now') + @LEASE@, 'unixepoch') WHERE framedipaddress = '%I'"
		start_update = "UPDATE radippool SET nasipaddress = '%{NAS-IP-Address}', calledstationid = '%{NAS-Identifier}', expiry_time = datetime(strftime('%%s', 'now') + @LEASE@, 'unixepoch') WHERE pool_key = '@KEY@' AND framedipaddress = '%{Framed-IP-Address}'"
		alive_update = "UPDATE radippool SET expiry_time = datetime(strftime('%%s', 'now') + @LEASE@, 'unixepoch') WHERE pool_key = '@KEY@' AND framedipaddress = '%{Framed-IP-Address}'"
		stop_clear = "UPDATE radippool SET expiry_time = datetime('now', '-1 second') WHERE nasipaddress = '%{NAS-IP-Address}' AND pool_key = '@KEY@' AND framedipaddress = '%{Framed-IP-Address}'"
		on_clear = "UPDATE radippool SET expiry_time = datetime('now', '-1 second') WHERE calledstationid = '%{NAS-Identifier}'"
		off_clear = "UPDATE radippool SET expiry_time = datetime('now', '-1 second') WHERE calledstationid = '%{NAS-Identifier}'"
`

// stockQueries are Debian's for sqlite (3.2.1's
// mods-config/sql/ippool/sqlite/queries.conf) as shipped, with the AND
// that allocate_find lacks: the leases are matched and cleared by
// NAS-IP-Address, which must then be the same in a gateway's
// Access-Requests, its sessions' accounting and its Accounting-On and Off.
const stockQueries = `		allocate_begin = "BEGIN EXCLUSIVE"
		allocate_commit = "COMMIT"
		allocate_existing = "SELECT framedipaddress FROM radippool WHERE pool_name = '%{control:Pool-Name}' AND nasipaddress = '%{NAS-IP-Address}' AND pool_key = '@KEY@' ORDER BY expiry_time DESC LIMIT 1"
		allocate_find = "SELECT framedipaddress FROM radippool WHERE pool_name = '%{control:Pool-Name}' AND expiry_time < datetime('now') ORDER BY expiry_time LIMIT 1"
		pool_check = "SELECT id FROM radippool WHERE pool_name = '%{control:Pool-Name}' LIMIT 1"
		allocate_update = "UPDATE radippool SET nasipaddress = '%{NAS-IP-Address}', pool_key = '@KEY@', callingstationid = '%{Calling-Station-Id}', username = '%{User-Name}', expiry_time = datetime(strftime('%%s', 'now') + @LEASE@, 'unixepoch') WHERE framedipaddress = '%I'"
		start_update = "UPDATE radippool SET expiry_time = datetime(strftime('%%s', 'now') + @LEASE@, 'unixepoch') WHERE nasipaddress = '%{NAS-IP-Address}' AND pool_key = '@KEY@' AND username = '%{User-Name}' AND callingstationid = '%{Calling-Station-Id}' AND framedipaddress = '%{Framed-IP-Address}'"
		stop_clear = "UPDATE radippool SET expiry_time = datetime('now') WHERE nasipaddress = '%{%{Nas-IP-Address}:-%{Nas-IPv6-Address}}' AND pool_key = '@KEY@' AND username = '%{User-Name}' AND callingstationid = '%{Calling-Station-Id}' AND framedipaddress = '%{Framed-IP-Address}'"
		alive_update = "UPDATE radippool SET expiry_time = datetime(strftime('%%s', 'now') + @LEASE@, 'unixepoch') WHERE nasipaddress = '%{%{Nas-IP-Address}:-%{Nas-IPv6-Address}}' AND pool_key = '@KEY@' AND username = '%{User-Name}' AND callingstationid = '%{Calling-Station-Id}' AND framedipaddress = '%{Framed-IP-Address}'"
		on_clear = "UPDATE radippool SET expiry_time = datetime('now') WHERE nasipaddress = '%{%{Nas-IP-Address}:-%{Nas-IPv6-Address}}'"
		off_clear = "UPDATE radippool SET expiry_time = datetime('now') WHERE nasipaddress = '%{%{Nas-IP-Address}:-%{Nas-IPv6-Address}}'"
`

// ippoolAuthorize names the pool for every request.
func ippoolAuthorize(p *IPPool) string {
	return fmt.Sprintf("\t\tupdate control {\n\t\t\tPool-Name := %q\n\t\t}\n", p.Name)
}

// Leases are the pool's addresses leased now (their lease not expired),
// each with its user, read from the database with sqlite3.
func (s *Server) Leases(t testing.TB) map[netip.Addr]string {
	t.Helper()
	out, err := exec.Command("sqlite3", "-cmd", ".timeout 5000", "-separator", " ", filepath.Join(s.Dir, "ippool.db"),
		"SELECT framedipaddress, username FROM radippool WHERE expiry_time > datetime('now')").CombinedOutput()
	if err != nil {
		t.Fatalf("sqlite3: %v\n%s", err, out)
	}
	leases := map[netip.Addr]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if addr, user, ok := strings.Cut(line, " "); ok {
			leases[netip.MustParseAddr(addr)] = user
		}
	}
	return leases
}
