package keytext

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// MaxFile bounds what a key file may hold: the longest key is 36 bytes, 72
// hex digits, and the rest is room for white space.
const MaxFile = 4096

// ReadFile reads a key from a key file of hex text, 0x optional, with any
// white space around it: a regular file of at most MaxFile bytes, read
// without leaving copies of the key behind. warnings say who else could
// read or change the file (Exposure); the caller shows them, as the file
// is still used. Its errors say what is wrong with the file without its
// path or its content.
func ReadFile(path string) (key []byte, warnings []string, err error) {
	data, fi, err := ReadRegular(path, MaxFile, "a key file")
	defer clear(data)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err // without the path
		}
		return nil, nil, err
	}
	k, err := parseFile(data)
	if err != nil {
		return nil, nil, err
	}
	return k, Exposure(path, fi, false, true), nil
}

// ReadRegular reads the regular file at path, of at most max bytes, into
// one buffer sized once, so that no copy of a key is left behind by a
// growing read. A FIFO, a device (/dev/zero), a directory or a larger
// file is refused before anything is read; what is a file named in
// errors. It returns the file's FileInfo, for its mode and owner. The
// bytes are the caller's to zero.
func ReadRegular(path string, max int64, what string) ([]byte, os.FileInfo, error) {
	// O_NONBLOCK: opening a FIFO would otherwise wait for a writer. It
	// changes nothing for a regular file.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	fi, err := f.Stat() // of the file opened, not of what path names now
	if err != nil {
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("not a regular file (%s): %s must be one", kind(fi.Mode()), what)
	}
	if fi.Size() > max {
		return nil, nil, fmt.Errorf("%d bytes: %s may have at most %d", fi.Size(), what, max)
	}
	// One byte more than the size, to see a file that grew meanwhile.
	buf := make([]byte, fi.Size()+1)
	n, err := io.ReadFull(f, buf)
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
	case err != nil:
		clear(buf)
		return nil, nil, err
	default:
		clear(buf)
		return nil, nil, errors.New("the file grew while it was read: try again")
	}
	return buf[:n], fi, nil
}

// kind names what a file that is not regular is.
func kind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&os.ModeNamedPipe != 0:
		return "a FIFO"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeCharDevice != 0:
		return "a character device"
	case m&os.ModeDevice != 0:
		return "a block device"
	}
	return "mode " + m.String()
}

// Exposure returns the warnings for a file that holds keys (holdsKeys)
// or names the files that do: a config file (main) or a key file.
// Whoever can read it has the keys: group or others may not (only for a
// file that holds keys). Whoever can write it chooses the keys: group and
// others may not, nor a user other than the one ipsecd runs as, or root.
// None when all is well.
func Exposure(path string, fi os.FileInfo, main, holdsKeys bool) []string {
	var ws []string
	perm := fi.Mode().Perm()
	name := "key_file " + path
	if main {
		name = path
	}
	if holdsKeys && perm&0o044 != 0 {
		if main {
			ws = append(ws, fmt.Sprintf("%s holds keys and is readable by group or others (mode %04o): run chmod 600 %s, or move the keys to key_file files", path, perm, path))
		} else {
			ws = append(ws, fmt.Sprintf("%s is readable by group or others (mode %04o): run chmod 600 %s", name, perm, path))
		}
	}
	if perm&0o022 != 0 {
		ws = append(ws, fmt.Sprintf("%s is writable by group or others (mode %04o), who can change the keys: run chmod go-w %s", name, perm, path))
	}
	if uid, ok := fileOwner(fi); ok && uid != 0 && uid != os.Geteuid() {
		ws = append(ws, fmt.Sprintf("%s is owned by uid %d, not by uid %d that runs ipsecd, nor by root: that user can change the keys: run chown %d %s",
			name, uid, os.Geteuid(), os.Geteuid(), path))
	}
	return ws
}
