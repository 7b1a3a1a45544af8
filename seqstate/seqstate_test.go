package seqstate

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ipsecd/ipsecd/sa"
	"github.com/ipsecd/ipsecd/sa/satest"
)

var testKey = []byte("0123456789abcdefghijklmnopqrstuvwxyzAB")[:36]

func gcmConfig(dir sa.Dir, spi uint32, esn bool) sa.Config {
	return sa.Config{
		Src: netip.MustParseAddr("198.51.100.1"), Dst: netip.MustParseAddr("198.51.100.2"),
		SPI: spi, Dir: dir, Mode: sa.ModeTunnel, IfID: 1, ESN: esn, ReplayWindow: 64,
		AEAD:  &sa.Algorithm{Name: sa.AlgGCM, Key: append([]byte(nil), testKey...)},
		Encap: &sa.Encap{SrcPort: 4500, DstPort: 4500},
	}
}

func newSA(t *testing.T, c sa.Config) *sa.SA {
	t.Helper()
	s, err := sa.New(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Discard)
	return s
}

// opened holds the Dir open at each path: open closes it first, as a
// restarted process would find the directory released.
var opened = map[string]*Dir{}

func open(t *testing.T, path string) *Dir {
	t.Helper()
	release(path)
	d, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	opened[path] = d
	t.Cleanup(func() { release(path) })
	return d
}

func release(path string) {
	if d := opened[path]; d != nil {
		d.Close()
		delete(opened, path)
	}
}

// seal seals n inner packets with s and returns the ESP packets.
func seal(t *testing.T, s *sa.SA, n int) [][]byte {
	t.Helper()
	inner := satest.IPv4UDP(netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"), 40)
	var out [][]byte
	for range n {
		out = append(out, satest.Seal(t, s, inner))
	}
	return out
}

func seqOf(esp []byte) uint32 { return binary.BigEndian.Uint32(esp[4:]) }

func openESP(s *sa.SA, esp []byte) sa.Counter {
	ps := []sa.Packet{satest.NewPacket(esp)}
	ps[0].UDP = true // arrived in UDP, as the SA's encap says
	s.OpenBatch(ps)
	return ps[0].Drop
}

// TestRestartContinues: an outbound SA of a key continues, after the
// directory is opened again (a restart), above its last reservation,
// also under another SPI, and also when the key was inbound before.
func TestRestartContinues(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state")
	for _, esn := range []bool{false, true} {
		block := uint64(Block)
		if esn {
			block = ESNBlock
		}
		c := gcmConfig(sa.DirOut, 0x1001, esn)
		c.AEAD.Key[0] ^= byte(1 + btoi(esn)) // a key per case
		d := open(t, path)
		s := newSA(t, c)
		if err := d.Attach(s); err != nil {
			t.Fatal(err)
		}
		if got := seqOf(seal(t, s, 3)[0]); got != 1 {
			t.Fatalf("esn=%v: fresh key starts at %d, want 1", esn, got)
		}
		// Restart: a new Dir, a new SA of the same key.
		d = open(t, path)
		s2 := newSA(t, c)
		if err := d.Attach(s2); err != nil {
			t.Fatal(err)
		}
		if got := uint64(seqOf(seal(t, s2, 1)[0])); got != block+1 {
			t.Errorf("esn=%v: after restart starts at %d, want %d (above the reservation)", esn, got, block+1)
		}
		// The same key under another SPI, in another restart.
		d = open(t, path)
		c2 := c
		c2.SPI = 0x2002
		s3 := newSA(t, c2)
		if err := d.Attach(s3); err != nil {
			t.Fatal(err)
		}
		if got := uint64(seqOf(seal(t, s3, 1)[0])); got != 2*block+1 {
			t.Errorf("esn=%v: key under a new SPI starts at %d, want %d", esn, got, 2*block+1)
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestInboundResume: the inbound top saved by Flush survives a restart:
// the old packets are refused, the next ones accepted; and an outbound SA
// of the same key (direction swapped) starts above that top.
func TestInboundResume(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state")
	peer := newSA(t, gcmConfig(sa.DirOut, 0x1001, true)) // the peer, no state
	old := seal(t, peer, 50)

	d := open(t, path)
	in := newSA(t, gcmConfig(sa.DirIn, 0x1001, true))
	if err := d.Attach(in); err != nil {
		t.Fatal(err)
	}
	for _, p := range old {
		if drop := openESP(in, p); drop != sa.CounterNone {
			t.Fatalf("first run: %v", drop)
		}
	}
	d.Flush(t.Logf)

	d = open(t, path)
	in2 := newSA(t, gcmConfig(sa.DirIn, 0x1001, true))
	if err := d.Attach(in2); err != nil {
		t.Fatal(err)
	}
	for _, p := range old {
		if drop := openESP(in2, p); drop != sa.XfrmInStateSeqError {
			t.Errorf("replay of seq %d after restart: %v, want XfrmInStateSeqError", seqOf(p), drop)
		}
	}
	if drop := openESP(in2, seal(t, peer, 1)[0]); drop != sa.CounterNone {
		t.Errorf("the peer's next packet after restart: %v", drop)
	}

	out := newSA(t, gcmConfig(sa.DirOut, 0x3003, true))
	if err := d.Attach(out); err != nil {
		t.Fatal(err)
	}
	if got := seqOf(seal(t, out, 1)[0]); got <= 50 {
		t.Errorf("outbound SA of a key that was inbound up to 50 starts at %d", got)
	}
}

// TestFlushForgetsRetired: an inbound SA that left its SAD is saved once
// more and then no longer tracked.
func TestFlushForgetsRetired(t *testing.T) {
	d := open(t, filepath.Join(t.TempDir(), "state"))
	peer := newSA(t, gcmConfig(sa.DirOut, 0x1001, false))
	in := newSA(t, gcmConfig(sa.DirIn, 0x1001, false))
	if err := d.Attach(in); err != nil {
		t.Fatal(err)
	}
	for _, p := range seal(t, peer, 5) {
		openESP(in, p)
	}
	in.Discard()
	d.Flush(nil)
	if len(d.tracked) != 0 {
		t.Errorf("%d SAs still tracked", len(d.tracked))
	}
	r, _ := d.Record(&sa.Config{AEAD: &sa.Algorithm{Name: sa.AlgGCM, Key: testKey}})
	if r.Top() != 5 {
		t.Errorf("saved top %d, want 5", r.Top())
	}
}

// TestNoKeyInFiles: no file of the directory holds the key, its hex, any
// 8 bytes of it, or its plain SHA-256.
func TestNoKeyInFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state")
	d := open(t, path)
	out := newSA(t, gcmConfig(sa.DirOut, 0x1001, true))
	in := newSA(t, gcmConfig(sa.DirIn, 0x1001, true))
	for _, s := range []*sa.SA{out, in} {
		if err := d.Attach(s); err != nil {
			t.Fatal(err)
		}
	}
	seal(t, out, 1)
	peer := newSA(t, gcmConfig(sa.DirOut, 0x1001, true))
	openESP(in, seal(t, peer, 1)[0])
	d.Flush(nil)
	sum := sha256.Sum256(testKey)
	needles := [][]byte{
		testKey, []byte(hex.EncodeToString(testKey)), []byte(strings.ToUpper(hex.EncodeToString(testKey))),
		sum[:8], []byte(hex.EncodeToString(sum[:])[:16]),
	}
	for i := 0; i+8 <= len(testKey); i++ {
		needles = append(needles, testKey[i:i+8], []byte(hex.EncodeToString(testKey[i:i+8])))
	}
	files, _ := os.ReadDir(path)
	if len(files) < 2 {
		t.Fatalf("%d files, want the secret and a record", len(files))
	}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(path, f.Name()))
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range needles {
			if bytes.Contains(b, n) || strings.Contains(f.Name(), string(n)) {
				t.Errorf("%s holds key material %x", f.Name(), n)
			}
		}
	}
}

// TestPermissions: the directory is made 0700 and its files 0600; a
// directory others may write to, or a secret others may read, is refused.
func TestPermissions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state")
	d := open(t, path)
	s := newSA(t, gcmConfig(sa.DirOut, 0x1001, false))
	if err := d.Attach(s); err != nil {
		t.Fatal(err)
	}
	seal(t, s, 1) // writes the record
	fi, _ := os.Stat(path)
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("directory mode %v, want 0700", fi.Mode().Perm())
	}
	files, _ := os.ReadDir(path)
	for _, f := range files {
		fi, _ := f.Info()
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v, want 0600", f.Name(), fi.Mode().Perm())
		}
	}
	// One process per directory.
	if _, err := Open(path); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Errorf("a second Open of a directory in use: %v", err)
	}
	release(path)
	os.Chmod(path, 0o777)
	if _, err := Open(path); err == nil || !strings.Contains(err.Error(), "write") {
		t.Errorf("Open of a 0777 directory: %v, want a refusal", err)
	}
	os.Chmod(path, 0o700)
	os.Chmod(filepath.Join(path, secretName), 0o644)
	if _, err := Open(path); err == nil || !strings.Contains(err.Error(), "read") {
		t.Errorf("Open with a 0644 secret: %v, want a refusal", err)
	}
	os.Chmod(filepath.Join(path, secretName), 0o600)
	// A path under a regular file cannot be a directory.
	f := filepath.Join(t.TempDir(), "file")
	os.WriteFile(f, nil, 0o600)
	if _, err := Open(filepath.Join(f, "state")); err == nil || !strings.Contains(err.Error(), "state_dir") {
		t.Errorf("Open under a file: %v", err)
	}
	// The secret gone while records are there: refused, not replaced.
	os.Remove(filepath.Join(path, secretName))
	if _, err := Open(path); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("Open without the secret: %v", err)
	}
}

// TestDamagedRecord: a short, long or garbled record is a clear error,
// never a panic and never a fresh start; a torn newer slot falls back to
// the older one.
func TestDamagedRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state")
	d := open(t, path)
	c := gcmConfig(sa.DirOut, 0x1001, false)
	s := newSA(t, c)
	if err := d.Attach(s); err != nil {
		t.Fatal(err)
	}
	seal(t, s, 1)
	r, _ := d.Record(&c)
	// Two more reservations, so both slots are in use (gen 2 and 3).
	for _, upto := range []uint64{Block + 1, 2*Block + 1} {
		if _, err := r.Reserver(false).Reserve(upto); err != nil {
			t.Fatal(err)
		}
	}
	file := filepath.Join(path, d.name(&c))
	good, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		data []byte
		want string // "" = reads, with the older slot
	}{
		{"empty", nil, "damaged"},
		{"short", good[:40], "damaged"},
		{"long", append(append([]byte(nil), good...), 0), "damaged"},
		{"garbage", bytes.Repeat([]byte{0xa5}, recordLen), "no valid slot"},
		{"newer slot torn", func() []byte {
			b := append([]byte(nil), good...)
			b[slotLen+20] ^= 1 // gen 3 is in slot 1
			return b
		}(), ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := os.WriteFile(file, tt.data, 0o600); err != nil {
				t.Fatal(err)
			}
			d := open(t, path)
			_, err := d.Record(&c)
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				r, _ := d.Record(&c)
				if r.Resume() != 2*Block {
					t.Errorf("resume at %d, want the older slot's %d", r.Resume(), 2*Block)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "new key") {
				t.Errorf("err = %v, want %q and advice", err, tt.want)
			}
			if err := d.Attach(newSA(t, c)); err == nil {
				t.Error("Attach with a damaged record succeeded")
			}
		})
	}
	release(path)
	os.WriteFile(filepath.Join(path, secretName), []byte("short"), 0o600)
	if _, err := Open(path); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Errorf("short secret: %v", err)
	}
}

// TestReserveFailure: an outbound SA whose reservation cannot be written
// refuses the numbers it could not reserve (XfrmOutStateSeqError).
func TestReserveFailure(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state")
	d := open(t, path)
	c := gcmConfig(sa.DirOut, 0x1001, false)
	s := newSA(t, c)
	if err := d.Attach(s); err != nil {
		t.Fatal(err)
	}
	// The directory goes away and a file takes its name: writes fail,
	// for root too.
	os.RemoveAll(path)
	os.WriteFile(path, nil, 0o600)
	r, _ := d.Record(&c)
	if _, err := r.Reserver(false).Reserve(Block + 1); err == nil {
		t.Fatal("Reserve into a removed directory succeeded")
	}
	s2 := newSA(t, gcmConfig(sa.DirOut, 0x2002, false))
	if err := d.Attach(s2); err != nil {
		t.Fatal(err)
	}
	inner := make([]byte, 40)
	inner[0] = 0x45
	binary.BigEndian.PutUint16(inner[2:], 40)
	buf := make([]byte, sa.Headroom+len(inner)+sa.Tailroom)
	copy(buf[sa.Headroom:], inner)
	ps := []sa.Packet{{Buf: buf, Off: sa.Headroom, Len: len(inner)}}
	s2.SealBatch(ps)
	if ps[0].Drop != sa.XfrmOutStateSeqError {
		t.Errorf("seal with no writable state directory: %v, want XfrmOutStateSeqError", ps[0].Drop)
	}
}

func TestWithout(t *testing.T) {
	c := gcmConfig(sa.DirOut, 0x1001, false)
	err := Without(&c, "/var/lib/ipsecd", errors.New("permission denied"))
	if !errors.Is(err, ErrNoState) || !strings.Contains(err.Error(), "state_dir") || strings.Contains(err.Error(), hex.EncodeToString(testKey)) {
		t.Errorf("GCM without state: %v", err)
	}
	c.AEAD = nil
	c.Enc = &sa.Algorithm{Name: sa.AlgCBC, Key: make([]byte, 16)}
	c.Auth = &sa.Algorithm{Name: sa.AlgHMACSHA2, Key: make([]byte, 32)}
	if err := Without(&c, "/x", errors.New("x")); err != nil {
		t.Errorf("CBC without state: %v, want allowed", err)
	}
}

// TestOpenProbes: Open writes a file to prove the directory takes writes,
// also when the secret is there already (a later start), so that a
// directory that cannot take records is found at start, not at the first
// packet. Here the probe's name is taken by a directory.
func TestOpenProbes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state")
	open(t, path)
	release(path)
	if err := os.MkdirAll(filepath.Join(path, ".probe", "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path); err == nil || !strings.Contains(err.Error(), "state_dir") {
		t.Errorf("Open where nothing can be written: %v, want an error naming state_dir", err)
	}
}

// TestFlushIdleAllocs: the flush that runs ten times a second allocates
// nothing when no top moved, however many SAs it tracks.
func TestFlushIdleAllocs(t *testing.T) {
	d := open(t, filepath.Join(t.TempDir(), "state"))
	for i := range 100 {
		in := newSA(t, gcmConfig(sa.DirIn, uint32(0x1000+i), false))
		if err := d.Attach(in); err != nil {
			t.Fatal(err)
		}
	}
	d.Flush(nil)
	if allocs := testing.AllocsPerRun(20, func() { d.Flush(nil) }); allocs != 0 {
		t.Errorf("Flush of 100 idle SAs: %v allocations, want 0", allocs)
	}
}
