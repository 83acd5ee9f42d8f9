#!/bin/sh
# dev.sh: set up, build and run ebb from a fresh checkout.
#
#   ./dev.sh demo    install what the build needs (Debian/Ubuntu, apt-get), build,
#                    and run the bundled example twice, without ebb and under
#                    ebb run --limit (0.7 of what it needs), then print both peaks
#                    and times side by side and compare the results; exits 1
#                    when they differ or the run under the limit holds more.
#                    The example is bench/demo_torch.py, a small PyTorch model,
#                    where PyTorch sees a GPU; else a training loop in
#                    miniature on the CPU driver of tests/fakecuda. Logs and
#                    the trace go under build/demo/
#   ./dev.sh test    install, build and run the test suite (no GPU needed)
#   ./dev.sh asan    the same in ./build-asan, built with AddressSanitizer and
#                    UBSan (configure --enable-sanitizers)
#   ./dev.sh build   install and build only
#
# Builds in ./build, or ./build-asan for asan (VPATH). CUDA headers come from
# $CUDA_HOME or /usr/local/cuda.
set -eu
top=$(cd "$(dirname "$0")" && pwd)
cmd=${1:-}
jobs=$(nproc 2>/dev/null || echo 2)

# Whether what package p gives is here: its program on PATH, or its library
# known to pkg-config, as a machine without dpkg (or with them installed
# another way) has them; else dpkg's word.
have_pkg() {
	case $1 in
	libtool) command -v libtoolize >/dev/null 2>&1 && return 0 ;;
	check) pkg-config --exists check 2>/dev/null && return 0 ;;
	libunwind-dev) pkg-config --exists libunwind 2>/dev/null && return 0 ;;
	*) command -v "$1" >/dev/null 2>&1 && return 0 ;;
	esac
	dpkg -s "$1" >/dev/null 2>&1
}

need_pkgs() {
	pkgs="autoconf automake libtool pkg-config make gcc check libunwind-dev"
	missing=
	for p in $pkgs; do
		have_pkg "$p" || missing="$missing $p"
	done
	[ -z "$missing" ] && return 0
	echo "dev.sh: installing$missing"
	sudo=
	[ "$(id -u)" = 0 ] || sudo=sudo
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $missing
}

need_cuda_headers() {
	cuda=${CUDA_HOME:-/usr/local/cuda}
	if [ ! -f "$cuda/include/cuda.h" ] || [ ! -f "$cuda/include/cupti.h" ]; then
		echo "dev.sh: the CUDA 13 headers (cuda.h, cupti.h, nccl.h) are needed at build time;"
		echo "        install the CUDA toolkit (and libnccl-dev) or set CUDA_HOME"
		exit 1
	fi
}

# build DIR [CONFIGURE-OPTION...]: configure ./DIR (the first time) and make there.
build() {
	dir=$1
	shift
	need_pkgs
	need_cuda_headers
	cd "$top"
	[ -x configure ] && [ configure -nt configure.ac ] || autoreconf -fi >/dev/null
	mkdir -p "$dir"
	cd "$dir"
	[ -f Makefile ] || ../configure ${CI:+--enable-werror} "$@" >/dev/null
	make -j"$jobs" >/dev/null
	echo "dev.sh: built $dir/utils/ebb and $dir/src/.libs/libebb.so"
}

# now: the time in seconds, to the nanosecond (GNU date).
now() {
	date +%s.%N
}

# field NAME FILE: the number after NAME= on FILE's "demo " line (bench/demo_torch.py).
field() {
	sed -n "s/^demo .*$1=\([0-9.]*\).*/\1/p" "$2"
}

# demo_fail MESSAGE...: say why the demo failed, where its logs are, and exit 1.
demo_fail() {
	echo "dev.sh: demo FAILED: $*" >&2
	echo "        the logs are in $demo_dir" >&2
	exit 1
}

# demo_run NAME COMMAND...: run COMMAND with its output in $demo_dir/NAME.out
# and NAME.err; fail with the last lines of NAME.err when it fails.
demo_run() {
	name=$1
	shift
	status=0
	"$@" >"$demo_dir/$name.out" 2>"$demo_dir/$name.err" || status=$?
	[ "$status" = 0 ] && return 0
	tail -5 "$demo_dir/$name.err" | cut -c1-160 | sed 's/^/  /' >&2
	demo_fail "the run $name exited with status $status"
}

# demo_show: print the run without ebb and the run under $limit side by side,
# from $base_peak, $lim_peak (bytes), $base_s, $lim_s (seconds) and the
# results in $demo_dir/without.res and limit.res; fail when the results
# differ, are empty, or the run under the limit held more than $allowed bytes.
demo_show() {
	echo "dev.sh: $what, without ebb and under ebb run --limit $limit:"
	printf '  %-20s %16s %24s\n' "" "without ebb" "ebb run --limit $limit"
	printf '  %-20s %12.1f MiB %20.1f MiB\n' "peak device memory" \
	    "$(awk "BEGIN { print $base_peak / 1048576 }")" "$(awk "BEGIN { print $lim_peak / 1048576 }")"
	printf '  %-20s %14.2f s %22.2f s\n' "$time_what" "$base_s" "$lim_s"
	[ -s "$demo_dir/without.res" ] || demo_fail "the run without ebb printed no results"
	if ! cmp -s "$demo_dir/without.res" "$demo_dir/limit.res"; then
		diff "$demo_dir/without.res" "$demo_dir/limit.res" | head -5 >&2 || true
		demo_fail "the results under ebb differ from those without it"
	fi
	echo "  results: identical ($results_what)"
	[ "$lim_peak" -le "$allowed" ] ||
		demo_fail "under --limit $limit the device held $lim_peak bytes, more than $allowed"
	echo "dev.sh: the logs and ebb's trace are in $demo_dir (build/utils/ebb report TRACE reads one)"
}

# demo_cpu: the example on the CPU driver of tests/fakecuda: workload plan 30,
# a training loop in miniature (weights, optimizer state used once an
# iteration, activations kept from the forward pass for the backward) that
# checks every value it computes and prints "ok"; the fake driver prints its
# device peak. The limit, 56M, is 0.7 of the peak without ebb (80 MiB).
demo_cpu() {
	echo "dev.sh: no GPU with PyTorch here: running the example on the CPU driver of"
	echo "        tests/fakecuda (on a GPU machine with PyTorch, bench/demo_torch.py)"
	(cd build && make -j"$jobs" check TESTS= >/dev/null)
	fake="$top/build/tests/fakecuda/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
	prog=build/tests/progs/workload
	what="a training loop in miniature ($prog plan 30)"
	limit=56M
	allowed=$((56 << 20))
	rm -f "$demo_dir"/limit.trace
	t0=$(now)
	demo_run without env LD_LIBRARY_PATH="$fake" "$prog" plan 30
	t1=$(now)
	demo_run limit env LD_LIBRARY_PATH="$fake" EBB_CUPTI=0 \
		build/utils/ebb run --limit "$limit" -v 1 --trace "$demo_dir/limit.trace" -- "$prog" plan 30
	t2=$(now)
	base_peak=$(sed -n 's/^driver: .*, peak \([0-9]*\).*$/\1/p' "$demo_dir/without.out")
	lim_peak=$(sed -n 's/^driver: .*, peak \([0-9]*\).*$/\1/p' "$demo_dir/limit.out")
	if [ -z "$base_peak" ] || [ -z "$lim_peak" ]; then
		demo_fail "the fake driver printed no peak"
	fi
	base_s=$(awk "BEGIN { print $t1 - $t0 }")
	lim_s=$(awk "BEGIN { print $t2 - $t1 }")
	time_what="time (the whole run)"
	# the results: what the example printed, less the fake driver's counters
	grep -v '^driver: ' "$demo_dir/without.out" >"$demo_dir/without.res" || true
	grep -v '^driver: ' "$demo_dir/limit.out" >"$demo_dir/limit.res" || true
	grep -qx ok "$demo_dir/without.res" || demo_fail "the run without ebb did not print ok"
	grep -q '^checksum ' "$demo_dir/without.res" || demo_fail "the run without ebb printed no checksum"
	results_what="the checksum of every value each run read back, and each checked them"
	demo_show
}

# demo_gpu: bench/demo_torch.py, a small MLP trained with Adam, without ebb
# and under ebb with a limit of 0.7 of what PyTorch's allocator held; the
# losses of every step compared bit for bit. A peak is the device's used
# memory beyond what it held once CUDA had started; the run under the limit
# may hold the limit and what the run without ebb held beyond its allocator
# (modules loaded as kernels are first launched).
demo_gpu() {
	echo "dev.sh: GPU with PyTorch found: the example is bench/demo_torch.py; a peak is the"
	echo "        device memory in use beyond what the process held once CUDA had started"
	what="a small MLP trained with Adam (bench/demo_torch.py)"
	demo_run without python3 bench/demo_torch.py
	reserved=$(field reserved_bytes "$demo_dir/without.out")
	base_peak=$(field peak_bytes "$demo_dir/without.out")
	if [ -z "$reserved" ] || [ -z "$base_peak" ]; then
		demo_fail "the run without ebb printed no peak"
	fi
	limit_mib=$((reserved * 7 / 10 / 1048576))
	limit=${limit_mib}M
	rm -f "$demo_dir"/limit.*.trace
	demo_run limit build/utils/ebb run --limit "$limit" -v 1 --trace "$demo_dir/limit.%p.trace" -- \
		python3 bench/demo_torch.py
	lim_peak=$(field peak_bytes "$demo_dir/limit.out")
	[ -n "$lim_peak" ] || demo_fail "the run under ebb printed no peak"
	context=$((base_peak > reserved ? base_peak - reserved : 0))
	allowed=$((limit_mib * 1048576 + context))
	base_s=$(field seconds "$demo_dir/without.out")
	lim_s=$(field seconds "$demo_dir/limit.out")
	time_what="time (the steps)"
	grep '^step ' "$demo_dir/without.out" >"$demo_dir/without.res" || true
	grep '^step ' "$demo_dir/limit.out" >"$demo_dir/limit.res" || true
	results_what="the loss of every step, bit for bit"
	demo_show
}

case "$cmd" in
build)
	build build
	;;
test)
	build build
	cd "$top/build"
	make -j"$jobs" check
	;;
asan)
	build build-asan --enable-sanitizers
	cd "$top/build-asan"
	make -j"$jobs" check
	;;
demo)
	build build
	cd "$top"
	# The logs and the trace go under the build tree, not a fixed name in a shared /tmp.
	demo_dir="$top/build/demo"
	mkdir -p "$demo_dir"
	if python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
		demo_gpu
	else
		demo_cpu
	fi
	;;
*)
	sed -n '2,19p' "$0"
	exit 2
	;;
esac
