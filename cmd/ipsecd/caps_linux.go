package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// capabilityHint explains a start-up error that failed for want of a
// capability: which ones the process lacks of those the daemon needs
// (CAP_NET_ADMIN for TUN devices, routes and SO_MARK; CAP_NET_RAW for
// raw ESP), and how to grant them. It returns "" when err is no
// permission error or no needed capability is missing, so that the
// start-up error says it once, where it is logged.
func capabilityHint(err error, rawESP bool) string {
	if !errors.Is(err, syscall.EPERM) && !errors.Is(err, syscall.EACCES) {
		return ""
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if unix.Capget(&hdr, &data[0]) != nil {
		return ""
	}
	effective := uint64(data[0].Effective) | uint64(data[1].Effective)<<32
	type capability struct {
		bit        uint
		name, flag string // CAP_NET_ADMIN, NET_ADMIN
	}
	need := []capability{{unix.CAP_NET_ADMIN, "CAP_NET_ADMIN", "NET_ADMIN"}}
	if rawESP {
		need = append(need, capability{unix.CAP_NET_RAW, "CAP_NET_RAW", "NET_RAW"})
	}
	var names, setcap, cap []string
	for _, c := range need {
		if effective&(1<<c.bit) == 0 {
			names = append(names, c.name)
			setcap = append(setcap, strings.ToLower(c.name))
			cap = append(cap, "--cap-add "+c.flag)
		}
	}
	if names == nil {
		return ""
	}
	bin, binErr := os.Executable()
	if binErr != nil {
		bin = "ipsecd"
	}
	return fmt.Sprintf("the process lacks %s: run it as root, or grant it with file capabilities (setcap %s+p %s), "+
		"in a container with %s, or in a systemd unit with AmbientCapabilities=%s",
		strings.Join(names, " and "), strings.Join(setcap, ","), bin, strings.Join(cap, " "), strings.Join(names, " "))
}
