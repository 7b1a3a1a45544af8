// Package message is the wire format of IKEv2 messages (RFC 7296 §3): the
// IKE header, the generic payload header with its critical bit, and the
// payloads ipsecd understands (SA with proposals, transforms and
// attributes, KE, Nonce, Notify, Delete, IDi/IDr, AUTH, TSi/TSr, CERT
// and CERTREQ, the SK envelope and RFC 7383's Encrypted Fragment, SKF,
// the Configuration payload CP with its attributes (cp.go, RFC 8598's
// INTERNAL_DNS_DOMAIN among them) and the EAP payload's packet (eap.go;
// package ike/eap runs the methods). VendorID is kept as an opaque body.
// It neither encrypts
// nor authenticates: the SK and SKF payloads' bodies are handed over as
// bytes, and package ike/keys (SKCipher) opens and seals them.
//
// Parsing: Parse checks the header and walks the payload chain without
// copying; every Payload.Body aliases the input, so the caller keeps the
// input alive and unchanged while it uses the result. The typed views
// (SA, KE, Notify, ...) are byte-slice types over a body, each with a
// decoding method that checks every length before it reads. Work is linear
// in the input: a payload is at least 4 bytes and each is visited once.
// A payload type Parse does not know is skipped, unless its critical bit is
// set: then Parse returns a *CriticalError naming it, so that the caller
// can answer UNSUPPORTED_CRITICAL_PAYLOAD (RFC 7296 §2.5).
//
// Encoding: Encode and AppendPayloads write a message or a payload chain,
// setting next-payload fields and lengths; the Append* functions write one
// payload body each.
//
// Allocation: Parse allocates the Message and its slice of payloads, the
// decoding views their result slices; nothing copies payload bytes. IKE
// runs a few messages per SA per rekey, so the package favours plain
// values over pooling.
//
// Nothing here holds state; everything is safe for concurrent use on
// distinct buffers.
package message
