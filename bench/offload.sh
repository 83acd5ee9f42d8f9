#!/bin/bash
# bench/offload.sh: the mover under a limit, side by side in one run (issue 3).
#
#   W1 (1.26B, seq 4096) at batch 8, deterministic (sdpa): under
#   `ebb run --limit 64G`, and twice without ebb (the second shows the
#   configuration is deterministic); the losses of every step must agree.
#   W1 at batch 16 (out of memory without ebb): under `ebb run --limit 120G`,
#   beside HF gradient checkpointing at batch 16 without ebb.
#
# BENCH_FULL=0 leaves out the second run without ebb and the batch-16 run
# without ebb (out of memory), for a shorter pass.
# All runs use PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync. Step time is
# the median after warm-up; peak is NVML's for the whole device.
# Exits 1 when a run (other than the one expected out of memory) fails or
# any run's losses differ from its baseline's.
# usage: bench/offload.sh   (BUILD, OUT, PYTHON, BENCH_COMMIT as in tests/gpu/run.sh)
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
BUILD=${BUILD:-$top/build}
OUT=${OUT:-/tmp/ebb-offload}
PY=${PYTHON:-python3}
mkdir -p "$OUT"
export PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync
EBB=$BUILD/utils/ebb
b8="$PY $top/bench/train.py --model w1 --batch 8 --seq 4096 --steps 8 --warmup 3 --deterministic --attn sdpa"
b16="$PY $top/bench/train.py --model w1 --batch 16 --seq 4096 --steps 5 --warmup 2 --deterministic --attn sdpa"
r8=$OUT/w1-b8.json
r16=$OUT/w1-b16.json
rm -f "$r8" "$r16"

run() {	# label log command...
	local label=$1 log=$2
	shift 2
	echo "== $label"
	timeout 200 "$@" > "$log" 2>&1
	local rc=$?
	grep -E "^step |^ebb\[[0-9]+\]: (offload|[0-9]+ launches)|Error|error" "$log" | tail -12
	[ $rc = 0 ] || { echo "FAIL: $label: exit status $rc (log: $log)"; failures=$((failures + 1)); }
}
failures=0

run "W1 b8 under ebb --limit 64G" "$OUT/b8-ebb.log" \
	"$EBB" run --limit 64G -v 1 -- $b8 --label ebb-limit-64G --json "$r8"
run "W1 b8 without ebb" "$OUT/b8-base.log" $b8 --label baseline --json "$r8"
[ "${BENCH_FULL:-1}" = 1 ] &&
	run "W1 b8 without ebb, again" "$OUT/b8-base2.log" $b8 --label baseline-repeat --json "$r8"
run "W1 b16 under ebb --limit 120G" "$OUT/b16-ebb.log" \
	"$EBB" run --limit 120G -v 1 -- $b16 --label ebb-limit-120G --json "$r16"
run "W1 b16 gradient checkpointing without ebb" "$OUT/b16-ckpt.log" \
	$b16 --ckpt --label ckpt --json "$r16"
if [ "${BENCH_FULL:-1}" = 1 ]; then
	f=$failures
	run "W1 b16 without ebb (expected: out of memory)" "$OUT/b16-base.log" \
		$b16 --label baseline --json "$r16"
	failures=$f	# its failure is the point
	grep -q "OutOfMemoryError\|out of memory" "$OUT/b16-base.log" &&
		echo "W1 b16 without ebb: out of memory"
fi

BENCH_COMMAND=${BENCH_COMMAND:-bench/offload.sh} $PY "$top/bench/record.py" --workload W1 \
	--out "$OUT/results.jsonl" "$r8"
BENCH_COMMAND=${BENCH_COMMAND:-bench/offload.sh} $PY "$top/bench/record.py" --workload W1 \
	--baseline ckpt --out "$OUT/results.jsonl" "$r16"
# every run's losses those of its baseline, bit for bit
n=$($PY -c 'import json, sys; print(sum(not json.loads(l)["losses_identical"] for l in open(sys.argv[1]) if l.strip()))' "$OUT/results.jsonl" 2>/dev/null)
[ "${n:-1}" = 0 ] || { echo "FAIL: ${n:-unreadable} records with losses unlike their baseline's ($OUT/results.jsonl)"; failures=$((failures + 1)); }
echo "== $failures failed"
[ $failures = 0 ]
