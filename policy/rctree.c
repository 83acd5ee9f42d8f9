/*
 * rctree.c: the memory at each operation, as a segment tree (rctree.h).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "plan_internal.h"
#include "rctree.h"

/* Free what a tree holds, and empty it. */
void
rc_tree_free(struct rc_tree *t)
{
	free(t->mx);
	free(t->lz);
	memset(t, 0, sizeof *t);
}

/* The tree of the memory each buffer's lifetime adds at each of p's
 * operations (as prof_peak counts it, fixed aside). Returns 0, or -1 when
 * out of memory. */
int
rc_tree_build(const struct prof *p, struct rc_tree *t)
{
	uint32_t n = p->nops;
	int64_t *diff = malloc(((size_t)n + 1) * sizeof *diff);

	t->size = 1;
	while (t->size < n)
		t->size *= 2;
	t->mx = malloc(2 * (size_t)t->size * sizeof *t->mx);
	t->lz = calloc(2 * (size_t)t->size, sizeof *t->lz);
	if (diff == NULL || t->mx == NULL || t->lz == NULL) {
		free(diff);
		rc_tree_free(t);
		return -1;
	}
	prof_base_diff(p, diff);
	int64_t run = 0;
	for (uint32_t i = 0; i < t->size; i++) {
		run += i < n ? diff[i] : 0;
		t->mx[t->size + i] = i < n ? run : INT64_MIN / 4;
	}
	for (uint32_t v = t->size - 1; v > 0; v--)
		t->mx[v] = t->mx[2 * v] > t->mx[2 * v + 1] ? t->mx[2 * v] : t->mx[2 * v + 1];
	free(diff);
	return 0;
}

/* Add a to the operations [lo, hi] under node v, whose range is [vl, vr]. */
static void
add(struct rc_tree *t, uint32_t v, uint32_t vl, uint32_t vr, uint32_t lo, uint32_t hi,
    int64_t a)
{
	if (hi < vl || vr < lo)
		return;
	if (lo <= vl && vr <= hi) {
		t->mx[v] += a;
		t->lz[v] += a;
		return;
	}
	uint32_t mid = vl + (vr - vl) / 2;
	add(t, 2 * v, vl, mid, lo, hi, a);
	add(t, 2 * v + 1, mid + 1, vr, lo, hi, a);
	int64_t m = t->mx[2 * v] > t->mx[2 * v + 1] ? t->mx[2 * v] : t->mx[2 * v + 1];
	t->mx[v] = m + t->lz[v];
}

/* The most memory at the operations [lo, hi] under node v, whose range is
 * [vl, vr] (INT64_MIN / 4 when they do not meet). */
static int64_t
max_of(const struct rc_tree *t, uint32_t v, uint32_t vl, uint32_t vr, uint32_t lo, uint32_t hi)
{
	if (hi < vl || vr < lo)
		return INT64_MIN / 4;
	if (lo <= vl && vr <= hi)
		return t->mx[v];
	uint32_t mid = vl + (vr - vl) / 2;
	int64_t a = max_of(t, 2 * v, vl, mid, lo, hi), b = max_of(t, 2 * v + 1, mid + 1, vr, lo, hi);
	return (a > b ? a : b) + t->lz[v];
}

void
rc_tree_add(struct rc_tree *t, uint32_t lo, uint32_t hi, int64_t a)
{
	add(t, 1, 0, t->size - 1, lo, hi, a);
}

int64_t
rc_tree_max(const struct rc_tree *t, uint32_t lo, uint32_t hi)
{
	return max_of(t, 1, 0, t->size - 1, lo, hi);
}

/* The first operation where the memory is at its most. */
uint32_t
rc_tree_argmax(const struct rc_tree *t)
{
	uint32_t v = 1;

	while (v < t->size)
		v = t->mx[2 * v] >= t->mx[2 * v + 1] ? 2 * v : 2 * v + 1;
	return v - t->size;
}
