// Package proposal names IKEv2 transforms as strongSwan's swanctl.conf
// does ("aes256-sha256-x25519", "aes128gcm16-prfsha256-ecp256",
// "chacha20poly1305-noesn") and turns such strings into the proposals of
// an SA payload (RFC 7296 §3.3) and back. It also chooses, as a responder,
// the transforms of the first proposal both sides accept (RFC 7296 §2.7),
// and describes each algorithm's key, IV, ICV and output sizes for the
// key derivation.
//
// Only the algorithms ipsecd implements are named: an unknown name is an
// error, so that a configuration cannot offer what the daemon cannot do.
// For ESP that is what package sa runs, as sa's table of algorithms says
// (Alg.ESP): the IKE-only integrity algorithms sha384 and sha512 are
// refused in an ESP proposal and passed over in a peer's.
// Everything here is immutable after init and safe for concurrent use.
package proposal
