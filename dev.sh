#!/bin/sh
# dev.sh: set up, build and run ebb from a fresh checkout.
#
#   ./dev.sh demo    install what the build needs (Debian/Ubuntu, apt-get), build,
#                    and run ebb in observe mode on the bundled example: a
#                    PyTorch training loop on the GPU, or, where there is no GPU,
#                    a CUDA program on the CPU driver of tests/fakecuda; the
#                    trace is written under build/demo/
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

need_pkgs() {
	pkgs="autoconf automake libtool pkg-config make gcc check libunwind-dev"
	missing=
	for p in $pkgs; do
		dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
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
	# The traces go under the build tree, not a fixed name in a shared /tmp.
	demo_dir="$top/build/demo"
	mkdir -p "$demo_dir"
	if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU' &&
	    python3 -c 'import torch, transformers' 2>/dev/null; then
		echo "dev.sh: GPU found: a small Llama-style training loop, with ebb observing"
		build/utils/ebb run --mode observe --trace "$demo_dir/ebb-demo.%p.trace" -v 1 -- \
			python3 bench/train.py --model tiny --batch 4 --seq 1024 --steps 10
		trace=$(ls -t "$demo_dir"/ebb-demo.*.trace | head -1)
		echo "dev.sh: the trace is $trace; its summary (ebb-trace(5) explains each record):"
		build/utils/ebb report "$trace"
	else
		echo "dev.sh: no NVIDIA GPU with PyTorch here (nvidia-smi lists none, or torch and"
		echo "        transformers are missing): running the example on the CPU driver of"
		echo "        tests/fakecuda instead. On a GPU machine this runs a PyTorch training loop."
		(cd build && make -j"$jobs" tests/progs/workload >/dev/null &&
		    make -j"$jobs" check TESTS= >/dev/null)
		trace="$demo_dir/ebb-demo.trace"
		LD_LIBRARY_PATH="$top/build/tests/fakecuda/.libs" EBB_CUPTI=0 \
			build/utils/ebb run --mode observe --trace "$trace" -v 1 -- \
			build/tests/progs/workload loop 20
		echo "dev.sh: the trace is $trace; its summary (ebb-trace(5) explains each record):"
		build/utils/ebb report "$trace"
	fi
	;;
*)
	sed -n '2,15p' "$0"
	exit 2
	;;
esac
