package eapradius

import (
	"testing"

	"layeh.com/radius"
	"layeh.com/radius/rfc2865"
	"layeh.com/radius/vendors/microsoft"

	"github.com/ipsecd/ipsecd/ike/eap"
	"github.com/ipsecd/ipsecd/ike/message"
)

// fuzzRequest is the request every fuzzed answer answers.
var fuzzRequest = func() []byte {
	p := &radius.Packet{Code: radius.CodeAccessRequest, Identifier: 7, Secret: []byte("fuzz")}
	p.Add(rfc2865.UserName_Type, radius.Attribute("alice"))
	b, err := encodeRequest(p)
	if err != nil {
		panic(err)
	}
	return b
}()

// FuzzAnswer feeds bytes as a server's answer through what the client
// reads of it: verification, the EAP-Message join, and the Accept's
// attributes with the MPPE keys' decryption (parsed unverified too, so
// that the fuzzer reaches them without forging HMACs). Nothing may
// panic, and a verified answer has the request's Identifier.
func FuzzAnswer(f *testing.F) {
	seed := func(p *radius.Packet) { f.Add(signAnswer(p, fuzzRequest, []byte("fuzz"))) }
	acc := &radius.Packet{Code: radius.CodeAccessAccept, Secret: []byte("fuzz")}
	copy(acc.Authenticator[:], fuzzRequest[4:20])
	microsoft.MSMPPERecvKey_Add(acc, make([]byte, 32))
	microsoft.MSMPPESendKey_Add(acc, make([]byte, 32))
	acc.Add(rfc2865.FramedIPAddress_Type, radius.Attribute{10, 3, 0, 7})
	acc.Add(rfc2865.Class_Type, radius.Attribute("gold"))
	addEAP(acc, message.AppendEAPResult(nil, message.EAPSuccess, 3))
	seed(acc)
	ch := &radius.Packet{Code: radius.CodeAccessChallenge}
	addEAP(ch, message.AppendEAP(nil, message.EAPRequest, 2, message.EAPTLS, make([]byte, 400)))
	ch.Add(rfc2865.State_Type, radius.Attribute("state"))
	seed(ch)
	f.Add([]byte{2, 7, 0, 20})
	f.Fuzz(func(t *testing.T, b []byte) {
		if p, err := verifyAnswer(b, fuzzRequest, []byte("fuzz")); err == nil {
			if p.Identifier != fuzzRequest[1] {
				t.Fatalf("identifier %d believed; want %d", p.Identifier, fuzzRequest[1])
			}
			joinEAP(p.Attributes)
			parseAccept(p, fuzzRequest[4:20])
		}
		if len(b) >= headerLen {
			if attrs, err := radius.ParseAttributes(b[headerLen:]); err == nil {
				joinEAP(attrs)
				parseAccept(&radius.Packet{Attributes: attrs, Secret: []byte("fuzz")}, fuzzRequest[4:20])
			}
		}
	})
}

// FuzzConversation feeds bytes, parsed as a server's answer, to a
// conversation waiting for one: whatever the server sends, the step is
// Continue with an EAP request, Succeeded with an EAP-Success, or Failed
// with an EAP-Failure and an error; nothing panics.
func FuzzConversation(f *testing.F) {
	ch := &radius.Packet{Code: radius.CodeAccessChallenge}
	addEAP(ch, message.AppendEAP(nil, message.EAPRequest, 2, message.EAPMSCHAPv2, make([]byte, 40)))
	ch.Add(rfc2865.State_Type, radius.Attribute("state"))
	b, _ := ch.MarshalBinary()
	f.Add(b)
	rej := &radius.Packet{Code: radius.CodeAccessReject}
	addEAP(rej, message.AppendEAPResult(nil, message.EAPFailure, 2))
	b, _ = rej.MarshalBinary()
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := radius.Parse(b, []byte("fuzz"))
		if err != nil {
			return
		}
		cv := (&Client{cfg: Config{NASIdentifier: "ipsecd"}}).NewConversation(Peer{})
		cv.identity, cv.busy = "alice", true
		st := cv.answered(answer{p: p, req: fuzzRequest})
		e := message.EAP(st.Packet)
		switch {
		case !e.IsValid():
			t.Fatalf("step %v with an invalid EAP packet %x", st.Status, st.Packet)
		case st.Status == eap.Continue && e.Code() != message.EAPRequest,
			st.Status == eap.Succeeded && e.Code() != message.EAPSuccess,
			st.Status == eap.Failed && (e.Code() != message.EAPFailure || st.Err == nil):
			t.Fatalf("step %v with EAP code %d, error %v", st.Status, e.Code(), st.Err)
		}
	})
}
