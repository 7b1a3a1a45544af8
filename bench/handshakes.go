package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/ipsecd/ipsecd/internal/hscost"
)

// handshakeHeading starts the section of benchmark.md that -handshakes
// writes; a run without it keeps the section as it is (keptPart).
const handshakeHeading = "\n## IKE handshake cost\n"

// handshakeTest is the integration test that takes the samples: it
// makes the namespaces, starts each responder (ipsecd, strongSwan 6.1
// from the sid chroot) and runs the IKE engine against it as initiator.
const handshakeTest = "^TestIKEHandshakeCostPQ$"

// runHandshakes runs handshakeTest with n handshakes per sample and
// rounds rounds, in the module root, and returns the section for
// benchmark.md ("" and an explanation when the test measured nothing,
// e.g. without the sid chroot).
func runHandshakes(ctx context.Context, root string, n, rounds int) (string, error) {
	f, err := os.CreateTemp("", "ipsecd-handshakes-*.jsonl")
	if err != nil {
		return "", err
	}
	f.Close()
	defer os.Remove(f.Name())
	cmd := exec.CommandContext(ctx, "go", "test", "-count=1", "-timeout", "30m", "-v", "-run", handshakeTest, "./integration/")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), fmt.Sprintf("IPSECD_IKE_HANDSHAKES=%d", n), fmt.Sprintf("IPSECD_IKE_HANDSHAKE_ROUNDS=%d", rounds),
		"IPSECD_IKE_HANDSHAKE_OUT="+f.Name())
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s: %w", strings.Join(cmd.Args, " "), err)
	}
	samples, err := hscost.Load(f.Name())
	if err != nil {
		return "", err
	}
	if len(samples) == 0 {
		return "", fmt.Errorf("%s measured nothing (skipped: no strongSwan 6 chroot? scripts/sid-strongswan.sh builds it)", handshakeTest)
	}
	load, _ := os.ReadFile("/proc/loadavg")
	return handshakeSection(hscost.Medians(samples), n, rounds, time.Since(start), strings.Join(strings.Fields(string(load))[:3], " ")), nil
}

// handshakeSection is the markdown of rows.
func handshakeSection(rows []hscost.Row, n, rounds int, took time.Duration, load string) string {
	var b strings.Builder
	b.WriteString(handshakeHeading)
	fmt.Fprintf(&b, "\nWritten by `go run ./bench -handshakes %d -handshake-rounds %d -handshakes-only` (%s UTC, %v,\n", n, rounds,
		time.Now().UTC().Format("2006-01-02 15:04"), took.Round(time.Second))
	fmt.Fprintf(&b, "load average at end %s; `-handshakes-only` rewrites this section alone, a run\n", load)
	b.WriteString("without `-handshakes` keeps it). What one IKE SA setup (IKE_SA_INIT, any\n" +
		"IKE_INTERMEDIATE, IKE_AUTH with its child SA; PSK, child aes128gcm16)\n" +
		"costs the responder: ipsecd and strongSwan 6.1's charon (Debian sid's, in\n" +
		"a chroot; ML-KEM from OpenSSL) in turn on the same machine, the ipsecd IKE\n" +
		"engine initiating from a second network namespace, one handshake at a\n" +
		"time. CPU per IKE SA is the responder's user and system time from\n" +
		"/proc/PID/stat over the counted handshakes (10 ms ticks); handshake is the\n" +
		"initiator's time from the first request to the established SA. Each\n" +
		"round measures every proposal against both responders (interleaved);\n" +
		fmt.Sprintf("each figure is the median over the rounds, of %d handshakes each after 3\n", n) +
		"uncounted. x25519-ke1_mlkem768 is the hybrid: x25519 in IKE_SA_INIT,\n" +
		"ML-KEM-768 in an IKE_INTERMEDIATE exchange (RFC 9370). The measuring code is\n" +
		"integration's TestIKEHandshakeCostPQ with internal/hscost.\n\n")
	b.WriteString(hscost.Table(rows))
	return b.String()
}

// withSection returns old (benchmark.md) with its handshake section
// replaced by section, or section put before the remote-access section
// (or at the end) when old has none.
func withSection(old, section string) string {
	if i := strings.Index(old, handshakeHeading); i >= 0 {
		rest := old[i+len(handshakeHeading):]
		end := len(rest)
		if j := strings.Index(rest, "\n## "); j >= 0 {
			end = j
		}
		return old[:i] + section + rest[end:]
	}
	if i := strings.Index(old, keptHeading); i >= 0 {
		return old[:i] + section + old[i:]
	}
	return strings.TrimRight(old, "\n") + "\n" + section
}

// writeHandshakes puts section into dir's benchmark.md.
func writeHandshakes(dir, section string) error {
	path := filepath.Join(dir, "benchmark.md")
	old, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return os.WriteFile(path, []byte(withSection(string(old), section)), 0o644)
}
