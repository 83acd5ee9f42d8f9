/*
 * hash.cu: the kernel ebb carries as PTX (hash_ptx.h, made from this file by
 * gen_hash_ptx.sh) to learn which buffers a launch writes: a 128-bit digest
 * of n bytes at p, added into out[0] and out[1], and the number of 8-byte
 * words at 8-byte aligned addresses whose value lies inside one of the
 * regions reg (hashreg.h: where tracked buffers lie, so a buffer holding
 * such words may be a table of pointers), added into out[2]; out[0..2] must
 * start at zero.
 *
 * The bytes are taken as little-endian 8-byte words w_i (the last one
 * padded with zeros); out[0] gets the sum of mix(w_i ^ i*K0) and out[1] the
 * sum of mix(w_i + i*K1 + K2), both mod 2^64, mix being SplitMix64's
 * finaliser. Sums do not depend on the order the threads add in, so the
 * digest of the same bytes is the same on every launch; the word's index in
 * each term makes moved words count as changed. tests/fakecuda computes the
 * same digest on the CPU (fk_kernel.c, ebb_hash).
 *
 * Launch with blocks of a multiple of 32 threads; any grid.
 */
#include "hashreg.h"

__device__ __forceinline__ unsigned long long ebb_mix(unsigned long long z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* Whether w lies inside one of reg's regions (sorted: the first and the
 * last bound them all). */
__device__ __forceinline__ int ebb_in_regions(unsigned long long w, const struct hashreg &reg)
{
	unsigned long long n = reg.n < HASHREG_MAX ? reg.n : HASHREG_MAX;
	if (n == 0 || w < reg.lo[0] || w >= reg.hi[n - 1])
		return 0;
	int in = 0;
#pragma unroll
	for (int k = 0; k < HASHREG_MAX; k++)
		in |= k < n && w >= reg.lo[k] && w < reg.hi[k];
	return in;
}

extern "C" __global__ void
ebb_hash(const unsigned char *p, unsigned long long n, unsigned long long *out,
    const struct hashreg reg)
{
	unsigned long long nw = (n + 7) / 8, s0 = 0, s1 = 0, ptrs = 0;
	unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
	int aligned = ((unsigned long long)p & 7) == 0;

	for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
	     i < nw; i += stride) {
		unsigned long long w = 0;
		if (aligned && i * 8 + 8 <= n) {
			w = ((const unsigned long long *)p)[i];
			ptrs += ebb_in_regions(w, reg);
		} else {
			for (unsigned b = 0; b < 8 && i * 8 + b < n; b++)
				w |= (unsigned long long)p[i * 8 + b] << (8 * b);
		}
		s0 += ebb_mix(w ^ (i * 0x9e3779b97f4a7c15ULL));
		s1 += ebb_mix(w + i * 0xc2b2ae3d27d4eb4fULL + 0x165667b19e3779f9ULL);
	}
	for (int o = 16; o > 0; o >>= 1) {
		s0 += __shfl_down_sync(0xffffffffu, s0, o);
		s1 += __shfl_down_sync(0xffffffffu, s1, o);
		ptrs += __shfl_down_sync(0xffffffffu, ptrs, o);
	}
	if ((threadIdx.x & 31) == 0) {
		atomicAdd(&out[0], s0);
		atomicAdd(&out[1], s1);
		if (ptrs != 0)
			atomicAdd(&out[2], ptrs);
	}
}
