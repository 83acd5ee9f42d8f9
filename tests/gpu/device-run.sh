#!/bin/bash
# tests/gpu/device-run.sh: the whole GPU pass in one go, for a lent GPU
# machine that has the working tree and a carried build/ (see tests/gpu/README.md):
# the GPU tests, then the observe-mode benchmark. Small results land in $OUT.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-/tmp/ebb-out}
export BUILD=$top/build
# libebb.so needs libunwind.so.8; images without it get the carried copy.
if ldd "$BUILD/src/.libs/libebb.so" | grep -q "libunwind.so.8 => not found"; then
	export LD_LIBRARY_PATH=$BUILD/gpu-libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
	echo "using the carried libunwind.so.8 ($BUILD/gpu-libs)"
fi
export PYTHONUNBUFFERED=1
OUT=/tmp/ebb-gpu "$top/tests/gpu/run.sh" 2>&1 | tee "$OUT/gpu-tests.log"
gpu_rc=${PIPESTATUS[0]}
if [ "${1:-}" != "--no-bench" ]; then
	OUT=/tmp/ebb-bench "$top/bench/observe.sh" "${STEPS:-30}" 2>&1 | tee "$OUT/bench.log"
	cp /tmp/ebb-bench/results.jsonl "$OUT/observe-results.jsonl" 2>/dev/null
fi
tar czf "$OUT/logs.tgz" --exclude='*.trace' -C /tmp ebb-gpu ebb-bench 2>/dev/null
# the PyTorch trace, for reading here (compressed)
gzip -c /tmp/ebb-gpu/torch.trace > "$OUT/torch.trace.gz" 2>/dev/null
echo "gpu tests exit status: $gpu_rc"
exit "$gpu_rc"
