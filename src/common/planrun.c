/*
 * planrun.c: the planner run against the clock (planrun.h). The searches
 * of policy/ read no clock; they ask a stop predicate once a round, and
 * the one here says stop where the deadline has passed, or where the
 * search has been cancelled because the other's result makes it moot.
 */
#include "config.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "planrun.h"

/* When a search must stop: the deadline (a monotonic clock's seconds;
 * INFINITY: none), and a flag another thread sets (NULL: none). */
struct planrun_limit {
	double deadline;
	atomic_int *cancel;
};

/* Seconds of a monotonic clock, for plan_make's time limit. */
static double
mono_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The searches' stop predicate (struct plan_stop): whether cancel is set, or
 * the clock is past the deadline. arg: a struct planrun_limit. */
static int
out_of_time(void *arg)
{
	const struct planrun_limit *l = arg;

	if (l->cancel != NULL && atomic_load_explicit(l->cancel, memory_order_relaxed))
		return 1;
	return l->deadline < INFINITY && mono_now() > l->deadline;
}

/* The search for waits, on a thread of its own beside the greedy search. */
struct waits_job {
	const struct prof *p;
	const struct plan_params *pp;
	double deadline;
	atomic_int cancel;	/* set: the greedy search's result makes it moot */
	double first_got;
	int r;
	struct plan alt;
};

/* The thread of the search for waits: plan_waits, the greedy stall not yet
 * known, stopped by the deadline or by j->cancel. */
static void *
waits_main(void *arg)
{
	struct waits_job *j = arg;
	struct planrun_limit l = { j->deadline, &j->cancel };
	struct plan_stop stop = { out_of_time, &l };

	j->r = plan_waits(j->p, j->pp, NAN, &stop, &j->first_got, &j->alt);
	return NULL;
}

/* Plan for the profile under the time limit (planrun.h). Returns 0, or -1
 * when out of memory. */
int
plan_make(const struct prof *p, const struct plan_params *pp, struct plan *out)
{
	double deadline = pp->time_limit_s > 0 ? mono_now() + pp->time_limit_s : INFINITY;
	struct planrun_limit l = { deadline, NULL };
	struct plan_stop stop = { out_of_time, &l };
	int want_waits = plan_waits_wanted(pp);
	struct waits_job *j = NULL;
	pthread_t t;

	/*
	 * The search for waits needs nothing of the greedy search's until its
	 * first round is done (whether it can gain on the greedy plan's stall):
	 * it runs beside it on a thread of its own (where the job's CPU time
	 * allows), and is cancelled or dropped where the greedy result makes it
	 * moot. The plans are those of the two searches one after the other.
	 */
	if (want_waits && (j = calloc(1, sizeof *j)) != NULL) {
		*j = (struct waits_job){ .p = p, .pp = pp, .deadline = deadline, .r = -1 };
		atomic_init(&j->cancel, 0);
		if (pthread_create(&t, NULL, waits_main, j) != 0) {
			free(j);
			j = NULL;	/* one after the other, then */
		}
	}
	int made = plan_greedy(p, pp, &stop, out);
	int moot = plan_waits_moot(pp, made, out);
	struct plan alt;
	int r = 1;
	if (j != NULL) {
		if (moot)
			atomic_store(&j->cancel, 1);
		pthread_join(t, NULL);
		alt = j->alt;
		r = j->r;
		/* dropped where plan_waits, the greedy stall known, would have
		 * stopped at its first round, or not been called */
		if (r == 0 && (moot || plan_waits_no_gain(out->stall_s, j->first_got))) {
			plan_fini(&alt);
			r = 1;
		}
		free(j);
	} else if (!moot) {
		double first_got;
		r = plan_waits(p, pp, out->stall_s, &stop, &first_got, &alt);
	}
	if (made != 0)
		return -1;
	if (moot)
		return 0;
	/* the waits' search cut short: a better plan may have been missed */
	if (deadline < INFINITY && mono_now() > deadline)
		out->time_capped = 1;
	if (r != 0)
		return 0;	/* out of memory, or nothing to gain: the plan made stands */
	plan_pick(out, &alt);
	return 0;
}

/* The lowest peak with no restore late (planrun.h): plan_make's plan for
 * target 0 without stalls. Returns 0 when out of memory. */
uint64_t
plan_bound(const struct prof *p, const struct plan_params *pp)
{
	struct plan_params q = *pp;
	struct plan pl;

	q.target = 0;
	q.allow_stall = 0;
	if (plan_make(p, &q, &pl) != 0)
		return 0;
	uint64_t peak = pl.peak;
	plan_fini(&pl);
	return peak;
}

/* Which plan is better (planrun.h). */
int
plan_better(const struct plan *a, const struct plan *b)
{
	if (a->met != b->met)
		return a->met;
	if (!a->met && a->peak != b->peak)
		return a->peak < b->peak;
	return a->step_s < b->step_s;
}

/* Free what a plan with recompute holds (planrun.h). */
void
plan_rc_fini(struct plan_rc *r)
{
	plan_fini(&r->pl);
	prof_fini(&r->derived);
	free(r->orig);
	free(r->pick);
	memset(r, 0, sizeof *r);
}

/* One level's plan into r: the picks pk (n of them, taken over), the profile
 * with them, and its move plan under q. Returns 0, or -1 when out of memory
 * (r empty). */
static int
plan_level(const struct prof *p, const struct replay_set *rs, struct rc_pick *pk, uint32_t n,
    const struct rc_skipped *sk, const struct plan_params *q, struct plan_rc *r)
{
	memset(r, 0, sizeof *r);
	r->pick = pk;
	r->npick = n;
	r->skipped = *sk;
	for (uint32_t j = 0; j < n; j++) {
		r->recompute_s += rs->c[pk[j].cand].cost_s;
		r->bytes_recomputed += rs->c[pk[j].cand].bytes;
		r->hoisted += pk[j].r < rs->c[pk[j].cand].r_hi;
	}
	struct rc_params rp = { .host_drop_s = q->host_drop_s, .host_remake_s = q->host_remake_s };
	if (rc_derive(p, rs, pk, n, &rp, &r->derived, &r->orig) < 0 ||
	    plan_make(&r->derived, q, &r->pl) < 0) {
		plan_rc_fini(r);
		return -1;
	}
	return 0;
}

/* One level's planning, on a thread of its own (plan_make_recompute). */
struct level_job {
	const struct prof *p;
	const struct replay_set *rs;
	struct rc_pick *pk;		/* its picks, taken over by plan_level */
	uint32_t n;
	struct rc_skipped sk;
	struct plan_params q;
	int r;				/* plan_level's: 0, or -1 out of memory */
	struct plan_rc out;
};

/* A level planned: where the next round looks (plan_make_recompute). */
struct level_tried {
	uint64_t t;		/* its recompute-only target */
	uint64_t rc_peak;	/* the peak its picks reach alone */
	struct plan pl;		/* its plan's met, peak and step_s (no more: for
				 * plan_better) */
	uint32_t n;		/* its picks */
};

/* The most levels one search plans: the first round's four, and two rounds
 * of at most four each. */
#define LEVELS_MAX 12

/* The state of one search with recompute (plan_make_recompute). */
struct levels {
	const struct prof *p;
	const struct replay_set *rs;
	const uint8_t *usable;
	const uint32_t *stream;
	const struct plan_params *pp;
	const struct plan *moves_only;
	struct level_tried tried[LEVELS_MAX];
	uint32_t ntried;
	struct plan_rc *best;	/* the best so far, when have */
	int have;
	double deadline;	/* pp->time_limit_s from the start (mono_now; INFINITY:
				 * none), shared by the rounds */
};

/* A level's thread: its plan (plan_level). */
static void *
level_main(void *arg)
{
	struct level_job *j = arg;

	j->r = plan_level(j->p, j->rs, j->pk, j->n, &j->sk, &j->q, &j->out);
	return NULL;
}

/* Whether a level with n picks was planned already (the greedy choice
 * stops where its target is met: the same count is the same picks). */
static int
tried_n(const struct levels *lv, uint32_t n)
{
	for (uint32_t k = 0; k < lv->ntried; k++)
		if (lv->tried[k].n == n)
			return 1;
	return 0;
}

/*
 * Plan the levels of recompute-only targets t[0 .. nt) side by side, a
 * thread each (one after the other where no thread can be made), each
 * under pp->time_limit_s; a level whose picks were planned already is
 * passed over. Each is noted in lv->tried and kept in lv->best when better.
 * Returns 0, or -1 when out of memory.
 */
static int
plan_round(struct levels *lv, const uint64_t *t, uint32_t nt)
{
	struct level_job job[4];
	struct level_tried tr[4];
	pthread_t tid[4];
	uint8_t started[4] = { 0 };
	uint32_t nj = 0;
	int oom = 0;

	for (uint32_t l = 0; l < nt && nj < 4 && lv->ntried + nj < LEVELS_MAX; l++) {
		struct level_job *j = &job[nj];
		uint64_t rc_peak = 0;
		memset(j, 0, sizeof *j);
		if (rc_choose(lv->p, lv->rs, lv->usable, lv->stream, t[l], &j->pk, &j->n, &j->sk,
		    &rc_peak) < 0) {
			oom = 1;
			break;
		}
		int again = j->n == 0 || tried_n(lv, j->n);
		for (uint32_t k = 0; k < nj && !again; k++)
			again = tr[k].n == j->n;
		if (again) {
			free(j->pk);
			continue;
		}
		tr[nj] = (struct level_tried){ .t = t[l], .rc_peak = rc_peak, .n = j->n };
		*j = (struct level_job){ .p = lv->p, .rs = lv->rs, .pk = j->pk, .n = j->n,
			.sk = j->sk, .q = *lv->pp, .r = -1 };
		/* (0 would be no limit: a level past the deadline gets a moment) */
		if (isfinite(lv->deadline))
			j->q.time_limit_s = fmax(lv->deadline - mono_now(), 1e-3);
		nj++;
	}
	for (uint32_t k = 0; k < nj && !oom; k++)
		started[k] = pthread_create(&tid[k], NULL, level_main, &job[k]) == 0;
	for (uint32_t k = 0; k < nj; k++) {
		if (started[k])
			pthread_join(tid[k], NULL);
		else if (!oom)
			level_main(&job[k]);	/* no thread: here */
		else
			free(job[k].pk);
	}
	for (uint32_t k = 0; k < nj; k++) {
		if (!started[k] && oom)
			continue;
		if (job[k].r < 0) {
			oom = 1;
			continue;
		}
		tr[k].pl.met = job[k].out.pl.met;
		tr[k].pl.peak = job[k].out.pl.peak;
		tr[k].pl.step_s = job[k].out.pl.step_s;
		lv->tried[lv->ntried++] = tr[k];
		if (!oom && plan_better(&job[k].out.pl, lv->have ? &lv->best->pl : lv->moves_only)) {
			if (lv->have)
				plan_rc_fini(lv->best);
			*lv->best = job[k].out;
			lv->have = 1;
		} else {
			plan_rc_fini(&job[k].out);
		}
	}
	return oom ? -1 : 0;
}

/* Add x to the n targets of t (room for 4) unless it is outside (lo, hi)
 * or t is full. Returns the new count. */
static uint32_t
add_target(uint64_t *t, uint32_t n, uint64_t x, uint64_t lo, uint64_t hi)
{
	if (n < 4 && x > lo && x < hi)
		t[n++] = x;
	return n;
}

/*
 * The recompute-only targets worth planning next, into t (room for 4),
 * around the best level so far: halfway and a quarter of the way to the
 * planned levels on either side of it (pp->target below the lowest, p's
 * peak, before, above the highest). On the first round, first the target
 * a level that missed points at: its moves took its peak down by some
 * bytes, their reach; recomputing down to pp->target plus that reach
 * leaves the rest to moves of about the same reach. Returns how many; 0
 * when no level was planned, or both neighbours are within 1/64 of the
 * distance from before to pp->target.
 */
static uint32_t
next_targets(const struct levels *lv, uint64_t before, int first, uint64_t *t)
{
	uint64_t target = lv->pp->target, lo = target, hi = before;
	uint64_t close = (before - target) / 64;
	const struct level_tried *best = &lv->tried[0], *miss = NULL;
	uint32_t n = 0;

	if (lv->ntried == 0)
		return 0;	/* no level with picks of its own */
	for (uint32_t k = 1; k < lv->ntried; k++)
		if (plan_better(&lv->tried[k].pl, &best->pl))
			best = &lv->tried[k];
	for (uint32_t k = 0; k < lv->ntried; k++) {
		const struct level_tried *x = &lv->tried[k];
		if (x->t < best->t && x->t > lo)
			lo = x->t;
		if (x->t > best->t && x->t < hi)
			hi = x->t;
		if (!x->pl.met && x->rc_peak > x->pl.peak && (miss == NULL || x->t < miss->t))
			miss = x;
	}
	if (first && miss != NULL)
		n = add_target(t, n, target + (miss->rc_peak - miss->pl.peak), target, before);
	if (best->t - lo > close) {
		n = add_target(t, n, best->t - (best->t - lo) / 2, lo, best->t);
		n = add_target(t, n, best->t - (best->t - lo) / 4, lo, best->t);
	}
	if (hi - best->t > close) {
		n = add_target(t, n, best->t + (hi - best->t) / 2, best->t, hi);
		n = add_target(t, n, best->t + (hi - best->t) / 4, best->t, hi);
	}
	return n;
}

/* Plan with recompute (planrun.h). Returns 1 (out: a better plan than
 * moves_only), 0 (moves_only stays), or -1 when out of memory. */
int
plan_make_recompute(const struct prof *p, const struct replay_set *rs, const uint8_t *usable,
    const uint32_t *stream, const struct plan_params *pp, const struct plan *moves_only,
    struct plan_rc *out)
{
	static const double level[] = { 1.0, 0.75, 0.5, 0.25 };
	uint64_t before = prof_peak(p, NULL);
	struct levels lv = { .p = p, .rs = rs, .usable = usable, .stream = stream, .pp = pp,
		.moves_only = moves_only, .best = out,
		.deadline = pp->time_limit_s > 0 ? mono_now() + pp->time_limit_s : INFINITY };
	uint64_t t[4];

	memset(out, 0, sizeof *out);
	if (rs->n == 0 || before <= pp->target)
		return 0;
	for (uint32_t l = 0; l < 4; l++)
		t[l] = before - (uint64_t)(level[l] * (double)(before - pp->target));
	int r = plan_round(&lv, t, 4);
	/* two rounds around the best level so far */
	for (int round = 0; r == 0 && round < 2 && mono_now() < lv.deadline; round++) {
		uint32_t n = next_targets(&lv, before, round == 0, t);
		if (n == 0)
			break;
		r = plan_round(&lv, t, n);
	}
	if (r < 0) {
		if (lv.have)
			plan_rc_fini(out);
		return -1;
	}
	return lv.have;
}
