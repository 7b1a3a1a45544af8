#!/usr/bin/python3
"""An independent ESP peer for ipsecd's interop tests, built on scapy's
SecurityAssociation (scapy/layers/ipsec.py). Run it with /usr/bin/python3
(Debian python3-scapy).

  scapy_peer.py selftest
      Check this script against itself and published vectors: scapy seals
      and opens its own packets in every suite, with and without ESN and
      across the 2^32 boundary; it opens the RFC 7634 Appendix A packet
      (ChaCha20-Poly1305) and seals it again bit for bit; it opens the
      AES-GCM cases of draft-mcgrew-gcm-test-01 (ESN AAD). No network.

  scapy_peer.py peer --suite S --key-in HEX --key-out HEX ...
      Play the far end of one ipsecd tunnel (see --help): seal inner ICMP
      echo requests with the key of ipsecd's inbound SA, send them as ESP in
      UDP (or raw ESP), and open what ipsecd sends back with the key of its
      outbound SA, checking that each request gets its echo reply.

  scapy_peer.py send --suite S --key-in HEX --spi-in SPI --packets LIST ...
      Seal inner ICMP echo requests with the key of ipsecd's inbound SA,
      each from and to the inner addresses LIST names, and send them;
      expect nothing back. For tests of what ipsecd must refuse although
      it authenticates (a spoofed inner source, the wrong encapsulation).

The last line printed is "PASS ..." or "FAIL: why"; a line "RESULT {json}"
before it sums up what crossed. The exit status is 0 only on PASS.

One deviation from scapy: with ESN and a separate integrity algorithm
(AES-CBC or NULL with HMAC-SHA-256-128), RFC 4303 section 3.3.2.1 puts the
high 32 bits of the sequence number into the ICV, after the trailer. scapy
2.5.0 leaves them out for ESP (AuthAlgo.sign ignores esn), so this script
computes that ICV itself with hmac/hashlib and lets scapy do the rest. The
self-test checks that the two agree where ESN is off.
"""

import argparse
import hashlib
import hmac
import json
import os
import select
import socket
import struct
import sys
import time

import warnings

warnings.filterwarnings("ignore")

from scapy.all import IP, IPv6, ICMP, ICMPv6EchoRequest, ICMPv6EchoReply, Raw, raw  # noqa: E402
from scapy.layers.ipsec import ESP, SecurityAssociation, IPSecIntegrityError  # noqa: E402
from cryptography.exceptions import InvalidTag  # noqa: E402
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes  # noqa: E402

# Suites by the names of integration/configs_test.go: scapy's algorithm
# names and how the key material splits (AEAD: key || 4-byte salt, which
# scapy also takes at the end of crypt_key; others: cipher key || HMAC key).
SUITES = {
    "aes-gcm-128": ("AES-GCM", None, 20, 0),
    "aes-gcm-256": ("AES-GCM", None, 36, 0),
    "chacha20-poly1305": ("CHACHA20-POLY1305", None, 36, 0),
    "aes-cbc-hmac-sha256": ("AES-CBC", "SHA2-256-128", 16, 32),
    "null-hmac-sha256": ("NULL", "SHA2-256-128", 0, 32),
}

ICV_HMAC = 16  # HMAC-SHA-256-128 (RFC 4868)

# AES-GCM with a truncated ICV (RFC 4106 section 8: 8 or 12 bytes). scapy
# 2.5.0 appends cryptography's full 16-byte tag whatever icv_size says, so
# these suites are sealed and opened by TruncGCMCodec with cryptography's
# (OpenSSL's) GCM directly: still nothing of ipsecd's.
TRUNC_GCM = {"aes-gcm-128-icv64": 8, "aes-gcm-128-icv96": 12}
for _name in TRUNC_GCM:
    SUITES[_name] = ("AES-GCM", None, 20, 0)


class Failure(Exception):
    pass


def Codec(suite, key, spi, esn, outer_src, outer_dst):
    """The codec of one direction of ESP for one SA (see ScapyCodec)."""
    if suite in TRUNC_GCM:
        return TruncGCMCodec(suite, key, spi, esn)
    return ScapyCodec(suite, key, spi, esn, outer_src, outer_dst)


class TruncGCMCodec:
    """ScapyCodec's interface for AES-GCM with a truncated ICV, tunnel mode:
    RFC 4106 by hand on cryptography's GCM (the IV is the 64-bit sequence
    number, the trailer pads to 4 bytes with 1, 2, 3, ...)."""

    def __init__(self, suite, key, spi, esn):
        if len(key) != 20:
            raise Failure("%s: key is %d bytes, want 20" % (suite, len(key)))
        self.icv, self.key, self.salt = TRUNC_GCM[suite], key[:16], key[16:]
        self.spi, self.esn = spi, esn

    def _aad(self, seql, seqh):
        if self.esn:
            return struct.pack("!LLL", self.spi, seqh, seql)
        return struct.pack("!LL", self.spi, seql)

    def seal(self, inner, seq, iv=None):
        if not self.esn and seq >> 32:
            raise Failure("seq %#x needs ESN" % seq)
        iv = iv or struct.pack("!Q", seq)
        payload = raw(inner)
        padlen = (4 - (len(payload) + 2) % 4) % 4
        pt = payload + bytes(range(1, padlen + 1)) + bytes([padlen, 4 if inner.version == 4 else 41])
        enc = Cipher(algorithms.AES(self.key), modes.GCM(self.salt + iv)).encryptor()
        enc.authenticate_additional_data(self._aad(seq & 0xFFFFFFFF, seq >> 32))
        ct = enc.update(pt) + enc.finalize()
        return struct.pack("!LL", self.spi, seq & 0xFFFFFFFF) + iv + ct + enc.tag[:self.icv]

    def open(self, esp, seqh=0):
        if len(esp) < 16 + self.icv + 4:
            raise Failure("ESP packet of %d bytes" % len(esp))
        spi, seql = struct.unpack("!LL", esp[:8])
        if spi != self.spi:
            raise Failure("SPI %#x, want %#x" % (spi, self.spi))
        iv, ct, tag = esp[8:16], esp[16:-self.icv], esp[-self.icv:]
        dec = Cipher(algorithms.AES(self.key), modes.GCM(self.salt + iv, tag, min_tag_length=self.icv)).decryptor()
        dec.authenticate_additional_data(self._aad(seql, seqh))
        try:
            pt = dec.update(ct) + dec.finalize()
        except InvalidTag:
            raise Failure("ICV mismatch (seq %#x)" % (seqh << 32 | seql))
        padlen, nh = pt[-2], pt[-1]
        inner = pt[:-2 - padlen]
        if nh == 4:
            return IP(inner)
        if nh == 41:
            return IPv6(inner)
        return Raw(inner)  # transport mode (a draft-mcgrew-gcm-test-01 case)


class ScapyCodec:
    """One direction of ESP for one SA: seal or open, tunnel mode.

    seal/open take and give the ESP packet from SPI to ICV, the bytes that
    travel in the UDP payload (RFC 3948) or as IP protocol 50.
    """

    def __init__(self, suite, key, spi, esn, outer_src, outer_dst):
        crypt, auth, crypt_len, auth_len = SUITES[suite]
        if len(key) != crypt_len + auth_len:
            raise Failure("%s: key is %d bytes, want %d" % (suite, len(key), crypt_len + auth_len))
        self.suite, self.spi, self.esn = suite, spi, esn
        self.auth_key = key[crypt_len:] if auth else None
        # With ESN and HMAC the ICV is ours (see the module doc); scapy
        # then runs without an integrity algorithm.
        self.own_icv = auth is not None and esn
        if ":" in outer_src:
            self.outer = IPv6(src=outer_src, dst=outer_dst)
        else:
            self.outer = IP(src=outer_src, dst=outer_dst)
        self.sa = SecurityAssociation(
            ESP,
            spi=spi,
            crypt_algo=crypt,
            crypt_key=key[:crypt_len] if crypt_len else None,
            auth_algo=None if self.own_icv else auth,
            auth_key=None if self.own_icv else self.auth_key,
            tunnel_header=self.outer,
            esn_en=esn,
        )

    def _icv(self, body, seqh):
        return hmac.new(self.auth_key, body + struct.pack("!L", seqh), hashlib.sha256).digest()[:ICV_HMAC]

    def seal(self, inner, seq, iv=None):
        """ESP bytes of inner (an IP or IPv6 packet) with 64-bit number seq."""
        if not self.esn and seq >> 32:
            raise Failure("seq %#x needs ESN" % seq)
        # Set the counter on the SA rather than passing seq_num/esn: scapy
        # reads "seq_num or self.seq_num", so a low half of 0 (2^32 with
        # ESN) could not be passed.
        self.sa.seq_num, self.sa.esn = seq & 0xFFFFFFFF, seq >> 32
        pkt = self.sa.encrypt(inner, iv=iv)
        esp = raw(pkt[ESP])
        if self.own_icv:
            esp += self._icv(esp, seq >> 32)
        return esp

    def open(self, esp, seqh=0):
        """The inner packet of ESP bytes esp, whose sequence number has high
        half seqh. Raises Failure if it does not authenticate."""
        if len(esp) < 8:
            raise Failure("ESP packet of %d bytes" % len(esp))
        spi, seql = struct.unpack("!LL", esp[:8])
        if spi != self.spi:
            raise Failure("SPI %#x, want %#x" % (spi, self.spi))
        if self.own_icv:
            body, icv = esp[:-ICV_HMAC], esp[-ICV_HMAC:]
            if not hmac.compare_digest(icv, self._icv(body, seqh)):
                raise Failure("ICV mismatch (HMAC, seq %#x)" % (seqh << 32 | seql))
            esp = body
        self.sa.esn = seqh
        outer = self.outer.copy()
        if outer.version == 4:
            outer.proto = 50
        else:
            outer.nh = 50
        pkt = outer.__class__(raw(outer / ESP(esp)))
        try:
            return self.sa.decrypt(pkt)
        except IPSecIntegrityError as e:
            raise Failure("ICV mismatch (seq %#x): %s" % (seqh << 32 | seql, e))


def unhex(s):
    return bytes.fromhex("".join(s.split()))


def check(cond, what):
    if not cond:
        raise Failure(what)


# ---------------------------------------------------------------- self-test

# RFC 7634 Appendix A (also in strongSwan's
# src/libipsec/tests/suites/test_chapoly.c): a tunnel-mode ESP packet,
# ChaCha20-Poly1305, SPI 0x01020304, seq 5, IV 1011121314151617, carrying an
# ICMP echo request 198.51.100.5 -> 192.0.2.5.
RFC7634_KEY = unhex("808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f a0a1a2a3")
RFC7634_INNER = unhex("""
    45000054a6f200004001e778c6336405c000020508005b7a3a080000553bec10
    0007362708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20212223
    2425262728292a2b2c2d2e2f3031323334353637""")
RFC7634_ESP = unhex("""
    0102030400000005101112131415161724039428b97f417e3c13753a4f05087b
    67c352e6a7fab1b982d466ef407ae5c614ee8099d52844eb61aa95dfab4c02f7
    2aa71e7c4c4f64c9befe2facc638e8f3cbec163fac469b502773f6fb94e664da
    9165b82829f641e076aaa8266b7fb0f7b11b369907e1ad43""")

# draft-mcgrew-gcm-test-01 section 4 (as embedded in snabbco/snabb
# src/lib/ipsec/aes_gcm.lua): key, salt, SPI, 64-bit seq (the AAD is the
# 12-byte ESN form), IV, plaintext with trailer, ciphertext with ICV.
GCM_DRAFT = [
    ('case 1', '4c80cdefbb5d10da906ac73c3613a634', '2e443b68', 0x00004321, 0x8765432100000000, '4956ed7e3b244cfe',
     '45000048699a000080114db7c0a80102c0a801010a9bf15638d301000001000000000000045f736970045f756470037369700963796265726369747902646b000021000101020201',
     'fecf537e729d5b07dc30df528dd22b768d1b98736696a6fd348509fa13ceac34cfa2436f14a3f3cf65925bf1f4a13c5d15b21e1884f5ff6247aeabb786b93bce61bc17d768fd9732459018148f6cbe722fd04796562dfdb4'),
    ('case 4', 'abbccddef00112233445566778899aab', 'decaf888', 0x00000100, 0x0000000000000001, 'cafedebaceface74',
     '4500004933ba00007f119106c3fb1d10c2b1d326c02831ce0035dd7b800302d500004e20001e8c18d75b81dc91baa0476b91b924b280389d92c963bac046ec959b6266c04722b14923010101',
     '18a6fd42f72cbf4ab2a2ea901f73d814e3e7f243d95412e1c349c1d2fbec168f9190feebaf2cb01984e65863965d7472b79da345e0e780191f0d2f0e0f496c226f2127b27db35724e7845d68651f57e65f354f75ff17015769623436'),
    ('case 8', '4c80cdefbb5d10da906ac73c3613a634', '22433c64', 0x00004321, 0x8765432100000007, '4855ec7d3a234bfd',
     '0800c6cd020007006162636465666768696a6b6c6d6e6f707172737401020201',
     '74752e8aeb5d873cd7c0f4acc36c4bff84b7d7b98f0ca8b6acda6894bc619069ef9cbc28fe1b56a7c4e0d58c86cd2bc0'),
]


def selftest():
    n = 0
    # 1. RFC 7634 Appendix A: open, then seal again with its IV.
    c = Codec("chacha20-poly1305", RFC7634_KEY, 0x01020304, False, "203.0.113.153", "203.0.113.5")
    inner = c.open(RFC7634_ESP)
    check(raw(inner) == RFC7634_INNER, "RFC 7634 A: inner packet %s, want %s" % (raw(inner).hex(), RFC7634_INNER.hex()))
    check(inner[IP].src == "198.51.100.5" and inner[IP].dst == "192.0.2.5" and inner[ICMP].type == 8,
          "RFC 7634 A: not the echo request 198.51.100.5 -> 192.0.2.5")
    sealed = c.seal(IP(RFC7634_INNER), 5, iv=unhex("1011121314151617"))
    check(sealed == RFC7634_ESP, "RFC 7634 A: sealed %s, want %s" % (sealed.hex(), RFC7634_ESP.hex()))
    bad = bytearray(RFC7634_ESP)
    bad[-1] ^= 1
    try:
        c.open(bytes(bad))
        raise Failure("RFC 7634 A: a flipped ICV byte opened")
    except Failure as e:
        check("ICV mismatch" in str(e), "RFC 7634 A flipped: %s" % e)
    print("ok  RFC 7634 Appendix A: open, seal (bit for bit), flipped ICV refused")
    n += 1

    # 2. draft-mcgrew-gcm-test-01: ESP with the ESN AAD.
    for name, key, salt, spi, seq, iv, plain, ctag in GCM_DRAFT:
        c = Codec("aes-gcm-128", unhex(key) + unhex(salt), spi, True, "192.0.2.1", "192.0.2.2")
        esp = struct.pack("!LL", spi, seq & 0xFFFFFFFF) + unhex(iv) + unhex(ctag)
        inner = c.open(esp, seq >> 32)
        want = unhex(plain)
        pad = want[-2]
        check(raw(inner) == want[:-2 - pad], "gcm %s: inner %s, want %s" % (name, raw(inner).hex(), want[:-2 - pad].hex()))
        try:
            c.open(esp, (seq >> 32) ^ 1)
            raise Failure("gcm %s: opened with the wrong ESN high half" % name)
        except Failure as e:
            check("ICV mismatch" in str(e), "gcm %s wrong ESN: %s" % (name, e))
        print("ok  draft-mcgrew-gcm-test-01 %s (seq %#x)" % (name, seq))
        n += 1
        # The same with the ICV truncated (RFC 4106 section 8).
        for suite, icv in TRUNC_GCM.items():
            tc = Codec(suite, unhex(key) + unhex(salt), spi, True, "192.0.2.1", "192.0.2.2")
            short = esp[:len(esp) - 16 + icv]
            check(raw(tc.open(short, seq >> 32)) == want[:-2 - pad], "gcm %s %s: inner" % (name, suite))
            try:
                tc.open(flip(short, -1), seq >> 32)
                raise Failure("gcm %s %s: a flipped ICV opened" % (name, suite))
            except Failure as e:
                check("ICV mismatch" in str(e), "gcm %s %s flipped: %s" % (name, suite, e))
        print("ok  draft-mcgrew-gcm-test-01 %s with %s-byte ICVs" % (name, "/".join(str(v) for v in TRUNC_GCM.values())))
        n += 1

    # 3. Every suite against itself, ESN off and on, across 2^32.
    for suite in SUITES:
        crypt, auth, cl, al = SUITES[suite]
        key = os.urandom(cl + al)
        for esn in (False, True):
            tx = Codec(suite, key, 0x2001, esn, "192.0.2.2", "192.0.2.1")
            rx = Codec(suite, key, 0x2001, esn, "192.0.2.2", "192.0.2.1")
            seqs = [1, 2, 0xFFFFFFFF] + ([1 << 32, (1 << 32) + 1, 5 << 32 | 7] if esn else [])
            for i, seq in enumerate(seqs):
                inner = echo_request("203.0.113.1", "198.51.100.1", 0x4242, i, i * 37)
                esp = tx.seal(inner, seq)
                check(struct.unpack("!LL", esp[:8]) == (0x2001, seq & 0xFFFFFFFF), "%s: header of seq %#x" % (suite, seq))
                check(len(esp) % 4 == 0, "%s: ESP length %d not a multiple of 4" % (suite, len(esp)))
                got = rx.open(esp, seq >> 32)
                check(raw(got) == raw(inner), "%s esn=%s seq %#x: round trip changed the packet" % (suite, esn, seq))
                for what, bad, seqh in (("flipped ICV", flip(esp, -1), seq >> 32),
                                        ("flipped payload", flip(esp, 20), seq >> 32),
                                        ("wrong ESN high", esp, (seq >> 32) ^ 1)):
                    if what == "wrong ESN high" and not esn:
                        continue
                    try:
                        rx.open(bad, seqh)
                        raise Failure("%s esn=%s seq %#x: %s opened" % (suite, esn, seq, what))
                    except Failure as e:
                        check("ICV mismatch" in str(e), "%s esn=%s %s: %s" % (suite, esn, what, e))
            # Inner IPv6 and an IPv6 outer header.
            tx6 = Codec(suite, key, 0x2001, esn, "2001:db8:ff::2", "2001:db8:ff::1")
            inner6 = IPv6(src="2001:db8:b::1", dst="2001:db8:a::1") / ICMPv6EchoRequest(id=7, seq=1, data=b"x" * 33)
            got = rx.open(tx6.seal(inner6, 9), 0)
            check(raw(got) == raw(inner6), "%s esn=%s: inner IPv6 round trip" % (suite, esn))
            if auth and not esn:
                # Our ESN-less HMAC must equal scapy's where scapy is right.
                own = Codec(suite, key, 0x2001, True, "192.0.2.2", "192.0.2.1")
                inner = echo_request("203.0.113.1", "198.51.100.1", 1, 1, 8)
                iv = os.urandom(own.sa.crypt_algo.iv_size)
                a, b = tx.seal(inner, 77, iv=iv), own.seal(inner, 77, iv=iv)
                check(a[:-ICV_HMAC] == b[:-ICV_HMAC], "%s: bodies differ" % suite)
                want = hmac.new(key[cl:], a[:-ICV_HMAC], hashlib.sha256).digest()[:ICV_HMAC]
                check(a[-ICV_HMAC:] == want, "%s: scapy's HMAC-SHA-256-128 is not hmac(sha256) truncated" % suite)
            print("ok  %-20s esn=%-5s seal/open %s, tampering refused" % (suite, esn, ", ".join("%#x" % s for s in seqs)))
            n += 1
    print("PASS selftest: %d checks" % n)


def flip(b, i):
    b = bytearray(b)
    b[i] ^= 0x01
    return bytes(b)


def echo_request(src, dst, ident, seq, size):
    payload = bytes((ident + seq + j) & 0xFF for j in range(size))
    if ":" in src:
        return IPv6(src=src, dst=dst, hlim=64) / ICMPv6EchoRequest(id=ident, seq=seq, data=payload)
    return IP(src=src, dst=dst, ttl=64, id=(ident + seq) & 0xFFFF) / ICMP(type=8, id=ident, seq=seq) / Raw(payload)


def is_echo_reply(inner, req):
    """Whether inner is the echo reply to req: addresses swapped, same id,
    sequence number and data."""
    if req.version == 4:
        if inner.version != 4 or not inner.haslayer(ICMP):
            return False
        ic, rq = inner[ICMP], req[ICMP]
        return (inner.src == req.dst and inner.dst == req.src and ic.type == 0 and
                ic.id == rq.id and ic.seq == rq.seq and bytes(ic.payload) == bytes(rq.payload))
    if inner.version != 6 or not inner.haslayer(ICMPv6EchoReply):
        return False
    ic, rq = inner[ICMPv6EchoReply], req[ICMPv6EchoRequest]
    return inner.src == req.dst and inner.dst == req.src and ic.id == rq.id and ic.seq == rq.seq and ic.data == rq.data


def describe(inner):
    return inner.summary() if inner is not None else "?"


# ---------------------------------------------------------------- peer


class UDPTransport:
    """ESP in UDP (RFC 3948) through an ordinary socket: the kernel checks
    the UDP checksum of what arrives, so what the test sees passed it."""

    def __init__(self, local, remote, port):
        fam = socket.AF_INET6 if ":" in local else socket.AF_INET
        self.s = socket.socket(fam, socket.SOCK_DGRAM)
        self.s.bind((local, port))
        self.remote = (remote, port)

    def send(self, esp):
        self.s.sendto(esp, self.remote)

    def recv(self, timeout):
        """An ESP packet from the remote, or None on timeout."""
        r, _, _ = select.select([self.s], [], [], max(timeout, 0))
        if not r:
            return None
        b, addr = self.s.recvfrom(65535)
        if addr[0] != self.remote[0] or addr[1] != self.remote[1]:
            raise Failure("datagram from %s:%d, want %s:%d" % (addr[0], addr[1], self.remote[0], self.remote[1]))
        if b == b"\xff":
            return b""  # NAT keepalive
        return b


class RawTransport:
    """Raw ESP, IP protocol 50."""

    def __init__(self, local, remote, _port):
        self.v6 = ":" in local
        fam = socket.AF_INET6 if self.v6 else socket.AF_INET
        self.s = socket.socket(fam, socket.SOCK_RAW, 50)
        self.s.bind((local, 0))
        self.remote = remote

    def send(self, esp):
        self.s.sendto(esp, (self.remote, 0))

    def recv(self, timeout):
        deadline = time.monotonic() + timeout
        while True:
            r, _, _ = select.select([self.s], [], [], max(deadline - time.monotonic(), 0))
            if not r:
                return None
            b, addr = self.s.recvfrom(65535)
            if addr[0] != self.remote:
                continue
            if not self.v6:  # IPv4 raw sockets deliver the IP header
                b = b[(b[0] & 0x0F) * 4:]
            return b


def peer(a):
    tx = Codec(a.suite, unhex(a.key_in), a.spi_in, a.esn, a.local, a.remote)
    rx = Codec(a.suite, unhex(a.key_out), a.spi_out, a.esn, a.remote, a.local)
    tr = (RawTransport if a.raw else UDPTransport)(a.local, a.remote, a.port)
    deadline = time.monotonic() + a.timeout
    seqs = [int(s, 0) for s in a.seqs.split(",")]
    res = {"sent": 0, "replies": 0, "esp_received": 0, "other": 0, "keepalives": 0,
           "first_seq_in": None, "last_seq_in": None, "last_seq_sent": None}
    last_seq_in = 0

    def receive(until):
        """Open what A sends until until (monotonic) or the first packet;
        returns the inner packet, or None on timeout."""
        nonlocal last_seq_in
        b = tr.recv(min(until, deadline) - time.monotonic())
        if b is None:
            return None
        if b == b"":
            res["keepalives"] += 1
            return receive(until)
        res["esp_received"] += 1
        seql = struct.unpack("!L", b[4:8])[0] if len(b) >= 8 else 0
        # A's outbound SA starts at 1 and cannot have passed 2^32 in a
        # test: its high half is 0.
        inner = rx.open(b, 0)
        check(seql > last_seq_in, "ESP from A: seq %#x after %#x, want increasing" % (seql, last_seq_in))
        last_seq_in = seql
        if res["first_seq_in"] is None:
            res["first_seq_in"] = seql
        res["last_seq_in"] = seql
        return inner

    targets = [(a.inner_local, a.inner_remote)]
    if a.inner6_local:
        targets.append((a.inner6_local, a.inner6_remote))
    for i, seq in enumerate(seqs):
        src, dst = targets[i % len(targets)]
        req = echo_request(src, dst, a.ident, i + 1, 24 + 8 * i)
        tr.send(tx.seal(req, seq))
        res["sent"] += 1
        res["last_seq_sent"] = seq
        until = time.monotonic() + a.reply_timeout
        while True:
            if time.monotonic() > deadline:
                raise Failure("overall timeout of %.0f s" % a.timeout)
            inner = receive(until)
            if inner is None:
                raise Failure("no echo reply to request %d (%s -> %s, ESP seq %#x) within %.1f s" %
                              (i + 1, src, dst, seq, a.reply_timeout))
            if is_echo_reply(inner, req):
                res["replies"] += 1
                print("ok  seq %#011x %s -> %s: echo reply %d, ESP seq from A %#x" %
                      (seq, src, dst, i + 1, res["last_seq_in"]), flush=True)
                break
            # Something else the kernel sent into the tunnel (IPv6 ND or
            # MLD, say): it opened, which is all that is asked of it.
            res["other"] += 1
            print("    other packet from A: %s" % describe(inner), flush=True)
    print("RESULT " + json.dumps(res), flush=True)
    print("PASS peer %s: %d echo requests sealed by scapy, %d replies opened" % (a.suite, res["sent"], res["replies"]))


def send(a):
    tx = Codec(a.suite, unhex(a.key_in), a.spi_in, a.esn, a.local, a.remote)
    tr = (RawTransport if a.raw else UDPTransport)(a.local, a.remote, a.port)
    n = 0
    for item in a.packets.split(","):
        seq, src, dst = item.split("/")
        seq = int(seq, 0)
        tr.send(tx.seal(echo_request(src, dst, a.ident, seq & 0xFFFF, 32), seq))
        n += 1
        print("ok  seq %#x %s -> %s sent%s" % (seq, src, dst, " (raw ESP)" if a.raw else ""), flush=True)
    print("PASS send: %d packets sealed by scapy and sent" % n)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("selftest")
    p = sub.add_parser("peer")
    p.add_argument("--suite", required=True, choices=sorted(SUITES))
    p.add_argument("--key-in", required=True, help="hex key of ipsecd's inbound SA: scapy seals with it")
    p.add_argument("--key-out", required=True, help="hex key of ipsecd's outbound SA: scapy opens with it")
    p.add_argument("--spi-in", type=lambda s: int(s, 0), required=True, help="SPI of ipsecd's inbound SA")
    p.add_argument("--spi-out", type=lambda s: int(s, 0), required=True, help="SPI of ipsecd's outbound SA")
    p.add_argument("--esn", action="store_true")
    p.add_argument("--raw", action="store_true", help="raw ESP (IP protocol 50) instead of ESP in UDP")
    p.add_argument("--local", required=True, help="this peer's outer address")
    p.add_argument("--remote", required=True, help="ipsecd's outer address")
    p.add_argument("--port", type=int, default=4500)
    p.add_argument("--inner-local", required=True)
    p.add_argument("--inner-remote", required=True)
    p.add_argument("--inner6-local", help="also alternate IPv6 echo requests from here")
    p.add_argument("--inner6-remote")
    p.add_argument("--seqs", required=True, help="comma-separated 64-bit sequence numbers, one echo request each")
    p.add_argument("--ident", type=lambda s: int(s, 0), default=0x5ca9)
    p.add_argument("--reply-timeout", type=float, default=5)
    p.add_argument("--timeout", type=float, default=40)
    p = sub.add_parser("send")
    p.add_argument("--suite", required=True, choices=sorted(SUITES))
    p.add_argument("--key-in", required=True, help="hex key of ipsecd's inbound SA: scapy seals with it")
    p.add_argument("--spi-in", type=lambda s: int(s, 0), required=True, help="SPI of ipsecd's inbound SA")
    p.add_argument("--esn", action="store_true")
    p.add_argument("--raw", action="store_true", help="raw ESP (IP protocol 50) instead of ESP in UDP")
    p.add_argument("--local", required=True, help="this peer's outer address")
    p.add_argument("--remote", required=True, help="ipsecd's outer address")
    p.add_argument("--port", type=int, default=4500)
    p.add_argument("--packets", required=True,
                   help="comma-separated SEQ/INNER-SRC/INNER-DST, one echo request each")
    p.add_argument("--ident", type=lambda s: int(s, 0), default=0x5ca9)
    a = ap.parse_args()
    try:
        if a.cmd == "selftest":
            selftest()
        elif a.cmd == "send":
            send(a)
        else:
            peer(a)
    except Failure as e:
        print("FAIL: %s" % e, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
