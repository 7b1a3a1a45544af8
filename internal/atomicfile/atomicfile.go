// Package atomicfile writes a file whole or not at all: a reader (or a
// process started after a crash) sees either the old contents or the new,
// never a part. The state directory's files (package seqstate's records,
// package pool's leases) are written through it.
package atomicfile

import (
	"os"
	"path/filepath"
)

// Write makes data the contents of dir/name, mode 0600: it writes a
// temporary file in dir, syncs it, renames it over name and syncs dir so
// that the new name stays. On error dir/name is as it was and the
// temporary file is gone. Errors name the file (*os.PathError).
func Write(dir, name string, data []byte) error {
	f, err := os.CreateTemp(dir, "."+name+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if err := f.Chmod(0o600); err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		return err
	}
	ok = true
	return SyncDir(dir)
}

// SyncDir syncs the directory dir, so that names made or renamed in it
// survive a crash.
func SyncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
