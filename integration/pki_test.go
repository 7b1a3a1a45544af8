//go:build linux

package integration

import (
	"path/filepath"
	"testing"

	"github.com/ipsecd/ipsecd/internal/testpki"
)

// pkiLeaf is a certificate writePKI issues: files NAME.pem and NAME.key
// for the identity id (its CN and DNS name).
type pkiLeaf struct{ name, id string }

// writePKI writes under dir a CA named caName (ca.pem) and, for each
// leaf, a certificate the CA signed and its key (package testpki). Keys
// are PKCS#8 ("PRIVATE KEY"), or with sec1 SEC1 ("EC PRIVATE KEY"),
// which swanctl's ecdsa/ directory takes. It returns the paths by file
// name.
func writePKI(t *testing.T, dir, caName string, sec1 bool, leaves ...pkiLeaf) map[string]string {
	t.Helper()
	paths := map[string]string{}
	ca := testpki.NewCA(t, caName, testpki.Opts{})
	paths["ca.pem"] = ca.WriteCert(t, filepath.Join(dir, "ca.pem"))
	format := testpki.PKCS8
	if sec1 {
		format = testpki.SEC1
	}
	for _, l := range leaves {
		c := ca.Issue(t, l.id, testpki.Opts{})
		paths[l.name+".pem"] = c.WriteCert(t, filepath.Join(dir, l.name+".pem"))
		paths[l.name+".key"] = c.WriteKey(t, filepath.Join(dir, l.name+".key"), format)
	}
	return paths
}

// raPKI writes a CA and the gateway's certificate (a.test) and key into
// dir, and returns their paths.
func raPKI(t *testing.T, dir string) (caFile, certFile, keyFile string) {
	t.Helper()
	p := writePKI(t, dir, "ipsecd RA test CA", false, pkiLeaf{"gw", "a.test"})
	return p["ca.pem"], p["gw.pem"], p["gw.key"]
}
