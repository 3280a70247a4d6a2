#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""Floods a MetaRoCE UDP port with junk while objects are torn down.

    junkflood.py DEST_IP [--port 4793] [--qpns 1-256] [--seconds N]

Sends, in bursts, a mix of: random bytes of random length; packets with a
well-formed header of this or a later protocol version for QPNs in the
given range (so that the receive path looks those QPs up while tests
destroy them), at random PSNs, with small offsets and lengths. It avoids
what other findings of issue 13 are about (address wrap, READ requests,
forged ACKs): here the packets only have to reach QP and MR lookups, not
break a connection. Runs until killed or --seconds pass.
"""
import argparse
import random
import socket
import struct
import time

SEND, WRITE, READ_RESP, UD_SEND = 0x01, 0x02, 0x04, 0x05


def header(version, opcode, flags, dqpn, psn):
    return struct.pack(
        "!BBBBIIIHHI",
        version << 4, opcode, flags, 0,
        dqpn & 0xFFFFFF, random.getrandbits(24), psn & 0xFFFFFF,
        random.getrandbits(4), 0, random.getrandbits(32))


def data_packet(rng, qpns):
    opcode = rng.choice((SEND, WRITE, READ_RESP, UD_SEND))
    payload = bytes(rng.choice((0, 64, 256, 1024)))
    flags = rng.choice((0x01, 0x02, 0x03, 0x13))
    deth = struct.pack(
        "!QIIII",
        rng.randrange(0, 4096), rng.getrandbits(32), rng.getrandbits(8),
        len(payload) + rng.randrange(0, 4096), 0)
    if opcode == UD_SEND:
        deth = struct.pack("!QIIII", 0, rng.getrandbits(32), 0,
                           len(payload), 0)
    return header(1, opcode, flags, rng.choice(qpns),
                  rng.getrandbits(24)) + deth + payload


def packet(rng, qpns):
    kind = rng.randrange(4)
    if kind == 0:
        return rng.randbytes(rng.randrange(0, 1400))
    if kind == 1:
        # A later version: the receiver looks the QP up to NAK it.
        return header(2, SEND, 0x03, rng.choice(qpns), 0) + bytes(24)
    return data_packet(rng, qpns)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dest")
    ap.add_argument("--port", type=int, default=4793)
    ap.add_argument("--qpns", default="1-256")
    ap.add_argument("--seconds", type=float, default=3600)
    ap.add_argument("--seed", type=int, default=13)
    args = ap.parse_args()
    lo, hi = (int(x) for x in args.qpns.split("-"))
    qpns = list(range(lo, hi + 1))
    rng = random.Random(args.seed)
    family = socket.AF_INET6 if ":" in args.dest else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_DGRAM)
    end = time.monotonic() + args.seconds
    sent = 0
    while time.monotonic() < end:
        for _ in range(64):
            try:
                sock.sendto(packet(rng, qpns), (args.dest, args.port))
                sent += 1
            except OSError:
                # The route or the netdev is going away under us.
                time.sleep(0.05)
        time.sleep(0.002)
    print(f"junkflood: {sent} packets")


if __name__ == "__main__":
    main()
