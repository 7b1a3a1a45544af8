// Package daemon is ipsecd's daemon without its command line: a config
// file (package config) brought up over a node (package node), kept in
// step with the file, and taken down. cmd/ipsecd is flags, signals and
// formatting around Start, Reload and Stop.
//
// A Daemon owns, around its node:
//
//   - the start-up order (start.go): the SAs are built and checked
//     before any socket is bound, the underlay opens, the interfaces come
//     up with their fail-closed guards added before any route
//     (SyncInterfacesGuarded), IKE starts before the control socket
//     answers, metrics last. A start that fails removes what it made,
//     except the guards a previous run left;
//   - the reload order (reload.go): the whole file is checked first and a
//     refused file changes nothing; then guards of new routes, the
//     interfaces, the SAD in one table swap (make-before-break), IKE's
//     connections, the log section, and the guards of removed routes
//     last. A reload changes only what the file owns (package node,
//     Ownership);
//   - the fail-closed guard routes (guards.go; docs/design.md, "Fail
//     closed"): adopted from a crashed run, kept in step with the running
//     config and what the interfaces still have, removed at a clean stop
//     unless fail_closed.keep_on_stop;
//   - a road warrior's routes (roadroutes.go, guards_dynamic.go): IKE's
//     Router, which puts each route of a child of a connection with vips
//     into its interface's table with a guard, and a throw route of the
//     gateway beside a route that holds it; and the rules that reach the
//     interfaces' tables (rule_priority), adopted and cleaned at start
//     as the guards are, kept in step at a reload, removed at a stop;
//   - IKE (ike.go, package ikenode): started when the config has
//     connections, at start or at the first reload that brings some; the
//     node hands it IKE on port 4500 and the data path's acquires
//     through the handlers it sets (node.Node.SetNonESPHandler,
//     SetAcquireHandler), cleared before it stops;
//   - the control socket's backend (backend.go, backend_ops.go): the
//     node's SAs, policies, interfaces and counters as package control
//     words them, with the node's errors mapped to control's codes, and
//     the node's events as control.Event (MonitorEvent);
//   - the Prometheus collector and the metrics server (metrics.go),
//     which read the node's counters at scrape time.
//
// Keys: Start takes cfg over once it succeeds; Reload zeroes the keys of
// the config it replaces (and of a refused one); Stop empties the SAD,
// which zeroes the SAs' keys, and zeroes the running config's.
//
// A Daemon's methods are safe for concurrent use: reloads are serialised
// by one mutex, and the control socket, the metrics server and the signal
// handler of cmd/ipsecd call it from their own goroutines.
package daemon
