"""The systems perf/compare measures, and how to start and read each one.

Every system is one command per collective and size: Collie through collie-run and collie-perf
(one per transport, and the library's own choice), OpenMPI's collective (MPI_Allreduce,
MPI_Reduce_scatter_block, ...) through mpirun and our peer driver (several component settings),
Gloo's algorithms for it through collie-run and our Gloo driver. Each reports the median and
min time per call, over the same plan of iterations.
"""

import json
import os
import re
import shutil
import subprocess
import tempfile


class System:
    def __init__(self, name, family, cls, describe):
        self.name = name  # shown in every table
        self.family = family  # collie | mpi | gloo
        self.cls = cls  # shm | tcp: which physical bound and which peers it is judged against
        self.describe = describe

    def is_collie(self):
        return self.family == "collie"


class Plan:
    """Iterations per size: about 30 ms of work per batch, at least 2 and at most 200."""

    def __init__(self, batches=3, budget_s=0.03):
        self.batches = batches
        self.budget_s = budget_s

    def iters(self, size):
        estimate = 20e-6 + size / 2e9
        return max(2, min(200, int(self.budget_s / estimate)))

    def warmup(self, size):
        return 1 if size >= (16 << 20) else 5


def _oversubscribed(ranks):
    return ranks > (os.cpu_count() or 1)


def collie_systems(bin_dir, have_ucx):
    out = [
        System("collie-shm", "collie", "shm", "Collie, COLLIE_TRANSPORT=shm"),
        System("collie-tcp", "collie", "tcp", "Collie, COLLIE_TRANSPORT=tcp"),
        System("collie-auto", "collie", "shm", "Collie, transports and algorithm as the library picks"),
    ]
    if have_ucx:
        out.insert(2, System("collie-ucx-posix", "collie", "shm", "Collie over UCX, UCX_TLS=posix"))
        out.insert(3, System("collie-ucx-tcp", "collie", "tcp", "Collie over UCX, UCX_TLS=tcp"))
    return out


MPI_CONFIGS = {
    "mpi-vader": ("shm", [], "OpenMPI default (pml ob1, btl vader, coll tuned)"),
    "mpi-collsm": ("shm", ["--mca", "coll_sm_priority", "100"],
                   "OpenMPI with its shared-memory collectives (coll_sm_priority 100)"),
    "mpi-tcp": ("tcp", ["--mca", "pml", "ob1", "--mca", "btl", "tcp,self",
                        "--mca", "btl_tcp_if_include", "lo"], "OpenMPI TCP only (ob1, btl tcp)"),
    "mpi-ucx-sm": ("shm", ["--mca", "pml", "ucx", "--mca", "pml_ucx_tls", "any",
                           "--mca", "pml_ucx_devices", "any", "-x", "UCX_TLS=sm,self"],
                   "OpenMPI over UCX shared memory"),
    # pml ucx over the lanes the collie-ucx rows use, so that both sit on the same UCX.
    "mpi-ucx-tcp": ("tcp", ["--mca", "pml", "ucx", "--mca", "pml_ucx_tls", "any",
                            "--mca", "pml_ucx_devices", "any",
                            "-x", "UCX_TLS=tcp", "-x", "UCX_NET_DEVICES=lo"],
                    "OpenMPI pml ucx, UCX_TLS=tcp"),
    "mpi-ucx-posix": ("shm", ["--mca", "pml", "ucx", "--mca", "pml_ucx_tls", "any",
                              "--mca", "pml_ucx_devices", "any", "-x", "UCX_TLS=posix"],
                      "OpenMPI pml ucx, UCX_TLS=posix"),
}
# OpenMPI's launcher by name: `mpirun` may be another MPI's (MPICH's mpiexec.hydra).
MPIRUN = "/usr/bin/mpirun.openmpi" if os.path.exists("/usr/bin/mpirun.openmpi") else "mpirun"

def peer_systems(bin_dir, ranks, coll):
    out = []
    if os.path.exists(os.path.join(bin_dir, "collie-peer-mpi")) and shutil.which(MPIRUN):
        for name, (cls, _, text) in MPI_CONFIGS.items():
            if name == "mpi-ucx-sm" and ranks == 2:
                continue  # the strongest peer only at 4 ranks; at 2 collsm is
            out.append(System(name, "mpi", cls, text))
    if os.path.exists(os.path.join(bin_dir, "collie-peer-gloo")):
        for algo in coll.gloo:
            text = "Gloo's %s over TCP" % coll.title if algo == "default" else \
                "Gloo %s over TCP" % algo
            out.append(System("gloo-" + algo, "gloo", "tcp", text))
    return out


def _collie_command(system, coll, bin_dir, ranks, size, plan, json_path):
    env = dict(os.environ)
    flags = []
    transport = {"collie-shm": "shm", "collie-tcp": "tcp", "collie-ucx-posix": "ucx",
                 "collie-ucx-tcp": "ucx"}.get(system.name)
    if transport:
        flags += ["--transport", transport]
    if system.name == "collie-ucx-posix":
        env["UCX_TLS"] = "posix"
    if system.name == "collie-ucx-tcp":
        env["UCX_TLS"] = "tcp"
        env["UCX_NET_DEVICES"] = "lo"
    if system.name == "collie-auto":
        flags += ["--algo", "auto"]
    cmd = [os.path.join(bin_dir, "collie-run"), "-n", str(ranks), os.path.join(bin_dir, "collie-perf"),
           coll.name, "-b", str(size), "-e", str(size), "-n", str(plan.iters(size)),
           "-w", str(plan.warmup(size)),
           "--repeat", str(plan.batches), "-a", "3", "-c", "1", "--progress", "0",
           "--json", json_path] + flags
    return cmd, env


def _mpi_command(system, coll, bin_dir, ranks, size, plan):
    cmd = [MPIRUN, "-n", str(ranks)]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    if _oversubscribed(ranks):
        cmd.append("--oversubscribe")
    cmd += MPI_CONFIGS[system.name][1]
    cmd += [os.path.join(bin_dir, "collie-peer-mpi"), "--coll", coll.name, "-b", str(size),
            "-e", str(size),
            "-n", str(plan.iters(size)), "-w", str(plan.warmup(size)), "-R", str(plan.batches),
            "--label", system.name]
    return cmd


def _gloo_command(system, coll, bin_dir, ranks, size, plan, store):
    return [os.path.join(bin_dir, "collie-run"), "-n", str(ranks),
            os.path.join(bin_dir, "collie-peer-gloo"), "--coll", coll.name,
            "--algo", system.name[len("gloo-"):],
            "--store", store, "-b", str(size), "-e", str(size), "-n", str(plan.iters(size)),
            "-w", str(plan.warmup(size)), "-R", str(plan.batches), "--label", system.name]


def _parse_peer(text):
    fields = None
    version = None
    for line in text.splitlines():
        if line.startswith("version "):
            version = line[len("version "):].strip()
        if line.startswith("result "):
            fields = dict(w.split("=", 1) for w in line.split()[1:])
    if fields is None:
        return None, version
    return {"time_us": float(fields["time_us"]), "time_us_min": float(fields["time_us_min"]),
            "wrong": int(float(fields["wrong"])), "algo": ""}, version


def _parse_collie(json_path, text):
    with open(json_path) as f:
        data = json.load(f)
    first = data["results"][0]  # out-of-place, the placement every peer measures
    version = None
    m = re.search(r"# collie-perf version (\S+)", text)
    if m:
        version = "collie " + m.group(1)
    algos = sorted(set(a for a in first.get("algos", []) if a))
    return {"time_us": first["time_us"], "time_us_min": first["time_us_min"],
            "wrong": first["wrong"] or 0, "algo": ",".join(algos)}, version


def run_one(system, coll, bin_dir, ranks, size, plan, timeout_s=180):
    """One measurement of coll: a dict with time_us, time_us_min, wrong, algo, or an 'error'
    text."""
    tmp = tempfile.mkdtemp(prefix="collie-compare-")
    try:
        env = dict(os.environ)
        json_path = os.path.join(tmp, "out.json")
        if system.is_collie():
            cmd, env = _collie_command(system, coll, bin_dir, ranks, size, plan, json_path)
        elif system.family == "mpi":
            cmd = _mpi_command(system, coll, bin_dir, ranks, size, plan)
        else:
            cmd = _gloo_command(system, coll, bin_dir, ranks, size, plan, tmp)
        try:
            p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return {"error": "timed out after %d s" % timeout_s}, None
        if p.returncode != 0:
            tail = (p.stderr or p.stdout).strip().splitlines()[-3:]
            return {"error": "exit %d: %s" % (p.returncode, " | ".join(tail))}, None
        if system.is_collie():
            return _parse_collie(json_path, p.stdout)
        result, version = _parse_peer(p.stdout)
        if result is None:
            return {"error": "no result line"}, version
        return result, version
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
