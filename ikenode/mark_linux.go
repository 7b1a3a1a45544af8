package ikenode

import (
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// setMark gives the IKE socket the underlay's SO_MARK, so that policy
// routing treats IKE as it treats ESP.
func setMark(c *net.UDPConn, mark uint32) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_MARK, int(mark))
	}); err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("SO_MARK: %w", serr)
	}
	return nil
}
