/*
 * check_replay.c: the gaps a kernel replay can bridge (policy/replay.h) on
 * hand-made profiles whose answer is known, and against the definitions
 * evaluated the slow way on random ones; and the profile's accesses
 * (prof_access, prof_access_of, prof_replayable, and rec_access from a
 * recording's buffer ids). Operation i lasts
 * (i + 1) * 2^-10 s, so every chain's cost is exact in binary.
 */
#include "config.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"
#include "recompute.h"
#include "record.h"
#include "replay.h"
#include "testutil.h"

#define OP (1.0 / 1024)
#define N 20
#define KIB 1024
#define RD PROF_ACC_READ
#define WR PROF_ACC_WRITE
#define UN PROF_ACC_UNKNOWN

static struct prof pr;
static struct replay_set rs;

static void
setup(void)
{
	ck_assert_int_eq(prof_init(&pr, N), 0);
	for (uint32_t i = 0; i < N; i++)
		pr.dur[i] = (i + 1) * OP;
	memset(&rs, 0, sizeof rs);
}

static void
teardown(void)
{
	replay_set_fini(&rs);
	prof_fini(&pr);
}

/* A buffer used as ua says: pairs of operation and PROF_ACC_* (-1 ends the
 * list); an UN use is left unmeasured. */
static uint32_t
buf(uint64_t size, uint32_t alloc, uint32_t free, int movable, const int *ua)
{
	int64_t b = prof_add(&pr, size, (uint64_t)pr.nbufs, alloc, movable);
	ck_assert_int_ge(b, 0);
	for (const int *u = ua; *u >= 0; u += 2) {
		uint32_t op = (uint32_t)u[0];
		ck_assert_int_eq(prof_use(&pr, (uint32_t)b, op), 0);
		if (u[1] != UN)
			ck_assert_int_eq(prof_access(&pr, (uint32_t)b, op, (unsigned)u[1]), 0);
	}
	if (free != PROF_NONE)
		prof_free(&pr, (uint32_t)b, free);
	return (uint32_t)b;
}

/* Operations that can be launched again (-1 ends the list). */
static void
replayable(const int *ops)
{
	for (const int *o = ops; *o >= 0; o++)
		ck_assert_int_eq(prof_replayable(&pr, (uint32_t)*o), 0);
}

/* Find the candidates again, into rs. */
static void
find(uint32_t max_chain, uint64_t min_bytes)
{
	struct replay_params rp = { .max_chain = max_chain, .min_bytes = min_bytes,
		.no_scratch = 1 };

	replay_set_fini(&rs);
	ck_assert_int_eq(replay_find(&pr, &rp, &rs), 0);
}

/* The sum of rs's refusals. */
static uint64_t
refusals(void)
{
	const struct replay_refused *r = &rs.refused;

	return r->unknown + r->wild + r->no_writer + r->first_read + r->too_long + r->not_replayable +
	    r->unknown_other + r->writes_other + r->overwritten + r->freed;
}

/* Candidate i is gap k of buffer b, with window [lo, hi] and chain ops (-1
 * ends it), costing cost operations' units. */
static void
cand_is(uint32_t i, uint32_t b, uint32_t k, uint32_t lo, uint32_t hi, const int *ops,
    double cost)
{
	ck_assert_uint_lt(i, rs.n);
	const struct replay_cand *c = &rs.c[i];
	ck_assert_uint_eq(c->buf, b);
	ck_assert_uint_eq(c->gap, k);
	ck_assert_uint_eq(c->r_lo, lo);
	ck_assert_uint_eq(c->r_hi, hi);
	ck_assert_uint_eq(c->bytes, pr.buf[b].size);
	ck_assert(c->cost_s == cost * OP);
	uint32_t n = 0;
	for (; ops[n] >= 0; n++) {
		ck_assert_uint_lt(n, c->nchain);
		ck_assert_uint_eq(replay_chain(&rs, c)[n], (uint32_t)ops[n]);
	}
	ck_assert_uint_eq(c->nchain, n);
	ck_assert_uint_le(c->chain_first + c->nchain, rs.nops_used);
	ck_assert_uint_eq(rs.considered, rs.n + refusals());
}

/* A norm's output X, from a weight and an activation: recomputable in both
 * its gaps, by the one launch that made it. */
START_TEST(simple_producer)
{
	/* op 0 copies A in (not replayable), op 2 makes X from the weight and A,
	 * op 18 (the optimizer) writes the weight */
	buf(4 * KIB, PROF_NONE, PROF_NONE, 1, (int[]){ 2, RD, 18, WR, -1 });
	buf(4 * KIB, 0, 19, 1, (int[]){ 0, WR, 2, RD, 12, RD, -1 });
	uint32_t x = buf(4 * KIB, 2, 14, 1, (int[]){ 2, WR, 3, RD, 10, RD, -1 });
	replayable((int[]){ 2, -1 });
	find(0, 1);
	ck_assert_uint_eq(rs.n, 2);
	cand_is(0, x, 0, 3, 3, (int[]){ 2, -1 }, 3);
	cand_is(1, x, 1, 4, 10, (int[]){ 2, -1 }, 3);
	ck_assert_uint_eq(rs.c[0].chain_first, rs.c[1].chain_first);
	ck_assert_uint_eq(rs.nops_used, 1);
	/* A's two gaps: its writer is not replayable */
	ck_assert_uint_eq(rs.considered, 4);
	ck_assert_uint_eq(rs.refused.not_replayable, 2);
	uint64_t nb, bytes;
	replay_totals(&rs, &nb, &bytes);
	ck_assert_uint_eq(nb, 1);
	ck_assert_uint_eq(bytes, 4 * KIB);
	/* under min_bytes, nothing is looked at */
	find(0, 8 * KIB);
	ck_assert_uint_eq(rs.n, 0);
	ck_assert_uint_eq(rs.considered, 0);
}
END_TEST

/*
 * An operation that may write what it does not reference (prof_wild: it
 * reads a table of pointers, or was not measured): after a chain operation
 * that reads, it bounds the window as a write of the inputs would; between
 * X's first write and a gap, it refuses the gap (X may have changed
 * unseen); in a chain, it is not replayable. A chain operation without
 * inputs is not bounded by it.
 */
START_TEST(wild_operations)
{
	/* op 2 makes X from A; op 6 is wild; X's next uses are 4, 9 and 12 */
	buf(4 * KIB, 0, 19, 1, (int[]){ 0, WR, 2, RD, -1 });
	uint32_t x = buf(4 * KIB, 2, 19, 1, (int[]){ 2, WR, 4, RD, 9, RD, 12, RD, -1 });
	/* Y is made by op 7 from nothing it reads, used at 8 and 11 */
	uint32_t y = buf(4 * KIB, 7, 19, 1, (int[]){ 7, WR, 8, RD, 11, RD, -1 });
	replayable((int[]){ 2, 7, -1 });
	ck_assert_int_eq(prof_wild(&pr, 6), 0);
	find(0, 1);
	/* X: gap 0 (2..4) as before; gap 1 (4..9) cut at 6; gap 2 (9..12): the
	 * wild op lies between X's first write and the gap */
	ck_assert_uint_eq(rs.n, 4);
	cand_is(0, x, 0, 3, 4, (int[]){ 2, -1 }, 3);
	cand_is(1, x, 1, 5, 6, (int[]){ 2, -1 }, 3);
	ck_assert_uint_eq(rs.refused.wild, 1);
	/* Y: no input, so nothing bounds it but its uses */
	cand_is(2, y, 0, 8, 8, (int[]){ 7, -1 }, 8);
	cand_is(3, y, 1, 9, 11, (int[]){ 7, -1 }, 8);
	/* the wild op itself in a chain: not replayable */
	ck_assert_int_eq(prof_wild(&pr, 7), 0);
	find(0, 1);
	ck_assert_uint_eq(rs.n, 2);
	ck_assert_uint_eq(rs.refused.not_replayable, 1 + 2);	/* A's gap, Y's two */
	ck_assert_int_eq(prof_wild(&pr, N), 0);	/* out of range: nothing */
}
END_TEST

/* One kernel writes X, a second reads and writes it in place: the chain
 * grows with the gaps, and its entries are shared. */
START_TEST(in_place_chain_of_two)
{
	buf(64, 0, 19, 1, (int[]){ 0, WR, 1, RD, -1 });
	buf(64, PROF_NONE, PROF_NONE, 0, (int[]){ 2, RD, -1 });
	uint32_t x = buf(4 * KIB, 1, 19, 1, (int[]){ 1, WR, 2, WR, 3, RD, 9, RD, -1 });
	replayable((int[]){ 1, 2, -1 });
	find(0, 1);
	ck_assert_uint_eq(rs.n, 3);
	cand_is(0, x, 0, 2, 2, (int[]){ 1, -1 }, 2);
	cand_is(1, x, 1, 3, 3, (int[]){ 1, 2, -1 }, 2 + 3);
	cand_is(2, x, 2, 4, 9, (int[]){ 1, 2, -1 }, 2 + 3);
	ck_assert_uint_eq(rs.c[0].chain_first, rs.c[2].chain_first);
	ck_assert_uint_eq(rs.nops_used, 2);
	ck_assert_uint_eq(rs.refused.not_replayable, 1);
}
END_TEST

/* Find the candidates again with scratch of up to max bytes (0: the default). */
static void
find_scratch(uint64_t max)
{
	struct replay_params rp = { .min_bytes = 1, .max_scratch = max };

	replay_set_fini(&rs);
	ck_assert_int_eq(replay_find(&pr, &rp, &rs), 0);
}

/*
 * X is made from a temporary Y that the job frees right after X's first
 * read (an fp32 norm output cast to bf16 for a matmul), Y from a weight W
 * that lasts. Without widening, X's long gap ends where Y is freed; widened,
 * the chain is Y's producer and X's, Y goes into scratch, W is the one
 * input, and the window reaches X's next use. With less scratch than Y, or
 * Y's producer not measured, it is not widened.
 */
START_TEST(freed_input_widens_the_chain)
{
	uint32_t w = buf(KIB, PROF_NONE, PROF_NONE, 0, (int[]){ 1, RD, -1 });
	uint32_t y = buf(4 * KIB, 1, 3, 1, (int[]){ 1, WR, 2, RD, -1 });
	uint32_t x = buf(8 * KIB, 2, 19, 1, (int[]){ 2, WR, 3, RD, 15, RD, -1 });
	replayable((int[]){ 1, 2, -1 });
	find_scratch(0);
	ck_assert_uint_eq(rs.extended, 1);
	/* y's gap, and x's two: the first as it was, the second widened */
	uint32_t i = 0;
	while (i < rs.n && rs.c[i].buf != x)
		i++;
	ck_assert_uint_eq(rs.n - i, 2);
	/* (operation j lasts j + 1 operations' time) */
	cand_is(i, x, 0, 3, 3, (int[]){ 2, -1 }, 3);
	cand_is(i + 1, x, 1, 4, 15, (int[]){ 1, 2, -1 }, 2 + 3);
	ck_assert_uint_eq(rs.c[i + 1].scratch, 4 * KIB);
	uint32_t other[2];
	uint64_t bytes;
	ck_assert_uint_eq(replay_scratch(&pr, &rs, &rs.c[i + 1], other, NULL, 2, &bytes), 1);
	ck_assert_uint_eq(other[0], y);
	uint32_t *in, nin;
	ck_assert_int_eq(rc_inputs(&pr, NULL, &rs, &rs.c[i + 1], &in, &nin), 0);
	ck_assert_uint_eq(nin, 1);
	ck_assert_uint_eq(in[0], w);
	free(in);
	/* less scratch than y: the window ends where y is freed */
	find_scratch(4 * KIB - 1);
	ck_assert_uint_eq(rs.extended, 0);
	while (i < rs.n && rs.c[i].buf != x)
		i++;
	cand_is(rs.n - 1, x, 1, 4, 4, (int[]){ 2, -1 }, 3);
	/* without widening, the same */
	struct replay_params rp = { .min_bytes = 1, .no_extend = 1 };
	replay_set_fini(&rs);
	ck_assert_int_eq(replay_find(&pr, &rp, &rs), 0);
	ck_assert_uint_eq(rs.extended, 0);
	ck_assert_uint_eq(rs.c[rs.n - 1].r_hi, 4);
}
END_TEST

/* Y's producer uses W unmeasured: the chain is not widened. */
START_TEST(freed_input_unmeasured_is_not_widened)
{
	buf(KIB, PROF_NONE, PROF_NONE, 0, (int[]){ 1, UN, -1 });
	buf(4 * KIB, 1, 3, 1, (int[]){ 1, WR, 2, RD, -1 });
	uint32_t x = buf(8 * KIB, 2, 19, 1, (int[]){ 2, WR, 3, RD, 15, RD, -1 });
	replayable((int[]){ 1, 2, -1 });
	find_scratch(0);
	ck_assert_uint_eq(rs.extended, 0);
	ck_assert_uint_eq(rs.c[rs.n - 1].buf, x);
	ck_assert_uint_eq(rs.c[rs.n - 1].r_hi, 4);
}
END_TEST

/* An operation that writes a second buffer (a workspace) makes neither
 * output recomputable without scratch; with scratch for the other's bytes,
 * each is, the other named by replay_scratch; with less, neither. */
START_TEST(second_output_refused)
{
	buf(64, 0, 19, 1, (int[]){ 0, WR, 1, RD, -1 });
	buf(4 * KIB, 1, 19, 1, (int[]){ 1, WR, 4, RD, 8, RD, -1 });
	buf(4 * KIB, 1, 6, 1, (int[]){ 1, WR, 5, RD, -1 });
	replayable((int[]){ 1, -1 });
	find(0, 1);
	ck_assert_uint_eq(rs.n, 0);
	ck_assert_uint_eq(rs.refused.writes_other, 3);
	ck_assert_uint_eq(rs.refused.not_replayable, 1);
	ck_assert_uint_eq(rs.considered, 4);
	ck_assert_uint_eq(rs.nops_used, 0);
	find_scratch(0);
	ck_assert_uint_eq(rs.n, 3);
	ck_assert_uint_eq(rs.refused.writes_other, 0);
	for (uint32_t i = 0; i < rs.n; i++) {
		uint32_t other[4], n;
		uint64_t bytes;
		ck_assert_uint_eq(rs.c[i].scratch, 4 * KIB);
		n = replay_scratch(&pr, &rs, &rs.c[i], other, NULL, 4, &bytes);
		ck_assert_uint_eq(n, 1);
		ck_assert_uint_eq(other[0], rs.c[i].buf == 1 ? 2 : 1);
		ck_assert_uint_eq(bytes, 4 * KIB);
	}
	find_scratch(4 * KIB - 1);
	ck_assert_uint_eq(rs.n, 0);
	ck_assert_uint_eq(rs.refused.writes_other, 3);
}
END_TEST

/* An input written at op 4 after the chain read it at op 2: the window
 * ends there; a gap that starts after it has none. And an input written by
 * the use before a gap (op 6). */
START_TEST(input_overwritten_bounds_the_window)
{
	buf(64, 0, 19, 1, (int[]){ 0, WR, 2, RD, 4, WR, -1 });
	uint32_t x = buf(4 * KIB, 2, 19, 1, (int[]){ 2, WR, 3, RD, 7, RD, 12, RD, -1 });
	buf(64, 1, 19, 1, (int[]){ 1, WR, 5, RD, 6, WR, -1 });
	uint32_t y = buf(4 * KIB, 5, 19, 1, (int[]){ 5, WR, 6, RD, 10, RD, -1 });
	replayable((int[]){ 2, 5, -1 });
	find(0, 1);
	ck_assert_uint_eq(rs.n, 3);
	cand_is(0, x, 0, 3, 3, (int[]){ 2, -1 }, 3);
	/* the write right after the use before the gap: one point, before it */
	cand_is(1, x, 1, 4, 4, (int[]){ 2, -1 }, 3);
	cand_is(2, y, 0, 6, 6, (int[]){ 5, -1 }, 6);
	/* x's gap after op 7, y's after op 6 */
	ck_assert_uint_eq(rs.refused.overwritten, 2);
	ck_assert_uint_eq(rs.refused.not_replayable, 4);
}
END_TEST

/* A use of an input that is not measured may write it: it ends the window. */
START_TEST(unknown_use_of_an_input_is_a_write)
{
	buf(64, PROF_NONE, PROF_NONE, 1, (int[]){ 2, RD, 9, UN, -1 });
	uint32_t x = buf(4 * KIB, 2, 19, 1, (int[]){ 2, WR, 3, RD, 12, RD, -1 });
	replayable((int[]){ 2, -1 });
	find(0, 1);
	ck_assert_uint_eq(rs.n, 2);
	cand_is(0, x, 0, 3, 3, (int[]){ 2, -1 }, 3);
	cand_is(1, x, 1, 4, 9, (int[]){ 2, -1 }, 3);
}
END_TEST

/* An input freed after op 3: a replay goes before op 4 at the latest. One
 * freed after op 7, the use before a gap: one point, before op 8. */
START_TEST(input_freed_bounds_the_window)
{
	buf(64, 0, 3, 1, (int[]){ 0, WR, 2, RD, -1 });
	buf(64, PROF_NONE, PROF_NONE, 1, (int[]){ 2, RD, -1 });
	uint32_t x = buf(4 * KIB, 2, 19, 1, (int[]){ 2, WR, 5, RD, 10, RD, -1 });
	buf(64, 0, 7, 1, (int[]){ 0, WR, 6, RD, -1 });
	uint32_t y = buf(4 * KIB, 6, 19, 1, (int[]){ 6, WR, 7, RD, 8, RD, 12, RD, -1 });
	replayable((int[]){ 2, 6, -1 });
	find(0, 1);
	ck_assert_uint_eq(rs.n, 3);
	cand_is(0, x, 0, 3, 4, (int[]){ 2, -1 }, 3);
	cand_is(1, y, 0, 7, 7, (int[]){ 6, -1 }, 7);
	cand_is(2, y, 1, 8, 8, (int[]){ 6, -1 }, 7);
	ck_assert_uint_eq(rs.refused.freed, 2);
	ck_assert_uint_eq(rs.refused.not_replayable, 2);
}
END_TEST

/* Not measured: X's first use, a use of X before a gap, a chain operation's
 * use of another buffer. */
START_TEST(unknown_access_refused)
{
	buf(4 * KIB, 1, 19, 1, (int[]){ 1, UN, 3, RD, -1 });
	uint32_t x = buf(4 * KIB, 2, 19, 1, (int[]){ 2, WR, 5, UN, 8, RD, 12, RD, -1 });
	buf(4 * KIB, 6, 19, 1, (int[]){ 6, WR, 9, RD, -1 });
	buf(64, 0, 19, 0, (int[]){ 6, UN, -1 });
	replayable((int[]){ 1, 2, 5, 6, -1 });
	find(0, 1);
	ck_assert_uint_eq(rs.n, 1);
	cand_is(0, x, 0, 3, 5, (int[]){ 2, -1 }, 3);
	ck_assert_uint_eq(rs.refused.unknown, 3);
	ck_assert_uint_eq(rs.refused.unknown_other, 1);
	ck_assert_uint_eq(rs.considered, 5);
}
END_TEST

/* A chain operation that cannot be launched again, or is a copy of the
 * job's from the host. */
START_TEST(not_replayable_in_chain)
{
	uint32_t x = buf(4 * KIB, 1, 19, 1, (int[]){ 1, WR, 2, WR, 4, RD, -1 });
	buf(4 * KIB, 6, 19, 1, (int[]){ 6, WR, 9, RD, -1 });
	replayable((int[]){ 1, 6, -1 });
	prof_xfer(&pr, 6, PROF_XFER_H2D);
	find(0, 1);
	ck_assert_uint_eq(rs.n, 1);
	cand_is(0, x, 0, 2, 2, (int[]){ 1, -1 }, 2);
	ck_assert_uint_eq(rs.refused.not_replayable, 2);
	ck_assert_uint_eq(rs.nops_used, 1);
}
END_TEST

/* Five writers: four by default, two when max_chain says so. */
START_TEST(chain_longer_than_max)
{
	uint32_t x = buf(4 * KIB, 1, 19, 1,
	    (int[]){ 1, WR, 2, WR, 3, WR, 4, WR, 5, WR, 6, RD, 9, RD, -1 });
	replayable((int[]){ 1, 2, 3, 4, 5, -1 });
	find(0, 1);
	ck_assert_uint_eq(rs.n, 4);
	cand_is(3, x, 3, 5, 5, (int[]){ 1, 2, 3, 4, -1 }, 2 + 3 + 4 + 5);
	ck_assert_uint_eq(rs.refused.too_long, 2);
	ck_assert_uint_eq(rs.nops_used, 4);
	find(2, 1);
	ck_assert_uint_eq(rs.n, 2);
	cand_is(0, x, 0, 2, 2, (int[]){ 1, -1 }, 2);
	cand_is(1, x, 1, 3, 3, (int[]){ 1, 2, -1 }, 2 + 3);
	ck_assert_uint_eq(rs.refused.too_long, 4);
	ck_assert_uint_eq(rs.nops_used, 2);
}
END_TEST

/* X whose first use reads it (not its fresh memory), and one never
 * written. */
START_TEST(first_use_reads)
{
	buf(4 * KIB, 1, 19, 1, (int[]){ 1, RD, 2, WR, 5, RD, -1 });
	buf(4 * KIB, 3, 19, 1, (int[]){ 3, RD, 6, RD, -1 });
	replayable((int[]){ 1, 2, 3, -1 });
	find(0, 1);
	ck_assert_uint_eq(rs.n, 0);
	ck_assert_uint_eq(rs.refused.no_writer, 2);
	ck_assert_uint_eq(rs.refused.first_read, 1);
	ck_assert_uint_eq(rs.considered, 3);
}
END_TEST

/* Four gaps after one write: a candidate each, one chain. */
START_TEST(several_gaps_one_chain)
{
	buf(64, PROF_NONE, PROF_NONE, 1, (int[]){ 1, RD, 19, WR, -1 });
	uint32_t x = buf(4 * KIB, 1, 19, 1, (int[]){ 1, WR, 3, RD, 6, RD, 9, RD, 15, RD, -1 });
	replayable((int[]){ 1, -1 });
	find(0, 1);
	ck_assert_uint_eq(rs.n, 4);
	cand_is(0, x, 0, 2, 3, (int[]){ 1, -1 }, 2);
	cand_is(1, x, 1, 4, 6, (int[]){ 1, -1 }, 2);
	cand_is(2, x, 2, 7, 9, (int[]){ 1, -1 }, 2);
	cand_is(3, x, 3, 10, 15, (int[]){ 1, -1 }, 2);
	for (uint32_t i = 1; i < rs.n; i++)
		ck_assert_uint_eq(rs.c[i].chain_first, rs.c[0].chain_first);
	ck_assert_uint_eq(rs.nops_used, 1);
}
END_TEST

/* Persistent, crossing the start, unmovable, small: not candidates. */
START_TEST(not_candidates)
{
	buf(4 * KIB, PROF_NONE, PROF_NONE, 1, (int[]){ 1, WR, 3, RD, 5, RD, -1 });
	buf(4 * KIB, PROF_NONE, 10, 1, (int[]){ 2, WR, 3, RD, -1 });
	buf(4 * KIB, 4, 19, 0, (int[]){ 4, WR, 7, RD, -1 });
	buf(4 * KIB - 1, 5, 19, 1, (int[]){ 5, WR, 7, RD, -1 });
	uint32_t x = buf(4 * KIB, 6, 19, 1, (int[]){ 6, WR, 8, RD, -1 });
	replayable((int[]){ 1, 2, 4, 5, 6, -1 });
	find(0, 4 * KIB);
	ck_assert_uint_eq(rs.n, 1);
	cand_is(0, x, 0, 7, 8, (int[]){ 6, -1 }, 7);
	ck_assert_uint_eq(rs.considered, 1);
}
END_TEST

/* A profile where no operation can be launched again. */
START_TEST(no_replay_no_candidates)
{
	buf(4 * KIB, 1, 19, 1, (int[]){ 1, WR, 3, RD, 7, RD, -1 });
	ck_assert_ptr_null(pr.replay);
	find(0, 1);
	ck_assert_uint_eq(rs.n, 0);
	ck_assert_uint_eq(rs.considered, 2);
	ck_assert_uint_eq(rs.refused.not_replayable, 2);
}
END_TEST

/* A second measurement keeps a write; a use that is not there is refused. */
START_TEST(access_keeps_writes)
{
	uint32_t b = buf(64, 0, 19, 1, (int[]){ 1, UN, 2, UN, 3, UN, -1 });
	ck_assert_ptr_null(pr.buf[b].acc);
	ck_assert_uint_eq(prof_access_of(&pr, b, 1), UN);
	ck_assert_int_eq(prof_access(&pr, b, 1, WR), 0);
	ck_assert_int_eq(prof_access(&pr, b, 1, RD), 0);
	ck_assert_uint_eq(prof_access_of(&pr, b, 1), WR);
	ck_assert_int_eq(prof_access(&pr, b, 2, RD), 0);
	ck_assert_uint_eq(prof_access_of(&pr, b, 2), RD);
	ck_assert_int_eq(prof_access(&pr, b, 2, WR), 0);
	ck_assert_uint_eq(prof_access_of(&pr, b, 2), WR);
	ck_assert_uint_eq(prof_access_of(&pr, b, 3), UN);
	/* no use there: nothing set */
	ck_assert_int_eq(prof_access(&pr, b, 4, WR), 1);
	ck_assert_int_eq(prof_access(&pr, b, 0, WR), 1);
	ck_assert_uint_eq(prof_access_of(&pr, b, 4), UN);
	uint32_t e = buf(64, 0, 19, 1, (int[]){ -1 });
	ck_assert_int_eq(prof_access(&pr, e, 1, RD), 1);
	ck_assert_ptr_null(pr.buf[e].acc);
}
END_TEST

/* Uses added after a measurement, past the use array's capacity: every
 * access stays with its use. */
START_TEST(use_keeps_access_aligned)
{
	uint32_t b = buf(64, 0, 19, 1, (int[]){ 0, WR, 1, UN, 2, RD, -1 });
	for (uint32_t op = 3; op < 18; op++)
		ck_assert_int_eq(prof_use(&pr, b, op), 0);
	ck_assert_uint_gt(pr.buf[b].cap, 4);
	ck_assert_int_eq(prof_access(&pr, b, 17, RD), 0);
	ck_assert_int_eq(prof_access(&pr, b, 9, WR), 0);
	/* a use again at the last operation is no new use */
	ck_assert_int_eq(prof_use(&pr, b, 17), 0);
	ck_assert_uint_eq(pr.buf[b].nuse, 18);
	for (uint32_t op = 0; op < 18; op++) {
		unsigned want = op == 0 || op == 9 ? WR : op == 2 || op == 17 ? RD : UN;
		ck_assert_uint_eq(prof_access_of(&pr, b, op), want);
	}
}
END_TEST

/* Buffers with candidates are counted once each, however many of their
 * gaps are candidates; an empty set counts none. */
START_TEST(totals_count_each_buffer_once)
{
	uint64_t nb = 7, bytes = 7;

	replay_totals(&rs, &nb, &bytes);
	ck_assert_uint_eq(nb, 0);
	ck_assert_uint_eq(bytes, 0);
	uint32_t x = buf(4 * KIB, 1, 19, 1, (int[]){ 1, WR, 3, RD, 9, RD, -1 });
	buf(8 * KIB, 0, 19, 1, (int[]){ 0, WR, 1, RD, -1 });
	uint32_t y = buf(16 * KIB, 4, 19, 1, (int[]){ 4, WR, 5, RD, 7, RD, 8, RD, -1 });
	replayable((int[]){ 1, 4, -1 });
	find(0, 1);
	ck_assert_uint_eq(rs.n, 5);
	ck_assert_uint_eq(rs.c[0].buf, x);
	ck_assert_uint_eq(rs.c[4].buf, y);
	replay_totals(&rs, &nb, &bytes);
	ck_assert_uint_eq(nb, 2);
	ck_assert_uint_eq(bytes, 4 * KIB + 16 * KIB);
}
END_TEST

/*
 * rec_access: a launch's measured access to a buffer of the recording,
 * named by its id, sets the use at that operation; an access not measured,
 * a buffer not in the profile, an operation outside the recording or one
 * where the buffer has no use set nothing, and say so.
 */
START_TEST(rec_access_names_buffers_by_id)
{
	struct rec r;

	ck_assert_int_eq(rec_begin(&r, 100, 4), 0);
	rec_live(&r, 7, 4 * KIB, 1);
	rec_alloc(&r, 9, 4 * KIB, 1, 101);
	rec_use(&r, 101, 7);
	rec_use(&r, 101, 9);
	rec_use(&r, 102, 9);
	ck_assert_int_eq(rec_access(&r, 101, 9, WR), 0);
	ck_assert_int_eq(rec_access(&r, 101, 7, RD), 0);
	ck_assert_int_eq(rec_access(&r, 102, 9, UN), 1);
	ck_assert_int_eq(rec_access(&r, 102, 9, 3), 1);
	ck_assert_int_eq(rec_access(&r, 102, 8, RD), 1);	/* not in the profile */
	ck_assert_int_eq(rec_access(&r, 103, 9, RD), 1);	/* no use there */
	ck_assert_int_eq(rec_access(&r, 104, 9, RD), 1);	/* past the recording */
	ck_assert_int_eq(rec_access(&r, 99, 7, RD), 1);	/* before it */
	uint32_t k7 = idmap_get(&r.ids, 7), k9 = idmap_get(&r.ids, 9);
	ck_assert_uint_eq(prof_access_of(&r.p, k9, 1), WR);
	ck_assert_uint_eq(prof_access_of(&r.p, k7, 1), RD);
	ck_assert_uint_eq(prof_access_of(&r.p, k9, 2), UN);
	ck_assert_int_eq(r.oom, 0);
	rec_fini(&r);
}
END_TEST

/* prof_replayable marks one operation; one past the end is ignored. */
START_TEST(replayable_marks_ops)
{
	ck_assert_int_eq(prof_replayable(&pr, N), 0);
	ck_assert_ptr_null(pr.replay);
	ck_assert_int_eq(prof_replayable(&pr, 3), 0);
	ck_assert_ptr_nonnull(pr.replay);
	for (uint32_t i = 0; i < N; i++)
		ck_assert_uint_eq(pr.replay[i], i == 3);
}
END_TEST

/* Whether buffer b has a use at operation op, the slow way. */
static int
uses(const struct prof_buf *b, uint32_t op)
{
	for (uint32_t i = 0; i < b->nuse; i++)
		if (b->use[i] == op)
			return 1;
	return 0;
}

/* The state of chain operation c of buffer x by the definitions (replay.h),
 * the slow way: the index of its refusal in struct replay_refused's order
 * (9: none), and the bounds its inputs set on the window. */
static int
slow_op(uint32_t x, uint32_t c, uint32_t *whi, uint32_t *fhi, uint64_t *other)
{
	if (pr.replay == NULL || !pr.replay[c] || pr.xfer[c])
		return 4;
	int st = 9;
	uint64_t wrote = 0;
	for (uint32_t bi = 0; bi < pr.nbufs; bi++) {
		const struct prof_buf *b = &pr.buf[bi];
		if (bi == x || !uses(b, c))
			continue;
		unsigned a = prof_access_of(&pr, bi, c);
		if (a == UN)
			st = st < 5 ? st : 5;
		if (a == WR)
			wrote += b->size;	/* into scratch */
		if (a != RD)
			continue;
		for (uint32_t j = 0; j < b->nuse; j++)
			if (b->use[j] > c && prof_access_of(&pr, bi, b->use[j]) != RD) {
				*whi = b->use[j] < *whi ? b->use[j] : *whi;
				break;
			}
		if (b->free != PROF_NONE && b->free + 1 < *fhi)
			*fhi = b->free + 1;
	}
	if (st == 9)
		*other += wrote;
	return st;
}

/* Gap k of buffer x by the definitions, the slow way: the index of its
 * refusal (-1: a candidate, into *c, its chain into chain). */
static int
slow_gap(uint32_t max, uint64_t max_scratch, uint32_t x, uint32_t k, struct replay_cand *c,
    uint32_t *chain)
{
	const struct prof_buf *b = &pr.buf[x];
	uint32_t n = 0, whi = UINT32_MAX, fhi = UINT32_MAX;
	uint64_t other = 0;
	int st = 9;

	for (uint32_t i = 0; i <= k; i++)
		if (prof_access_of(&pr, x, b->use[i]) == UN)
			return 0;
	for (uint32_t i = 0; i <= k; i++)
		n += prof_access_of(&pr, x, b->use[i]) == WR;
	if (n == 0)
		return 1;
	if (prof_access_of(&pr, x, b->use[0]) != WR)
		return 2;
	if (n > max)
		return 3;
	memset(c, 0, sizeof *c);
	for (uint32_t i = 0; i <= k; i++) {
		uint32_t op = b->use[i];
		if (prof_access_of(&pr, x, op) != WR)
			continue;
		int s = slow_op(x, op, &whi, &fhi, &other);
		st = s < st ? s : st;
		chain[c->nchain++] = op;
		c->cost_s += pr.dur[op];
	}
	if (other > max_scratch)
		st = st < 6 ? st : 6;
	if (st < 9)
		return st;
	c->scratch = other;
	if (whi <= b->use[k])
		return 7;
	if (fhi <= b->use[k])
		return 8;
	c->r_lo = b->use[k] + 1;
	c->r_hi = b->use[k + 1] < whi ? b->use[k + 1] : whi;
	c->r_hi = fhi < c->r_hi ? fhi : c->r_hi;
	return -1;
}

/* A random profile of 60 operations: buffers with random lifetimes and
 * uses, each use read, written or not measured, most operations
 * replayable, a few copies of the job's. */
static void
random_profile(unsigned *seed)
{
	prof_fini(&pr);
	ck_assert_int_eq(prof_init(&pr, 60), 0);
	for (uint32_t i = 0; i < 60; i++) {
		pr.dur[i] = (1 + rand_r(seed) % 8) * OP;
		if (rand_r(seed) % 6 != 0)
			ck_assert_int_eq(prof_replayable(&pr, i), 0);
		if (rand_r(seed) % 20 == 0)
			prof_xfer(&pr, i, PROF_XFER_H2D);
	}
	for (int k = 0; k < 30; k++) {
		int persistent = rand_r(seed) % 5 == 0;
		uint32_t a = (uint32_t)(rand_r(seed) % 50);
		uint32_t f = a + (uint32_t)(rand_r(seed) % (60 - a));
		int ua[2 * 12 + 1], n = 0;
		for (uint32_t op = a; op <= f && n < 24; op++) {
			if (rand_r(seed) % 3 != 0 && op != a)
				continue;
			int r = rand_r(seed) % 20;
			ua[n++] = (int)op;
			ua[n++] = r < 10 ? RD : r < 18 ? WR : UN;
		}
		ua[n] = -1;
		buf((uint64_t)(1 + rand_r(seed) % 8) * KIB, persistent ? PROF_NONE : a,
		    persistent ? PROF_NONE : f, rand_r(seed) % 8 != 0, ua);
	}
}

/* Random profiles: every gap as the definitions say, the slow way. */
START_TEST(random_profiles_match_the_definitions)
{
	unsigned seed = 5;
	uint64_t cands = 0, why[9] = { 0 };

	for (int round = 0; round < 300; round++) {
		random_profile(&seed);
		uint32_t max = (uint32_t)(rand_r(&seed) % 5), m = max ? max : REPLAY_MAX_CHAIN;
		uint64_t min_bytes = (uint64_t)(rand_r(&seed) % 4) * KIB, want[9] = { 0 };
		/* without scratch, or up to 0 to 15 KiB of it */
		int no_scratch = round % 3 == 0;
		uint64_t max_scratch = no_scratch ? 0 : (uint64_t)(rand_r(&seed) % 16) * KIB;
		/* (chains as replay.h defines them, not widened) */
		struct replay_params rp = { .max_chain = max, .min_bytes = min_bytes,
			.no_scratch = no_scratch, .max_scratch = max_scratch, .no_extend = 1 };
		if (!no_scratch && max_scratch == 0)
			max_scratch = REPLAY_MAX_SCRATCH;
		replay_set_fini(&rs);
		ck_assert_int_eq(replay_find(&pr, &rp, &rs), 0);
		uint32_t at = 0;
		for (uint32_t x = 0; x < pr.nbufs; x++) {
			const struct prof_buf *b = &pr.buf[x];
			if (b->alloc == PROF_NONE || !b->movable || b->size < min_bytes)
				continue;
			for (uint32_t k = 0; k + 1 < b->nuse; k++) {
				struct replay_cand c;
				uint32_t chain[16];
				int r = slow_gap(m, max_scratch, x, k, &c, chain);
				if (r >= 0) {
					want[r]++;
					continue;
				}
				ck_assert_uint_lt(at, rs.n);
				const struct replay_cand *got = &rs.c[at++];
				ck_assert_uint_eq(got->buf, x);
				ck_assert_uint_eq(got->gap, k);
				ck_assert_uint_eq(got->r_lo, c.r_lo);
				ck_assert_uint_eq(got->r_hi, c.r_hi);
				ck_assert_uint_eq(got->nchain, c.nchain);
				ck_assert(got->cost_s == c.cost_s);
				ck_assert_uint_eq(got->scratch, c.scratch);
				for (uint32_t i = 0; i < c.nchain; i++)
					ck_assert_uint_eq(replay_chain(&rs, got)[i], chain[i]);
			}
		}
		ck_assert_uint_eq(at, rs.n);
		const struct replay_refused *r = &rs.refused;
		uint64_t got[9] = { r->unknown, r->no_writer, r->first_read, r->too_long,
			r->not_replayable, r->unknown_other, r->writes_other, r->overwritten,
			r->freed };
		for (int i = 0; i < 9; i++) {
			ck_assert_uint_eq(got[i], want[i]);
			why[i] += got[i];
		}
		ck_assert_uint_eq(rs.considered, rs.n + refusals());
		cands += rs.n;
	}
	/* the profiles reach every outcome */
	ck_assert_uint_gt(cands, 0);
	for (int i = 0; i < 9; i++)
		ck_assert_uint_gt(why[i], 0);
}
END_TEST

/* A profile of the size of a training step's (50,000 operations, 20,100
 * buffers, weights used 500 times each): one linear pass finds every
 * activation's two gaps. Operation 2j makes activation j from weight 2j mod
 * 100, 2j + 1 reads it, and a backward operation 40,001 + 2 (j mod 4,950)
 * reads it last; the optimizer writes weight w at 49,900 + w. */
START_TEST(profile_of_a_training_step)
{
	enum { OPS = 50000, WEIGHTS = 100, ACTS = 20000 };

	prof_fini(&pr);
	ck_assert_int_eq(prof_init(&pr, OPS), 0);
	for (uint32_t i = 0; i < OPS; i++) {
		pr.dur[i] = OP;
		ck_assert_int_eq(prof_replayable(&pr, i), 0);
	}
	for (uint32_t w = 0; w < WEIGHTS; w++) {
		ck_assert_int_eq(prof_add(&pr, 4 * KIB, w, PROF_NONE, 1), w);
		for (uint32_t op = w; op < OPS; op += WEIGHTS) {
			ck_assert_int_eq(prof_use(&pr, w, op), 0);
			unsigned a = op == 49900 + w ? WR : RD;
			ck_assert_int_eq(prof_access(&pr, w, op, a), 0);
		}
	}
	for (uint32_t j = 0; j < ACTS; j++) {
		int op = (int)(2 * j), last = 40001 + 2 * (int)(j % 4950);
		buf(KIB, 2 * j, (uint32_t)last, 1, (int[]){ op, WR, op + 1, RD, last, RD, -1 });
	}
	find(0, 1);
	ck_assert_uint_eq(rs.n, 2 * ACTS);
	ck_assert_uint_eq(rs.considered, 2 * ACTS);
	ck_assert_uint_eq(rs.nops_used, ACTS);
	cand_is(0, WEIGHTS, 0, 1, 1, (int[]){ 0, -1 }, 1);
	cand_is(1, WEIGHTS, 1, 2, 40001, (int[]){ 0, -1 }, 1);
	cand_is(2 * ACTS - 1, WEIGHTS + ACTS - 1, 1, 2 * ACTS, 40001 + 2 * (19999 % 4950),
	    (int[]){ 2 * ACTS - 2, -1 }, 1);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("replay");
	TCase *tc = tcase_create("replay");
	tcase_add_checked_fixture(tc, setup, teardown);
	add_test(tc, simple_producer);
	add_test(tc, in_place_chain_of_two);
	add_test(tc, wild_operations);
	add_test(tc, second_output_refused);
	add_test(tc, freed_input_widens_the_chain);
	add_test(tc, freed_input_unmeasured_is_not_widened);
	add_test(tc, input_overwritten_bounds_the_window);
	add_test(tc, unknown_use_of_an_input_is_a_write);
	add_test(tc, input_freed_bounds_the_window);
	add_test(tc, unknown_access_refused);
	add_test(tc, not_replayable_in_chain);
	add_test(tc, chain_longer_than_max);
	add_test(tc, first_use_reads);
	add_test(tc, several_gaps_one_chain);
	add_test(tc, not_candidates);
	add_test(tc, no_replay_no_candidates);
	add_test(tc, access_keeps_writes);
	add_test(tc, use_keeps_access_aligned);
	add_test(tc, replayable_marks_ops);
	add_test(tc, totals_count_each_buffer_once);
	add_test(tc, rec_access_names_buffers_by_id);
	add_test(tc, random_profiles_match_the_definitions);
	add_test(tc, profile_of_a_training_step);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
