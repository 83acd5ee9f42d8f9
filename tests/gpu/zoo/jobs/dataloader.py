#!/usr/bin/env python3
"""dataloader: a small CNN (4 conv layers with BatchNorm and ReLU, a global
mean, a linear head; 100 classes) fed by a torch.utils.data.DataLoader with
num_workers=2 (worker processes forked after CUDA has started in the parent;
they never touch CUDA) and pin_memory=True (the parent's pinning thread
copies each batch into page-locked memory), shuffled by a seeded generator.
Each item (a 3x128x128 image and its label) depends only on its index, so the
batches are the same in every run. Batch 128, SGD with momentum, fp32."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import common  # noqa: E402  (sets CUBLAS_WORKSPACE_CONFIG before torch)


def main():
    ap = common.parser(__doc__)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--workers", type=int, default=2)
    a = common.parse(ap)
    import torch
    import torch.nn as nn
    from torch.utils.data import DataLoader, Dataset

    class Synthetic(Dataset):
        """Item i: an image and a label drawn from a generator seeded with i."""

        def __init__(self, n):
            self.n = n

        def __len__(self):
            return self.n

        def __getitem__(self, i):
            g = torch.Generator().manual_seed(common.SEED * 1000 + i)
            return torch.randn(3, 128, 128, generator=g), int(torch.randint(0, 100, (), generator=g))

    def conv(cin, cout, stride):
        return [nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False),
                nn.BatchNorm2d(cout), nn.ReLU(inplace=True)]

    class GlobalMean(nn.Module):
        def forward(self, x):
            return x.mean(dim=(2, 3))

    common.deterministic()
    dev = common.device()
    model = nn.Sequential(*conv(3, 64, 1), *conv(64, 128, 2), *conv(128, 256, 2),
                          *conv(256, 256, 1), GlobalMean(), nn.Linear(256, 100)).to(dev)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loader = DataLoader(Synthetic(a.steps * a.batch), batch_size=a.batch, shuffle=True,
                        generator=torch.Generator().manual_seed(common.SEED + 7),
                        num_workers=a.workers, pin_memory=(common.DEVICE == "cuda"),
                        multiprocessing_context="fork" if a.workers > 0 else None,
                        drop_last=True)

    steps = common.Steps("dataloader", a)
    it = iter(loader)                       # forks the workers
    for _ in range(a.steps):
        steps.begin()
        x, y = next(it)
        if common.DEVICE == "cuda" and not x.is_pinned():
            sys.exit("dataloader: the batch is not in pinned memory")
        x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        steps.end(loss)
    del it
    steps.finish(common.versions("torch"), workers=a.workers, batch=a.batch)


if __name__ == "__main__":
    main()
