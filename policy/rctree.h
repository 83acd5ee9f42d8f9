/*
 * rctree.h: the memory at each operation of a profile (plan.h), as rc_choose
 * (recompute.h) changes it: a segment tree with an addition over a range of
 * operations and the largest value over a range, each in the logarithm of
 * the operations.
 *
 * Pure C: no CUDA, no I/O, no globals, no threads, no clocks.
 */
#ifndef EBB_RCTREE_H
#define EBB_RCTREE_H

#include <stdint.h>

#include "plan.h"

/* size leaves (a power of two), node 1 the root; mx[v]: the largest value
 * under v, lz[v] included; lz[v]: what was added to the whole of v's range.
 * mx[1] is the largest of all. */
struct rc_tree {
	uint32_t size;
	int64_t *mx, *lz;
};

/* The memory each buffer's lifetime adds at each of p's operations (as
 * prof_peak counts it, fixed aside) into t. Returns 0, or -1 when out of
 * memory (t empty). */
int rc_tree_build(const struct prof *p, struct rc_tree *t);

/* Free what t holds, and empty it. */
void rc_tree_free(struct rc_tree *t);

/* Add a to the operations lo .. hi. */
void rc_tree_add(struct rc_tree *t, uint32_t lo, uint32_t hi, int64_t a);

/* The largest value at the operations lo .. hi (INT64_MIN / 4 when the
 * range holds none of the tree's). */
int64_t rc_tree_max(const struct rc_tree *t, uint32_t lo, uint32_t hi);

/* The first operation where the value is the largest. */
uint32_t rc_tree_argmax(const struct rc_tree *t);

#endif
