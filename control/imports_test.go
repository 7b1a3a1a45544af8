package control

import (
	"testing"

	"github.com/ipsecd/ipsecd/internal/importcheck"
)

// TestImportsNoIKEOrConfig: the control socket's protocol links neither
// the IKE engine (ike, ikenode: the ike commands' wire types are
// control's own) nor the config file's YAML decoder, so that a client of
// the socket gets the protocol alone. A failure names the chain of
// imports that brings one in.
func TestImportsNoIKEOrConfig(t *testing.T) {
	importcheck.Forbid(t, ".",
		"github.com/ipsecd/ipsecd/config",
		"github.com/ipsecd/ipsecd/ike",
		"github.com/ipsecd/ipsecd/ikenode",
		"github.com/ipsecd/ipsecd/daemon",
		"go.yaml.in/yaml/v3",
	)
}
