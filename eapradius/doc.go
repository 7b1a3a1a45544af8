// Package eapradius is the gateway's RADIUS client, as strongSwan's
// eap-radius plugin is charon's: it relays a remote-access client's EAP
// conversation to an AAA server (RFC 3579) and reports the sessions to it
// (RFC 2866 accounting).
//
// A Conversation has the shape of ike/eap's Server: Start returns the
// EAP-Identity request, Handle takes each EAP response of the client.
// Unlike eap.Server it answers through a callback, from a goroutine of
// the Client, once the server answered: the IKE engine stays sans-I/O
// and the daemon feeds the Step into the SA from its own loop.
//
// What it checks: every answer must carry the request's Identifier, a
// Response Authenticator (RFC 2865 §3) and a Message-Authenticator
// (HMAC-MD5, RFC 3579 §3.2) that check out with the shared secret, on
// every Access-Accept, -Reject and -Challenge, with or without EAP;
// anything else is dropped and counted (ServerStats.Mismatches,
// Malformed), the first mismatch of a server logged. EAP packets go in
// EAP-Message attributes of at most 253 bytes; the server's State is
// echoed. An Access-Accept leaves an Accept: the MSK, MS-MPPE-Recv-Key
// followed by MS-MPPE-Send-Key (RFC 2548 §2.4.2/§2.4.3, salt-encrypted),
// which is how strongSwan's eap-radius joins them; Framed-IP-Address,
// Framed-IPv6-Address and -Prefix, Class, Session-Timeout, Idle-Timeout
// and Acct-Interim-Interval.
//
// Servers and waits: the servers are asked in order of preference; each
// request is sent Tries times, waiting Timeout, then Base times longer
// each time, before the next server is asked; a server that did not
// answer is asked last for DeadTime. A conversation stays with the server
// that answered its first request, whose State ties it there. Each
// request in flight has its own goroutine and UDP socket (a fresh source
// port, so identifiers never run short), at most MaxInFlight at once:
// a dead server delays only the requests waiting for it.
//
// The packet codec and attribute dictionaries are layeh.com/radius's;
// the transport, verification of the Message-Authenticator, EAP
// splitting and the MPPE keys' use are this package's (docs/design.md
// says why).
package eapradius
