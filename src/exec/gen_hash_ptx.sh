#!/bin/sh
# gen_hash_ptx.sh: make hash_ptx.h, the PTX of hash.cu as a C string, with
# nvcc. The PTX is declared ISA 7.0 for sm_70, which every driver since
# CUDA 11.0 JIT-compiles for its GPU; the kernel uses nothing newer.
# Run it after changing hash.cu, and commit both (the build needs no nvcc).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
nvcc -ptx -arch=compute_75 -O3 -I"$here" "$here/hash.cu" -o "$tmp/hash.ptx"
sed -e 's/^\.version .*/.version 7.0/' -e 's/^\.target .*/.target sm_70/' \
    -e '/^\/\//d' "$tmp/hash.ptx" > "$tmp/low.ptx"
ptxas -arch=sm_90 "$tmp/low.ptx" -o "$tmp/check.cubin"
{
	echo "/* hash_ptx.h: made by gen_hash_ptx.sh from hash.cu; do not edit. */"
	echo "#ifndef EBB_HASH_PTX_H"
	echo "#define EBB_HASH_PTX_H"
	echo "static const char ebb_hash_ptx[] ="
	sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/\t"/' -e 's/$/\\n"/' "$tmp/low.ptx"
	echo "\t;"
	echo "#endif"
} > "$here/hash_ptx.h"
