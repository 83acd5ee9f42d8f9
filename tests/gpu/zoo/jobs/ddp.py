#!/usr/bin/env python3
"""ddp: DistributedDataParallel over NCCL with one rank: a residual MLP (d
2048, hidden 8192, 6 blocks, LayerNorm, GELU) under bf16 autocast, AdamW
(foreach). DDP all-reduces the gradients in buckets (25 MiB) through NCCL
each backward, even with one rank, and the loss is all-reduced for the log.

It runs with plain python3 (it sets MASTER_ADDR=127.0.0.1, a free
MASTER_PORT, RANK=0, WORLD_SIZE=1 and LOCAL_RANK=0 where they are not set)
and under torchrun. NCCL_NVLS_ENABLE=0 (no NVLink multicast) is set before
NCCL starts. destroy_process_group() at the end."""
import os
import socket
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import common  # noqa: E402  (sets CUBLAS_WORKSPACE_CONFIG before torch)


def free_port():
    """A TCP port on 127.0.0.1 that nothing listened on a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = common.parser(__doc__)
    ap.add_argument("--batch", type=int, default=4096)
    a = common.parse(ap)
    common.need_cuda("ddp")
    os.environ["NCCL_NVLS_ENABLE"] = "0"
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    if "MASTER_PORT" not in os.environ:
        os.environ["MASTER_PORT"] = str(free_port())
    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("WORLD_SIZE", "1")
    os.environ.setdefault("LOCAL_RANK", "0")
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP

    local = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    dev = torch.device("cuda", local)
    dist.init_process_group("nccl", init_method="env://", device_id=dev)
    rank, world = dist.get_rank(), dist.get_world_size()
    common.deterministic(common.SEED)       # the same weights on every rank
    d, hidden, classes = 2048, 8192, 1000
    model = nn.Sequential(nn.Linear(1024, d), *(common.mlp_block(d, hidden) for _ in range(6)),
                          nn.LayerNorm(d), nn.Linear(d, classes)).to(dev)
    ddp = DDP(model, device_ids=[local])
    opt = torch.optim.AdamW(ddp.parameters(), lr=1e-4)
    gen = torch.Generator(device=dev).manual_seed(common.SEED + 6 + rank)

    steps = common.Steps("ddp", a)
    for _ in range(a.steps):
        steps.begin()
        x = torch.randn(a.batch, 1024, device=dev, generator=gen)
        y = torch.randint(0, classes, (a.batch,), device=dev, generator=gen)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(ddp(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        # the mean loss over the ranks, as training scripts log it (one more
        # NCCL all-reduce; with one rank the value is the rank's, bit for bit)
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        steps.end(mean / world)
    v = torch.cuda.nccl.version()
    nccl = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
    dist.destroy_process_group()
    if rank == 0:
        steps.finish(common.versions("torch"), world_size=world, nccl=nccl,
                     params=sum(p.numel() for p in model.parameters()))


if __name__ == "__main__":
    main()
