package eap

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/ipsecd/ipsecd/ike/message"
)

var secrets = map[string]string{"alice": "alice-mschapv2-pw", "carol": "carol-md5-pw", `CORP\dave`: "dave-pw"}

func lookup(id string) ([]byte, bool) {
	s, ok := secrets[id]
	return []byte(s), ok
}

// converse runs a server and a client until one is done, at most 10
// rounds, and returns both statuses and errors.
func converse(t *testing.T, s *Server, c *Client) (ss, cs Status, serr, cerr error) {
	t.Helper()
	req, err := s.Start()
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		var resp []byte
		resp, cs, cerr = c.Handle(req)
		if cs != Continue {
			return ss, cs, serr, cerr
		}
		req, ss, serr = s.Handle(resp)
		if ss == Failed {
			// The client sees the EAP-Failure too.
			_, cs, cerr = c.Handle(req)
			return ss, cs, serr, cerr
		}
		if ss == Succeeded {
			_, cs, cerr = c.Handle(req)
			return ss, cs, serr, cerr
		}
	}
	t.Fatal("no end after 10 rounds")
	return
}

func TestConversations(t *testing.T) {
	for _, tt := range []struct {
		name         string
		method       message.EAPType
		clientMethod []message.EAPType
		identity     string
		secret       string
		wantServer   Status
		wantReason   string // of the server's AuthError
		mskLen       int
	}{
		{"mschapv2", message.EAPMSCHAPv2, nil, "alice", "alice-mschapv2-pw", Succeeded, "", 64},
		{"mschapv2 with a domain", message.EAPMSCHAPv2, nil, `CORP\dave`, "dave-pw", Succeeded, "", 64},
		{"mschapv2 wrong password", message.EAPMSCHAPv2, nil, "alice", "guess", Failed, "wrong password", 0},
		{"mschapv2 unknown user", message.EAPMSCHAPv2, nil, "mallory", "guess", Failed, "unknown identity", 0},
		{"md5", message.EAPMD5, []message.EAPType{message.EAPMD5}, "carol", "carol-md5-pw", Succeeded, "", 0},
		{"md5 wrong password", message.EAPMD5, []message.EAPType{message.EAPMD5}, "carol", "guess", Failed, "wrong secret", 0},
		{"md5 unknown user", message.EAPMD5, []message.EAPType{message.EAPMD5}, "mallory", "guess", Failed, "unknown identity", 0},
		{"nak", message.EAPMD5, nil, "alice", "alice-mschapv2-pw", Failed, "the peer refuses the method (it wants EAP-MSCHAPv2)", 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := NewServer(ServerConfig{Method: tt.method, Secret: lookup})
			c := NewClient(ClientConfig{Identity: tt.identity, Secret: []byte(tt.secret), Methods: tt.clientMethod})
			ss, cs, serr, cerr := converse(t, s, c)
			if ss != tt.wantServer || cs != tt.wantServer {
				t.Fatalf("server %s (%v), client %s (%v); want %s", ss, serr, cs, cerr, tt.wantServer)
			}
			if s.Identity() != tt.identity {
				t.Errorf("server's identity %q, want %q", s.Identity(), tt.identity)
			}
			if ss == Succeeded {
				if len(s.MSK()) != tt.mskLen || !bytes.Equal(s.MSK(), c.MSK()) {
					t.Errorf("MSKs %x and %x, want equal of %d bytes", s.MSK(), c.MSK(), tt.mskLen)
				}
				return
			}
			var ae *AuthError
			if !errors.As(serr, &ae) || !errors.Is(serr, ErrAuthFailed) || ae.Reason != tt.wantReason || ae.Identity != tt.identity || ae.Method != tt.method {
				t.Errorf("server error %v, want an AuthError of %q for %q", serr, tt.wantReason, tt.identity)
			}
			// The word the counters carry.
			wantFailure := map[string]Failure{"wrong password": FailureWrongPassword, "wrong secret": FailureWrongPassword,
				"unknown identity": FailureUnknownUser}[tt.wantReason]
			if strings.HasPrefix(tt.wantReason, "the peer refuses the method") {
				wantFailure = FailureMethodRefused
			}
			if ae != nil && ae.Failure != wantFailure {
				t.Errorf("server's failure %v, want %v", ae.Failure, wantFailure)
			}
			if strings.Contains(serr.Error(), tt.secret) || strings.Contains(cerr.Error(), tt.secret) {
				t.Errorf("an error names the secret: %v / %v", serr, cerr)
			}
			if !errors.Is(cerr, ErrAuthFailed) {
				t.Errorf("client error %v, want ErrAuthFailed", cerr)
			}
			if s.MSK() != nil || c.MSK() != nil {
				t.Error("an MSK after a failure")
			}
		})
	}
}

// TestUnknownUserLooksLikeWrongPassword: the peer sees the same packets
// (an EAP-Failure of the same identifier) for an unknown identity as for
// a wrong password.
func TestUnknownUserLooksLikeWrongPassword(t *testing.T) {
	last := func(id, secret string) []byte {
		s := NewServer(ServerConfig{Method: message.EAPMSCHAPv2, Secret: lookup, Rand: bytes.NewReader(make([]byte, 64))})
		c := NewClient(ClientConfig{Identity: id, Secret: []byte(secret), Rand: bytes.NewReader(make([]byte, 64))})
		req, _ := s.Start()
		for {
			resp, _, _ := c.Handle(req)
			out, st, _ := s.Handle(resp)
			if st != Continue {
				return out
			}
			req = out
		}
	}
	if a, b := last("alice", "guess"), last("mallory", "guess"); !bytes.Equal(a, b) {
		t.Errorf("wrong password %x, unknown user %x", a, b)
	}
}

// TestNameMustBeIdentity: an MSCHAPv2 response naming another user than
// the EAP identity is refused, so that bob's password cannot log in as
// alice.
func TestNameMustBeIdentity(t *testing.T) {
	secrets["bob"] = "bob-pw"
	defer delete(secrets, "bob")
	s := NewServer(ServerConfig{Method: message.EAPMSCHAPv2, Secret: lookup})
	req, _ := s.Start()
	ch, _, err := s.Handle(message.AppendEAP(nil, message.EAPResponse, message.EAP(req).Identifier(), message.EAPIdentity, []byte("alice")))
	if err != nil {
		t.Fatal(err)
	}
	bob := NewClient(ClientConfig{Identity: "bob", Secret: []byte("bob-pw")})
	resp, _, _ := bob.Handle(ch)
	_, st, err := s.Handle(resp)
	var ae *AuthError
	if st != Failed || !errors.As(err, &ae) || ae.Identity != "alice" || !strings.Contains(ae.Reason, `names "bob"`) {
		t.Errorf("got %s, %v; want a failure for alice naming bob", st, err)
	}
}

// TestClientChecksServer: a server that does not know the password
// cannot make the client believe it; nor can an EAP-Success before the
// method finished.
func TestClientChecksServer(t *testing.T) {
	c := NewClient(ClientConfig{Identity: "alice", Secret: []byte("alice-mschapv2-pw")})
	ch := message.AppendEAP(nil, message.EAPRequest, 2, message.EAPMSCHAPv2,
		append(appendMS(nil, opChallenge, 2, 1+challengeLen+4), append(append([]byte{challengeLen}, make([]byte, challengeLen)...), "evil"...)...))
	if _, st, err := c.Handle(ch); st != Continue || err != nil {
		t.Fatalf("challenge: %s %v", st, err)
	}
	msg := "S=" + strings.Repeat("0", 40) + " M=hello"
	forged := message.AppendEAP(nil, message.EAPRequest, 3, message.EAPMSCHAPv2, append(appendMS(nil, opSuccess, 2, len(msg)), msg...))
	if _, st, err := c.Handle(forged); st != Failed || !errors.Is(err, ErrAuthFailed) {
		t.Errorf("a forged authenticator response: %s %v, want an authentication failure", st, err)
	}

	c = NewClient(ClientConfig{Identity: "alice", Secret: []byte("pw")})
	c.Handle(message.AppendEAP(nil, message.EAPRequest, 1, message.EAPIdentity, nil))
	if _, st, err := c.Handle(message.AppendEAPResult(nil, message.EAPSuccess, 1)); st != Failed || !errors.Is(err, ErrProtocol) {
		t.Errorf("EAP-Success after the identity alone: %s %v, want a protocol error", st, err)
	}
}

func TestServerProtocolErrors(t *testing.T) {
	for _, tt := range []struct {
		name string
		resp func(req message.EAP) []byte
	}{
		{"wrong identifier", func(req message.EAP) []byte {
			return message.AppendEAP(nil, message.EAPResponse, req.Identifier()+1, message.EAPIdentity, []byte("alice"))
		}},
		{"a request", func(req message.EAP) []byte {
			return message.AppendEAP(nil, message.EAPRequest, req.Identifier(), message.EAPIdentity, []byte("alice"))
		}},
		{"empty identity", func(req message.EAP) []byte {
			return message.AppendEAP(nil, message.EAPResponse, req.Identifier(), message.EAPIdentity, nil)
		}},
		{"identity too long", func(req message.EAP) []byte {
			return message.AppendEAP(nil, message.EAPResponse, req.Identifier(), message.EAPIdentity, bytes.Repeat([]byte("a"), MaxIdentity+1))
		}},
		{"method before identity", func(req message.EAP) []byte {
			return message.AppendEAP(nil, message.EAPResponse, req.Identifier(), message.EAPMSCHAPv2, []byte{opResponse})
		}},
		{"truncated", func(req message.EAP) []byte { return []byte{2, req.Identifier(), 0, 9, 1} }},
	} {
		s := NewServer(ServerConfig{Method: message.EAPMSCHAPv2, Secret: lookup})
		req, _ := s.Start()
		out, st, err := s.Handle(tt.resp(req))
		if st != Failed || !errors.Is(err, ErrProtocol) || message.EAP(out).Code() != message.EAPFailure {
			t.Errorf("%s: %s %v %x, want Failed with ErrProtocol and an EAP-Failure", tt.name, st, err, out)
		}
		if _, st, _ := s.Handle(tt.resp(req)); st != Failed {
			t.Errorf("%s: a packet after the failure: %s", tt.name, st)
		}
	}
}

// FuzzServer: after a good identity, any packet ends or continues the
// conversation without a panic, and a failure always comes with an
// EAP-Failure to send.
func FuzzServer(f *testing.F) {
	f.Add([]byte{2, 2, 0, 6, 26, 2})
	c := NewClient(ClientConfig{Identity: "alice", Secret: []byte("alice-mschapv2-pw")})
	s := NewServer(ServerConfig{Method: message.EAPMSCHAPv2, Secret: lookup, Rand: bytes.NewReader(make([]byte, 64))})
	req, _ := s.Start()
	resp, _, _ := c.Handle(req)
	req, _, _ = s.Handle(resp)
	resp, _, _ = c.Handle(req)
	f.Add(resp)
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, m := range []message.EAPType{message.EAPMSCHAPv2, message.EAPMD5} {
			s := NewServer(ServerConfig{Method: m, Secret: lookup, Rand: bytes.NewReader(make([]byte, 64))})
			req, _ := s.Start()
			s.Handle(message.AppendEAP(nil, message.EAPResponse, message.EAP(req).Identifier(), message.EAPIdentity, []byte("alice")))
			out, st, err := s.Handle(b)
			if st == Failed && (err == nil || message.EAP(out).Code() != message.EAPFailure) {
				t.Fatalf("failed with %v and %x", err, out)
			}
			if st == Succeeded {
				t.Fatalf("succeeded on %x", b)
			}
		}
	})
}

// FuzzClient: any packet from a server is answered, refused or ends the
// conversation without a panic; a success needs the method finished.
func FuzzClient(f *testing.F) {
	f.Add([]byte{1, 1, 0, 5, 1})
	s := NewServer(ServerConfig{Method: message.EAPMSCHAPv2, Secret: lookup, Rand: bytes.NewReader(make([]byte, 64))})
	req, _ := s.Start()
	f.Add(req)
	req, _, _ = s.Handle(message.AppendEAP(nil, message.EAPResponse, message.EAP(req).Identifier(), message.EAPIdentity, []byte("alice")))
	f.Add(req)
	f.Fuzz(func(t *testing.T, b []byte) {
		c := NewClient(ClientConfig{Identity: "alice", Secret: []byte("pw"), Methods: []message.EAPType{message.EAPMSCHAPv2, message.EAPMD5}})
		for range 3 {
			out, st, _ := c.Handle(b)
			if st == Succeeded {
				t.Fatalf("succeeded on %x", b)
			}
			if st == Continue && !message.EAP(out).IsValid() {
				t.Fatalf("answered %x with an invalid packet %x", b, out)
			}
		}
	})
}

// TestSecretLeftAlone: the server reads the caller's secret and leaves
// it as it was (the caller keeps it for the next login), whether the
// login succeeds or fails.
func TestSecretLeftAlone(t *testing.T) {
	stored := []byte("alice-mschapv2-pw")
	for _, m := range []message.EAPType{message.EAPMSCHAPv2, message.EAPMD5} {
		for _, pw := range []string{"alice-mschapv2-pw", "guess"} {
			s := NewServer(ServerConfig{Method: m, Secret: func(string) ([]byte, bool) { return stored, true }})
			c := NewClient(ClientConfig{Identity: "alice", Secret: []byte(pw), Methods: []message.EAPType{m}})
			converse(t, s, c)
			if string(stored) != "alice-mschapv2-pw" {
				t.Fatalf("%s with %q: the stored secret is now %q", MethodName(m), pw, stored)
			}
		}
	}
}
