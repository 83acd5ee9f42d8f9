#!/bin/bash
# tests/gpu/device-zoo.sh: on the GPU machine, over a copy of the tree with
# a carried build/ (tests/gpu/README.md): ebb's host cost per launch and per
# allocation (bench/hostcost.c: without ebb, observe, observe without CUPTI,
# offload), then the zoo (tests/gpu/zoo.py), one run of it per line of the
# plan: "JOBS MODES [more zoo.py arguments]". The records (each run's JSON
# with its per-step losses, the zoo's tables, hostcost's numbers) land in
# $OUT/records.tgz, small, so that they always come back; the logs and
# traces in $OUT/results.tgz, less the largest zoo runs' archives of them
# where it would be over the 16 MiB a file that the device tool brings
# back; the tables also in $OUT/summary.txt.
#
#   tests/gpu/device-zoo.sh [--no-hostcost] PLAN_FILE [ZOO_ARGS...]
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-/tmp/ebb-out}
BUILD=${BUILD:-$top/build}
res=/tmp/ebb-results
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p "$OUT" "$res"
# libebb.so needs libunwind.so.8; an image without it gets the carried copy
if ldd "$BUILD/src/.libs/libebb.so" | grep -q "libunwind.so.8 => not found"; then
	export LD_LIBRARY_PATH=$BUILD/gpu-libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
cuda=${CUDA_HOME:-/usr/local/cuda}
cc -shared -fPIC -O1 -o /tmp/segvtrace.so "$top/tests/gpu/segvtrace.c" -ldl || exit 1
hostcost=1
[ "${1:-}" = --no-hostcost ] && { hostcost=0; shift; }
plan=$1
shift
if [ $hostcost = 1 ]; then
	cc -O2 -I"$cuda/include" -o /tmp/hostcost "$top/bench/hostcost.c" -ldl || exit 1
	for m in none observe observe-nocupti offload; do
		case $m in
		none) cmd=(/tmp/hostcost) ;;
		observe) cmd=("$BUILD/utils/ebb" run --mode observe -- /tmp/hostcost) ;;
		observe-nocupti) cmd=(env EBB_CUPTI=0 "$BUILD/utils/ebb" run --mode observe -- /tmp/hostcost) ;;
		offload) cmd=("$BUILD/utils/ebb" run --limit 120G -- /tmp/hostcost) ;;
		esac
		line=$(timeout 120 "${cmd[@]}" 2>>"$res/hostcost.err") || echo "hostcost $m failed" >&2
		echo "{\"mode\": \"$m\", \"result\": ${line:-null}}" | tee -a "$res/hostcost.jsonl"
	done
fi
rc=0 n=0
while read -r jobs modes more; do
	[ -z "$jobs" ] || [ "${jobs#\#}" != "$jobs" ] && continue
	n=$((n + 1))
	# shellcheck disable=SC2086
	python3 "$top/tests/gpu/zoo.py" --ebb "$BUILD/utils/ebb" --out "$res/zoo$n" --jobs "$jobs" \
		--modes "$modes" $more "$@" 2>&1 | tee "$res/zoo$n.txt" | grep -v "^== "
	[ "${PIPESTATUS[0]}" = 0 ] || rc=1
	rm -f "$res/zoo$n"/*.trace
done < "$plan"
grep -h -E "^   [a-z_0-9]+ [^ ]+: (PASS|UNHOLDABLE|FAIL)" "$res"/zoo*.txt > "$OUT/summary.txt"
(cd /tmp && find ebb-results -name '*.jsonl' -o -name '*.txt' | tar czf "$OUT/records.tgz" -T -)
# the logs, without the largest archives of traces first, until it fits
limit=$((15 * 1024 * 1024))
tar czf "$OUT/results.tgz" -C /tmp ebb-results
for big in $(find "$res" -name 'zoo-logs.tgz' -printf '%s %p\n' | sort -rn | cut -d' ' -f2); do
	[ "$(stat -c %s "$OUT/results.tgz")" -le $limit ] && break
	rm -f "$big"
	tar czf "$OUT/results.tgz" -C /tmp ebb-results
done
exit $rc
