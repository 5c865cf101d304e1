"""Where the host has put the cores: the core-to-core latency `collie-limits --core-latency`
measures (a cache line's trip from one core to the other), looked at before and after every
command of perf/compare.

On a VM the host moves the virtual CPUs, and with them the cost of whatever the cores share.
On a 2-vCPU AMD EPYC VM the latency was seen to flip between about 0.03-0.06 µs and
0.2 µs every few seconds to minutes, and in the far state data handed between the cores moves
at 2 GB/s instead of 15: a shared-memory AllReduce then runs 4x slower, loopback TCP 2x. A
comparison whose rows ran in different states compares the host, not the libraries. So
perf/compare waits (up to --settle seconds) for a near placement before each command, runs it
again when the placement changed under it, and marks the rows that still ran far. All the
waiting of a run together is bounded (BUDGET_FACTOR times --settle); past that it only marks.

A latency is near when it is at most NEAR_FACTOR times the lowest seen in the run: on a machine
whose placement does not move (bare metal, or ranks pinned), every row is near.
"""

import os
import subprocess
import time

NEAR_FACTOR = 3.0
POLL_S = 0.5
BUDGET_FACTOR = 20


class Placement:
    def __init__(self, bin_dir, settle_s):
        self.cmd = [os.path.join(bin_dir, "collie-limits"), "--core-latency"]
        self.settle_s = settle_s
        self.budget_s = BUDGET_FACTOR * settle_s
        self.lowest = None
        self.waited_s = 0.0
        self.available = True

    def probe(self):
        """The latency now, in µs; None when it cannot be measured (one CPU)."""
        if not self.available:
            return None
        try:
            p = subprocess.run(self.cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                               timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            self.available = False
            return None
        us = None
        for line in p.stdout.splitlines():
            fields = dict(w.split("=", 1) for w in line.split()[1:] if "=" in w)
            if line.startswith("latency ") and "us" in fields:
                us = float(fields["us"])
        if p.returncode != 0 or us is None:
            self.available = False
            return None
        self.lowest = us if self.lowest is None else min(self.lowest, us)
        return us

    def near(self, us, lowest=None):
        """Whether us is a near placement (unknown counts as near)."""
        lowest = self.lowest if lowest is None else lowest
        return us is None or lowest is None or us <= NEAR_FACTOR * lowest

    def can_wait(self):
        return self.waited_s < self.budget_s

    def settle(self):
        """Before a command: the latency it starts in, after waiting up to settle_s (and what
        is left of the run's budget) for a near placement."""
        us = self.probe()
        start = time.monotonic()
        limit = min(self.settle_s, self.budget_s - self.waited_s)
        while not self.near(us) and time.monotonic() - start < limit:
            time.sleep(POLL_S)
            us = self.probe()
        self.waited_s += time.monotonic() - start
        return us


def is_far(row, lowest):
    """Whether a result row ran (partly) in a far placement, judged against the run's lowest
    latency."""
    if lowest is None:
        return False
    return any(us is not None and us > NEAR_FACTOR * lowest
               for us in (row.get("core_us_before"), row.get("core_us_after")))
