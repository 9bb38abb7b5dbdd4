#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The end of `make bench`: read out/bench/results.csv, print one table with
every figure, the ratios srnic/rxe, srnic/siw and srnic/limit and the
issue's targets marked met or missed, save it as out/bench/table.txt, and
draw the PNG plots with gnuplot.

    tests/bench/report.py OUT_DIR

A failed measurement shows as FAILED (its reason is in the CSV's note and
the raw logs it names), an unsupported one as "unsup."; neither is ever a
number, and no ratio is computed from them.
"""
import csv
import os
import shutil
import subprocess
import sys

DEVICES = ["srnic", "rxe", "siw"]
BW_TESTS = ["write_bw", "read_bw", "send_bw"]
LAT_TESTS = ["write_lat", "send_lat"]
TEST_ORDER = BW_TESTS + ["atomic_bw", "send_bw_2proc"] + LAT_TESTS
LIMIT_NAMES = {
    "memcpy": "memcpy, one CPU",
    "iperf3_udp": "iperf3 UDP (received)",
    "iperf3_tcp": "iperf3 TCP",
}
# How close to the wire's own UDP throughput counts as "close" (the issue
# leaves the number open).
CLOSE_TO_UDP = 0.75


def size_name(size):
    size = int(size)
    for unit, shift in (("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift and size % (1 << shift) == 0:
            return f"{size >> shift} {unit}"
    return f"{size} B"


def load(path):
    rows = {}
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            key = (r["mode"], r["device"], r["test"], int(r["size"] or 0), int(r["qps"] or 1))
            rows[key] = r
    return rows


def value(rows, mode, dev, test, size, qps=1):
    r = rows.get((mode, dev, test, size, qps))
    if r and r["status"] == "ok" and r["value"]:
        return float(r["value"])
    return None


def cell(rows, mode, dev, test, size, qps):
    r = rows.get((mode, dev, test, size, qps))
    if r is None:
        return "-"
    if r["status"] == "ok":
        return figure(float(r["value"]))
    if r["status"] == "unsupported":
        return "unsup."
    return "FAILED"


def figure(v):
    """A figure with three significant digits or one decimal, whichever is more."""
    return f"{v:.1f}" if v >= 100 else f"{v:.3g}"


def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


def fmt_ratio(x):
    if x is None:
        return "-"
    return f"{x:.2f}" if x >= 0.1 else f"{x:.2g}"


def table(rows_out, header, left=(0, 1)):
    """Text table; the columns in LEFT are aligned left, the others right."""
    widths = [max(len(str(r[i])) for r in [header] + rows_out) for i in range(len(header))]
    lines = []
    for n, r in enumerate([header] + rows_out):
        lines.append("  ".join(str(c).ljust(w) if i in left else str(c).rjust(w)
                               for i, (c, w) in enumerate(zip(r, widths))).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return lines


def main():
    out = sys.argv[1]
    rows = load(os.path.join(out, "results.csv"))
    info = {}
    if os.path.exists(os.path.join(out, "run-info")):
        for line in open(os.path.join(out, "run-info")):
            k, _, v = line.strip().partition("=")
            info[k] = v
    modes = [m for m in ("loopback", "wire") if any(k[0] == m for k in rows)]
    text = []
    text.append(f"srnic benchmark ({info.get('mode', '?')} run), commit {info.get('commit', '?')}, "
                f"{info.get('date', '?')}, kernel {info.get('kernel', '?')}")
    text.append("Bandwidth in MiB/s (perftest's BW average; below 10 MiB/s from its message rate),")
    text.append("latency in usec (perftest's t_typical, the median); for latency a ratio below 1")
    text.append("means srnic is faster. perftest's own output: out/bench/runs/SESSION/VM/raw/.")

    limits = {}
    for mode in modes:
        text.append("")
        text.append(f"== {mode}: " + ("one VM, 2 vCPUs, both ends through the device"
                                      if mode == "loopback" else
                                      "two VMs, 1 vCPU each, on one wire"))
        for test, name in LIMIT_NAMES.items():
            keys = [k for k in rows if k[0] == mode and k[1] == "limit" and k[2] == test]
            for k in keys:
                c = cell(rows, *k)
                note = rows[k]["note"] if c == "FAILED" else ""
                text.append(f"limit: {name}: " + (f"{c} MiB/s" if note == "" else f"FAILED ({note})"))
                if value(rows, *k) is not None:
                    limits[(mode, test)] = value(rows, *k)
        bulk_limit = limits.get((mode, "memcpy" if mode == "loopback" else "iperf3_udp"))
        limit_name = "memcpy" if mode == "loopback" else "UDP"
        header = ["test", "size", "qps"] + DEVICES + ["srnic/rxe", "srnic/siw", f"srnic/{limit_name}"]
        body = []
        keys = sorted({(k[2], k[3], k[4]) for k in rows
                       if k[0] == mode and k[1] not in ("limit", "iblan")},
                      key=lambda t: (TEST_ORDER.index(t[0]) if t[0] in TEST_ORDER else 99, t[2], t[1]))
        for test, size, qps in keys:
            s = value(rows, mode, "srnic", test, size, qps)
            lim = None
            # The limits bound bulk transfers; small messages are bound by
            # the per-message cost instead.
            if (test in BW_TESTS or test == "send_bw_2proc") and size >= 4096:
                lim = ratio(s, bulk_limit)
            body.append([test, size_name(size), qps]
                        + [cell(rows, mode, d, test, size, qps) for d in DEVICES]
                        + [fmt_ratio(ratio(s, value(rows, mode, "rxe", test, size, qps))),
                           fmt_ratio(ratio(s, value(rows, mode, "siw", test, size, qps))),
                           fmt_ratio(lim)])
        text.extend(table(body, header))
        # iblan: TCP over the emulated LAN (UD over srnic0) against TCP over
        # the carrier netdev itself.
        for k in [k for k in rows if k[0] == mode and k[1] == "iblan"]:
            c = cell(rows, *k)
            over_eth = limits.get((mode, "iperf3_tcp"))
            share = fmt_ratio(ratio(value(rows, *k), over_eth))
            text.append(f"iblan0 over srnic0: iperf3 TCP {c}"
                        + ("" if c == "FAILED" else f" MiB/s, {share} of eth0's TCP")
                        + (f" ({rows[k]['note']})" if c == "FAILED" else ""))

    # The targets.
    text.append("")
    text.append("== targets (goals, not assertions)")
    targets = []

    def target(what, measured, op, goal, missing_why="no figure (a measurement failed or did not run)"):
        if measured is None:
            verdict = missing_why
        elif (measured >= goal) if op == ">=" else (measured <= goal):
            verdict = "met"
        else:
            verdict = "missed"
        targets.append([what, fmt_ratio(measured), f"{op} {goal}", verdict])

    def largest(mode, dev, test):
        sizes = sorted(k[3] for k in rows if k[:3] == (mode, dev, test) and k[4] == 1)
        return sizes[-1] if sizes else None

    k64 = 65536
    target("ib_write_bw 64 KiB loopback, srnic/rxe",
           ratio(value(rows, "loopback", "srnic", "write_bw", k64), value(rows, "loopback", "rxe", "write_bw", k64)),
           ">=", 3.0)
    target("ib_write_bw 64 KiB loopback, srnic/siw",
           ratio(value(rows, "loopback", "srnic", "write_bw", k64), value(rows, "loopback", "siw", "write_bw", k64)),
           ">=", 1.5)
    big = largest("loopback", "srnic", "write_bw")
    target(f"bulk RDMA WRITE loopback ({size_name(big) if big else '?'}), srnic/memcpy "
           "(within 2x of memcpy time per byte)",
           ratio(value(rows, "loopback", "srnic", "write_bw", big), limits.get(("loopback", "memcpy"))),
           ">=", 0.5)
    target("ib_send_lat 2 B loopback, srnic/rxe",
           ratio(value(rows, "loopback", "srnic", "send_lat", 2), value(rows, "loopback", "rxe", "send_lat", 2)),
           "<=", 0.7)
    target("ib_write_bw 64 KiB loopback, srnic 4 QPs / 1 QP (2 vCPUs)",
           ratio(value(rows, "loopback", "srnic", "write_bw", k64, 4), value(rows, "loopback", "srnic", "write_bw", k64)),
           ">=", 1.7)
    target("two VMs ib_write_bw 64 KiB, srnic/rxe",
           ratio(value(rows, "wire", "srnic", "write_bw", k64), value(rows, "wire", "rxe", "write_bw", k64)),
           ">=", 1.5)
    big = largest("wire", "srnic", "write_bw")
    target(f"two VMs ib_write_bw {size_name(big) if big else '?'}, srnic/iperf3 UDP (close: >= {CLOSE_TO_UDP})",
           ratio(value(rows, "wire", "srnic", "write_bw", big), limits.get(("wire", "iperf3_udp"))),
           ">=", CLOSE_TO_UDP)
    target("two VMs iperf3 TCP, iblan0 over srnic0 / eth0",
           ratio(value(rows, "wire", "iblan", "iperf3_tcp", 0), limits.get(("wire", "iperf3_tcp"))),
           ">=", 0.5)
    text.extend(table(targets, ["target", "ratio", "goal", "verdict"], left=(0, 3)))

    failed = [r for r in rows.values() if r["status"] == "FAILED"]
    if failed:
        text.append("")
        text.append(f"== {len(failed)} failed measurement(s)")
        for r in failed:
            text.append(f"{r['mode']} {r['device']} {r['test']} {size_name(r['size'] or 0)} q{r['qps']}: {r['note']}")
    text.append("")
    text.append("CSV: out/bench/results.csv; plots: out/bench/*.png; elapsed "
                f"{info.get('elapsed', '?')} s")
    report = "\n".join(text)
    print(report)
    with open(os.path.join(out, "table.txt"), "w") as f:
        f.write(report + "\n")
    plots(out, rows, modes)


def gnuplot(out, script):
    if not shutil.which("gnuplot"):
        print("bench: gnuplot is missing (scripts/bench-setup.sh installs it); no plots", file=sys.stderr)
        return
    with open(os.path.join(out, "plot", "plots.gp"), "a") as f:
        f.write(script + "\n")
    p = subprocess.run(["gnuplot"], input=script, text=True, capture_output=True, cwd=out)
    if p.returncode != 0:
        print(f"bench: gnuplot failed: {p.stderr.strip()}", file=sys.stderr)


def plots(out, rows, modes):
    pdir = os.path.join(out, "plot")
    os.makedirs(pdir, exist_ok=True)
    open(os.path.join(pdir, "plots.gp"), "w").close()
    colors = {"srnic": "#d62728", "rxe": "#1f77b4", "siw": "#2ca02c"}
    for mode in modes:
        # Bandwidth against message size, one panel per test.
        panels = []
        for test in BW_TESTS:
            series = []
            for dev in DEVICES:
                pts = sorted((k[3], value(rows, *k)) for k in rows
                             if k[:3] == (mode, dev, test) and k[4] == 1 and value(rows, *k) is not None)
                if not pts:
                    continue
                name = f"plot/bw-{mode}-{test}-{dev}.dat"
                with open(os.path.join(out, name), "w") as f:
                    f.writelines(f"{s} {v}\n" for s, v in pts)
                series.append(f"'{name}' using 1:2 with linespoints lw 2 pt 7 lc rgb '{colors[dev]}' title '{dev}'")
            lim = [value(rows, *k) for k in rows if k[0] == mode and k[1] == "limit"
                   and k[2] == ("memcpy" if mode == "loopback" else "iperf3_udp") and value(rows, *k)]
            if lim:
                series.append(f"{lim[0]} with lines dt 2 lc rgb 'gray40' title "
                              f"'{'memcpy' if mode == 'loopback' else 'iperf3 UDP'}'")
            if series:
                panels.append(f"set title 'ib_{test} ({mode})'\nplot " + ", \\\n  ".join(series))
        if panels:
            gnuplot(out, "\n".join([
                f"set terminal pngcairo noenhanced size {520 * len(panels)},420 font 'sans,9'",
                f"set output 'bandwidth-{mode}.png'",
                f"set multiplot layout 1,{len(panels)}",
                "set logscale x 2", "set logscale y 10", "set grid",
                "set xlabel 'message size (bytes)'", "set ylabel 'MiB/s'",
                "set key outside bottom center horizontal", "set format x '%.0b%BB'",
            ] + panels + ["unset multiplot"]))

        # Latency bars: one group per test and size, one bar per device.
        groups = sorted({(k[2], k[3]) for k in rows if k[0] == mode and k[2] in LAT_TESTS},
                        key=lambda t: (LAT_TESTS.index(t[0]), t[1]))
        if groups:
            name = f"plot/lat-{mode}.dat"
            with open(os.path.join(out, name), "w") as f:
                f.write("group " + " ".join(DEVICES) + "\n")
                for test, size in groups:
                    vals = [value(rows, mode, d, test, size) for d in DEVICES]
                    f.write(f"\"{test} {size_name(size).replace(' ', '')}\" "
                            + " ".join("NaN" if v is None else f"{v}" for v in vals) + "\n")
            gnuplot(out, "\n".join([
                "set terminal pngcairo noenhanced size 800,420 font 'sans,9'",
                f"set output 'latency-{mode}.png'",
                f"set title 'latency ({mode}), perftest t_typical; missing bar = failed or not run'",
                "set style data histogram", "set style histogram cluster gap 1",
                "set style fill solid 0.8 border -1", "set boxwidth 0.9",
                "set datafile missing 'NaN'", "set ylabel 'usec'", "set yrange [0:*]",
                "set grid ytics", "set key top left",
                f"plot '{name}' using 2:xtic(1) title col lc rgb '{colors['srnic']}', "
                f"'' using 3 title col lc rgb '{colors['rxe']}', '' using 4 title col lc rgb '{colors['siw']}'",
            ]))

        # Scaling bars, 64 KiB: WRITE with 1, 2, 4 QPs; SEND in one process
        # and in two (CQ events, one CPU each).
        cases = [("write_bw", 1, "write 1 QP"), ("write_bw", 2, "write 2 QPs"), ("write_bw", 4, "write 4 QPs"),
                 ("send_bw", 1, "send 1 proc"), ("send_bw_2proc", 1, "send 2 procs, events")]
        if any((mode, d, t, 65536, q) in rows for d in DEVICES for t, q, _ in cases if q > 1 or t == "send_bw_2proc"):
            name = f"plot/scaling-{mode}.dat"
            with open(os.path.join(out, name), "w") as f:
                f.write("case " + " ".join(DEVICES) + "\n")
                for t, q, label in cases:
                    vals = [value(rows, mode, d, t, 65536, q) for d in DEVICES]
                    f.write(f"\"{label}\" " + " ".join("NaN" if v is None else f"{v}" for v in vals) + "\n")
            gnuplot(out, "\n".join([
                "set terminal pngcairo noenhanced size 800,420 font 'sans,9'",
                f"set output 'scaling-{mode}.png'",
                f"set title '64 KiB scaling ({mode}, 2 vCPUs)'",
                "set style data histogram", "set style histogram cluster gap 1",
                "set style fill solid 0.8 border -1", "set boxwidth 0.9",
                "set datafile missing 'NaN'", "set ylabel 'MiB/s'", "set yrange [0:*]",
                "set grid ytics", "set key top left",
                f"plot '{name}' using 2:xtic(1) title col lc rgb '{colors['srnic']}', "
                f"'' using 3 title col lc rgb '{colors['rxe']}', '' using 4 title col lc rgb '{colors['siw']}'",
            ]))


if __name__ == "__main__":
    main()
