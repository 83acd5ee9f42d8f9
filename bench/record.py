#!/usr/bin/env python3
"""Turn train.py results of one side-by-side run into bench/results records.

usage: record.py --workload W --out FILE.jsonl [--baseline LABEL] RESULT.json...

Each RESULT file holds JSON objects from train.py (one per line). Runs with
the same label (repeats, interleaved with the others to even out drift) are
merged: step_s is the median of all their steady-state steps, peak_gib the
highest peak. The label --baseline (default "baseline") is the reference:
every record gets ratio = step_s / baseline step_s and losses_identical =
(the losses of all its runs equal the first baseline run's bit for bit, over
the steps a run has: a shorter run is compared with the baseline's first steps;
losses_compared says how many). Prints a table and appends one record per run to
FILE.jsonl with date, commit (BENCH_COMMIT), machine (BENCH_MACHINE, else
nvidia-smi's) and command (BENCH_COMMAND).
"""
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys


def machine():
    try:
        gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20).stdout.strip().splitlines()[0]
    except Exception:
        gpu = "unknown GPU"
    return f"{gpu}; {platform.node()}; {os.cpu_count()} CPUs"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workload", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--baseline", default="baseline")
    ap.add_argument("--extra", help="JSON lines by label (bench/plan.sh: the plan's numbers) "
                    "merged into the records; a missing file is no error")
    ap.add_argument("results", nargs="+")
    a = ap.parse_args()
    extra = {}
    if a.extra and os.path.exists(a.extra):
        with open(a.extra) as f:
            for line in f:
                if line.strip():
                    e = json.loads(line)
                    extra[e.pop("label")] = e
    runs = []
    for path in a.results:
        with open(path) as f:
            runs += [json.loads(line) for line in f if line.strip()]
    groups = {}
    for r in runs:
        groups.setdefault(r["label"], []).append(r)
    if a.baseline not in groups:
        sys.exit(f"record.py: no run labelled {a.baseline}")
    merged = {}
    for label, rs in groups.items():
        steady = [t for r in rs for t in r["step_times"][r["warmup"]:]]
        merged[label] = dict(rs[0], step_s=statistics.median(steady),
                             peak_gib=max(r["peak_gib"] for r in rs),
                             all_losses=[r["losses"] for r in rs], repeats=len(rs),
                             step_times=[t for r in rs for t in r["step_times"]])
    base = merged[a.baseline]
    meta = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "commit": os.environ.get("BENCH_COMMIT", "unknown"),
        "machine": os.environ.get("BENCH_MACHINE") or machine(),
        "command": os.environ.get("BENCH_COMMAND", ""),
    }
    print(f"{'mode':<22} {'step_s':>8} {'ratio':>7} {'peak_gib':>9} {'losses':>10}")
    with open(a.out, "a") as out:
        for r in merged.values():
            rec = {
                "workload": a.workload, "accum": r["accum"], "mode": r["label"],
                "batch": r["batch"], "seq": r["seq"], "model": r["model"],
                "step_s": round(r["step_s"], 5),
                "ratio": round(r["step_s"] / base["step_s"], 4),
                "peak_gib": round(r["peak_gib"], 2),
                # a shorter run (save_on_cpu's few steps) against the same steps of the baseline
                "losses_identical": all(len(ls) <= len(base["losses"]) and ls == base["losses"][:len(ls)]
                                        for ls in r["all_losses"]),
                "losses_compared": min(len(ls) for ls in r["all_losses"]),
                # every step's loss, float.hex (each repeat's where there are several)
                "losses": r["all_losses"][0] if len(r["all_losses"]) == 1 else r["all_losses"],
                "repeats": r["repeats"],
                "deterministic": r["deterministic"], "steps": r["steps"], "warmup": r["warmup"],
                "step_times": [round(t, 5) for t in r["step_times"]],
                **meta,
            }
            # NVML per step and at CUDA's start, where train.py gave them (first repeat)
            for k in ("step_peaks_gib", "start_gib"):
                if k in r:
                    rec[k] = r[k]
            e = extra.get(r["label"], {})
            rec.update(e)
            if e.get("predicted_step_s"):
                rec["predicted_error"] = round(e["predicted_step_s"] / r["step_s"] - 1, 4)
            out.write(json.dumps(rec) + "\n")
            pred = ""
            if e.get("predicted_step_s"):
                pred = f" predicted {e['predicted_step_s']:.3f} s ({rec['predicted_error']:+.1%})"
            if e.get("plan_peak_gib") is not None:
                pred += f", plan peak {e['plan_peak_gib']:.2f} GiB"
            if e.get("plan_bound_gib") is not None:
                pred += f", bound {e['plan_bound_gib']:.2f} GiB"
            print(f"{rec['mode']:<22} {rec['step_s']:>8.4f} {rec['ratio']:>7.4f} "
                  f"{rec['peak_gib']:>9.2f} {str(rec['losses_identical']):>10}{pred}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
