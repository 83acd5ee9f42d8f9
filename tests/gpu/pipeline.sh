#!/bin/bash
# tests/gpu/pipeline.sh: a pipeline of one stage over NCCL on one GPU
# (pipeline.cu: grouped sends and receives of the rank to itself, GPipe
# order), without ebb, under observe and under a limit.
#
# Pass: every run exits 0 with the same checksum at every step, bit for bit;
# the observe trace has stage markers (ebb report's stage-markers: a send
# and a receive at each micro-batch's boundaries) and phases
# (stage-phases), and `ebb plan` finds a forward and a backward phase for
# each micro-batch; under a limit at 60% of its peak, the same checksums,
# with buffers moved. Then gradient accumulation on one rank
# (bench/train.py): the same losses under observe, and `ebb plan` finds a
# forward and a backward phase for each micro-batch without any marker.
# Needs nvcc and NCCL's header and library (found beside torch's
# nvidia-nccl wheel where the system has none), and python3 with torch and
# transformers. Exits 77 without a GPU, 1 when a check fails; logs under OUT
# (default /tmp/ebb-pipeline).
#
#   tests/gpu/pipeline.sh [STEPS MICRO_BATCHES LAYERS MIB]     (12 4 6 64)
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
BUILD=${BUILD:-$top/build}
OUT=${OUT:-/tmp/ebb-pipeline}
EBB=$BUILD/utils/ebb
args=("$@")
[ $# = 0 ] && args=(12 4 6 64)
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 NCCL_DEBUG=WARN

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
	echo "tests/gpu/pipeline.sh: no NVIDIA GPU here: skipped"
	exit 77
fi
if ldd "$BUILD/src/.libs/libebb.so" | grep -q "libunwind.so.8 => not found"; then
	export LD_LIBRARY_PATH=$BUILD/gpu-libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "PASS: $*"; }

# NCCL: the system's, else the one torch's wheel brings
inc= lib=
for d in /usr/include /usr/local/include /usr/local/cuda/include; do
	[ -e "$d/nccl.h" ] && { inc=$d; break; }
done
for d in /usr/lib/x86_64-linux-gnu /usr/local/lib /usr/local/cuda/lib64; do
	[ -e "$d/libnccl.so.2" ] && { lib=$d; break; }
done
if [ -z "$inc" ] || [ -z "$lib" ]; then
	wheel=$(python3 -c 'import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__) if nvidia.nccl.__file__ else list(nvidia.nccl.__path__)[0])' 2>/dev/null)
	[ -z "$inc" ] && [ -e "$wheel/include/nccl.h" ] && inc=$wheel/include
	[ -z "$lib" ] && [ -e "$wheel/lib/libnccl.so.2" ] && lib=$wheel/lib
fi
[ -n "$inc" ] && [ -n "$lib" ] || { fail "no nccl.h ($inc) or libnccl.so.2 ($lib) found"; exit 1; }
[ -e "$lib/libnccl.so" ] || { mkdir -p "$OUT/ncclso"; ln -sf "$lib/libnccl.so.2" "$OUT/ncclso/libnccl.so"; libl=$OUT/ncclso; }
echo "== NCCL: $inc, $lib"
prog=$OUT/pipeline
${NVCC:-nvcc} -O2 -I"$inc" -o "$prog" "$here/pipeline.cu" -L"${libl:-$lib}" -lnccl \
    -Xlinker -rpath -Xlinker "$lib" > "$OUT/build.log" 2>&1 ||
	{ fail "building pipeline.cu: $(tail -5 "$OUT/build.log")"; exit 1; }

sums() { grep "^step .* checksum" "$1"; }
run() {	# label command...
	local label=$1
	shift
	echo "== $label: $*"
	local t0=$(date +%s%N)
	timeout 300 "$@" > "$OUT/$label.out" 2> "$OUT/$label.err"
	local rc=$?
	local ms=$((($(date +%s%N) - t0) / 1000000))
	echo "$label: exit $rc, $((ms / 1000)).$(printf %03d $((ms % 1000))) s, $(sums "$OUT/$label.out" | wc -l) steps"
	grep -E "^ebb\[[0-9]+\]" "$OUT/$label.err" | grep -vE "\] *$" | tail -20
	[ $rc = 0 ] || fail "$label: exit status $rc ($(tail -3 "$OUT/$label.err"))"
}

run plain "$prog" "${args[@]}"
sums "$OUT/plain.out" > "$OUT/plain.sums"
[ -s "$OUT/plain.sums" ] || fail "plain: no checksums"
run observe "$EBB" run --mode observe --trace "$OUT/observe.trace" -- "$prog" "${args[@]}"
cmp -s "$OUT/plain.sums" <(sums "$OUT/observe.out") && pass "observe: every checksum identical" ||
	fail "observe: checksums differ from the job alone"
"$EBB" report "$OUT/observe.trace" > "$OUT/observe.report" 2>&1 || fail "ebb report: $(tail -1 "$OUT/observe.report")"
grep -E "^(nccl-calls|stage-markers|stage-phases|iterations|peak-bytes):" "$OUT/observe.report"
markers=$(sed -n 's/^stage-markers: //p' "$OUT/observe.report")
phases=$(sed -n 's/^stage-phases: //p' "$OUT/observe.report")
[ "${markers:-0}" -gt 0 ] && [ "${phases:-0}" -gt 0 ] && pass "observe: $markers stage markers, $phases phases" ||
	fail "observe: stage markers ${markers:-none}, phases ${phases:-none}"
"$EBB" plan "$OUT/observe.trace" > "$OUT/observe.plan" 2>&1 || fail "ebb plan: $(tail -2 "$OUT/observe.plan")"
sed -n '/^pipeline phases/,/^$/p' "$OUT/observe.plan" | head -40
mb=${args[1]:-4}
fw=$(sed -n 's/^pipeline phases: .*: \([0-9]*\) forward, \([0-9]*\) backward.*/\1/p' "$OUT/observe.plan")
bw=$(sed -n 's/^pipeline phases: .*: \([0-9]*\) forward, \([0-9]*\) backward.*/\2/p' "$OUT/observe.plan")
[ "${fw:-0}" = "$mb" ] && [ "${bw:-0}" = "$mb" ] && pass "ebb plan: $fw forward and $bw backward phases ($mb micro-batches)" ||
	fail "ebb plan: ${fw:-no} forward and ${bw:-no} backward phases, for $mb micro-batches"
peak=$(sed -n 's/^peak-bytes: //p' "$OUT/observe.report")
# the limit: 60% of the buffers' peak (NCCL's own allocations among them), and
# room for the driver's share that EBB_LIMIT counts
lim=$(( ${peak:-0} * 6 / 10 / 1048576 + 256 ))M
run limit "$EBB" run --limit "$lim" -v 1 --trace "$OUT/limit.trace" -- "$prog" "${args[@]}"
cmp -s "$OUT/plain.sums" <(sums "$OUT/limit.out") && pass "limit $lim: every checksum identical" ||
	fail "limit $lim: checksums differ from the job alone"
"$EBB" report "$OUT/limit.trace" > "$OUT/limit.report" 2>&1 || fail "ebb report (limit): $(tail -1 "$OUT/limit.report")"
grep -E "^(stage-markers|stage-phases|iterations|peak-bytes):" "$OUT/limit.report"
moved=$(awk '$1 == "Z" && $3 == "offloads" { print $4 }' "$OUT/limit.trace")
[ "${moved:-0}" -gt 0 ] && pass "limit $lim: $moved buffers moved to the host" ||
	fail "limit $lim: nothing moved (offloads ${moved:-none}): the limit pressed nothing"

# Gradient accumulation on one rank, without NCCL: the phases come from the
# turns of the memory the job holds, one forward and one backward for each
# micro-batch of the optimizer step (bench/train.py, a small Llama-style
# model, deterministic; its losses bit for bit under observe). The trace is
# made with --alloc ebb, as ebb(1) says a trace for `ebb plan` is best made:
# with PyTorch's caching allocator ebb sees its segments, which hold the
# memory through the step and do not turn.
accum=4
tr=(python3 "$top/bench/train.py" --model tiny --seq 1024 --accum $accum --steps 8 --deterministic)
losses() { sed -n 's/^step \([0-9]*\) loss [^ ]* (\([^)]*\)).*/\1 \2/p' "$1"; }
run accum-plain "${tr[@]}"
run accum-observe "$EBB" run --mode observe --alloc ebb --trace "$OUT/accum.trace" -- "${tr[@]}"
[ -n "$(losses "$OUT/accum-plain.out")" ] && cmp -s <(losses "$OUT/accum-plain.out") <(losses "$OUT/accum-observe.out") &&
	pass "accumulation $accum: every loss identical under observe" ||
	fail "accumulation $accum: losses differ under observe (or none)"
"$EBB" plan "$OUT/accum.trace" > "$OUT/accum.plan" 2>&1 || fail "ebb plan (accumulation): $(tail -2 "$OUT/accum.plan")"
sed -n '/^micro-batch phases/,/^$/p;/^pipeline phases/,/^$/p' "$OUT/accum.plan" | head -20
fw=$(sed -n 's/^micro-batch phases: .*: \([0-9]*\) forward, \([0-9]*\) backward.*/\1/p' "$OUT/accum.plan")
bw=$(sed -n 's/^micro-batch phases: .*: \([0-9]*\) forward, \([0-9]*\) backward.*/\2/p' "$OUT/accum.plan")
[ "${fw:-0}" = $accum ] && [ "${bw:-0}" = $accum ] && pass "ebb plan: $fw forward and $bw backward micro-batch phases (accumulation $accum)" ||
	fail "ebb plan: ${fw:-no} forward and ${bw:-no} backward micro-batch phases, for accumulation $accum"
echo "== $failures failed"
[ $failures = 0 ]
