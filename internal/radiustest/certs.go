package radiustest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"
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
// client.key into dir. ECDSA P-256, valid for an hour around now.
func makePKI(t testing.TB, dir string, serverNames []string) PKI {
	t.Helper()
	caKey, caCert, caDER := issue(t, "radiustest CA", nil, nil, true, 0)
	srvKey, _, srvDER := issue(t, "radius.test", caCert, caKey, false, x509.ExtKeyUsageServerAuth, serverNames...)
	cliKey, _, cliDER := issue(t, "alice", caCert, caKey, false, x509.ExtKeyUsageClientAuth)
	writePEM(t, filepath.Join(dir, "ca.pem"), "CERTIFICATE", caDER)
	writePEM(t, filepath.Join(dir, "server.pem"), "CERTIFICATE", srvDER)
	k, err := x509.MarshalPKCS8PrivateKey(srvKey)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, filepath.Join(dir, "server.key"), "PRIVATE KEY", k)
	writePEM(t, filepath.Join(dir, "client.pem"), "CERTIFICATE", cliDER)
	ck, err := x509.MarshalPKCS8PrivateKey(cliKey)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, filepath.Join(dir, "client.key"), "PRIVATE KEY", ck)
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	return PKI{CA: pool, Client: tls.Certificate{Certificate: [][]byte{cliDER}, PrivateKey: cliKey},
		CAFile: filepath.Join(dir, "ca.pem"), ClientCertFile: filepath.Join(dir, "client.pem"), ClientKeyFile: filepath.Join(dir, "client.key")}
}

var serial int64

func issue(t testing.TB, cn string, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, ca bool, usage x509.ExtKeyUsage, names ...string) (*ecdsa.PrivateKey, *x509.Certificate, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, BasicConstraintsValid: true,
	}
	if ca {
		tmpl.IsCA, tmpl.KeyUsage = true, x509.KeyUsageCertSign|x509.KeyUsageDigitalSignature
		parent, parentKey = tmpl, key
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{usage}
		tmpl.DNSNames = append([]string{cn}, names...)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return key, cert, der
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
