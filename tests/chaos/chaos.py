#!/usr/bin/env python3
"""The chaos campaign: trials of 2-8 real ranks (collie-chaos-rank) that run a random mix of
collectives and point-to-point calls over tcp, shm, ucx or mixed hosts (two network-namespace
hosts, tests/netns/netns_hosts.sh: shm between the ranks of a host, tcp between hosts) while one
fault strikes at a random call: SIGKILL of one or two ranks, SIGSTOP of one (continued before the deadline, or after it),
a rank that destroys its communicator early, or none. Each trial is judged:

  hang          a survivor still running past fault + deadline + grace + 2 s
  early exit 0  a survivor that exited 0 without finishing every call
  unnamed       a failed survivor whose error names no victim
  not finished  a job whose stopped rank was continued before the deadline, or that had no
                fault, and did not finish every call right on every rank
  wrong         a wrong result (checked against the test harness's reference on every call)
  crash         a rank killed by a signal the driver did not send
  leaked shm    /dev/shm entries the trial left
  leftover      ranks still alive once the trial is over

Prints a table of the trials and the counts; exits 1 if any count is not 0.

  tests/chaos/chaos.py --bin build/bin [--trials 20] [--seed S] [--transports tcp,shm,ucx,hosts]

With hosts among the transports the driver runs itself again inside host 0 of two such hosts
(root, iproute2 and nftables needed; exit 77 where they are missing).
"""
import argparse
import os
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
NETNS_HOSTS = os.path.join(HERE, "..", "netns", "netns_hosts.sh")
DEADLINE_MS = 3000
GRACE_S = 2.0
PROBLEMS = ["hang", "early exit 0", "unnamed", "not finished", "wrong", "crash", "leaked shm",
            "leftover"]
FAULTS = ["none", "kill", "kill2", "stop-short", "stop-long", "destroy"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def shm_entries():
    try:
        return set(os.listdir("/dev/shm"))
    except OSError:
        return set()


def named(err):
    """The ranks an error names: "rank 3", "peer 3", "ranks 1, 4" (silent peers listed)."""
    ranks = set()
    for m in re.finditer(r"\b(?:rank|peer)s? (\d+(?:, \d+)*)", err):
        ranks.update(int(x) for x in m.group(1).split(", "))
    return ranks


class Trial:
    """One job of random calls and one fault, run and judged."""

    def __init__(self, args, rng, index):
        self.args, self.index = args, index
        self.n = rng.choice([2, 2, 3, 3, 4, 4, 5, 6, 8])
        self.transport = rng.choice(args.transports)
        faults = [f for f in args.faults if f != "kill2" or self.n >= 3] or ["kill"]
        self.fault = rng.choice(faults)
        self.victims = rng.sample(range(self.n), 2 if self.fault == "kill2" else 1)
        self.seed = rng.randrange(1 << 40)
        self.at_call = rng.randrange(args.ops // 2)
        self.delay = rng.uniform(0, 0.005)
        # Mixed hosts: rank 0 on host 0 (where the driver runs), every other rank on either,
        # both hosts used.
        self.hostof = [0] * self.n
        if self.transport == "hosts":
            self.hostof = [0] + [rng.randrange(2) for _ in range(self.n - 1)]
            if 1 not in self.hostof:
                self.hostof[rng.randrange(1, self.n)] = 1
        self.cont_after = (rng.uniform(0.05, 0.4 * DEADLINE_MS / 1000) if self.fault == "stop-short"
                           else DEADLINE_MS / 1000 + GRACE_S + 1)
        self.problems = []

    def describe(self):
        where = self.transport
        if self.transport == "hosts":
            where += " " + "".join(str(h) for h in self.hostof)
        return (f"{self.n} ranks {where:5} {self.fault:10} victims {self.victims} at "
                f"call {self.at_call} seed {self.seed}")

    def placed(self, r, cmd, env):
        """Rank r's command and environment: on its network-namespace host for mixed hosts."""
        if self.transport != "hosts":
            return cmd, dict(env, COLLIE_TRANSPORT=self.transport)
        tag = os.environ["NETNS_TAG"]
        h = self.hostof[r]
        env = dict(env, MASTER_ADDR="10.77.0.1", COLLIE_SOCKET_IFNAME="eth0",
                   LOCAL_RANK=str(self.hostof[:r].count(h)),
                   LOCAL_WORLD_SIZE=str(self.hostof.count(h)))
        env.pop("COLLIE_TRANSPORT", None)
        # ip netns exec execs the rank itself: its pid is the rank's, for the signals.
        return ["ip", "netns", "exec", f"{tag}-h{h}"] + cmd, env

    def start(self, workdir):
        port = free_port()
        self.procs, self.logs = [], []
        for r in range(self.n):
            cmd = [os.path.join(self.args.bin, "collie-chaos-rank"), "--seed", str(self.seed),
                   "--ops", str(self.args.ops), "--max-bytes", str(self.args.max_bytes)]
            if self.fault == "destroy" and r == self.victims[0]:
                cmd += ["--destroy-at", str(self.at_call)]
            env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(self.n), LOCAL_RANK=str(r),
                       LOCAL_WORLD_SIZE=str(self.n), MASTER_ADDR="127.0.0.1",
                       MASTER_PORT=str(port), COLLIE_TIMEOUT_MS=str(DEADLINE_MS))
            cmd, env = self.placed(r, cmd, env)
            out = open(os.path.join(workdir, f"{r}.out"), "w+")
            err = open(os.path.join(workdir, f"{r}.err"), "w+")
            self.logs.append((out, err))
            self.procs.append(subprocess.Popen(cmd, env=env, stdout=out, stderr=err))

    def progress(self, r):
        out = self.logs[r][0]
        out.seek(0)
        return out.read()

    def wait_for_call(self, r, limit):
        """Until rank r starts the trial's call (or stops running); False if it never does."""
        want = f"start {self.at_call} "
        while time.monotonic() < limit:
            if want in self.progress(r) or self.procs[r].poll() is not None:
                return want in self.progress(r)
            time.sleep(0.002)
        return False

    def strike(self):
        """Applies the fault; returns its time (the destroy's when the victim reports it)."""
        if self.fault in ("none", "destroy"):
            limit = time.monotonic() + 60
            v = self.victims[0]
            while self.fault == "destroy" and time.monotonic() < limit:
                if "destroy" in self.progress(v) or self.procs[v].poll() is not None:
                    break
                time.sleep(0.002)
            return time.monotonic()
        if not self.wait_for_call(self.victims[0], time.monotonic() + 60):
            return time.monotonic()
        time.sleep(self.delay)
        sig = signal.SIGKILL if self.fault.startswith("kill") else signal.SIGSTOP
        for v in self.victims:
            self.procs[v].send_signal(sig)
        return time.monotonic()

    def run(self, workdir):
        before = shm_entries()
        self.start(workdir)
        struck = self.strike()
        stopped = self.fault.startswith("stop")
        cont_at = struck + self.cont_after
        limit = struck + DEADLINE_MS / 1000 + GRACE_S + 2
        if self.fault in ("none", "stop-short"):
            limit = struck + self.args.job_limit
        survivors = [r for r in range(self.n) if r not in self.victims or self.fault == "stop-short"]
        while time.monotonic() < max(limit, cont_at if stopped else 0):
            if stopped and time.monotonic() >= cont_at:
                self.procs[self.victims[0]].send_signal(signal.SIGCONT)
                stopped = False
            if all(self.procs[r].poll() is not None for r in survivors) and not stopped:
                break
            time.sleep(0.01)
        if stopped:
            self.procs[self.victims[0]].send_signal(signal.SIGCONT)
        self.judge(survivors)
        self.finish(before)

    def judge(self, survivors):
        for r in survivors:
            code = self.procs[r].poll()
            text = self.progress(r)
            self.logs[r][1].seek(0)
            err = self.logs[r][1].read()
            if code is None:
                self.problems.append(("hang", r, text.strip().splitlines()[-1:]))
            elif code < 0:
                self.problems.append(("crash", r, f"signal {-code}: {err[-300:]}"))
            elif code == 2:
                self.problems.append(("wrong", r, err.strip()[-300:]))
            elif self.fault in ("none", "stop-short"):
                if code != 0 or f"finished {self.args.ops}" not in text:
                    self.problems.append(("not finished", r, f"exit {code}: {err.strip()[-300:]}"))
            elif code == 0:
                if f"finished {self.args.ops}" not in text:
                    self.problems.append(("early exit 0", r, text.strip().splitlines()[-1:]))
            elif not named(err) & set(self.victims):
                self.problems.append(("unnamed", r, err.strip()[-300:]))

    def finish(self, before):
        # The victims that still live (stopped, or waiting after their destroy) get their time
        # to end by themselves; then whatever is left is a leftover.
        deadline = time.monotonic() + DEADLINE_MS / 1000 + GRACE_S + 2
        while time.monotonic() < deadline and any(p.poll() is None for p in self.procs):
            if self.fault == "destroy" and all(p.poll() is not None for i, p in
                                               enumerate(self.procs) if i != self.victims[0]):
                break
            time.sleep(0.01)
        for r, p in enumerate(self.procs):
            if p.poll() is None:
                if not (self.fault == "destroy" and r == self.victims[0]):
                    self.problems.append(("leftover", r, "still running"))
                p.kill()
            p.wait()
        for out, err in self.logs:
            out.close()
            err.close()
        leaked = sorted(shm_entries() - before)
        if leaked:
            self.problems.append(("leaked shm", -1, leaked))
            for name in leaked:
                try:
                    os.unlink(os.path.join("/dev/shm", name))
                except OSError:
                    pass


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", required=True, help="directory holding collie-chaos-rank")
    p.add_argument("--trials", type=int, default=20)
    p.add_argument("--seed", type=int, default=int(time.time()))
    p.add_argument("--ops", type=int, default=200, help="calls per trial")
    p.add_argument("--max-bytes", type=int, default=1 << 20)
    p.add_argument("--transports", default="tcp,shm,ucx,hosts")
    p.add_argument("--faults", default=",".join(FAULTS), help="the faults to draw from")
    p.add_argument("--job-limit", type=float, default=60, help="seconds a job may take")
    p.add_argument("--keep", help="keep each failed trial's logs under this directory")
    args = p.parse_args()
    args.transports = args.transports.split(",")
    args.faults = args.faults.split(",")
    if "hosts" in args.transports and "NETNS_TAG" not in os.environ:
        # Again, inside host 0 of two hosts that netns_hosts.sh makes and removes.
        os.execvp("bash", ["bash", NETNS_HOSTS, "-k", "2", "-1", "-t", "86400", "--",
                           sys.executable, os.path.abspath(__file__)] + sys.argv[1:])
    rng = random.Random(args.seed)
    print(f"chaos: {args.trials} trials, seed {args.seed}, {args.ops} calls of up to "
          f"{args.max_bytes} B each, deadline {DEADLINE_MS} ms")
    counts = {k: 0 for k in PROBLEMS}
    mix = {}
    for i in range(args.trials):
        t = Trial(args, rng, i)
        with tempfile.TemporaryDirectory() as d:
            start = time.monotonic()
            t.run(d)
            took = time.monotonic() - start
            if t.problems and args.keep:
                keep = os.path.join(args.keep, f"trial-{i}")
                os.makedirs(keep, exist_ok=True)
                for name in os.listdir(d):
                    with open(os.path.join(d, name)) as f, open(os.path.join(keep, name), "w") as g:
                        g.write(f.read())
        key = (t.fault, t.transport)
        mix[key] = mix.get(key, 0) + 1
        status = "ok" if not t.problems else "; ".join(f"{k} rank {r}: {w}" for k, r, w in t.problems)
        print(f"trial {i:4}: {t.describe()}: {took:5.1f} s: {status}", flush=True)
        for k, _, _ in t.problems:
            counts[k] += 1
    print("\n| fault | " + " | ".join(args.transports) + " |")
    print("|---|" + "---|" * len(args.transports))
    for f in FAULTS:
        print(f"| {f} | " + " | ".join(str(mix.get((f, tr), 0)) for tr in args.transports) + " |")
    print("\n| problem | count |\n|---|---|")
    for k in PROBLEMS:
        print(f"| {k} | {counts[k]} |")
    sys.exit(1 if any(counts.values()) else 0)


if __name__ == "__main__":
    main()
