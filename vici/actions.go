package vici

import (
	"fmt"
	"strconv"
	"time"

	"github.com/ipsecd/ipsecd/control"
)

// initiate brings up a child (child, the IKE SA with it as needed) or,
// with ike alone, a connection's children, as ipsecd ike initiate does.
// It waits for the outcome (the child's child_up or its failure) as
// long as timeout says (ms; 0: up to MaxWait; -1: not at all), streaming
// control-log events of what happens to a client registered for them.
func initiate(r *request) *Message {
	t, errmsg := r.target(false)
	if errmsg != "" {
		return failure(errmsg)
	}
	return r.act(t, "initiate", r.conn.s.backend.IKEInitiate, func(ev control.Event) (bool, string) {
		switch ev.Type {
		case evChildUp:
			return t.Child == "" || ev.Detail[control.DetailChild] == t.Child, ""
		case evIKEFailed, evChildFailed:
			if ev.Type == evChildFailed && t.Child != "" && ev.Detail[control.DetailChild] != t.Child {
				return false, ""
			}
			return true, fmt.Sprintf("establishing CHILD_SA '%s' failed: %s", orName(t), why(ev))
		}
		return false, ""
	})
}

// terminate deletes an IKE SA (ike, or ike-id) with its children, or a
// child (child, or child-id), and waits for it to go as initiate waits.
// An IKE SA selected by ike-id is terminated through its connection: the
// connection's IKE SAs go (there is one, unless the peer made another).
func terminate(r *request) *Message {
	t, errmsg := r.target(true)
	if errmsg != "" {
		return failure(errmsg)
	}
	return r.act(t, "terminate", r.conn.s.backend.IKETerminate, func(ev control.Event) (bool, string) {
		switch {
		case t.Child != "" && ev.Type == evChildDown && ev.Detail[control.DetailChild] == t.Child:
			return true, ""
		case t.IKE != "" && (ev.Type == evIKEDown || ev.Type == evIKEFailed):
			return true, ""
		}
		return false, ""
	})
}

// rekey rekeys an IKE SA (ike, ike-id) or a child (child, child-id) and
// answers once the rekey is started, as charon does; reauth is refused.
func rekey(r *request) *Message {
	if yes(r.msg.String("reauth")) {
		return failure("rekey: reauthentication is not implemented; terminate and initiate instead")
	}
	t, errmsg := r.target(true)
	if errmsg != "" {
		return failure(errmsg)
	}
	if err := r.conn.s.backend.IKERekey(t); err != nil {
		return failure("rekey: " + err.Error())
	}
	return success().Set("matches", "1")
}

// target reads what an action names: child or ike (a name), or, with
// ids, child-id or ike-id (a unique id of list-sas). A child's name wins
// over its connection's, as in charon.
func (r *request) target(ids bool) (control.IKETarget, string) {
	m := r.msg
	switch {
	case m.String("child") != "":
		return control.IKETarget{Child: m.String("child")}, ""
	case m.String("ike") != "":
		return control.IKETarget{IKE: m.String("ike")}, ""
	case ids && (m.String("child-id") != "" || m.String("ike-id") != ""):
		return r.targetByID()
	}
	if ids {
		return control.IKETarget{}, r.name + ": missing child, ike, child-id or ike-id"
	}
	return control.IKETarget{}, r.name + ": missing child or ike (a configuration name)"
}

// targetByID finds the SA an id of list-sas names.
func (r *request) targetByID() (control.IKETarget, string) {
	s := r.conn.s
	key, isChild := "ike-id", false
	if r.msg.String("child-id") != "" {
		key, isChild = "child-id", true
	}
	want, err := strconv.ParseUint(r.msg.String(key), 10, 32)
	if err != nil || want == 0 {
		return control.IKETarget{}, fmt.Sprintf("%s: %s %q is not a unique id", r.name, key, r.msg.String(key))
	}
	sas, err := s.backend.IKEList()
	if err != nil {
		return control.IKETarget{}, r.name + ": " + err.Error()
	}
	now := time.Now()
	for _, sa := range sas {
		m := s.ikeSA(sa, now, isChild)
		if !isChild {
			if m.String("uniqueid") == strconv.FormatUint(want, 10) {
				return control.IKETarget{IKE: sa.Name}, ""
			}
			continue
		}
		cs := m.Section("child-sas")
		for _, k := range cs.Keys() {
			if c := cs.Section(k); c.String("uniqueid") == strconv.FormatUint(want, 10) {
				return control.IKETarget{Child: c.String("name")}, ""
			}
		}
	}
	return control.IKETarget{}, fmt.Sprintf("%s: no SA with %s %d", r.name, key, want)
}

// act runs do on t and waits, as the request's timeout says, for the
// event done says ends it (with an error message when it failed),
// streaming control-log events meanwhile.
func (r *request) act(t control.IKETarget, verb string, do func(control.IKETarget) error,
	done func(control.Event) (bool, string)) *Message {
	s := r.conn.s
	wait := s.maxWait()
	if v := r.msg.String("timeout"); v != "" {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return failure(fmt.Sprintf("%s: timeout %q is not a number of milliseconds", r.name, v))
		}
		switch {
		case ms < 0:
			wait = 0
		case ms > 0:
			wait = min(time.Duration(ms)*time.Millisecond, wait)
		}
	}
	var sub control.Subscription
	watching := s.Events != nil && wait > 0
	if watching {
		// Subscribed before acting, so that no outcome slips past.
		sub = s.Events.Subscribe()
		defer sub.Cancel(s.Events)
	}
	r.log(fmt.Sprintf("%s '%s'", verbing(verb), orName(t)))
	if err := do(t); err != nil {
		return failure(fmt.Sprintf("%s '%s' failed: %s", verb, orName(t), err))
	}
	if !watching {
		return success()
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	hangup := time.NewTicker(hangupCheck)
	defer hangup.Stop()
	for {
		select {
		case <-s.closing:
			return failure("the daemon is stopping")
		case <-hangup.C:
			if hungUp(r.conn.c) {
				return failure("the client closed the connection")
			}
		case ev := <-sub.Events():
			if !r.concerns(t, ev) {
				continue
			}
			r.logEvent(ev)
			if ok, errmsg := done(ev); ok {
				if errmsg != "" {
					return failure(errmsg)
				}
				return success().Set("matches", "1")
			}
		case <-timer.C:
			return failure(fmt.Sprintf("%s '%s': no outcome within %v (ipsecd ike list shows where it stands)", verb, orName(t), wait))
		}
	}
}

// hangupCheck is how often a command that waits looks whether its
// client is still there.
const hangupCheck = 250 * time.Millisecond

// concerns reports whether ev is about t: its connection, or a child of
// that name (or its connection's IKE SA, which carries the child).
func (r *request) concerns(t control.IKETarget, ev control.Event) bool {
	d := ev.Detail
	if t.IKE != "" {
		return d[control.DetailConnection] == t.IKE
	}
	if d[control.DetailChild] == t.Child {
		return true
	}
	return ev.Type == evIKEFailed && r.connOf(t.Child) == d[control.DetailConnection]
}

// connOf returns the connection that has a child of that name.
func (r *request) connOf(child string) string {
	for _, c := range r.conn.s.backend.Connections() {
		for _, ch := range c.Children {
			if ch.Name == child {
				return c.Name
			}
		}
	}
	return ""
}

// log sends a control-log event, if the client registered for them
// and its loglevel (charon's default: 1) takes level-1 lines.
func (r *request) log(msg string) {
	if r.logLevel() >= 1 {
		r.emit("control-log", NewMessage().Set("group", "CFG").Set("level", "1").Set("msg", msg))
	}
}

// logLevel is the request's loglevel: how much control-log it wants
// (-1 none; ipsecd writes level-1 lines only).
func (r *request) logLevel() int {
	if v, err := strconv.Atoi(r.msg.String("loglevel")); err == nil {
		return v
	}
	return 1
}

// logEvent writes one of the daemon's events as a control-log line.
func (r *request) logEvent(ev control.Event) {
	d := ev.Detail
	var msg string
	switch ev.Type {
	case evIKEUp:
		msg = fmt.Sprintf("IKE_SA %s established between %s[%s]...%s[%s]", d[control.DetailConnection],
			d[control.DetailLocal], d[control.DetailLocalID], d[control.DetailRemote], d[control.DetailPeerID])
	case evChildUp:
		msg = fmt.Sprintf("CHILD_SA %s established with SPIs %s_i %s_o", d[control.DetailChild],
			spi8(d[control.DetailSPIIn]), spi8(d[control.DetailSPIOut]))
	case evIKEDown:
		msg = fmt.Sprintf("IKE_SA %s deleted (%s)", d[control.DetailConnection], ev.Reason)
	case evChildDown:
		msg = fmt.Sprintf("CHILD_SA %s closed (%s)", d[control.DetailChild], ev.Reason)
	case evIKEFailed, evChildFailed:
		msg = fmt.Sprintf("%s failed: %s", ev.Type, why(ev))
	default:
		msg = ev.Type
	}
	if r.logLevel() < 1 {
		return
	}
	group := "IKE"
	if ev.Type == evChildUp || ev.Type == evChildDown || ev.Type == evChildFailed {
		group = "CHD"
	}
	r.emit("control-log", NewMessage().Set("group", group).Set("level", "1").
		Set("ikesa-name", d[control.DetailConnection]).Set("msg", msg))
}

func why(ev control.Event) string {
	if e := ev.Detail[control.DetailError]; e != "" {
		return ev.Reason + ": " + e
	}
	return ev.Reason
}

func orName(t control.IKETarget) string {
	if t.Child != "" {
		return t.Child
	}
	return t.IKE
}

func verbing(verb string) string {
	if verb == "initiate" {
		return "initiating"
	}
	return verb[:len(verb)-1] + "ing"
}

// yes reads a vici boolean as charon does.
func yes(v string) bool { return v == "yes" || v == "true" || v == "1" }
