#!/usr/bin/env python3
"""tests/gpu/zoo.py: the zoo's training jobs without ebb and under ebb, checked.

usage: zoo.py [--ebb BUILD/utils/ebb] [--out DIR] [--jobs a,b,...]
              [--modes baseline,observe,limit:0.8,limit:0.6] [--dry-run]
              [--timeout S] [--repeat K] [--extra-env K=V ...]
              [--record bench/results/FILE.jsonl] [--cpus LIST]

Each job (tests/gpu/zoo/jobs, see README.md there) runs first as the
baseline: without ebb, PyTorch's default caching allocator, no EBB_ variable
and no PYTORCH_CUDA_ALLOC_CONF in its environment. Then each mode:

  baseline         (the reference; always run first, whether listed or not)
  plain            without ebb again (a second reference: the job's determinism)
  plain-async      without ebb, PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync
                   (the allocator ebb run chooses, without ebb)
  observe          ebb run --mode observe
  observe-nocupti  the same with EBB_CUPTI=0
  limit:F          ebb run --limit <F x the baseline's peak, in MiB, like 1234M>
  checkpoint       without ebb, the job's own activation checkpointing (--anchor
                   checkpoint): the anchor ebb's recompute is compared with
  save_on_cpu      without ebb, what autograd saves kept in pinned host memory
                   (--anchor save_on_cpu): the anchor ebb's moves are compared with
  MODE:K=V[:K=V]   any of these with more environment, e.g. limit:0.6:EBB_PLAN=0

Every ebb run gets -v 1 (or the EBB_VERBOSE its mode or --extra-env sets)
and --trace OUT/JOB.MODE.%p.trace; each run's
standard output and error go to OUT/JOB.MODE.log (MODE with ':' and '=' as
'-'; .rN added with --repeat). --extra-env K=V goes to every run, the
baseline too.

While a job runs, a thread samples NVML's used memory of the whole device
every 5 ms; a job's peak is the highest sample less the device's used memory
at idle (measured once, before the first job). Before the first job a tiny
PyTorch process measures the CUDA context's own cost (its peak less what was
used before it: torch.cuda.init(), a bf16 matrix product and a convolution, so
that cuBLAS's and cuDNN's modules are loaded, as in every job). A job's own
context is the larger of that and what the job held beyond its allocations:
the modules of the kernels it loads (lazily, as it first launches them) and
of the libraries only it uses, such as NCCL's. Where an observe run of the
job passed before, that is its peak less the peak of the allocations ebb
tracked (the trace's peak-bytes: every allocation, PyTorch's and NCCL's,
which EBB_LIMIT bounds); else its baseline's peak less
torch.cuda.max_memory_reserved(), which the PyTorch jobs report.

The anchors run only for the jobs that take --anchor (ANCHOR_JOBS); for the
others they are left out, and said so. Their losses are recorded and compared
with the baseline's (losses_identical), but a difference does not fail them:
an anchor is a reference, not ebb's result.

A run passes when: it exits with status 0 within --timeout; it printed a
ZOO_RESULT line with one loss and one time for each step and then "ok"; its
losses are those of the job's (first) baseline, bit for bit (hex strings);
the baseline's own losses are finite and not all equal (the job trained);
under limit:F its peak is at most the limit plus the job's context
(--slack-mib more, default 0); and under ebb, the job's process wrote its
trace (OUT/JOB.MODE.PID.trace, PID the job's, which its ZOO_RESULT gives), of
the right mode (observe or offload in its header), that `ebb report` reads
without error and that counts at least one launch. A job whose baseline
fails has its other modes recorded as failed, not run. A run under limit:F
that exits with status 3 because ebb said no mover holds the limit, and
whose trace proves it, is UNHOLDABLE, not failed, if it passes the rest but
the peak: ebb did what ebb(1) says (exit 3, and why); the table and the
count say so apart from the passes. Two such exits: the limit is below what
the driver's own allocations for the job held at once (a whole step
captured into a CUDA graph keeps the graph's memory with the driver), and
the trace's driver-served-peak-bytes is the limit or more; or at every
sample of the device over the limit, what ebb could move was less than the
excess (what captured graphs use stays), and the trace's limit-over-samples
is above 0 and its limit-over-movable 0.

step_s is the median step time of the steady state: under limit:F, of the
steps that ran under the plan (the trace's plan-iterations, the last steps
of the run), under observe, of those that started after learning ended
(its learned note's time against the steps' end times the job gives, on
the trace's clock), each less the first PLAN_SETTLE of them; without ebb, and where
fewer than MIN_STEADY steps are left so (the ratio is then marked '*': it
counts learning), after the job's --warmup steps. steady_from is the first step
counted. ratio is step_s over the baseline's (the median of all baseline
repeats' steps after --warmup). At the end:
one table, OUT/zoo.jsonl (one object per run; --record FILE appends the same
objects to FILE), OUT/zoo-logs.tgz (logs, `ebb report` outputs and traces,
each trace gzipped beside its log first, those of more than 50 MB
compressed left out of the archive). Exit status 0 when every run passed, 1
when one failed, 2 on a usage error.

--cpus (e.g. 0-7) runs every job, the baseline too, on those CPUs only (its
records say which): on a VM a host-bound job's step moves by tens of percent
from one process to the next as the scheduler places it.

--dry-run prints every command with its environment and runs nothing (no GPU
or pynvml needed). Environment: BENCH_COMMIT (else git rev-parse --short
HEAD), PYTHON (the jobs' python3; default this one).
"""
import argparse
import datetime
import glob
import gzip
import json
import math
import os
import platform
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tarfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))
JOBDIR = os.path.join(HERE, "zoo", "jobs")
MIB = 2**20
GIB = 2**30
MAX_TRACE_BYTES = 50 * 10**6        # gzipped traces larger than this stay out of the archive
PLAN_SETTLE = 2                     # steps after learning left out of an ebb run's median
MIN_STEADY = 3                      # steps after learning its median needs beyond those

# job name: (script in JOBDIR, its arguments); the name is the "job" of its ZOO_RESULT
JOBS = {
    "hf_mistral": ("hf_mistral.py", []),
    "hf_gpt2_eager": ("hf_gpt2_eager.py", []),
    "resnet50": ("resnet.py", []),
    "resnet152": ("resnet.py", ["--model", "resnet152", "--batch", "128"]),
    "compiled": ("compiled.py", []),
    "graphs": ("graphs.py", []),
    "graphs_whole": ("graphs.py", ["--whole-step"]),
    "ddp": ("ddp.py", []),
    "dataloader": ("dataloader.py", []),
    "jax_flax": ("jax_flax.py", []),
    "hf_trainer": ("hf_trainer.py", []),
    "lightning": ("lightning_trainer.py", []),
}

# mode kind: (under ebb, environment it adds)
KINDS = {
    "baseline": (False, {}),
    "plain": (False, {}),
    "plain-async": (False, {"PYTORCH_CUDA_ALLOC_CONF": "backend:cudaMallocAsync"}),
    "observe": (True, {}),
    "observe-nocupti": (True, {"EBB_CUPTI": "0"}),
    "limit": (True, {}),
    "checkpoint": (False, {}),
    "save_on_cpu": (False, {}),
}
ANCHOR_KINDS = ("checkpoint", "save_on_cpu")        # a job's own --anchor, without ebb
ANCHOR_JOBS = {"hf_mistral", "hf_gpt2_eager", "resnet50", "resnet152"}

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

# The CUDA context's own cost: what a process that only starts CUDA holds.
# The device memory a job holds that no allocation of its names: the CUDA
# context and the modules of the libraries every job loads (cuBLAS and
# cuBLASLt through a bf16 matrix product, cuDNN through a convolution),
# with the tensors themselves (a few MiB) freed before the sample ends.
CONTEXT_CODE = ('import time, torch; torch.cuda.init(); '
                'a = torch.ones(256, 256, device="cuda", dtype=torch.bfloat16); (a @ a).sum().item(); '
                'c = torch.nn.functional.conv2d(torch.ones(1, 3, 32, 32, device="cuda"), '
                'torch.ones(8, 3, 3, 3, device="cuda")); c.sum().item(); '
                'del a, c; torch.cuda.synchronize(); torch.cuda.empty_cache(); time.sleep(0.5); print("ok")')


class UsageError(Exception):
    pass


class Mode:
    """One entry of --modes: its kind, limit fraction, environment and file label."""

    def __init__(self, spec):
        self.spec = spec
        parts = spec.split(":")
        self.kind = parts[0]
        if self.kind not in KINDS:
            raise UsageError(f"unknown mode '{spec}' (one of {', '.join(KINDS)}, limit:F)")
        self.ebb, env = KINDS[self.kind]
        self.env = dict(env)
        self.fraction = None
        rest = parts[1:]
        if self.kind == "limit":
            if not rest:
                raise UsageError(f"mode '{spec}': limit needs a fraction, as limit:0.8")
            try:
                self.fraction = float(rest[0])
            except ValueError:
                raise UsageError(f"mode '{spec}': '{rest[0]}' is not a number") from None
            if not (math.isfinite(self.fraction) and self.fraction > 0):
                raise UsageError(f"mode '{spec}': the fraction must be a positive number")
            rest = rest[1:]
        # a value may hold ':' (backend:native): a piece without '=' goes on the one before
        merged = []
        for piece in rest:
            if "=" not in piece and merged:
                merged[-1] += ":" + piece
            else:
                merged.append(piece)
        for kv in merged:
            k, eq, v = kv.partition("=")
            if not eq or not ENV_NAME.match(k):
                raise UsageError(f"mode '{spec}': '{kv}' is not NAME=VALUE")
            self.env[k] = v
        self.label = re.sub(r"[^A-Za-z0-9._-]+", "-", spec)


def parse_env(items):
    env = {}
    for kv in items:
        k, eq, v = kv.partition("=")
        if not eq or not ENV_NAME.match(k):
            raise UsageError(f"--extra-env '{kv}' is not NAME=VALUE")
        env[k] = v
    return env


def base_environment(extra):
    """The environment of every run: ours less anything of ebb's and any
    PYTORCH_CUDA_ALLOC_CONF, plus PYTHONUNBUFFERED=1 and --extra-env.
    Returns (environment, names removed)."""
    env, removed = {}, []
    for k, v in os.environ.items():
        if k.startswith("EBB_") or k == "PYTORCH_CUDA_ALLOC_CONF":
            removed.append(k)
        elif k == "LD_PRELOAD" and "libebb" in v:
            kept = [p for p in re.split(r"[: ]+", v) if p and "libebb" not in p]
            if kept:
                env[k] = ":".join(kept)
            else:
                removed.append(k)
        else:
            env[k] = v
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env, sorted(removed)


def ebb_library_path(ebb):
    """LD_LIBRARY_PATH for ebb runs: BUILD/gpu-libs first where libebb.so
    lacks libunwind.so.8 on this machine (as bench/plan.sh does), else None."""
    build = os.path.dirname(os.path.dirname(os.path.abspath(ebb)))
    lib = os.path.join(build, "src", ".libs", "libebb.so")
    libs = os.path.join(build, "gpu-libs")
    if not (os.path.exists(lib) and os.path.isdir(libs) and shutil.which("ldd")):
        return None
    out = subprocess.run(["ldd", lib], capture_output=True, text=True).stdout
    if "libunwind.so.8 => not found" not in out:
        return None
    old = os.environ.get("LD_LIBRARY_PATH")
    return libs + (":" + old if old else "")


def command_line(add, removed, argv):
    """The exact command of a run, as one shell line: env -u ... K=V ... argv."""
    words = ["env"]
    for k in removed:
        words += ["-u", k]
    words += [f"{k}={v}" for k, v in add.items()]
    return shlex.join(words + argv)


class Nvml:
    """NVML's used memory of one device (the first of CUDA_VISIBLE_DEVICES, else --gpu)."""

    def __init__(self, index):
        import pynvml
        self.nvml = pynvml
        pynvml.nvmlInit()
        first = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
        if first.startswith("GPU-"):
            self.handle = pynvml.nvmlDeviceGetHandleByUUID(first)
        else:
            self.handle = pynvml.nvmlDeviceGetHandleByIndex(int(first) if first.isdigit() else index)
        name = pynvml.nvmlDeviceGetName(self.handle)
        self.name = name.decode() if isinstance(name, bytes) else name

    def used(self):
        return self.nvml.nvmlDeviceGetMemoryInfo(self.handle).used


class PeakSampler:
    """The highest used memory of the device from start() to stop(), every interval_s."""

    def __init__(self, nvml, interval_s=0.005):
        self.nvml = nvml
        self.interval = interval_s
        self.peak = 0
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self.done.wait(self.interval):
            u = self.nvml.used()
            if u > self.peak:
                self.peak = u

    def start(self):
        self.peak = self.nvml.used()
        self.thread.start()
        return self

    def stop(self):
        self.done.set()
        self.thread.join()
        self.peak = max(self.peak, self.nvml.used())
        return self.peak


def idle_used(nvml, n=20):
    """The device's used memory now: the median of n samples 10 ms apart."""
    samples = []
    for _ in range(n):
        samples.append(nvml.used())
        time.sleep(0.01)
    return int(statistics.median(samples))


def wait_quiet(nvml, idle, timeout_s=5.0):
    """Wait until the device is back to its idle use (a finished process's
    memory can take a moment to go). Returns the used memory then."""
    end = time.monotonic() + timeout_s
    while True:
        u = nvml.used()
        if u <= idle + 64 * MIB or time.monotonic() > end:
            return u
        time.sleep(0.1)


def kill_group(pgid, sig):
    """Send sig to the process group pgid (the job's, made with start_new_session);
    returns False when no process is left in it."""
    try:
        os.killpg(pgid, sig)
        return True
    except ProcessLookupError:
        return False


def parse_cpus(text):
    """The CPU set of a list such as 0-7 or 0,2,4-5."""
    cpus = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()):
            raise ValueError(f"--cpus {text}: expected numbers and ranges, e.g. 0-7 or 0,2,4")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def run_process(argv, env, log, timeout_s, header, cpus=None):
    """Run argv in its own process group with stdout and stderr to log, on
    the CPUs cpus (a set; None: wherever the system places it).
    Returns (exit status, timed out, pid, wall seconds, left processes behind)."""
    with open(log, "w") as f:
        f.write(header + "\n")
        f.flush()
        t0 = time.monotonic()
        pin = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
        p = subprocess.Popen(argv, env=env, stdout=f, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, cwd=TOP, start_new_session=True,
                             preexec_fn=pin)
        timed_out = False
        try:
            p.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            kill_group(p.pid, signal.SIGTERM)
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                kill_group(p.pid, signal.SIGKILL)
                p.wait()
        except BaseException:
            kill_group(p.pid, signal.SIGKILL)
            p.wait()
            raise
        wall = time.monotonic() - t0
        # the job's own children (workers) must not outlive it into the next run
        left = kill_group(p.pid, signal.SIGKILL)
        if timed_out:
            f.write(f"\nzoo.py: killed after {timeout_s} s\n")
        if left:
            f.write("\nzoo.py: processes of the job's group were left after it exited: killed\n")
    return p.returncode, timed_out, p.pid, wall, left


def read_result(log):
    """The last ZOO_RESULT object of a log and whether a line "ok" follows it.
    Returns (result or None, ok after it, why the result is unusable or None)."""
    with open(log, errors="replace") as f:
        lines = f.read().splitlines()
    at = None
    for i, line in enumerate(lines):
        if line.startswith("ZOO_RESULT "):
            at = i
    if at is None:
        return None, False, "no ZOO_RESULT line"
    try:
        res = json.loads(lines[at][len("ZOO_RESULT "):])
    except ValueError as e:
        return None, False, f"ZOO_RESULT is not JSON ({e})"
    ok = any(line.strip() == "ok" for line in lines[at + 1:])
    return res, ok, None


def last_words(log, n=1):
    """The last n non-empty lines of a log other than the runner's own, shortened."""
    with open(log, errors="replace") as f:
        lines = [ln.strip() for ln in f if ln.strip()
                 and not ln.startswith(("zoo.py:", "ZOO_RESULT ", "# "))]
    return " | ".join(ln[:160] for ln in lines[-n:]) if lines else "(empty log)"


def unholdable_said(log):
    """ebb's line (shortened) saying that no mover holds EBB_LIMIT: it is below
    what the driver's own allocations for the job held, or what ebb could
    move was less than the excess wherever the process was over it; None if
    none."""
    with open(log, errors="replace") as f:
        for ln in f:
            if "EBB_LIMIT was not held" in ln and ("is below what the driver's own" in ln or
                                                   "so no mover holds this limit" in ln):
                return ln.strip()[:200]
    return None


def verdict_word(r):
    """PASS, UNHOLDABLE or FAIL and why, for the table."""
    if not r["passed"]:
        return "FAIL " + r["reason"]
    return "UNHOLDABLE" if r.get("unholdable") else "PASS"


def finite_hex(h):
    try:
        return math.isfinite(float.fromhex(h))
    except (TypeError, ValueError):
        return False


def check_trace(ebb, path, want_mode, report_timeout):
    """Check the job's trace; returns (reason or None, launches or None)."""
    if not os.path.exists(path):
        return f"no trace {os.path.basename(path)}", None
    with open(path, errors="replace") as f:
        head = f.readline().split()
    if not head or head[0] != "#ebb-trace":
        return f"{os.path.basename(path)} has no #ebb-trace header", None
    fields = dict(w.split("=", 1) for w in head[2:] if "=" in w)
    if fields.get("mode") != want_mode:
        return f"trace mode is {fields.get('mode')}, not {want_mode}", None
    if report_timeout <= 0:
        return None, None
    try:
        r = subprocess.run([ebb, "report", path], capture_output=True, text=True,
                           timeout=report_timeout)
    except subprocess.TimeoutExpired:
        return f"ebb report took more than {report_timeout} s", None
    with open(path + ".report.txt", "w") as f:
        f.write(r.stdout + r.stderr)
    if r.returncode != 0:
        return f"ebb report failed: {(r.stderr or r.stdout).strip()[-200:]}", None
    m = re.search(r"^launches: (\d+)$", r.stdout, re.M)
    if not m or int(m.group(1)) == 0:
        return "the trace has no launch", 0
    return None, int(m.group(1))


def first_record(path, rtype, key, field):
    """Field (a number) of the first record of type rtype ("t key value")
    with key in an ebb trace, or None."""
    try:
        with open(path, errors="replace") as f:
            for line in f:
                p = line.split()
                if len(p) == 4 and p[0] == rtype and p[2] == key:
                    return int(p[field])
    except (OSError, ValueError):
        pass
    return None


def trace_summary(path, key):
    """The value of the summary record (Z) key of an ebb trace, or None."""
    return first_record(path, "Z", key, 3)


def plan_facts(path):
    """What the last plan of an ebb trace aimed at and predicted, and what
    the arena did (its notes and summary records), as record fields; None
    where the trace does not say."""
    q, z = {}, {}
    try:
        with open(path, errors="replace") as f:
            for line in f:
                p = line.split()
                if len(p) == 4 and p[0] == "Q":
                    q[p[2]] = p[3]      # the last of each
                elif len(p) == 4 and p[0] == "Z":
                    z[p[2]] = p[3]
    except OSError:
        pass

    def num(d, k, scale=1):
        try:
            if k not in d:
                return None
            return int(d[k]) if scale == 1 else round(int(d[k]) / scale, 4)
        except ValueError:
            return None
    rc = q.get("plan-recompute-gaps", "0") != "0"
    return {"plan_target_gib": num(q, "plan-target-bytes", 2**30),
            "plan_peak_gib": num(q, "plan-peak-bytes", 2**30),
            "plan_bound_gib": num(q, "plan-bound-bytes", 2**30),
            "predicted_step_s": num(q, "plan-recompute-step-ns" if rc else "plan-step-ns", 1e9),
            "plans": num(z, "plans"), "plan_lowerings": num(z, "plan-lowerings"),
            "plan_raisings": num(z, "plan-raisings"),
            "arena_excess_gib": num(z, "arena-excess-bytes", 2**30),
            "arena_off": q.get("arena-off")}


def note_time(path, note):
    """The time (t, ns of CLOCK_MONOTONIC) of the first Q record of note in
    an ebb trace, or None."""
    return first_record(path, "Q", note, 1)


def steps_after(rec, t):
    """How many of the job's last steps started after time t (ns of
    CLOCK_MONOTONIC, as step_ends_ns), or None when the job gave no end
    times or t is None."""
    ends = rec.get("step_ends_ns")
    if t is None or not ends or len(ends) != len(rec["step_times"]):
        return None
    return sum(end - dt * 1e9 >= t for end, dt in zip(ends, rec["step_times"]))


def iterations_after(path, note):
    """The iterations (I records) of an ebb trace that start after the
    operation its note (Q record) names (learned: where learning ended), or
    None without that note."""
    at, starts = None, []
    try:
        with open(path, errors="replace") as f:
            for line in f:
                p = line.split()
                if len(p) == 4 and p[0] == "Q" and p[2] == note:
                    at = int(p[3])
                elif len(p) >= 4 and p[0] == "I":
                    starts.append(int(p[3]))
    except (OSError, ValueError):
        return None
    return None if at is None else sum(s > at for s in starts)


def steady_steps(rec, planned, iterations, by_time=None):
    """step_s under ebb is the median of the last steps, those after
    learning: under a limit, the steps that ran under the plan (the trace's
    plan-iterations), in observe mode those after learning ended
    (iterations_after), less the first PLAN_SETTLE of them (where the plan's
    first iteration and any replay's proof fall), whatever --warmup says.
    planned is that count of iterations, the last ones of the run, and
    iterations all the trace's (its Z iterations): an iteration is taken for
    a step only where the two counts are within 2 of each other. by_time,
    where the job gave its steps' end times, is the count of steps that
    started after learning ended (steps_after), which stands whatever
    ebb's iterations are (under observe with PyTorch's caching allocator,
    ebb sees the segments, and its iterations are not the steps). With fewer
    than MIN_STEADY such steps, or iterations that are not steps, the
    --warmup median stays and steady_from is None: the run measured
    learning, or cannot say, and the table marks its ratio."""
    times = rec["step_times"]
    if by_time is not None:
        planned, iterations = by_time, len(times)
    rec["planned_steps"] = planned
    if planned is None or iterations is None or abs(iterations - len(times)) > 2 or \
            planned - PLAN_SETTLE < MIN_STEADY:
        rec["steady_from"] = None
        return
    first = max(0, len(times) - planned + PLAN_SETTLE)
    rec["steady_from"] = first
    rec["step_s"] = round(statistics.median(times[first:]), 6)


def gzip_file(path):
    """Compress path to path.gz and remove it. Returns the new path."""
    with open(path, "rb") as src, gzip.open(path + ".gz", "wb", compresslevel=6) as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
    os.remove(path)
    return path + ".gz"


def git_commit():
    if os.environ.get("BENCH_COMMIT"):
        return os.environ["BENCH_COMMIT"]
    try:
        r = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=TOP,
                           capture_output=True, text=True, timeout=20)
        return r.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def machine():
    try:
        gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version",
                              "--format=csv,noheader"], capture_output=True, text=True,
                             timeout=20).stdout.strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        gpu = "unknown GPU"
    return f"{gpu}; {platform.node()}; {os.cpu_count()} CPUs"


def utc_now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def fmt(v, spec):
    """v formatted by spec, or "-" for None."""
    return "-" if v is None else format(v, spec)


def gib(b):
    return None if b is None else round(b / GIB, 3)


class Zoo:
    def __init__(self, a, modes, jobs, extra):
        self.a = a
        self.modes = modes
        self.jobs = jobs
        self.env, self.removed = base_environment(extra)
        self.extra = extra
        self.ebb = os.path.abspath(a.ebb)
        self.ld_path = ebb_library_path(self.ebb)
        self.nvml = None
        self.idle = None
        self.ctx = None
        self.obs_ctx = {}       # job: bytes its observe run held beyond its allocations
        self.records = []
        self.meta = None

    def job_argv(self, job, mode):
        script, args = JOBS[job]
        anchor = ["--anchor", mode.kind] if mode.kind in ANCHOR_KINDS else []
        return [self.a.python, os.path.join(JOBDIR, script), "--steps", str(self.a.steps),
                "--warmup", str(self.a.warmup), *args, *anchor]

    def job_modes(self, job):
        """The modes of --modes that job runs: the anchors only where it takes --anchor."""
        left = [m.spec for m in self.modes if m.kind in ANCHOR_KINDS and job not in ANCHOR_JOBS]
        if left:
            print(f"zoo: {job} has no anchors: {', '.join(left)} left out", flush=True)
        return [m for m in self.modes if m.kind not in ANCHOR_KINDS or job in ANCHOR_JOBS]

    def plan(self, job, mode, label, limit_mib):
        """(environment additions, argv, trace pattern) of one run."""
        add = {"PYTHONUNBUFFERED": "1", **self.extra}
        argv = self.job_argv(job, mode)
        trace = None
        if mode.ebb:
            trace = os.path.join(self.a.out, f"{label}.%p.trace")
            if self.ld_path:
                add["LD_LIBRARY_PATH"] = self.ld_path
            opts = ["--limit", limit_mib] if mode.kind == "limit" else ["--mode", "observe"]
            # -v 1, or the EBB_VERBOSE a mode or --extra-env asks for (ebb run's -v wins over it)
            verbose = mode.env.get("EBB_VERBOSE", self.extra.get("EBB_VERBOSE", "1"))
            argv = [self.ebb, "run", *opts, "-v", verbose, "--trace", trace, "--", *argv]
        add.update(mode.env)
        return add, argv, trace

    def measure_context(self):
        log = os.path.join(self.a.out, "context.log")
        argv = [self.a.python, "-c", CONTEXT_CODE]
        before = wait_quiet(self.nvml, self.idle)
        sampler = PeakSampler(self.nvml).start()
        rc, timed_out, _, _, _ = run_process(argv, self.env, log, 120,
                                             "# " + command_line({}, self.removed, argv))
        peak = sampler.stop()
        if rc != 0 or timed_out:
            sys.exit(f"zoo.py: the CUDA context measurement failed ({last_words(log, 3)})")
        return max(0, peak - before)

    def job_context(self, job, base):
        """The job's context in bytes and where it comes from: the probe's,
        or, where larger, what its observe run held beyond its allocations,
        or, without one, its baseline base's peak less its reserved_peak."""
        if job in self.obs_ctx:
            return (self.obs_ctx[job], "observe") if self.obs_ctx[job] > self.ctx else \
                (self.ctx, "probe")
        if base.get("_reserved") is not None and base["_peak"] - base["_reserved"] > self.ctx:
            return base["_peak"] - base["_reserved"], "baseline"
        return self.ctx, "probe"

    def run(self, job, mode, rep, baseline):
        """Run one job in one mode; returns its record. baseline: the job's
        first baseline record (None while running it)."""
        label = f"{job}.{mode.label}" + (f".r{rep + 1}" if self.a.repeat > 1 else "")
        log = os.path.join(self.a.out, f"{label}.log")
        limit = None
        limit_mib = None
        if mode.kind == "limit":
            if baseline is not None:
                limit = max(1, round(mode.fraction * baseline["_peak"] / MIB)) * MIB
                limit_mib = f"{limit // MIB}M"
            else:
                limit_mib = f"<{mode.fraction} x the baseline peak, in MiB>M"
        add, argv, trace = self.plan(job, mode, label, limit_mib)
        cmd = command_line(add, self.removed, argv)
        rec = {"workload": job, "accum": 1, "mode": mode.spec, "repeat": rep + 1,
               "steps": self.a.steps, "warmup": self.a.warmup, "step_s": None, "ratio": None,
               "peak_gib": None, "limit_gib": gib(limit), "losses": [],
               "losses_identical": False, "exit_status": None, "passed": False, "reason": "",
               "unholdable": False, "steady_from": None, "planned_steps": None, "step_times": [],
               "ebb": mode.ebb, "log": os.path.basename(log), "command": cmd}
        if self.a.dry_run:
            print(f"{label}:\n  {cmd}")
            return None
        if mode.kind != "baseline" and (baseline is None or not baseline["passed"]):
            rec.update(reason="not run: the baseline failed", date=utc_now(), **self.meta)
            print(f"== {job} {mode.spec}: FAIL: not run: the baseline failed", flush=True)
            return rec
        for old in glob.glob(os.path.join(self.a.out, glob.escape(label) + ".*.trace*")):
            os.remove(old)
        env = dict(self.env)
        env.update(add)
        print(f"== {job} {mode.spec}: {cmd}", flush=True)
        before = wait_quiet(self.nvml, self.idle)
        if before > self.idle + 64 * MIB:
            print(f"   warning: {gib(before - self.idle)} GiB more than at idle is in use "
                  "before the run (it counts in its peak)", flush=True)
        sampler = PeakSampler(self.nvml).start()
        rc, timed_out, pid, wall, left = run_process(argv, env, log, self.a.timeout, "# " + cmd,
                                                     self.a.cpu_set)
        peak = sampler.stop()
        rec.update(exit_status=rc, timed_out=timed_out, wall_s=round(wall, 2),
                   peak_gib=gib(peak - self.idle), device_peak_gib=gib(peak),
                   device_used_before_gib=gib(before), idle_gib=gib(self.idle),
                   left_processes=left, _peak=peak - self.idle)
        why = []
        # ebb's own word that EBB_LIMIT is below what it cannot move (exit 3;
        # checked against the trace below)
        unholdable = (mode.kind == "limit" and rc == 3 and not timed_out
                      and unholdable_said(log))
        if timed_out:
            why.append(f"timed out after {self.a.timeout} s")
        elif rc != 0 and not unholdable:
            why.append(f"exit status {rc}: {last_words(log)}")
        res, ok, bad = read_result(log)
        if baseline is None:
            rec["_reserved"] = res.get("reserved_peak") if res else None
        ctx, ctx_from = self.job_context(job, baseline if baseline is not None else rec)
        rec.update(context_gib=gib(ctx), context_from=ctx_from)
        if bad:
            why.append(bad)
        else:
            losses, times = res.get("losses", []), res.get("step_times", [])
            rec["losses"] = losses
            rec["versions"] = res.get("versions")
            if not ok:
                why.append('no "ok" after ZOO_RESULT')
            if res.get("job") != job:
                why.append(f"ZOO_RESULT is of job {res.get('job')}")
            if not (len(losses) == len(times) == self.a.steps):
                why.append(f"{len(losses)} losses and {len(times)} times for {self.a.steps} steps")
            if times[self.a.warmup:]:
                rec["step_s"] = round(statistics.median(times[self.a.warmup:]), 6)
                rec["step_times"] = times
                rec["step_ends_ns"] = res.get("step_ends_ns")
                rec["steady_from"] = self.a.warmup
            if baseline is None:
                rec["losses_identical"] = True
                if not all(finite_hex(h) for h in losses):
                    why.append("a loss is not finite")
                elif len(set(losses)) < 2:
                    why.append("every step has the same loss: nothing trained")
            else:
                ref = baseline["losses"]
                rec["losses_identical"] = losses == ref
                if mode.kind in ANCHOR_KINDS:
                    if not all(finite_hex(h) for h in losses):
                        why.append("a loss is not finite")
                elif losses != ref:
                    diff = [i for i in range(max(len(losses), len(ref)))
                            if i >= len(losses) or i >= len(ref) or losses[i] != ref[i]]
                    why.append(f"losses differ from the baseline's from step {diff[0]} "
                               f"({len(diff)} of {len(ref)} steps)")
        if (limit is not None and peak - self.idle > limit + ctx + self.a.slack_mib * MIB
                and not unholdable):
            why.append(f"peak {gib(peak - self.idle):.2f} GiB over the limit {gib(limit):.2f} "
                       f"GiB + context {gib(ctx):.2f} GiB")
        if mode.ebb:
            # the job's process: ebb run's child, which its ZOO_RESULT names
            job_pid = res.get("pid", pid) if res else pid
            path = trace.replace("%p", str(job_pid))
            bad_trace, launches = check_trace(self.ebb, path, "offload" if mode.kind == "limit"
                                              else "observe", self.a.report_timeout)
            rec["launches"] = launches
            if bad_trace:
                why.append(bad_trace)
            if rec["step_times"]:
                steady_steps(rec, trace_summary(path, "plan-iterations")
                             if mode.kind == "limit" else iterations_after(path, "learned"),
                             trace_summary(path, "iterations"),
                             steps_after(rec, note_time(path, "learned"))
                             if mode.kind != "limit" else None)
            if unholdable:
                served = trace_summary(path, "driver-served-peak-bytes")
                over = trace_summary(path, "limit-over-samples")
                movable = trace_summary(path, "limit-over-movable")
                rec["driver_served_peak_gib"] = gib(served)
                rec["limit_over_samples"] = over
                rec["limit_over_movable"] = movable
                by_driver = served is not None and served >= limit
                by_pins = over is not None and over > 0 and movable == 0
                if not (by_driver or by_pins):
                    why.append(f"exit status 3, EBB_LIMIT said to be unholdable, but the "
                               f"trace's driver-served-peak-bytes is {served} against a limit "
                               f"of {limit}, and at one of its {over} samples over the limit "
                               f"there was enough to move (limit-over-movable {movable})")
            tracked = trace_summary(path, "peak-bytes")
            rec["tracked_peak_gib"] = gib(tracked)
            if mode.kind == "limit":
                rec.update(plan_facts(path))
            if mode.kind == "observe" and not why and tracked is not None:
                self.obs_ctx[job] = max(self.obs_ctx.get(job, 0), peak - self.idle - tracked)
            traces = sorted(glob.glob(os.path.join(self.a.out, glob.escape(label) + ".*.trace")))
            rec["traces"] = [os.path.basename(gzip_file(t)) for t in traces]
        rec.update(passed=not why, reason="; ".join(why), date=utc_now(), **self.meta)
        rec["unholdable"] = bool(unholdable and not why)
        verdict = ("FAIL: " + rec["reason"] if why else
                   "UNHOLDABLE: " + unholdable_said(log) if rec["unholdable"] else "PASS")
        print(f"   {job} {mode.spec}: {verdict} (step {rec['step_s']} s, peak "
              f"{rec['peak_gib']} GiB, {wall:.1f} s)", flush=True)
        return rec

    def main(self):
        a = self.a
        print(f"zoo: jobs {','.join(self.jobs)}; modes baseline,"
              f"{','.join(m.spec for m in self.modes)}; {a.steps} steps, warmup {a.warmup}, "
              f"repeat {a.repeat}; out {a.out}")
        if self.removed:
            print(f"zoo: removed from every run's environment: {' '.join(self.removed)}")
        base = Mode("baseline")
        if a.dry_run:
            print("context cost (a tiny PyTorch process, NVML peak less the idle use):\n  "
                  + command_line({}, self.removed, [a.python, "-c", CONTEXT_CODE]))
            for job in self.jobs:
                for rep in range(a.repeat):
                    for mode in [base] + self.job_modes(job):
                        self.run(job, mode, rep, None)
            return 0
        os.makedirs(a.out, exist_ok=True)
        self.meta = {"commit": git_commit(), "machine": machine(), "cpus": self.a.cpus}
        self.nvml = Nvml(a.gpu)
        self.idle = idle_used(self.nvml)
        self.ctx = self.measure_context()
        print(f"zoo: {self.nvml.name}: {gib(self.idle)} GiB used at idle; the CUDA context "
              f"costs {gib(self.ctx)} GiB; {self.meta['machine']}; commit {self.meta['commit']}",
              flush=True)
        for job in self.jobs:
            first = None
            for rep in range(a.repeat):
                for mode in [base] + self.job_modes(job):
                    rec = self.run(job, mode, rep, first)
                    if mode.kind == "baseline" and first is None:
                        first = rec
                    self.records.append(rec)
        return self.finish()

    def finish(self):
        a = self.a
        # ratio: over the median of all steady steps of the job's passing baselines
        for job in self.jobs:
            steady = [t for r in self.records if r["workload"] == job and r["mode"] == "baseline"
                      and r["passed"] for t in r.get("step_times", [])[a.warmup:]]
            ref = statistics.median(steady) if steady else None
            for r in self.records:
                if r["workload"] == job and ref and r["step_s"]:
                    r["ratio"] = round(r["step_s"] / ref, 4)
        for r in self.records:
            r.pop("_peak", None)
            r.pop("_reserved", None)
        head = (f"{'job':<14} {'mode':<24} {'exit':>5} {'step_s':>9} {'ratio':>7} "
                f"{'peak GiB':>9} {'limit GiB':>9} {'losses':>7}  result")
        print("\n" + head + "\n" + "-" * len(head))
        for r in self.records:
            mode = r["mode"] + (" #%d" % r["repeat"] if a.repeat > 1 else "")
            same = "-" if not r["losses"] else "same" if r["losses_identical"] else "DIFF"
            learning = "*" if r["ebb"] and r["step_s"] and r["steady_from"] is None else " "
            print(f"{r['workload']:<14} {mode:<24} "
                  f"{fmt(r['exit_status'], 'd'):>5} {fmt(r['step_s'], '.4f'):>9} "
                  f"{fmt(r['ratio'], '.3f'):>6}{learning} {fmt(r['peak_gib'], '.2f'):>9} "
                  f"{fmt(r['limit_gib'], '.2f'):>9} {same:>7}  "
                  f"{verdict_word(r)}")
        failed = sum(not r["passed"] for r in self.records)
        unholdable = sum(r["passed"] and r.get("unholdable", False) for r in self.records)
        if any(r["ebb"] and r["step_s"] and r["steady_from"] is None for r in self.records):
            print(f"* fewer than {MIN_STEADY} steps ran after learning (or ebb's iterations "
                  "are not the job's steps): the ratio counts learning")
        print(f"\n{len(self.records) - failed - unholdable} passed, {unholdable} unholdable "
              f"(ebb said the limit is below what it cannot move, and its trace shows it), "
              f"{failed} failed")
        out = os.path.join(a.out, "zoo.jsonl")
        with open(out, "w") as f:
            for r in self.records:
                f.write(json.dumps(r) + "\n")
        if a.record:
            with open(a.record, "a") as f:
                for r in self.records:
                    f.write(json.dumps(r) + "\n")
        self.archive()
        return 0 if failed == 0 else 1

    def archive(self):
        tgz = os.path.join(self.a.out, "zoo-logs.tgz")
        skipped = []
        with tarfile.open(tgz, "w:gz") as tar:
            for path in sorted(glob.glob(os.path.join(self.a.out, "*"))):
                name = os.path.basename(path)
                if name == "zoo-logs.tgz" or not os.path.isfile(path):
                    continue
                if name.endswith(".trace.gz") and os.path.getsize(path) > MAX_TRACE_BYTES:
                    skipped.append(name)
                    continue
                if name.endswith((".log", ".trace.gz", ".report.txt", ".jsonl")):
                    tar.add(path, arcname=os.path.join("zoo", name))
        print(f"zoo: {tgz}" + (f" (traces over 50 MB left out: {' '.join(skipped)})"
                               if skipped else ""))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog="See the top of tests/gpu/zoo.py and tests/gpu/zoo/README.md.")
    ap.add_argument("--ebb", default=os.path.join(TOP, "build", "utils", "ebb"),
                    help="the ebb command (default: BUILD/utils/ebb of this tree)")
    ap.add_argument("--out", default="/tmp/ebb-zoo", help="logs, traces, zoo.jsonl")
    ap.add_argument("--jobs", default=",".join(JOBS), help=f"comma-separated, of {','.join(JOBS)}")
    ap.add_argument("--modes", default="baseline,observe,limit:0.8,limit:0.6")
    ap.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    ap.add_argument("--timeout", type=float, default=240, help="seconds a run may take (240)")
    ap.add_argument("--repeat", type=int, default=1, help="run every mode K times (1)")
    ap.add_argument("--extra-env", action="append", default=[], metavar="K=V",
                    help="environment of every run (repeatable)")
    ap.add_argument("--record", help="also append the records to this JSON lines file")
    ap.add_argument("--steps", type=int, default=20, help="steps of each job (20)")
    ap.add_argument("--warmup", type=int, default=8,
                    help="steps left out of the median where no plan says (8)")
    ap.add_argument("--python", default=os.environ.get("PYTHON", sys.executable),
                    help="the jobs' python3 (default $PYTHON, else this one)")
    ap.add_argument("--gpu", type=int, default=0, help="NVML index of the device (0)")
    ap.add_argument("--slack-mib", type=float, default=0,
                    help="MiB allowed over limit + context before a limit run fails (0)")
    ap.add_argument("--report-timeout", type=float, default=120,
                    help="seconds for `ebb report` of a trace (120; 0: only the header is checked)")
    ap.add_argument("--cpus", default=None,
                    help="run every job on these CPUs only (e.g. 0-7): on a VM a host-bound "
                         "job's step moves by tens of percent from one process to the next")
    a = ap.parse_args()
    try:
        try:
            a.cpu_set = parse_cpus(a.cpus) if a.cpus else None
        except ValueError as e:
            raise UsageError(str(e)) from None
        jobs = [j for j in a.jobs.split(",") if j]
        for j in jobs:
            if j not in JOBS:
                raise UsageError(f"unknown job '{j}' (of {', '.join(JOBS)})")
            if not os.path.exists(os.path.join(JOBDIR, JOBS[j][0])):
                raise UsageError(f"{JOBS[j][0]} missing in {JOBDIR}")
        if not jobs or len(set(jobs)) != len(jobs):
            raise UsageError("--jobs must name each job once")
        modes = [Mode(s) for s in a.modes.split(",") if s and s != "baseline"]
        if any(m.kind == "baseline" for m in modes):
            raise UsageError("the baseline takes no environment of its own (--extra-env "
                             "gives every run some)")
        if len({m.label for m in modes}) != len(modes):
            raise UsageError("--modes names a mode twice")
        extra = parse_env(a.extra_env)
        if a.steps < 1 or not 0 <= a.warmup < a.steps:
            raise UsageError("--steps must be at least 1 and --warmup from 0 to steps - 1")
        if a.repeat < 1 or a.timeout <= 0:
            raise UsageError("--repeat and --timeout must be positive")
        if any(m.ebb for m in modes) and not os.access(a.ebb, os.X_OK):
            if not a.dry_run:
                raise UsageError(f"{a.ebb} is not an executable: build first or pass --ebb")
            print(f"zoo: warning: {a.ebb} is not an executable", file=sys.stderr)
    except UsageError as e:
        print(f"zoo.py: {e}", file=sys.stderr)
        return 2
    a.out = os.path.abspath(a.out)
    return Zoo(a, modes, jobs, extra).main()


if __name__ == "__main__":
    sys.exit(main())
