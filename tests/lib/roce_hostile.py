#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Send malformed RoCEv2 packets at a live QP.

    roce_hostile.py SOURCE_IP DEST_IP QPN ROUNDS

Each round sends, through a raw IPv4 socket (headers written here, so the
ICRC can be right where it should be): a packet with a bad ICRC, truncated
headers, an unknown opcode, a UD opcode at an RC QP, a PSN far outside the
window, an RDMA WRITE with a wrong rkey and with a length past any region,
an unaligned atomic, a pad count larger than the payload, a packet to a
QP that does not exist, and one from an address that is not the peer's. Prints how many packets went out.
"""
import socket
import struct
import sys
import zlib


def icrc(ip, udp, bth_rest):
    """RoCEv2 ICRC over the masked IPv4 and UDP headers and the transport
    packet (little-endian on the wire)."""
    ip = bytearray(ip)
    ip[1] = 0xFF  # type of service
    ip[8] = 0xFF  # TTL
    ip[10:12] = b"\xff\xff"  # header checksum
    udp = bytearray(udp)
    udp[6:8] = b"\xff\xff"  # UDP checksum
    bth = bytearray(bth_rest)
    if len(bth) > 4:
        bth[4] = 0xFF  # FECN, BECN, reserved
    return struct.pack("<I", zlib.crc32(b"\xff" * 8 + bytes(ip) + bytes(udp) + bytes(bth)))


def packet(src, dst, transport, good_icrc=True, ident=0x1234):
    udp_len = 8 + len(transport) + 4
    total = 20 + udp_len
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, total, ident, 0x4000, 64, 17, 0,
                     socket.inet_aton(src), socket.inet_aton(dst))
    udp = struct.pack("!HHHH", 0xC123, 4791, udp_len, 0)
    crc = icrc(ip, udp, transport)
    if not good_icrc:
        crc = bytes(b ^ 0x5A for b in crc)
    return ip + udp + transport + crc


# A source address that is not the connection's peer.
FOREIGN = "10.0.0.99"


def bth(opcode, qpn, psn, pad=0, ack=False, pkey=0xFFFF):
    flags = (pad & 3) << 4
    return struct.pack("!BBHII", opcode, flags, pkey, qpn & 0xFFFFFF,
                       (0x80000000 if ack else 0) | (psn & 0xFFFFFF))


def reth(va, rkey, length):
    return struct.pack("!QII", va, rkey, length)


def main(argv):
    src, dst, qpn, rounds = argv[1], argv[2], int(argv[3], 0), int(argv[4])
    sock = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    far = 0x400000  # half the PSN space away from anything live
    sent = 0
    for r in range(rounds):
        psn = (far + r * 64) & 0xFFFFFF
        cases = [
            packet(src, dst, bth(0x04, qpn, psn) + b"x" * 64, good_icrc=False),
            packet(src, dst, bth(0x04, qpn, psn)[:8]),
            packet(src, dst, bth(0x1F, qpn, psn) + b"y" * 16),
            packet(src, dst, bth(0x64, qpn, psn) + struct.pack("!II", 0x11111111, 7) + b"z" * 8),
            packet(src, dst, bth(0x04, qpn, psn + 1, ack=True) + b"w" * 32),
            packet(src, dst, bth(0x0A, qpn, psn + 2) + reth(0x1000, 0xDEAD00, 32) + b"v" * 32),
            packet(src, dst, bth(0x0A, qpn, psn + 3) + reth(0, 0x100, 0xFFFFFFFF) + b"u" * 32),
            packet(src, dst, bth(0x14, qpn, psn + 4) + struct.pack("!QIQQ", 0x1003, 0x100, 1, 0)),
            packet(src, dst, bth(0x04, qpn, psn + 5, pad=3) + b"t" * 2),
            packet(src, dst, bth(0x11, qpn, psn + 6) + struct.pack("!I", 0x1F000000)),
            packet(src, dst, bth(0x04, 0xFFFFF0, psn + 7) + b"s" * 16),
            packet(FOREIGN, dst, bth(0x04, qpn, psn + 8) + b"r" * 16),
            # A partition the port is not a member of.
            packet(src, dst, bth(0x04, qpn, psn + 9, pkey=0x8001) + b"q" * 16),
        ]
        for p in cases:
            sock.sendto(p, (dst, 0))
            sent += 1
    print(f"sent {sent} hostile packets to QP {qpn:#x} at {dst}")


if __name__ == "__main__":
    main(sys.argv)
