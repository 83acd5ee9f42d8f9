/*
 * check_hashreg.c: the regions whose words the probe counts as pointers
 * (src/exec/hashreg.h): aligned, sorted, joined where they touch, the
 * nearest two joined past the most, and every added byte inside one, on
 * hand-made cases and against a slow check on random ones.
 */
#include "config.h"

#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hashreg.h"
#include "testutil.h"

#define G HASHREG_ALIGN

/* r's regions are sorted, disjoint, not adjacent, aligned. */
static void
well_formed(const struct hashreg *r)
{
	ck_assert_uint_le(r->n, HASHREG_MAX);
	for (uint64_t k = 0; k < r->n; k++) {
		ck_assert_uint_lt(r->lo[k], r->hi[k]);
		ck_assert_uint_eq(r->lo[k] % G, 0);
		ck_assert_uint_eq(r->hi[k] % G, 0);
		if (k > 0)
			ck_assert_uint_gt(r->lo[k], r->hi[k - 1]);
	}
}

START_TEST(one_buffer_one_aligned_region)
{
	struct hashreg r;
	memset(&r, 0, sizeof r);
	ck_assert_int_eq(hashreg_has(&r, 5 * G), 0);
	hashreg_add(&r, 5 * G + 4096, 1 << 20);
	ck_assert_uint_eq(r.n, 1);
	ck_assert_uint_eq(r.lo[0], 5 * G);
	ck_assert_uint_eq(r.hi[0], 6 * G);
	ck_assert_int_eq(hashreg_has(&r, 5 * G), 1);
	ck_assert_int_eq(hashreg_has(&r, 6 * G - 8), 1);
	ck_assert_int_eq(hashreg_has(&r, 6 * G), 0);
	ck_assert_int_eq(hashreg_has(&r, 5 * G - 1), 0);
	/* a buffer across a boundary: both its regions, and they touch the first */
	hashreg_add(&r, 7 * G - 4096, 8192);
	ck_assert_uint_eq(r.n, 1);
	ck_assert_uint_eq(r.hi[0], 8 * G);
	hashreg_add(&r, 9 * G + 4096, 4096);
	ck_assert_uint_eq(r.n, 2);
	ck_assert_uint_eq(r.lo[1], 9 * G);
	ck_assert_int_eq(hashreg_has(&r, 8 * G + 4096), 0);
	well_formed(&r);
}
END_TEST

START_TEST(touching_regions_join)
{
	struct hashreg r;
	memset(&r, 0, sizeof r);
	hashreg_add(&r, 10 * G, G);
	hashreg_add(&r, 12 * G, 16);
	ck_assert_uint_eq(r.n, 2);
	hashreg_add(&r, 11 * G + 100, 16);	/* between: the three are one */
	ck_assert_uint_eq(r.n, 1);
	ck_assert_uint_eq(r.lo[0], 10 * G);
	ck_assert_uint_eq(r.hi[0], 13 * G);
	hashreg_add(&r, 10 * G + 5, 3 * G - 5);	/* inside: nothing changes */
	ck_assert_uint_eq(r.n, 1);
	ck_assert_uint_eq(r.hi[0], 13 * G);
	hashreg_add(&r, 10 * G + 5, 3 * G);	/* one byte past: a region more */
	ck_assert_uint_eq(r.hi[0], 14 * G);
	/* the words between two far regions are outside both */
	hashreg_add(&r, 0x7f0000000000ULL, 4096);
	ck_assert_uint_eq(r.n, 2);
	ck_assert_int_eq(hashreg_has(&r, 0x200000000000ULL), 0);
	well_formed(&r);
}
END_TEST

START_TEST(past_the_most_the_nearest_join)
{
	struct hashreg r;
	memset(&r, 0, sizeof r);
	/* regions at 4G apart, but 20 and 22 only 2G apart */
	for (uint64_t k = 0; k < HASHREG_MAX; k++)
		hashreg_add(&r, (k == HASHREG_MAX - 1 ? 22 : 4 * k) * G, 1);
	ck_assert_uint_eq(r.n, HASHREG_MAX);
	hashreg_add(&r, 100 * G, 1);
	ck_assert_uint_eq(r.n, HASHREG_MAX);
	well_formed(&r);
	/* 20G's and 22G's regions (4 * 5 and the last of the first 16) joined,
	 * the gap with them */
	ck_assert_int_eq(hashreg_has(&r, 21 * G), 1);
	ck_assert_int_eq(hashreg_has(&r, 2 * G), 0);
	ck_assert_int_eq(hashreg_has(&r, 100 * G), 1);
}
END_TEST

START_TEST(random_adds_cover_every_buffer)
{
	srand(7);
	for (int trial = 0; trial < 200; trial++) {
		struct hashreg r;
		uint64_t a[64], s[64];
		memset(&r, 0, sizeof r);
		int n = 1 + rand() % 64;
		for (int i = 0; i < n; i++) {
			a[i] = ((uint64_t)(rand() % 4096) << 30) + (uint64_t)rand() * 64;
			s[i] = (uint64_t)(rand() % 3 == 0 ? rand() % (3 * (int)(G >> 20)) : 1) << 20;
			hashreg_add(&r, a[i], s[i]);
			well_formed(&r);
			for (int j = 0; j <= i; j++) {
				ck_assert_int_eq(hashreg_has(&r, a[j]), 1);
				ck_assert_int_eq(hashreg_has(&r, a[j] + (s[j] ? s[j] - 1 : 0)), 1);
			}
		}
		/* within the most: a region is the aligned cover of some buffers */
		if (n <= HASHREG_MAX)
			for (uint64_t k = 0; k < r.n; k++) {
				int starts = 0;
				for (int j = 0; j < n; j++)
					starts |= (a[j] & ~(G - 1)) == r.lo[k];
				ck_assert(starts);
			}
	}
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("hashreg");
	TCase *tc = tcase_create("hashreg");
	add_test(tc, one_buffer_one_aligned_region);
	add_test(tc, touching_regions_join);
	add_test(tc, past_the_most_the_nearest_join);
	add_test(tc, random_adds_cover_every_buffer);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
