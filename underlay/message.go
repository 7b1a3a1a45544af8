package underlay

import (
	"errors"
	"net"
	"net/netip"
)

// DefaultPort is the ESP-in-UDP port of RFC 3948.
const DefaultPort = 4500

// BatchSize is how many messages a Reader returns at most per ReadBatch and
// the batch size WriteBatch handles per system call; larger write batches are
// sent in several calls.
const BatchSize = 128

// maxGSOSegments is the kernel's limit on segments per UDP_SEGMENT send
// (UDP_MAX_SEGMENTS; raised to 128 in newer kernels, 64 works everywhere).
const maxGSOSegments = 64

// Message is one ESP packet on the wire: SPI through ICV, without the outer
// IP and UDP headers. The zero value is an empty message.
type Message struct {
	// Buf is the whole buffer; it belongs to the caller before and after a
	// call, and the package keeps no reference to it.
	Buf []byte
	// Off and Len locate the ESP packet: Buf[Off:Off+Len]. On receive the
	// packet is placed at Buf[Off:] (Off is input only) and Len is set.
	Off, Len int
	// Peer is the remote address: the destination on send, the source on
	// receive. Its port is 0 for raw ESP. IPv4-mapped IPv6 addresses are
	// sent as IPv4.
	Peer netip.AddrPort
	// Local is the local address the packet arrived on, when the socket is
	// bound to an unspecified address (IP_PKTINFO); otherwise invalid. On
	// send, a valid Local selects the source address on such a socket.
	Local netip.Addr
	// Raw says raw ESP (IP protocol 50) rather than ESP in UDP: set by
	// ReadBatch, read by WriteBatch to choose the socket.
	Raw bool
}

// Data returns the ESP packet, Buf[Off:Off+Len].
func (m *Message) Data() []byte { return m.Buf[m.Off : m.Off+m.Len] }

// Config says which sockets Open binds.
type Config struct {
	// UDP is the address to bind for ESP in UDP (port 0 picks a free port;
	// the daemon's default is DefaultPort). An unspecified address also
	// binds the other family. Raw ESP sockets bind to UDP.Addr() too.
	UDP netip.AddrPort
	// RawESP adds raw IP protocol 50 sockets (needs CAP_NET_RAW).
	RawESP bool
	// Mark, when non-zero, is set as SO_MARK on every socket (needs
	// CAP_NET_ADMIN).
	Mark uint32
	// DisableGSO and DisableGRO turn UDP segmentation offload off even
	// where the kernel has it (for tests and for debugging).
	DisableGSO, DisableGRO bool
	// NonESP, if set, is called with every UDP datagram that starts with the
	// non-ESP marker (IKE, RFC 3948 §2.2), marker included, from the
	// Reader's goroutine. b is valid only during the call. Such datagrams
	// are counted and never handed up by ReadBatch.
	NonESP func(b []byte, peer netip.AddrPort, local netip.Addr)
}

// Logf logs a formatted line; logrus's (*Entry).Infof fits. Nil discards.
type Logf func(format string, args ...any)

var (
	// ErrNotSupported is returned by Open on platforms without an underlay
	// implementation (all but Linux).
	ErrNotSupported = errors.New("underlay: not supported on this platform")
	// ErrNoSocket is returned by WriteBatch for a message that no open
	// socket can carry (e.g. an IPv6 peer on an IPv4-only Conn, or Raw
	// without Config.RawESP, or no peer address). The message is counted as a send error; the
	// rest of the batch is still sent.
	ErrNoSocket = errors.New("underlay: no socket for this peer")
	// ErrClosed is returned by ReadBatch and WriteBatch after Close. It is
	// net.ErrClosed, so errors.Is works with either.
	ErrClosed = net.ErrClosed
	// ErrBadConfig is wrapped by Open's errors about the Config itself.
	ErrBadConfig = errors.New("underlay: bad config")
)
