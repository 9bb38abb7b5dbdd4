#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Where a bench row's CPUs idled, from its scheduler trace.

Reads `perf script -F comm,pid,cpu,time,event,trace` output (plain or
gzip) of a `scripts/bench --trace` row and prints, per CPU: its idle
share, the idle periods by what put the CPU to sleep (the task that
switched out, and its state) and what ended them (the task switched in,
and who woke it, from which CPU), each task's busy time, and the work
items it ran (by function, with their time).

The trace spans the whole row (connection setup, the measurement, the
teardown), so the figures are taken over the measurement alone: the
longest run of 10 ms slices in which the CPUs were busy at least half
the time. Standard library only, so that the guest's python3 -S runs it.
"""

import collections
import gzip
import re
import sys

LINE = re.compile(r"^\s*(.+?)\s+(-?\d+)\s+\[(\d+)\]\s+([\d.]+):\s+([\w:]+):\s?(.*)$")
FIELD = re.compile(r"(\w+)=(\S+)")
SLICE = 0.01
BUCKETS = ((1e-5, "< 10 us"), (1e-4, "< 100 us"), (1e-3, "< 1 ms"), (1e-2, "< 10 ms"), (1e9, ">= 10 ms"))


def fields(trace):
    """The key=value pairs of a tracepoint's text."""
    return dict(FIELD.findall(trace))


def read(path):
    """Idle intervals (cpu, start, end, slept, ended), run intervals
    (cpu, start, end, task), work intervals (cpu, start, end, function),
    the CPUs seen, and the trace's first and last times."""
    opener = gzip.open if path.endswith(".gz") else open
    idle_since = {}  # cpu -> (time, what put it to sleep)
    idle, runs, work, cpus = [], [], [], set()
    running = {}  # cpu -> (time, task) of the task switched in last
    woken_by = {}  # pid -> "waker@cpu"
    work_since = {}  # cpu -> (time, function)
    first = last = None
    with opener(path, "rt", errors="replace") as lines:
        for line in lines:
            m = LINE.match(line)
            if not m:
                continue
            comm, _pid, cpu, t, event, trace = m.groups()
            cpu, t = int(cpu), float(t)
            cpus.add(cpu)
            first = t if first is None else first
            last = t
            f = fields(trace)
            if event == "sched:sched_waking":
                woken_by[f.get("pid")] = "%s@%d" % (comm, cpu)
            elif event == "sched:sched_switch":
                if f.get("prev_pid") != "0" and cpu in running:
                    since, task = running.pop(cpu)
                    runs.append((cpu, since, t, task))
                if f.get("next_pid") != "0":
                    running[cpu] = (t, f.get("next_comm"))
                if f.get("next_pid") == "0":
                    idle_since[cpu] = (t, "%s:%s" % (f.get("prev_comm"), f.get("prev_state")))
                elif f.get("prev_pid") == "0" and cpu in idle_since:
                    since, slept = idle_since.pop(cpu)
                    waker = woken_by.get(f.get("next_pid"), "?")
                    idle.append((cpu, since, t, slept, "%s (woken by %s)" % (f.get("next_comm"), waker)))
            elif event == "workqueue:workqueue_execute_start":
                work_since[cpu] = (t, f.get("function", trace.split()[-1]))
            elif event == "workqueue:workqueue_execute_end" and cpu in work_since:
                since, function = work_since.pop(cpu)
                work.append((cpu, since, t, function))
    return idle, runs, work, cpus, first, last


def busy_window(idle, cpus, first, last):
    """The longest run of slices in which the CPUs were busy at least
    half the time: the measurement, without setup and teardown."""
    count = int((last - first) / SLICE) + 1
    idle_in = [0.0] * count
    for _cpu, start, end, _s, _e in idle:
        i = int((start - first) / SLICE)
        while i < count and first + i * SLICE < end:
            lo, hi = first + i * SLICE, first + (i + 1) * SLICE
            idle_in[i] += max(0.0, min(end, hi) - max(start, lo))
            i += 1
    best, run_start = (0, 0), None
    for i in range(count + 1):
        busy = i < count and idle_in[i] <= 0.5 * SLICE * len(cpus)
        if busy and run_start is None:
            run_start = i
        elif not busy and run_start is not None:
            if i - run_start > best[1] - best[0]:
                best = (run_start, i)
            run_start = None
    if best == (0, 0):
        return first, last
    return first + best[0] * SLICE, min(last, first + best[1] * SLICE)


def totals(intervals, key, lo, hi):
    """Seconds and counts of `intervals` (tuples whose second and third
    items are start and end) within [lo, hi], by `key(interval)`."""
    seconds, counts = collections.Counter(), collections.Counter()
    for interval in intervals:
        inside = min(interval[2], hi) - max(interval[1], lo)
        if inside > 0:
            seconds[key(interval)] += inside
            counts[key(interval)] += 1
    return seconds, counts


def length_bucket(interval):
    """The (cpu, bucket) of an idle interval by its whole length."""
    return interval[0], next(b for b, _ in BUCKETS if interval[2] - interval[1] < b)


def main():
    idle, runs, work, cpus, first, last = read(sys.argv[1])
    if first is None:
        print("no events")
        return
    lo, hi = busy_window(idle, cpus, first, last)
    span = hi - lo
    print("trace of %.3f s; measured over the busy window %.3f-%.3f s (%.3f s)" % (last - first, lo, hi, span))
    idle_total, _ = totals(idle, lambda i: i[0], lo, hi)
    lengths, _ = totals(idle, length_bucket, lo, hi)
    for cpu in sorted(cpus):
        print("CPU %d idle %.1f %% (%.3f s); idle time by period length:" % (cpu, 100 * idle_total[cpu] / span, idle_total[cpu]))
        for bucket, name in BUCKETS:
            if lengths[(cpu, bucket)]:
                print("    %-9s %.4f s" % (name, lengths[(cpu, bucket)]))
    by_cause, count_cause = totals(idle, lambda i: (i[0], i[3], i[4]), lo, hi)
    print("\nidle by what started and ended it (top 30):")
    print("  cpu  seconds  count  slept -> ended")
    for (cpu, slept, ended), secs in by_cause.most_common(30):
        print("  %3d  %7.4f  %5d  %s -> %s" % (cpu, secs, count_cause[(cpu, slept, ended)], slept, ended))
    run_time, _ = totals(runs, lambda r: (r[0], r[3]), lo, hi)
    print("\nbusy time by CPU and task (top 20):")
    print("  cpu  seconds  share  task")
    for (cpu, task), secs in run_time.most_common(20):
        print("  %3d  %7.4f  %4.0f%%  %s" % (cpu, secs, 100 * secs / span, task))
    work_time, work_count = totals(work, lambda w: (w[0], w[3]), lo, hi)
    print("\nwork items by CPU and function (top 20):")
    print("  cpu  seconds  count  function")
    for (cpu, function), secs in work_time.most_common(20):
        print("  %3d  %7.4f  %5d  %s" % (cpu, secs, work_count[(cpu, function)], function))


if __name__ == "__main__":
    main()
