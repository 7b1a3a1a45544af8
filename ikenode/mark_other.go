//go:build !linux

package ikenode

import (
	"errors"
	"net"
)

// setMark: SO_MARK is Linux's; elsewhere a mark is refused.
func setMark(c *net.UDPConn, mark uint32) error {
	return errors.New("underlay.mark (SO_MARK) is Linux only")
}
