/*
 * sim.c: the simulation of a plan (plan_internal.h): both copy engines in
 * the steady state, the job's own copies between them, the stalls of late
 * restores and of the plan's waits, and the memory at every operation.
 */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan_internal.h"

/*
 * The simulation's arrays, as tables of X(field, entries): those sized by
 * the operations (sim_init's), the index by time (also sim_init's, which
 * the searches can do without) and those sized by the candidates
 * (sim_init_moves'). sim_alloc and sim_fini go by these tables alone.
 */
#define SIM_OP_ARRAYS(X, n)		\
	X(T, (n))			\
	X(E, (n))			\
	X(diff, (n) + 1)		\
	X(diff0, (n) + 1)		\
	X(mem, (n))			\
	X(next_d2h, (n) + 1)		\
	X(next_h2d, (n) + 1)		\
	X(prev_h2d, (n))

#define SIM_INDEX_ARRAYS(X, n)		\
	X(tidx, (n) + 1)		\
	X(eidx, (n) + 1)

#define SIM_MOVE_ARRAYS(X, n, nc)	\
	X(order, (nc) + 1)		\
	X(sort_tmp, (nc) + 1)		\
	X(key, (nc) + 1)		\
	X(mv, (nc) + 1)			\
	X(cidx, (nc) + 1)		\
	X(mv_alt, (nc) + 1)		\
	X(cidx_alt, (nc) + 1)		\
	X(d2h_order_alt, (nc) + 1)	\
	X(mem_alt, (n))			\
	X(move_of, (nc) + 1)		\
	X(waits, 2 * ((nc) + 1))	\
	X(wait_order, 2 * ((nc) + 1))	\
	X(d2h_order, (nc) + 1)		\
	X(land, 2 * ((nc) + 1))		\
	X(delay_at, (nc) + 1)		\
	X(delay_sum, (nc) + 1)		\
	X(pend, (nc) + 1)		\
	X(c_chosen, (nc) + 1)		\
	X(c_d2h, (nc) + 1)		\
	X(c_h2d, (nc) + 1)		\
	X(c_kd, (nc) + 1)		\
	X(c_kh, (nc) + 1)		\
	X(h2d_st, (nc) + 1)		\
	X(h2d_en, (nc) + 1)

#define SIM_ALLOC(field, count) \
	ok &= (s->field = malloc((size_t)(count) * sizeof *s->field)) != NULL;
#define SIM_FREE(field, count) \
	free(s->field);		\
	s->field = NULL;

/* Which of the tables sim_alloc allocates. */
enum sim_group {
	SIM_OPS,	/* SIM_OP_ARRAYS, and SIM_INDEX_ARRAYS where they can be had */
	SIM_MOVES	/* SIM_MOVE_ARRAYS, for nc candidates */
};

/*
 * Allocate the arrays of group g of the tables above (uninitialized).
 * Returns 0, or -1 when one could not be had (what was had stays, for
 * sim_fini); the index by time failing is not a failure: it is left NULL.
 */
static int
sim_alloc(struct sim *s, enum sim_group g, uint32_t nc)
{
	uint32_t n = s->n;
	int ok = 1;

	if (g == SIM_MOVES) {
		SIM_MOVE_ARRAYS(SIM_ALLOC, n, nc)
		return ok ? 0 : -1;
	}
	SIM_INDEX_ARRAYS(SIM_ALLOC, n)
	if (!ok) {
		SIM_INDEX_ARRAYS(SIM_FREE, n)
	}
	ok = 1;
	SIM_OP_ARRAYS(SIM_ALLOC, n)
	return ok ? 0 : -1;
}

/* Free every array of the tables, and leave each NULL. */
void
sim_fini(struct sim *s)
{
	SIM_OP_ARRAYS(SIM_FREE, 0)
	SIM_INDEX_ARRAYS(SIM_FREE, 0)
	SIM_MOVE_ARRAYS(SIM_FREE, 0, 0)
}

/*
 * An index into T and E by time, for the searches of every simulation:
 * n + 1 buckets of S / n seconds, and in each the first operation that
 * starts at or after, and the first that ends after, the bucket's start.
 */
static void
sim_index(struct sim *s)
{
	uint32_t n = s->n, i = 0, j = 0;

	for (uint32_t b = 0; b <= n; b++) {
		double r = b < n ? s->S * b / n : s->S;
		while (i < n && s->T[i] < r)
			i++;
		while (j < n && s->E[j] <= r)
			j++;
		s->tidx[b] = i;
		s->eidx[b] = j;
	}
}

/* Set s up for p: the arrays sized by the operations, filled (plan_internal.h).
 * Returns 0, or -1 when out of memory. */
int
sim_init(struct sim *s, const struct prof *p, const struct plan_params *pp, const double *pad)
{
	uint32_t n = p->nops;

	memset(s, 0, sizeof *s);
	s->p = p;
	s->pp = pp;
	s->n = n;
	if (sim_alloc(s, SIM_OPS, 0) != 0)
		return -1;
	prof_base_diff(p, s->diff0);
	s->next_d2h[n] = s->next_h2d[n] = n;
	for (uint32_t i = n; i-- > 0;) {
		s->next_d2h[i] = p->xfer[i] == PROF_XFER_D2H ? i : s->next_d2h[i + 1];
		s->next_h2d[i] = p->xfer[i] == PROF_XFER_H2D ? i : s->next_h2d[i + 1];
	}
	for (uint32_t i = 0; i < n; i++)
		s->prev_h2d[i] = p->xfer[i] == PROF_XFER_H2D ? i : i > 0 ? s->prev_h2d[i - 1] : PROF_NONE;
	s->S = prof_timeline(p, pad, s->T, s->E);
	if (s->tidx != NULL && s->S > 0) {
		sim_index(s);
	} else {
		SIM_INDEX_ARRAYS(SIM_FREE, n)
	}
	return 0;
}

/* The arrays sized by nc candidates (plan_internal.h). Returns 0, or -1 when
 * out of memory. */
int
sim_init_moves(struct sim *s, uint32_t nc)
{
	s->wcap = 2 * (nc + 1);
	if (sim_alloc(s, SIM_MOVES, nc) != 0)
		return -1;
	memset(s->move_of, 0xff, (nc + 1) * sizeof *s->move_of);
	return 0;
}

/* The first of the n increasing values of v at or above t (n: none). */
static uint32_t
first_from_value(const double *v, uint32_t n, double t)
{
	uint32_t lo = 0, hi = n;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (v[mid] < t)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/*
 * Where to look for the first element of v (increasing, n of them) above r
 * (strictly when strict, else at or above): the range [*lo, *hi] that the
 * index (idx[b]: the first element at or above b * S / n, for b = 0..n) says
 * holds it; [0, n] without one, or when rounding put r in the wrong bucket.
 */
static void
bucket_range(const struct sim *s, const uint32_t *idx, const double *v, double r, int strict,
    uint32_t *lo, uint32_t *hi)
{
	uint32_t n = s->n;

	*lo = 0;
	*hi = n;
	if (idx == NULL || !(r >= 0) || !(r < s->S))
		return;
	uint32_t b = (uint32_t)(r / s->S * n);
	if (b >= n)
		b = n - 1;
	uint32_t l = idx[b], h = idx[b + 1] < n ? idx[b + 1] + 1 : n;
	/* the answer is in [l, h] when v[l - 1] is below r and v[h] above */
	if (l > 0 && (strict ? v[l - 1] > r : v[l - 1] >= r))
		return;
	if (h < n && !(strict ? v[h] > r : v[h] >= r))
		return;
	*lo = l;
	*hi = h;
}

/* The first operation of the iteration that starts at or after r (n: none). */
static uint32_t
first_from(const struct sim *s, double r)
{
	uint32_t lo, hi;

	bucket_range(s, s->tidx, s->T, r, 0, &lo, &hi);
	return lo + first_from_value(s->T + lo, hi - lo, r);
}

/* The first operation (extended) that starts at or after t (t >= 0). */
int64_t
sim_first_start(const struct sim *s, double t)
{
	int64_t k = s->S > 0 ? (int64_t)floor(t / s->S) : 0;
	double r = t - (double)k * s->S;

	if (k < 0) {
		k = 0;
		r = 0;
	}
	return k * s->n + first_from(s, r);
}

/* The last operation (extended) that ends at or before t. */
int64_t
sim_last_end(const struct sim *s, double t)
{
	int64_t k = s->S > 0 ? (int64_t)floor(t / s->S) : 0;
	double r = t - (double)k * s->S;
	uint32_t lo, hi;	/* smallest i with E[i] > r */

	bucket_range(s, s->eidx, s->E, r, 1, &lo, &hi);
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (s->E[mid] > r)
			hi = mid;
		else
			lo = mid + 1;
	}
	return k * s->n + (int64_t)lo - 1;
}

/* Subtract size over the extended operations [first, last] (at most n of them). */
static void
save_span(struct sim *s, int64_t first, int64_t last, int64_t size)
{
	uint32_t n = s->n;

	if (first > last)
		return;
	if (last - first + 1 >= (int64_t)n) {
		prof_span_add(s->diff, n, 0, n - 1, -size);
		return;
	}
	uint32_t f = (uint32_t)(first % n), l = (uint32_t)(last % n);
	if (f <= l) {
		prof_span_add(s->diff, n, f, l, -size);
	} else {
		prof_span_add(s->diff, n, f, n - 1, -size);
		prof_span_add(s->diff, n, 0, l, -size);
	}
}

/*
 * The latest start, on the extended timeline, of a copy of the job's to the
 * device within (a, b): a copy of ebb's in flight then would delay it.
 * -INFINITY when there is none.
 */
static double
job_h2d_within(const struct sim *s, double a, double b)
{
	if (s->S <= 0 || !(b > a))
		return -INFINITY;
	for (int64_t k = (int64_t)floor(b / s->S); (double)(k + 1) * s->S > a; k--) {
		uint32_t lo = first_from(s, b - (double)k * s->S);
		if (lo == 0)
			continue;
		uint32_t c = s->prev_h2d[lo - 1];
		if (c == PROF_NONE)
			continue;
		double t = s->T[c] + (double)k * s->S;
		return t > a ? t : -INFINITY;
	}
	return -INFINITY;
}

/* Whether index a comes before index b: by key, then by index. */
static inline int
key_before(const double *key, uint32_t a, uint32_t b)
{
	return key[a] < key[b] || (key[a] == key[b] && a < b);
}

/* Sort indices by key, then index (qsort_r's signature differs between libcs). */
static void
sort_by_key(uint32_t *idx, uint32_t m, const double *key, uint32_t *tmp)
{
	/* bottom-up merge sort; two runs already in order are left as they are */
	for (uint32_t w = 1; w < m; w *= 2) {
		for (uint32_t lo = 0; lo < m; lo += 2 * w) {
			uint32_t mid = lo + w < m ? lo + w : m, hi = lo + 2 * w < m ? lo + 2 * w : m;
			uint32_t i = lo, j = mid, o = lo;
			if (mid == hi || key_before(key, idx[mid - 1], idx[mid])) {
				memcpy(tmp + lo, idx + lo, (hi - lo) * sizeof *idx);
				continue;
			}
			while (i < mid && j < hi)
				tmp[o++] = key_before(key, idx[j], idx[i]) ? idx[j++] : idx[i++];
			while (i < mid)
				tmp[o++] = idx[i++];
			while (j < hi)
				tmp[o++] = idx[j++];
		}
		memcpy(idx, tmp, m * sizeof *idx);
	}
}

/* Put move k (above every move in order[0..*n)) into order, sorted by key
 * then move: after the moves of keys up to its own; at the end when append
 * (the caller sorts). */
static void
order_insert(uint32_t *order, uint32_t *n, const double *key, uint32_t k, int append)
{
	uint32_t lo = append ? *n : 0, hi = *n;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (key[k] < key[order[mid]])
			hi = mid;
		else
			lo = mid + 1;
	}
	memmove(order + lo + 1, order + lo, (*n - lo) * sizeof *order);
	order[lo] = k;
	(*n)++;
}

/*
 * The moves of chosen[0..m) with an offload, by the end of the use before
 * the gap (s->c_d2h), and with a restore, latest use first (s->c_h2d); from
 * the last simulation's orders as far as its chosen candidates are the
 * first of these, else sorted afresh. The same orders as sorting each time
 * (by key, then move).
 */
static void
copy_orders(struct sim *s, const uint32_t *chosen, uint32_t m)
{
	uint32_t keep = 0, lim = s->c_m < m ? s->c_m : m;

	while (keep < lim && chosen[keep] == s->c_chosen[keep])
		keep++;
	/* (a trial undone: its moves past the common ones leave the orders;
	 * many to insert, the orders are sorted afresh) */
	if (m - keep > 32)
		keep = 0;
	if (keep == 0) {
		s->c_nd = s->c_nh = 0;
	} else if (keep < s->c_m) {
		uint32_t o = 0;
		for (uint32_t i = 0; i < s->c_nd; i++)
			if (s->c_d2h[i] < keep)
				s->c_d2h[o++] = s->c_d2h[i];
		s->c_nd = o;
		o = 0;
		for (uint32_t i = 0; i < s->c_nh; i++)
			if (s->c_h2d[i] < keep)
				s->c_h2d[o++] = s->c_h2d[i];
		s->c_nh = o;
	}
	for (uint32_t k = keep; k < m; k++) {
		const struct plan_move *mv = &s->mv[k];
		if (mv->after != PROF_NONE) {
			s->c_kd[k] = s->E[mv->after];
			order_insert(s->c_d2h, &s->c_nd, s->c_kd, k, keep == 0);
		}
		if (mv->use != PROF_NONE) {
			s->c_kh[k] = -s->T[mv->use];
			order_insert(s->c_h2d, &s->c_nh, s->c_kh, k, keep == 0);
		}
	}
	if (keep == 0) {	/* appended: sorted once */
		sort_by_key(s->c_d2h, s->c_nd, s->c_kd, s->sort_tmp);
		sort_by_key(s->c_h2d, s->c_nh, s->c_kh, s->sort_tmp);
	}
	memcpy(s->c_chosen + keep, chosen + keep, (m - keep) * sizeof *chosen);
	s->c_m = m;
}

/* The move of candidate ci among the first m, or NULL. */
static const struct plan_move *
move_of(const struct sim *s, uint32_t ci, uint32_t m)
{
	int32_t k = s->move_of[ci];
	return k >= 0 && (uint32_t)k < m && s->cidx[k] == ci ? &s->mv[k] : NULL;
}

/*
 * The first operation (extended) from which mv's memory is free: r, where
 * its copy to the host lands, or an operation between its use and r where
 * the device waits (a wait of the plan's) for a copy that lands no sooner.
 */
static int64_t
landed_from(const struct sim *s, const struct plan_move *mv, int64_t r, uint32_t m)
{
	for (uint32_t w = 0; w < s->nwaits && s->waits[w].op < r; w++) {
		const struct plan_move *o = move_of(s, s->waits[w].cand, m);
		if (s->waits[w].op > (int64_t)mv->issue && o != NULL && mv->d2h_end <= o->d2h_end)
			return s->waits[w].op;
	}
	return r;
}

/*
 * The stall of the plan's waits: at each, the device waits until the copies
 * waited for there have landed. A wait delays every later operation and the
 * copies issued after it; the copies already queued on the engine go on.
 * So waits in one stretch of a busy engine cost the longest of them, and
 * waits in stretches the engine drains between add up. The engine is
 * replayed over two iterations, in the order of the operations, with the
 * delays; the second iteration's delay is the stall.
 */
static double
wait_stall(struct sim *s, uint32_t m)
{
	uint32_t n = s->n, nw = 0;
	double S = s->S;

	for (uint32_t w = 0; w < s->nwaits; w++) {
		if (move_of(s, s->waits[w].cand, m) == NULL)
			continue;
		uint32_t i = nw++;	/* insertion: few waits */
		for (; i > 0 && s->waits[s->wait_order[i - 1]].op % n > s->waits[w].op % n; i--)
			s->wait_order[i] = s->wait_order[i - 1];
		s->wait_order[i] = w;
	}
	if (nw == 0)
		return 0;
	double shift = 0, shift0 = 0, t = 0;
	for (int64_t k = 0; k < 2; k++) {
		uint32_t w = 0;
		for (uint32_t j = 0;; j++) {
			/* a wait before operation e comes before a copy issued after e */
			int64_t issue = j < s->nd ? (int64_t)s->mv[s->d2h_order[j]].issue : (int64_t)n;
			for (; w < nw && s->waits[s->wait_order[w]].op % n <= issue; w++) {
				const struct wait *x = &s->waits[s->wait_order[w]];
				int32_t mk = s->move_of[x->cand];
				int64_t frame = k - x->op / n;	/* of the copy waited for */
				double land = frame >= 0 ? s->land[frame * m + (uint32_t)mk] :
				    s->mv[mk].d2h_end - S;
				double need = land - (s->T[x->op % n] + (double)k * S + shift);
				if (need > 0)
					shift += need;
			}
			if (j >= s->nd)
				break;
			uint32_t mk = s->d2h_order[j];
			const struct plan_move *mv = &s->mv[mk];
			double st = sim_ext_E(s, mv->issue) + (double)k * S + shift;
			t = (st > t ? st : t) + sim_d2h_time(s, s->p->buf[mv->buf].size);
			s->land[k * m + mk] = t;
		}
		if (k == 0)
			shift0 = shift;
	}
	return shift - shift0;
}

/* How much late restores have delayed the device by time t (of the timeline
 * without delays): those whose use came before t. */
static double
delay_by(const struct sim *s, double t)
{
	uint32_t k = first_from_value(s->delay_at, s->ndelay, t);

	return k > 0 ? s->delay_sum[k - 1] : 0;
}

/* The device waits d at time t (of the timeline without delays). */
static void
delay_add(struct sim *s, double t, double d)
{
	uint32_t i = s->ndelay++;

	for (; i > 0 && s->delay_at[i - 1] > t; i--) {
		s->delay_at[i] = s->delay_at[i - 1];
		s->delay_sum[i] = s->delay_sum[i - 1] + d;
	}
	s->delay_at[i] = t;
	s->delay_sum[i] = (i > 0 ? s->delay_sum[i - 1] : 0) + d;
}

/* Whether pending entry i of the heap comes out before entry j: the earlier
 * deadline, and of equal ones the one pushed last. */
static int
pend_first(const struct sim *s, uint32_t i, uint32_t j)
{
	const struct pend *a = &s->pend[i], *b = &s->pend[j];

	return a->dl < b->dl || (a->dl == b->dl && a->ord > b->ord);
}

/* Swap entries i and j of the heap. */
static void
pend_swap(struct sim *s, uint32_t i, uint32_t j)
{
	struct pend x = s->pend[i];

	s->pend[i] = s->pend[j];
	s->pend[j] = x;
}

/* A restore copied, pending until its deadline (s->mv[k].h2d_end). */
static void
pend_push(struct sim *s, uint32_t k)
{
	uint32_t i = s->npend++;

	s->pend[i] = (struct pend){ .dl = s->mv[k].h2d_end, .k = k, .ord = s->pushed++ };
	for (; i > 0 && pend_first(s, i, (i - 1) / 2); i = (i - 1) / 2)
		pend_swap(s, i, (i - 1) / 2);
}

/* Take the top of the heap off. */
static void
pend_pop(struct sim *s)
{
	uint32_t n = --s->npend, i = 0;

	if (n == 0)
		return;
	s->pend[0] = s->pend[n];
	for (;;) {
		uint32_t l = 2 * i + 1, r = l + 1, m = i;
		if (l < n && pend_first(s, l, m))
			m = l;
		if (r < n && pend_first(s, r, m))
			m = r;
		if (m == i)
			break;
		pend_swap(s, i, m);
		i = m;
	}
}

/*
 * Settle the restores copied whose use is due before time t (of the timeline
 * without delays), in the order they are due: how late each is, given the
 * delays before it, is its own delay of the device. In the final pass
 * (keep), their copy's times replace the deadline and the issue frame.
 * Returns the stall added.
 */
static double
due_before(struct sim *s, double t, int keep)
{
	double added = 0;

	while (s->npend > 0) {
		uint32_t k = s->pend[0].k;
		struct plan_move *mv = &s->mv[k];
		double dl = mv->h2d_end;	/* the deadline, until its times are kept */
		if (dl >= t)
			break;
		pend_pop(s);
		mv->delay_s = delay_by(s, dl);
		double late = s->h2d_en[k] - dl - mv->delay_s;
		mv->stall_s = late > 0 ? late : 0;
		if (mv->stall_s > 0)
			delay_add(s, dl, mv->stall_s);
		added += mv->stall_s;
		if (keep) {
			/* back to the frame of the offload's iteration */
			double base = mv->h2d_start - s->key[k];
			mv->h2d_start = s->h2d_st[k] + base;
			mv->h2d_end = s->h2d_en[k] + base;
		}
	}
	return added;
}

/* Swap the buffers simulate writes anew (every entry it reads it has
 * written) with the ones kept aside. */
static void
sim_swap(struct sim *s)
{
	int64_t *mem = s->mem;
	struct plan_move *mv = s->mv;
	uint32_t *d2h_order = s->d2h_order, *cidx = s->cidx;

	s->mem = s->mem_alt;
	s->mem_alt = mem;
	s->mv = s->mv_alt;
	s->mv_alt = mv;
	s->d2h_order = s->d2h_order_alt;
	s->d2h_order_alt = d2h_order;
	s->cidx = s->cidx_alt;
	s->cidx_alt = cidx;
}

/* Before a trial simulation: keep what the last one found. */
void
sim_try(struct sim *s)
{
	sim_swap(s);
	s->kept.peak = s->peak;
	s->kept.peak_op = s->peak_op;
	s->kept.nd = s->nd;
	s->kept.stall = s->stall;
	s->kept.d2h_carry = s->d2h_carry;
	s->kept.infeasible = s->infeasible;
}

/* The trial rejected, its inputs put back: the simulation before it stands
 * (as simulating them again would find). */
void
sim_undo(struct sim *s)
{
	sim_swap(s);
	s->peak = s->kept.peak;
	s->peak_op = s->kept.peak_op;
	s->nd = s->kept.nd;
	s->stall = s->kept.stall;
	s->d2h_carry = s->kept.d2h_carry;
	s->infeasible = s->kept.infeasible;
}

/* The moves of the chosen candidates chosen[0..m) of c, not yet placed: the
 * gap each bridges, and the move of each candidate. */
static void
sim_moves(struct sim *s, const struct cand *c, const uint32_t *chosen, uint32_t m)
{
	for (uint32_t k = 0; k < m; k++) {
		const struct cand *x = &c[chosen[k]];
		struct plan_move *mv = &s->mv[k];
		memset(mv, 0, sizeof *mv);
		mv->saved_first = 1;	/* none, until placed */
		mv->buf = x->buf;
		mv->after = x->kind == GAP_IDLE ? PROF_NONE : x->u;
		mv->use = x->kind == GAP_BETWEEN || x->kind == GAP_WRAP ? x->v : PROF_NONE;
		mv->at = PROF_NONE;
		mv->wrap = x->kind == GAP_WRAP;
		s->cidx[k] = chosen[k];
		s->move_of[chosen[k]] = (int32_t)k;
	}
}

/*
 * D2H: in issue order, that is by the end of the use before the gap.
 * An offload that would still be copying when a copy of the job's to
 * the host starts is issued after that copy, unless stalls are allowed
 * (a plan that could not meet its target otherwise: there, as where the
 * engine is busy all the same with what the last iteration left queued,
 * the job's copy waits, and the job with it). A gap that wraps (the
 * optimizer state after its update) may have its offload issued after
 * the job's first copy of the next iteration: issue is then an extended
 * operation (n and up), and those offloads take the engine in the next
 * iteration after that copy. Fills each move's issue and d2h times,
 * s->d2h_order, s->d2h_carry and s->infeasible; returns how long the job's
 * copies to the host wait behind ebb's.
 */
static double
sim_offloads(struct sim *s, const uint32_t *chosen, uint32_t m)
{
	const struct prof *p = s->p;
	uint32_t n = s->n;
	double S = s->S;

	copy_orders(s, chosen, m);
	uint32_t nd = s->c_nd;
	for (uint32_t k = 0; k < m; k++)
		s->mv[k].issue = s->mv[k].after;
	memcpy(s->order, s->c_d2h, nd * sizeof *s->order);
	memcpy(s->d2h_order, s->order, nd * sizeof *s->order);
	s->nd = nd;
	uint32_t jfirst = s->next_d2h[0];	/* the job's first copy to the host (n: none) */
	int64_t jnext = jfirst < n ? (int64_t)n + jfirst : 2 * (int64_t)n;
	double carry = 0, job_wait = 0;
	uint32_t crossed = nd;	/* the moves of the order from here on were issued in
				 * the next iteration, in the pass before */
	for (int pass = 0; pass < 2; pass++) {
		double t = carry;
		s->d2h_carry = carry;
		uint32_t jc = jfirst;	/* the job's next copy to the host */
		int64_t floor_at = 0;	/* copies queue in this order: none is issued
					 * before one deferred ahead of it */
		uint32_t cross = nd;
		double t_cross = 0;
		job_wait = 0;
		s->infeasible = 0;
		for (uint32_t j = 0; j <= nd; j++) {
			struct plan_move *mv = j < nd ? &s->mv[s->order[j]] : NULL;
			int64_t at = mv == NULL ? (int64_t)n : mv->after > floor_at ? mv->after : floor_at;
			double st = 0, en = 0;
			for (;;) {
				for (; jc < n && jc <= at; jc = s->next_d2h[jc + 1]) {
					job_wait += t > s->T[jc] ? t - s->T[jc] : 0;
					if (jc != jfirst)
						continue;
					/* the last iteration's offloads deferred past this copy */
					for (uint32_t i = crossed; i < nd; i++) {
						const struct plan_move *o = &s->mv[s->order[i]];
						double os = sim_ext_E(s, (int64_t)o->issue - n);
						t = (os > t ? os : t) + sim_d2h_time(s, p->buf[o->buf].size);
					}
				}
				if (mv == NULL)
					break;
				st = sim_ext_E(s, at) > t ? sim_ext_E(s, at) : t;
				en = st + sim_d2h_time(s, p->buf[mv->buf].size);
				int64_t jn = jc < n ? (int64_t)jc : mv->wrap && at < jnext ? jnext : 2 * (int64_t)n;
				if (s->stalling || jn >= 2 * (int64_t)n || en <= sim_ext_T(s, jn))
					break;
				at = jn;
			}
			if (mv == NULL)
				break;
			/* it must be issued before the buffer's next use, or its free */
			int64_t lim = mv->use != PROF_NONE ? (int64_t)mv->use + (mv->wrap ? n : 0) :
			    p->buf[mv->buf].free != PROF_NONE ? p->buf[mv->buf].free : n;
			if (at >= lim)
				s->infeasible = 1;
			if (at >= (int64_t)n && cross == nd) {
				cross = j;
				t_cross = t;
			}
			mv->issue = (uint32_t)at;
			floor_at = at;
			mv->d2h_start = st;
			mv->d2h_end = en;
			t = en;
		}
		/* what the next iteration finds queued: the copies issued in this one */
		double tq = cross < nd ? t_cross : t;
		carry = tq > S ? tq - S : 0;
		crossed = cross;
	}
	return job_wait;
}

/*
 * H2D, planned: latest deadline first, each as late as the engine allows,
 * and done before a copy of the job's to the device starts. Fills each
 * restore's h2d_start (in the frame of its use's iteration), and s->order:
 * the moves with a restore, latest use first.
 */
static void
sim_restores_planned(struct sim *s)
{
	const struct prof *p = s->p;
	double S = s->S;
	uint32_t nh = s->c_nh;

	memcpy(s->order, s->c_h2d, nh * sizeof *s->order);
	double earliest = INFINITY;
	for (int pass = 0; pass < 2; pass++) {
		double latest = pass == 0 ? INFINITY : earliest + S;
		for (uint32_t j = 0; j < nh; j++) {
			struct plan_move *mv = &s->mv[s->order[j]];
			double dl = s->T[mv->use];
			double end = dl < latest ? dl : latest, d = sim_h2d_time(s, p->buf[mv->buf].size);
			/* done before a copy of the job's to the device starts (where
			 * the job's copies leave no room within an iteration, it is not
			 * moved, and the forward pass below predicts the wait) */
			double want = end;
			for (double tc; (tc = job_h2d_within(s, end - d, end)) > -INFINITY;)
				if ((end = tc) < want - S) {
					end = want;
					break;
				}
			mv->h2d_start = end - d;
			latest = mv->h2d_start;
		}
		earliest = latest;
		if (nh == 0 || !isfinite(earliest))
			break;
	}
}

/*
 * Where each restore of the m moves is issued (at), and where each move
 * saves memory (saved_first, saved_last, and s->diff); each restore's
 * h2d_start becomes the time it can be issued at, in the frame of the
 * offload's iteration.
 */
static void
sim_saved(struct sim *s, const struct cand *c, uint32_t m)
{
	const struct prof *p = s->p;
	uint32_t n = s->n;
	double S = s->S;

	memcpy(s->diff, s->diff0, (n + 1) * sizeof *s->diff);
	for (uint32_t k = 0; k < m; k++) {
		struct plan_move *mv = &s->mv[k];
		const struct prof_buf *b = &p->buf[mv->buf];
		int64_t size = (int64_t)b->size;
		const struct cand *x = &c[s->cidx[k]];
		if (x->kind == GAP_IDLE) {
			save_span(s, 0, n - 1, size);
			mv->saved_first = 0;
			mv->saved_last = n - 1;
			continue;
		}
		int64_t r = landed_from(s, mv, sim_first_start(s, mv->d2h_end), m);
		if (x->kind == GAP_TAIL) {
			save_span(s, r, b->free, size);
			mv->saved_first = r;
			mv->saved_last = b->free;
			continue;
		}
		/* the restore's times in the frame of the offload's iteration */
		double shift = mv->wrap ? S : 0;
		double lb = mv->d2h_end;	/* the copy must have landed on the host */
		double start = mv->h2d_start + shift;
		int64_t a = sim_last_end(s, start);
		if (start < lb)
			a = sim_last_end(s, lb) + 1;	/* the host waits for the offload: late */
		if (a < (int64_t)mv->issue)
			a = mv->issue;
		if (x->not_before >= 0 && a < x->not_before)
			a = x->not_before;	/* a late restore, chosen to save memory at a peak */
		int64_t use = (int64_t)mv->use + (mv->wrap ? (int64_t)n : 0);
		if (a >= use)
			a = use - 1;	/* issued by the operation before the use at the latest */
		mv->at = (uint32_t)(a % n);
		/* when its issue operation ends, for now, or, with the device
		 * waiting for it, when the copy to the host lands */
		mv->h2d_start = fmax(sim_ext_E(s, a), mv->d2h_end);
		save_span(s, r, a, size);
		mv->saved_first = r;
		mv->saved_last = a;
	}
}

/*
 * H2D, as issued: in issue order; a copy that ends after its deadline
 * stalls. A late restore delays the device, and with it every later
 * operation, the restores issued after them and the uses they are due for;
 * the copies already queued go on. So late restores in one busy stretch of
 * the engine cost the latest of them, not the sum (the restores' times
 * here are of the timeline without delays; delay_by maps them). Sets
 * s->stall to the stall of the late restores and of the job's copies to the
 * device behind them, and each restore's times and stall.
 */
static void
sim_restores_issued(struct sim *s)
{
	const struct prof *p = s->p;
	uint32_t n = s->n, nh = s->c_nh;
	double S = s->S;

	for (uint32_t j = 0; j < nh; j++) {
		struct plan_move *mv = &s->mv[s->order[j]];
		double shift = mv->wrap ? S : 0;
		/* issue time and deadline, in the frame of the restore's issue iteration */
		double base = floor(mv->h2d_start / S) * S;
		if (S <= 0)
			base = 0;
		s->key[s->order[j]] = mv->h2d_start - base;
		mv->h2d_end = s->T[mv->use] + shift - base;	/* the deadline, for now */
	}
	sort_by_key(s->order, nh, s->key, s->sort_tmp);
	double carry = 0;
	for (int pass = 0; pass < 2; pass++) {
		double t = carry;
		uint32_t jc = s->next_h2d[0];	/* the job's next copy to the device */
		s->stall = 0;
		s->ndelay = 0;
		s->npend = 0;
		s->pushed = 0;
		for (uint32_t j = 0; j <= nh; j++) {
			uint32_t k = j < nh ? s->order[j] : 0;
			double issue = j < nh ? s->key[k] : INFINITY;
			/* a copy of the job's issued before this restore waits for the queue */
			for (; jc < n && s->T[jc] < issue; jc = s->next_h2d[jc + 1]) {
				s->stall += due_before(s, s->T[jc], pass);
				double tc = s->T[jc] + delay_by(s, s->T[jc]);
				s->stall += t > tc ? t - tc : 0;
			}
			s->stall += due_before(s, issue, pass);
			if (j == nh)
				break;
			struct plan_move *mv = &s->mv[k];
			double at = issue + delay_by(s, issue);
			s->h2d_st[k] = at > t ? at : t;
			s->h2d_en[k] = s->h2d_st[k] + sim_h2d_time(s, p->buf[mv->buf].size);
			t = s->h2d_en[k];
			/* pending until due: by deadline (mv->h2d_end for now) */
			pend_push(s, k);
		}
		/* what the next iteration finds queued, in its own delayed frame */
		double shifted = S + delay_by(s, S);
		carry = t > shifted ? t - shifted : 0;
	}
}

/* The memory held at every operation with the moves (s->mem, from s->diff),
 * and its peak (s->peak, s->peak_op). */
static void
sim_memory(struct sim *s)
{
	uint32_t n = s->n;

	/* (in locals: the stores to mem could alias s->peak) */
	const int64_t *diff = s->diff;
	int64_t *mem = s->mem, run = 0, peak = INT64_MIN;
	uint32_t peak_op = s->peak_op;
	for (uint32_t i = 0; i < n; i++) {
		run += diff[i];
		mem[i] = run;
		if (run > peak) {
			peak = run;
			peak_op = i;
		}
	}
	s->peak = peak;
	s->peak_op = peak_op;
}

/*
 * Simulate the moves of the chosen candidates: both copy engines in the
 * steady state (each run twice, so what one iteration leaves queued delays
 * the next), then the memory at every operation. Fills s->mv[0..m).
 */
void
sim_run(struct sim *s, const struct cand *c, const uint32_t *chosen, uint32_t m)
{
	s->nsim++;
	s->stall = 0;
	sim_moves(s, c, chosen, m);
	double job_wait = sim_offloads(s, chosen, m);
	sim_restores_planned(s);
	sim_saved(s, c, m);
	sim_restores_issued(s);
	s->stall += job_wait;
	s->stall += wait_stall(s, m);
	sim_memory(s);
}
