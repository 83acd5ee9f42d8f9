"""Shared helpers of the zoo's jobs (tests/gpu/zoo/jobs).

Import this module before torch: it sets CUBLAS_WORKSPACE_CONFIG, which
cuBLAS reads when CUDA starts. Nothing here imports torch at module level,
so the JAX job uses the argument parser and the result line too.

A job's life: args = parse(parser(__doc__)); deterministic(); build the
model and data; steps = Steps("name", args); for each step steps.begin(),
the step, steps.end(loss); steps.finish(versions(...)). finish() prints the
one result line the runner (tests/gpu/zoo.py) reads,

    ZOO_RESULT {"job": ..., "steps": N, "warmup": W, "losses": [hex...],
                "step_times": [s...], "step_ends_ns": [ns...], "step_s": median,
                "versions": {...}, "reserved_peak": bytes}

(step_ends_ns: when each step ended, time.monotonic_ns(), the clock of ebb's
trace records, so that the runner can tell which steps ran after a note)

(reserved_peak: torch.cuda.max_memory_reserved(), for the PyTorch jobs on
CUDA only)

and then "ok" as the last line of standard output. Losses are float.hex of
the Python float of each step's loss, so two runs compare bit for bit. The
runner samples device memory from NVML itself; the jobs do not.

ZOO_DEVICE=cpu runs the PyTorch jobs that can on the CPU: a smoke test of
their Python where there is no GPU, never a zoo result.
"""
import argparse
import json
import os
import random
import statistics
import sys
import time

# cuBLAS picks its workspace when its first handle is made: set it before
# torch is imported, so that the setting holds from the start.
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

SEED = 1234
DEVICE = os.environ.get("ZOO_DEVICE", "cuda")


ANCHORS = ("none", "checkpoint", "save_on_cpu")


def parser(description, anchors=False, log_every=False):
    """An argument parser with the options every job takes; with anchors,
    also --anchor, the framework's own ways of holding less memory that ebb
    is compared with (the jobs that take it apply it); with log_every, also
    --log-every (train_lm's jobs)."""
    ap = argparse.ArgumentParser(description=description,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=8, help="training steps (default 8)")
    ap.add_argument("--warmup", type=int, default=3,
                    help="first steps left out of the median step time (default 3)")
    if log_every:
        ap.add_argument("--log-every", type=int, default=0, metavar="K",
                        help="every K steps (0: never), the gradients' norm taken and "
                             "printed before the optimizer's step (a step of its own, as a "
                             "job that logs it every K steps has)")
    if anchors:
        ap.add_argument("--anchor", choices=ANCHORS, default="none",
                        help="checkpoint: the model's activation (gradient) checkpointing, "
                             "non-reentrant; save_on_cpu: every tensor autograd saves kept "
                             "in pinned host memory (torch.autograd.graph.save_on_cpu); "
                             "default none")
    return ap


def saved_tensors(args):
    """The context a step's forward and backward run in: save_on_cpu(pin_memory=True)
    under --anchor save_on_cpu, else one that does nothing."""
    import contextlib

    import torch
    if getattr(args, "anchor", "none") == "save_on_cpu":
        return torch.autograd.graph.save_on_cpu(pin_memory=True)
    return contextlib.nullcontext()


def checkpointed(block):
    """block (a module of one tensor in, one out) recomputed in backward instead
    of keeping its activations: torch.utils.checkpoint, non-reentrant, with the
    random-number state saved and restored, so the results stay those without it."""
    import torch
    from torch.utils.checkpoint import checkpoint

    class Checkpointed(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = block

        def forward(self, x):
            return checkpoint(self.inner, x, use_reentrant=False, preserve_rng_state=True)

    return Checkpointed()


def parse(ap):
    """Parse the command line; exit with status 2 on steps or warmup out of range."""
    a = ap.parse_args()
    if a.steps < 1:
        ap.error("--steps must be at least 1")
    if not 0 <= a.warmup < a.steps:
        ap.error("--warmup must be at least 0 and less than --steps")
    return a


def deterministic(seed=SEED):
    """Seed every generator and make PyTorch choose deterministic kernels.

    use_deterministic_algorithms(True) also makes inductor skip the on-device
    benchmarking that would change numerics (torch 2.11's documentation).
    """
    import torch
    random.seed(seed)
    try:
        import numpy
        numpy.random.seed(seed)
    except ImportError:
        pass
    torch.manual_seed(seed)                 # the CPU and every CUDA device
    if DEVICE == "cuda":
        torch.cuda.manual_seed_all(seed)
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False


def device():
    """The torch device of the job."""
    import torch
    return torch.device(DEVICE)


def sync():
    """Wait for all the work queued on the device."""
    if DEVICE == "cuda":
        import torch
        torch.cuda.synchronize()


def need_cuda(job):
    """Exit with a message when a job that needs CUDA is run with ZOO_DEVICE=cpu."""
    if DEVICE != "cuda":
        sys.exit(f"{job}: needs CUDA (ZOO_DEVICE={DEVICE})")


def versions(*names):
    """The __version__ of each module named (those that are imported or importable)."""
    import importlib
    out = {"python": sys.version.split()[0]}
    for n in names:
        try:
            out[n] = getattr(importlib.import_module(n), "__version__", "unknown")
        except ImportError:
            out[n] = None
    if "torch" in names:
        import torch
        out["torch_cuda"] = torch.version.cuda
        out["cudnn"] = torch.backends.cudnn.version() if DEVICE == "cuda" else None
    return out


def loss_value(loss):
    """A loss (a tensor of one element, a JAX scalar or a number) as a Python float."""
    if hasattr(loss, "item"):
        return float(loss.item())
    return float(loss)


class Steps:
    """Per-step losses and times of one job, and its result line.

    begin() waits for the device and starts the clock; end(loss) reads the
    loss (which waits for the step's work), waits for the device again and
    stops the clock. A job whose steps are not its own (a framework's
    trainer) times them in the framework's callbacks and calls record().
    """

    def __init__(self, job, args, sync_fn=sync):
        self.job = job
        self.args = args
        self.sync = sync_fn
        self.losses = []
        self.times = []
        self.ends = []      # each step's end, time.monotonic_ns() (ebb's trace clock)
        self.t0 = None

    def begin(self):
        self.sync()
        self.t0 = time.perf_counter()

    def end(self, loss):
        if self.t0 is None:
            raise RuntimeError(f"{self.job}: Steps.end() without begin()")
        value = loss_value(loss)
        self.sync()
        dt = time.perf_counter() - self.t0
        self.t0 = None
        self.record(value, dt)

    def record(self, value, dt):
        """Record one step's loss (a Python float) and time (seconds)."""
        self.ends.append(time.monotonic_ns())
        self.losses.append(float(value).hex())
        self.times.append(dt)
        print(f"step {len(self.losses) - 1} loss {value:.6f} ({float(value).hex()}) "
              f"time {dt:.4f}s", flush=True)

    def finish(self, versions_dict, **extra):
        """Print the ZOO_RESULT line and "ok"; exit with status 1 if steps are missing."""
        n = self.args.steps
        if len(self.losses) != n:
            print(f"{self.job}: {len(self.losses)} steps recorded, {n} asked for", flush=True)
            sys.exit(1)
        steady = self.times[self.args.warmup:]
        res = {"job": self.job, "steps": n, "warmup": self.args.warmup,
               "losses": self.losses, "step_times": [round(t, 6) for t in self.times],
               "step_ends_ns": self.ends,
               "step_s": round(statistics.median(steady), 6), "versions": versions_dict,
               "device": DEVICE, "pid": os.getpid(), **extra}
        reserved = reserved_peak()
        if reserved is not None:
            res["reserved_peak"] = reserved
        print("ZOO_RESULT " + json.dumps(res), flush=True)
        print("ok", flush=True)


def train_lm(job, args, model, opt, data, dev, autocast=None):
    """The loop of the causal-LM jobs (HF models): for each step, batch data[i]
    copied to dev, the loss of predicting it (under autocast to that dtype,
    where given), backward, the optimizer's step; the step's loss recorded.
    --anchor checkpoint turns on the model's gradient checkpointing (every
    decoder layer recomputed in backward); --anchor save_on_cpu runs forward
    and backward under saved_tensors(). --log-every K: every K steps the
    gradients' norm (clip_grad_norm_ with no bound: each gradient times 1.0,
    unchanged) is read and printed. Returns the Steps, for its finish()."""
    import contextlib

    import torch
    if getattr(args, "anchor", "none") == "checkpoint":
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        if not model.is_gradient_checkpointing:
            sys.exit(f"{job}: the model did not take gradient checkpointing")
    steps = Steps(job, args)
    for i in range(args.steps):
        steps.begin()
        ids = data[i].to(dev)
        with saved_tensors(args):
            with (torch.autocast(dev.type, dtype=autocast) if autocast is not None
                  else contextlib.nullcontext()):
                loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
        if args.log_every > 0 and (i + 1) % args.log_every == 0:
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), float("inf"))
            print(f"step {i} grad norm {norm.item():.6f}", flush=True)
        opt.step()
        opt.zero_grad(set_to_none=True)
        steps.end(loss)
    return steps


def reserved_peak():
    """The most device memory PyTorch's allocator held at once in this
    process (bytes), or None where the job has no PyTorch on CUDA."""
    torch = sys.modules.get("torch")
    if torch is None or DEVICE != "cuda" or not torch.cuda.is_initialized():
        return None
    return int(torch.cuda.max_memory_reserved())


def mlp_block(d, hidden, dropout=0.0):
    """A pre-norm residual MLP block, x + fc2(gelu(fc1(ln(x)))), with dropout
    after fc2 when asked: the body of the zoo's plain-torch jobs. Imports torch."""
    import torch.nn as nn
    import torch.nn.functional as F

    class MLPBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln = nn.LayerNorm(d)
            self.fc1 = nn.Linear(d, hidden)
            self.fc2 = nn.Linear(hidden, d)
            self.drop = nn.Dropout(dropout) if dropout else nn.Identity()

        def forward(self, x):
            return x + self.drop(self.fc2(F.gelu(self.fc1(self.ln(x)))))

    return MLPBlock()
