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


if not hasattr(dist.Backend, "COLLIE"):
    dist.Backend.register_backend("collie", _create)

__all__ = ["ProcessGroupCollie"]
