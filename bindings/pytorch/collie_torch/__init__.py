"""Collie as a torch.distributed backend: importing this module registers "collie".

    import collie_torch  # before init_process_group: torch loads no backend by itself
    torch.distributed.init_process_group("collie", ...)
"""
import datetime

import torch.distributed as dist

from ._C import ProcessGroupCollie


def _create(store, rank, size, timeout):
    """c10d's creator: meets the group's other ranks through the (prefix) store it is given."""
    if not isinstance(timeout, datetime.timedelta):
        timeout = datetime.timedelta(seconds=timeout)
    return ProcessGroupCollie(store, rank, size, timeout)


def monitored_barrier(group=None, timeout=None, wait_all_ranks=False):
    """torch.distributed.monitored_barrier for collie groups (torch 1.13 lets only gloo's through).

    Every rank reports to the group's rank 0, which releases them all, or raises a RuntimeError
    naming the first rank (with wait_all_ranks, every rank) that did not arrive within timeout
    (default: the group's timeout); the other ranks then raise when rank 0 does not release them.
    """
    pg = group if group is not None else dist.distributed_c10d._get_default_group()
    if timeout is None:
        return pg.monitored_barrier(wait_all_ranks=wait_all_ranks)
    return pg.monitored_barrier(timeout, wait_all_ranks=wait_all_ranks)


if not hasattr(dist.Backend, "COLLIE"):
    dist.Backend.register_backend("collie", _create)

__all__ = ["ProcessGroupCollie", "monitored_barrier"]
