package main

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/control/controltest"
)

func TestHealth(t *testing.T) {
	srv := controltest.Start(t, &controltest.Backend{})
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "ipsecd.yaml")
	if err := os.WriteFile(cfgFile, []byte("control: "+srv.Path()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	brokenCfg := filepath.Join(dir, "broken.yaml")
	if err := os.WriteFile(brokenCfg, []byte("control: [a\n  b\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	// A socket that accepts and never answers: a daemon stalled in its
	// control loop.
	stalled := filepath.Join(dir, "stalled.sock")
	ln, err := net.Listen("unix", stalled)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()

	for _, tt := range []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantErr    string // in the one line on stderr
	}{
		{"answers on --control", []string{"--control", srv.Path()}, 0, "", ""},
		{"answers on the config's socket", []string{"--config", cfgFile}, 0, "", ""},
		{"--json", []string{"--control", srv.Path(), "--json"}, 0, "{\"healthy\": true}\n", ""},
		{"no daemon", []string{"--control", filepath.Join(dir, "none.sock")}, 1, "", "ipsecd health: control: dial unix " + filepath.Join(dir, "none.sock")},
		{"stalled daemon", []string{"--control", stalled, "--timeout", "300ms"}, 1, "", "ipsecd health: "},
		{"config that does not parse", []string{"--config", brokenCfg}, 1, "", "ipsecd health: "},
		{"stray argument", []string{"--control", srv.Path(), "now"}, 2, "", `ipsecd health: unexpected argument "now"`},
		{"zero timeout", []string{"--control", srv.Path(), "--timeout", "0s"}, 2, "", "ipsecd health: --timeout 0s"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var o, e bytes.Buffer
			start := time.Now()
			code := run(append([]string{"health"}, tt.args...), &o, &e)
			took := time.Since(start)
			if code != tt.wantCode || o.String() != tt.wantStdout {
				t.Fatalf("ipsecd health %q: exit %d, stdout %q, stderr %q; want %d and %q", tt.args, code, o.String(), e.String(), tt.wantCode, tt.wantStdout)
			}
			if tt.wantErr == "" {
				if e.Len() != 0 {
					t.Errorf("healthy: stderr %q, want nothing", e.String())
				}
				return
			}
			line := e.String()
			if tt.wantCode == 2 {
				line, _, _ = strings.Cut(line, "\n") // then the -h hint
			} else if strings.Count(line, "\n") != 1 {
				t.Errorf("stderr %q: want one line", line)
			}
			if !strings.HasPrefix(line, tt.wantErr) {
				t.Errorf("stderr %q, want a line starting with %q", line, tt.wantErr)
			}
			if took > 3*time.Second {
				t.Errorf("took %v; the stalled case's --timeout is 300ms", took)
			}
			t.Logf("%s", strings.TrimSpace(line))
		})
	}
}
