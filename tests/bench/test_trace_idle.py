# SPDX-License-Identifier: GPL-2.0
"""Host test of trace_idle.py on a made-up trace (`make host-test`)."""

import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import trace_idle  # noqa: E402


def switch(cpu, t, prev, prev_pid, state, nxt, next_pid):
    return (
        "%16s %5d [%03d] %12.6f: sched:sched_switch: prev_comm=%s prev_pid=%d prev_prio=120 "
        "prev_state=%s ==> next_comm=%s next_pid=%d next_prio=120"
        % (prev, prev_pid, cpu, t, prev, prev_pid, state, nxt, next_pid)
    )


# Setup: both CPUs idle 1 s. Measurement, 1.0 to 1.5 s: the client runs on
# CPU 0 throughout; CPU 1 runs a worker whose one item lasts 0.4 s, then
# idles 2 ms until the client wakes the worker again. Teardown: both idle
# for another second.
TRACE = [
    switch(0, 0.000, "bash", 9, "S", "swapper/0", 0),
    switch(1, 0.000, "bash", 8, "S", "swapper/1", 0),
    switch(0, 1.000, "swapper/0", 0, "R", "client", 100),
    switch(1, 1.000, "swapper/1", 0, "R", "kworker/1:0", 20),
    "     kworker/1:0    20 [001]     1.000010: workqueue:workqueue_execute_start: "
    "work struct 0xffff1: function qp_work_cb",
    "     kworker/1:0    20 [001]     1.400000: workqueue:workqueue_execute_end: "
    "work struct 0xffff1: function qp_work_cb",
    switch(1, 1.400000, "kworker/1:0", 20, "I", "swapper/1", 0),
    "          client   100 [000]     1.401000: sched:sched_waking: comm=kworker/1:0 pid=20 prio=120 target_cpu=001",
    switch(1, 1.402000, "swapper/1", 0, "R", "kworker/1:0", 20),
    switch(1, 1.500000, "kworker/1:0", 20, "I", "swapper/1", 0),
    switch(0, 1.500000, "client", 100, "S", "swapper/0", 0),
    switch(0, 2.500000, "swapper/0", 0, "R", "bash", 9),
    switch(1, 2.500000, "swapper/1", 0, "R", "bash", 8),
]


class TraceIdleTest(unittest.TestCase):
    def setUp(self):
        handle, self.path = tempfile.mkstemp(suffix=".txt")
        with os.fdopen(handle, "w") as out:
            out.write("\n".join(TRACE) + "\n")

    def tearDown(self):
        os.unlink(self.path)

    def test_window_and_figures(self):
        idle, runs, work, cpus, first, last = trace_idle.read(self.path)
        self.assertEqual(cpus, {0, 1})
        lo, hi = trace_idle.busy_window(idle, cpus, first, last)
        # The setup's and teardown's idle second is left out.
        self.assertAlmostEqual(lo, 1.0, places=6)
        self.assertAlmostEqual(hi, 1.5, places=6)
        by_cpu, _ = trace_idle.totals(idle, lambda i: i[0], lo, hi)
        self.assertAlmostEqual(by_cpu[0], 0.0, places=6)
        self.assertAlmostEqual(by_cpu[1], 0.002, places=6)
        causes, counts = trace_idle.totals(idle, lambda i: (i[0], i[3], i[4]), lo, hi)
        cause = (1, "kworker/1:0:I", "kworker/1:0 (woken by client@0)")
        self.assertAlmostEqual(causes[cause], 0.002, places=6)
        self.assertEqual(counts[cause], 1)
        busy, _ = trace_idle.totals(runs, lambda r: (r[0], r[3]), lo, hi)
        self.assertAlmostEqual(busy[(0, "client")], 0.5, places=6)
        self.assertAlmostEqual(busy[(1, "kworker/1:0")], 0.498, places=6)
        items, item_counts = trace_idle.totals(work, lambda w: (w[0], w[3]), lo, hi)
        self.assertAlmostEqual(items[(1, "qp_work_cb")], 0.39999, places=5)
        self.assertEqual(item_counts[(1, "qp_work_cb")], 1)


if __name__ == "__main__":
    unittest.main()
