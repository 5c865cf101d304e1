"""What perf/compare records about the machine: CPU, cores, kernel, memory, package versions,
and the physical limits collie-limits measures."""

import os
import platform
import subprocess


def _cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _mem_total():
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return "%.1f GiB" % (int(line.split()[1]) / (1 << 20))
    except OSError:
        pass
    return "unknown"


def _package_version(name):
    try:
        p = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", name], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, text=True, timeout=10)
        return p.stdout.strip() if p.returncode == 0 else ""
    except (OSError, subprocess.TimeoutExpired):
        return ""


def machine_info():
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "kernel": platform.release(),
        "memory": _mem_total(),
        "packages": {name: _package_version(name) for name in
                     ("openmpi-bin", "libgloo-dev", "libucx0", "gcc", "gnuplot-nox")},
    }


def measure_limits(bin_dir, quick):
    """Runs collie-limits: {'limits': [...], 'latencies': {name: us},
    'bounds': {'shm': GB/s, 'tcp': GB/s}}."""
    cmd = [os.path.join(bin_dir, "collie-limits")] + (["--quick"] if quick else [])
    out = {"limits": [], "latencies": {}, "bounds": {}}
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        out["error"] = str(e)
        return out
    for line in p.stdout.splitlines():
        words = line.split()
        if not words:
            continue
        fields = dict(w.split("=", 1) for w in words[1:])
        if words[0] == "limit":
            out["limits"].append({"name": fields["name"], "threads": int(fields["threads"]),
                                  "bytes": int(fields["bytes"]), "GBps": float(fields["GBps"])})
        elif words[0] == "latency":
            out["latencies"][fields["name"]] = float(fields["us"])
        elif words[0] == "bound":
            out["bounds"][fields["name"]] = float(fields["GBps"])
    return out
