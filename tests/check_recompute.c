/*
 * check_recompute.c: the choice of gaps to recompute and the profile with
 * them (policy/recompute.h), on hand-made profiles whose answer is known
 * and against the memory counted the slow way on random ones; and the
 * search that weighs recompute against moves (plan_make_recompute,
 * src/common/planrun.h). Operation i lasts 2^-10 s unless a test says
 * otherwise, and a GiB copies in copy_ops of them, so times are exact in
 * binary.
 */
#include "config.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"
#include "planrun.h"
#include "recompute.h"
#include "replay.h"
#include "testutil.h"

#define OP (1.0 / 256)
#define KIB ((uint64_t)1024)
#define GIB ((uint64_t)1 << 30)
#define RD PROF_ACC_READ
#define WR PROF_ACC_WRITE
#define UN PROF_ACC_UNKNOWN

static struct prof pr;
static struct replay_set rs;
static struct prof dv;		/* a derived profile */
static uint32_t *orig;
static struct rc_pick *pk;
static uint32_t npk;

/* A fresh profile of n operations, each OP long. */
static void
start(uint32_t n)
{
	prof_fini(&pr);
	ck_assert_int_eq(prof_init(&pr, n), 0);
	for (uint32_t i = 0; i < n; i++)
		pr.dur[i] = OP;
}

static void
setup(void)
{
	memset(&pr, 0, sizeof pr);
	memset(&rs, 0, sizeof rs);
	memset(&dv, 0, sizeof dv);
	orig = NULL;
	pk = NULL;
	npk = 0;
	start(20);
}

static void
teardown(void)
{
	free(pk);
	free(orig);
	prof_fini(&dv);
	replay_set_fini(&rs);
	prof_fini(&pr);
}

/* A buffer used as ua says: pairs of operation and PROF_ACC_* (-1 ends the
 * list); an UN use is left unmeasured. */
static uint32_t
buf(uint64_t size, uint32_t alloc, uint32_t free, int movable, const int *ua)
{
	int64_t b = prof_add(&pr, size, 100 + (uint64_t)pr.nbufs, alloc, movable);
	ck_assert_int_ge(b, 0);
	for (const int *u = ua; *u >= 0; u += 2) {
		ck_assert_int_eq(prof_use(&pr, (uint32_t)b, (uint32_t)u[0]), 0);
		if (u[1] != UN)
			ck_assert_int_eq(prof_access(&pr, (uint32_t)b, (uint32_t)u[0], (unsigned)u[1]), 0);
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
find(void)
{
	struct replay_params rp = { .min_bytes = 1 };

	replay_set_fini(&rs);
	ck_assert_int_eq(replay_find(&pr, &rp, &rs), 0);
}

/* The index of buffer b's candidate for gap k (the test fails when none). */
static uint32_t
cand_of(uint32_t b, uint32_t k)
{
	for (uint32_t i = 0; i < rs.n; i++)
		if (rs.c[i].buf == b && rs.c[i].gap == k)
			return i;
	ck_abort_msg("no candidate for gap %u of buffer %u", k, b);
	return 0;
}

/* Buffer b of profile q has the uses ops (-1 ends them). */
static void
uses_are(const struct prof *q, uint32_t b, const int *ops)
{
	uint32_t n = 0;

	for (; ops[n] >= 0; n++) {
		ck_assert_uint_lt(n, q->buf[b].nuse);
		ck_assert_uint_eq(q->buf[b].use[n], (uint32_t)ops[n]);
	}
	ck_assert_uint_eq(q->buf[b].nuse, n);
}

/* Choose for target into pk, npk (freed first); returns the peak reached. */
static uint64_t
choose(const uint8_t *usable, const uint32_t *stream, uint64_t target, struct rc_skipped *sk)
{
	uint64_t peak = 0;

	free(pk);
	ck_assert_int_eq(rc_choose(&pr, &rs, usable, stream, target, &pk, &npk, sk, &peak), 0);
	return peak;
}

/* Derive the profile of pk into dv and orig (freed first). */
static void
derive(const struct rc_params *rp)
{
	free(orig);
	prof_fini(&dv);
	ck_assert_int_eq(rc_derive(&pr, &rs, pk, npk, rp, &dv, &orig), 0);
}

/*
 * Ten operations: op 1 makes X (4 KiB) from W (1 KiB, persistent, read
 * there); X is read at 2 and 7; an unmovable H (8 KiB) lives over 4..5.
 * Recomputing X's gap between 2 and 7 at 7 frees it after 2 and remakes it
 * before 7: X's entry ends at 2, a new buffer exists from 7 for the use at
 * 7, W is used at 7 by the replay, op 7 lasts the chain's time longer and
 * the host issues the launch after op 6; the peak, at 4, falls by X.
 */
START_TEST(derive_splits_the_buffer)
{
	start(10);
	uint32_t w = buf(KIB, PROF_NONE, PROF_NONE, 1, (int[]){ 1, RD, -1 });
	uint32_t x = buf(4 * KIB, 1, 8, 1, (int[]){ 1, WR, 2, RD, 7, RD, -1 });
	uint32_t h = buf(8 * KIB, 4, 5, 0, (int[]){ 4, UN, 5, UN, -1 });
	replayable((int[]){ 1, -1 });
	ck_assert_int_eq(prof_host(&pr), 0);
	pr.dur[1] = 3 * OP;
	pr.fixed = 16;
	find();
	ck_assert_uint_eq(rs.n, 2);
	uint32_t ci = cand_of(x, 1);
	ck_assert_uint_eq(rs.c[ci].r_hi, 7);

	uint32_t *in, nin;
	ck_assert_int_eq(rc_inputs(&pr, NULL, &rs, &rs.c[ci], &in, &nin), 0);
	ck_assert_uint_eq(nin, 1);
	ck_assert_uint_eq(in[0], w);
	free(in);

	uint32_t at;
	ck_assert_uint_eq(prof_peak(&pr, &at), 16 + 13 * KIB);
	ck_assert_uint_eq(at, 4);
	pk = malloc(sizeof *pk);
	pk[0] = (struct rc_pick){ ci, 7 };
	npk = 1;
	derive(NULL);
	ck_assert_uint_eq(dv.nops, 10);
	ck_assert_uint_eq(dv.nbufs, 4);
	ck_assert_uint_eq(dv.fixed, 16);
	/* X's entry: made at 1, freed after 2 */
	ck_assert_uint_eq(dv.buf[x].alloc, 1);
	ck_assert_uint_eq(dv.buf[x].free, 2);
	uses_are(&dv, x, (int[]){ 1, 2, -1 });
	ck_assert_uint_eq(dv.buf[x].acc[0], WR);
	/* the remade X */
	const struct prof_buf *nx = &dv.buf[3];
	ck_assert_uint_eq(nx->alloc, 7);
	ck_assert_uint_eq(nx->free, 8);
	ck_assert_uint_eq(nx->size, 4 * KIB);
	ck_assert_uint_eq(nx->key, pr.buf[x].key);
	ck_assert_uint_eq(nx->movable, 1);
	uses_are(&dv, 3, (int[]){ 7, -1 });
	ck_assert_uint_eq(nx->acc[0], RD);
	/* W, used by the replay at 7 */
	uses_are(&dv, w, (int[]){ 1, 7, -1 });
	ck_assert_uint_eq(dv.buf[w].acc[1], RD);
	ck_assert_uint_eq(dv.buf[w].alloc, PROF_NONE);
	ck_assert_uint_eq(dv.buf[w].free, PROF_NONE);
	/* H as it was */
	uses_are(&dv, h, (int[]){ 4, 5, -1 });
	ck_assert_ptr_null(dv.buf[h].acc);
	ck_assert_uint_eq(dv.buf[h].movable, 0);
	for (uint32_t i = 0; i < 4; i++)
		ck_assert_uint_eq(orig[i], i < 3 ? i : x);
	/* the replay's time on the device, its launch on the host */
	for (uint32_t i = 0; i < 10; i++) {
		ck_assert(dv.dur[i] == (i == 7 ? 4 * OP : i == 1 ? 3 * OP : OP));
		ck_assert(dv.host[i] == (i == 6 ? RC_HOST_LAUNCH_S : 0));
	}
	ck_assert_ptr_nonnull(dv.replay);
	ck_assert_uint_eq(dv.replay[1], 1);
	ck_assert_ptr_null(dv.wild);
	ck_assert_uint_eq(prof_peak(&dv, &at), 16 + 9 * KIB);
	ck_assert_uint_eq(at, 4);
	/* the host's launch cost as given, with the remake's mapping before the
	 * replay and the drop's release at the use before the gap; a profile
	 * without the host side has none */
	derive(&(struct rc_params){ .host_launch_s = 1e-3, .host_drop_s = 0.25,
	    .host_remake_s = 0.5 });
	for (uint32_t i = 0; i < 10; i++)
		ck_assert(dv.host[i] == (i == 6 ? 1e-3 + 0.5 : i == pr.buf[x].use[1] ? 0.25 : 0));
	free(pr.host);
	free(pr.barrier);
	pr.host = NULL;
	pr.barrier = NULL;
	derive(NULL);
	ck_assert_ptr_null(dv.host);
	ck_assert_ptr_null(dv.barrier);
}
END_TEST

/*
 * Two gaps of one buffer recomputed: three segments, the last up to the
 * original free; an input with a use at the replay already gets none
 * again; an input freed right before the replay (replay.h's window: free +
 * 1) is used at its free instead. Picks out of order and not of a
 * candidate's window.
 */
START_TEST(derive_two_gaps_and_the_inputs_edges)
{
	/* op 1 makes X from A (freed after 9) and W; X read at 3, 9, 12, 15 */
	uint32_t a = buf(KIB, 0, 9, 1, (int[]){ 0, WR, 1, RD, -1 });
	uint32_t w = buf(KIB, PROF_NONE, PROF_NONE, 1, (int[]){ 1, RD, 15, RD, -1 });
	uint32_t x = buf(4 * KIB, 1, 17, 1, (int[]){ 1, WR, 3, RD, 9, RD, 12, RD, 15, RD, -1 });
	replayable((int[]){ 1, -1 });
	find();
	uint32_t c1 = cand_of(x, 1), c2 = cand_of(x, 2);
	ck_assert_uint_eq(rs.c[c1].r_hi, 9);
	ck_assert_uint_eq(rs.c[c2].r_hi, 10);	/* A's free + 1 */
	uint32_t *in, nin;
	ck_assert_int_eq(rc_inputs(&pr, NULL, &rs, &rs.c[c1], &in, &nin), 0);
	ck_assert_uint_eq(nin, 2);
	ck_assert_uint_eq(in[0], a);
	ck_assert_uint_eq(in[1], w);
	free(in);
	/* gap 3 (12..15) starts after A's free: refused */
	ck_assert_uint_eq(rs.n, 3);
	pk = malloc(2 * sizeof *pk);
	pk[0] = (struct rc_pick){ c2, 10 };
	pk[1] = (struct rc_pick){ c1, 9 };
	npk = 2;
	derive(NULL);
	ck_assert_uint_eq(dv.nbufs, 5);
	uses_are(&dv, x, (int[]){ 1, 3, -1 });
	ck_assert_uint_eq(dv.buf[x].free, 3);
	/* gap 1's segment: from 9, the use at 9, freed after it */
	uses_are(&dv, 3, (int[]){ 9, -1 });
	ck_assert_uint_eq(dv.buf[3].alloc, 9);
	ck_assert_uint_eq(dv.buf[3].free, 9);
	/* gap 2's: from 10 to the end */
	uses_are(&dv, 4, (int[]){ 12, 15, -1 });
	ck_assert_uint_eq(dv.buf[4].alloc, 10);
	ck_assert_uint_eq(dv.buf[4].free, 17);
	ck_assert_uint_eq(orig[3], x);
	ck_assert_uint_eq(orig[4], x);
	/* A: used at 9 by the first replay, and at its free (9) for the one
	 * before 10; W at both */
	uses_are(&dv, a, (int[]){ 0, 1, 9, -1 });
	ck_assert_uint_eq(dv.buf[a].free, 9);
	uses_are(&dv, w, (int[]){ 1, 9, 10, 15, -1 });
	ck_assert(dv.dur[9] == 2 * OP && dv.dur[10] == 2 * OP);

	/* a pick outside its window, of no candidate, or twice: refused */
	prof_fini(&dv);
	free(orig);
	pk[0] = (struct rc_pick){ c1, 10 };
	ck_assert_int_eq(rc_derive(&pr, &rs, pk, 1, NULL, &dv, &orig), -1);
	ck_assert_ptr_null(orig);
	ck_assert_uint_eq(dv.nbufs, 0);
	pk[0] = (struct rc_pick){ rs.n, 9 };
	ck_assert_int_eq(rc_derive(&pr, &rs, pk, 1, NULL, &dv, &orig), -1);
	pk[0] = (struct rc_pick){ c1, 9 };
	ck_assert_int_eq(rc_derive(&pr, &rs, pk, 2, NULL, &dv, &orig), -1);
	/* none: the profile as it is */
	npk = 0;
	derive(NULL);
	ck_assert_uint_eq(dv.nbufs, pr.nbufs);
	ck_assert_uint_eq(prof_peak(&dv, NULL), prof_peak(&pr, NULL));
}
END_TEST

/*
 * Two activations over a hump at 8..10 (16 KiB, unmovable), each made from
 * the weight W by one replayable launch and read at 19: X1 by op 2, X2 by
 * op 3; op 3 lasts cost3 operations.
 */
static void
two_activations(double cost3, uint64_t size1, uint64_t size2, uint32_t *x1, uint32_t *x2)
{
	buf(KIB, PROF_NONE, PROF_NONE, 0, (int[]){ 2, RD, 3, RD, -1 });
	*x1 = buf(size1, 2, 19, 1, (int[]){ 2, WR, 4, RD, 19, RD, -1 });
	*x2 = buf(size2, 3, 19, 1, (int[]){ 3, WR, 5, RD, 19, RD, -1 });
	buf(16 * KIB, 8, 10, 0, (int[]){ 8, UN, 10, UN, -1 });
	replayable((int[]){ 2, 3, -1 });
	pr.dur[3] = cost3 * OP;
	find();
}

/*
 * A target that moves cannot meet (the copies take far longer than the
 * iteration) is met by recompute alone, and the cheaper bytes go first:
 * of two equal buffers, the one whose chain is faster; of a buffer twice
 * the size at twice the cost per byte, the other.
 */
START_TEST(choose_meets_a_target_cheapest_first)
{
	uint32_t x1, x2;
	two_activations(4, 4 * KIB, 4 * KIB, &x1, &x2);
	uint64_t peak = prof_peak(&pr, NULL);
	ck_assert_uint_eq(peak, 25 * KIB);
	struct plan_params pp = { .target = peak - 4 * KIB, .d2h_bps = 1, .h2d_bps = 1,
		.min_bytes = 1 };
	struct plan pl;
	ck_assert_int_eq(plan_make(&pr, &pp, &pl), 0);
	ck_assert_int_eq(pl.met, 0);
	plan_fini(&pl);

	struct rc_skipped sk;
	ck_assert_uint_eq(choose(NULL, NULL, peak - 4 * KIB, &sk), peak - 4 * KIB);
	ck_assert_uint_eq(npk, 1);
	ck_assert_uint_eq(rs.c[pk[0].cand].buf, x1);
	ck_assert_uint_eq(rs.c[pk[0].cand].gap, 1);
	ck_assert_uint_eq(pk[0].r, 19);
	ck_assert_uint_eq(sk.unusable + sk.streams + sk.conflict, 0);
	/* for a target no recompute reaches, every gap that lowers an operation
	 * over it (both gaps of both): the peak then is where the hump is */
	ck_assert_uint_eq(choose(NULL, NULL, 0, &sk), 17 * KIB);
	ck_assert_uint_eq(npk, 4);
	ck_assert_uint_eq(rs.c[pk[0].cand].buf, x1);
	ck_assert_uint_eq(rs.c[pk[3].cand].buf, x2);
	derive(NULL);
	ck_assert_uint_eq(prof_peak(&dv, NULL), 17 * KIB);
	/* the target met already: nothing */
	ck_assert_uint_eq(choose(NULL, NULL, peak, &sk), peak);
	ck_assert_uint_eq(npk, 0);
	ck_assert_ptr_null(pk);

	/* X2 of 8 KiB at 4 operations: 2 KiB an operation, X1 4 KiB at 1 */
	start(20);
	replay_set_fini(&rs);
	two_activations(4, 4 * KIB, 8 * KIB, &x1, &x2);
	choose(NULL, NULL, prof_peak(&pr, NULL) - 4 * KIB, &sk);
	ck_assert_uint_eq(npk, 1);
	ck_assert_uint_eq(rs.c[pk[0].cand].buf, x1);
	/* X2 at 1.5 operations: 5.33 KiB an operation */
	start(20);
	replay_set_fini(&rs);
	two_activations(1.5, 4 * KIB, 8 * KIB, &x1, &x2);
	choose(NULL, NULL, prof_peak(&pr, NULL) - 4 * KIB, &sk);
	ck_assert_uint_eq(npk, 1);
	ck_assert_uint_eq(rs.c[pk[0].cand].buf, x2);
}
END_TEST

/* A candidate not verified is never picked: the next best is. */
START_TEST(choose_honours_usable)
{
	uint32_t x1, x2;
	two_activations(4, 4 * KIB, 4 * KIB, &x1, &x2);
	uint8_t *usable = malloc(rs.n);
	memset(usable, 1, rs.n);
	usable[cand_of(x1, 1)] = 0;
	struct rc_skipped sk;
	choose(usable, NULL, prof_peak(&pr, NULL) - 4 * KIB, &sk);
	ck_assert_uint_eq(npk, 1);
	ck_assert_uint_eq(rs.c[pk[0].cand].buf, x2);
	ck_assert_uint_eq(sk.unusable, 1);
	ck_assert_uint_eq(sk.streams + sk.conflict, 0);
	/* none usable: nothing, the peak as it was */
	memset(usable, 0, rs.n);
	ck_assert_uint_eq(choose(usable, NULL, 0, &sk), prof_peak(&pr, NULL));
	ck_assert_uint_eq(npk, 0);
	ck_assert_uint_eq(sk.unusable, rs.n);
	free(usable);
}
END_TEST

/* A gap whose buffer would be away for less than RC_MIN_AWAY_S of device
 * time is never picked (the executor could not free its memory in time);
 * one just over it is. */
START_TEST(choose_passes_over_brief_gaps)
{
	uint32_t x1, x2;
	two_activations(1, 4 * KIB, 4 * KIB, &x1, &x2);
	struct rc_skipped sk;
	/* X1's first gap is away over operation 3 alone */
	pr.dur[3] = 0.9 * RC_MIN_AWAY_S;
	choose(NULL, NULL, 0, &sk);
	ck_assert_uint_eq(sk.brief, 1);
	ck_assert_uint_eq(npk, 3);
	for (uint32_t j = 0; j < npk; j++)
		ck_assert(rs.c[pk[j].cand].buf != x1 || rs.c[pk[j].cand].gap != 0);
	pr.dur[3] = 1.1 * RC_MIN_AWAY_S;
	choose(NULL, NULL, 0, &sk);
	ck_assert_uint_eq(sk.brief, 0);
	ck_assert_uint_eq(npk, 4);
	(void)x2;
}
END_TEST

/* A use of X, or of an input, on another stream than the chain's first
 * operation, anywhere in the iteration: never picked. */
START_TEST(choose_honours_streams)
{
	uint32_t x1, x2, stream[20] = { 0 };
	two_activations(4, 4 * KIB, 4 * KIB, &x1, &x2);
	struct rc_skipped sk;
	/* X1's last use on stream 1: both its gaps are passed over */
	stream[19] = 1;
	choose(NULL, stream, 0, &sk);
	ck_assert_uint_eq(npk, 0);
	ck_assert_uint_eq(sk.streams, rs.n);
	/* X1's chain on stream 2, and everything of X1's: X1 only */
	memset(stream, 0, sizeof stream);
	stream[2] = stream[4] = 2;
	choose(NULL, stream, 0, &sk);
	/* X1 is used on 0 at 19; X2's chain reads W, used on 2 at op 2 */
	ck_assert_uint_eq(sk.streams, 4);
	stream[3] = stream[5] = 2;
	stream[19] = 2;
	choose(NULL, stream, 0, &sk);
	ck_assert_uint_eq(sk.streams, 0);
	ck_assert_uint_eq(npk, rs.n);
	/* W, X2's input, used at op 2 on another stream than X2's chain (op 3) */
	stream[3] = stream[5] = 0;
	stream[19] = 0;
	stream[4] = 0;
	choose(NULL, stream, 0, &sk);
	ck_assert_uint_eq(npk, 0);
	ck_assert_uint_eq(sk.streams, rs.n);
}
END_TEST

/*
 * B (made by op 1 from W) is read at 2, by the chain of Y, and at 12; Y
 * is read at 3 and 10; the hump is at 6..7. B's gap 2..12 is away over
 * 3..11 and remade before 12; Y's replay at 10 reads B, which would be
 * away there. Whichever goes first, both are picked: B's replay is hoisted
 * to Y's, at 10, which remakes B first.
 */
static void
input_conflict(uint64_t bsize, uint64_t ysize, uint32_t *b, uint32_t *y)
{
	buf(KIB, PROF_NONE, PROF_NONE, 0, (int[]){ 1, RD, -1 });
	*b = buf(bsize, 1, 12, 1, (int[]){ 1, WR, 2, RD, 12, RD, -1 });
	*y = buf(ysize, 2, 10, 1, (int[]){ 2, WR, 3, RD, 10, RD, -1 });
	buf(16 * KIB, 6, 7, 0, (int[]){ 6, UN, 7, UN, -1 });
	replayable((int[]){ 1, 2, -1 });
	find();
	ck_assert_uint_eq(rs.c[cand_of(*b, 1)].r_hi, 12);
	ck_assert_uint_eq(rs.c[cand_of(*y, 1)].r_hi, 10);
}

/* The replay of pick j of pk (the test fails when b's gap k is not picked). */
static uint32_t
pick_r(uint32_t b, uint32_t k)
{
	for (uint32_t j = 0; j < npk; j++)
		if (rs.c[pk[j].cand].buf == b && rs.c[pk[j].cand].gap == k)
			return pk[j].r;
	ck_abort_msg("gap %u of buffer %u is not picked", k, b);
	return 0;
}

/* Both ways round, B and Y picked, B remade at Y's replay (and before it
 * there: its use at 10 is in its remade segment). */
static void
both_picked(uint32_t b, uint32_t y, uint64_t peak)
{
	ck_assert_uint_eq(npk, 2);
	ck_assert_uint_eq(pick_r(b, 1), 10);
	ck_assert_uint_eq(pick_r(y, 1), 10);
	ck_assert_uint_eq(peak, prof_peak(&pr, NULL) - pr.buf[b].size - pr.buf[y].size);
	derive(NULL);
	ck_assert_uint_eq(prof_peak(&dv, NULL), peak);
	uses_are(&dv, b, (int[]){ 1, 2, -1 });
	uses_are(&dv, pr.nbufs + (b < y ? 0 : 1), (int[]){ 10, 12, -1 });
	ck_assert_uint_eq(dv.buf[pr.nbufs + (b < y ? 0 : 1)].alloc, 10);
}

/* An input picked first: its replay is hoisted to its reader's. */
START_TEST(choose_hoists_an_input_away)
{
	uint32_t b, y;
	input_conflict(8 * KIB, 4 * KIB, &b, &y);
	struct rc_skipped sk;
	uint64_t peak = choose(NULL, NULL, 0, &sk);
	ck_assert_uint_eq(sk.conflict, 0);
	both_picked(b, y, peak);
}
END_TEST

/* A reader picked first: the input's replay goes right before the reader's. */
START_TEST(choose_remakes_an_input_of_a_pick_first)
{
	uint32_t b, y;
	input_conflict(4 * KIB, 8 * KIB, &b, &y);
	struct rc_skipped sk;
	uint64_t peak = choose(NULL, NULL, 0, &sk);
	ck_assert_uint_eq(sk.conflict, 0);
	both_picked(b, y, peak);
}
END_TEST

/*
 * A hoist that would leave the input away too briefly is a conflict: B is
 * read at 8 too, its gap 8..12 away over 9..11 and picked first (the hump
 * is at 9); Y's replay at 10 would hoist it to 10, away over op 9 alone,
 * which lasts less than RC_MIN_AWAY_S. Y is passed over (B's gap 2..8 is
 * picked too, for the peak that moves to 3..7).
 */
START_TEST(choose_refuses_a_hoist_too_brief)
{
	buf(KIB, PROF_NONE, PROF_NONE, 0, (int[]){ 1, RD, -1 });
	uint32_t b = buf(8 * KIB, 1, 12, 1, (int[]){ 1, WR, 2, RD, 8, RD, 12, RD, -1 });
	uint32_t y = buf(4 * KIB, 2, 10, 1, (int[]){ 2, WR, 3, RD, 10, RD, -1 });
	buf(16 * KIB, 9, 9, 0, (int[]){ 9, UN, -1 });
	replayable((int[]){ 1, 2, -1 });
	pr.dur[9] = RC_MIN_AWAY_S / 2;
	find();
	ck_assert_uint_eq(rs.c[cand_of(y, 1)].r_hi, 10);
	struct rc_skipped sk;
	uint64_t peak = choose(NULL, NULL, 0, &sk);
	ck_assert_uint_eq(pick_r(b, 2), 12);
	ck_assert_uint_eq(sk.conflict, 1);
	for (uint32_t j = 0; j < npk; j++)
		ck_assert_uint_ne(rs.c[pk[j].cand].buf, y);
	/* with op 9 long enough, the hoist is taken */
	pr.dur[9] = OP;
	find();
	peak = choose(NULL, NULL, 0, &sk);
	ck_assert_uint_eq(sk.conflict, 0);
	ck_assert_uint_eq(pick_r(b, 2), 10);
	ck_assert_uint_eq(pick_r(y, 1), 10);
	derive(NULL);
	ck_assert_uint_eq(prof_peak(&dv, NULL), peak);
}
END_TEST

/* Many picks come sorted by buffer, then gap, and rc_choose's peak is the
 * derived profile's. Two gaps of one buffer are both taken, and where the
 * humps hold the peak, the gaps that lower the other operations too. */
START_TEST(choose_sorts_the_picks)
{
	buf(KIB, PROF_NONE, PROF_NONE, 0, (int[]){ 1, RD, 2, RD, 3, RD, -1 });
	for (int k = 0; k < 3; k++) {
		int op = 3 - k;	/* the later buffers are made earlier */
		buf((uint64_t)(4 + k) * KIB, (uint32_t)op, 19, 1,
		    (int[]){ op, WR, 5, RD, 12, RD, 19, RD, -1 });
	}
	buf(16 * KIB, 8, 9, 0, (int[]){ 8, UN, 9, UN, -1 });
	buf(16 * KIB, 15, 16, 0, (int[]){ 15, UN, 16, UN, -1 });
	replayable((int[]){ 1, 2, 3, -1 });
	find();
	struct rc_skipped sk;
	uint64_t peak = choose(NULL, NULL, 0, &sk);
	ck_assert_uint_eq(npk, rs.n);	/* every gap lowers an operation over 0 */
	ck_assert_uint_eq(npk, 9);
	for (uint32_t j = 1; j < npk; j++) {
		const struct replay_cand *a = &rs.c[pk[j - 1].cand], *b = &rs.c[pk[j].cand];
		ck_assert(a->buf < b->buf || (a->buf == b->buf && a->gap < b->gap));
	}
	derive(NULL);
	ck_assert_uint_eq(dv.nbufs, pr.nbufs + 9);
	ck_assert_uint_eq(prof_peak(&dv, NULL), peak);
	ck_assert_uint_eq(peak, KIB + 16 * KIB);
}
END_TEST

/*
 * plan_make_recompute: a GiB X made by op 10 from a small W and read at 11
 * and 90, over an unmovable GiB at 40..60, to be held at a GiB and 1 MiB.
 * On a link that copies a GiB in 60 operations, moves alone meet it only
 * by stalling (the gap is 78 operations long), and the replay of op 10 (one
 * operation) wins: the plan with recompute meets the target and is faster. On a fast link with a replay
 * of 50 operations, the moves stay.
 */
static void
one_big_activation(double cost)
{
	start(100);
	buf(KIB, PROF_NONE, PROF_NONE, 0, (int[]){ 10, RD, -1 });
	buf(GIB, 10, 95, 1, (int[]){ 10, WR, 11, RD, 90, RD, -1 });
	buf(GIB, 40, 60, 0, (int[]){ 40, UN, 60, UN, -1 });
	replayable((int[]){ 10, -1 });
	pr.dur[10] = cost * OP;
	find();
}

/* copy_ops: how many operations a GiB takes to copy, each way */
static struct plan_params
params(uint64_t target, double copy_ops)
{
	return (struct plan_params){ .target = target, .d2h_bps = (double)GIB / (copy_ops * OP),
		.h2d_bps = (double)GIB / (copy_ops * OP), .min_bytes = 1, .allow_stall = 1 };
}

START_TEST(recompute_wins_on_a_slow_link)
{
	one_big_activation(1);
	struct plan_params pp = params(GIB + (1 << 20), 60);
	struct plan moves;
	struct plan_rc rc;
	ck_assert_int_eq(plan_make(&pr, &pp, &moves), 0);
	ck_assert_int_eq(plan_make_recompute(&pr, &rs, NULL, NULL, &pp, &moves, &rc), 1);
	ck_assert_int_eq(rc.pl.met, 1);
	ck_assert_int_eq(moves.met, 1);
	ck_assert(moves.stall_s > 50 * OP);
	ck_assert(moves.step_s > rc.pl.step_s);
	ck_assert_double_eq_tol(rc.pl.step_s, 101 * OP, 1e-12);
	ck_assert_uint_eq(rc.npick, 1);
	ck_assert_uint_eq(rc.pick[0].r, 90);
	ck_assert(rc.recompute_s == OP);
	ck_assert_uint_eq(rc.bytes_recomputed, GIB);
	ck_assert_uint_eq(rc.pl.n, 0);
	ck_assert_uint_eq(rc.derived.nbufs, pr.nbufs + 1);
	ck_assert_uint_eq(rc.orig[pr.nbufs], 1);
	ck_assert_uint_le(rc.pl.peak, pp.target);
	plan_rc_fini(&rc);
	/* a target met already: nothing to recompute */
	pp.target = prof_peak(&pr, NULL);
	ck_assert_int_eq(plan_make_recompute(&pr, &rs, NULL, NULL, &pp, &moves, &rc), 0);
	ck_assert_uint_eq(rc.npick, 0);
	plan_fini(&moves);
}
END_TEST

START_TEST(moves_stay_on_a_fast_link)
{
	one_big_activation(50);
	struct plan_params pp = params(GIB + (1 << 20), 8);
	struct plan moves;
	struct plan_rc rc;
	ck_assert_int_eq(plan_make(&pr, &pp, &moves), 0);
	ck_assert_int_eq(moves.met, 1);
	ck_assert_int_eq(plan_make_recompute(&pr, &rs, NULL, NULL, &pp, &moves, &rc), 0);
	ck_assert_uint_eq(rc.npick, 0);
	ck_assert_ptr_null(rc.pick);
	plan_fini(&moves);
}
END_TEST

/*
 * Recompute and moves together: two GiB activations over an unmovable GiB
 * at 40..60, X1 made by op 10 (one operation) and read at 90, X2 by op 12
 * (50 operations) and read at 88. On a link that copies a GiB in 20
 * operations the two restores after the hump take 40 for 28 and 30: moving
 * both stalls; recomputing both costs 51 operations. Recomputing X1 and
 * moving X2 costs one: the level with one pick wins.
 */
START_TEST(recompute_one_and_move_the_other)
{
	start(100);
	buf(KIB, PROF_NONE, PROF_NONE, 0, (int[]){ 10, RD, 12, RD, -1 });
	uint32_t x1 = buf(GIB, 10, 90, 1, (int[]){ 10, WR, 11, RD, 90, RD, -1 });
	uint32_t x2 = buf(GIB, 12, 88, 1, (int[]){ 12, WR, 13, RD, 88, RD, -1 });
	buf(GIB, 40, 60, 0, (int[]){ 40, UN, 60, UN, -1 });
	replayable((int[]){ 10, 12, -1 });
	pr.dur[12] = 50 * OP;
	find();
	struct plan_params pp = params(GIB + (1 << 20), 20);
	struct plan moves;
	struct plan_rc rc;
	ck_assert_int_eq(plan_make(&pr, &pp, &moves), 0);
	ck_assert_int_eq(moves.met, 1);
	ck_assert(moves.stall_s > 0);
	ck_assert_int_eq(plan_make_recompute(&pr, &rs, NULL, NULL, &pp, &moves, &rc), 1);
	ck_assert_int_eq(rc.pl.met, 1);
	ck_assert_uint_eq(rc.npick, 1);
	ck_assert_uint_eq(rs.c[rc.pick[0].cand].buf, x1);
	ck_assert_uint_eq(rc.pl.n, 1);
	ck_assert_uint_eq(rc.orig[rc.pl.mv[0].buf], x2);
	ck_assert_double_eq_tol(rc.pl.step_s, 150 * OP, 1e-12);
	ck_assert(rc.pl.step_s < moves.step_s);
	plan_rc_fini(&rc);
	plan_fini(&moves);
}
END_TEST

/*
 * Between the levels: eight GiB activations over an unmovable 2 GiB at
 * 40..60, to be held at 2 GiB and a MiB. A_i is made by op 10 + 2i, read
 * right after and at 90 + i; A_1's producer takes 50 operations, the
 * others' one. A link that copies a GiB in 20 operations takes A_1 out
 * before the hump and back after it, and no more without stalls. So seven
 * replays and that move hold the target, 7 operations over the iteration.
 * The fixed levels of recompute miss it: all the way, all eight are
 * recomputed (A_1's 50 operations among them); three quarters of the way,
 * six, and the moves of the other two stall. The search around the best
 * level finds the seven.
 */
START_TEST(recompute_between_the_levels)
{
	uint32_t a[9];

	start(100);
	buf(KIB, PROF_NONE, PROF_NONE, 0, (int[]){ 12, RD, 14, RD, 16, RD, 18, RD, 20, RD, 22, RD,
	    24, RD, 26, RD, -1 });
	for (int i = 1; i <= 8; i++)
		a[i] = buf(GIB, 10 + 2 * i, 90 + i, 1, (int[]){ 10 + 2 * i, WR, 11 + 2 * i, RD,
		    90 + i, RD, -1 });
	buf(2 * GIB, 40, 60, 0, (int[]){ 40, UN, 60, UN, -1 });
	replayable((int[]){ 12, 14, 16, 18, 20, 22, 24, 26, -1 });
	pr.dur[12] = 50 * OP;
	find();
	struct plan_params pp = params(2 * GIB + (1 << 20), 20);
	struct plan moves;
	struct plan_rc rc;
	ck_assert_int_eq(plan_make(&pr, &pp, &moves), 0);
	ck_assert_int_eq(moves.met, 0);
	ck_assert_int_eq(plan_make_recompute(&pr, &rs, NULL, NULL, &pp, &moves, &rc), 1);
	ck_assert_int_eq(rc.pl.met, 1);
	ck_assert_uint_eq(rc.npick, 7);
	for (uint32_t k = 0; k < rc.npick; k++)
		ck_assert_uint_ne(rs.c[rc.pick[k].cand].buf, a[1]);
	ck_assert(rc.recompute_s == 7 * OP);
	ck_assert_uint_eq(rc.pl.n, 1);
	ck_assert_uint_eq(rc.orig[rc.pl.mv[0].buf], a[1]);
	ck_assert_uint_le(rc.pl.peak, pp.target);
	ck_assert(rc.pl.stall_s == 0);
	ck_assert_double_eq_tol(rc.pl.step_s, (100 + 49 + 7) * OP, 1e-12);
	plan_rc_fini(&rc);
	plan_fini(&moves);
}
END_TEST

/* A random profile of 60 operations much as check_replay.c's: buffers with
 * random lifetimes and uses, each use read, written or not measured (the
 * first mostly written, the others mostly read), most operations
 * replayable, the host's side or not. */
static void
random_profile(unsigned *seed)
{
	start(60);
	for (uint32_t i = 0; i < 60; i++) {
		pr.dur[i] = (1 + rand_r(seed) % 8) * OP;
		if (rand_r(seed) % 6 != 0)
			ck_assert_int_eq(prof_replayable(&pr, i), 0);
	}
	if (rand_r(seed) % 2)
		ck_assert_int_eq(prof_host(&pr), 0);
	pr.fixed = (uint64_t)(rand_r(seed) % 3) * KIB;
	for (int k = 0; k < 30; k++) {
		int persistent = rand_r(seed) % 5 == 0;
		uint32_t a = (uint32_t)(rand_r(seed) % 50);
		uint32_t f = a + (uint32_t)(rand_r(seed) % (60 - a));
		int ua[2 * 12 + 1], n = 0;
		for (uint32_t op = a; op <= f && n < 24; op++) {
			if (rand_r(seed) % 5 != 0 && op != a)
				continue;
			int r = rand_r(seed) % 40;
			ua[n++] = (int)op;
			ua[n++] = op == a && r < 32 ? WR : r < 34 ? RD : r < 39 ? WR : UN;
		}
		ua[n] = -1;
		buf((uint64_t)(1 + rand_r(seed) % 8) * KIB, persistent ? PROF_NONE : a,
		    persistent ? PROF_NONE : f, rand_r(seed) % 8 != 0, ua);
	}
}

/* The memory of q at op, the slow way. */
static uint64_t
slow_mem(const struct prof *q, uint32_t op)
{
	uint64_t m = q->fixed;

	for (uint32_t b = 0; b < q->nbufs; b++) {
		const struct prof_buf *s = &q->buf[b];
		if ((s->alloc == PROF_NONE || s->alloc <= op) && (s->free == PROF_NONE || op <= s->free))
			m += s->size;
	}
	return m;
}

/* Whether buffer b of q has a use at op. */
static int
has_use(const struct prof *q, uint32_t b, uint32_t op)
{
	for (uint32_t u = 0; u < q->buf[b].nuse; u++)
		if (q->buf[b].use[u] == op)
			return 1;
	return 0;
}

/* The derived profile dv of the picks pk is sound: every buffer's uses
 * increase within its life; each pick's inputs have a use at its replay
 * (or at their free right before it) in a segment that exists there. */
static void
derived_is_sound(void)
{
	for (uint32_t d = 0; d < dv.nbufs; d++) {
		const struct prof_buf *s = &dv.buf[d];
		for (uint32_t u = 0; u < s->nuse; u++) {
			ck_assert(u == 0 || s->use[u - 1] < s->use[u]);
			ck_assert(s->alloc == PROF_NONE || s->alloc <= s->use[u]);
			ck_assert(s->free == PROF_NONE || s->use[u] <= s->free);
		}
	}
	for (uint32_t j = 0; j < npk; j++) {
		uint32_t *in, nin, r = pk[j].r;
		ck_assert_int_eq(rc_inputs(&pr, NULL, &rs, &rs.c[pk[j].cand], &in, &nin), 0);
		for (uint32_t k = 0; k < nin; k++) {
			int found = 0;
			for (uint32_t d = 0; d < dv.nbufs; d++)
				if (orig[d] == in[k] && (has_use(&dv, d, r) ||
				    (dv.buf[d].free == r - 1 && has_use(&dv, d, r - 1))))
					found = 1;
			ck_assert_msg(found, "input %u of pick %u has no use at %u", in[k], j, r);
		}
		free(in);
	}
}

/* Candidate i's buffer or an input has a use on another stream than its
 * chain's first operation, the slow way. */
static int
slow_off_stream(const uint32_t *stream, uint32_t i)
{
	const struct replay_cand *c = &rs.c[i];
	uint32_t *in, nin, s, off = 0;

	if (stream == NULL)
		return 0;
	s = stream[replay_chain(&rs, c)[0]];
	ck_assert_int_eq(rc_inputs(&pr, NULL, &rs, c, &in, &nin), 0);
	for (uint32_t k = 0; k <= nin; k++) {
		const struct prof_buf *b = &pr.buf[k < nin ? in[k] : c->buf];
		for (uint32_t u = 0; u < b->nuse; u++)
			off |= stream[b->use[u]] != s;
	}
	free(in);
	return off != 0;
}

/* Whether buffer b is an input of candidate i, the slow way: used by a
 * chain operation, written by none (those go into scratch). */
static int
slow_input(uint32_t i, uint32_t b)
{
	const struct replay_cand *c = &rs.c[i];
	int used = 0;

	for (uint32_t j = 0; j < c->nchain; j++) {
		uint32_t op = replay_chain(&rs, c)[j];
		if (b == c->buf)
			return 0;
		if (prof_access_of(&pr, b, op) == WR && has_use(&pr, b, op))
			return 0;
		used |= has_use(&pr, b, op);
	}
	return used;
}

/* Pick j of pk has an input away at its replay, the slow way: another
 * pick's buffer is an input of j's, away there (use[k] + 1 <= r < its r). */
static int
slow_input_away(uint32_t j)
{
	for (uint32_t o = 0; o < npk; o++) {
		const struct replay_cand *c = &rs.c[pk[o].cand];
		uint32_t a = pr.buf[c->buf].use[c->gap] + 1;
		if (o != j && slow_input(pk[j].cand, c->buf) && a <= pk[j].r && pk[j].r < pk[o].r)
			return 1;
	}
	return 0;
}

/* Candidate i reads a pick's buffer, or a pick reads its buffer (the slow
 * way): where the choice may hoist one for the other. */
static int
slow_related(uint32_t i)
{
	for (uint32_t j = 0; j < npk; j++)
		if (slow_input(i, rs.c[pk[j].cand].buf) || slow_input(pk[j].cand, rs.c[i].buf))
			return 1;
	return 0;
}

/*
 * Random profiles: rc_choose's peak is prof_peak of rc_derive's profile,
 * which is the memory counted the slow way; the target is met or no
 * candidate covers the peak but one related to a pick; every input is on
 * the device at each replay; the picks for a higher target are the first of
 * those for a lower one (the greedy order does not depend on the target),
 * and some replays are hoisted.
 */
START_TEST(random_profiles_choose_what_derive_makes)
{
	unsigned seed = 11;
	uint64_t picks = 0, hoisted = 0, streams = 0;

	for (int round = 0; round < 300; round++) {
		random_profile(&seed);
		find();
		uint8_t *usable = malloc(rs.n ? rs.n : 1);
		for (uint32_t i = 0; i < rs.n; i++)
			usable[i] = rand_r(&seed) % 8 != 0;
		uint32_t stream[60];
		for (uint32_t i = 0; i < 60; i++)
			stream[i] = rand_r(&seed) % 30 == 0;
		uint64_t before = prof_peak(&pr, NULL);
		uint64_t target = (uint64_t)(rand_r(&seed) % 100) * before / 100;
		struct rc_skipped sk;
		uint64_t peak = choose(usable, round % 2 ? stream : NULL, target, &sk);
		derive(NULL);
		uint32_t at;
		ck_assert_uint_eq(prof_peak(&dv, &at), peak);
		uint64_t slow = 0;
		for (uint32_t i = 0; i < 60; i++)
			slow = slow_mem(&dv, i) > slow ? slow_mem(&dv, i) : slow;
		ck_assert_uint_eq(slow, peak);
		ck_assert_uint_le(peak, before);
		derived_is_sound();
		for (uint32_t j = 0; j < npk; j++) {
			ck_assert(usable[pk[j].cand]);
			ck_assert(!slow_off_stream(round % 2 ? stream : NULL, pk[j].cand));
			ck_assert(!slow_input_away(j));
			hoisted += pk[j].r < rs.c[pk[j].cand].r_hi;
		}
		/* short of the target: every candidate over the peak was passed over */
		for (uint32_t i = 0; peak > target && i < rs.n; i++) {
			const struct replay_cand *c = &rs.c[i];
			uint32_t a = pr.buf[c->buf].use[c->gap] + 1;
			int picked = 0;
			for (uint32_t j = 0; j < npk; j++)
				picked |= pk[j].cand == i;
			if (!picked && usable[i] && a <= at && at < c->r_hi)
				ck_assert(slow_off_stream(round % 2 ? stream : NULL, i) ||
				    slow_related(i));
		}
		/* a higher target: the first of these picks, each replayed no
		 * earlier (the later picks may hoist it) */
		struct rc_pick *all = pk;
		uint32_t nall = npk;
		pk = NULL;
		choose(usable, round % 2 ? stream : NULL, target + (before - target) / 2, &sk);
		ck_assert_uint_le(npk, nall);
		for (uint32_t j = 0; j < npk; j++) {
			int in = 0;
			for (uint32_t q = 0; q < nall; q++)
				in |= all[q].cand == pk[j].cand && all[q].r <= pk[j].r;
			ck_assert(in);
		}
		free(all);
		picks += nall;
		streams += sk.streams;
		free(usable);
	}
	ck_assert_uint_gt(picks, 100);
	ck_assert_uint_gt(hoisted, 0);
	ck_assert_uint_gt(streams, 0);
}
END_TEST

/*
 * A profile of the size of a training step's (50,000 operations, 6,000
 * activations of two gaps each, 100 weights): the choice down to the
 * unmovable memory is quick. Operation 2j makes activation j from weight
 * j mod 100, 2j + 1 reads it, and backward operation 40,001 + 1.5j reads it
 * last.
 */
START_TEST(profile_of_a_training_step)
{
	enum { OPS = 50000, WEIGHTS = 100, ACTS = 6000 };

	start(OPS);
	for (uint32_t i = 0; i < OPS; i++)
		ck_assert_int_eq(prof_replayable(&pr, i), 0);
	for (uint32_t w = 0; w < WEIGHTS; w++)
		ck_assert_int_eq(prof_add(&pr, 4 * KIB, w, PROF_NONE, 0), w);
	for (uint32_t j = 0; j < ACTS; j++) {
		uint32_t w = j % WEIGHTS;
		ck_assert_int_eq(prof_use(&pr, w, 2 * j), 0);
		ck_assert_int_eq(prof_access(&pr, w, 2 * j, RD), 0);
	}
	for (uint32_t j = 0; j < ACTS; j++) {
		int op = (int)(2 * j), last = 40001 + (int)(3 * j / 2);
		buf(KIB, 2 * j, (uint32_t)last, 1, (int[]){ op, WR, op + 1, RD, last, RD, -1 });
	}
	find();
	ck_assert_uint_eq(rs.n, 2 * ACTS);
	struct rc_skipped sk;
	uint64_t peak = choose(NULL, NULL, 0, &sk);
	ck_assert_uint_eq(peak, WEIGHTS * 4 * KIB + KIB);
	ck_assert_uint_eq(sk.conflict, 0);
	derive(NULL);
	ck_assert_uint_eq(prof_peak(&dv, NULL), peak);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("recompute");
	TCase *tc = tcase_create("recompute");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 30);
	add_test(tc, derive_splits_the_buffer);
	add_test(tc, derive_two_gaps_and_the_inputs_edges);
	add_test(tc, choose_meets_a_target_cheapest_first);
	add_test(tc, choose_honours_usable);
	add_test(tc, choose_honours_streams);
	add_test(tc, choose_passes_over_brief_gaps);
	add_test(tc, choose_hoists_an_input_away);
	add_test(tc, choose_remakes_an_input_of_a_pick_first);
	add_test(tc, choose_refuses_a_hoist_too_brief);
	add_test(tc, choose_sorts_the_picks);
	add_test(tc, recompute_wins_on_a_slow_link);
	add_test(tc, moves_stay_on_a_fast_link);
	add_test(tc, recompute_one_and_move_the_other);
	add_test(tc, recompute_between_the_levels);
	add_test(tc, random_profiles_choose_what_derive_makes);
	add_test(tc, profile_of_a_training_step);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
