package ike

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"io"
	"net/netip"
	"sync"
	"time"

	"github.com/ipsecd/ipsecd/ike/message"
)

// Cookies is a responder's defence against IKE_SA_INIT floods (RFC 7296
// §2.6): once Threshold half-open IKE SAs exist, an IKE_SA_INIT request
// without a valid COOKIE notify is answered with one and leaves no state.
// A cookie is
//
//	version (4 bytes) | HMAC-SHA-256(secret[version], Ni | IPi | SPIi)[:16]
//
// so that checking it needs nothing but the request itself. The secret
// is replaced every CookieRotation; cookies of the current and the
// previous secret are accepted, so a cookie handed out just before a
// rotation still works when the initiator comes back with it.
//
// The daemon holds one Cookies for all connections (the contract's
// ike.cookie_threshold) and calls Check before Respond. Cookies is safe
// for concurrent use. Its zero value is ready, with the default
// threshold.
type Cookies struct {
	// Threshold is the number of half-open IKE SAs at which cookies are
	// asked; 0 means DefaultCookieThreshold, a negative value always.
	Threshold int
	// Rand is the source of secrets; nil means crypto/rand.
	Rand io.Reader

	// mu guards:
	mu        sync.Mutex
	version   uint32
	secret    [32]byte // of version
	previous  [32]byte // of version-1
	rotatedAt time.Time
}

// DefaultCookieThreshold is the default of Cookies.Threshold (the
// contract's ike.cookie_threshold).
const DefaultCookieThreshold = 10

// CookieRotation is how long one cookie secret is used.
const CookieRotation = 2 * time.Minute

const cookieMACLen = 16

// cookieLen is the size of our cookies: version and MAC.
const cookieLen = 4 + cookieMACLen

// Check decides about a message that arrived at the responder from
// remote for no known SA, with halfOpen responder SAs waiting for their
// IKE_AUTH. It returns pass true when the message may go to Respond: it
// is not an IKE_SA_INIT request, cookies are not needed yet, or it
// carries a valid cookie. Otherwise reply is the COOKIE notify to send
// back to remote (nil for a request too malformed to answer), and no
// state is kept.
func (c *Cookies) Check(raw []byte, remote netip.AddrPort, halfOpen int, now time.Time) (reply []byte, pass bool) {
	h := message.Header(raw)
	if !h.IsValid() || h.ExchangeType() != message.IKESAInit || h.Flags()&message.FlagResponse != 0 || h.RSPI() != 0 {
		return nil, true
	}
	t := c.Threshold
	if t == 0 {
		t = DefaultCookieThreshold
	}
	if halfOpen < t {
		return nil, true
	}
	m, err := message.Parse(raw)
	if err != nil {
		return nil, true // Respond drops it or answers UNSUPPORTED_CRITICAL_PAYLOAD
	}
	ni := m.Get(message.TypeNONC)
	if len(ni) < 16 || len(ni) > 256 {
		return nil, false
	}
	// RFC 7296 §2.6: the cookie notify comes first.
	if len(m.Payloads) > 0 && m.Payloads[0].Type == message.TypeN {
		if n := message.Notify(m.Payloads[0].Body); n.IsValid() && n.Type() == message.Cookie && c.valid(n.Data(), ni, remote, m.ISPI, now) {
			return nil, true
		}
	}
	cookie := c.make(ni, remote, m.ISPI, now)
	return refusal(m.HeaderFields, notify(message.Cookie, cookie)), false
}

func (c *Cookies) rotateLocked(now time.Time) {
	if !c.rotatedAt.IsZero() && now.Sub(c.rotatedAt) < CookieRotation && now.After(c.rotatedAt.Add(-time.Second)) {
		return
	}
	r := c.Rand
	if r == nil {
		r = rand.Reader
	}
	if c.rotatedAt.IsZero() {
		io.ReadFull(r, c.previous[:]) // no cookie of version -1 was given out
	} else {
		c.previous = c.secret
	}
	if _, err := io.ReadFull(r, c.secret[:]); err != nil {
		panic("ike: no randomness for cookie secrets: " + err.Error())
	}
	c.version++
	c.rotatedAt = now
}

func cookieMAC(secret *[32]byte, ni []byte, ip netip.Addr, spi uint64) []byte {
	m := hmac.New(sha256.New, secret[:])
	m.Write(ni)
	a := ip.Unmap().AsSlice()
	m.Write(a)
	var s [8]byte
	binary.BigEndian.PutUint64(s[:], spi)
	m.Write(s[:])
	return m.Sum(nil)[:cookieMACLen]
}

func (c *Cookies) make(ni []byte, remote netip.AddrPort, spi uint64, now time.Time) []byte {
	c.mu.Lock()
	c.rotateLocked(now)
	v, secret := c.version, c.secret
	c.mu.Unlock()
	out := binary.BigEndian.AppendUint32(make([]byte, 0, cookieLen), v)
	return append(out, cookieMAC(&secret, ni, remote.Addr(), spi)...)
}

func (c *Cookies) valid(cookie, ni []byte, remote netip.AddrPort, spi uint64, now time.Time) bool {
	if len(cookie) != cookieLen {
		return false
	}
	v := binary.BigEndian.Uint32(cookie)
	c.mu.Lock()
	c.rotateLocked(now)
	var secret [32]byte
	switch v {
	case c.version:
		secret = c.secret
	case c.version - 1:
		secret = c.previous
	default:
		c.mu.Unlock()
		return false
	}
	c.mu.Unlock()
	return hmac.Equal(cookie[4:], cookieMAC(&secret, ni, remote.Addr(), spi))
}
