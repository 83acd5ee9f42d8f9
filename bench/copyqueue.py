#!/usr/bin/env python3
"""bench/copyqueue.py: how long a job's small device-to-host copy waits
behind large offload copies on another stream, with the large copies issued
whole or in chunks (the question behind ebb's copy chunking).

usage: bench/copyqueue.py [--gib G] [--chunks-mib M,...]

For each way of issuing G GiB of device-to-host copies to pinned memory on a
non-blocking side stream, measures the latency of a 4-byte copy to pageable
memory on the default stream (what loss.item() does) issued just after them,
and the side stream's total copy time. Prints one JSON object a line.
"""
import argparse
import json
import time

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gib", type=float, default=4.0)
    ap.add_argument("--chunks-mib", default="0,256,64,16")
    a = ap.parse_args()
    n = int(a.gib * 2**30)
    dev = torch.empty(n, dtype=torch.uint8, device="cuda")
    host = torch.empty(n, dtype=torch.uint8, pin_memory=True)
    small = torch.ones(1, device="cuda")
    side = torch.cuda.Stream()
    for chunk_mib in [int(x) for x in a.chunks_mib.split(",")] * 2:
        torch.cuda.synchronize()
        chunk = chunk_mib * 2**20 if chunk_mib else n
        t0 = time.perf_counter()
        with torch.cuda.stream(side):
            for off in range(0, n, chunk):
                host[off:off + chunk].copy_(dev[off:off + chunk], non_blocking=True)
        t1 = time.perf_counter()
        small.item()     # a pageable D2H copy and a sync on the default stream
        t2 = time.perf_counter()
        side.synchronize()
        t3 = time.perf_counter()
        print(json.dumps({"gib": a.gib, "chunk_mib": chunk_mib, "issue_s": round(t1 - t0, 6),
                          "small_copy_s": round(t2 - t1, 6), "side_done_s": round(t3 - t0, 6),
                          "gbps": round(n / (t3 - t0) / 1e9, 2)}))


if __name__ == "__main__":
    main()
