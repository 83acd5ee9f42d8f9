#!/usr/bin/env python3
"""bench/demo_torch.py: the PyTorch example of `./dev.sh demo` on a GPU.

An MLP of a few wide layers trained with Adam on one fixed batch, seeded and
with deterministic algorithms, so that two runs on one GPU give the same
losses bit for bit. Prints one line a step, "step N loss HEX" (float.hex),
and at the end one line "demo peak_bytes=P reserved_bytes=R seconds=S":
P is the highest device memory in use during the steps (total less free from
torch.cuda.mem_get_info, sampled every millisecond by a thread) less what
was in use once CUDA had started, R is torch.cuda.max_memory_reserved()
(what PyTorch's allocator held), S the time of the steps.
"""
import os
import threading
import time

# cuBLAS is deterministic with a fixed workspace; set before CUDA starts.
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import torch  # noqa: E402

STEPS = 12      # ebb learns on the first few, then runs its plan
LAYERS = 8
WIDTH = 4096    # 64 MiB of weights a layer, and as much for its Adam state twice
BATCH = 2048


def used_bytes():
    """Device memory in use now, by every process."""
    free, total = torch.cuda.mem_get_info()
    return total - free


class PeakSampler(threading.Thread):
    """The highest used_bytes() seen between start() and stop()."""

    def __init__(self):
        super().__init__(daemon=True)
        self.peak = 0
        self.done = threading.Event()

    def run(self):
        while not self.done.is_set():
            self.peak = max(self.peak, used_bytes())
            time.sleep(0.001)

    def stop(self):
        self.done.set()
        self.join()
        return max(self.peak, used_bytes())


def main():
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    device = torch.device("cuda")
    torch.cuda.init()
    start = used_bytes()

    layers = []
    for _ in range(LAYERS):
        layers += [torch.nn.Linear(WIDTH, WIDTH), torch.nn.GELU()]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(WIDTH, 1)).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    x = torch.randn(BATCH, WIDTH, device=device)
    y = torch.randn(BATCH, 1, device=device)

    sampler = PeakSampler()
    sampler.start()
    t0 = time.perf_counter()
    for step in range(STEPS):
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        print(f"step {step} loss {loss.item().hex()}", flush=True)
    torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    peak = sampler.stop() - start
    print(f"demo peak_bytes={peak} reserved_bytes={torch.cuda.max_memory_reserved()} "
          f"seconds={seconds:.3f}", flush=True)


if __name__ == "__main__":
    main()
