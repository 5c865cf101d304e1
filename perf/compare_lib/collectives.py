"""The collectives perf/compare measures, with collie-perf's sizes and bus factors, and each one's
2-rank bounds from the machine's limits.

A size is the per-rank total, as collie-perf and nccl-tests count it; the split collectives
(one block per rank) round its float count down to a multiple of the ranks, and a size whose
block would be empty is not measured. busbw = bytes * factor / time with nccl-tests' factors,
so that every system's busbw, and their ratios, mean the same thing.

Bounds (2 ranks, Collie out of place, in busbw): per S bytes of size, the two cores together
write wc*S bytes by copy and wr*S by reduction, at the two-thread streaming copy and add rates
C and R; and each rank takes d*S bytes the other core wrote, both ranks at once (at X, the
core-to-core rate per direction) or one only (no one-way rate is measured, so no term). So
time >= wc*S/C + wr*S/R and >= d*S/X: shm busbw <= f / max(wc/C + wr/R, d/X). Over loopback
TCP each rank sends or receives d*S, so tcp busbw <= f/d times the rate per direction with both
busy, or the one-way rate. AllReduce's come out as collie-limits' own bound lines, used as
they are.
"""


class Collective:
    def __init__(self, name, title, split, factor, cost, gloo, reduces):
        self.name = name  # perf/compare's, collie-perf's alias and the peer drivers' --coll
        self.title = title
        self.split = split
        self.factor = factor  # busbw factor as a function of the ranks
        self.wc, self.wr, self.d, self.both = cost
        self.gloo = gloo  # the Gloo driver's --algo names for it
        self.reduces = reduces

    def effective_bytes(self, size, ranks):
        """The bytes of the size the call moves: split counts round down to a multiple of ranks."""
        count = size // 4
        return (count // ranks * ranks if self.split else count) * 4

    def factor_text(self):
        return "2(n−1)/n" if self.name == "allreduce" else "(n−1)/n" if self.split else "1"

    def heading(self):
        return "float32 %s%s" % ("sum " if self.reduces else "", self.title)

    def sizes(self, sizes, ranks):
        return [s for s in sizes if self.effective_bytes(s, ranks) > 0]

    def busbw(self, size, ranks, time_us):
        return self.effective_bytes(size, ranks) * self.factor(ranks) / (time_us * 1e3)

    def bounds(self, limits):
        """{'shm': GB/s, 'tcp': GB/s} at 2 ranks, each where its limits were measured."""
        if self.name == "allreduce":
            return dict(limits.get("bounds", {}))
        rate = {(l["name"], l["threads"]): l["GBps"] for l in limits.get("limits", [])}
        copy, add = rate.get(("copy_stream", 2)), rate.get(("add_f32_stream", 2))
        cores = rate.get(("core_to_core_bidir_per_direction", 2))
        f = self.factor(2)
        out = {}
        if (copy or not self.wc) and (add or not self.wr):
            memory = (self.wc / copy if self.wc else 0) + (self.wr / add if self.wr else 0)
            across = self.d / cores if self.both and cores else 0
            out["shm"] = f / max(memory, across)
        tcp = rate.get(("tcp_loopback_bidir_per_direction", 2) if self.both else
                       ("tcp_loopback_oneway", 1))
        if tcp:
            out["tcp"] = f / self.d * tcp
        return out

    def bound_notes(self):
        """How the shm and the tcp bound follow from the limits, for the report."""
        if self.name == "allreduce":
            return ("the lower of 1/(1/R+1/C), R two-thread f32 add with streaming stores and C "
                    "two-thread streaming copy, and X, data handed between two cores both ways at "
                    "once: each rank takes S bytes the other core wrote",
                    "loopback, per direction with both busy")
        work = " + ".join(t for t in ("%g·S/C" % self.wc if self.wc else "",
                                      "%g·S/R" % self.wr if self.wr else "") if t)
        across = " and ≥ %g·S/X" % self.d if self.both else ""
        shm = ("busbw = %g·S ÷ time, time ≥ %s%s; C two-thread streaming copy, R two-thread f32 "
               "add, X core to core per direction" % (self.factor(2), work, across))
        tcp = "loopback, %g·S per rank, %s" % (
            self.d, "per direction with both busy" if self.both else "one way")
        return shm, tcp


def _split(n):
    return (n - 1) / n


def _one(n):
    return 1.0


_CLASSIC = ["ring", "ring_chunked", "halving_doubling"]

# name, title, split, factor, (wc, wr, d, both ways), Gloo algorithms, reduces
COLLECTIVES = [
    Collective("allreduce", "AllReduce", False, lambda n: 2.0 * (n - 1) / n, (1, 1, 1, True),
               _CLASSIC, True),
    Collective("reducescatter", "ReduceScatter", True, _split, (0, 1, 0.5, True),
               ["halving_doubling"], True),
    Collective("allgather", "AllGather", True, _split, (2, 0, 0.5, True), ["default"], False),
    Collective("broadcast", "Broadcast", False, _one, (2, 0, 1, False), ["default"], False),
    Collective("reduce", "Reduce", False, _one, (0, 1, 1, False), ["default"], True),
    Collective("alltoall", "AlltoAll", True, _split, (2, 0, 0.5, True), ["default"], False),
    Collective("sendrecv", "SendRecv", False, _one, (2, 0, 1, True), ["default"], False),
    Collective("gather", "Gather", True, _split, (1, 0, 0.5, False), ["default"], False),
    Collective("scatter", "Scatter", True, _split, (1, 0, 0.5, False), ["default"], False),
]

NAMES = [c.name for c in COLLECTIVES]


def get(name):
    for c in COLLECTIVES:
        if c.name == name:
            return c
    return None


def selected(arg):
    """The collectives --collective names: one, a comma list, or all (in table order)."""
    if arg == "all":
        return list(COLLECTIVES)
    out = [get(n) for n in arg.split(",")]
    return None if None in out or not out else out
