#!/usr/bin/python3
"""Seal and open tunnel-mode ESP packets with scapy's SecurityAssociation
(scapy/layers/ipsec.py), an ESP implementation independent of ipsecd's,
for TestScapyIntegrity. Run it with /usr/bin/python3 (Debian
python3-scapy).

Reads one JSON object on stdin:
  crypt_algo, crypt_key   scapy's names ("AES-CBC"), key in hex
  auth_algo, auth_key     scapy's names ("HMAC-SHA1-96", "SHA2-512-256", ...)
  spi, src, dst           the SA and its tunnel's outer addresses
  open                    ESP packets (SPI to ICV, hex) that ipsecd sealed
  seal                    inner IP packets (hex) to seal, the n-th with
                          sequence number seq+n and IV iv (hex)
Writes one JSON object: opened (the inner packets, hex), sealed (ESP
packets, SPI to ICV, hex) and icv_size (scapy's ICV length in bytes).
A packet whose ICV does not verify makes it exit with status 1.
"""

import json
import sys

from scapy.layers.inet import IP
from scapy.layers.ipsec import ESP, SecurityAssociation


def main():
    req = json.load(sys.stdin)
    sa = SecurityAssociation(
        ESP, spi=req["spi"],
        crypt_algo=req["crypt_algo"], crypt_key=bytes.fromhex(req["crypt_key"]),
        auth_algo=req["auth_algo"], auth_key=bytes.fromhex(req["auth_key"]),
        tunnel_header=IP(src=req["src"], dst=req["dst"]))
    opened = []
    for h in req["open"]:
        pkt = IP(src=req["src"], dst=req["dst"], proto=50) / ESP(bytes.fromhex(h))
        pkt = IP(bytes(pkt))
        opened.append(bytes(sa.decrypt(pkt)).hex())  # raises on a bad ICV
    sealed = []
    for n, h in enumerate(req["seal"]):
        pkt = sa.encrypt(IP(bytes.fromhex(h)), seq_num=req["seq"] + n, iv=bytes.fromhex(req["iv"]))
        sealed.append(bytes(pkt[ESP]).hex())
    json.dump({"opened": opened, "sealed": sealed, "icv_size": sa.auth_algo.icv_size}, sys.stdout)


if __name__ == "__main__":
    main()
