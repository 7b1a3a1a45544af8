// Package eap runs the EAP methods of IKEv2's EAP authentication (RFC
// 7296 §2.16) as sans-I/O state machines: a Server (the gateway, which
// asks) and a Client (the road warrior, which answers) each take one EAP
// packet (message.EAP, the EAP payload's body) and return the packet to
// send, with a Status that says whether the conversation goes on,
// succeeded or failed. No socket, goroutine or clock: the IKE engine
// carries the packets in IKE_AUTH exchanges and keys the AUTH payloads
// with the MSK a method leaves.
//
// Methods:
//
//   - EAP-Identity (RFC 3748 §5.1): the server asks first; the identity
//     answered names the user whose secret the method checks, and is the
//     identity a lease and a log line name.
//   - EAP-MD5-Challenge (RFC 3748 §5.4, the CHAP computation of RFC 1994):
//     MD5(identifier | secret | challenge). One way (the server does not
//     prove itself) and no MSK: AUTH is then keyed as without EAP
//     (RFC 7296 §2.16).
//   - EAP-MSCHAPv2 (draft-kamath-pppext-eap-mschapv2-02 framing; the
//     computations of RFC 2759 §8, and the MSK of RFC 3079 §3 as
//     strongSwan's eap_mschapv2 lays it out: MasterReceiveKey |
//     MasterSendKey | 32 zero bytes, 64 bytes in all). Mutual: the client
//     accepts EAP-Success only after checking the server's authenticator
//     response.
//   - EAP-TLS (RFC 5216; RFC 9190 for TLS 1.3), as TLSServer and
//     TLSClient: crypto/tls runs over the EAP packets (tlspipe.go: one
//     goroutine per conversation, whose Read waits for the next
//     reassembled message, ended with the conversation and bounded per
//     step), in fragments of TLSFragmentSize with the L, M and S flags
//     and empty packets acknowledging each fragment (tlsfrag.go). Both
//     certificates are verified: the client's against the gateway's CAs
//     and eap_id, the server's against the client's CAs and the server
//     identity. A TLS 1.3 server ends with the one-byte success
//     indication of RFC 9190 §2.5. MSK: TLS 1.3's exporter
//     "EXPORTER_EAP_TLS_Key_Material" with context 0x0D; TLS 1.2's
//     PRF(master, "client EAP encryption", randoms), 64 bytes, computed
//     here (tls12msk.go) from crypto/tls's key log and the ServerHello,
//     since crypto/tls exports nothing from a TLS 1.2 peer without the
//     Extended Master Secret, such as strongSwan 5.9.8. strongSwan 6.1
//     derives the same MSKs and sends and demands the same success
//     indication, in both roles (integration's TestIKECharon61EAPTLS).
//     The IKE engine
//     may hold both certificates to its own identity rule
//     (TLSServerConfig.VerifyPeer, TLSClientConfig.VerifyServer).
//
// Rules that make it safe: a wrong password and an unknown identity fail
// the same way for the peer (the computation runs against a random hash
// for an unknown one), and the caller learns which from AuthError, which
// names the identity and the method but never a secret. The server
// refuses an MSCHAPv2 Name that is not the EAP identity, so that the
// identity a lease and a log line name is the one whose password was
// checked. Secrets and the values derived from them are zeroed when no
// longer needed; MSK returns a copy and Wipe clears what is left. A
// Server or Client is one conversation, not safe for concurrent use.
package eap
