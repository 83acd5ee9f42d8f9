#!/bin/bash
# bench/plan-all.sh: issue 4's whole benchmark, one workload pass after another:
# W1 and W2 (device-facts.md) with gradient accumulation over 8 micro-batches
# and without, each without ebb, beside HF gradient checkpointing and torch
# save_on_cpu, and under ebb at several limits (bench/plan.sh does each pass).
#
# usage: bench/plan-all.sh [PASS...]
#   PASS  w1-a8, w2-a8, w2-a8-62, w1-a1, w2-a1: the job without ebb and under
#         ebb at several limits (w1-a1 and w2-a1 beside HF gradient
#         checkpointing; w2-a8-62: W2 at the goal's 62 GiB by NVML, a limit of
#         60.5 GiB); anchors-w1, anchors-w2: checkpointing and torch
#         save_on_cpu with accumulation, which do not change with ebb's code
#         (save_on_cpu runs 3 steps at 8x the step time). Default: w1-a8,
#         w2-a8, w1-a1, w2-a1. On the GPU machine a command may run 10
#         minutes: give one pass per call (a W2 pass of the baseline and three
#         limits took more than 9.5 minutes at 1acef84).
# The limits: W1 with accumulation peaks near 69 GiB, without near 64 GiB; W2
# near 101 and 87 GiB; NVML's peak comes out about 1.4 GiB over the limit. The
# points run from above the planner's bound down to where only waits get
# there (ebb plan on a trace gives the bound, the floor and each target's
# least stall before a run). Steps: 10, of which the last 3 are measured:
# learning, the first plan for a micro-batch, the departure at the optimizer
# step, learning the whole step and planning it take the first seven; W1's
# passes run 11 and measure the last 3, as its plans under its bound take
# longer (7.1 s at 54G, 14.2 s at 52G on the planning thread at 0c84871, 21 s
# at 50G at 1acef84: 50G is left out).
# env: as bench/plan.sh (STEPS and WARMUP default to 10 and 7 here, 11 and 8
# for W1's passes); OUT gets one folder per pass.
set -u
here=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/ebb-plan}
steps=${STEPS:-} warmup=${WARMUP:-}
passes=${*:-w1-a8 w2-a8 w1-a1 w2-a1}
for p in $passes; do
	case $p in
	w1-*) export STEPS=${steps:-11} WARMUP=${warmup:-8} ;;
	*) export STEPS=${steps:-10} WARMUP=${warmup:-7} ;;
	esac
	case $p in
	w1-a8) args="w1 8 ebb:56G ebb:54G ebb:52G" ;;
	w2-a8) args="w2 8 ebb:66G ebb:64G" ;;
	w2-a8-62) args="w2 8 ebb:61952M" ;;
	w1-a1) args="w1 1 ckpt ebb:56G ebb:52G" ;;
	w2-a1) args="w2 1 ckpt ebb:76G ebb:68G" ;;
	anchors-w1) args="w1 8 ckpt save_on_cpu" ;;
	anchors-w2) args="w2 8 ckpt save_on_cpu" ;;
	*) echo "bench/plan-all.sh: unknown pass $p (w1-a8, w2-a8, w2-a8-62, w1-a1, w2-a1, anchors-w1," \
	    "anchors-w2)" >&2; exit 2 ;;
	esac
	OUT=$OUT/$p "$here/plan.sh" $args
done
