package ikenode

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/sirupsen/logrus"
)

// TestKeylogRefusesUnsafeFiles: the keylog files take keys only when
// nobody else can read them. An existing file readable by group or
// others kept its mode and got the keys appended, and a symlink was
// followed (anyone who may write the directory chose where the keys
// went); both are refused now, naming the file, as are a file of another
// user and one that is not a regular file. Nothing is written anywhere.
func TestKeylogRefusesUnsafeFiles(t *testing.T) {
	discard := logrus.New()
	discard.SetOutput(io.Discard)
	for _, tt := range []struct {
		name string
		// prepare makes the file at path (the keylog's ESP file) and
		// returns the file whose content must stay empty.
		prepare func(t *testing.T, path string) string
		want    string
	}{
		{"mode 0644", func(t *testing.T, path string) string {
			if err := os.WriteFile(path, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			os.Chmod(path, 0o644) // past the umask
			return path
		}, "mode 0644"},
		{"mode 0640", func(t *testing.T, path string) string {
			if err := os.WriteFile(path, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			os.Chmod(path, 0o640)
			return path
		}, "mode 0640"},
		{"symlink", func(t *testing.T, path string) string {
			target := filepath.Join(filepath.Dir(path), "elsewhere")
			if err := os.WriteFile(target, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, path); err != nil {
				t.Fatal(err)
			}
			return target
		}, "symbolic link"},
		{"another user's file", func(t *testing.T, path string) string {
			if os.Geteuid() != 0 {
				t.Skip("chown needs root")
			}
			if err := os.WriteFile(path, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(path, 65534, 65534); err != nil {
				t.Fatal(err)
			}
			return path
		}, "owned by uid 65534"},
		{"a hard link", func(t *testing.T, path string) string {
			// A file of ours, of mode 0600, that has another name:
			// whoever made the link chose where the keys go (with
			// fs.protected_hardlinks off, any file of ours).
			target := filepath.Join(t.TempDir(), "elsewhere")
			if err := os.WriteFile(target, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Link(target, path); err != nil {
				t.Skip(err)
			}
			return target
		}, "2 names"},
		{"a FIFO", func(t *testing.T, path string) string {
			if err := syscall.Mkfifo(path, 0o600); err != nil {
				t.Skip(err)
			}
			return ""
		}, "not a regular file"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			esp := filepath.Join(dir, "x-"+KeylogESPFile)
			watched := tt.prepare(t, esp)
			if err := CheckKeylog(filepath.Join(dir, "x-")); err == nil || !strings.Contains(err.Error(), esp) {
				t.Errorf("CheckKeylog: got %v, want an error naming %s", err, esp)
			}
			m := &Daemon{log: discard}
			err := m.openKeylog(filepath.Join(dir, "x-"))
			if m.keylog != nil {
				m.keylog.close()
			}
			if err == nil || !strings.Contains(err.Error(), esp) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error naming %s and saying %q", err, esp, tt.want)
			}
			if watched != "" {
				if fi, err := os.Stat(watched); err != nil || fi.Size() != 0 {
					t.Fatalf("%s written to (%v)", watched, err)
				}
			}
		})
	}
	// A fresh prefix gets files of mode 0600 whatever the umask, and an
	// existing 0600 file of ours is appended to.
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	dir := t.TempDir()
	m := &Daemon{log: discard}
	if err := CheckKeylog(filepath.Join(dir, "y-")); err != nil {
		t.Fatalf("CheckKeylog of files not there yet: %v", err)
	}
	if err := m.openKeylog(filepath.Join(dir, "y-")); err != nil {
		t.Fatal(err)
	}
	m.keylog.close()
	if err := m.openKeylog(filepath.Join(dir, "y-")); err != nil {
		t.Fatalf("reopening our own files: %v", err)
	}
	m.keylog.close()
	if err := CheckKeylog(filepath.Join(dir, "y-")); err != nil {
		t.Fatalf("CheckKeylog of our own files: %v", err)
	}
	for _, name := range []string{KeylogIKEFile, KeylogESPFile} {
		if fi, err := os.Stat(filepath.Join(dir, "y-"+name)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, mode %v; want 0600", name, err, fi.Mode())
		}
	}
}
