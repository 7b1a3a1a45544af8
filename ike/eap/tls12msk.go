package eap

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"hash"
	"strings"
	"sync"
)

// TLS 1.2's MSK (RFC 5216 §2.3) is PRF(master secret, "client EAP
// encryption", client random | server random). crypto/tls computes it
// (ExportKeyingMaterial) only when the peer negotiated the Extended Master
// Secret (RFC 7627), and strongSwan 5.9.8's TLS stack does not: it would
// refuse every charon client and gateway. So the MSK is computed here
// from what crypto/tls does hand out: the master secret and client random
// through its KeyLogWriter (the NSS key log line CLIENT_RANDOM), and the
// server random read from the ServerHello as it passes through the pipe.
// With or without the Extended Master Secret the formula is the same
// (RFC 7627 changes only how the master secret is made).

// tls12Keys collects them for one conversation. The key log is written
// by the TLS goroutine, the hello seen and the MSK made by the caller's:
// mu guards all three fields.
type tls12Keys struct {
	mu                         sync.Mutex
	master                     []byte
	clientRandom, serverRandom []byte
}

// Write takes crypto/tls's key log lines (tls.Config.KeyLogWriter).
func (k *tls12Keys) Write(line []byte) (int, error) {
	f := strings.Fields(string(line))
	if len(f) == 3 && f[0] == "CLIENT_RANDOM" {
		cr, err1 := hex.DecodeString(f[1])
		ms, err2 := hex.DecodeString(f[2])
		if err1 == nil && err2 == nil {
			k.mu.Lock()
			clear(k.master)
			k.clientRandom, k.master = cr, ms
			k.mu.Unlock()
		}
	}
	return len(line), nil
}

// Handshake record and message types (RFC 5246 §6.2.1, §7.4).
const (
	recordHandshake  = 22
	helloServer      = 2
	recordHeaderLen  = 5
	helloRandomStart = recordHeaderLen + 4 + 2 // after the handshake header and the version
)

// observe looks at one EAP-TLS message, either way, for the ServerHello:
// the first handshake message of the server's first flight.
func (k *tls12Keys) observe(msg []byte) {
	if len(msg) < helloRandomStart+32 || msg[0] != recordHandshake || msg[recordHeaderLen] != helloServer {
		return
	}
	k.mu.Lock()
	if k.serverRandom == nil {
		k.serverRandom = bytes.Clone(msg[helloRandomStart : helloRandomStart+32])
	}
	k.mu.Unlock()
}

// msk returns the first 64 bytes of the keying material of a TLS 1.2
// handshake of suite, and zeroes the master secret.
func (k *tls12Keys) msk(suite uint16) ([]byte, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.master == nil || len(k.clientRandom) != 32 || len(k.serverRandom) != 32 {
		return nil, errors.New("eap: EAP-TLS MSK: the master secret or a hello random was not seen")
	}
	h := sha256.New
	if strings.HasSuffix(tls.CipherSuiteName(suite), "_SHA384") {
		h = sha512.New384 // RFC 5289 §3: the suite's PRF hash
	}
	seed := append(append([]byte("client EAP encryption"), k.clientRandom...), k.serverRandom...)
	km := prf12(h, k.master, seed, 128)
	msk := bytes.Clone(km[:mskLen])
	clear(km)
	clear(k.master) // used once
	k.master = nil
	return msk, nil
}

// wipe zeroes the master secret.
func (k *tls12Keys) wipe() {
	k.mu.Lock()
	clear(k.master)
	k.master = nil
	k.mu.Unlock()
}

// prf12 is TLS 1.2's PRF, P_hash(secret, seed) (RFC 5246 §5), n bytes;
// the label is the start of seed.
func prf12(h func() hash.Hash, secret, seed []byte, n int) []byte {
	mac := hmac.New(h, secret)
	out := make([]byte, 0, n+mac.Size())
	a := seed
	for len(out) < n {
		mac.Reset()
		mac.Write(a)
		a = mac.Sum(nil)
		mac.Reset()
		mac.Write(a)
		mac.Write(seed)
		out = mac.Sum(out)
	}
	return out[:n]
}
