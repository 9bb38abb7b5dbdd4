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

A VM can ask the hub to lose its frames, as a congested wire would: a
frame of ethertype 0x88b6 (IEEE local experimental 2) whose payload is
"srnic-hub mute-multicast SECONDS" makes the hub drop every multicast
frame (broadcast excepted) that VM sends for SECONDS; the command itself
is not repeated. The hub's log records each command and what it dropped.
"""
import os
import select
import signal
import socket
import struct
import sys
import time

CONTROL_TYPE = b"\x88\xb6"
CONTROL_PREFIX = b"srnic-hub "
BROADCAST = b"\xff" * 6


def control(frame):
    """The command of a control frame to the hub, or None."""
    if frame[12:14] != CONTROL_TYPE or not frame[14:].startswith(CONTROL_PREFIX):
        return None
    return frame[14 + len(CONTROL_PREFIX):].rstrip(b"\0").decode(errors="replace").split()


def mute_seconds(command):
    """SECONDS of a "mute-multicast SECONDS" command, or None."""
    if len(command) != 2 or command[0] != "mute-multicast":
        return None
    try:
        return float(command[1])
    except ValueError:
        return None


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
    # VM -> (time its multicast is muted until, frames dropped meanwhile)
    muted = {}
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
                command = control(frame)
                if command is not None:
                    seconds = mute_seconds(command)
                    if seconds is None:
                        print(f"hub: {source}: unknown command {command}", flush=True)
                    else:
                        muted[source] = (time.monotonic() + seconds, 0)
                        print(f"hub: {source}: multicast muted for {seconds} s", flush=True)
                    continue
                if source in muted and frame[0] & 1 and frame[:6] != BROADCAST:
                    until, dropped = muted[source]
                    if time.monotonic() < until:
                        muted[source] = (until, dropped + 1)
                        continue
                    print(f"hub: {source}: {dropped} multicast frames dropped", flush=True)
                    del muted[source]
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
