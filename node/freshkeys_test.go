package node

import (
	"crypto/rand"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/ipsecd/ipsecd/sa"
	"github.com/ipsecd/ipsecd/sa/satest"
	"github.com/ipsecd/ipsecd/seqstate"
)

// freshState is state with a random key, as IKE derives one per child.
func freshState(t testing.TB, dir sa.Dir, spi uint32) sa.Config {
	c := state(dir, spi, 0)
	if _, err := rand.Read(c.AEAD.Key); err != nil {
		t.Fatal(err)
	}
	return c
}

// sealOne seals a packet with the running outbound SA spi, as traffic
// would: an SA with a sequence record reserves its first block then.
func sealOne(t testing.TB, n *Node, spi uint32) {
	t.Helper()
	for _, s := range n.SAD().States() {
		if s.Dir() == sa.DirOut && s.SPI() == spi {
			satest.Seal(t, s, satest.IPv4UDP(netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"), 40))
			return
		}
	}
	t.Fatalf("no outbound SA %#x", spi)
}

// dirUse returns the number of files in dir and their bytes.
func dirUse(t testing.TB, dir string) (files int, size int64) {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		files++
		size += fi.Size()
	}
	return files, size
}

// heapInuse returns HeapInuse after a collection.
func heapInuse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// TestDayOfRekeys: a day of 10-second child rekeys (8,640; IPSECD_REKEYS
// sets another count) through the node as ikenode drives it, each new
// pair installed under OwnerIKE with fresh keys, one packet sealed on its
// outbound SA, the old pair removed, leaves the state directory and the
// heap as they were after the first 500: IKE's SAs keep no sequence
// records (their keys are new for each child and forgotten at a restart)
// and no key memory. A static SA beside them keeps its record.
func TestDayOfRekeys(t *testing.T) {
	rekeys := 8640
	if v := os.Getenv("IPSECD_REKEYS"); v != "" {
		rekeys, _ = strconv.Atoi(v)
	} else if testing.Short() {
		rekeys = 1000
	}
	const warm = 500
	rekeys = max(rekeys, 2*warm)
	dir := filepath.Join(t.TempDir(), "state")
	n := testNodeWith(t, Config{StateDir: dir})
	static := freshState(t, sa.DirOut, 0x100)
	if err := n.AddState(OwnerControl, static); err != nil {
		t.Fatal(err)
	}
	sealOne(t, n, 0x100)
	var prev []StateID
	var files0 int
	var size0 int64
	var heap0 uint64
	start := time.Now()
	for i := range rekeys {
		in, out := freshState(t, sa.DirIn, 0x10000+uint32(2*i)), freshState(t, sa.DirOut, 0x10001+uint32(2*i))
		ids := []StateID{{sa.DirIn, in.SPI, in.Dst}, {sa.DirOut, out.SPI, out.Dst}}
		if err := n.InstallChild(OwnerIKE, in, out); err != nil {
			t.Fatalf("rekey %d: %v", i, err)
		}
		sealOne(t, n, ids[1].SPI)
		if prev != nil {
			if err := n.RemoveStates(OwnerIKE, prev...); err != nil {
				t.Fatalf("rekey %d: %v", i, err)
			}
		}
		prev = ids
		if i+1 == warm {
			files0, size0 = dirUse(t, dir)
			heap0 = heapInuse()
		}
		if time.Since(start) > 5*time.Minute {
			t.Fatalf("%d rekeys took over 5 minutes", i+1)
		}
	}
	files, size := dirUse(t, dir)
	heap := heapInuse()
	t.Logf("%d rekeys in %v: state_dir %d files, %d bytes (after %d: %d, %d); HeapInuse %d KiB (after %d: %d KiB)",
		rekeys, time.Since(start).Round(time.Millisecond), files, size, warm, files0, size0, heap>>10, warm, heap0>>10)
	// The directory's secret and the static SA's record.
	if files != 2 || files0 != 2 || size != size0 {
		t.Errorf("state_dir: %d files, %d bytes after %d rekeys, %d files, %d bytes after %d; want 2 files (secret, the static key's record) throughout",
			files, size, rekeys, files0, size0, warm)
	}
	if heap > heap0+1<<20 {
		t.Errorf("HeapInuse grew from %d KiB to %d KiB between rekeys %d and %d; want flat (within 1 MiB)", heap0>>10, heap>>10, warm, rekeys)
	}
}

// TestFreshKeysWithoutStateDir: with a state directory that cannot be
// used, IKE's children (AES-GCM included) are still installed, as their
// keys are new for this run; a static AES-GCM state is still refused.
func TestFreshKeysWithoutStateDir(t *testing.T) {
	file := filepath.Join(t.TempDir(), "not-a-dir")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	n := testNodeWith(t, Config{StateDir: file})
	if err := n.InstallChild(OwnerIKE, freshState(t, sa.DirIn, 0x2001), freshState(t, sa.DirOut, 0x2002)); err != nil {
		t.Errorf("IKE child: %v", err)
	}
	if err := n.AddState(OwnerIKE, freshState(t, sa.DirOut, 0x2003)); err != nil {
		t.Errorf("IKE outbound SA (a rekey's, added alone): %v", err)
	}
	if err := n.AddState(OwnerControl, freshState(t, sa.DirOut, 0x2004)); !errors.Is(err, seqstate.ErrNoState) {
		t.Errorf("static AES-GCM state: got %v, want ErrNoState", err)
	}
}
