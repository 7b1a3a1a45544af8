package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteReplacesWhole(t *testing.T) {
	dir := t.TempDir()
	for _, data := range []string{"first, longer contents", "second"} {
		if err := Write(dir, "f", []byte(data)); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(dir, "f"))
		if err != nil || string(got) != data {
			t.Fatalf("got %q, %v; want %q", got, err, data)
		}
	}
	fi, err := os.Stat(filepath.Join(dir, "f"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, %v; want 0600", fi.Mode(), err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("%d entries in the directory, want 1 (no temporary file left)", len(ents))
	}
}

func TestWriteFailureLeavesOld(t *testing.T) {
	dir := t.TempDir()
	if err := Write(dir, "f", []byte("old")); err != nil {
		t.Fatal(err)
	}
	// A directory in the way of the rename: the write fails, the old
	// file stays and no temporary file is left.
	if err := Write(dir, "", []byte("new")); err == nil {
		t.Fatal("Write over the directory itself succeeded")
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "f")); string(got) != "old" {
		t.Errorf("got %q, want old", got)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("%d entries in the directory, want 1", len(ents))
	}
}
