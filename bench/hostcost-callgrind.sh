#!/bin/sh
# bench/hostcost-callgrind.sh: ebb's instructions a kernel launch after
# learning, counted by callgrind over bench/hostcost.c on the fake driver of
# tests/fakecuda (deterministic, where time on a shared machine is not).
#
# usage: bench/hostcost-callgrind.sh MODE [HOSTCOST-OPTION...]
#
# MODE is observe or offload (EBB_LIMIT=6G: nothing moves). hostcost runs
# twice under callgrind, with --launches 10240 and 30720 and the options
# given (--live N, --struct); ebb's part of a launch is the inclusive cost of
# libebb's cuLaunchKernel less the driver's cuLaunchKernel it calls, and the
# difference between the two runs over their 20480 launches leaves out
# learning, the allocations and everything else the runs share. Prints one
# JSON object: mode, args, the two runs' launches and instructions, and
# ebb_instructions_per_launch. Needs `make check` run once in BUILD (the fake
# driver), valgrind and a C compiler.
#
# BUILD (default ./build) holds libebb.so and the fake; LIBEBB overrides the
# library (a copy of another commit's); OUT (default /tmp/ebb-callgrind)
# takes the callgrind files.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
BUILD=${BUILD:-$top/build}
LIBEBB=${LIBEBB:-$BUILD/src/.libs/libebb.so}
OUT=${OUT:-/tmp/ebb-callgrind}
CUDA=${CUDA_HOME:-/usr/local/cuda}
[ $# -ge 1 ] || { sed -n '5,6p' "$0" >&2; exit 2; }
mode=$1
shift
mkdir -p "$OUT"
prog=$OUT/hostcost
cc -O2 -I"$CUDA/include" "$here/hostcost.c" -o "$prog" -ldl

# cost FILE: ebb's instructions in the launches of callgrind file FILE.
cost() {
	callgrind_annotate --inclusive=yes --threshold=100 "$1" 2>/dev/null | awk '
	$2 == "*" || $3 == "*" { next }
	/ [^ ]*src\/hooks\/hooks\.c:cuLaunchKernel$/ { gsub(",", "", $1); hook = $1 }
	/ [^ ]*fakecuda\/fk_kernel\.c:cuLaunchKernel$/ { gsub(",", "", $1); drv = $1 }
	END { if (hook == "" || drv == "") exit 1; print hook - drv }'
}

for n in 10240 30720; do
	LD_LIBRARY_PATH=$BUILD/tests/fakecuda/.libs LD_PRELOAD=$LIBEBB EBB_MODE=$mode \
	    EBB_LIMIT=6G EBB_CUPTI=0 EBB_VERBOSE=1 valgrind --tool=callgrind \
	    --callgrind-out-file="$OUT/cg-$mode-$n.out" "$prog" --launches "$n" "$@" \
	    >"$OUT/cg-$mode-$n.log" 2>&1
done
a=$(cost "$OUT/cg-$mode-10240.out")
b=$(cost "$OUT/cg-$mode-30720.out")
printf '{"mode": "%s", "args": "%s", "launches": [10368, 30848], "instructions": [%s, %s], "ebb_instructions_per_launch": %s}\n' \
    "$mode" "$*" "$a" "$b" "$(( (b - a) / 20480 ))"
