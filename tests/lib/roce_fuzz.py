#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""A RoCEv2 peer that fuzzes the responder's memory logic of live RC QPs.

    roce_fuzz.py TARGET DEVICE GID_INDEX NETNS PEER_IP DEVICE_IP SECONDS [SEED]

Starts TARGET (tests/progs/fuzz_target.c) on DEVICE, which owns memory
regions between unregistered guard pages and makes RC QPs on request whose
remote is PEER_IP. From network namespace NETNS, where PEER_IP lives, it
then sends requests through a raw socket (headers written here, a valid
ICRC, the PSN the responder expects) and reads the answers on UDP port
4791, for SECONDS: RDMA WRITEs (one packet or several), READs, atomics,
ATOMIC WRITEs and SENDs at keys and addresses around the regions' edges,
a third of them mutated (bit flips, opcodes, lengths, PSNs, pad counts,
truncation). Every answer moves its model of the responder's expected PSN;
a packet unanswered for 0.15 s is followed by a probe (a duplicate that the
responder acknowledges with its expected PSN). A NAK that ends the QP
makes the target build a new one.

It models the bytes of the writable region from what the responder
acknowledged, and fails if:
  - a READ response carries a byte that differs from the model, has the
    wrong length or number of packets, or answers a READ its key and range
    do not grant;
  - a WRITE, atomic or ATOMIC WRITE that its key, range or alignment does
    not grant is acknowledged;
  - an atomic returns an original value that differs from the model;
  - the target finds a guard page, the bytes around the writable region in
    its own pages, the read-only, local-only or other PD's region, or the
    bytes around a receive buffer changed, or a QP neither in RTS nor ERR.
Prints the counts at the end.
"""
import collections
import ctypes
import os
import random
import select
import socket
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from roce_hostile import packet as ip_packet  # noqa: E402

FUZZ_QPN = 0x05A5A5
# How long a request may go unanswered before the probe asks where the
# responder is (answers take 10 to 30 ms in a TCG guest; a late one is
# still read, by the probe).
ANSWER_WAIT = 0.15
# How many forged answers hit one live QP.
FORGED_ANSWERS = 2100
CLONE_NEWNET = 0x40000000
PAGE = 4096
# fuzz_target.c's layout and fill.
RW_PAGE, RW_HEAD = 1, 48
RO_PAGE = 5

RETH, IMM, IETH, ATOM = 1, 2, 4, 8
# The RC request opcodes: (operation, position, extension headers).
OPS = {
    0x00: ("send", "first", 0), 0x01: ("send", "middle", 0), 0x02: ("send", "last", 0),
    0x03: ("send", "last", IMM), 0x04: ("send", "only", 0), 0x05: ("send", "only", IMM),
    0x06: ("write", "first", RETH), 0x07: ("write", "middle", 0), 0x08: ("write", "last", 0),
    0x09: ("write", "last", IMM), 0x0A: ("write", "only", RETH), 0x0B: ("write", "only", RETH | IMM),
    0x0C: ("read", "only", RETH), 0x13: ("cmpswap", "only", ATOM), 0x14: ("fetchadd", "only", ATOM),
    0x16: ("send", "last", IETH), 0x17: ("send", "only", IETH), 0x1D: ("awrite", "only", RETH),
}
EXT_LEN = {RETH: 16, IMM: 4, IETH: 4, ATOM: 28}


class Failure(Exception):
    pass


def fill_of(page, at):
    """fuzz_target.c's fill_of()."""
    return ((at * 131 + page * 29 + (at >> 8)) ^ 0x3C) & 0xFF


def enter_netns(name):
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(f"/run/netns/{name}", os.O_RDONLY)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        raise OSError(ctypes.get_errno(), f"setns {name}")
    os.close(fd)


def bth(opcode, qpn, psn, pad=0, ack=True):
    return struct.pack("!BBHII", opcode, (pad & 3) << 4, 0xFFFF, qpn & 0xFFFFFF,
                       (0x80000000 if ack else 0) | (psn & 0xFFFFFF))


def parse(transport):
    """A request as the specification reads it, or None."""
    if len(transport) < 12:
        return None
    opcode, flags, _pkey, _qpn, word = struct.unpack("!BBHII", transport[:12])
    if opcode not in OPS:
        return None
    operation, position, ext = OPS[opcode]
    at = 12
    p = {"opcode": opcode, "op": operation, "pos": position, "psn": word & 0xFFFFFF,
         "ack": bool(word >> 31), "pad": (flags >> 4) & 3}
    for bit in (RETH, ATOM, IMM, IETH):
        if ext & bit:
            if len(transport) < at + EXT_LEN[bit]:
                return None
            raw = transport[at:at + EXT_LEN[bit]]
            if bit == RETH:
                p["va"], p["rkey"], p["dma_len"] = struct.unpack("!QII", raw)
            elif bit == ATOM:
                p["va"], p["rkey"], p["swap_add"], p["compare"] = struct.unpack("!QIQQ", raw)
            at += EXT_LEN[bit]
    payload = transport[at:]
    if p["pad"] > len(payload):
        return None
    p["payload"] = payload[:len(payload) - p["pad"]]
    return p


class Fuzzer:
    def __init__(self, argv):
        (self.target_prog, self.dev, self.gid, self.netns, self.me, self.dut,
         seconds) = argv[1:8]
        self.seconds = float(seconds)
        self.seed = int(argv[8]) if len(argv) > 8 else random.randrange(1 << 32)
        self.rng = random.Random(self.seed)
        self.counts = dict.fromkeys(
            ["sent", "mutated", "acked", "naks_sequence", "naks_rnr", "naks_ending",
             "no_answer", "probes", "read_responses", "read_bytes_checked",
             "atomic_acks_checked", "qps", "refused_as_modelled", "refused_unexpectedly",
             "executed_unparsed"], 0)
        self.time_in_qps = 0.0
        self.trace = bool(os.environ.get("SRNIC_CASE_FUZZ_TRACE"))
        self.history = collections.deque(maxlen=40)
        self.started = time.monotonic()
        self.target = subprocess.Popen(
            [self.target_prog, self.dev, self.gid, self.me],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        self.regions = {}
        while True:
            line = self.target_line()
            if line.startswith("region "):
                _, name, va, length, key = line.split()
                self.regions[name] = (int(va), int(length), int(key))
            elif line.startswith("mtu "):
                self.mtu = int(line.split()[1])
            elif line == "ready":
                break
        rw_len = self.regions["rw"][1]
        base = RW_PAGE * PAGE + RW_HEAD
        self.shadow = bytearray(fill_of((base + i) // PAGE, (base + i) % PAGE) for i in range(rw_len))
        self.known = bytearray(b"\1" * rw_len)
        ro_len = self.regions["ro"][1]
        self.ro = bytes(fill_of(RO_PAGE, i) for i in range(ro_len))
        enter_netns(self.netns)
        self.tx = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
        self.rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.rx.bind((self.me, 4791))
        self.ident = 0
        self.alive = False
        self.queue = []

    def target_line(self):
        line = self.target.stdout.readline()
        if not line:
            raise Failure(f"fuzz_target exited ({self.target.wait()})")
        line = line.rstrip("\n")
        if line.startswith("FAIL"):
            raise Failure(f"fuzz_target: {line}")
        return line

    def ask(self, command):
        self.target.stdin.write(command + "\n")
        self.target.stdin.flush()
        return self.target_line()

    # --- the wire

    def send(self, transport):
        self.ident = (self.ident + 1) & 0xFFFF
        self.tx.sendto(ip_packet(self.me, self.dut, transport, ident=self.ident), (self.dut, 0))
        self.counts["sent"] += 1

    def answers(self, wait, done):
        """Answers (parsed) until done(list) or `wait` seconds without one."""
        got = []
        while not done(got):
            ready, _, _ = select.select([self.rx], [], [], wait)
            if not ready:
                break
            data, (src, _) = self.rx.recvfrom(65536)
            if src != self.dut or len(data) < 16:
                continue
            got.append(self.answer(data[:-4]))
        return got

    @staticmethod
    def answer(data):
        opcode, flags, _, qpn, word = struct.unpack("!BBHII", data[:12])
        if qpn & 0xFFFFFF != FUZZ_QPN:
            raise Failure(f"an answer (opcode {opcode:#x}) went to QP {qpn & 0xFFFFFF:#x}, "
                          f"not to the connection's remote QP {FUZZ_QPN:#x}")
        a = {"opcode": opcode, "psn": word & 0xFFFFFF}
        at = 12
        if opcode in (0x0D, 0x0F, 0x10, 0x11, 0x12):
            a["syndrome"] = data[12]
            at = 16
        if opcode == 0x12:
            a["original"] = int.from_bytes(data[16:24], "big")
            at = 24
        pad = (flags >> 4) & 3
        a["data"] = data[at:len(data) - pad]
        return a

    def drain(self):
        self.rx.setblocking(False)
        try:
            while True:
                self.rx.recv(65536)
        except BlockingIOError:
            pass
        self.rx.setblocking(True)

    # --- the target's QPs

    def new_qp(self):
        start = time.monotonic()
        self.queue = []
        expect = self.ask("check")
        if not expect.startswith("ok"):
            raise Failure(f"fuzz_target check: {expect}")
        self.epsn = self.rng.randrange(1 << 24)
        line = self.ask(f"qp {FUZZ_QPN} {self.epsn}")
        self.qpn = int(line.split()[1])
        self.alive = True
        self.write_target = None  # (va, dma_len, placed) of the WRITE in progress
        self.in_message = None
        self.counts["qps"] += 1
        self.drain()
        self.time_in_qps += time.monotonic() - start

    # --- requests

    def region_key(self):
        r = self.rng.random()
        if r < 0.70:
            name = "rw"
        elif r < 0.80:
            name = "ro"
        elif r < 0.87:
            name = "local"
        elif r < 0.94:
            name = "other"
        else:
            return self.rng.randrange(1 << 32), 0x10000, 4096
        va, length, key = self.regions[name]
        return key, va, length

    def address(self, va, length, size):
        r = self.rng.random()
        if r < 0.25:
            return va + self.rng.randint(-16, 16)
        if r < 0.5:
            return va + length - size + self.rng.randint(-16, 16)
        if r < 0.95:
            return va + self.rng.randint(0, max(0, length - size))
        return self.rng.choice([0, (1 << 64) - 8, va + (1 << 32), va - PAGE])

    def size(self):
        r = self.rng.random()
        if r < 0.1:
            return 0
        if r < 0.6:
            return self.rng.randint(1, 64)
        if r < 0.9:
            return self.rng.randint(1, self.mtu)
        return self.rng.randint(self.mtu, 4 * self.mtu)

    def payload(self, n):
        return self.rng.randbytes(n)

    def generate(self):
        """The transport packets (without PSN yet) of one request."""
        kind = self.rng.choices(
            ["write", "read", "cmpswap", "fetchadd", "awrite", "send", "write_imm", "send_inv"],
            [30, 22, 8, 8, 5, 14, 6, 3])[0]
        key, va, length = self.region_key()
        if kind in ("write", "write_imm"):
            n = self.size()
            at = self.address(va, length, n) & ((1 << 64) - 1)
            reth = struct.pack("!QII", at, key, n)
            data = self.payload(n)
            chunks = [data[i:i + self.mtu] for i in range(0, n, self.mtu)] or [b""]
            if len(chunks) == 1:
                if kind == "write_imm":
                    return [(0x0B, reth + b"\0\0\0\7" + chunks[0])]
                return [(0x0A, reth + chunks[0])]
            out = [(0x06, reth + chunks[0])]
            out += [(0x07, c) for c in chunks[1:-1]]
            out.append((0x09 if kind == "write_imm" else 0x08,
                        (b"\0\0\0\7" if kind == "write_imm" else b"") + chunks[-1]))
            return out
        if kind == "read":
            n = self.size()
            at = self.address(va, length, n) & ((1 << 64) - 1)
            return [(0x0C, struct.pack("!QII", at, key, n))]
        if kind in ("cmpswap", "fetchadd"):
            at = self.address(va, length, 8)
            if self.rng.random() < 0.8:
                at &= ~7
            at &= (1 << 64) - 1
            value = self.rng.choice([0, 1, self.rng.randrange(1 << 64)])
            compare = self.rng.randrange(1 << 64)
            if kind == "cmpswap" and self.rng.random() < 0.5:
                off = at - self.regions["rw"][0]
                if 0 <= off <= len(self.shadow) - 8:
                    compare = int.from_bytes(self.shadow[off:off + 8], "little")
            return [(0x13 if kind == "cmpswap" else 0x14,
                     struct.pack("!QIQQ", at, key, value, compare))]
        if kind == "awrite":
            at = self.address(va, length, 8)
            if self.rng.random() < 0.8:
                at &= ~7
            return [(0x1D, struct.pack("!QII", at & ((1 << 64) - 1), key, 8) + self.payload(8))]
        n = self.rng.choice([0, self.rng.randint(1, 192), self.rng.randint(1, 300),
                             self.rng.randint(1, 2 * self.mtu)])
        data = self.payload(n)
        chunks = [data[i:i + self.mtu] for i in range(0, n, self.mtu)] or [b""]
        if kind == "send_inv":
            return [(0x17, struct.pack("!I", key) + chunks[0][:192])]
        if len(chunks) == 1:
            return [(self.rng.choice([0x04, 0x05]),
                     (b"\0\0\0\5" if self.rng.random() < 0.5 else b"") + chunks[0])]
        return [(0x00, chunks[0])] + [(0x01, c) for c in chunks[1:-1]] + [(0x02, chunks[-1])]

    def mutate(self, pkt):
        pkt = bytearray(pkt)
        for _ in range(self.rng.randint(1, 3)):
            r = self.rng.random()
            if r < 0.25 and pkt:
                i = self.rng.randrange(min(len(pkt), 40))
                pkt[i] ^= 1 << self.rng.randrange(8)
            elif r < 0.35 and pkt:
                pkt[self.rng.randrange(len(pkt))] = self.rng.randrange(256)
            elif r < 0.45:
                del pkt[self.rng.randint(0, len(pkt)):]
            elif r < 0.52:
                pkt += self.rng.randbytes(self.rng.randint(1, 64))
            elif r < 0.65 and pkt:
                pkt[0] = self.rng.choice(list(OPS) + [self.rng.randrange(256)])
            elif r < 0.75 and len(pkt) >= 12:
                psn = (int.from_bytes(pkt[9:12], "big") + self.rng.choice([-2, -1, 1, 2, 3, 100])) & 0xFFFFFF
                pkt[9:12] = psn.to_bytes(3, "big")
            elif r < 0.82 and len(pkt) >= 2:
                pkt[1] = (pkt[1] & ~0x30) | (self.rng.randrange(4) << 4)
            elif len(pkt) >= 28:
                field = self.rng.choice([(12, 8), (20, 4), (24, 4)])
                off, width = field
                value = int.from_bytes(pkt[off:off + width], "big")
                value = self.rng.choice([value + self.rng.randint(-64, 64), value ^ (1 << self.rng.randrange(8 * width)),
                                         (1 << (8 * width)) - 1, 0])
                pkt[off:off + width] = (value % (1 << (8 * width))).to_bytes(width, "big")
        return bytes(pkt)

    # --- the model

    def rw_range(self, key, va, n):
        """The offset of [va, va + n) in rw if `key` grants it there."""
        rw_va, rw_len, rw_key = self.regions["rw"]
        if key != rw_key or va < rw_va or va + n > rw_va + rw_len:
            return None
        return va - rw_va

    def read_range(self, key, va, n):
        for name in ("rw", "ro"):
            r_va, r_len, r_key = self.regions[name]
            if key == r_key and r_va <= va and va + n <= r_va + r_len:
                return name, va - r_va
        return None

    def forget(self, p):
        """What packet p may have written is unknown from now on."""
        if p is None:
            self.known[:] = bytes(len(self.known))
            return
        if p["op"] in ("write", "awrite", "cmpswap", "fetchadd"):
            if "va" in p:
                # Nothing it names outside rw's grant may change in rw.
                n = len(p["payload"]) if p["op"] == "write" else 8
                off = self.rw_range(p.get("rkey"), p["va"], n)
                if off is not None:
                    end = off + n
                    self.known[off:end] = bytes(end - off)
                return
            if self.write_target is not None:
                va, _, placed = self.write_target
                n = len(p["payload"])
                off = self.rw_range(self.regions["rw"][2], va + placed, n)
                if off is None:
                    self.known[:] = bytes(len(self.known))
                else:
                    self.known[off:off + n] = bytes(n)

    def place(self, off, data):
        self.shadow[off:off + len(data)] = data
        self.known[off:off + len(data)] = b"\1" * len(data)

    def executed(self, p, answer):
        """p (at the expected PSN) was executed: check the rules and model it."""
        op, pos = p["op"], p["pos"]
        if op == "write":
            if pos in ("first", "only"):
                if p["dma_len"] and self.rw_range(p["rkey"], p["va"], p["dma_len"]) is None:
                    raise Failure(f"a WRITE of {p['dma_len']} bytes at {p['va']:#x} with key "
                                  f"{p['rkey']:#x} was acknowledged: its key does not grant that")
                self.write_target = [p["va"], p["dma_len"], 0]
            if self.write_target is None:
                raise Failure(f"a WRITE {pos} with no WRITE in progress was acknowledged")
            va, dma_len, placed = self.write_target
            n = len(p["payload"])
            if placed + n > dma_len:
                raise Failure(f"a WRITE placed {placed + n} bytes of a {dma_len}-byte RETH")
            if n:
                off = self.rw_range(self.regions["rw"][2], va + placed, n)
                if off is None:
                    raise Failure(f"a WRITE placed {n} bytes at {va + placed:#x}, outside rw")
                self.place(off, p["payload"])
            self.write_target[2] = placed + n
            if pos in ("last", "only"):
                self.write_target = None
        elif op in ("cmpswap", "fetchadd"):
            off = self.rw_range(p["rkey"], p["va"], 8)
            if off is None or p["va"] % 8:
                raise Failure(f"an atomic at {p['va']:#x} with key {p['rkey']:#x} was "
                              f"acknowledged: its key, range or alignment does not grant it")
            if answer is None or "original" not in answer:
                self.known[off:off + 8] = bytes(8)
                return
            original = answer["original"]
            if self.known[off:off + 8] == b"\1" * 8:
                model = int.from_bytes(self.shadow[off:off + 8], "little")
                if model != original:
                    raise Failure(f"an atomic at rw+{off} returned {original:#x}, the model "
                                  f"holds {model:#x}")
                self.counts["atomic_acks_checked"] += 1
            if op == "cmpswap":
                new = p["swap_add"] if original == p["compare"] else original
            else:
                new = (original + p["swap_add"]) & ((1 << 64) - 1)
            self.place(off, new.to_bytes(8, "little"))
        elif op == "awrite":
            off = self.rw_range(p["rkey"], p["va"], 8)
            if off is None or p["va"] % 8 or len(p["payload"]) != 8:
                raise Failure(f"an ATOMIC WRITE at {p['va']:#x} with key {p['rkey']:#x} "
                              f"was acknowledged: it is not granted")
            self.place(off, p["payload"])
        if op in ("send", "write"):
            self.in_message = None if pos in ("last", "only") else op

    def check_read(self, p, responses):
        """The responses to READ p (its PSN was the expected one)."""
        n = p["dma_len"]
        count = max(1, -(-n // self.mtu))
        if n == 0:
            return count
        where = self.read_range(p["rkey"], p["va"], n)
        if where is None:
            raise Failure(f"a READ of {n} bytes at {p['va']:#x} with key {p['rkey']:#x} was "
                          f"answered: its key does not grant that range")
        name, off = where
        data = b""
        for i, r in enumerate(sorted(responses, key=lambda r: (r["psn"] - p["psn"]) & 0xFFFFFF)):
            want = min(self.mtu, n - i * self.mtu)
            if len(r["data"]) != want:
                raise Failure(f"READ response {i} of {count} carries {len(r['data'])} bytes, "
                              f"expected {want}")
            data += r["data"]
        if len(responses) != count:
            raise Failure(f"a READ of {n} bytes got {len(responses)} responses, expected {count}")
        for i, byte in enumerate(data):
            if name == "ro":
                want, known = self.ro[off + i], True
            else:
                want, known = self.shadow[off + i], self.known[off + i]
            if known and byte != want:
                raise Failure(f"READ response byte {i} ({name}+{off + i}) is {byte:#x}, the "
                              f"model holds {want:#x}: a byte from outside the region, or a "
                              f"write misplaced or placed by a request the responder refused "
                              f"or that its key did not grant")
        self.counts["read_responses"] += len(responses)
        self.counts["read_bytes_checked"] += len(data)
        return count

    # --- one step

    def probe(self):
        """A duplicate zero-length WRITE: the responder acknowledges it with
        the PSN before the one it expects. True when the answer came."""
        self.counts["probes"] += 1
        self.send(bth(0x0A, self.qpn, self.epsn - 1) + struct.pack("!QII", 0, 0, 0))
        got = self.answers(1.0, lambda g: any(a["opcode"] == 0x11 for a in g))
        for a in got:
            if a["opcode"] == 0x11 and a["syndrome"] >> 5 == 0:
                return (a["psn"] + 1) & 0xFFFFFF
            if a["opcode"] == 0x11 and a["syndrome"] >> 5 == 3 and a["syndrome"] & 0x1F:
                return None
        return None

    def step(self):
        if not self.alive:
            self.new_qp()
        self.drain()
        if not self.queue:
            self.queue = self.generate()
        opcode, rest = self.queue.pop(0)
        raw = bth(opcode, self.qpn, self.epsn) + rest
        mutated = self.rng.random() < 0.33
        if mutated:
            raw = self.mutate(raw)
            self.counts["mutated"] += 1
            self.queue = []
        p = parse(raw)
        if self.trace:
            print(f"{time.monotonic() - self.started:8.3f} psn {self.epsn:#x} "
                  f"{'mutated ' if mutated else ''}{raw[:40].hex()}", flush=True)
        self.send(raw)
        psn = p["psn"] if p else self.epsn
        at_expected = p is not None and psn == self.epsn
        count = 1
        if p and p["op"] == "read":
            count = max(1, -(-p["dma_len"] // self.mtu))

        def decisive(got):
            """An answer that says what became of the packet."""
            for a in got:
                if a["opcode"] == 0x11 and (a["syndrome"] >> 5 != 0 or a["psn"] == psn):
                    return True
                if a["opcode"] in (0x10, 0x12) and a["psn"] == psn:
                    return True
                if a["opcode"] == 0x0F and a["psn"] == (psn + count - 1) & 0xFFFFFF:
                    return True
            return False

        got = self.answers(ANSWER_WAIT, decisive)
        self.history.append(f"psn {self.epsn:#08x} {'mutated ' if mutated else ''}{raw[:44].hex()} -> "
                            + " ".join(f"{a['opcode']:#x}/{a['psn']:#x}/{a.get('syndrome', 0):#x}"
                                       for a in got))
        if self.trace:
            print(f"{time.monotonic() - self.started:8.3f} answers "
                  + " ".join(f"{a['opcode']:#x}/{a['psn']:#x}/{a.get('syndrome', 0):#x}" for a in got),
                  flush=True)
        for a in got:
            if "syndrome" not in a or a["syndrome"] >> 5 == 0:
                continue
            if a["syndrome"] >> 5 == 1:
                self.counts["naks_rnr"] += 1
                # The rest of the message would find no message open.
                self.queue = []
                return
            code = a["syndrome"] & 0x1F
            if code == 0:
                self.counts["naks_sequence"] += 1
                self.epsn = a["psn"]
                self.queue = []
                return
            self.counts["naks_ending"] += 1
            if at_expected and not mutated and self.model_grants(p):
                self.counts["refused_unexpectedly"] += 1
                print(f"note: NAK {code} for an unmutated request the model grants: "
                      f"{p['op']} {p['pos']} key {p.get('rkey', 0):#x} "
                      f"va {p.get('va', 0):#x} length {p.get('dma_len', len(p['payload']))}",
                      flush=True)
            else:
                self.counts["refused_as_modelled"] += 1
            self.alive = False
            # A refused packet may have placed part of its data.
            self.forget(p if at_expected else None)
            return
        if not decisive(got):
            # Dropped, executed without an acknowledgement, or answered
            # late: the probe says where the responder is.
            self.counts["no_answer"] += 1
            before = self.epsn
            after = self.probe()
            if after is None:
                self.alive = False
                self.forget(p if at_expected else None)
                return
            self.epsn = after
            if after == before:
                return
            if at_expected and after == (before + count) & 0xFFFFFF and \
                    p["op"] in ("write", "awrite", "send"):
                self.executed(p, None)
            elif at_expected:
                self.forget(p)
            else:
                self.counts["executed_unparsed"] += 1
                self.forget(None)
            return
        if not at_expected:
            # A duplicate, or a packet this parser refuses: ACK(PSN) says
            # it was executed, a duplicate is acknowledged one PSN back.
            for a in got:
                if a["opcode"] == 0x11 and a["psn"] == self.epsn:
                    self.counts["executed_unparsed"] += 1
                    self.forget(None)
                    self.epsn = (self.epsn + 1) & 0xFFFFFF
                    self.queue = []
            return
        self.counts["acked"] += 1
        if p["op"] == "read":
            mine = [a for a in got if a["opcode"] in (0x0D, 0x0E, 0x0F, 0x10)
                    and ((a["psn"] - psn) & 0xFFFFFF) < count]
            self.check_read(p, mine)
            self.epsn = (psn + count) & 0xFFFFFF
            return
        atomic = next((a for a in got if a["opcode"] == 0x12 and a["psn"] == psn), None)
        self.executed(p, atomic)
        self.epsn = (psn + 1) & 0xFFFFFF

    def model_grants(self, p):
        op, pos = p["op"], p["pos"]
        if op == "write" and pos in ("first", "only"):
            return self.in_message is None and (
                p["dma_len"] == 0 or self.rw_range(p["rkey"], p["va"], p["dma_len"]) is not None) \
                and len(p["payload"]) <= self.mtu and (pos == "first" or len(p["payload"]) == p["dma_len"])
        if op == "read":
            return self.in_message is None and (
                p["dma_len"] == 0 or self.read_range(p["rkey"], p["va"], p["dma_len"]) is not None)
        if op in ("cmpswap", "fetchadd"):
            return self.in_message is None and p["va"] % 8 == 0 and \
                self.rw_range(p["rkey"], p["va"], 8) is not None
        return False

    def counter(self, name):
        with open(f"/sys/class/infiniband/{self.dev}/ports/1/hw_counters/{name}") as f:
            return int(f.read())

    def forged_answers(self, flood=FORGED_ANSWERS):
        """Answers the target's QP never asked for: the completer must
        refuse and count each, and none may start the requester (the old
        code ran it for every one) or make the device send."""
        if not self.alive:
            self.new_qp()
        names = ("rejected_answers", "requester_runs", "sent_packets")
        before = {n: self.counter(n) for n in names}
        # The target's QP starts sending at PSN 0 and has sent nothing:
        # every PSN is either never sent or (just before 0) long done.
        far = 0x400000
        kinds = [
            lambda i: bth(0x11, self.qpn, far + i) + struct.pack("!I", i & 0xFFFFFF),
            lambda i: bth(0x11, self.qpn, 0xFFFFFF - (i & 0xFF)) + struct.pack("!I", 0),
            lambda i: bth(0x11, self.qpn, far + i) + struct.pack("!I", 0x60 << 24),
            lambda i: bth(0x11, self.qpn, far + i) + struct.pack("!I", (0x20 | 1) << 24),
            lambda i: bth(0x10, self.qpn, 0xFFFFF0) + struct.pack("!I", 0) + b"r" * 64,
            lambda i: bth(0x0D, self.qpn, far + i) + struct.pack("!I", 0) + b"f" * 256,
            lambda i: bth(0x12, self.qpn, far + i) + struct.pack("!IQ", 0, 0x5A5A5A5A),
        ]
        for i in range(flood):
            self.send(kinds[i % len(kinds)](i))
            if i % 64 == 63:
                # Let the softirq keep up rather than overflow the backlog.
                time.sleep(0.002)
        time.sleep(0.5)
        delta = {n: self.counter(n) - before[n] for n in names}
        print(f"forged answers: {flood} sent, counter deltas {delta}", flush=True)
        if delta["rejected_answers"] < flood * 9 // 10:
            raise Failure(f"{flood} forged answers moved rejected_answers by only "
                          f"{delta['rejected_answers']}: they were not refused as answers")
        if delta["requester_runs"] > flood // 10:
            raise Failure(f"{flood} forged answers started the requester "
                          f"{delta['requester_runs']} times: a refused answer must not")
        if delta["sent_packets"] > flood // 10:
            raise Failure(f"{flood} forged answers made the device send "
                          f"{delta['sent_packets']} packets")
        self.counts["forged_answers"] = flood

    def too_long_reth(self):
        """On a new QP, a READ of 2^31 + 1 bytes of rw, longer than a
        message may be: an invalid-request NAK, whatever its region grants
        (its response would outnumber the PSNs that tell new requests from
        old ones), where a check of the range alone would say remote
        access."""
        self.new_qp()
        rw_va, _, rw_key = self.regions["rw"]
        raw = bth(0x0C, self.qpn, self.epsn) + struct.pack("!QII", rw_va, rw_key, (1 << 31) + 1)
        self.send(raw)
        got = self.answers(5.0, lambda g: any(a["opcode"] == 0x11 for a in g))
        self.history.append(f"psn {self.epsn:#08x} {raw[:28].hex()} -> "
                            + " ".join(f"{a['opcode']:#x}/{a['psn']:#x}/{a.get('syndrome', 0):#x}"
                                       for a in got))
        naks = [a.get("syndrome", 0) for a in got if a["opcode"] == 0x11]
        if naks != [0x61]:
            raise Failure(f"a READ of 2^31 + 1 bytes was answered with AETH syndromes "
                          f"{[hex(n) for n in naks]}; expected one NAK invalid request (0x61)")
        self.alive = False
        print("a READ of 2^31 + 1 bytes: NAK invalid request", flush=True)

    def final_read(self, same_qp=False):
        """One READ of all of rw, on a new QP (or the live one): every byte
        the model knows must be there."""
        if not (same_qp and self.alive):
            self.new_qp()
        rw_va, rw_len, rw_key = self.regions["rw"]
        raw = bth(0x0C, self.qpn, self.epsn) + struct.pack("!QII", rw_va, rw_key, rw_len)
        self.send(raw)
        p = parse(raw)
        count = -(-rw_len // self.mtu)
        got = self.answers(5.0, lambda g: sum(a["opcode"] in (0x0D, 0x0E, 0x0F, 0x10) for a in g) >= count)
        reads = [a for a in got if a["opcode"] in (0x0D, 0x0E, 0x0F, 0x10)]
        self.check_read(p, reads)
        return sum(self.known)

    def run(self):
        deadline = time.monotonic() + self.seconds
        print(f"fuzzing {self.dut} from {self.me} for {self.seconds:.0f} s, seed {self.seed}, "
              f"MTU {self.mtu}, regions {self.regions}", flush=True)
        try:
            while time.monotonic() < deadline:
                self.step()
            self.forged_answers()
            # The QP the forged answers hit still serves its peer.
            known = self.final_read(same_qp=True)
            self.too_long_reth()
            line = self.ask("quit")
            bye = self.target_line()
            if not line.startswith("ok"):
                raise Failure(f"fuzz_target: {line}")
        except Failure as e:
            print("the last requests (BTH and extension headers in hex) -> answers "
                  "(opcode/PSN/AETH syndrome):")
            for line in self.history:
                print("  " + line)
            print(f"FAIL: {e} (seed {self.seed}; counts {self.counts})", flush=True)
            self.target.kill()
            return 1
        print(f"final READ of rw matched the model in all {known} bytes it knows")
        print(f"target: {line}; {bye}")
        print("counts: " + " ".join(f"{k}={v}" for k, v in self.counts.items()), flush=True)
        print(f"{self.time_in_qps:.1f} s of {self.seconds:.0f} went to checking memory and making QPs")
        self.target.wait()
        return 0


if __name__ == "__main__":
    sys.exit(Fuzzer(sys.argv).run())
