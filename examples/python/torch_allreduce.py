import collie_torch  # registers the "collie" backend: import it before init_process_group
import torch
import torch.distributed as dist

dist.init_process_group("collie")  # env://: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT
rank, n = dist.get_rank(), dist.get_world_size()
t = torch.full((4,), float(rank))
dist.all_reduce(t)  # the sum over the ranks, in place
assert t.tolist() == [n * (n - 1) / 2] * 4, t
print(f"rank {rank}: {t.tolist()}")
dist.destroy_process_group()
