// Package control is the daemon's control socket: a unix stream socket
// (mode 0600, in a directory created 0700) that speaks one JSON object per
// line each way.
//
// A request names a command and its arguments:
//
//	{"cmd":"state.list","keys":false}
//	{"cmd":"state.get","id":{"dir":"in","spi":"0x1001","dst":"192.0.2.1"}}
//	{"cmd":"state.add","state":{"src":"192.0.2.1","dst":"192.0.2.2","spi":"0x1001",...}}
//	{"cmd":"state.delete","id":{...}}
//	{"cmd":"policy.list"}  {"cmd":"policy.add","policy":{...}}  {"cmd":"policy.delete","policy":{...}}
//	{"cmd":"stats"}  {"cmd":"interface.list"}  {"cmd":"ping"}
//	{"cmd":"state.flush"}  {"cmd":"state.count"}  {"cmd":"reload"}
//	{"cmd":"state.update","id":{...},"lifetime":{"hard_packets":1000}}
//	{"cmd":"monitor"}
//	{"cmd":"ike.list"}
//	{"cmd":"ike.initiate","ike":"NAME"}  {"cmd":"ike.terminate","child":"NAME"}  {"cmd":"ike.rekey","child":"NAME"}
//
// (ike.initiate, ike.terminate and ike.rekey take one of "ike", a
// connection's name, and "child", a child's: each child of a connection
// is acted on by its own; a daemon without IKE answers the ike commands
// with code "invalid"),
// and the answer is {"ok":true,"result":...} or
// {"ok":false,"error":"what is wrong","code":"not_found"} (the codes:
// not_found, exists, invalid, busy, denied, timeout, and internal for the
// rest). A connection may
// carry any number of requests, answered in order. States and policies use
// the field names of the config file (package config), so that what
// `ipsecd state list --json` prints reads like the file. Every name in the
// JSON is snake_case, and an SPI is always the string "0x1001" (hex without
// leading zeros, as the metrics' spi label has it; a request may also give
// it in decimal). stats answers one
// object keyed by counter name, in /proc/net/xfrm_stat order.
//
// monitor is answered {"ok":true} and then, on the same connection, one
// Event per line as the daemon changes, until either side closes it: a
// stream (monitor.go) rather than one answer. A client that falls behind
// loses events and is told how many (events_lost); one that takes no line
// for WriteTimeout is dropped. The daemon never waits for it.
//
// Only root and the socket's owner (the uid the daemon runs as) are
// served, whatever the socket's mode: the kernel's record of who connected
// (SO_PEERCRED) decides. The server serves at most MaxConns connections at
// once, closes one that is idle for IdleTimeout, takes longer than
// RequestTimeout to send a request line or longer than WriteTimeout to
// take an answer, and reads lines of at most MaxLine bytes. A connection it
// refuses gets one answer before it is closed, with code "denied" (wrong
// uid) or "busy" (too many connections); a request cut short by the
// timeout gets code "timeout". Client dials again when the server closed
// its idle connection.
//
// Keys leave the daemon only in answers to requests with "keys":true; the
// Server removes them from everything else, whatever the Backend returns.
//
// The wire types are all this package's, the ike commands' too (IKESAInfo,
// IKEChildInfo, IKETarget): it links neither the IKE engine nor the config
// file's decoder (TestImportsNoIKEOrConfig), so a client of the socket
// gets the protocol alone.
//
// Package daemon implements Backend (and IKEBackend); Server and Client
// are safe for concurrent use.
package control
