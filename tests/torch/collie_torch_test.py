#!/usr/bin/env python3
"""Multi-process tests of the collie torch.distributed backend (collie_torch).

Launches --ranks real processes (env:// rendezvous on a free port) that run one case:
  ops  every c10d op against a reference each rank computes alone, several dtypes, odd and
       zero sizes, point-to-point with tags and from any source, a sub-group, get_future,
       the unsupported cases, and ranks that disagree on a size (an error on every rank)
  ddp  the demo's MLP trained with DistributedDataParallel over gloo, over collie, over collie
       with a get_future comm hook, and in one process on the whole batch: same parameters
  reinit three inits and destroys of the default group in one process (file://)
  kill the last rank exits between all-reduces: the others raise an error naming it in time
Exits 77 (skipped) when torch or collie_torch cannot be imported.
"""
import argparse
import datetime
import functools
import os
import socket
import subprocess
import sys
import tempfile
import time
import warnings

SKIP = 77


def launch(args):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    store_dir = tempfile.TemporaryDirectory()
    for rank in range(args.ranks):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(args.ranks),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                   STORE_FILE=os.path.join(store_dir.name, "store"))
        procs.append(subprocess.Popen([sys.executable, __file__, "--worker", "--case",
                                       args.case], env=env))
    codes = []
    for p in procs:
        try:
            codes.append(p.wait(timeout=args.timeout))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            sys.exit(f"case {args.case} on {args.ranks} ranks: timed out after {args.timeout} s")
    if any(codes):
        sys.exit(f"case {args.case} on {args.ranks} ranks: exit codes {codes}")
    print(f"case {args.case} on {args.ranks} ranks: passed")


# ---- the ops case ----

def data(rank, dtype, n, seed):
    """Rank's input: small integers (exact in every dtype, products stay small)."""
    g = torch.Generator().manual_seed(seed * 131 + rank)
    x = torch.randint(1, 4, (n,), generator=g)
    return (x % 2 == 0) if dtype == torch.bool else x.to(dtype)


def reduce_ref(xs, op, dtype):
    R = dist.ReduceOp
    bitwise = {R.BAND: lambda a, b: a & b, R.BOR: lambda a, b: a | b, R.BXOR: lambda a, b: a ^ b}
    if op in bitwise and (op == R.BXOR or dtype != torch.bool):
        return functools.reduce(bitwise[op], xs)
    s = torch.stack([x.to(torch.float64) for x in xs])
    if op in (R.SUM, R.BOR) and dtype == torch.bool:
        return s.amax(0).to(dtype)
    if op in (R.PRODUCT, R.BAND) and dtype == torch.bool:
        return s.amin(0).to(dtype)
    f = {R.SUM: lambda: s.sum(0), R.PRODUCT: lambda: s.prod(0), R.MIN: lambda: s.amin(0),
         R.MAX: lambda: s.amax(0), R.AVG: lambda: s.sum(0) / len(xs)}[op]
    return f().to(dtype)


def same(got, want, what):
    tol = 1e-2 if want.dtype in (torch.float16, torch.bfloat16) else 1e-6
    if want.is_floating_point():
        ok = got.shape == want.shape and torch.allclose(got.double(), want.double(), rtol=tol)
    else:
        ok = got.shape == want.shape and torch.equal(got, want)
    if not ok:
        raise AssertionError(f"rank {RANK}: {what}: got {got}, want {want}")


def ops_for(dtype):
    R = dist.ReduceOp
    if dtype == torch.bool:
        return [R.SUM, R.PRODUCT, R.MIN, R.MAX, R.BAND, R.BOR, R.BXOR]
    ops = [R.SUM, R.PRODUCT, R.MIN, R.MAX]
    return ops + [R.AVG] if dtype.is_floating_point else ops + [R.BAND, R.BOR, R.BXOR]


def rooted_ops_for(dtype):
    """The ops reduce and reduce_scatter are checked with: SUM, and a bitwise or PREMUL_SUM."""
    R = dist.ReduceOp
    if dtype.is_floating_point:
        return [R.SUM, "premul"]
    return [R.SUM, R.BXOR, R.BAND] if dtype != torch.bool else [R.SUM, R.BXOR]


PREMUL = 2.5  # exact in every floating dtype, as are the products and sums of the inputs


def op_and_ref(op, xs, dtype):
    """The op to pass, and the reference over xs; "premul" is PREMUL_SUM by a float factor."""
    if not isinstance(op, str):
        return op, reduce_ref(xs, op, dtype)
    f = PREMUL
    return (dist._make_nccl_premul_sum(f),
            reduce_ref([(x.double() * f) for x in xs], dist.ReduceOp.SUM, torch.float64).to(dtype))


def check_reductions(dtype, n, seed, group=None, ranks=None):
    ranks = ranks or list(range(N))
    me = ranks.index(RANK)
    for op in ops_for(dtype):
        xs = [data(r, dtype, n, seed) for r in ranks]
        t = xs[me].clone()
        dist.all_reduce(t, op=op, group=group)
        same(t, reduce_ref(xs, op, dtype), f"all_reduce {op} {dtype} n={n}")
    for op in rooted_ops_for(dtype):
        xs = [data(r, dtype, n, seed) for r in ranks]
        t = xs[me].clone()
        arg, want = op_and_ref(op, xs, dtype)
        dist.reduce(t, dst=ranks[0], op=arg, group=group)
        if me == 0:
            same(t, want, f"reduce {op} {dtype} n={n}")
        blocks = [[data(r, dtype, n, seed + 1 + j) for j in ranks] for r in ranks]
        arg, want = op_and_ref(op, [b[me] for b in blocks], dtype)
        out = torch.empty(n, dtype=dtype)
        dist.reduce_scatter(out, [b.clone() for b in blocks[me]], op=arg, group=group)
        same(out, want, f"reduce_scatter {op} {dtype} n={n}")
        out = torch.empty(n, dtype=dtype)
        dist._reduce_scatter_base(out, torch.cat(blocks[me]), op=arg, group=group)
        same(out, want, f"_reduce_scatter_base {op} {dtype} n={n}")
    if dtype.is_floating_point:
        xs = [data(r, dtype, n, seed) for r in ranks]
        t = xs[me].clone()
        arg, want = op_and_ref("premul", xs, dtype)
        dist.all_reduce(t, op=arg, group=group)
        same(t, want, f"all_reduce PREMUL_SUM {dtype} n={n}")
        t = xs[me].clone()
        dist.all_reduce(t, op=dist._make_nccl_premul_sum([torch.tensor([PREMUL])]),
                        group=group)
        same(t, want, f"all_reduce PREMUL_SUM by a tensor factor {dtype} n={n}")


def check_movement(dtype, n, seed):
    xs = [data(r, dtype, n, seed) for r in range(N)]
    t = xs[RANK].clone()
    dist.broadcast(t, src=N - 1)
    same(t, xs[N - 1], f"broadcast {dtype} n={n}")
    outs = [torch.empty(n, dtype=dtype) for _ in range(N)]
    dist.all_gather(outs, xs[RANK])
    same(torch.cat(outs), torch.cat(xs), "all_gather")
    out = torch.empty(n * N, dtype=dtype)
    dist._all_gather_base(out, xs[RANK])
    same(out, torch.cat(xs), "_all_gather_base")
    root = 1 % N
    outs = [torch.empty(n, dtype=dtype) for _ in range(N)] if RANK == root else None
    dist.gather(xs[RANK], gather_list=outs, dst=root)
    if RANK == root:
        same(torch.cat(outs), torch.cat(xs), "gather")
    out = torch.empty(n, dtype=dtype)
    dist.scatter(out, scatter_list=[x.clone() for x in xs] if RANK == 0 else None, src=0)
    same(out, xs[RANK], "scatter")


def check_alltoall(dtype, seed):
    # Rank r sends rows(r, j) rows of width 2 to rank j, zero included.
    def rows(r, j):
        return (r + 2 * j) % 3

    def block(r, j):
        return data(r * N + j, dtype, 2 * rows(r, j), seed).view(-1, 2)

    inp = torch.cat([block(RANK, j) for j in range(N)])
    out = torch.empty(sum(rows(j, RANK) for j in range(N)), 2, dtype=dtype)
    dist.all_to_all_single(out, inp, [rows(j, RANK) for j in range(N)],
                           [rows(RANK, j) for j in range(N)])
    same(out, torch.cat([block(j, RANK) for j in range(N)]), "all_to_all_single splits")
    inp = torch.cat([data(RANK * N + j, dtype, 3, seed) for j in range(N)])
    out = torch.empty(3 * N, dtype=dtype)
    dist.all_to_all_single(out, inp)
    same(out, torch.cat([data(j * N + RANK, dtype, 3, seed) for j in range(N)]),
         "all_to_all_single")
    outs = [torch.empty(2 * rows(j, RANK), dtype=dtype).view(-1, 2) for j in range(N)]
    dist.all_to_all(outs, [block(RANK, j) for j in range(N)])
    same(torch.cat(outs), torch.cat([block(j, RANK) for j in range(N)]), "all_to_all")


def check_p2p():
    nxt, prv = (RANK + 1) % N, (RANK + N - 1) % N
    # Every rank sends before it receives: a send must not wait for its receive to be posted.
    for tag, n in ((0, 7), (5, 7), (3, 1 << 20)):
        sent = torch.full((n,), float(RANK * 10 + tag))
        got = torch.empty(n)
        for recv_first in (False, True):
            got.zero_()
            reqs = [dist.isend(sent, nxt, tag=tag), dist.irecv(got, prv, tag=tag)]
            if recv_first:
                reqs = [dist.irecv(got, prv, tag=tag), dist.isend(sent, nxt, tag=tag)]
            for r in reqs:
                r.wait()
            same(got, torch.full((n,), float(prv * 10 + tag)), f"isend/irecv tag {tag} n={n}")
    # A receive in flight holds up no collective: its send comes after one.
    got = torch.empty(5)
    req = dist.irecv(got, prv, tag=7)
    t = torch.ones(3)
    dist.all_reduce(t)
    same(t, torch.full((3,), float(N)), "all_reduce while a receive is in flight")
    dist.send(torch.full((5,), float(RANK)), nxt, tag=7)
    req.wait()
    same(got, torch.full((5,), float(prv)), "the receive in flight")
    if RANK == 0:
        seen = set()
        for _ in range(N - 1):
            got = torch.empty(3, dtype=torch.int64)
            src = dist.recv(got, tag=9)
            same(got, torch.full((3,), src, dtype=torch.int64), "recv from any source")
            seen.add(src)
        assert seen == set(range(1, N)), f"recv from any source saw {seen}"
    else:
        dist.send(torch.full((3,), RANK, dtype=torch.int64), 0, tag=9)
    dist.barrier()


def check_coalesced():
    xs = [[data(r, torch.float32, n, 40 + n) for n in (3, 0, 129)] for r in range(N)]
    ts = [x.clone() for x in xs[RANK]]
    dist.all_reduce_coalesced(ts)
    for i, t in enumerate(ts):
        same(t, reduce_ref([x[i] for x in xs], dist.ReduceOp.SUM, torch.float32),
             f"all_reduce_coalesced tensor {i}")


def check_allgather_coalesced():
    sizes = (3, 0, 130)
    xs = [[data(r, torch.int32, n, 60 + n) for n in sizes] for r in range(N)]
    outs = [[torch.empty(n, dtype=torch.int32) for n in sizes] for _ in range(N)]
    dist.all_gather_coalesced(outs, xs[RANK])
    for r in range(N):
        for i in range(len(sizes)):
            same(outs[r][i], xs[r][i], f"all_gather_coalesced rank {r} tensor {i}")


def check_monitored_barrier():
    collie_torch.monitored_barrier()
    collie_torch.monitored_barrier(timeout=datetime.timedelta(seconds=30), wait_all_ranks=True)
    # The last rank stays away: rank 0 names it (and only it), the others are not released.
    group = dist.new_group(backend="collie")
    if RANK == N - 1:
        return
    start = time.monotonic()
    msg = expect_error(lambda: collie_torch.monitored_barrier(
        group, timeout=datetime.timedelta(seconds=1), wait_all_ranks=True), "monitored_barrier")
    took = time.monotonic() - start
    assert took < 10, f"rank {RANK}: monitored_barrier took {took:.1f} s to fail"
    if RANK == 0:
        want = f"rank {N - 1} failed to pass monitored_barrier"
    else:
        want = "not released by rank 0"
    assert want in msg, f"rank {RANK}: monitored_barrier said: {msg}"


def check_future():
    t = data(RANK, torch.float32, 33, 7)
    work = dist.all_reduce(t, async_op=True)
    got = work.get_future().wait()[0]
    want = reduce_ref([data(r, torch.float32, 33, 7) for r in range(N)], dist.ReduceOp.SUM,
                      torch.float32)
    same(got, want, "get_future")
    # Work.exception() has no Python conversion in torch 1.13 (for any backend).
    assert work.is_completed()
    # Overlapping async works, waited on in reverse order.
    ts = [data(RANK, torch.float64, 5 + i, 70 + i) for i in range(3)]
    works = [dist.all_reduce(t, async_op=True) for t in ts]
    for i in reversed(range(3)):
        works[i].wait()
        want = reduce_ref([data(r, torch.float64, 5 + i, 70 + i) for r in range(N)],
                          dist.ReduceOp.SUM, torch.float64)
        same(ts[i], want, f"async all_reduce {i}")


def expect_error(fn, what):
    try:
        fn()
    except RuntimeError as e:
        return str(e)
    raise AssertionError(f"rank {RANK}: {what} raised no RuntimeError")


def check_refusals():
    expect_error(lambda: dist.all_reduce(torch.ones(4, dtype=torch.int16)), "int16")
    expect_error(lambda: dist.all_reduce(torch.ones(8)[::2]), "non-contiguous")
    expect_error(lambda: dist.all_reduce(torch.ones(4), op=dist.ReduceOp.BXOR), "BXOR of floats")
    expect_error(lambda: dist.all_reduce(torch.ones(4, dtype=torch.int32),
                                         op=dist._make_nccl_premul_sum(2.0)), "integer PREMUL_SUM")
    sparse = torch.sparse_coo_tensor([[0]], [1.0], (4,))
    expect_error(lambda: dist.all_reduce(sparse), "sparse")
    # Complex sums go through torch's real view: the right answer, not an error.
    c = torch.full((3,), complex(RANK, 1))
    dist.all_reduce(c)
    same(torch.view_as_real(c), torch.view_as_real(torch.full((3,), complex(N * (N - 1) / 2, N))),
         "complex sum")


def run_ops():
    dtypes = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32,
              torch.int64, torch.int8, torch.uint8, torch.bool]
    for seed, dtype in enumerate(dtypes):
        for n in (0, 1, 7, 1025):
            check_reductions(dtype, n, seed * 10 + n)
            check_movement(dtype, n, seed * 10 + n)
        check_alltoall(dtype, seed)
    check_coalesced()
    check_allgather_coalesced()
    check_p2p()
    check_future()
    check_refusals()
    # Every rank creates every group (torch asks that); the members meet through its store.
    for members in ([0, N - 1], list(range(1, N))):
        sub = dist.new_group(members, backend="collie")
        if RANK in members:
            check_reductions(torch.float32, 9, 3, group=sub, ranks=members)
    check_monitored_barrier()
    bad = dist.new_group(backend="collie", timeout=datetime.timedelta(seconds=10))
    msg = expect_error(lambda: dist.all_reduce(torch.ones(4 + RANK), group=bad), "size mismatch")
    assert "disagree" in msg, f"rank {RANK}: size mismatch said: {msg}"


# ---- the reinit case ----

def run_reinit():
    """Three inits and destroys of the default group in one process, each through its own
    file:// path (torch's FileStore deletes its file once as many stores as ranks have closed
    it, so one path cannot serve two inits that overlap by a rank)."""
    for i in range(3):
        dist.init_process_group("collie", init_method=f"file://{os.environ['STORE_FILE']}.{i}",
                                rank=RANK, world_size=N)
        t = torch.full((3,), float(RANK + i))
        dist.all_reduce(t)
        same(t, torch.full((3,), float(N * (N - 1) / 2 + N * i)), f"all_reduce of init {i}")
        dist.barrier()
        dist.destroy_process_group()


# ---- the kill case ----

def run_kill():
    """The last rank dies between all-reduces; the others raise an error naming it, in time."""
    t = torch.ones(1 << 18)
    for step in range(20):
        if RANK == N - 1 and step == 5:
            os._exit(0)
        start = time.monotonic()
        try:
            dist.all_reduce(t)
        except RuntimeError as e:
            took = time.monotonic() - start
            assert step == 5, f"rank {RANK}: failed at step {step}: {e}"
            assert f"rank {N - 1}" in str(e), f"rank {RANK}: the error names no dead rank: {e}"
            assert took < 20, f"rank {RANK}: the error took {took:.1f} s"
            os._exit(0)
    raise AssertionError(f"rank {RANK}: no error after rank {N - 1} died")


# ---- the ddp case ----

def mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(),
                               torch.nn.Linear(256, 128), torch.nn.ReLU(),
                               torch.nn.Linear(128, 10))


def train(model, rank, world, steps=8, batch=128):
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.5)
    g = torch.Generator().manual_seed(1)
    for _ in range(steps):
        x = torch.randn(batch, 784, generator=g)
        y = torch.randint(0, 10, (batch,), generator=g)
        part = batch // world
        xs, ys = x[rank * part:(rank + 1) * part], y[rank * part:(rank + 1) * part]
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(xs), ys).backward()
        opt.step()
    return [p.detach().clone() for p in model.parameters()]


def close(a, b, rtol, what):
    for p, q in zip(a, b):
        rel = ((p - q).norm() / q.norm()).item()
        if rel > rtol:
            raise AssertionError(f"rank {RANK}: {what}: relative difference {rel:.3g} > {rtol}")


def run_ddp():
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.nn.parallel import DistributedDataParallel as DDP
    collie = dist.new_group(backend="collie")
    gloo = train(DDP(mlp(), process_group=dist.group.WORLD), RANK, N)
    ours = train(DDP(mlp(), process_group=collie), RANK, N)
    hooked = DDP(mlp(), process_group=collie)
    hooked.register_comm_hook(collie, default_hooks.allreduce_hook)
    hooked = train(hooked, RANK, N)
    single = train(mlp(), 0, 1)
    close(ours, gloo, 1e-6, "collie vs gloo")
    close(hooked, gloo, 1e-6, "collie with a comm hook vs gloo")
    close(ours, single, 1e-5, "collie vs one process")


def worker(case):
    global RANK, N
    RANK, N = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    warnings.filterwarnings("ignore", message=".*private function")
    if case == "reinit":
        return run_reinit()
    backend = "gloo" if case == "ddp" else "collie"
    timeout = 20 if case == "kill" else 60
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout))
    {"ops": run_ops, "ddp": run_ddp, "kill": run_kill}[case]()
    dist.barrier()
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--case", choices=["ops", "ddp", "kill", "reinit"], default="ops")
    p.add_argument("--timeout", type=float, default=150)
    p.add_argument("--worker", action="store_true")
    args = p.parse_args()
    global torch, dist, collie_torch
    try:
        import torch
        import torch.distributed as dist
        import collie_torch  # registers the backend
    except ImportError as e:
        print(f"skipped: {e}")
        sys.exit(SKIP)
    worker(args.case) if args.worker else launch(args)


if __name__ == "__main__":
    main()
