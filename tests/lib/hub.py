#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""An Ethernet hub for the test VMs: one segment for three or more VMs.

    hub.py DIR VM... [--pcap FILE]

Each VM's eth0 is a QEMU `dgram` netdev between its own Unix datagram
socket DIR/VM and the hub's socket DIR/hub-VM. Every frame that arrives
from one VM is repeated to every other VM, as a hub (a repeater) does: the
tests of broadcast need exactly that, and unicast frames are filtered by
the receiving NICs. Frames to a VM that is not listening yet are dropped,
as on a real wire. With --pcap every frame is written once, as it passes.
Runs until SIGTERM.
"""
import os
import select
import signal
import socket
import struct
import sys
import time


def main():
    args = sys.argv[1:]
    pcap = None
    if "--pcap" in args:
        at = args.index("--pcap")
        pcap = open(args[at + 1], "wb")
        del args[at:at + 2]
        # Classic pcap header: microseconds, snaplen 65535, Ethernet.
        pcap.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
    directory, vms = args[0], args[1:]
    sockets = {}
    for vm in vms:
        path = os.path.join(directory, "hub-" + vm)
        if os.path.exists(path):
            os.unlink(path)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        s.bind(path)
        s.setblocking(False)
        sockets[s.fileno()] = (vm, s)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    poller = select.poll()
    for fd in sockets:
        poller.register(fd, select.POLLIN)
    while True:
        for fd, _ in poller.poll():
            source, s = sockets[fd]
            while True:
                try:
                    frame = s.recv(65536)
                except BlockingIOError:
                    break
                if pcap:
                    now = time.time()
                    pcap.write(struct.pack("<IIII", int(now), int(now % 1 * 1e6), len(frame), len(frame)))
                    pcap.write(frame)
                for vm, out in sockets.values():
                    if vm == source:
                        continue
                    try:
                        out.sendto(frame, os.path.join(directory, vm))
                    except OSError:
                        # Not listening yet, or its queue is full: lost,
                        # as frames on a wire are.
                        pass
            if pcap:
                pcap.flush()


if __name__ == "__main__":
    main()
