#!/usr/bin/env python3
"""collie-perf with nccl-tests' all_reduce_perf flags, read as nccl-tests' output is read.

Runs collie-perf on 2 ranks (collie-run) with every all_reduce_perf flag, short and long
forms, and parses stdout the way scripts written for nccl-tests do: the column names from
the '#  size  count ...' header, each result row split on blanks into size count type redop
root, then time algbw busbw #wrong out of place and again in place. Checks that every size
asked for is there (once per -N cycle), #wrong is 0 on every row, the header shows what the
flags asked for, and that flags of no meaning on a CPU are noted as ignored.

    nccl_tests_flags_test.py BIN_DIR
"""
import re
import subprocess
import sys

COLUMNS = ["size", "count", "type", "redop", "root",
           "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong"]


def fail(msg, out=""):
    print("FAIL: " + msg)
    if out:
        print(out)
    sys.exit(1)


def parse(out):
    """Returns (column names, rows); a row is a dict per placement plus the common fields."""
    names = None
    rows = []
    for line in out.splitlines():
        if line.startswith("#"):
            fields = line[1:].split()
            if fields[:2] == ["size", "count"]:
                names = fields
            continue
        if not line.strip():
            continue
        if names is None:
            fail("a result row before the column header: " + line, out)
        fields = line.split()
        if len(fields) != len(names):
            fail("row has %d fields, header %d: %s" % (len(fields), len(names), line), out)
        rows.append({
            "size": int(fields[0]), "count": int(fields[1]), "type": fields[2],
            "redop": fields[3], "root": int(fields[4]),
            "oop": {"time": float(fields[5]), "algbw": float(fields[6]),
                    "busbw": float(fields[7]), "wrong": fields[8]},
            "ip": {"time": float(fields[9]), "algbw": float(fields[10]),
                   "busbw": float(fields[11]), "wrong": fields[12]},
        })
    return names, rows


def expected_sizes(lo, hi, factor):
    sizes = []
    size = lo
    while size <= hi:
        sizes.append(size)
        size *= factor
    return sizes


def run_case(bin_dir, flags, want):
    cmd = [bin_dir + "/collie-run", "-n", "2", "--timeout", "60",
           bin_dir + "/collie-perf", "--progress", "0"] + flags
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=90)
    out = proc.stdout
    if proc.returncode != 0:
        fail("%s exited with %d" % (" ".join(flags), proc.returncode), out)
    names, rows = parse(out)
    time_name = "cputime" if want.get("cputime") else "time"
    if names != [time_name if c == "time" else c for c in COLUMNS]:
        fail("column header %s" % names, out)
    sizes = expected_sizes(want["lo"], want["hi"], want["factor"]) * want.get("cycles", 1)
    if [r["size"] for r in rows] != sizes:
        fail("sizes %s, asked for %s" % ([r["size"] for r in rows], sizes), out)
    for r in rows:
        if r["type"] != want["type"] or r["redop"] != want["redop"] or r["root"] != -1:
            fail("row of %s %s root %d" % (r["type"], r["redop"], r["root"]), out)
        if r["count"] != r["size"] // want["elem"]:
            fail("count %d for %d bytes" % (r["count"], r["size"]), out)
        for place in ("oop", "ip"):
            if r[place]["wrong"] != "0":
                fail("#wrong %s at %d B %s" % (r[place]["wrong"], r["size"], place), out)
            if not r[place]["time"] > 0:
                fail("time %s at %d B" % (r[place]["time"], r["size"]), out)
            # Two ranks: busbw = algbw * 2(n-1)/n = algbw.
            if r[place]["busbw"] != r[place]["algbw"]:
                fail("busbw differs from algbw on 2 ranks", out)
    if "# Out of bounds values : 0 OK" not in out:
        fail("no '0 OK' footer", out)
    for text in want["header"]:
        if not re.search(text, out, re.M):
            fail("header lacks /%s/" % text, out)
    return out


def main():
    bin_dir = sys.argv[1]
    # Every flag in its short form, nccl-tests' defaults where they have no effect here.
    run_case(bin_dir, ["-t", "1", "-g", "1", "-b", "1K", "-e", "64K", "-i", "1M", "-f", "4",
                       "-n", "5", "-m", "2", "-w", "5", "-N", "1", "-p", "0", "-c", "1",
                       "-o", "sum", "-d", "float", "-r", "0", "-z", "0", "-y", "0", "-T", "60",
                       "-G", "0", "-C", "0", "-S", "0", "-a", "1", "-R", "0", "-x", "0",
                       "-D", "0", "-V", "16", "-M", "0", "-u", "0", "-I", "0", "-K", "0"],
             {"lo": 1024, "hi": 65536, "factor": 4, "type": "float", "redop": "sum",
              "elem": 4,
              "header": [r"^# nThread 1 nGpus 1 minBytes 1024 maxBytes 65536 step: 4\(factor\) "
                         r"warmup iters: 5 iters: 5 agg iters: 2 validation: 1 graph: 0",
                         r"^# -T 60: every operation's deadline \(COLLIE_TIMEOUT_MS=60000\)"]})
    # Long forms, with values that change the run or that a CPU run ignores (and says so).
    out = run_case(bin_dir, ["--nthreads", "2", "--ngpus", "4", "--minbytes", "8",
                             "--maxbytes", "8K", "--stepbytes", "8", "--stepfactor", "32",
                             "--iters", "3", "--agg_iters", "3", "--warmup_iters", "2",
                             "--run_cycles", "2", "--parallel_init", "1", "--check", "2",
                             "--op", "max", "--datatype", "int32", "--root", "1",
                             "--blocking", "1", "--stream_null", "1", "--timeout", "30",
                             "--cudagraph", "10", "--report_cputime", "1",
                             "--report_timestamps", "1", "--average", "3",
                             "--local_register", "1", "--cta_policy", "1",
                             "--device_implementation", "1", "--device_cta_count", "8",
                             "--memory", "1", "--unalign", "1", "--per_iter_timing", "1",
                             "--per_iter_skip", "1"],
                   {"lo": 8, "hi": 8192, "factor": 32, "type": "int32", "redop": "max",
                    "elem": 4, "cycles": 2, "cputime": True,
                    "header": [r"warmup iters: 2 iters: 3 agg iters: 3 validation: 2",
                               r"^# Blocking Enabled: barrier after each iteration",
                               r"^# Run cycles: 2"] +
                              [r"^# -%s [0-9]+: .*; ignored$" % f for f in "tgpyGSRxDVMuIK"] +
                              [r"^# -G 10: CUDA graphs have no meaning on this CPU run; ignored$"]})
    # A bad value of a nccl-tests flag is an error, not a silent default.
    for flags in (["-a", "4"], ["-R", "3"], ["-m", "0"], ["-T", "-1"], ["-V", "0"]):
        proc = subprocess.run([bin_dir + "/collie-perf"] + flags, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, universal_newlines=True, timeout=30)
        if proc.returncode != 2:
            fail("%s: exit %d, expected 2" % (" ".join(flags), proc.returncode), proc.stdout)
    print("PASS: collie-perf takes every all_reduce_perf flag; its table parses as nccl-tests'")


if __name__ == "__main__":
    main()
