"""The report of perf/compare: one table per collective and size, Collie ÷ the best peer, the
targets, CSV, JSON and the plots."""

import csv
import json
import os
import shutil
import subprocess


def human(size):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if size >= (1 << shift) and size % (1 << shift) == 0:
            return "%d %s" % (size >> shift, unit)
    return "%d B" % size


def _best_peer(rows, cls=None, family=None):
    best = None
    for r in rows:
        if r["family"] == "collie" or "busbw" not in r:
            continue
        if cls and r["cls"] != cls or family and r["family"] != family:
            continue
        if best is None or r["busbw"] > best["busbw"]:
            best = r
    return best


def _ratio(a, b):
    return a / b if a is not None and b else None


def _fmt(v, digits=2):
    return "—" if v is None else ("%.*f" % (digits, v))


def _cores(r):
    """The cores' placement around a row: latency before/after in µs, and 'far' if it was."""
    b, a = r.get("core_us_before"), r.get("core_us_after")
    if b is None and a is None:
        return "—"
    return "%s/%s%s" % (_fmt(b), _fmt(a), " far" if r.get("far") else "")


def size_table(size, rows, ranks, bounds, title=None):
    """Markdown lines for one size: every system's time and busbw; Collie rows get ratios.
    title: the collective's, in the heading, where the report has several."""
    lines = ["### %s%s (%d ranks)" % (title + " " if title else "", human(size), ranks), "",
             "| system | class | µs | busbw GB/s | ÷ best peer, same class | ÷ best peer | of bound "
             "| cores µs |",
             "|:--|:--|--:|--:|--:|--:|--:|--:|"]
    best_any = _best_peer(rows)
    for r in rows:
        if "error" in r:
            lines.append("| %s | %s | failed: %s | | | | | |" % (r["system"], r["cls"], r["error"]))
            continue
        name = r["system"] + (" (%s)" % r["algo"] if r.get("algo") else "")
        same = cross = frac = ""
        if r["family"] == "collie":
            same_best = _best_peer(rows, cls=r["cls"])
            same = _fmt(_ratio(r["busbw"], same_best and same_best["busbw"]))
            cross = _fmt(_ratio(r["busbw"], best_any and best_any["busbw"]))
            if ranks == 2 and bounds.get(r["cls"]):
                frac = "%.0f%%" % (100 * r["busbw"] / bounds[r["cls"]])
        wrong = "" if not r["wrong"] else " WRONG %d" % r["wrong"]
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s |%s" % (
            name, r["cls"], _fmt(r["time_us"]), _fmt(r["busbw"], 3), same, cross, frac, _cores(r),
            wrong))
    lines.append("")
    return lines


def _get(rows, size, system):
    for r in rows:
        if r["bytes"] == size and r["system"] == system and "busbw" in r:
            return r
    return None


def _best_of(rows, size, prefix):
    cands = [r for r in rows if r["bytes"] == size and r["system"].startswith(prefix) and "busbw" in r]
    return max(cands, key=lambda r: r["busbw"]) if cands else None


def targets(rows, ranks, bounds):
    """Each speed target: what it compares, the ratio measured, the goal, pass or miss."""
    M = 1 << 20
    out = []

    def add(what, size, ratio, goal, rows_used, higher=True):
        # far: a row it compares ran with the cores apart (see placement.py).
        far = any(r.get("far") for r in rows_used if r)
        if ratio is None:
            out.append({"target": what, "bytes": size, "ratio": None, "goal": goal, "met": None,
                        "far": far})
            return
        met = ratio >= goal if higher else ratio <= goal
        out.append({"target": what, "bytes": size, "ratio": ratio, "goal": goal, "met": met,
                    "far": far})

    def bw(r):
        return r["busbw"] if r else None

    def us(r):
        return r["time_us"] if r else None

    if ranks == 2:
        for size in (64 * M, 256 * M):
            c = _get(rows, size, "collie-shm")
            p = _get(rows, size, "mpi-collsm")
            add("shm busbw ÷ OpenMPI collsm", size, _ratio(bw(c), bw(p)), 1.3, [c, p])
            p = _best_of(rows, size, "gloo-")
            add("shm busbw ÷ best Gloo", size, _ratio(bw(c), bw(p)), 4.0, [c, p])
            add("shm busbw ÷ measured shm bound", size, _ratio(bw(c), bounds.get("shm")), 0.8, [c])
            add("shm busbw ÷ 12.3 GB/s model", size, _ratio(bw(c), 12.3), 0.8, [c])
        c, p = _get(rows, M, "collie-shm"), _get(rows, M, "mpi-collsm")
        add("shm busbw ÷ OpenMPI collsm", M, _ratio(bw(c), bw(p)), 1.3, [c, p])
        c, p = _get(rows, 64 * M, "collie-tcp"), _get(rows, 64 * M, "mpi-tcp")
        add("tcp busbw ÷ OpenMPI tcp", 64 * M, _ratio(bw(c), bw(p)), 1.3, [c, p])
        p = _best_of(rows, 64 * M, "gloo-")
        add("tcp busbw ÷ best Gloo", 64 * M, _ratio(bw(c), bw(p)), 1.1, [c, p])
        add("tcp busbw ÷ measured tcp bound", 64 * M, _ratio(bw(c), bounds.get("tcp")), 0.9, [c])
        c, p = _get(rows, 8, "collie-shm"), _get(rows, 8, "mpi-vader")
        add("shm 8 B time ÷ OpenMPI vader", 8, _ratio(us(c), us(p)), 1.5, [c, p], False)
        c, p = _get(rows, 8, "collie-tcp"), _get(rows, 8, "mpi-tcp")
        add("tcp 8 B time ÷ OpenMPI tcp", 8, _ratio(us(c), us(p)), 1.0, [c, p], False)
        best_gloo_8 = [r for r in rows if r["bytes"] == 8 and r["family"] == "gloo" and "busbw" in r]
        fastest = min(best_gloo_8, key=lambda r: r["time_us"]) if best_gloo_8 else None
        add("tcp 8 B time ÷ fastest Gloo", 8, _ratio(us(c), us(fastest)), 0.1, [c, fastest], False)
        _ucx_targets(rows, add, bw, us)
    else:
        c = _best_of(rows, 64 * M, "collie-")
        p = _best_peer([r for r in rows if r["bytes"] == 64 * M])
        add("best Collie busbw ÷ best peer (%d ranks)" % ranks, 64 * M, _ratio(bw(c), bw(p)), 1.0,
            [c, p])
    return out


def _ucx_targets(rows, add, bw, us):
    """Collie over UCX against Collie's own transport for the same kind of link, and against
    OpenMPI's pml ucx over the same UCX lane."""
    M = 1 << 20
    if not any(r["system"].startswith("collie-ucx") for r in rows):
        return
    for ucx, own in (("collie-ucx-tcp", "collie-tcp"), ("collie-ucx-posix", "collie-shm")):
        for size in (M, 64 * M, 256 * M):
            c, o = _get(rows, size, ucx), _get(rows, size, own)
            add("%s busbw ÷ %s" % (ucx, own), size, _ratio(bw(c), bw(o)), 0.9, [c, o])
        c, o = _get(rows, 8, ucx), _get(rows, 8, own)
        add("%s 8 B time ÷ %s" % (ucx, own), 8, _ratio(us(c), us(o)), 1.2, [c, o], False)
    c, p = _get(rows, 64 * M, "collie-ucx-tcp"), _get(rows, 64 * M, "mpi-ucx-tcp")
    add("collie-ucx-tcp busbw ÷ OpenMPI pml ucx tcp", 64 * M, _ratio(bw(c), bw(p)), 1.2, [c, p])


def target_lines(tgts):
    lines = ["## Targets", "", "| target | size | measured | goal | met |", "|:--|--:|--:|--:|:--|"]
    for t in tgts:
        sign = "≥" if "time" not in t["target"] else "≤"
        met = "—" if t["met"] is None else ("yes" if t["met"] else "**no**")
        if t.get("far"):
            met += " (cores apart)"
        lines.append("| %s | %s | %s | %s %.2f | %s |" % (t["target"], human(t["bytes"]),
                                                         _fmt(t["ratio"]), sign, t["goal"], met))
    lines.append("")
    return lines


def header_lines(info, limits, versions, ranks, placed, colls):
    """The title, the machine, the limits and, for one collective, its bounds."""
    if len(colls) == 1:
        what = colls[0].heading()
        busbw = "busbw = bytes·%s ÷ time" % colls[0].factor_text()
    else:
        what = "float32 collectives (reductions sum)"
        busbw = "busbw = bytes·factor ÷ time with nccl-tests' factors (%s)" % "; ".join(
            "%s %s" % (c.title, c.factor_text()) for c in colls)
    lines = ["# Collie vs OpenMPI and Gloo: %s, %d ranks" % (what, ranks), "",
             "Machine: %s, %s cores, kernel %s, %s memory." % (info["cpu"], info["cores"],
                                                              info["kernel"], info["memory"]),
             "Versions: " + "; ".join(v for _, v in sorted(versions.items())) + ".",
             "Packages: " + ", ".join("%s %s" % (k, v) for k, v in info["packages"].items() if v) + ".",
             busbw.replace("·1 ", " ") + " (GB/s = 1e9 B/s); time = median over batches of the "
             "slowest rank; Collie out of place.", "", "## Physical limits", "",
             "| probe | threads | buffer | GB/s |", "|:--|--:|--:|--:|"]
    for l in limits.get("limits", []):
        lines.append("| %s | %d | %s | %.2f |" % (l["name"], l["threads"],
                                                 human(l["bytes"]) if l["bytes"] else "—", l["GBps"]))
    for name, us in sorted(limits.get("latencies", {}).items()):
        lines.append("| %s (latency, µs) | 2 | — | %.3f |" % (name, us))
    if placed and limits.get("core_us"):
        looks = limits["core_us"]
        far = any(us is not None and placed.get("lowest_us") and
                  us > placed["near_factor"] * placed["lowest_us"] for us in looks)
        lines += ["", "Core-to-core latency before/during/after these probes: %s µs%s." % (
            "/".join(_fmt(us, 3) for us in looks),
            " (the cores were apart: the shm bound is the far placement's)" if far else "")]
    lines.append("")
    if len(colls) == 1:
        lines += bound_lines(colls[0], limits)
    if placed and placed.get("lowest_us") is not None:
        lines += ["Cores' placement: the lowest core-to-core latency seen was %.3f µs. Every command "
                  "waited up to %g s for the cores to be within %gx of it, and ran again when they "
                  "were not, before or after (%.0f s of waiting in all, at most %g). The `cores µs` "
                  "column is "
                  "the latency before/after the row's command; `far` marks rows that still ran "
                  "with the cores apart, and targets that compare such rows say so."
                  % (placed["lowest_us"], placed["settle_s"], placed["near_factor"],
                     placed["waited_s"], placed["budget_s"]), ""]
    return lines


def bound_lines(coll, limits):
    """The collective's 2-rank bounds and how they follow from the limits."""
    b = coll.bounds(limits)
    shm, tcp = coll.bound_notes()
    return ["2-rank %s bounds: shm %s GB/s (%s), tcp %s GB/s (%s)."
            % (coll.title, _fmt(b.get("shm")), shm, _fmt(b.get("tcp")), tcp), ""]


def summary_lines(rows, colls, ranks):
    """Per collective and size: the best Collie system against the best peer, by busbw."""
    lines = ["## Collie ÷ best peer (%d ranks)" % ranks, "",
             "| collective | size | best Collie | busbw GB/s | best peer | busbw GB/s | ratio |",
             "|:--|--:|:--|--:|:--|--:|--:|"]
    for coll in colls:
        mine = [r for r in rows if r.get("collective") == coll.name]
        for size in sorted(set(r["bytes"] for r in mine)):
            here = [r for r in mine if r["bytes"] == size and "busbw" in r]
            collie = [r for r in here if r["family"] == "collie"]
            c = max(collie, key=lambda r: r["busbw"]) if collie else None
            p = _best_peer(here)
            lines.append("| %s | %s | %s | %s | %s | %s | %s |" % (
                coll.title, human(size), c["system"] if c else "—", _fmt(c and c["busbw"], 3),
                p["system"] if p else "—", _fmt(p and p["busbw"], 3),
                _fmt(_ratio(c and c["busbw"], p and p["busbw"]))))
    lines.append("")
    return lines


def write_csv(path, rows):
    keys = ["system", "family", "cls", "ranks", "bytes", "iters", "time_us", "time_us_min", "busbw",
            "wrong", "algo", "core_us_before", "core_us_after", "far", "attempts", "error",
            "collective"]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow(r)


def write_json(path, doc):
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)


def plot(path, rows, ranks, coll):
    """busbw vs size (log x), one line per system, with gnuplot; returns an error text or None."""
    gnuplot = shutil.which("gnuplot")
    if not gnuplot:
        return "gnuplot not installed (apt-get install gnuplot-nox)"
    systems = []
    for r in rows:
        if r["system"] not in systems:
            systems.append(r["system"])
    data = path + ".dat"
    with open(data, "w") as f:
        for s in systems:
            f.write('"%s"\n' % s)
            for r in rows:
                if r["system"] == s and "busbw" in r:
                    f.write("%d %.6f\n" % (r["bytes"], r["busbw"]))
            f.write("\n\n")
    script = "\n".join([
        "set terminal png size 1200,750 noenhanced",
        "set output '%s'" % path,
        "set title '%s, %d ranks: bus bandwidth'" % (coll.heading(), ranks),
        "set logscale x 2", "set format x '%.0b%B'", "set xlabel 'bytes per rank'",
        "set ylabel 'busbw (GB/s)'", "set key left top", "set grid",
        "plot for [i=0:%d] '%s' index i using 1:2 with linespoints title columnheader(1)"
        % (len(systems) - 1, data), ""])
    p = subprocess.run([gnuplot], input=script, text=True, stderr=subprocess.PIPE, timeout=60)
    return None if p.returncode == 0 else p.stderr.strip()
