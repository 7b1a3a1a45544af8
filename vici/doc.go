// Package vici serves strongSwan's Versatile IKE Control Interface on a
// unix socket of the daemon's own (the config's vici: key), so that
// swanctl, govici and the other clients written for strongSwan's charon
// drive ipsecd unchanged.
//
// The wire format is strongSwan's src/libcharon/plugins/vici/README.md:
// segments of a 32-bit length and at most MaxSegment (512 KiB) of data,
// each one packet (PacketType, a name for the named types, a message for
// those that carry one); a message is a tree of sections, key/values and
// lists (Message). message.go and packet.go are the codec, written here
// (govici's is not exported) and fuzzed (fuzz_test.go): input from the
// socket never panics the daemon, nests at most MaxDepth sections, and is
// refused with an error wrapping ErrMalformed that says what is wrong.
//
// Server (server.go, conn.go) serves the socket with the control socket's
// rules (control.Socket: only root and the daemon's uid, at most
// control.MaxConns connections, idle, request and write timeouts). One
// command is in flight per connection: the next packet is read once the
// command is answered. A streamed command (list-sas) sends its events,
// to a client registered for them, before its response. Events a client
// registered for (ike-updown, child-updown, ike-rekey, child-rekey) come
// from the daemon's event stream (control.Monitor) through a queue per
// connection that never blocks the daemon; a client that falls behind
// loses events, one that stops reading is dropped after the write
// timeout.
//
// The commands (commands.go, sas.go, actions.go, conns.go) translate
// vici's requests into what the daemon already does (Backend: the
// control socket's ike commands and counters) and its answers into the
// keys charon writes, so that swanctl --list-sas shows what it shows for
// charon. What swanctl --load-all loads reaches the daemon as items of
// its own config file, checked by its rules: connections and secrets
// (load.go, Loader; their certificates and keys from the credential
// store of creds.go, conn_creds.go) and address pools (pools_load.go,
// PoolLoader); list-certs (certs_list.go) lists the store's certificates
// and the connections'. A command ipsecd does not implement is answered success=no with
// an errmsg that says so, never a silent success; an unknown one with
// CMD_UNKNOWN, as charon does.
//
// Server is safe for concurrent use; Message is not.
package vici
