// Package keys is the cryptography of an IKE SA once the algorithms are
// chosen: the PRF and prf+ (RFC 7296 §2.13), SKEYSEED and the seven IKE SA
// keys SK_d, SK_ai, SK_ar, SK_ei, SK_er, SK_pi, SK_pr (§2.14, and §2.18
// for a rekeyed IKE SA), the CHILD_SA key material split into ESP keys
// (§2.17), the pre-shared-key AUTH payload and the octets a signature in
// AUTH covers (§2.15), and the protection of the Encrypted (SK) payload
// (§3.14) and of the Encrypted Fragment (SKF) payload (RFC 7383 §2.5, each
// fragment sealed like an SK payload, its fragment numbers in the
// associated data): AES-CBC with HMAC-SHA-2 truncated to
// half its output (RFC 3602, RFC 4868), AES-GCM with a 16-byte ICV
// (RFC 5282) and ChaCha20-Poly1305 (RFC 7634), the AEADs with an 8-byte
// explicit IV after a 4-byte salt taken from the key material.
//
// Nonces: an SKCipher seals with IVs from a counter that starts at zero
// and is never reused under its key (one SKCipher per direction per IKE
// SA, and a new IKE SA has new keys); CBC IVs come from crypto/rand.
// Retransmissions resend the sealed bytes and seal nothing again.
//
// An SKCipher is not safe for concurrent use: it belongs to the one
// goroutine that runs its IKE SA. The derivation functions are pure. Key
// material returned is owned by the caller, who wipes it (clear) when done.
package keys
