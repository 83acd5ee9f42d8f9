#!/usr/bin/env python3
"""Llama-style training loop for ebb's GPU tests and benchmarks.

A model from HF transformers built from a config (random weights), bf16
autocast, fused AdamW, optional gradient accumulation and the two anchors
(HF gradient checkpointing, torch save_on_cpu). Prints one line per step
and, at the end, one JSON object with the losses (float.hex, so equality is
bit for bit), the step times, the median steady-state step time and the peak
device memory of the whole GPU sampled from NVML: over the run, in each step
(step_peaks_gib), and what the device held once CUDA had started (start_gib:
the context and whatever else was on the device, before the model).

Workloads (device-facts.md): W1 = 1.26B (hidden 2048, 22 layers), W2 = 3.8B
(hidden 8192, 4 layers); tiny = a few layers for correctness checks.
"""
import argparse
import json
import os
import statistics
import sys
import threading
import time

MODELS = {
    # name: (hidden, layers, heads, kv_heads, intermediate, vocab)
    "tiny": (512, 4, 8, 8, 1408, 32000),
    "w1": (2048, 22, 32, 32, 5632, 32000),
    "w2": (8192, 4, 64, 64, 22016, 32000),
}


class NvmlPeak:
    """Peak memory used on the whole device, sampled from NVML in a thread."""

    def __init__(self, uuid, interval_s=0.002):
        import pynvml
        self.nvml = pynvml
        pynvml.nvmlInit()
        self.handle = pynvml.nvmlDeviceGetHandleByUUID("GPU-" + uuid)
        self.interval = interval_s
        self.peak = 0
        self.window = 0         # the peak since the last window() call
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def used(self):
        return self.nvml.nvmlDeviceGetMemoryInfo(self.handle).used

    def run(self):
        while not self.stop.is_set():
            u = self.used()
            if u > self.peak:
                self.peak = u
            if u > self.window:
                self.window = u
            time.sleep(self.interval)

    def window_gib(self):
        """The peak since the last call (or the start), and start a new window."""
        w = max(self.window, self.used())
        self.window = 0
        return w / 2**30

    def finish(self):
        self.stop.set()
        self.thread.join()
        self.peak = max(self.peak, self.used())
        return self.peak / 2**30


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model", choices=sorted(MODELS), default="tiny")
    ap.add_argument("--batch", type=int, default=4, help="micro-batch size")
    ap.add_argument("--seq", type=int, default=4096)
    ap.add_argument("--accum", type=int, default=1, help="micro-batches per optimizer step")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3, help="steps left out of the median")
    ap.add_argument("--ckpt", action="store_true", help="HF gradient checkpointing")
    ap.add_argument("--save-on-cpu", action="store_true",
                    help="torch.autograd.graph.save_on_cpu(pin_memory=True)")
    ap.add_argument("--deterministic", action="store_true",
                    help="deterministic algorithms (torch.use_deterministic_algorithms)")
    ap.add_argument("--attn", choices=["auto", "sdpa", "eager"], default="auto",
                    help="attention implementation (auto: eager when --deterministic, else sdpa)")
    ap.add_argument("--label", default="", help="copied into the JSON result")
    ap.add_argument("--json", help="append the result object to this file")
    a = ap.parse_args()

    if a.deterministic:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    dev = torch.device("cuda")
    peak = NvmlPeak(str(torch.cuda.get_device_properties(dev).uuid))
    torch.zeros((), device=dev)     # the context, before the job's memory
    torch.cuda.synchronize()
    start_gib = peak.used() / 2**30
    peak.window_gib()
    torch.manual_seed(1234)
    torch.cuda.manual_seed_all(1234)
    if a.deterministic:
        torch.use_deterministic_algorithms(True)
        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = False
    h, layers, heads, kv, inter, vocab = MODELS[a.model]
    cfg = LlamaConfig(hidden_size=h, num_hidden_layers=layers, num_attention_heads=heads,
                      num_key_value_heads=kv, intermediate_size=inter, vocab_size=vocab,
                      max_position_embeddings=max(a.seq, 4096), tie_word_embeddings=False,
                      use_cache=False)
    attn = a.attn if a.attn != "auto" else ("eager" if a.deterministic else "sdpa")
    cfg._attn_implementation = attn
    model = LlamaForCausalLM(cfg).to(dev)
    if a.ckpt:
        model.gradient_checkpointing_enable(
            gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    nparams = sum(p.numel() for p in model.parameters())
    gen = torch.Generator().manual_seed(42)
    batches = [torch.randint(0, vocab, (a.batch, a.seq), generator=gen)
               for _ in range(min(a.accum, 4))]

    losses, times, step_peaks = [], [], []
    for step in range(a.steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        total = torch.zeros((), device=dev)
        for m in range(a.accum):
            ids = batches[m % len(batches)].to(dev, non_blocking=True)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                if a.save_on_cpu:
                    with torch.autograd.graph.save_on_cpu(pin_memory=True):
                        loss = model(input_ids=ids, labels=ids).loss / a.accum
                else:
                    loss = model(input_ids=ids, labels=ids).loss / a.accum
            loss.backward()
            total += loss.detach()
        opt.step()
        opt.zero_grad(set_to_none=True)
        value = total.item()
        torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        losses.append(float(value).hex())
        times.append(dt)
        step_peaks.append(round(peak.window_gib(), 3))
        print(f"step {step} loss {value:.6f} ({float(value).hex()}) time {dt:.4f}s", flush=True)

    steady = times[a.warmup:] if len(times) > a.warmup else times
    res = {
        "model": a.model, "params": nparams, "batch": a.batch, "seq": a.seq, "accum": a.accum,
        "ckpt": a.ckpt, "save_on_cpu": a.save_on_cpu, "deterministic": a.deterministic,
        "attn": attn,
        "label": a.label, "steps": a.steps, "warmup": a.warmup,
        "step_s": statistics.median(steady), "step_times": times, "losses": losses,
        "peak_gib": peak.finish(),
        "step_peaks_gib": step_peaks,
        "start_gib": round(start_gib, 3),
        "torch_max_reserved_gib": torch.cuda.max_memory_reserved() / 2**30,
        "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
        "ebb": "libebb" in os.environ.get("LD_PRELOAD", ""),
    }
    line = json.dumps(res)
    print("RESULT " + line, flush=True)
    if a.json:
        with open(a.json, "a") as f:
            f.write(line + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
