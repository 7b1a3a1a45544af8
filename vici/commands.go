package vici

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// request is one command as its handler sees it.
type request struct {
	conn *conn
	name string
	msg  *Message // the request's message (never nil)
}

// emit streams event to the client of r, if it registered for it.
func (r *request) emit(event string, m *Message) error { return r.conn.emit(event, m) }

// handler answers one command.
type handler func(r *request) *Message

// commands lists every command vici defines (strongSwan 5.9's), each
// with its handler; those ipsecd does not implement answer
// success=no with an errmsg that says so (unsupported). A name not here
// is answered CMD_UNKNOWN.
var commands = map[string]handler{
	"version":         version,
	"stats":           stats,
	"reload-settings": reloadSettings,
	"list-sas":        listSAs,      // sas.go
	"initiate":        initiate,     // actions.go
	"terminate":       terminate,    // actions.go
	"rekey":           rekey,        // actions.go
	"list-conns":      listConns,    // conns.go
	"get-conns":       getConns,     // conns.go
	"list-policies":   listPolicies, // conns.go
	"load-conn":       loadConn,     // load.go
	"unload-conn":     unloadConn,   // load.go
	"load-shared":     loadShared,   // load.go
	"unload-shared":   unloadShared, // load.go
	"get-shared":      getShared,    // load.go
	"clear-creds":     clearCreds,   // load.go
	"get-pools":       getPools,     // pools.go
	"load-pool":       loadPool,     // pools_load.go
	"unload-pool":     unloadPool,   // pools_load.go
	"load-cert":       loadCert,     // creds.go
	"load-key":        loadKey,      // creds.go
	"get-keys":        getKeys,      // creds.go
	"unload-key":      unloadKey,    // creds.go
	"list-certs":      listCerts,    // certs_list.go

	"load-token":       unsupported("ipsecd has no smartcard support"),
	"flush-certs":      unsupported("ipsecd keeps no certificate cache"),
	"list-authorities": unsupported("ipsecd has no certification authority sections"),
	"get-authorities":  unsupported("ipsecd has no certification authority sections"),
	"load-authority":   unsupported("ipsecd has no certification authority sections"),
	"unload-authority": unsupported("ipsecd has no certification authority sections"),
	"get-algorithms":   unsupported("listing algorithms over vici is not implemented; docs/config.md lists the proposals ipsecd runs"),
	"get-counters":     unsupported("charon's IKE counters are not implemented; the metrics listener has ipsecd's"),
	"reset-counters":   unsupported("charon's IKE counters are not implemented"),
	"install":          unsupported("installing a child's trap policy over vici is not implemented; start_action: trap installs it"),
	"uninstall":        unsupported("uninstalling trap policies over vici is not implemented"),
	"redirect":         unsupported("ipsecd does not implement IKE redirection (RFC 5685)"),
}

// events lists the events a client may register for; daemonEvents those
// that come from the daemon's event stream rather than a command.
var (
	events = map[string]bool{
		"list-sa": true, "list-conn": true, "list-policy": true, "list-cert": true, "control-log": true,
		"ike-updown": true, "child-updown": true, "ike-rekey": true, "child-rekey": true,
	}
	daemonEvents = map[string]bool{"ike-updown": true, "child-updown": true, "ike-rekey": true, "child-rekey": true}
)

// unsupported answers a command ipsecd does not implement.
func unsupported(why string) handler {
	return func(r *request) *Message { return failure(r.name + ": " + why) }
}

// version answers what ipsecd is and runs on.
func version(*request) *Message {
	v := "devel"
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		v = bi.Main.Version
	}
	m := NewMessage().Set("daemon", "ipsecd").Set("version", v)
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		m.Set("sysname", unix.ByteSliceToString(u.Sysname[:])).
			Set("release", unix.ByteSliceToString(u.Release[:])).
			Set("machine", unix.ByteSliceToString(u.Machine[:]))
	} else {
		m.Set("sysname", runtime.GOOS).Set("release", "").Set("machine", runtime.GOARCH)
	}
	return m
}

// stats answers charon's stats: uptime and IKE SAs are ipsecd's; it has
// no worker threads or job queues (the IKE daemon is one goroutine), so
// those are written as charon writes an idle daemon's, with zeros, and
// plugins is empty.
func stats(r *request) *Message {
	sas, err := r.conn.s.backend.IKEList()
	if err != nil {
		sas = nil // no IKE: no IKE SAs
	}
	halfOpen := 0
	for _, sa := range sas {
		if sa.State == "CONNECTING" && !sa.Initiator {
			halfOpen++
		}
	}
	since := r.conn.s.started
	zero4 := func() *Message {
		return NewMessage().Set("critical", "0").Set("high", "0").Set("medium", "0").Set("low", "0")
	}
	return NewMessage().
		Set("uptime", NewMessage().Set("running", humanDuration(time.Since(since))).
			Set("since", since.Format("Jan 02 15:04:05 2006"))).
		Set("workers", NewMessage().Set("total", "0").Set("idle", "0").Set("active", zero4())).
		Set("queues", zero4()).
		Set("scheduled", "0").
		Set("ikesas", NewMessage().Set("total", strconv.Itoa(len(sas))).Set("half-open", strconv.Itoa(halfOpen))).
		Set("plugins", []string{})
}

// humanDuration writes d as charon's %V does: "5 seconds", "3 minutes",
// "2 hours", "4 days".
func humanDuration(d time.Duration) string {
	n, unit := int64(d/time.Second), "second"
	switch {
	case d >= 48*time.Hour:
		n, unit = int64(d/(24*time.Hour)), "day"
	case d >= 2*time.Hour:
		n, unit = int64(d/time.Hour), "hour"
	case d >= 2*time.Minute:
		n, unit = int64(d/time.Minute), "minute"
	}
	if n != 1 {
		unit += "s"
	}
	return fmt.Sprintf("%d %s", n, unit)
}

// reloadSettings reloads the config file: ipsecd's strongswan.conf and
// swanctl.conf are one file.
func reloadSettings(r *request) *Message {
	if err := r.conn.s.backend.ReloadConfig(); err != nil {
		return failure("reload-settings: " + strings.TrimSpace(err.Error()))
	}
	return success()
}
