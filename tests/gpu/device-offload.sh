#!/bin/bash
# tests/gpu/device-offload.sh: the mover's GPU pass (bench/offload.sh) on a
# lent machine with the working tree and a carried build/; results in $OUT.
# Exits with bench/offload.sh's status: 1 where a run failed its checks.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-/tmp/ebb-out}
export BUILD=$top/build PYTHONUNBUFFERED=1
if ldd "$BUILD/src/.libs/libebb.so" | grep -q "libunwind.so.8 => not found"; then
	export LD_LIBRARY_PATH=$BUILD/gpu-libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
OUT=/tmp/ebb-offload "$top/bench/offload.sh" 2>&1 | tee "$OUT/offload.log"
rc=${PIPESTATUS[0]}
cp /tmp/ebb-offload/results.jsonl "$OUT/offload-results.jsonl" 2>/dev/null
tar czf "$OUT/offload-logs.tgz" -C /tmp ebb-offload 2>/dev/null
exit "$rc"
