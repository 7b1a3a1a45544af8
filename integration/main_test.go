//go:build linux

package integration

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// ipsecdBin is the daemon built once for the whole package run.
var ipsecdBin string

// TestMain builds the real binary, or acts as a traffic helper when the
// test binary is re-executed inside a namespace (see runHelper).
func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(runHelper(mode))
	}
	if os.Geteuid() != 0 {
		fmt.Println("integration: skipping, needs root (network namespaces, TUN devices)")
		os.Exit(0)
	}
	dir, err := os.MkdirTemp("", "ipsecd-integration-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ipsecdBin = filepath.Join(dir, "ipsecd")
	build := exec.Command("go", "build", "-o", ipsecdBin, "../cmd/ipsecd")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "integration: building ipsecd:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

const helperEnv = "IPSECD_TEST_HELPER"

// runHelper is the test binary re-executed inside a namespace:
//
//	tcp-sink ADDR        accept one connection, print the SHA-256 and byte count of what arrived
//	tcp-source ADDR N S  send N pseudo-random bytes (seed S), print their SHA-256 and count
//	send-udp DST HEX...  send each packet to DST:4500 over UDP from an ephemeral port
//	send-esp DST HEX...  send each packet to DST as IP protocol 50 (raw ESP)
//	http-get URL         print the body of a GET of URL (retried for up to 5 s)
//	sidecar CFG PEER N S a stack.Net from CFG: take one TCP stream on :5201, then send N bytes (seed S) to PEER
//	udp-seq-source DST RATE SIZE  send sequence-numbered datagrams to DST at RATE/s until stdin closes
//	udp-seq-sink ADDR             receive them until stdin closes; print what was missing, repeated, reordered
//	tcp-paced ADDR BITRATE SEED   send pseudo-random bytes at BITRATE bit/s until stdin closes, print SHA-256 and count
func runHelper(mode string) int {
	args := os.Args[1:]
	var err error
	switch mode {
	case "tcp-sink":
		err = tcpSink(args[0])
	case "tcp-source":
		n, _ := strconv.ParseInt(args[1], 10, 64)
		seed, _ := strconv.ParseUint(args[2], 10, 64)
		err = tcpSource(args[0], n, seed)
	case "send-udp", "send-esp":
		err = sendPackets(mode, args) // badtraffic_test.go
	case "http-get":
		err = httpGet(args[0]) // metrics_test.go
	case "sidecar":
		err = sidecarHelper(args) // sidecar_test.go
	case "udp-seq-source", "udp-seq-sink", "tcp-paced":
		err = streamHelper(mode, args) // streams_test.go
	default:
		err = fmt.Errorf("unknown helper mode %q", mode)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, mode+":", err)
		return 1
	}
	return 0
}

func tcpSink(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	fmt.Println("listening") // the parent waits for this line
	ln.(*net.TCPListener).SetDeadline(time.Now().Add(60 * time.Second))
	c, err := ln.Accept()
	if err != nil {
		return err
	}
	c.SetDeadline(time.Now().Add(120 * time.Second))
	h := sha256.New()
	n, err := io.Copy(h, c)
	if err != nil {
		return err
	}
	fmt.Printf("%s %d\n", hex.EncodeToString(h.Sum(nil)), n)
	return nil
}

func tcpSource(addr string, n int64, seed uint64) error {
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return err
	}
	c.SetDeadline(time.Now().Add(120 * time.Second))
	h := sha256.New()
	src := io.LimitReader(rand.NewChaCha8(seedBytes(seed)), n)
	sent, err := io.Copy(io.MultiWriter(c, h), src)
	if err != nil {
		return err
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		return err
	}
	io.Copy(io.Discard, c)
	c.Close()
	fmt.Printf("%s %d\n", hex.EncodeToString(h.Sum(nil)), sent)
	return nil
}

func seedBytes(seed uint64) (s [32]byte) {
	for i := range 8 {
		s[i] = byte(seed >> (8 * i))
	}
	return s
}
