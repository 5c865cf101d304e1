#!/usr/bin/env python3
"""Strangers under load: while 4 ranks run checked AllReduces of 1 MiB over tcp (collie-perf
-N 0 -c 1), one process opens connections to the job's ports (its store's, and every rank's
tcp transport listener) at --rate a second, --total in all, cycling through four kinds:

  garbage   random bytes
  secret    a well-formed hello (transport's or store's) with a wrong secret
  replay    one fixed hello of another job, sent again and again
  half      the first half of a hello, the connection then held open --hold seconds

It fails if a result is wrong, if the job stops, or if the ranks' logs lack the WARN of the
dropped connections or hold more of them than the rate limit lets through. It prints the job's
bus bandwidth (median of the cycles) before, while the same traffic goes to a port of the
stranger's own (the control: on a machine whose cores the ranks fill, the stranger's own work
slows them), and while it goes to the job's ports; the last over the control is what the
strangers cost the job itself.

  tests/chaos/strangers.py --bin build/bin [--total 10000] [--rate 500]
"""
import argparse
import os
import random
import re
import signal
import socket
import statistics
import struct
import subprocess
import sys
import time

KINDS = ["garbage", "secret", "replay", "half"]
ROW = re.compile(r"^\s*1048576\s+262144\s+float\s+sum\s+-?\d+\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)"
                 r"\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\d+)")


def transport_hello(secret, comm_id):
    # magic "CLHI", version 1, secret, communicator id, from, to, sockIdx, nsocks, nranks, pad
    return struct.pack("<II16sQiiiiiI", 0x434C4849, 1, secret, comm_id, 0, 1, 0, 3, 4, 0)


def store_hello(secret, comm_id):
    return struct.pack("<II16sQ", 0x434C5348, 1, secret, comm_id)  # "CLSH"


def payload(kind, rng, replayed):
    if kind == "garbage":
        return bytes(rng.getrandbits(8) for _ in range(rng.randrange(1, 200)))
    if kind == "replay":
        return replayed[rng.randrange(2)]
    hello = rng.choice([transport_hello, store_hello])(rng.randbytes(16), rng.getrandbits(64))
    return hello if kind == "secret" else hello[:len(hello) // 2]


def attack(ports, total, rate, hold, seed=1, drain=None):
    """Opens total connections at rate a second, spread over ports and kinds; returns counts.
    drain: a listening socket of this process whose connections it accepts and closes itself
    (the control run: the same traffic, aimed at a port that is not the job's)."""
    rng = random.Random(seed)
    replayed = [transport_hello(b"another job's!!!", 77), store_hello(b"another job's!!!", 77)]
    counts = {(k, o): 0 for k in KINDS for o in ("sent", "refused", "failed")}
    held = []  # (close time, socket)
    start = time.monotonic()
    for i in range(total):
        while time.monotonic() < start + i / rate:
            time.sleep(0.0005)
        kind, port = KINDS[i % len(KINDS)], ports[i % len(ports)]
        s = socket.socket()
        s.settimeout(0.5)
        try:
            s.connect(("127.0.0.1", port))
            s.sendall(payload(kind, rng, replayed))
            counts[(kind, "sent")] += 1
        except ConnectionRefusedError:
            counts[(kind, "refused")] += 1
        except OSError:
            counts[(kind, "failed")] += 1
        if kind == "half":
            held.append((time.monotonic() + hold, s))
        else:
            s.close()
        while held and held[0][0] <= time.monotonic():
            held.pop(0)[1].close()
        while drain is not None:
            try:
                drain.accept()[0].close()
            except BlockingIOError:
                break
    for _, s in held:
        s.close()
    return counts, time.monotonic() - start


def listening_ports(pids):
    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True).stdout
    ports = set()
    for line in out.splitlines():
        for pid in pids:
            if f"pid={pid}," in line:
                ports.add(int(line.split()[3].rsplit(":", 1)[1]))
    return sorted(ports)


def rows(path):
    with open(path) as f:
        return [m for m in (ROW.match(line.split("] ", 1)[-1]) for line in f) if m]


def wait_rows(path, n, proc, limit):
    while len(rows(path)) < n:
        if proc.poll() is not None or time.monotonic() > limit:
            sys.exit(f"FAIL: the job stopped or stalled before {n} cycles: see {path}")
        time.sleep(0.05)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", required=True)
    p.add_argument("--total", type=int, default=10000)
    p.add_argument("--rate", type=float, default=500)
    p.add_argument("--hold", type=float, default=1.0)
    p.add_argument("--baseline", type=int, default=8, help="cycles timed before the strangers")
    args = p.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        store_port = s.getsockname()[1]
    log = f"/tmp/collie-strangers-{os.getpid()}.log"
    env = dict(os.environ, COLLIE_TRANSPORT="tcp", COLLIE_DEBUG="WARN")
    job = subprocess.Popen(
        [os.path.join(args.bin, "collie-run"), "-n", "4", "--master-port", str(store_port),
         "--tag-output", os.path.join(args.bin, "collie-perf"), "-b", "1M", "-e", "1M",
         "-n", "50", "-w", "5", "-N", "0", "-c", "1"],
        env=env, stdout=open(log, "w"), stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_rows(log, 2 + args.baseline, job, time.monotonic() + 120)
        before = len(rows(log))
        pids = subprocess.run(["pgrep", "-s", str(job.pid), "collie-perf"], capture_output=True,
                              text=True).stdout.split()
        ports = sorted(set(listening_ports(pids)) | {store_port})
        # The control: the same traffic at a port of this process, so that what the strangers'
        # own work costs the ranks (2 cores are shared) is told apart from what the job pays.
        with socket.socket() as ctl:
            ctl.bind(("127.0.0.1", 0))
            ctl.listen(4096)
            ctl.setblocking(False)
            attack([ctl.getsockname()[1]], args.total, args.rate, args.hold, drain=ctl)
        control = len(rows(log))
        counts, took = attack(ports, args.total, args.rate, args.hold)
        during = len(rows(log))
        wait_rows(log, during + 1, job, time.monotonic() + 60)
    finally:
        os.killpg(job.pid, signal.SIGTERM)
        job.wait()
    judge(log, rows(log), (before, control, during), counts, took, ports)


def judge(log, all_rows, marks, counts, took, ports):
    before, control, during = marks
    wrong = [r.group(0) for r in all_rows if r.group(4) != "0" or r.group(8) != "0"]
    base = [float(r.group(3)) for r in all_rows[2:before]]
    ctl = [float(r.group(3)) for r in all_rows[before + 1:control]]
    under = [float(r.group(3)) for r in all_rows[control + 1:during]]
    with open(log) as f:
        text = f.read()
    warns = text.count("dropped a connection")
    held = sum(int(n) for n in re.findall(r"\((\d+) more like it held back\)", text))
    print(f"ports {ports}; {sum(v for (k, o), v in counts.items() if o == 'sent')} connections "
          f"in {took:.1f} s")
    for k in KINDS:
        print(f"  {k:8} sent {counts[(k, 'sent')]:5} refused {counts[(k, 'refused')]:5} "
              f"failed {counts[(k, 'failed')]:5}")
    print(f"WARN lines about dropped connections: {warns} printed, {held} held back")
    if base and under and ctl:
        b, c, u = (statistics.median(x) for x in (base, ctl, under))
        print(f"busbw of 1 MiB AllReduce, 4 ranks (median of {len(base)}, {len(ctl)}, "
              f"{len(under)} cycles): {b:.3f} GB/s before; {c:.3f} ({c / b:.2f}x) while the same "
              f"traffic hits a port of the stranger's own; {u:.3f} ({u / b:.2f}x) while it hits "
              f"the job's ports: the job's own share {u / c:.2f}x")
    problems = []
    if wrong:
        problems.append(f"wrong results: {wrong[:3]}")
    if warns == 0:
        problems.append("no WARN about a dropped connection")
    # Each of the job's call sites prints at most a burst per 10 s window.
    limit = 4 * 6 * 5 * (int(took / 10) + 2)
    if warns > limit:
        problems.append(f"{warns} WARN lines: more than the rate limit's {limit}")
    if problems:
        sys.exit("FAIL: " + "; ".join(problems) + f" (log {log})")
    os.unlink(log)
    print("PASS")


if __name__ == "__main__":
    main()
