package radiustest

import (
	"crypto/tls"
	"crypto/x509"
	"path/filepath"
	"testing"

	"github.com/ipsecd/ipsecd/internal/testpki"
)

// PKI is a test CA and the certificates FreeRADIUS's EAP-TLS serves and
// asks for: the server's (radius.test) and a client's (CN and DNS name
// alice), also as PEM files for other EAP-TLS clients (charon).
type PKI struct {
	CA     *x509.CertPool
	Client tls.Certificate
	// CAFile, ClientCertFile and ClientKeyFile (PKCS #8) are in the
	// server's config directory.
	CAFile, ClientCertFile, ClientKeyFile string
}

// makePKI writes ca.pem, server.pem and server.key (the server's
// certificate naming radius.test and serverNames), client.pem and
// client.key into dir (package testpki).
func makePKI(t testing.TB, dir string, serverNames []string) PKI {
	t.Helper()
	ca := testpki.NewCA(t, "radiustest CA", testpki.Opts{})
	srv := ca.Issue(t, "radius.test", testpki.Opts{DNS: append([]string{"radius.test"}, serverNames...), EKU: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	cli := ca.Issue(t, "alice", testpki.Opts{EKU: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	p := PKI{CA: x509.NewCertPool(), Client: tls.Certificate{Certificate: [][]byte{cli.DER}, PrivateKey: cli.Key},
		CAFile: ca.WriteCert(t, filepath.Join(dir, "ca.pem")), ClientCertFile: cli.WriteCert(t, filepath.Join(dir, "client.pem")),
		ClientKeyFile: cli.WriteKey(t, filepath.Join(dir, "client.key"), testpki.PKCS8)}
	p.CA.AddCert(ca.Cert.Cert)
	srv.WriteCert(t, filepath.Join(dir, "server.pem"))
	srv.WriteKey(t, filepath.Join(dir, "server.key"), testpki.PKCS8)
	return p
}
