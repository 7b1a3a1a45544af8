package vici

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"io"
	"math/big"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/control"
	"github.com/sirupsen/logrus"
)

// fuzzBackend is a Backend and Loader that takes everything and lists
// one SA: the commands' own code is what FuzzCommands exercises.
type fuzzBackend struct{}

func (fuzzBackend) IKEList() ([]control.IKESAInfo, error) {
	return []control.IKESAInfo{{Name: "gw", State: "ESTABLISHED", SPIInitiator: "0102030405060708", SPIResponder: "1112131415161718",
		Local: netip.MustParseAddrPort("192.0.2.1:4500"), Remote: netip.MustParseAddrPort("192.0.2.2:4500"),
		Algorithms: "aes256gcm16-prfsha256-x25519-ke1_mlkem768", Established: time.Now(),
		Children: []control.IKEChildInfo{{Name: "net", SPIIn: "0x1", SPIOut: "0x2", Algorithms: "aes128-sha256-esn"}}}}, nil
}
func (fuzzBackend) IKEInitiate(control.IKETarget) error  { return nil }
func (fuzzBackend) IKETerminate(control.IKETarget) error { return nil }
func (fuzzBackend) IKERekey(control.IKETarget) error     { return nil }
func (fuzzBackend) Connections() []config.Connection {
	return []config.Connection{{Name: "gw", Children: []config.Child{{Name: "net", StartAction: config.StartActionTrap}}}}
}
func (fuzzBackend) ReloadConfig() error                              { return nil }
func (fuzzBackend) LoadConn(string, []byte, map[string][]byte) error { return nil }
func (fuzzBackend) UnloadConn(string) error                          { return nil }
func (fuzzBackend) ViciConns() []string                              { return nil }
func (fuzzBackend) LoadShared(string, []byte) error                  { return nil }
func (fuzzBackend) UnloadShared(string) error                        { return nil }
func (fuzzBackend) ClearShared()                                     {}
func (fuzzBackend) SharedIDs() []string                              { return nil }
func (fuzzBackend) LoadPool(string, []byte) error                    { return nil }
func (fuzzBackend) UnloadPool(string) error                          { return nil }
func (fuzzBackend) PoolList(bool) ([]control.PoolInfo, error) {
	return []control.PoolInfo{{Name: "rw", Addrs: "10.3.0.0/24", Leases: []control.PoolLease{{Address: netip.MustParseAddr("10.3.0.1")}}}}, nil
}

// FuzzCommands: any request, to any command (the name is the fuzzer's
// too), is answered without a panic (the handlers run without the
// recover that guards them in the server), and the answer encodes.
func FuzzCommands(f *testing.F) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	keyDER, _ := x509.MarshalECPrivateKey(key)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), BasicConstraintsValid: true, IsCA: true}
	certDER, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		f.Fatal(err)
	}
	cert, err := x509.ParseCertificate(certDER)
	if err != nil {
		f.Fatal(err)
	}
	keyName, err := keyID(key.Public())
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []*Packet{
		{Type: CmdRequest, Name: "load-conn", Message: NewMessage().Set("gw", NewMessage().
			Set("local", NewMessage().Set("auth", "pubkey").Set("certs", []string{string(certDER)})).
			Set("remote", NewMessage().Set("auth", "pubkey").Set("cacerts", []string{string(certDER)})).
			Set("children", NewMessage().Set("net", NewMessage().Set("if_id_in", "1").Set("if_id_out", "1"))))},
		{Type: CmdRequest, Name: "load-conn", Message: NewMessage().Set("gw", NewMessage().Set("local_addrs", []string{"192.0.2.1"}).
			Set("local", NewMessage().Set("auth", "psk")).Set("remote", NewMessage().Set("auth", "psk")).
			Set("children", NewMessage().Set("net", NewMessage().Set("if_id_in", "1").Set("if_id_out", "1").Set("mode", "tunnel"))))},
		{Type: CmdRequest, Name: "terminate", Message: NewMessage().Set("ike-id", "1").Set("timeout", "-1")},
		{Type: CmdRequest, Name: "rekey", Message: NewMessage().Set("child-id", "1")},
		{Type: CmdRequest, Name: "list-sas", Message: NewMessage().Set("ike-id", "1")},
		{Type: CmdRequest, Name: "load-shared", Message: NewMessage().Set("type", "IKE").Set("data", "x").Set("owners", []string{"a"})},
		{Type: CmdRequest, Name: "get-pools", Message: NewMessage().Set("leases", "yes")},
		{Type: CmdRequest, Name: "load-pool", Message: NewMessage().Set("rw", NewMessage().Set("addrs", "10.3.0.0/24").
			Set("dns", []string{"10.3.0.53"}).Set("subnet", []string{"10.9.0.0/16"}).Set("25", []string{"corp.example"}))},
		{Type: CmdRequest, Name: "unload-pool", Message: NewMessage().Set("name", "rw")},
		{Type: CmdRequest, Name: "list-certs", Message: NewMessage().Set("type", "X509").Set("flag", "CA").Set("subject", "CN=a")},
		{Type: CmdRequest, Name: "list-policies", Message: NewMessage().Set("trap", "yes")},
		{Type: CmdRequest, Name: "initiate", Message: NewMessage().Set("child", "net").Set("loglevel", "2")},
		{Type: CmdRequest, Name: "load-cert", Message: NewMessage().Set("type", "X509").Set("flag", "CA").Set("data", string(certDER))},
		{Type: CmdRequest, Name: "load-key", Message: NewMessage().Set("type", "any").Set("data", string(keyDER))},
	} {
		b, err := seed.AppendBinary(nil)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		p, err := ParsePacket(in)
		if err != nil || p.Type != CmdRequest {
			return
		}
		h, ok := commands[p.Name]
		if !ok {
			return
		}
		a, b := net.Pipe()
		defer a.Close()
		defer b.Close()
		go io.Copy(io.Discard, b)
		s := &Server{backend: fuzzBackend{}, log: discardLog(), started: time.Now(), closing: make(chan struct{})}
		// A key loaded, so that load-conn's certificates find theirs.
		if err := s.creds.addKey(storedKey{keyName, key}); err != nil {
			t.Fatal(err)
		}
		if err := s.creds.addCert(cert, true); err != nil { // and a CA, that list-certs lists
			t.Fatal(err)
		}
		cn := &conn{s: s, c: a, registered: map[string]bool{"list-sa": true, "list-conn": true, "list-policy": true, "list-cert": true, "control-log": true},
			done: make(chan struct{})}
		resp := h(&request{conn: cn, name: p.Name, msg: p.Message})
		if _, err := (&Packet{Type: CmdResponse, Message: resp}).AppendBinary(nil); err != nil {
			t.Fatalf("%s: the answer does not encode: %v", p.Name, err)
		}
	})
}

func discardLog() *logrus.Logger {
	l := logrus.New()
	l.SetOutput(io.Discard)
	return l
}
