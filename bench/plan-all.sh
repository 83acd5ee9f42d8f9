#!/bin/bash
# bench/plan-all.sh: issue 4's whole benchmark, one workload pass after another:
# W1 and W2 (device-facts.md) with gradient accumulation over 8 micro-batches
# and without, each without ebb, beside HF gradient checkpointing and torch
# save_on_cpu, and under ebb at several limits (bench/plan.sh does each pass).
#
# usage: bench/plan-all.sh [PASS...]
#   PASS  w1-a8, w1-a1, w2-a8 or w2-a1 (default: all four). On the GPU
#         machine a command may run 10 minutes: give one pass per call.
# The limits: W1 with accumulation peaks near 69 GiB, without near 64 GiB; W2
# near 101 and 89 GiB; the points run from the planner's bound up (ebb plan on
# an observe trace gives it before a run). env: as bench/plan.sh; OUT gets
# one folder per pass.
set -u
here=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/ebb-plan}
passes=${*:-w1-a8 w1-a1 w2-a8 w2-a1}
for p in $passes; do
	case $p in
	w1-a8) args="w1 8 ckpt save_on_cpu ebb:60G ebb:56G ebb:50G" ;;
	w1-a1) args="w1 1 ckpt save_on_cpu ebb:56G ebb:48G" ;;
	w2-a8) args="w2 8 ckpt save_on_cpu ebb:84G ebb:76G ebb:61952M" ;;
	w2-a1) args="w2 1 ckpt save_on_cpu ebb:76G ebb:66G" ;;
	*) echo "bench/plan-all.sh: unknown pass $p (w1-a8, w1-a1, w2-a8, w2-a1)" >&2; exit 2 ;;
	esac
	OUT=$OUT/$p "$here/plan.sh" $args
done
