#!/bin/bash
# tests/gpu/device-check-offload.sh: one short W1 batch-8 run under
# `ebb run --limit 64G` (no run without ebb: a check of the mover at this
# commit, not a benchmark), with the exit summary and the trace's summary.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-/tmp/ebb-out}
export BUILD=$top/build PYTHONUNBUFFERED=1 PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync
if ldd "$BUILD/src/.libs/libebb.so" | grep -q "libunwind.so.8 => not found"; then
	export LD_LIBRARY_PATH=$BUILD/gpu-libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
"$BUILD/utils/ebb" run --limit 64G -v 1 --trace /tmp/w1.trace -- python3 "$top/bench/train.py" \
	--model w1 --batch 8 --seq 4096 --steps 7 --warmup 3 --deterministic --attn sdpa \
	--label ebb-limit-64G --json "$OUT/check.json" 2>&1 | grep -E "^step |^ebb\[|Error" | tee "$OUT/check.log"
grep "^Z" /tmp/w1.trace | tee -a "$OUT/check.log"
