package eapradius

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/ike/eap"
	"github.com/ipsecd/ipsecd/ike/message"
	"github.com/ipsecd/ipsecd/internal/radiustest"
)

var testUsers = []radiustest.User{
	{Name: "alice", Password: "alice-mschapv2-pw", Reply: [][2]string{
		{"Framed-IP-Address", "10.3.0.7"},
		{"Framed-IPv6-Prefix", "fd00:3::/64"},
		{"Class", `"gold"`},
		{"Session-Timeout", "3600"},
		{"Idle-Timeout", "600"},
		{"Acct-Interim-Interval", "60"},
	}},
	{Name: "carol", Password: "carol-md5-pw"},
}

func testClient(t *testing.T, cfg Config) *Client {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// relay runs a whole conversation: peer (ike/eap's Client, the road
// warrior's end) answers what cv relays from RADIUS, until cv says
// Succeeded or Failed; the last Step and the peer's last status are
// returned.
func relay(t *testing.T, cv *Conversation, peer *eap.Client) (Step, eap.Status, error) {
	t.Helper()
	st, pst, perr, err := exchange(cv, peer)
	if err != nil {
		t.Fatal(err)
	}
	return st, pst, perr
}

// exchange is relay's conversation, an error instead of t.Fatal, for
// goroutines too.
func exchange(cv *Conversation, peer *eap.Client) (Step, eap.Status, error, error) {
	req, err := cv.Start()
	if err != nil {
		return Step{}, 0, nil, err
	}
	for round := 0; round < 10; round++ {
		resp, pst, perr := peer.Handle(req)
		if pst != eap.Continue {
			return Step{}, pst, perr, nil
		}
		ch := make(chan Step, 1)
		cv.Handle(resp, func(s Step) { ch <- s })
		var st Step
		select {
		case st = <-ch:
		case <-time.After(30 * time.Second):
			return Step{}, 0, nil, errors.New("no answer relayed in 30 s")
		}
		if st.Status != eap.Continue {
			_, pst, perr := peer.Handle(st.Packet)
			return st, pst, perr, nil
		}
		req = st.Packet
	}
	return Step{}, 0, nil, errors.New("more than 10 rounds")
}

var testPeer = Peer{NASPort: 7, Calling: netip.MustParseAddrPort("192.0.2.10:4500"), Called: netip.MustParseAddrPort("198.51.100.1:4500")}

// TestFreeRADIUSMSCHAPv2: EAP-MSCHAPv2 between ike/eap's Client and
// FreeRADIUS 3.2, relayed: Access-Accept, and the MSK from the MPPE keys
// equal to what the client derived (MasterReceiveKey | MasterSendKey; the
// client's 32 further zero bytes key HMAC alike, see Accept.MSK), the
// Framed-IP-Address, Class, timeouts and interim interval kept.
func TestFreeRADIUSMSCHAPv2(t *testing.T) {
	fr := radiustest.Start(t, radiustest.Options{Users: testUsers})
	c := testClient(t, Config{Servers: []Server{{Address: fr.Auth, AcctAddress: fr.Acct, Secret: []byte(fr.Secret)}}})
	cv := c.NewConversation(testPeer)
	peer := eap.NewClient(eap.ClientConfig{Identity: "alice", Secret: []byte("alice-mschapv2-pw")})
	st, pst, perr := relay(t, cv, peer)
	if st.Status != eap.Succeeded || pst != eap.Succeeded {
		t.Fatalf("gateway %v (%v), peer %v (%v); want both succeeded", st.Status, st.Err, pst, perr)
	}
	msk, peerMSK := cv.MSK(), peer.MSK()
	if len(msk) != 32 || len(peerMSK) != 64 {
		t.Fatalf("MSK of %d bytes, the peer's of %d; want 32 and 64", len(msk), len(peerMSK))
	}
	if !bytes.Equal(msk, peerMSK[:32]) || !bytes.Equal(peerMSK[32:], make([]byte, 32)) {
		t.Errorf("MSK from RADIUS %x\nwant the peer's %x", msk, peerMSK)
	}
	a := cv.Accept()
	if a.FramedIP != netip.MustParseAddr("10.3.0.7") || a.FramedIPv6Prefix != netip.MustParsePrefix("fd00:3::/64") {
		t.Errorf("Framed-IP-Address %v, Framed-IPv6-Prefix %v; want 10.3.0.7, fd00:3::/64", a.FramedIP, a.FramedIPv6Prefix)
	}
	if len(a.Class) != 1 || string(a.Class[0]) != "gold" || a.SessionTimeout != time.Hour || a.IdleTimeout != 10*time.Minute || a.InterimInterval != time.Minute {
		t.Errorf("Class %q, Session-Timeout %v, Idle-Timeout %v, Acct-Interim-Interval %v; want [gold] 1h 10m 1m", a.Class, a.SessionTimeout, a.IdleTimeout, a.InterimInterval)
	}
	if s := c.Stats()[0]; s.Challenges != 2 || s.Accepts != 1 || s.Mismatches != 0 || s.Retransmits != 0 {
		t.Errorf("stats %+v; want 2 challenges, 1 accept, no mismatch or retransmission", s)
	}
}

// TestFreeRADIUSMD5: EAP-MD5 accepted with no MSK (none to key AUTH).
func TestFreeRADIUSMD5(t *testing.T) {
	fr := radiustest.Start(t, radiustest.Options{Users: testUsers})
	c := testClient(t, Config{Servers: []Server{{Address: fr.Auth, Secret: []byte(fr.Secret)}}})
	cv := c.NewConversation(testPeer)
	peer := eap.NewClient(eap.ClientConfig{Identity: "carol", Secret: []byte("carol-md5-pw"), Methods: []message.EAPType{message.EAPMD5}})
	st, pst, perr := relay(t, cv, peer)
	if st.Status != eap.Succeeded || pst != eap.Succeeded {
		t.Fatalf("gateway %v (%v), peer %v (%v); want both succeeded (the Nak to MD5 relayed)", st.Status, st.Err, pst, perr)
	}
	if cv.MSK() != nil {
		t.Errorf("MSK %x; want none for EAP-MD5", cv.MSK())
	}
}

// TestFreeRADIUSWrongPassword: Access-Reject, relayed as EAP-Failure,
// an AuthError naming the identity and the method.
func TestFreeRADIUSWrongPassword(t *testing.T) {
	fr := radiustest.Start(t, radiustest.Options{Users: testUsers})
	c := testClient(t, Config{Servers: []Server{{Address: fr.Auth, Secret: []byte(fr.Secret)}}})
	cv := c.NewConversation(testPeer)
	peer := eap.NewClient(eap.ClientConfig{Identity: "alice", Secret: []byte("wrong")})
	st, pst, _ := relay(t, cv, peer)
	var ae *eap.AuthError
	if st.Status != eap.Failed || !errors.As(st.Err, &ae) || ae.Identity != "alice" || ae.Method != message.EAPMSCHAPv2 {
		t.Fatalf("gateway %v, %v; want failed with an AuthError of alice's EAP-MSCHAPv2", st.Status, st.Err)
	}
	if message.EAP(st.Packet).Code() != message.EAPFailure || pst != eap.Failed {
		t.Errorf("sent %x, peer %v; want an EAP-Failure the peer fails on", st.Packet, pst)
	}
	if cv.MSK() != nil || cv.Accept() != nil {
		t.Error("a rejected conversation holds an MSK")
	}
	if s := c.Stats()[0]; s.Rejects != 1 {
		t.Errorf("rejects %d; want 1", s.Rejects)
	}
}

// TestFreeRADIUSWrongSecret: FreeRADIUS drops our requests (their
// Message-Authenticator fails with its secret), and the answers of a
// server whose secret is ours but answers with another are counted as
// mismatches; either way no answer is believed and the conversation
// fails with ErrNoAnswer after the tries.
func TestFreeRADIUSWrongSecret(t *testing.T) {
	fr := radiustest.Start(t, radiustest.Options{Users: testUsers})
	var logged strings.Builder
	c := testClient(t, Config{
		Servers: []Server{{Address: fr.Auth, Secret: []byte("not-" + fr.Secret)}},
		Timeout: 200 * time.Millisecond, Tries: 2, Log: testLogger(&logged),
	})
	cv := c.NewConversation(testPeer)
	peer := eap.NewClient(eap.ClientConfig{Identity: "alice", Secret: []byte("alice-mschapv2-pw")})
	start := time.Now()
	st, _, _ := relay(t, cv, peer)
	if st.Status != eap.Failed || !errors.Is(st.Err, ErrNoAnswer) {
		t.Fatalf("%v, %v; want failed with ErrNoAnswer", st.Status, st.Err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("failed after %v; want about 0.2 + 0.28 s", d)
	}
	if !strings.Contains(fr.Log(), "Message-Authenticator") {
		t.Errorf("FreeRADIUS did not complain of the Message-Authenticator")
	}
}

// TestMismatchLoggedOnce: two servers answering with another secret (bare
// UDP sockets replaying a genuine answer signed with the wrong secret)
// are counted on every answer and logged once each; the conversation
// fails with ErrNoAnswer and ErrMismatch (not silence: a wrong secret).
func TestMismatchLoggedOnce(t *testing.T) {
	var servers []Server
	for i := range 2 {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close()
		go answerWith(pc, []byte("other"), 4)
		servers = append(servers, Server{Name: fmt.Sprintf("bad%d", i), Address: pc.LocalAddr().String(), Secret: []byte("ours")})
	}
	var logged strings.Builder
	c := testClient(t, Config{Servers: servers, Timeout: 100 * time.Millisecond, Tries: 2, Log: testLogger(&logged)})
	for range 2 {
		cv := c.NewConversation(testPeer)
		peer := eap.NewClient(eap.ClientConfig{Identity: "alice", Secret: []byte("pw")})
		if st, _, _ := relay(t, cv, peer); !errors.Is(st.Err, ErrNoAnswer) || !errors.Is(st.Err, ErrMismatch) {
			t.Fatalf("%v; want ErrNoAnswer and ErrMismatch", st.Err)
		}
	}
	for _, s := range c.Stats() {
		if s.Mismatches != 4 {
			t.Errorf("%s: mismatches %d; want 4 (each try's answer)", s.Name, s.Mismatches)
		}
	}
	for _, name := range []string{"bad0", "bad1"} {
		if n := strings.Count(logged.String(), "server="+name); n != 2 { // the mismatch, and "not answering" once
			t.Errorf("%s logged %d times; want its mismatch once and its silence once:\n%s", name, n, logged.String())
		}
	}
	if n := strings.Count(logged.String(), "check the shared secret"); n != 2 {
		t.Errorf("mismatch logged %d times; want once per server:\n%s", n, logged.String())
	}
}

// TestFreeRADIUSRejectReplyMessage: an Access-Reject's Reply-Message is
// the server's text: the AuthError, which the daemon logs, carries it
// escaped (no newline or escape sequence reaches the log), and says the
// failure is a rejection.
func TestFreeRADIUSRejectReplyMessage(t *testing.T) {
	fr := radiustest.Start(t, radiustest.Options{Users: []radiustest.User{
		{Name: "mallory", Password: "mallory-pw", Reply: [][2]string{{"Reply-Message", `"denied\nFAKE LOG LINE\033[2J"`}}},
	}})
	c := testClient(t, Config{Servers: []Server{{Address: fr.Auth, Secret: []byte(fr.Secret)}}})
	st, _, _ := relay(t, c.NewConversation(testPeer), eap.NewClient(eap.ClientConfig{Identity: "mallory", Secret: []byte("wrong")}))
	var ae *eap.AuthError
	if !errors.As(st.Err, &ae) || ae.Failure != eap.FailureRejected {
		t.Fatalf("%v; want an AuthError of Failure rejected", st.Err)
	}
	msg := st.Err.Error()
	if !strings.Contains(msg, "Access-Reject") || !strings.Contains(msg, `denied\nFAKE LOG LINE`) || strings.ContainsAny(msg, "\n\x1b") {
		t.Errorf("error %q; want the Reply-Message escaped", msg)
	}
	t.Logf("logged as: %s", msg)
}
