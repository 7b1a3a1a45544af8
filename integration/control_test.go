//go:build linux

package integration

import (
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/internal/syncbuf"
)

// mustCtl runs a control command and fails the test if it fails.
func (d *daemon) mustCtl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := d.ctl(args...)
	if err != nil {
		t.Fatalf("%s: ipsecd %s: %v\n%s", d.ns.name, strings.Join(args, " "), err, out)
	}
	return out
}

// addState adds a tunnel-mode ESP-in-UDP AES-GCM SA with `state add`.
func (d *daemon) addState(t *testing.T, src, dst string, spi int, dir string, key []byte) {
	t.Helper()
	d.mustCtl(t, "state", "add", "--src", src, "--dst", dst, "--spi", fmt.Sprintf("0x%x", spi), "--dir", dir,
		"--mode", "tunnel", "--if-id", "1", "--aead", "rfc4106(gcm(aes))", "--key", hexKey(key),
		"--encap", "espinudp:4500:4500", "--replay-window", "1024")
}

func (d *daemon) deleteState(t *testing.T, spi int, dst, dir string) {
	t.Helper()
	d.mustCtl(t, "state", "delete", "--spi", fmt.Sprintf("0x%x", spi), "--dst", dst, "--dir", dir)
}

// TestControlSocket checks state list (with and without keys), the socket's
// mode, and state add/delete on a running pair: removing the outbound SA
// stops traffic (fail closed), and a make-before-break rekey to new SPIs
// loses no packet.
func TestControlSocket(t *testing.T) {
	spec := tunnelSpec{suite: suiteByName("aes-gcm-128")}
	p := newPair(t)
	cfgA, cfgB := spec.configs()
	da := startDaemon(t, p.a, cfgA)
	db := startDaemon(t, p.b, cfgB)

	fi, err := os.Stat(da.control)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Errorf("control socket mode %v, want a socket with 0600", fi.Mode())
	}

	ping(t, p.a, innerB4, 2)
	before := da.state(spiAB, "out").Stats
	ping(t, p.a, innerB4, 3)
	after := da.state(spiAB, "out").Stats
	if after.Packets < before.Packets+3 || after.Bytes <= before.Bytes || after.Seq < before.Seq+3 {
		t.Errorf("A's out SA went from %+v to %+v over 3 pings, want packets, bytes and seq up by 3 or more", before, after)
	}

	keyText := hex.EncodeToString(spec.keyAB)
	text := da.mustCtl(t, "state", "list")
	if !strings.Contains(text, "spi 0x1001 dir out mode tunnel") || !strings.Contains(text, "spi 0x2001 dir in") {
		t.Errorf("state list lacks A's SAs:\n%s", text)
	}
	js := da.mustCtl(t, "state", "list", "--json")
	for name, out := range map[string]string{"state list": text, "state list --json": js} {
		if strings.Contains(out, keyText) || strings.Contains(out, hex.EncodeToString(spec.keyBA)) || strings.Contains(out, `"key"`) {
			t.Errorf("%s shows key material:\n%s", name, out)
		}
	}
	if keys := da.mustCtl(t, "state", "list", "--keys"); !strings.Contains(keys, keyText) || !strings.Contains(keys, hex.EncodeToString(spec.keyBA)) {
		t.Errorf("state list --keys does not show the keys:\n%s", keys)
	}
	if s := da.state(spiAB, "out"); s.AEAD == nil || s.AEAD.Key != "" {
		t.Errorf("state list --json: aead %+v, want the algorithm without its key", s.AEAD)
	}

	// The rekey's key: deleted with its SA below, and then refused.
	newKey := randomKey(spec.suite.keyLen)
	t.Run("rekey without loss", func(t *testing.T) {
		// Ping all through the switch: 60 echoes 50 ms apart.
		const count = 60
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		pinger := p.a.cmd(ctx, "ping", "-n", "-q", "-c", fmt.Sprint(count), "-i", "0.05", "-W", "2", innerB4)
		var out syncbuf.Buffer
		pinger.Stdout, pinger.Stderr = &out, &out
		if err := pinger.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(500 * time.Millisecond)
		// Make before break: B can open the new SPI before A uses it.
		db.addState(t, underlayA4, underlayB4, 0x3001, "in", newKey)
		time.Sleep(300 * time.Millisecond)
		da.addState(t, underlayA4, underlayB4, 0x3001, "out", newKey) // newest wins
		time.Sleep(300 * time.Millisecond)
		da.deleteState(t, spiAB, underlayB4, "out")
		err := pinger.Wait()
		if want := fmt.Sprintf("%d received", count); err != nil || !strings.Contains(out.String(), want) {
			t.Errorf("ping across the rekey: want %q, got err %v:\n%s", want, err, out.String())
		}
		if n := db.state(0x3001, "in").Stats.Packets; n < 10 {
			t.Errorf("B's new in SA opened %d packets, want at least 10", n)
		}
		db.deleteState(t, spiAB, underlayB4, "in")
		ping(t, p.a, innerB4, 2)
		ping(t, p.b, innerA4, 2)
		for _, s := range da.states() {
			if s.SPI == "0x1001" {
				t.Errorf("A still has SA %s dir %s after delete", s.SPI, s.Dir)
			}
		}
	})

	t.Run("delete out SA fails closed, add restores", func(t *testing.T) {
		da.deleteState(t, 0x3001, underlayB4, "out")
		before := da.stats()["XfrmOutNoStates"]
		out, err := p.a.run("ping", "-n", "-q", "-c", "3", "-i", "0.2", "-W", "1", innerB4)
		if err == nil || !strings.Contains(out, " 0 received") {
			t.Errorf("ping with no out SA: want no answer, got err %v:\n%s", err, out)
		}
		if got := da.stats()["XfrmOutNoStates"] - before; got < 3 {
			t.Errorf("XfrmOutNoStates grew by %d over 3 pings, want at least 3", got)
		}
		key := randomKey(spec.suite.keyLen)
		db.addState(t, underlayA4, underlayB4, 0x3002, "in", key)
		da.addState(t, underlayA4, underlayB4, 0x3002, "out", key)
		ping(t, p.a, innerB4, 3)
		tcpTransfer(t, p.a, p.b, innerB4, 1<<20)
	})

	// What the control socket refuses. A deleted SA back with its key
	// would start its sequence numbers, GCM's nonces, again at 1.
	if out, err := da.ctl("state", "add", "--src", underlayA4, "--dst", underlayB4, "--spi", "0x3001", "--dir", "out",
		"--mode", "tunnel", "--if-id", "1", "--aead", "rfc4106(gcm(aes))", "--key", hexKey(newKey),
		"--encap", "espinudp:4500:4500"); err == nil || !strings.Contains(out, "key material already used by an earlier SA (spi 0x3001") ||
		!strings.Contains(out, "ipsecd genkey") || strings.Contains(out, hex.EncodeToString(newKey)) {
		t.Errorf("re-adding the deleted SA 0x3001 with its key: err %v, want it refused for the reused key, naming no key:\n%s", err, out)
	}
	// The outbound key of the file, inbound: the peer's SA with it would
	// seal the sequence numbers A's outbound SA sealed, the same nonces.
	if out, err := da.ctl("state", "add", "--src", underlayB4, "--dst", underlayA4, "--spi", "0x3004", "--dir", "in",
		"--mode", "tunnel", "--if-id", "1", "--aead", "rfc4106(gcm(aes))", "--key", hexKey(spec.keyAB),
		"--encap", "espinudp:4500:4500"); err == nil || !strings.Contains(out, fmt.Sprintf("aead.key: SA spi 0x3004 dir in dst %s: key material already used by an earlier SA (spi %#x dir out", underlayA4, spiAB)) ||
		strings.Contains(out, hex.EncodeToString(spec.keyAB)[:16]) {
		t.Errorf("adding an inbound SA with the outbound SA's key: err %v, want it refused for the reused key, naming no key:\n%s", err, out)
	}
	// Raw ESP, while the underlay has no raw socket: its traffic would be dropped.
	if out, err := da.ctl("state", "add", "--src", underlayB4, "--dst", underlayA4, "--spi", "0x3005", "--dir", "in",
		"--mode", "tunnel", "--if-id", "1", "--aead", "rfc4106(gcm(aes))", "--key", hexKey(randomKey(20))); err == nil ||
		!strings.Contains(out, "encap: missing, and this daemon's underlay has no raw ESP socket") {
		t.Errorf("adding a raw ESP SA without raw_esp: err %v, want it refused naming encap:\n%s", err, out)
	}
	if out, err := da.ctl("state", "delete", "--spi", "0x9999", "--dst", underlayB4, "--dir", "out"); err == nil {
		t.Errorf("deleting an SA that does not exist succeeded:\n%s", out)
	}
	if out, err := da.ctl("state", "add", "--src", underlayA4, "--dst", underlayB4, "--spi", "0x3003", "--dir", "out",
		"--mode", "tunnel", "--if-id", "9", "--aead", "rfc4106(gcm(aes))", "--key", hexKey(randomKey(20))); err == nil {
		t.Errorf("adding an SA for a missing if_id succeeded:\n%s", out)
	}
	for _, d := range []*daemon{da, db} {
		st := d.stats()
		for _, c := range []string{"XfrmInStateSeqError", "XfrmInStateProtoError", "XfrmOutError"} {
			if st[c] != 0 {
				t.Errorf("%s: %s = %d, want 0", d.ns.name, c, st[c])
			}
		}
	}
}
