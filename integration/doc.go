//go:build linux

// Package integration holds the tests that run the real ipsecd binary in
// network namespaces joined by a veth pair, and against an independent ESP
// implementation (scapy). They need root; without it they skip. Linux
// only, as network namespaces are.
//
// Every test creates its own namespaces, removes them and stops its
// processes when it ends, pass or fail, and sends traffic only inside them.
package integration
