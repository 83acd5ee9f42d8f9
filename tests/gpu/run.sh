#!/bin/bash
# tests/gpu/run.sh: ebb's tests on a real GPU (observe mode).
#
# Needs a built tree (BUILD, default ./build: utils/ebb, src/.libs/libebb.so),
# nvcc (it builds the CUDA C sample into BUILD/gpu) and python3 with torch
# and transformers. Exits 77 (skipped) where there is no NVIDIA GPU, 1 when a
# check fails. Writes logs and traces under OUT (default /tmp/ebb-gpu).
#
#   1. a CUDA C sample (static and shared cudart) with and without ebb:
#      both right, and every launch under ebb resolved;
#   2. a PyTorch training loop (the Llama-style W1 model, 1.26B, from
#      transformers) in a deterministic configuration: two runs without ebb
#      agree bit for bit, then a run under `ebb run --mode observe` gives the
#      same loss at every step; every launch of it was resolved, the training
#      step was found as the iteration, and CUPTI timed the operations of the
#      learning iterations on the GPU.
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
BUILD=${BUILD:-$top/build}
OUT=${OUT:-/tmp/ebb-gpu}
PY=${PYTHON:-python3}
EBB=$BUILD/utils/ebb
mkdir -p "$OUT"

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
	echo "tests/gpu/run.sh: no NVIDIA GPU here (nvidia-smi lists none): skipped"
	exit 77
fi
[ -x "$EBB" ] || { echo "tests/gpu/run.sh: $EBB missing: build first"; exit 1; }
# libebb.so needs libunwind.so.8; an image without it gets the copy carried in
# BUILD/gpu-libs (as the other device scripts do)
if ldd "$BUILD/src/.libs/libebb.so" | grep -q "libunwind.so.8 => not found" &&
    [ -e "$BUILD/gpu-libs/libunwind.so.8" ]; then
	export LD_LIBRARY_PATH=$BUILD/gpu-libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
	echo "using the carried libunwind.so.8 ($BUILD/gpu-libs)"
fi

failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "PASS: $*"; }

# key: value from `ebb report`
report_value() { "$EBB" report "$1" | sed -n "s/^$2: //p"; }

check_trace() {	# trace label
	local t=$1 what=$2 launches unresolved
	if ! "$EBB" report "$t" > "$t.report" 2>&1; then
		fail "$what: malformed trace ($(tail -1 "$t.report"))"
		return
	fi
	launches=$(report_value "$t" launches)
	unresolved=$(report_value "$t" launches-unresolved)
	if [ "${launches:-0}" -gt 0 ] && [ "$unresolved" = 0 ]; then
		pass "$what: $launches launches, every one resolved ($(report_value "$t" buffer-references) buffer references, $(report_value "$t" launches-without-buffer) launches without a tracked buffer)"
	else
		fail "$what: launches=$launches unresolved=$unresolved"
	fi
}

echo "== machine"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
$PY -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)'
ldd "$BUILD/src/.libs/libebb.so" | grep -q "not found" && { ldd "$BUILD/src/.libs/libebb.so"; fail "libebb.so has unresolved dependencies"; }

echo "== CUDA C sample"
mkdir -p "$BUILD/gpu"
NVCC=${NVCC:-nvcc}
"$NVCC" -O2 -o "$BUILD/gpu/sample" "$here/sample.cu" > "$OUT/sample.build.log" 2>&1 &&
    "$NVCC" -O2 -cudart shared -o "$BUILD/gpu/sample-shared" "$here/sample.cu" >> "$OUT/sample.build.log" 2>&1 ||
    fail "building the sample with $NVCC: $(tail -3 "$OUT/sample.build.log")"
for s in sample sample-shared; do
	bin=$BUILD/gpu/$s
	[ -x "$bin" ] || { fail "$bin missing"; continue; }
	if "$bin" > "$OUT/$s.plain.log" 2>&1; then pass "$s without ebb"; else fail "$s without ebb: $(tail -1 "$OUT/$s.plain.log")"; fi
	if "$EBB" run --mode observe --trace "$OUT/$s.trace" -- "$bin" > "$OUT/$s.ebb.log" 2>&1; then
		pass "$s under ebb"
		check_trace "$OUT/$s.trace" "$s under ebb"
	else
		fail "$s under ebb: $(tail -3 "$OUT/$s.ebb.log")"
	fi
done

echo "== PyTorch training loop, deterministic"
steps=10
train="$PY $top/bench/train.py --model w1 --batch 2 --seq 1024 --steps $steps --warmup 2 --deterministic"
export PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync	# the same backend in every run
rm -f "$OUT/det.json"
$train --label plain-a --json "$OUT/det.json" > "$OUT/det-a.log" 2>&1 || fail "plain run a: $(tail -3 "$OUT/det-a.log")"
$train --label plain-b --json "$OUT/det.json" > "$OUT/det-b.log" 2>&1 || fail "plain run b: $(tail -3 "$OUT/det-b.log")"
"$EBB" run --mode observe --trace "$OUT/torch.trace" -v 1 -- $train --label ebb-observe \
	--json "$OUT/det.json" > "$OUT/det-ebb.log" 2>&1 || fail "ebb run: $(tail -3 "$OUT/det-ebb.log")"
$PY - "$OUT/det.json" <<'PYEOF' || failures=$((failures + 1))
import json, sys
runs = {r["label"]: r for r in map(json.loads, open(sys.argv[1]))}
a, b, e = runs.get("plain-a"), runs.get("plain-b"), runs.get("ebb-observe")
if not (a and b and e):
    print("FAIL: missing runs:", sorted(runs)); sys.exit(1)
ok = True
if a["losses"] != b["losses"]:
    print("FAIL: two runs without ebb differ: the configuration is not deterministic"); ok = False
else:
    print(f"PASS: two runs without ebb agree bit for bit ({len(a['losses'])} steps)")
if e["losses"] != a["losses"]:
    bad = [i for i, (x, y) in enumerate(zip(a["losses"], e["losses"])) if x != y]
    print(f"FAIL: losses under ebb differ at steps {bad}"); ok = False
else:
    print(f"PASS: losses under ebb observe are bit-identical at all {len(e['losses'])} steps "
          f"(last {float.fromhex(e['losses'][-1]):.6f})")
sys.exit(0 if ok else 1)
PYEOF
check_trace "$OUT/torch.trace" "PyTorch loop under ebb"
grep -E "^ebb\[[0-9]+\]: [0-9]+ launches" "$OUT/det-ebb.log" | tail -1

# The iteration is the training step: one per step once found, none undone.
iters=$(report_value "$OUT/torch.trace" iterations)
departures=$(report_value "$OUT/torch.trace" departures)
period=$(awk '$1 == "Z" && $3 == "period" { print $4 }' "$OUT/torch.trace")
ops=$(awk '$1 ~ /^[LCMNRY]$/ { n++ } END { print n + 0 }' "$OUT/torch.trace")
if [ "${iters:-0}" -ge $((steps - 5)) ] && [ "${iters:-0}" -le "$steps" ] && [ "$departures" = 0 ] &&
    [ $((period * steps)) -le "$ops" ] && [ $((period * (steps + 2))) -ge "$ops" ]; then
	pass "the iteration is the training step: $iters iterations of $period operations ($ops operations in $steps steps), no departure"
else
	fail "iteration: $iters iterations of $period operations, $departures departures, $ops operations in $steps steps"
fi

# CUPTI timed the operations it was attached for.
awk '
	$1 == "Q" && ($3 == "cupti-paused" || $3 == "cupti-detached") { detached = 1 }
	!detached && $1 ~ /^[LCMR]$/ { ops++ }
	$1 == "G" { if (!($2 in seen)) { seen[$2] = 1; timed++ } }
	$1 == "Q" && $3 ~ /^cupti-(timed|activities)/ { printf "  %s %s\n", $3, $4 }
	END { printf "  operations while CUPTI was attached: %d, with GPU times: %d\n", ops, timed;
	      exit !(ops > 0 && timed >= 0.9 * ops) }' "$OUT/torch.trace" > "$OUT/cupti.txt"
if [ $? = 0 ]; then pass "CUPTI times"; else fail "CUPTI times"; fi
cat "$OUT/cupti.txt"

echo "== $failures failure(s)"
[ "$failures" = 0 ]
