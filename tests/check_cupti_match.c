/*
 * check_cupti_match.c: tying CUPTI activity records to ebb's operations.
 */
#include "config.h"

#include <check.h>
#include <stdlib.h>

#include "match.h"
#include "testutil.h"

struct got {
	uint64_t seq[16], start[16];
	int n;
};

static void
collect(uint64_t seq, uint64_t start, uint64_t end, void *ctx)
{
	struct got *g = ctx;
	(void)end;
	g->seq[g->n] = seq;
	g->start[g->n] = start;
	g->n++;
}

/* A kernel launched by a direct driver call carries that call's correlation id. */
START_TEST(direct_driver_calls)
{
	struct cm_ext ext[] = { { 11, 100 }, { 12, 101 } };
	struct cm_api api[] = { { 11, 7, 0, 10, 20 }, { 12, 7, 0, 30, 40 } };
	struct cm_act act[] = { { 12, 500, 600 }, { 11, 400, 450 }, { 99, 1, 2 } };
	struct cm_stats st;
	struct got g = { .n = 0 };

	ck_assert_int_eq(cupti_match(ext, 2, api, 2, act, 3, NULL, 0, collect, &g, &st), 0);
	ck_assert_int_eq(g.n, 2);
	ck_assert_uint_eq(g.seq[0], 101);
	ck_assert_uint_eq(g.start[0], 500);
	ck_assert_uint_eq(g.seq[1], 100);
	ck_assert_uint_eq(st.direct, 2);
	ck_assert_uint_eq(st.nested, 0);
	ck_assert_uint_eq(st.unmatched, 1);
}
END_TEST

/*
 * Through libcudart: the activity carries the runtime call's id; the driver
 * call nested in it on the same thread carries ebb's id. A runtime call on
 * another thread at the same time, and one with no tagged driver call in
 * it, match nothing.
 */
START_TEST(through_the_runtime)
{
	struct cm_ext ext[] = { { 21, 7 }, { 23, 8 } };
	struct cm_api api[] = {
		{ 20, 1, 1, 100, 200 },		/* cudaLaunchKernel on thread 1 */
		{ 21, 1, 0, 120, 180 },		/*   cuLaunchKernel in it, seq 7 */
		{ 22, 2, 1, 110, 190 },		/* cudaMemsetAsync on thread 2 */
		{ 23, 2, 0, 300, 310 },		/* a later driver call on thread 2, seq 8 */
		{ 24, 1, 1, 250, 260 },		/* a runtime call with nothing of ebb's in it */
		{ 25, 1, 0, 205, 210 },		/* driver call outside any runtime call, untagged */
	};
	struct cm_act act[] = { { 20, 1000, 1100 }, { 22, 1200, 1300 }, { 24, 1400, 1500 },
		{ 23, 1600, 1700 } };
	struct cm_stats st;
	struct got g = { .n = 0 };

	ck_assert_int_eq(cupti_match(ext, 2, api, 6, act, 4, NULL, 0, collect, &g, &st), 0);
	ck_assert_int_eq(g.n, 2);
	ck_assert_uint_eq(g.seq[0], 7);
	ck_assert_uint_eq(g.start[0], 1000);
	ck_assert_uint_eq(g.seq[1], 8);
	ck_assert_uint_eq(st.nested, 1);
	ck_assert_uint_eq(st.direct, 1);
	ck_assert_uint_eq(st.unmatched, 2);
}
END_TEST

/*
 * CUPTI may not report the driver call inside a runtime call: then the
 * operation stamped inside the runtime call is the one, if it is alone there.
 */
START_TEST(through_the_stamp)
{
	struct cm_api api[] = {
		{ 30, 1, 1, 100, 200 },		/* cudaLaunchKernel */
		{ 31, 2, 1, 300, 400 },		/* cudaMemcpyAsync: two stamps inside */
		{ 32, 2, 1, 500, 600 },		/* a runtime call with no stamp inside */
	};
	struct cm_act act[] = { { 30, 1000, 1100 }, { 31, 1200, 1300 }, { 32, 1400, 1500 } };
	struct cm_op ops[] = { { 350, 12 }, { 150, 11 }, { 360, 13 } };
	struct cm_stats st;
	struct got g = { .n = 0 };

	ck_assert_int_eq(cupti_match(NULL, 0, api, 3, act, 3, ops, 3, collect, &g, &st), 0);
	ck_assert_int_eq(g.n, 1);
	ck_assert_uint_eq(g.seq[0], 11);
	ck_assert_uint_eq(st.timed, 1);
	ck_assert_uint_eq(st.unmatched, 2);
}
END_TEST

START_TEST(nothing_to_match)
{
	struct cm_stats st;
	struct got g = { .n = 0 };

	ck_assert_int_eq(cupti_match(NULL, 0, NULL, 0, NULL, 0, NULL, 0, collect, &g, &st), 0);
	ck_assert_int_eq(g.n, 0);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("cupti_match");
	TCase *tc = tcase_create("match");

	add_test(tc, direct_driver_calls);
	add_test(tc, through_the_runtime);
	add_test(tc, through_the_stamp);
	add_test(tc, nothing_to_match);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
