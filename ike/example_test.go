package ike_test

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/ipsecd/ipsecd/ike"
	"github.com/ipsecd/ipsecd/ike/message"
	"github.com/ipsecd/ipsecd/ike/proposal"
)

// Example runs an initiator and a responder against each other in memory,
// the way the daemon drives them over its UDP sockets: every message one
// side returns goes to the other, and the events say what to install.
func Example() {
	ikeProps, _ := proposal.ParseList(message.ProtoIKE, []string{"aes256-sha256-x25519"})
	espProps, _ := proposal.ParseList(message.ProtoESP, []string{"aes128gcm16"})
	a := &ike.Config{LocalID: ike.MustParseIdentity("a.example.net"), RemoteID: ike.MustParseIdentity("b.example.net"), PSK: []byte("example only"),
		Proposals: ikeProps,
		Child: ike.ChildConfig{Proposals: espProps,
			LocalTS:  []netip.Prefix{netip.MustParsePrefix("10.10.0.0/24")},
			RemoteTS: []netip.Prefix{netip.MustParsePrefix("10.20.0.0/24")}}}
	b := *a
	b.LocalID, b.RemoteID = a.RemoteID, a.LocalID
	b.Child.LocalTS, b.Child.RemoteTS = a.Child.RemoteTS, a.Child.LocalTS
	addrA, addrB := netip.MustParseAddrPort("192.0.2.1:500"), netip.MustParseAddrPort("192.0.2.2:500")
	now := time.Now()

	initiator, msg, _ := ike.Initiate(a, addrA, addrB, now)
	// The responder's first message makes its SA.
	responder, msg, _ := ike.Respond(&b, addrB, addrA, msg, now)
	msg, _ = initiator.Handle(msg, now) // IKE_AUTH request
	msg, _ = responder.Handle(msg, now) // IKE_AUTH response
	initiator.Handle(msg, now)

	for _, sa := range []*ike.SA{initiator, responder} {
		for _, e := range sa.TakeEvents() {
			if e.Kind == ike.EventChildUp {
				c := e.Child
				fmt.Printf("%v: child %s, inbound key %d bytes, outbound key %d bytes\n",
					sa.State(), c.Suite, len(c.In.Enc), len(c.Out.Enc))
			}
		}
	}
	// Output:
	// ESTABLISHED: child aes128gcm16-noesn, inbound key 20 bytes, outbound key 20 bytes
	// ESTABLISHED: child aes128gcm16-noesn, inbound key 20 bytes, outbound key 20 bytes
}
