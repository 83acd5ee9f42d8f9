#!/usr/bin/env python3
"""resnet: a torchvision ResNet (random init), synthetic 224x224 images and
labels drawn on the device from a seeded generator each step, cross-entropy,
SGD with momentum, fp32 (cuDNN may use TF32, deterministically).
Default resnet50 at batch 64; `--model resnet152 --batch 128` is the
launch-bound case (thousands of small operations and allocations a step).
--anchor checkpoint recomputes every residual block in backward;
--anchor save_on_cpu keeps what autograd saves in pinned host memory.

ResNet's AdaptiveAvgPool2d has no deterministic backward on CUDA (PyTorch
raises under use_deterministic_algorithms), so it is replaced by the mean
over height and width: the same function, with a deterministic backward."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import common  # noqa: E402  (sets CUBLAS_WORKSPACE_CONFIG before torch)


def main():
    ap = common.parser(__doc__, anchors=True)
    ap.add_argument("--model", choices=["resnet18", "resnet50", "resnet101", "resnet152"],
                    default="resnet50")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--size", type=int, default=224, help="image height and width")
    ap.add_argument("--channels-last", action="store_true",
                    help="model and images in torch.channels_last")
    a = common.parse(ap)
    import torch
    import torchvision

    class GlobalMean(torch.nn.Module):
        def forward(self, x):
            return x.mean(dim=(2, 3), keepdim=True)

    common.deterministic()
    dev = common.device()
    model = getattr(torchvision.models, a.model)(weights=None, num_classes=1000)
    model.avgpool = GlobalMean()
    if a.anchor == "checkpoint":
        # every residual block recomputed in backward (its batch norms then
        # update their running statistics twice, which no loss of a training
        # step reads)
        for name in ("layer1", "layer2", "layer3", "layer4"):
            stage = getattr(model, name)
            for i in range(len(stage)):
                stage[i] = common.checkpointed(stage[i])
    model = model.to(dev)
    fmt = torch.channels_last if a.channels_last else torch.contiguous_format
    model = model.to(memory_format=fmt)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    gen = torch.Generator(device=dev).manual_seed(common.SEED + 3)

    steps = common.Steps(a.model, a)
    for _ in range(a.steps):
        steps.begin()
        x = torch.randn(a.batch, 3, a.size, a.size, device=dev, generator=gen)
        x = x.contiguous(memory_format=fmt)
        y = torch.randint(0, 1000, (a.batch,), device=dev, generator=gen)
        with common.saved_tensors(a):
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        steps.end(loss)
    steps.finish(common.versions("torch", "torchvision"), model=a.model, batch=a.batch,
                 channels_last=a.channels_last)


if __name__ == "__main__":
    main()
