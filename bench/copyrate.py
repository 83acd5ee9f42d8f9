#!/usr/bin/env python3
"""bench/copyrate.py: the copy rates ebb's planner should assume, measured
the way ebb's moves copy: pinned host memory, one stream per direction,
copies of a given size back to back, each direction alone and both at once,
with the device idle, busy with a GEMM loop, or busy with a loop of adds
that stream through device memory (as the optimizer step does).

usage: bench/copyrate.py [--gib G] [--sizes-mib M,...] [--repeat N]

Each case copies G GiB a direction in copies of M MiB and times each
direction's stream from its first copy's start to its last copy's end (CUDA
events). ebb measures its rates at start with 32 MiB copies (mover_rate.c); the
plans of W2 move buffers of 256 MiB to 1000 MiB. Prints one JSON object a
line: size_mib, case (d2h, h2d, both, both+gemm, both+adds), d2h_gbps,
h2d_gbps.
"""
import argparse
import json

import torch


def timed(stream, fn):
    a = torch.cuda.Event(enable_timing=True)
    b = torch.cuda.Event(enable_timing=True)
    with torch.cuda.stream(stream):
        a.record(stream)
        fn()
        b.record(stream)
    return a, b


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gib", type=float, default=4.0)
    ap.add_argument("--sizes-mib", default="32,256,688")
    ap.add_argument("--repeat", type=int, default=2)
    a = ap.parse_args()
    total = int(a.gib * 2**30)
    dev_src = torch.empty(total, dtype=torch.uint8, device="cuda")
    dev_dst = torch.empty(total, dtype=torch.uint8, device="cuda")
    host_src = torch.empty(total, dtype=torch.uint8, pin_memory=True)
    host_dst = torch.empty(total, dtype=torch.uint8, pin_memory=True)
    d2h, h2d = torch.cuda.Stream(), torch.cuda.Stream()
    x = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    y = torch.zeros(total // 4, device="cuda")
    z = torch.ones(total // 4, device="cuda")

    def copies(dst, src, size):
        def go():
            for off in range(0, total - size + 1, size):
                dst[off:off + size].copy_(src[off:off + size], non_blocking=True)
        return go

    for size_mib in [int(s) for s in a.sizes_mib.split(",")]:
        size = size_mib << 20
        moved = (total // size) * size
        for _ in range(a.repeat):
            for case in ("d2h", "h2d", "both", "both+gemm", "both+adds"):
                torch.cuda.synchronize()
                # enough work on the default stream to outlast the copies
                if case == "both+gemm":
                    for _ in range(200):
                        torch.mm(x, x)
                elif case == "both+adds":
                    for _ in range(150):
                        y.add_(z)
                ev = {}
                if case != "h2d":
                    ev["d2h"] = timed(d2h, copies(host_dst, dev_src, size))
                if case != "d2h":
                    ev["h2d"] = timed(h2d, copies(dev_dst, host_src, size))
                torch.cuda.synchronize()
                r = {"size_mib": size_mib, "case": case}
                for k, (s, e) in ev.items():
                    r[k + "_gbps"] = round(moved / (s.elapsed_time(e) * 1e-3) / 1e9, 2)
                print(json.dumps(r), flush=True)


if __name__ == "__main__":
    main()
