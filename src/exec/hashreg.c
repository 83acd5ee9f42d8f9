/*
 * hashreg.c: the regions of tracked buffers' addresses (see hashreg.h).
 */
#include "config.h"

#include <stddef.h>

#include "hashreg.h"

void
hashreg_add(struct hashreg *r, uint64_t addr, uint64_t size)
{
	uint64_t lo[HASHREG_MAX + 1], hi[HASHREG_MAX + 1];
	uint64_t a = addr & ~(HASHREG_ALIGN - 1);
	uint64_t end = addr + (size ? size : 1);
	/* (at the top of the address space, the region ends at its last byte) */
	uint64_t b = end < addr || end > UINT64_MAX - (HASHREG_ALIGN - 1) ? UINT64_MAX :
	    (end + HASHREG_ALIGN - 1) & ~(HASHREG_ALIGN - 1);
	size_t n = 0, k = 0;

	if (r->n > HASHREG_MAX)
		r->n = HASHREG_MAX;
	/* sorted by lo, the new region among them */
	while (k < r->n && r->lo[k] < a) {
		lo[n] = r->lo[k];
		hi[n++] = r->hi[k++];
	}
	lo[n] = a;
	hi[n++] = b;
	for (; k < r->n; k++) {
		lo[n] = r->lo[k];
		hi[n++] = r->hi[k];
	}
	/* overlapping or adjacent regions are one */
	size_t m = 0;
	for (k = 1; k < n; k++) {
		if (lo[k] <= hi[m]) {
			if (hi[k] > hi[m])
				hi[m] = hi[k];
		} else {
			m++;
			lo[m] = lo[k];
			hi[m] = hi[k];
		}
	}
	n = m + 1;
	/* one too many: join the two with the smallest gap between them */
	if (n > HASHREG_MAX) {
		size_t best = 0;
		for (k = 1; k + 1 < n; k++)
			if (lo[k + 1] - hi[k] < lo[best + 1] - hi[best])
				best = k;
		hi[best] = hi[best + 1];
		for (k = best + 1; k + 1 < n; k++) {
			lo[k] = lo[k + 1];
			hi[k] = hi[k + 1];
		}
		n--;
	}
	for (k = 0; k < n; k++) {
		r->lo[k] = lo[k];
		r->hi[k] = hi[k];
	}
	r->n = n;
}

int
hashreg_has(const struct hashreg *r, uint64_t w)
{
	for (uint64_t k = 0; k < r->n && k < HASHREG_MAX; k++)
		if (w >= r->lo[k] && w < r->hi[k])
			return 1;
	return 0;
}
