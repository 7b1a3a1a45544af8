package main

import (
	"fmt"
	"syscall"
	"unsafe"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

// raiseCapabilities makes every capability the process is permitted to
// use effective, on all of its threads. It is a no-op for root, whose
// effective set already equals its permitted set.
//
// Why: a process that is not root holds capabilities after exec only
// through ambient capabilities (podman sets them for --cap-add; Docker
// and Kubernetes do not) or through file capabilities on its binary. The
// container image gives /ipsecd cap_net_admin and cap_net_raw as
// *permitted* file capabilities without the effective bit: with the
// effective bit the kernel refuses to exec the binary at all when the
// container's bounding set lacks one of them (say NET_RAW, which only
// raw_esp needs), whereas permitted alone always execs and keeps what the
// bounding set allows. Those capabilities are effective only once the
// program asks, which is done here. Capabilities belong to threads, not
// processes, so the change goes through AllThreadsSyscall; a cgo build
// cannot do that, and says so.
func raiseCapabilities(log logrus.FieldLogger) {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData // version 3 takes two 32-bit words
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		log.WithError(err).Warn("reading capabilities")
		return
	}
	if data[0].Effective == data[0].Permitted && data[1].Effective == data[1].Permitted {
		return
	}
	raised := uint64(data[0].Permitted&^data[0].Effective) | uint64(data[1].Permitted&^data[1].Effective)<<32
	for i := range data {
		data[i].Effective = data[i].Permitted
	}
	_, _, errno := syscall.AllThreadsSyscall(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0)
	if errno != 0 {
		err := error(errno)
		if errno == unix.ENOTSUP {
			err = fmt.Errorf("%w (a cgo build cannot change every thread's capabilities; build with CGO_ENABLED=0)", errno)
		}
		log.WithError(err).Warnf("making permitted capabilities %#x effective", raised)
		return
	}
	log.Debugf("made permitted capabilities %#x effective", raised)
}
