#!/bin/bash
# tests/gpu/device-pass.sh: the GPU pass after a change to the hooks, the
# engine or the mover, within one device call of 10 minutes
# (tests/gpu/README.md):
#   1. tests/gpu/run.sh (the GPU tests);
#   2. W1 with gradient accumulation 8 under --limit 52G beside the job
#      alone (bench/plan.sh; STEPS=12 WARMUP=9), its records in $OUT;
#   3. ebb's own host time (EBB_SELF_TIME=1, while learning and after) in
#      observe mode on ResNet-152 at batch 32 and GPT-2 eager, and on
#      bench/hostcost.c in observe and offload mode (--live 20000: launches
#      that pass 64 of 20,000 live buffers).
# Logs and records land in $OUT/pass.tgz; the lines that matter in
# $OUT/summary.txt. Exits 1 when run.sh fails or a step does not finish, 77
# where there is no GPU.
#
#   BENCH_COMMIT=$(git rev-parse --short HEAD) tests/gpu/device-pass.sh
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-/tmp/ebb-out}
BUILD=${BUILD:-$top/build}
EBB=$BUILD/utils/ebb
JOBS=$top/tests/gpu/zoo/jobs
logs=/tmp/ebb-pass
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
	echo "tests/gpu/device-pass.sh: no NVIDIA GPU here (nvidia-smi lists none): skipped"
	exit 77
fi
mkdir -p "$OUT" "$logs"
if ldd "$BUILD/src/.libs/libebb.so" | grep -q "libunwind.so.8 => not found"; then
	export LD_LIBRARY_PATH=$BUILD/gpu-libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
status=0
summary=$OUT/summary.txt
: > "$summary"

echo "== tests/gpu/run.sh" | tee -a "$summary"
timeout 240 env OUT=$logs/gpu BUILD="$BUILD" bash "$top/tests/gpu/run.sh" > "$logs/run.txt" 2>&1
rc=$?
grep -E "^(PASS|FAIL)|failure" "$logs/run.txt" >> "$summary"
[ $rc = 0 ] || { echo "run.sh: exit $rc" >> "$summary"; status=1; }

echo "== W1 accumulation 8, --limit 52G" | tee -a "$summary"
STEPS=12 WARMUP=9 ANALYSE=0 OUT=$logs/w1 BUILD="$BUILD" \
    BENCH_COMMAND="STEPS=12 WARMUP=9 bench/plan.sh w1 8 ebb:52G" \
    timeout 330 bash "$top/bench/plan.sh" w1 8 ebb:52G > "$logs/w1.txt" 2>&1 || status=1
grep -A4 "^mode " "$logs/w1.txt" >> "$summary"
cp "$logs/w1/results.jsonl" "$OUT/w1.jsonl" 2>/dev/null

echo "== EBB_SELF_TIME" | tee -a "$summary"
cuda=${CUDA_HOME:-/usr/local/cuda}
cc -O2 -I"$cuda/include" -o /tmp/hostcost "$top/bench/hostcost.c" -ldl || status=1
self() {	# label, command...
	local label=$1
	shift
	echo "-- $label" >> "$summary"
	EBB_SELF_TIME=1 timeout 90 "$@" > "$logs/self-$label.txt" 2>&1 || status=1
	grep -E "host time in ebb|launch_ns" "$logs/self-$label.txt" >> "$summary"
	grep -o '"step_s": [0-9.]*' "$logs/self-$label.txt" >> "$summary"
}
self resnet152-b32 "$EBB" run --mode observe -v 1 -- python3 "$JOBS/resnet.py" \
    --model resnet152 --batch 32 --steps 30 --warmup 12
self gpt2-eager "$EBB" run --mode observe -v 1 -- python3 "$JOBS/hf_gpt2_eager.py" \
    --steps 30 --warmup 12
self hostcost-observe "$EBB" run --mode observe -v 1 -- /tmp/hostcost --live 20000
self hostcost-offload "$EBB" run --limit 120G -v 1 -- /tmp/hostcost --live 20000

echo "commit ${BENCH_COMMIT:-unknown}" >> "$summary"
tar czf "$OUT/pass.tgz" -C "$logs" . 2>/dev/null
cat "$summary"
exit $status
