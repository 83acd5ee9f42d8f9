/*
 * check_iter.c: the iteration finder on synthetic operation sequences.
 */
#include "config.h"

#include <check.h>
#include <stdlib.h>

#include "iter.h"
#include "testutil.h"

/* L(P) by brute force. */
static size_t
brute_len(const uint32_t *t, size_t n, size_t p)
{
	size_t k = 0;
	while (k + p < n && t[n - 1 - k] == t[n - 1 - k - p])
		k++;
	return p + k;
}

START_TEST(periodic_suffixes_match_brute_force)
{
	unsigned seed = 7;
	uint32_t t[300];
	int32_t z[300];
	size_t len[300];

	for (int round = 0; round < 200; round++) {
		size_t n = 1 + (size_t)(rand_r(&seed) % 300);
		unsigned alphabet = 1 + (unsigned)(rand_r(&seed) % 3);
		size_t per = 1 + (size_t)(rand_r(&seed) % 20);
		for (size_t i = 0; i < n; i++)
			t[i] = (i >= n / 3 && i >= per) ? t[i - per] : (uint32_t)(rand_r(&seed) % alphabet);
		iter_periodic_suffixes(t, n, z, len);
		for (size_t p = 1; p < n; p++)
			ck_assert_uint_eq(len[p], brute_len(t, n, p));
	}
}
END_TEST

/* Push tokens, counting events; returns the last event seen. */
struct counts {
	int found, start, departed, gave_up, resumed;
	size_t found_at;	/* token index of the last ITER_FOUND */
	size_t resumed_at;	/* of the last ITER_RESUMED */
	size_t last_start;	/* token index of the last ITER_START */
	size_t start_after_found;	/* of the first ITER_START after the last ITER_FOUND */
	int started;		/* an ITER_START since the last ITER_FOUND */
};

static void
push_live(struct iter_finder *f, struct counts *c, uint32_t tok, int sync, size_t index,
    uint64_t live)
{
	switch (iter_push(f, tok, sync, live)) {
	case ITER_FOUND: c->found++; c->found_at = index; c->started = 0; break;
	case ITER_START:
		c->start++;
		c->last_start = index;
		if (!c->started)
			c->start_after_found = index;
		c->started = 1;
		break;
	case ITER_DEPARTED: c->departed++; break;
	case ITER_GAVE_UP: c->gave_up++; break;
	case ITER_RESUMED: c->resumed++; c->resumed_at = index; break;
	default: break;
	}
}

/* Push with memory that stays the same. */
static void
push(struct iter_finder *f, struct counts *c, uint32_t tok, int sync, size_t index)
{
	push_live(f, c, tok, sync, index, 1 << 20);
}

START_TEST(simple_period_and_phase_after_sync)
{
	struct iter_finder f;
	struct counts c = { 0 };

	ck_assert_int_eq(iter_init(&f, 10000, 2), 0);
	/* warm-up of 11 odd tokens, then a period of 5 whose 4th token is a sync */
	size_t i = 0;
	for (; i < 11; i++)
		push(&f, &c, 1000 + (uint32_t)i, 0, i);
	for (int k = 0; k < 200; k++, i++) {
		unsigned ph = (unsigned)(k % 5);
		push(&f, &c, 10 + ph, ph == 3, i);
	}
	ck_assert_int_eq(c.found, 1);
	ck_assert_int_eq(c.departed, 0);
	ck_assert_uint_eq(iter_period(&f), 5);
	/* iterations start right after the sync: phase 4 */
	ck_assert_uint_eq((c.last_start - 11) % 5, 4);
	ck_assert_uint_eq((f.found_first - 11) % 5, 4);
	iter_fini(&f);
}
END_TEST

/*
 * Gradient accumulation: 8 identical micro-batches and an optimizer step
 * that ends with a sync. The micro-batch may be taken for the iteration
 * while only micro-batches have been seen, but once whole iterations have
 * been, the period is the iteration and starts after the optimizer step.
 */
START_TEST(accumulation_finds_the_whole_iteration)
{
	struct iter_finder f;
	struct counts c = { 0 };
	const size_t mb = 23, opt = 9, iter = 8 * mb + opt;

	ck_assert_int_eq(iter_init(&f, 100000, 2), 0);
	size_t i = 0;
	for (; i < 4; i++)
		push(&f, &c, 5000 + (uint32_t)i, 0, i);
	for (int it = 0; it < 8; it++) {
		for (int m = 0; m < 8; m++)
			for (size_t k = 0; k < mb; k++, i++)
				push(&f, &c, 100 + (uint32_t)k, 0, i);
		for (size_t k = 0; k < opt; k++, i++)
			push(&f, &c, 300 + (uint32_t)k, k == opt - 1, i);
	}
	ck_assert_uint_eq(iter_period(&f), iter);
	ck_assert_int_le(c.departed, 1);
	ck_assert_int_ge(c.start, 3);
	/* the last start is the first micro-batch token after an optimizer step */
	ck_assert_uint_eq((c.last_start - 4) % iter, 0);
	iter_fini(&f);
}
END_TEST

/*
 * The same loop after a warm-up that ends with a sync (torch.cuda.synchronize
 * before the loop), each micro-batch starting with a synchronous copy (its
 * input from pageable memory): the micro-batch, which has no explicit sync,
 * is never taken for the iteration, so there is no departure at the first
 * optimizer step.
 */
START_TEST(accumulation_never_takes_the_micro_batch)
{
	struct iter_finder f;
	struct counts c = { 0 };
	const size_t mb = 23, opt = 9, iter = 8 * mb + opt;

	ck_assert_int_eq(iter_init(&f, 100000, 2), 0);
	size_t i = 0;
	for (; i < 4; i++)
		push(&f, &c, 5000 + (uint32_t)i, i == 3 ? ITER_SYNC : ITER_NOSYNC, i);
	for (int it = 0; it < 8; it++) {
		for (int m = 0; m < 8; m++)
			for (size_t k = 0; k < mb; k++, i++)
				push(&f, &c, 100 + (uint32_t)k, k == 0 ? ITER_SYNC_OP : ITER_NOSYNC, i);
		for (size_t k = 0; k < opt; k++, i++)
			push(&f, &c, 300 + (uint32_t)k, k == opt - 1 ? ITER_SYNC : ITER_NOSYNC, i);
	}
	ck_assert_int_eq(c.found, 1);
	ck_assert_int_eq(c.departed, 0);
	ck_assert_uint_eq(iter_period(&f), iter);
	iter_fini(&f);
}
END_TEST

/*
 * Every micro-batch starts with a synchronous copy and a stream sync (its
 * input from pageable memory), the gradients live from the first
 * micro-batch's backward pass to the optimizer step: the iteration starts
 * where the job holds least (after the optimizer step's sync, or the first
 * micro-batch's, before the gradients exist), not after one of the other
 * micro-batches' syncs.
 */
START_TEST(phase_where_least_is_held)
{
	struct iter_finder f;
	struct counts c = { 0 };
	const size_t mb = 23, opt = 9, iter = 8 * mb + opt;
	const uint64_t weights = 100 << 20, grads = 50 << 20;

	ck_assert_int_eq(iter_init(&f, 100000, 2), 0);
	size_t i = 0;
	for (; i < 4; i++)
		push_live(&f, &c, 5000 + (uint32_t)i, i == 3 ? ITER_SYNC : ITER_NOSYNC, i, weights);
	for (int it = 0; it < 8; it++) {
		for (int m = 0; m < 8; m++)
			for (size_t k = 0; k < mb; k++, i++)
				push_live(&f, &c, 100 + (uint32_t)k, k == 0 ? ITER_SYNC : ITER_NOSYNC, i,
				    weights + (m > 0 || k > mb / 2 ? grads : 0));
		for (size_t k = 0; k < opt; k++, i++)
			push_live(&f, &c, 300 + (uint32_t)k, k == opt - 1 ? ITER_SYNC : ITER_NOSYNC, i,
			    weights + (k < opt - 2 ? grads : 0));
	}
	ck_assert_uint_eq(iter_period(&f), iter);
	/* iterations start after the optimizer step's sync or after the first
	 * micro-batch's (where as little is held), never inside the others */
	ck_assert_uint_le((c.last_start - 4) % iter, 1);
	ck_assert_uint_le((f.found_first - 4) % iter, 1);
	iter_fini(&f);
}
END_TEST

/*
 * Iterations of 17 tokens, the last a sync; every `every` iterations (from
 * the 30th) one token more in the middle of one (a step of its own: a log
 * line), n iterations in all, detours allowed (a plan follows) where
 * detour; into c.
 */
static void
with_detours(struct iter_finder *f, struct counts *c, int every, int n, int detour)
{
	size_t i = 0;

	ck_assert_int_eq(iter_init(f, 100000, 2), 0);
	for (int it = 0; it < n; it++)
		for (int k = 0; k < 17; k++) {
			f->detour_ok = detour;
			if (it >= 30 && it % every == 0 && k == 8)
				push(f, c, 999, 0, i++);
			push(f, c, 1 + (uint32_t)k, k == 16 ? ITER_SYNC : ITER_NOSYNC, i++);
		}
}

/*
 * A detour: a departure from the iteration a plan follows, and the job back
 * in it. It is followed again once a whole iteration has matched from its
 * start (the token ending the iteration after the one with the token more),
 * with nothing found again, and iterations start where they did; each such
 * detour alike. Without detours allowed, each departure is learned again.
 */
START_TEST(detour_resumes)
{
	struct iter_finder f;
	struct counts c = { 0 };

	with_detours(&f, &c, 40, 200, 1);
	ck_assert_int_eq(c.found, 1);
	ck_assert_int_eq(c.departed, 4);	/* at iterations 40, 80, 120 and 160 */
	ck_assert_int_eq(c.resumed, 4);
	ck_assert_uint_eq(iter_period(&f), 17);
	/* resumed at the end of iteration 161 (after the 4 tokens more) */
	ck_assert_uint_eq(c.resumed_at, 162 * 17 + 4 - 1);
	ck_assert_uint_eq((c.last_start - 4) % 17, 0);
	iter_fini(&f);

	struct counts d = { 0 };
	with_detours(&f, &d, 40, 200, 0);
	ck_assert_int_eq(d.resumed, 0);
	ck_assert_int_ge(d.departed, 1);
	ck_assert_int_eq(d.found, d.departed + 1);
	iter_fini(&f);
}
END_TEST

/*
 * A token more every 4 iterations: once the history holds a period of its
 * own (4 iterations and the token) as a half of it at least (iter.h: the
 * 30 iterations before the first detour delay that), within
 * ITER_DETOUR_SPAN of the iteration, it is found, and followed from then on,
 * as the whole step is after a micro-batch taken for the iteration. Every
 * 20 iterations, it is not: the iteration is followed again after each.
 */
START_TEST(detour_within_a_longer_period)
{
	struct iter_finder f;
	struct counts c = { 0 };

	with_detours(&f, &c, 4, 200, 1);
	ck_assert_int_eq(c.found, 2);
	ck_assert_uint_eq(iter_period(&f), 4 * 17 + 1);
	ck_assert_int_eq(c.resumed, c.departed - 1);
	iter_fini(&f);

	struct counts d = { 0 };
	with_detours(&f, &d, 20, 400, 1);
	ck_assert_int_eq(d.found, 1);
	ck_assert_int_eq(d.resumed, d.departed);
	ck_assert_int_ge(d.resumed, 15);
	ck_assert_uint_eq(iter_period(&f), 17);
	iter_fini(&f);
}
END_TEST

/* A job that changes for good: the detour ends ITER_DETOUR_SPAN iterations
 * after the departure, and the new iteration is found. */
START_TEST(detour_that_never_comes_back)
{
	struct iter_finder f;
	struct counts c = { 0 };
	size_t i = 0;

	ck_assert_int_eq(iter_init(&f, 100000, 2), 0);
	for (int it = 0; it < 40; it++)
		for (int k = 0; k < 17; k++) {
			f.detour_ok = 1;
			push(&f, &c, 1 + (uint32_t)k, k == 16 ? ITER_SYNC : ITER_NOSYNC, i++);
		}
	for (int it = 0; it < 100; it++)
		for (int k = 0; k < 300; k++) {
			f.detour_ok = 1;
			push(&f, &c, 500 + (uint32_t)k, k == 299 ? ITER_SYNC : ITER_NOSYNC, i++);
		}
	ck_assert_int_eq(c.departed, 1);
	ck_assert_int_eq(c.resumed, 0);
	ck_assert_int_eq(c.found, 2);
	ck_assert_uint_eq(iter_period(&f), 300);
	iter_fini(&f);
}
END_TEST

START_TEST(departure_and_relearn)
{
	struct iter_finder f;
	struct counts c = { 0 };

	ck_assert_int_eq(iter_init(&f, 100000, 2), 0);
	size_t i = 0;
	for (int k = 0; k < 400; k++, i++)
		push(&f, &c, 1 + (uint32_t)(k % 17), k % 17 == 16, i);
	ck_assert_uint_eq(iter_period(&f), 17);
	push(&f, &c, 999, 0, i++);	/* something new */
	ck_assert_int_eq(c.departed, 1);
	ck_assert_uint_eq(iter_period(&f), 0);
	for (int k = 0; k < 2000; k++, i++)
		push(&f, &c, 1 + (uint32_t)(k % 17), k % 17 == 16, i);
	ck_assert_uint_eq(iter_period(&f), 17);
	ck_assert_int_eq(c.found, 2);
	iter_fini(&f);
}
END_TEST

/*
 * The micro-batch taken for the iteration (no sync before the first
 * optimizer step), departed from at that step. The whole iteration is found
 * as soon as it has been seen twice (not up to n / 8 tokens later, where a
 * long history makes that most of an iteration), so its first start is the
 * third step's: the one right after the second optimizer step after the
 * departure, whose sync ends it a few tokens after the iteration completes.
 */
START_TEST(found_as_soon_as_seen_twice)
{
	struct iter_finder f;
	struct counts c = { 0 };
	const size_t warm = 600, mb = 230, init = 5, opt = 90, iter = 8 * mb + opt;

	ck_assert_int_eq(iter_init(&f, 100000, 2), 0);
	size_t i = 0, begin[8];
	for (; i < warm; i++)
		push(&f, &c, 5000 + (uint32_t)i, 0, i);
	for (int it = 0; it < 8; it++) {
		begin[it] = i;
		for (int m = 0; m < 8; m++)
			for (size_t k = 0; k < mb; k++, i++)
				push(&f, &c, 100 + (uint32_t)k, 0, i);
		if (it == 0) {	/* the micro-batch, found without a sync */
			ck_assert_uint_eq(iter_period(&f), mb);
			ck_assert_int_eq(f.synced, 0);
		}
		for (size_t k = 0; it == 0 && k < init; k++, i++)	/* the state's first use */
			push(&f, &c, 700 + (uint32_t)k, 0, i);
		for (size_t k = 0; k < opt; k++, i++)
			push(&f, &c, 300 + (uint32_t)k, k == opt - 1 ? ITER_SYNC : 0, i);
		if (it == 2)
			ck_assert_int_eq(c.found, 2);	/* before step 2's sync */
	}
	ck_assert_int_eq(c.departed, 1);
	ck_assert_uint_eq(iter_period(&f), iter);
	ck_assert_int_eq(f.synced, 1);
	ck_assert_uint_eq(c.start_after_found, begin[3]);
	iter_fini(&f);
}
END_TEST

/*
 * A JAX loop: a start that synchronises (compilation, the parameters'
 * transfer), then steps with no sync ebb sees. After ITER_NOSYNC_REPS
 * steps the step is the iteration; an accumulation loop of 8 micro-batches
 * without syncs, whose optimizer step ends with one, is not taken for its
 * micro-batch all the same (8 repetitions are too few).
 */
START_TEST(steps_without_sync_after_a_synced_start)
{
	struct iter_finder f;
	struct counts c = { 0 };
	const size_t step = 37;

	ck_assert_int_eq(iter_init(&f, 100000, 2), 0);
	size_t i = 0;
	for (; i < 50; i++)
		push(&f, &c, 7000 + (uint32_t)i, i % 10 == 9 ? ITER_SYNC : ITER_NOSYNC, i);
	for (int it = 0; it < ITER_NOSYNC_REPS - 2; it++)
		for (size_t k = 0; k < step; k++, i++)
			push(&f, &c, 100 + (uint32_t)k, ITER_NOSYNC, i);
	ck_assert_int_eq(c.found, 0);
	for (int it = 0; it < 8; it++)
		for (size_t k = 0; k < step; k++, i++)
			push(&f, &c, 100 + (uint32_t)k, ITER_NOSYNC, i);
	ck_assert_int_eq(c.found, 1);
	ck_assert_uint_eq(iter_period(&f), step);
	ck_assert_int_eq(f.synced, 0);
	ck_assert_int_eq(f.nosync_accepted, 1);
	iter_fini(&f);

	/* accumulation: micro-batches without syncs, an optimizer step with one */
	struct counts d = { 0 };
	const size_t mb = 23, opt = 9, iter = 8 * mb + opt;
	ck_assert_int_eq(iter_init(&f, 100000, 2), 0);
	i = 0;
	for (; i < 4; i++)
		push(&f, &d, 5000 + (uint32_t)i, i == 3 ? ITER_SYNC : ITER_NOSYNC, i);
	for (int it = 0; it < 6; it++) {
		for (int m = 0; m < 8; m++)
			for (size_t k = 0; k < mb; k++, i++)
				push(&f, &d, 100 + (uint32_t)k, ITER_NOSYNC, i);
		for (size_t k = 0; k < opt; k++, i++)
			push(&f, &d, 300 + (uint32_t)k, k == opt - 1 ? ITER_SYNC : ITER_NOSYNC, i);
	}
	ck_assert_int_eq(d.departed, 0);
	ck_assert_uint_eq(iter_period(&f), iter);
	iter_fini(&f);

	/* 20 micro-batches: the micro-batch is taken for the iteration, once;
	 * the optimizer step's sync refutes it, and the iteration is found */
	struct counts e = { 0 };
	const size_t iter20 = 20 * mb + opt;
	ck_assert_int_eq(iter_init(&f, 100000, 2), 0);
	i = 0;
	for (; i < 4; i++)
		push(&f, &e, 5000 + (uint32_t)i, i == 3 ? ITER_SYNC : ITER_NOSYNC, i);
	for (int it = 0; it < 6; it++) {
		for (int m = 0; m < 20; m++)
			for (size_t k = 0; k < mb; k++, i++)
				push(&f, &e, 100 + (uint32_t)k, ITER_NOSYNC, i);
		for (size_t k = 0; k < opt; k++, i++)
			push(&f, &e, 300 + (uint32_t)k, k == opt - 1 ? ITER_SYNC : ITER_NOSYNC, i);
	}
	ck_assert_int_eq(e.departed, 1);
	ck_assert_int_eq(f.nosync_refuted, 1);
	ck_assert_uint_eq(iter_period(&f), iter20);
	iter_fini(&f);
}
END_TEST

START_TEST(gives_up_without_a_period)
{
	struct iter_finder f;
	struct counts c = { 0 };
	unsigned seed = 99;

	ck_assert_int_eq(iter_init(&f, 5000, 2), 0);
	for (size_t i = 0; i < 6000; i++)
		push(&f, &c, (uint32_t)rand_r(&seed), 0, i);
	ck_assert_int_eq(c.gave_up, 1);
	ck_assert_int_eq(c.found, 0);
	ck_assert_uint_eq(iter_period(&f), 0);
	iter_fini(&f);
}
END_TEST

/*
 * What repeats before and inside a training step is not the iteration:
 * initialising parameters one after another (a sync each) and the layers
 * of the forward pass keep allocating, the backward pass keeps freeing.
 */
START_TEST(patterns_that_hold_memory_are_not_iterations)
{
	struct iter_finder f;
	struct counts c = { 0 };
	uint64_t live = 0;
	size_t i = 0;
	const int layers = 22;

	ck_assert_int_eq(iter_init(&f, 100000, 2), 0);
	for (int p = 0; p < 200; p++) {		/* init: alloc, launch, sync */
		live += 4096;
		push_live(&f, &c, 1, 0, i++, live);
		push_live(&f, &c, 2, 1, i++, live);
	}
	ck_assert_int_eq(c.found, 0);
	uint64_t base = live;
	for (int step = 0; step < 6; step++) {
		for (int l = 0; l < layers; l++)	/* forward: each layer keeps its activations */
			for (uint32_t k = 0; k < 9; k++) {
				live += k == 0 ? 1000 : 0;
				push_live(&f, &c, 10 + k, 0, i++, live);
			}
		for (int l = 0; l < layers; l++)	/* backward frees them */
			for (uint32_t k = 0; k < 12; k++) {
				live -= k == 11 ? 1000 : 0;
				push_live(&f, &c, 30 + k, 0, i++, live);
			}
		for (uint32_t k = 0; k < 5; k++)	/* optimizer and loss.item() */
			push_live(&f, &c, 60 + k, k == 4, i++, live);
		ck_assert_uint_eq(live, base);
		/* found once two steps are whole, not before, and never a part */
		ck_assert_int_eq(c.found, step > 0);
		if (c.found)
			ck_assert_uint_eq(iter_period(&f), (size_t)layers * 21 + 5);
	}
	ck_assert_int_eq(c.found, 1);
	ck_assert_int_eq(c.departed, 0);
	ck_assert_uint_eq(iter_period(&f), (size_t)layers * 21 + 5);
	iter_fini(&f);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("iter");
	TCase *tc = tcase_create("iter");

	add_test(tc, periodic_suffixes_match_brute_force);
	add_test(tc, simple_period_and_phase_after_sync);
	add_test(tc, accumulation_finds_the_whole_iteration);
	add_test(tc, departure_and_relearn);
	add_test(tc, found_as_soon_as_seen_twice);
	add_test(tc, accumulation_never_takes_the_micro_batch);
	add_test(tc, phase_where_least_is_held);
	add_test(tc, gives_up_without_a_period);
	add_test(tc, steps_without_sync_after_a_synced_start);
	add_test(tc, patterns_that_hold_memory_are_not_iterations);
	add_test(tc, detour_resumes);
	add_test(tc, detour_within_a_longer_period);
	add_test(tc, detour_that_never_comes_back);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
