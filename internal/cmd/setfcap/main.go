//go:build linux

// Command setfcap gives a file permitted file capabilities, as
// `setcap cap_net_admin,cap_net_raw=p FILE` does, for the Dockerfile's
// build stage, so that it needs nothing but a Go image (no setcap, no
// libcap2-bin): the image's non-root daemon gets its capabilities from the
// binary.
//
//	go run ./internal/cmd/setfcap -caps net_admin,net_raw FILE
//
// It writes the security.capability extended attribute as struct
// vfs_cap_data revision 2 (linux/capability.h), without the effective
// flag: the daemon raises what it needs itself, and a binary whose
// effective flag is set refuses to execute where the bounding set lacks one
// of its capabilities. Writing it needs CAP_SETFCAP (root in the build
// container). In a user namespace the kernel stores it as revision 3, bound
// to that namespace's root, which is why images are built by root.
package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// caps are the capabilities this tool knows by name: the daemon's.
var caps = map[string]int{
	"net_admin":        unix.CAP_NET_ADMIN,
	"net_raw":          unix.CAP_NET_RAW,
	"net_bind_service": unix.CAP_NET_BIND_SERVICE,
}

// From linux/capability.h.
const (
	vfsCapRevision2 = 0x02000000
	xattrName       = "security.capability"
)

// encode returns vfs_cap_data for the permitted set, little-endian:
// magic_etc, then {permitted, inheritable} for the low and high 32 bits.
func encode(permitted uint64) []byte {
	b := make([]byte, 20)
	binary.LittleEndian.PutUint32(b[0:], vfsCapRevision2)
	binary.LittleEndian.PutUint32(b[4:], uint32(permitted))
	binary.LittleEndian.PutUint32(b[12:], uint32(permitted>>32))
	return b
}

// parseCaps turns "net_admin,cap_net_raw" into a bit set.
func parseCaps(list string) (uint64, error) {
	var set uint64
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimPrefix(strings.ToLower(strings.TrimSpace(name)), "cap_")
		c, ok := caps[name]
		if !ok {
			return 0, fmt.Errorf("unknown capability %q (known: net_admin, net_raw, net_bind_service)", name)
		}
		set |= 1 << c
	}
	return set, nil
}

func main() {
	list := flag.String("caps", "net_admin,net_raw", "the permitted capabilities, comma-separated")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: setfcap [-caps LIST] FILE...\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	set, err := parseCaps(*list)
	if err != nil {
		fmt.Fprintf(os.Stderr, "setfcap: -caps: %v\n", err)
		os.Exit(2)
	}
	for _, f := range flag.Args() {
		if err := unix.Setxattr(f, xattrName, encode(set), 0); err != nil {
			fmt.Fprintf(os.Stderr, "setfcap: %s: %s: %v (needs CAP_SETFCAP)\n", f, xattrName, err)
			os.Exit(1)
		}
	}
}
