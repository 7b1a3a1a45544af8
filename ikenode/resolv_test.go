package ikenode

import (
	"os"
	"path/filepath"
	"testing"
)

// TestResolvWrite: our lines go before the file's, replace ours of
// before (a daemon that died), leave it as it was when none are left,
// and a file we created goes again.
func TestResolvWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "resolv.conf")
	theirs := "# the host's\nnameserver 192.0.2.53\n"
	stale := "nameserver 10.9.9.9 # by ipsecd\n"
	if err := os.WriteFile(path, []byte(stale+theirs), 0o644); err != nil {
		t.Fatal(err)
	}
	r := resolvState{path: path}
	read := func() string {
		b, err := os.ReadFile(path)
		if err != nil {
			return "(" + err.Error() + ")"
		}
		return string(b)
	}
	if err := r.write([]string{"10.3.0.53", "fd00:3::53"}, []string{"corp.example", "lab.example"}); err != nil {
		t.Fatal(err)
	}
	want := "nameserver 10.3.0.53 # by ipsecd\nnameserver fd00:3::53 # by ipsecd\nsearch corp.example lab.example # by ipsecd\n" + theirs
	if got := read(); got != want {
		t.Errorf("with ours:\n%s\nwant\n%s", got, want)
	}
	if err := r.write(nil, nil); err != nil {
		t.Fatal(err)
	}
	if got := read(); got != theirs {
		t.Errorf("without ours:\n%s\nwant\n%s", got, theirs)
	}

	created := filepath.Join(dir, "new.conf")
	r = resolvState{path: created, created: true}
	if err := r.write([]string{"10.3.0.53"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := r.write(nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(created); !os.IsNotExist(err) {
		t.Errorf("the file we created is still there: %v", err)
	}
}

// TestDNSName: what a gateway's INTERNAL_DNS_DOMAIN must be to reach the
// search line; a newline would make a line of its own.
func TestDNSName(t *testing.T) {
	for d, want := range map[string]bool{
		"corp.example": true, "corp.example.": true, "a-b_c.x1": true,
		"": false, ".": false, "a..b": false, "corp.example\nnameserver 6.6.6.6": false,
		"a b": false, "é.example": false, string(make([]byte, 64)) + ".x": false,
	} {
		if got := dnsName(d); got != want {
			t.Errorf("dnsName(%q) = %t, want %t", d, got, want)
		}
	}
}
