#!/bin/bash
# bench/observe.sh: the cost of ebb in observe mode on W1 (1.26B, batch 4,
# seq 4096), side by side in one run: the job without ebb and under
# `ebb run --mode observe`, both with PYTORCH_CUDA_ALLOC_CONF=
# backend:cudaMallocAsync, interleaved (baseline, ebb, baseline, ebb) so that
# drift of a shared machine falls on both. Step time is the median of the
# steady-state steps; peak is NVML's for the whole device.
#
# usage: bench/observe.sh [STEPS]   (BUILD, OUT, PYTHON, BENCH_COMMIT as in tests/gpu/run.sh)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
BUILD=${BUILD:-$top/build}
OUT=${OUT:-/tmp/ebb-bench}
PY=${PYTHON:-python3}
STEPS=${1:-30}
mkdir -p "$OUT"
export PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync
train="$PY $top/bench/train.py --model w1 --batch 4 --seq 4096 --steps $STEPS --warmup 8"
res=$OUT/observe-w1.json
rm -f "$res"
for round in 1 2; do
	$train --label baseline --json "$res" > "$OUT/observe-base-$round.log" 2>&1
	"$BUILD/utils/ebb" run --mode observe -v 1 -- $train --label ebb-observe --json "$res" \
		> "$OUT/observe-ebb-$round.log" 2>&1
done
grep -hE "^ebb\[[0-9]+\]: [0-9]+ launches" "$OUT"/observe-ebb-*.log | tail -1
BENCH_COMMAND=${BENCH_COMMAND:-"bench/observe.sh $STEPS"} \
	$PY "$top/bench/record.py" --workload W1 --out "$OUT/results.jsonl" "$res"
