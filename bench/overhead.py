#!/usr/bin/env python3
"""ebb's observe-mode overhead on real jobs, measured against the job alone.

usage: bench/overhead.py [--jobs J,...] [--modes M,...] [--repeats R]
                         [--steps N] [--warmup W] [--cpus LIST] [--out FILE.jsonl]

Runs each job of tests/gpu/zoo/jobs (names as tests/gpu/zoo.py gives them,
and resnet50_b16 and resnet152_b32, ResNets at batches small enough that
the host's time per operation sets the step time) R times in each mode, the modes interleaved run by run
(none, observe, ...; none, observe, ...) so that the machine's drift falls
on every mode alike. Modes:

  none            the job alone, PyTorch's default caching allocator
  off             ebb run --mode off: libebb.so preloaded, interposing nothing
  observe         ebb run --mode observe (no trace: what ebb's interposition,
                  learning and CUPTI cost)
  observe-trace   the same with --trace (each operation also written)
  observe-nocupti observe with EBB_CUPTI=0

A run's step time is the median of its steps after --warmup (ebb learns in
the first iterations); a mode's is the median over its runs, with the
lowest and highest run beside it (the spread). ratio = mode / none.
--cpus (e.g. 0-7 or 0,2,4) runs every job on those CPUs only, the same for
every mode: on a VM, where the scheduler places each process anew, a
host-bound job's step time can move by 5 to 30% from one process to the next
(bench/RESULTS.md). Every
step's loss of every run must equal the first none run's, bit for bit
(losses_identical). One record per job and mode is appended to --out.

Environment: BUILD (default ./build), PYTHON, BENCH_COMMIT, BENCH_COMMAND.
"""
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(TOP, "tests", "gpu"))
import zoo  # noqa: E402  (the jobs' table)

# jobs beside the zoo's: ResNets at small batches, where the host's time per
# operation, not the GPU, sets the step time
JOBS = dict(zoo.JOBS)
JOBS["resnet50_b16"] = ("resnet.py", ["--batch", "16"])
JOBS["resnet152_b32"] = ("resnet.py", ["--model", "resnet152", "--batch", "32"])

MODES = {
    "none": (None, [], {}),
    "off": ("off", [], {}),
    "observe": ("observe", [], {}),
    "observe-trace": ("observe", ["--trace", "/tmp/ebb-overhead.%p.trace"], {}),
    "observe-nocupti": ("observe", [], {"EBB_CUPTI": "0"}),
}


def run_once(ebb, py, job, mode, steps, warmup, timeout, cpus=None):
    script, args = JOBS[job]
    ebb_mode, opts, env_add = MODES[mode]
    argv = [py, os.path.join(zoo.JOBDIR, script), *args, "--steps", str(steps),
            "--warmup", str(warmup)]
    if ebb_mode is not None:
        argv = [ebb, "run", "--mode", ebb_mode, *opts, "--", *argv]
    env = dict(os.environ, **env_add)
    t0 = time.time()
    pin = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
    p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout,
                       preexec_fn=pin)
    res = None
    for line in p.stdout.splitlines():
        if line.startswith("ZOO_RESULT "):
            res = json.loads(line[len("ZOO_RESULT "):])
    if p.returncode != 0 or res is None:
        tail = (p.stdout + p.stderr)[-2000:]
        raise RuntimeError(f"{job} {mode}: exit {p.returncode}, result {res is not None}\n{tail}")
    for f in os.listdir("/tmp"):
        if f.startswith("ebb-overhead.") and f.endswith(".trace"):
            os.unlink(os.path.join("/tmp", f))
    return res, time.time() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", default="resnet152,hf_gpt2_eager")
    ap.add_argument("--modes", default="none,observe,observe-trace")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=12)
    ap.add_argument("--timeout", type=int, default=300)
    ap.add_argument("--cpus", default=None, help="run the jobs on these CPUs only (e.g. 0-7)")
    ap.add_argument("--out", default="/tmp/overhead.jsonl")
    a = ap.parse_args()
    try:
        cpus = zoo.parse_cpus(a.cpus) if a.cpus else None
    except ValueError as e:
        ap.error(str(e))
    jobs = a.jobs.split(",")
    modes = a.modes.split(",")
    for j in jobs:
        if j not in JOBS:
            ap.error(f"unknown job {j}: one of {', '.join(JOBS)}")
    for m in modes:
        if m not in MODES:
            ap.error(f"unknown mode {m}: one of {', '.join(MODES)}")
    if modes[0] != "none":
        ap.error("the first mode must be none (the reference)")
    build = os.environ.get("BUILD", os.path.join(TOP, "build"))
    ebb = os.path.join(build, "utils", "ebb")
    py = os.environ.get("PYTHON", sys.executable)
    try:
        gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version",
                              "--format=csv,noheader"], capture_output=True, text=True,
                             timeout=20).stdout.strip().splitlines()[0]
    except Exception:
        gpu = "unknown GPU"
    machine = f"{gpu}; {platform.node()}; {os.cpu_count()} CPUs"
    for job in jobs:
        runs = {m: [] for m in modes}
        for r in range(a.repeats):
            for m in modes:
                res, wall = run_once(ebb, py, job, m, a.steps, a.warmup, a.timeout, cpus)
                runs[m].append(res)
                print(f"{job} {m} run {r + 1}: {res['step_s'] * 1e3:.2f} ms/step "
                      f"({wall:.0f} s)", flush=True)
        ref_losses = runs["none"][0]["losses"]
        ref = statistics.median(x["step_s"] for x in runs["none"])
        with open(a.out, "a") as f:
            for m in modes:
                per_run = [x["step_s"] for x in runs[m]]
                step = statistics.median(per_run)
                same = all(x["losses"] == ref_losses for x in runs[m])
                rec = {
                    "workload": job, "accum": 1, "mode": m, "step_s": step,
                    "ratio": step / ref, "ratio_spread": [min(per_run) / ref, max(per_run) / ref],
                    "run_step_s": per_run, "repeats": a.repeats, "steps": a.steps,
                    "warmup": a.warmup, "cpus": a.cpus, "peak_gib": None, "losses": ref_losses if same else
                    [x["losses"] for x in runs[m]], "losses_identical": same,
                    "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%MZ"),
                    "commit": os.environ.get("BENCH_COMMIT", "unknown"), "machine": machine,
                    "command": os.environ.get("BENCH_COMMAND", " ".join(sys.argv)),
                }
                f.write(json.dumps(rec) + "\n")
                print(f"{job:14s} {m:16s} {step * 1e3:8.2f} ms  {rec['ratio']:.3f}x "
                      f"[{rec['ratio_spread'][0]:.3f}, {rec['ratio_spread'][1]:.3f}]  "
                      f"losses {'identical' if same else 'DIFFER'}", flush=True)


if __name__ == "__main__":
    main()
