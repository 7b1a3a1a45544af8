package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"

	"github.com/ipsecd/ipsecd/config"
)

// TestConnectionsNotNegotiatedWarned: until the daemon drives IKE, a file
// with connections draws a warning that says no SA comes up from them; a
// file without says nothing of IKE.
func TestConnectionsNotNegotiatedWarned(t *testing.T) {
	for _, tt := range []struct {
		name  string
		conns int
		warn  bool
	}{{"none", 0, false}, {"two", 2, true}} {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			log := logrus.New()
			log.SetOutput(&out)
			cfg := &config.Config{}
			cfg.Connections = make([]config.Connection, tt.conns)
			logConfigWarnings(log, cfg)
			got := strings.Contains(out.String(), "does not negotiate IKE yet")
			if got != tt.warn {
				t.Errorf("warned %v, want %v:\n%s", got, tt.warn, out.String())
			}
		})
	}
}
