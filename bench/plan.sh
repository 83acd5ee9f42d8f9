#!/bin/bash
# bench/plan.sh: ebb's plan beside the job without ebb and the anchors, side
# by side in one pass on the GPU machine (issue 4).
#
# usage: bench/plan.sh WORKLOAD ACCUM MODE...
#   WORKLOAD  w1 (1.26B) or w2 (3.8B, hidden 8192), as in device-facts.md:
#             micro-batch 4, seq 4096, bf16 autocast, fused AdamW, in the
#             deterministic configuration (sdpa attention), so the losses of
#             every step can be compared bit for bit
#   ACCUM     micro-batches per optimizer step (8, or 1 for none)
#   MODE      baseline       without ebb (always run; the reference)
#             ckpt           HF gradient checkpointing, without ebb
#             save_on_cpu    torch.autograd.graph.save_on_cpu(pin_memory=True), for
#                            SLOW_STEPS steps (3) after SLOW_WARMUP (1): it is slow
#             observe        under `ebb run --mode observe` (overhead; trace for `ebb plan`)
#             ebb:LIMIT      under `ebb run --limit LIMIT` (the plan aims EBB_PLAN_MARGIN,
#                            1/64 of it, under it)
#             ebb:LIMIT:F    the same with EBB_TARGET=F
#             ebb:LIMIT:F:M  the same with EBB_PLAN_MARGIN=M (F may be empty)
#             ebb:LIMIT:F:M:VAR=VALUE[,VAR=VALUE]  the same with those EBB_* variables
#                            set (F and M may be empty): EBB_ARENA=0, EBB_PLAN_PHASES=0
#             reactive:LIMIT the mover alone (EBB_PLAN=0), for comparison
#
# Step time is the median of the steps after WARMUP (default 5: ebb learns
# in the first four), peak is NVML's for the whole device. Each ebb run's
# plan (its predicted peak, bound and step time) comes from its trace.
# Writes OUT/results.jsonl (bench/record.py), OUT/*.log, and where the GPU sat
# idle in the planned iterations (bench/gaps.py: OUT/*.gaps.txt). With CUPTI
# gone after learning, each planned iteration is also replayed from the trace:
# the recorded GPU time of each operation, started no sooner than the host
# issued it (replayed_at_host_issue_s: the iteration's time so, and how much
# of it the device waits for the host).
# env: STEPS (9), WARMUP (5), OUT, BUILD, PYTHON, BENCH_COMMIT, BENCH_COMMAND, RUN_TIMEOUT (400),
# DEADLINE (seconds from the start: no run starts with less than 30 s of it
# left, each ends by it, and the records of those that finished are written;
# for a device call's limit),
# KEEP_TRACE (set: keep each ebb run's trace as OUT/*.trace.gz, tens of MB for W1),
# ANALYSE (1; 0: skip ebb plan and gaps.py on each ebb run's trace, about a
# minute of CPU a W1 run, for short GPU leases), VERBOSE (1: the -v of each ebb run
# under a limit; 3 adds the plan's per-buffer detail, such as each drop kept)
# BENCH_COMMIT: give it from the checkout the build was made in (git rev-parse
# --short HEAD there): on the GPU machine the copy's git metadata was found
# to name an older commit.
set -u
[ $# -ge 2 ] || { sed -n '2,/^set -u/{/^set -u/d;s/^# \{0,1\}//;p}' "$0"; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
BUILD=${BUILD:-$top/build}
OUT=${OUT:-/tmp/ebb-plan}
PY=${PYTHON:-python3}
STEPS=${STEPS:-9}
WARMUP=${WARMUP:-5}
W=$1 ACC=$2
shift 2
# every argument known before anything runs (a GPU lease is short)
case $W in
w1 | w2) ;;
*) echo "bench/plan.sh: unknown workload '$W' (w1 or w2)" >&2; exit 2 ;;
esac
case $ACC in
'' | *[!0-9]* | 0) echo "bench/plan.sh: ACCUM '$ACC' is not a positive whole number" >&2; exit 2 ;;
esac
case ${DEADLINE:-1} in
'' | *[!0-9]*) echo "bench/plan.sh: DEADLINE '$DEADLINE' is not a whole number of seconds" >&2; exit 2 ;;
esac
for m in "$@"; do
	case $m in
	baseline | ckpt | save_on_cpu | observe | ebb:?* | reactive:?*) ;;
	*) echo "bench/plan.sh: unknown mode '$m' (see bench/plan.sh without arguments)" >&2
	   exit 2 ;;
	esac
	IFS=: read -r _ _ _ _ vars <<< "$m"
	IFS=, read -r -a more <<< "${vars:-}"
	for kv in "${more[@]}"; do
		[[ $kv =~ ^EBB_[A-Z0-9_]+=[^[:space:]]+$ ]] || {
			echo "bench/plan.sh: mode '$m': '$kv' is not EBB_NAME=VALUE" >&2; exit 2; }
	done
done
mkdir -p "$OUT"
export PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync PYTHONUNBUFFERED=1
if ldd "$BUILD/src/.libs/libebb.so" | grep -q "libunwind.so.8 => not found"; then
	export LD_LIBRARY_PATH=$BUILD/gpu-libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
EBB=$BUILD/utils/ebb
WL=$(echo "$W" | tr a-z A-Z)
res=$OUT/$W-a$ACC.json
extra=$OUT/$W-a$ACC.plan.json
rm -f "$res" "$extra"
train="$PY $top/bench/train.py --model $W --batch 4 --seq 4096 --accum $ACC --steps $STEPS --warmup $WARMUP --deterministic --attn sdpa"

t_start=$(date +%s)
run() {	# label log command... (returns 1 where DEADLINE left no time to run it)
	local label=$1 log=$2 limit=${RUN_TIMEOUT:-400}
	shift 2
	echo "== $WL accum $ACC: $label"
	if [ -n "${DEADLINE:-}" ]; then
		# what is left of DEADLINE, less 20 s for the records
		local left=$((DEADLINE - ($(date +%s) - t_start) - 20))
		if [ $left -lt 30 ]; then
			echo "$label: not run: $left s left of DEADLINE=$DEADLINE"
			return 1
		fi
		[ $left -lt "$limit" ] && limit=$left
	fi
	timeout "$limit" "$@" > "$log" 2>&1
	local rc=$?
	grep -E "^step |^ebb\[[0-9]+\]: (offload|plan|[0-9]+ launches|copy)|Error|error" "$log" | tail -16
	[ $rc = 0 ] || echo "$label: exit status $rc (log: $log)"
}

# The plan's numbers from a trace, as one JSON object for record.py.
plan_json() {	# label trace
	$PY - "$1" "$2" >> "$extra" <<'EOF'
import json, sys
label, path = sys.argv[1], sys.argv[2]
q, z, g = {}, {}, {}
planned, iters, faults, evictions = False, 0, {}, {}	# the last plan's iterations
host, starts = {}, []
with open(path, errors="replace") as f:
    for line in f:
        p = line.split()
        if len(p) >= 4 and p[0] == "Q" and (p[2].startswith("plan-") or p[2].endswith("-gbps") or
                                                   p[2].endswith("-gbps-copies") or
                                                   p[2] == "arena-off"):
            q[p[2]] = p[3]	# the last plan's
            if p[2] == "plan-started":
                planned, iters, faults, evictions = True, 0, {}, {}
                host, starts = {}, []
            elif p[2] == "plan-departed":
                planned = False
        elif len(p) >= 4 and p[0] == "Z":
            z[p[2]] = int(p[3])
        elif len(p) == 4 and p[0] == "G":
            g.setdefault(int(p[1]), []).append((int(p[2]), int(p[3])))
        elif planned and p[0] == "I":
            iters += 1
            starts.append(int(p[3]))
        elif planned and p[0] in "LCMN" and len(p) >= 3:
            host[int(p[2])] = int(p[1]) / 1e9	# when the host issued it
        elif planned and len(p) >= 6 and p[0] == "B" and p[5] == "fault":
            faults[iters] = faults.get(iters, 0) + 1
        elif planned and len(p) >= 6 and p[0] == "O" and p[5] == "limit":
            evictions[iters] = evictions.get(iters, 0) + 1
# the recorded iteration's GPU times as CUPTI gave them (if it ran with CUPTI)
s0, n = int(q.get("plan-recording", 0)), int(q.get("plan-operations", 0))
acts = [a for s in range(s0, s0 + n) for a in g.get(s, [])]
gpu = {"recorded_gpu_busy_s": sum(e - b for b, e in acts) / 1e9 if acts else None,
       "recorded_gpu_span_s": (max(e for _, e in acts) - min(b for b, _ in acts)) / 1e9 if acts else None,
       "recorded_ops_with_several_activities": sum(1 for s in range(s0, s0 + n) if len(g.get(s, [])) > 1)}
# Each planned iteration replayed on a device that runs each operation for its
# recorded time, starting when the host issued it (no sooner): how long the
# iteration takes so, and how long that device waits for the host.
dur = [sum(e - b for b, e in g.get(s, [])) / 1e9 for s in range(s0, s0 + n)]
host_bound = []
for i in range(len(starts) - 1):
    dev = t0 = idle = None
    for k in range(n):
        h = host.get(starts[i] + k)
        if h is None:
            continue
        if dev is None:
            dev, t0, idle = h, h, 0.0
        if h > dev:
            idle, dev = idle + h - dev, h
        dev += dur[k]
    if dev is not None and acts:
        host_bound.append((round(dev - t0, 4), round(idle, 4)))
g = lambda k: int(q[k]) / 2**30 if k in q else None
s = lambda k: int(q[k]) / 1e9 if k in q else None
# the plan with recomputes (EBB_RECOMPUTE), where one replaced the first
rc = q.get("plan-recompute-gaps", "0") != "0"
print(json.dumps({"label": label,
    "predicted_step_s": s("plan-recompute-step-ns") if rc else s("plan-step-ns"),
    "recompute_gaps": int(q["plan-recompute-gaps"]) if "plan-recompute-gaps" in q else None,
    "recompute_gib": g("plan-recompute-bytes") if rc else None,
    "recompute_hoisted": int(q["plan-recompute-hoisted"]) if rc and "plan-recompute-hoisted" in q else None,
    "recompute_nested": z.get("recompute-nested"),
    "recompute_s": s("plan-recompute-ns") if rc else None,
    "plan_rc_peak_gib": g("plan-recompute-peak-bytes") if rc else None,
    "moves_only_step_s": s("plan-step-ns"),
    "plan_gpu_step_s": s("plan-step-before-ns"), "plan_stall_s": s("plan-stall-ns"),
    "plan_host_idle_s": s("plan-host-idle-ns"), "plan_host_idle_before_s": s("plan-host-idle-before-ns"),
    "plan_host_offload_us": s("plan-host-offload-ns") * 1e6 if "plan-host-offload-ns" in q else None,
    "plan_host_restore_us": s("plan-host-restore-ns") * 1e6 if "plan-host-restore-ns" in q else None,
    "plan_host_drop_us": s("plan-host-drop-ns") * 1e6 if "plan-host-drop-ns" in q else None,
    "plan_host_remake_us": s("plan-host-remake-ns") * 1e6 if "plan-host-remake-ns" in q else None,
    "plan_peak_gib": g("plan-peak-bytes"), "plan_bound_gib": g("plan-bound-bytes"),
    "plan_floor_gib": g("plan-floor-bytes"),
    "plan_waited": q.get("plan-waited") == "1" if "plan-waited" in q else None,
    "plan_stall_capped": q.get("plan-stall-capped") == "1", "plan_made_s": s("plan-made-ns"),
    "plan_target_gib": g("plan-target-bytes"), "learned_peak_gib": g("plan-peak-before-bytes"),
    "plan_moves": int(q["plan-moves"]) if "plan-moves" in q else None,
    "plan_gib_to_host": g("plan-bytes-to-host"), "plan_times": q.get("plan-times"),
    "d2h_gbps": float(q["d2h-gbps"]) if "d2h-gbps" in q else None,
    "h2d_gbps": float(q["h2d-gbps"]) if "h2d-gbps" in q else None,
    # what ebb's own copies got before the plan (median GB/s, of how many)
    "d2h_gbps_copies": float(q["d2h-gbps-copies"].split("/")[0]) if "d2h-gbps-copies" in q else None,
    "h2d_gbps_copies": float(q["h2d-gbps-copies"].split("/")[0]) if "h2d-gbps-copies" in q else None,
    "plans": z.get("plans"), "plan_departures": z.get("plan-departures"),
    # the arena: the most its chunks held beyond their buffers at an eviction
    # under a plan, the plans made lower for it and again without that, and
    # why it was turned off (ebb(7), Departures)
    "arena_excess_gib": z.get("arena-excess-bytes", 0) / 2**30,
    "plan_lowerings": z.get("plan-lowerings"), "plan_raisings": z.get("plan-raisings"),
    "arena_off": q.get("arena-off"),
    "planned_offloads": z.get("planned-offloads"), "prefetches": z.get("prefetches"),
    "prefetches_skipped": z.get("prefetches-skipped"), "restores": z.get("restores"),
    "offloads": z.get("offloads"), "held_peak_gib": z.get("held-peak-bytes", 0) / 2**30,
    "host_wait_room_s": z.get("host-wait-room-ns", 0) / 1e9,
    "prefetches_early": z.get("prefetches-early"),
    "host_wait_gate_s": z.get("host-wait-gate-ns", 0) / 1e9,
    "host_wait_landing_s": z.get("host-wait-landing-ns", 0) / 1e9,
    "host_remake_s": z.get("host-remake-ns", 0) / 1e9,
    # the counters' growth over each whole iteration the last plan ran (Z run-*)
    "per_planned_iteration": {k[4:]: v / z["run-iterations"] for k, v in z.items()
                              if k.startswith("run-") and k != "run-iterations"}
                             if z.get("run-iterations") else None,
    "lock_wait_s": z.get("lock-wait-ns", 0) / 1e9,
    # restores on use and evictions in each iteration the last plan ran (1: its first)
    "plan_faults_by_iteration": [faults.get(i, 0) for i in range(1, iters + 1)],
    # whole planned iterations replayed at the host's issue times with the
    # recorded GPU times: [seconds, of them the device waiting for the host]
    "replayed_at_host_issue_s": host_bound,
    "plan_evictions_by_iteration": [evictions.get(i, 0) for i in range(1, iters + 1)], **gpu}))
EOF
}

run baseline "$OUT/$W-a$ACC-baseline.log" $train --label baseline --json "$res"
for m in "$@"; do
	case $m in
	baseline) ;;
	ckpt) run ckpt "$OUT/$W-a$ACC-ckpt.log" $train --ckpt --label ckpt --json "$res" ;;
	save_on_cpu)	# slow: SLOW_STEPS steps (3), the first SLOW_WARMUP (1) left out
		run save_on_cpu "$OUT/$W-a$ACC-save_on_cpu.log" $train --save-on-cpu \
			--steps "${SLOW_STEPS:-3}" --warmup "${SLOW_WARMUP:-1}" \
			--label save_on_cpu --json "$res" ;;
	observe)
		run ebb-observe "$OUT/$W-a$ACC-observe.log" "$EBB" run --mode observe -v 1 \
			--trace "$OUT/$W-a$ACC-observe.trace" -- $train --label ebb-observe --json "$res" ;;
	ebb:* | reactive:*)
		IFS=: read -r kind limit target margin vars <<< "$m"
		label=ebb-limit-$limit
		env=()
		[ -n "${target:-}" ] && { label=$label-target-$target; env+=(EBB_TARGET=$target); }
		[ -n "${margin:-}" ] && { label=$label-margin-$margin; env+=(EBB_PLAN_MARGIN=$margin); }
		if [ -n "${vars:-}" ]; then
			IFS=, read -r -a more <<< "$vars"
			for kv in "${more[@]}"; do
				label=$label-$kv
				env+=("$kv")
			done
		fi
		[ "$kind" = reactive ] && { label=reactive-limit-$limit; env+=(EBB_PLAN=0); }
		trace=/tmp/ebb-$W-a$ACC-$label.trace
		run "$label" "$OUT/$W-a$ACC-$label.log" env "${env[@]}" "$EBB" run --limit "$limit" -v "${VERBOSE:-1}" \
			--trace "$trace" -- $train --label "$label" --json "$res" || continue
		[ -f "$trace" ] || continue	# the run ended before ebb wrote one
		grep -E "^Q [0-9]+ (plan-|d2h|h2d)|^[ZIDY] " "$trace" > "$OUT/$W-a$ACC-$label.notes"
		plan_json "$label" "$trace"
		if [ "${ANALYSE:-1}" != 0 ]; then
			"$EBB" plan "$trace" > "$OUT/$W-a$ACC-$label.ebb-plan.txt" 2>&1
			$PY "$here/gaps.py" --json "$OUT/$W-a$ACC-gaps.jsonl" --label "$label" "$trace" \
				> "$OUT/$W-a$ACC-$label.gaps.txt" 2>&1
		fi
		# KEEP_TRACE: keep it, compressed, for ebb plan and bench/gaps.py later
		[ -n "${KEEP_TRACE:-}" ] && gzip -c "$trace" > "$OUT/$W-a$ACC-$label.trace.gz"
		rm -f "$trace" ;;
	esac
done
[ -f "$OUT/$W-a$ACC-observe.trace" ] &&
	"$EBB" plan "$OUT/$W-a$ACC-observe.trace" > "$OUT/$W-a$ACC-observe.ebb-plan.txt" 2>&1 &&
	rm -f "$OUT/$W-a$ACC-observe.trace"

BENCH_COMMAND=${BENCH_COMMAND:-bench/plan.sh $W $ACC $*} $PY "$top/bench/record.py" \
	--workload "$WL" --out "$OUT/results.jsonl" ${extra:+--extra "$extra"} "$res"
$PY "$top/bench/plot.py" --title "$WL, micro-batch 4, seq 4096, accumulation $ACC" \
	--out "$OUT/$W-a$ACC.svg" "$OUT/results.jsonl"
