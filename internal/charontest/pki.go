//go:build linux

package charontest

import (
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"

	"github.com/ipsecd/ipsecd/internal/testpki"
)

// GatewayPKI is what charon as a remote-access gateway proves itself
// with: a test CA and a certificate it issued for the gateway's
// identity, in a swanctl directory for LoadDir.
type GatewayPKI struct {
	// Dir holds x509ca/ca.pem, x509/gw.pem and private/gw.key (PKCS #8).
	Dir string
	// CA is the CA's certificate (PEM), what clients trust; CAFile
	// the file that holds it.
	CA     []byte
	CAFile string
	// Cert is the gateway certificate's name for a connection's local
	// certs (Peer.Certs): charon finds it in Dir's x509/.
	Cert string
}

// WriteGatewayPKI makes a GatewayPKI for id (the certificate's CN and
// DNS name) under dir (package testpki).
func WriteGatewayPKI(t testing.TB, dir, id string) GatewayPKI {
	t.Helper()
	p := GatewayPKI{Dir: dir, CAFile: filepath.Join(dir, "x509ca", "ca.pem"), Cert: "gw.pem"}
	for _, sub := range []string{"x509ca", "x509", "private"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	ca := testpki.NewCA(t, "charontest CA", testpki.Opts{})
	gw := ca.Issue(t, id, testpki.Opts{})
	ca.WriteCert(t, p.CAFile)
	gw.WriteCert(t, filepath.Join(dir, "x509", p.Cert))
	gw.WriteKey(t, filepath.Join(dir, "private", "gw.key"), testpki.PKCS8)
	p.CA = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.DER})
	return p
}
