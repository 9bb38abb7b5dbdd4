#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Tally rdma-core's test suite (unittest -v output) and compare devices.

    pyverbs_tally.py parse OUTPUT > VERDICTS       one "test-id verdict" a line
    pyverbs_tally.py compare SRNIC RXE EXCLUDED    judge srnic against rxe

The comparison prints both tallies per test file, then judges them: every
test that passes on rxe must pass on srnic, except those EXCLUDED names
(with the reason) for now, and the tests rxe fails for lack of a feature
srnic has (MUST_PASS) must pass on srnic. Exit status 1 if not.
"""
import collections
import re
import sys

# rxe fails these for lack of a kernel feature srnic has, or skipped them
# before our runner gave the suite a soft device's netdev: srnic must pass
# them whatever rxe does.
_RDMACM = "tests.test_rdmacm.CMTestCase.test_rdmacm_"
MUST_PASS = ("tests.test_cq.CQTest.test_resize_cq",) + tuple(
    _RDMACM + name
    for name in (
        "sync_traffic",
        "async_traffic",
        "async_reject_traffic",
        "async_multicast_traffic",
        "async_ex_multicast_traffic",
        "async_ex_leave_multicast_traffic",
        "async_traffic_external_qp",
        "async_udp_traffic",
        "async_read",
        "async_write",
    )
)
HEADER = re.compile(r"^(test\w*) \(([\w.]+)\)")


def verdict_of(word):
    """A unittest verdict word as ours, or None if it is not one."""
    verdict = {"ok": "pass", "FAIL": "fail", "ERROR": "error"}.get(word)
    if verdict is None and word.startswith("skipped"):
        verdict = "skip"
    elif verdict is None and word == "expected failure":
        verdict = "xfail"
    return verdict


def parse(text):
    verdicts = {}
    current = None
    # A test whose own output came between its name and its verdict (the
    # rdma_cm tests' child processes print): the verdict is on a later line.
    waiting = None
    for line in text.splitlines():
        if line.startswith("TIMEOUT: "):
            verdicts["timeout." + line.split()[1]] = "timeout"
            continue
        match = HEADER.match(line)
        if match:
            waiting = None
            current = match.group(2)
            if current.startswith("unittest.loader"):
                current = "loader." + match.group(1)
        elif waiting and verdict_of(line.strip()):
            verdicts[waiting] = verdict_of(line.strip())
            waiting = None
            continue
        if current and " ... " in line:
            word = line.rsplit(" ... ", 1)[1].strip()
            verdict = verdict_of(word)
            if verdict is None:
                verdict = "other"
                waiting = current
            verdicts[current] = verdict
            current = None
    return verdicts


def load(path):
    verdicts = {}
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 2:
                verdicts[parts[0]] = parts[1]
    return verdicts


def file_of(test_id):
    parts = test_id.split(".")
    return parts[1] if len(parts) > 2 else parts[0]


def tally(verdicts):
    per_file = collections.defaultdict(collections.Counter)
    for test_id, verdict in verdicts.items():
        per_file[file_of(test_id)][verdict] += 1
    return per_file


def load_excluded(path):
    excluded = {}
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip() if line.lstrip().startswith("#") else line.strip()
            if not line:
                continue
            name, _, reason = line.partition(" ")
            excluded[name] = reason.strip()
    return excluded


def compare(srnic, rxe, excluded):
    ts, tr = tally(srnic), tally(rxe)
    print(f"{'test file':24} {'srnic pass/fail/err/skip':>26} {'rxe pass/fail/err/skip':>24}")
    for name in sorted(set(ts) | set(tr)):
        def fmt(c):
            return f"{c['pass']}/{c['fail']}/{c['error']}/{c['skip']}"
        print(f"{name:24} {fmt(ts[name]):>26} {fmt(tr[name]):>24}")
    total_s = sum(ts.values(), collections.Counter())
    total_r = sum(tr.values(), collections.Counter())
    print(f"total: srnic {total_s['pass']} passed, {total_s['fail'] + total_s['error']} failed, "
          f"{total_s['skip']} skipped; rxe {total_r['pass']} passed, "
          f"{total_r['fail'] + total_r['error']} failed, {total_r['skip']} skipped")

    missing, waived, counted = [], [], []
    for test_id, verdict in sorted(rxe.items()):
        if verdict != "pass":
            continue
        short = test_id.rsplit(".", 1)[-1]
        if srnic.get(test_id) == "pass":
            counted.append(test_id)
        elif short in excluded:
            waived.append((test_id, srnic.get(test_id, "absent"), excluded[short]))
        else:
            missing.append((test_id, srnic.get(test_id, "absent")))
    beyond = [t for t, v in sorted(srnic.items()) if v == "pass" and rxe.get(t) != "pass"]
    for test_id in MUST_PASS:
        if srnic.get(test_id) != "pass":
            missing.append((test_id, srnic.get(test_id, "absent")))
    print(f"\ncounted: {len(counted)} tests pass on rxe and on srnic")
    for test_id in counted:
        print(f"  pass both: {test_id}")
    print(f"\nnot yet counted ({len(waived)}): pass on rxe, need what a later issue brings")
    for test_id, verdict, reason in waived:
        print(f"  {verdict:5} {test_id}: {reason}")
    print(f"\nsrnic passes where rxe does not ({len(beyond)}):")
    for test_id in beyond:
        print(f"  {test_id} (rxe: {rxe.get(test_id, 'absent')})")
    if missing:
        print(f"\nFAIL: {len(missing)} tests pass on rxe (or must pass) but not on srnic:")
        for test_id, verdict in missing:
            print(f"  {verdict:5} {test_id}")
        return 1
    print("\nevery rxe pass is a srnic pass")
    return 0


def main(argv):
    if len(argv) == 3 and argv[1] == "parse":
        with open(argv[2], errors="replace") as f:
            for test_id, verdict in sorted(parse(f.read()).items()):
                print(test_id, verdict)
        return 0
    if len(argv) == 5 and argv[1] == "compare":
        return compare(load(argv[2]), load(argv[3]), load_excluded(argv[4]))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
