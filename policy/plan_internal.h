/*
 * plan_internal.h: what the planner's files share (policy/ only; the API is
 * plan.h).
 *
 * prof.c: the profile. sim.c: the simulation of a plan's copies, stalls
 * and memory. search.c: the greedy search, and what a plan holds where.
 * floor.c: the floor under every plan. waits.c: the search for waits, and
 * the rule that picks between its plan and the greedy search's.
 *
 * Indices: operation i of the iteration runs in [T[i], E[i]); S = E[n-1].
 * A move may reach into the next iteration, so the simulation works with
 * "extended" operation indices x = i + k*n (iteration k after the one of the
 * offload), whose times are T[i] + k*S.
 */
#ifndef EBB_PLAN_INTERNAL_H
#define EBB_PLAN_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "plan.h"

/* ---- prof.c ---- */

/* Add size over the operations [first, last] of one iteration of n. */
void prof_span_add(int64_t *diff, uint32_t n, uint32_t first, uint32_t last, int64_t size);

/* The memory each buffer's lifetime adds, as a difference array (nops + 1). */
void prof_base_diff(const struct prof *p, int64_t *diff);

/* Each operation's start and end, with the device idle pad[i] seconds before
 * operation i (pad NULL: never); returns the iteration's time. */
double prof_timeline(const struct prof *p, const double *pad, double *T, double *E);

/* The device waiting for the host over one iteration, with noff[i] offloads
 * and nres[i] restores issued after operation i (NULL: none; pp may then be
 * NULL); 0 without the host's side. */
double prof_host_idle_moves(const struct prof *p, const struct plan_params *pp,
    const uint32_t *noff, const uint32_t *nres);

/* ---- sim.c ---- */

/* The kinds of gap between two uses of a buffer that a move bridges. */
enum gap_kind {
	GAP_BETWEEN,	/* between two uses in the iteration */
	GAP_WRAP,	/* from the last use to the first use of the next iteration */
	GAP_TAIL,	/* from the last use to the free: no restore */
	GAP_IDLE	/* a persistent buffer the iteration never uses: stays on the host */
};

/* A gap the greedy search may bridge (search.c), and its state there. */
struct cand {
	uint32_t buf, u, v;	/* v: the use after the gap, or the free (GAP_TAIL) */
	uint8_t kind;
	uint8_t state;		/* 0 open, 1 chosen, 2 tried and dropped */
	int64_t r0, a0;		/* the operations it saves with idle engines (extended) */
	int64_t last;		/* the last operation its restore may follow (extended) */
	int64_t not_before;	/* a late restore: issued after this operation, not before
				 * (-1: as late as the engine allows, and no later) */
	uint32_t retried_at;	/* chosen: the peak at which making it late was tried */
	uint32_t waited_at;	/* the peak at which waiting for it was tried */
	uint32_t tried_at;	/* open, stalls allowed: the peak at which choosing it
				 * failed (it stays open there for a wait) */
	double score;
};

/* The device waits before operation op (extended) for the offload of a
 * chosen candidate to land: a stall the plan allows for memory at op. */
struct wait {
	int64_t op;
	uint32_t cand;
};

/*
 * The simulation of the moves of chosen candidates (sim_run): the profile's
 * timeline and the job's copies, looked at once (sim_init), and the scratch
 * and results of the last simulation (sim_init_moves).
 */
struct sim {
	const struct prof *p;
	const struct plan_params *pp;
	uint32_t n;
	double S;
	double *T, *E;		/* start and end of each operation */
	uint32_t *tidx, *eidx;	/* n + 1 buckets of the iteration's time: the first
				 * operation that starts at or after, ends after, the
				 * bucket's start (bucket_range); NULL: none */
	uint32_t *next_d2h;	/* the first copy of the job's to the host at or after
				 * each operation (n: none), n + 1 entries */
	uint32_t *next_h2d;	/* the same, to the device */
	uint32_t *prev_h2d;	/* the last copy of the job's to the device at or before
				 * each operation (PROF_NONE: none) */
	int64_t *diff;
	int64_t *diff0;		/* prof_base_diff of the profile: what sim_run starts from */
	int64_t *mem;		/* memory held at each operation, fixed not included */
	/* scratch for one simulation */
	uint32_t *order;
	uint32_t *sort_tmp;	/* sort_by_key's */
	double *key;
	struct plan_move *mv;
	uint32_t *cidx;		/* candidate of each move */
	int32_t *move_of;	/* move of each candidate, -1: not chosen */
	struct wait *waits;	/* by op */
	uint32_t nwaits, wcap;	/* how many, and room for how many */
	uint32_t *d2h_order;	/* moves with a copy to the host, in issue order */
	uint32_t nd;
	uint32_t nsim;		/* simulations run */
	double d2h_carry;	/* when the copies the last iteration left queued on
				 * the engine to the host are done (0: none) */
	uint32_t *wait_order;	/* waits by operation within the iteration */
	double *land;		/* the replay's landing of each move, in two iterations */
	double *delay_at, *delay_sum;	/* the device's delays by late restores, by when
					 * (without them) the device reached the use: the
					 * times, increasing, and the delays up to each */
	uint32_t ndelay;
	struct pend {
		double dl;	/* its deadline (it does not change while pending) */
		uint32_t k;	/* the move */
		uint32_t ord;	/* the order it was pushed in */
	} *pend;		/* restores copied, not yet due: a heap, the earliest
				 * deadline on top (of equal ones, the last pushed) */
	/* the copies' orders of the last simulation, kept for the next when its
	 * chosen candidates begin with the same ones (the greedy adds one at a
	 * time): by move, in the order sort_by_key gives */
	uint32_t *c_chosen, c_m;	/* its chosen candidates */
	uint32_t *c_d2h, c_nd;		/* the moves with an offload, by E[after] */
	uint32_t *c_h2d, c_nh;		/* the moves with a restore, by -T[use] */
	double *c_kd, *c_kh;		/* those keys, by move */
	uint32_t npend, pushed;
	/* the results of the last simulation, kept while a trial runs (sim_try)
	 * and given back when it is undone (sim_undo), instead of simulating
	 * the moves before the trial again */
	int64_t *mem_alt;
	struct plan_move *mv_alt;
	uint32_t *d2h_order_alt, *cidx_alt;
	struct {
		int64_t peak;
		uint32_t peak_op, nd;
		double stall, d2h_carry;
		int infeasible;
	} kept;
	double *h2d_st, *h2d_en;	/* each restore's copy, until it is due */
	double stall;
	int64_t peak;
	uint32_t peak_op;
	int stalling;		/* stalls allowed, and the plan without them is done */
	int infeasible;		/* an offload could not be issued before the buffer's next
				 * use or free without delaying a copy of the job's */
};

/* Allocate s's arrays sized by the operations and fill them from p (pad:
 * the device idle before each operation, NULL: none); s->tidx and s->eidx
 * may be left NULL (the searches then go without). Returns 0, or -1 when
 * out of memory (free with sim_fini either way). */
int sim_init(struct sim *s, const struct prof *p, const struct plan_params *pp,
    const double *pad);

/* Allocate s's arrays sized by nc candidates: the scratch and the results of
 * a simulation. Returns 0, or -1 when out of memory. */
int sim_init_moves(struct sim *s, uint32_t nc);

/* Free every array of s (those allocated: sim_init's and sim_init_moves'). */
void sim_fini(struct sim *s);

/* Simulate the moves of the chosen candidates chosen[0..m) of c: fills
 * s->mv[0..m), s->stall, s->mem, s->peak. */
void sim_run(struct sim *s, const struct cand *c, const uint32_t *chosen, uint32_t m);

/* Before a trial simulation: keep what the last one found. */
void sim_try(struct sim *s);

/* The trial rejected: the simulation before it stands again. */
void sim_undo(struct sim *s);

/* The first operation (extended) that starts at or after t (t >= 0). */
int64_t sim_first_start(const struct sim *s, double t);

/* The last operation (extended) that ends at or before t. */
int64_t sim_last_end(const struct sim *s, double t);

/* The start of extended operation x. */
static inline double
sim_ext_T(const struct sim *s, int64_t x)
{
	int64_t k = x >= 0 ? x / s->n : -((-x + s->n - 1) / s->n);
	return s->T[x - k * s->n] + (double)k * s->S;
}

/* The end of extended operation x. */
static inline double
sim_ext_E(const struct sim *s, int64_t x)
{
	int64_t k = x >= 0 ? x / s->n : -((-x + s->n - 1) / s->n);
	return s->E[x - k * s->n] + (double)k * s->S;
}

/* The seconds a copy of bytes to the host takes. */
static inline double
sim_d2h_time(const struct sim *s, uint64_t bytes)
{
	return s->pp->copy_latency_s + (double)bytes / s->pp->d2h_bps;
}

/* The seconds a copy of bytes to the device takes. */
static inline double
sim_h2d_time(const struct sim *s, uint64_t bytes)
{
	return s->pp->copy_latency_s + (double)bytes / s->pp->h2d_bps;
}


/* ---- search.c ---- */

/* The greedy search on the iteration with the device idle pad[i] seconds
 * before operation i (NULL: none; a wait the plan takes as a stall), until
 * the target is met, nothing more helps, or stop says so (out->time_capped).
 * Returns 0 (out filled), or -1 when out of memory. */
int search_run(const struct prof *p, const struct plan_params *pp, const double *pad,
    const struct plan_stop *stop, struct plan *out);

/* Whether the caller's stop says a search must stop where it is. */
static inline int
search_stopped(const struct plan_stop *stop)
{
	return stop != NULL && stop->fn != NULL && stop->fn(stop->arg);
}

/* ---- floor.c ---- */

/* A buffer alive at an operation of the floor's, that can move. */
struct floor_item {
	double a, b;		/* seconds since its last use, until its next (INFINITY: none) */
	double size;
	int64_t last, next;	/* those uses (unrolled: below 0, the iteration before;
				 * n and up, the one after) */
};

/* A sort key, and the position it belongs to. */
struct floor_key {
	double b;
	uint32_t at;
};

/*
 * What must stay on the device at one operation: base (what cannot move or
 * is in use with nothing to keep), and for each way of windowing (0: a
 * window before, 1: after, 2: both) the most bytes of the buffers used in
 * the windows beyond what the engines copy in them, and the windows (times,
 * of the iteration) where stalls would help (-INFINITY: none).
 */
struct floor_op {
	uint32_t op;
	double base;
	double c[3], lo[3], hi[3];
};

/* The floor of one profile at its sampled operations (floor_new). */
struct plan_floor {
	const struct plan_params *pp;
	double S;
	struct floor_op *f;
	uint32_t nf;
	struct floor_ask *need;	/* scratch of floor_stall */
	double *T, *E;		/* each operation's start and end */
	uint32_t n;
	uint32_t extra;		/* f[extra]: the operation floor_new was asked for */
	double nostall;		/* the floor with no stall */
	uint32_t nostall_op;
	double low;		/* what cannot move, at its most */
};

/* The floor of p on the iteration padded by pad (NULL: none), also at
 * operation extra (PROF_NONE: none), refined around the operations over over
 * (INFINITY: none). Returns NULL when out of memory. */
struct plan_floor *floor_new(const struct prof *p, const struct plan_params *pp,
    const double *pad, uint32_t extra, double over);

/* The buffers that exist at operation i and can move, as items sorted by a;
 * returns how many, and *base what stays whatever the plan. */
uint32_t floor_items(const struct prof *p, const struct plan_params *pp, const double *T,
    const double *E, double S, uint32_t i, struct floor_item *it, struct floor_key *bsort,
    uint32_t *by_b, double *base);

/* The next of the window-before choices after ia, of k items. */
uint32_t floor_next_a(const struct floor_item *it, uint32_t k, uint32_t ia);

/* With no stall: what stays at f's operation. */
double floor_nostall(const struct floor_op *f);

/* The stall f's operation needs for a peak of at most P (*w: in which of
 * its windows); INFINITY when what cannot move is over P. */
double floor_need(const struct plan_params *pp, const struct floor_op *f, double P, int *w);

#endif
