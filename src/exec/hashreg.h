/*
 * hashreg.h: the device address regions whose words the probe's hash
 * counts as pointers (hash.cu). A table of pointers holds addresses of
 * tracked buffers; data rarely holds words inside the few regions those
 * buffers occupy, though it often holds words between them (pairs of
 * 32-bit integers, runs of 16-bit floats with a zero): counting the words
 * inside [lowest, highest tracked address) alone takes activations for
 * tables.
 *
 * Each region is HASHREG_ALIGN aligned at both ends and covers whole
 * buffers; regions are sorted, disjoint and not adjacent. Past HASHREG_MAX
 * the two nearest are joined with the gap between them, so a buffer's
 * address is inside some region whatever the count: the test may count
 * more words than pointers, never fewer. Included by hash.cu (the struct,
 * passed by value) and by C.
 */
#ifndef EBB_HASHREG_H
#define EBB_HASHREG_H

#define HASHREG_MAX 16
#define HASHREG_ALIGN (1ULL << 30)

struct hashreg {
	unsigned long long lo[HASHREG_MAX];	/* region k is [lo[k], hi[k]) */
	unsigned long long hi[HASHREG_MAX];
	unsigned long long n;			/* regions in use */
};

#ifndef __CUDACC__
#include <stdint.h>

/* Add the region holding [addr, addr + size) (size 0: the byte at addr). */
void hashreg_add(struct hashreg *r, uint64_t addr, uint64_t size);

/* Whether w lies inside one of r's regions. */
int hashreg_has(const struct hashreg *r, uint64_t w);
#endif

#endif
