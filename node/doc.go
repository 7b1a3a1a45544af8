// Package node is the composition root of ipsecd: one Node owns the
// machinery that carries ESP (RFC 4303) for a process, and every entry
// point (the daemon in package daemon, the sidecar netstack in package
// stack) builds it here rather than assembling its own, and IKE (package
// ikenode) installs its children through it. It does not read the config
// file (package config): its callers translate that into node.Config and
// sa's types, so the sidecar links no YAML decoder.
//
// A Node owns:
//
//   - the SAD (package sa) and its counters;
//   - the interface registry (package xfrmif) and each interface's
//     sending workers;
//   - the underlay sockets (package underlay) and the forwarding engine
//     (package datapath) over them;
//   - the lifetime ticker and the expiry queue that carries the SAs'
//     lifetime events off the data path (sa's event handler must not
//     block): the ticker logs them and removes hard-expired SAs;
//   - the key-use memory (sa.KeyOwners): a key that any SA of this
//     node had, of either direction, running or removed, is refused for
//     a new SA, as its sequence numbers (the AEADs' nonces) would start
//     again at 1;
//   - the sequence-reservation directory (package seqstate) and the
//     goroutine that saves the inbound SAs' replay-window tops.
//
// Both are for static keys. IKE's SAs (Owner.FreshKeys) have keys derived
// for each child, never given to another SA and forgotten at a restart:
// they get no sequence record and run without a state directory, and
// their keys are remembered only while they run, so that a daemon
// rekeying every few seconds for months keeps neither files nor memory
// per rekey (TestDayOfRekeys).
//
// # Ownership
//
// Every SA and policy a Node holds has an Owner: the config file
// (OwnerFile), the control socket (OwnerControl), or IKE (OwnerIKE, or
// "ike:" and a name per IKE SA). Sync changes only what one owner
// holds (a config reload does not remove what the control socket added);
// AddState, AddPolicy and InstallChild add under an owner; RemoveOwner
// removes all of one owner's. Deleting by id (the control socket's
// `state delete`) removes whoever owns it, as `ip xfrm state delete`
// does. Ownership is bookkeeping for the control plane: the data path
// never looks at it.
//
// A running SA is never changed in place but for its limits
// (UpdateLifetime, and a reload that names it with new ones): a new key,
// algorithm or any other setting goes under a new SPI, installed beside the old SA, which
// is removed once the peer uses the new one (make-before-break; see
// InstallChild).
//
// # IKE
//
// IKE (package ikenode) runs beside a Node and changes it through the
// same methods: AllocSPI reserves an inbound SPI for a negotiation
// (ReleaseSPI when it went unused), InstallChild puts a child's pair in
// and can take the pair it replaces out in the same table change,
// RemoveStates takes a pair out, SetPeer follows the peer's new NAT
// mapping. Its handlers are set on a running Node, since IKE starts
// after it: SetNonESPHandler for IKE's datagrams on the ESP-in-UDP port
// (4500, after the non-ESP marker) and SetAcquireHandler for the
// acquires of trap policies (start_action trap). Both run on data-path
// workers and must not block. The Node does not link the IKE engine.
//
// # Concurrency
//
// A Node's methods are safe for concurrent use. Control-plane changes are
// serialised by one mutex; the data path reads the SAD and the registry
// through their lock-free tables and never takes it.
package node
