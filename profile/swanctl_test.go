package profile

import (
	"bytes"
	"encoding/pem"
	"testing"
)

// TestSwanctlGolden: the swanctl.conf of the certificate connection (all
// its proposals, virtual IPs of both pools' families, DPD, rekey times,
// the child's traffic, the CA's file) and of the PSK connection (encap,
// the child's own local_ts, the secret with its quotes escaped), line by
// line; the CA's file is the gateway's CA.
func TestSwanctlGolden(t *testing.T) {
	p := newPKI(t, t.TempDir())
	c := loadGateway(t, p)
	for _, conn := range []string{"rw", "psk"} {
		files, err := Swanctl(&c.IKEConfig, Options{Connection: conn, User: "b.test"})
		if err != nil {
			t.Fatal(err)
		}
		golden(t, "swanctl-"+conn+".conf", files[0].Data)
		if conn == "rw" {
			if len(files) != 2 || files[1].Name != "x509ca/rw-ca.pem" || !bytes.Equal(files[1].Data, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.ca.Raw})) {
				t.Errorf("files %v, want swanctl.conf and x509ca/rw-ca.pem with the CA", len(files))
			}
		} else if len(files) != 1 {
			t.Errorf("%d files for a PSK connection, want swanctl.conf alone", len(files))
		}
	}
}
