/*
 * plan.c: the access profile and the planner (see plan.h).
 *
 * Indices: operation i of the iteration runs in [T[i], E[i]); S = E[n-1].
 * A move may reach into the next iteration, so the simulation works with
 * "extended" operation indices x = i + k*n (iteration k after the one of the
 * offload), whose times are T[i] + k*S.
 */
#include "config.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "plan.h"

/* ---- the profile ---- */

int
prof_init(struct prof *p, uint32_t nops)
{
	memset(p, 0, sizeof *p);
	p->nops = nops;
	p->dur = calloc(nops ? nops : 1, sizeof *p->dur);
	p->xfer = calloc(nops ? nops : 1, 1);
	if (p->dur == NULL || p->xfer == NULL) {
		prof_fini(p);
		return -1;
	}
	return 0;
}

void
prof_fini(struct prof *p)
{
	for (uint32_t i = 0; i < p->nbufs; i++)
		free(p->buf[i].use);
	free(p->buf);
	free(p->dur);
	free(p->xfer);
	free(p->host);
	free(p->barrier);
	memset(p, 0, sizeof *p);
}

int
prof_host(struct prof *p)
{
	if (p->host == NULL)
		p->host = calloc(p->nops ? p->nops : 1, sizeof *p->host);
	if (p->barrier == NULL)
		p->barrier = calloc(p->nops ? p->nops : 1, 1);
	return p->host != NULL && p->barrier != NULL ? 0 : -1;
}

int
prof_host_pace(struct prof *p, const uint64_t *issue, const uint64_t *ebb, const uint8_t *sync)
{
	if (prof_host(p) < 0)
		return -1;
	for (uint32_t i = 0; i < p->nops; i++) {
		p->barrier[i] = sync[i] != 0;
		p->host[i] = 0;
		if (sync[i] || issue[i] == 0 || issue[i + 1] <= issue[i])
			continue;
		uint64_t gap = issue[i + 1] - issue[i], mine = ebb ? ebb[i + 1] - ebb[i] : 0;
		p->host[i] = gap > mine ? (double)(gap - mine) / 1e9 : 0;
	}
	return 0;
}

/*
 * The device waiting for the host over one iteration. The host issues
 * operation i at h, and the device runs it from max(h, the end of the one
 * before) for its duration; the host then takes host[i], plus the moves it
 * issues after i (noff, nres: how many; NULL: none), before issuing the
 * next. At a barrier the host first waits for the device to finish. The
 * iteration starts with host and device together.
 */
static double
host_idle(const struct prof *p, const struct plan_params *pp, const uint32_t *noff,
    const uint32_t *nres)
{
	if (p->host == NULL || p->barrier == NULL)
		return 0;
	double h = 0, d = 0, idle = 0;

	for (uint32_t i = 0; i < p->nops; i++) {
		if (h > d) {
			idle += h - d;
			d = h;
		}
		d += p->dur[i];
		if (p->barrier[i] && h < d)
			h = d;
		h += p->host[i];
		if (noff != NULL)
			h += noff[i] * pp->host_offload_s + nres[i] * pp->host_restore_s;
	}
	return idle;
}

double
prof_host_idle(const struct prof *p)
{
	return host_idle(p, NULL, NULL, NULL);
}

void
prof_xfer(struct prof *p, uint32_t op, unsigned dir)
{
	if (op < p->nops && (dir == PROF_XFER_D2H || dir == PROF_XFER_H2D))
		p->xfer[op] = (uint8_t)dir;
}

uint32_t
prof_xfers(const struct prof *p, unsigned dir)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < p->nops; i++)
		n += p->xfer[i] == dir;
	return n;
}

int64_t
prof_add(struct prof *p, uint64_t size, uint64_t key, uint32_t alloc, int movable)
{
	if (p->nbufs == p->cap) {
		uint32_t cap = p->cap ? p->cap * 2 : 256;
		struct prof_buf *v = realloc(p->buf, cap * sizeof *v);
		if (v == NULL)
			return -1;
		p->buf = v;
		p->cap = cap;
	}
	struct prof_buf *b = &p->buf[p->nbufs];
	memset(b, 0, sizeof *b);
	b->size = size;
	b->key = key;
	b->alloc = alloc;
	b->free = PROF_NONE;
	b->movable = (uint8_t)(movable != 0);
	return p->nbufs++;
}

int
prof_use(struct prof *p, uint32_t bi, uint32_t op)
{
	struct prof_buf *b = &p->buf[bi];

	if (b->nuse > 0 && b->use[b->nuse - 1] >= op)
		return 0;
	if (b->nuse == b->cap) {
		uint32_t cap = b->cap ? b->cap * 2 : 4;
		uint32_t *v = realloc(b->use, cap * sizeof *v);
		if (v == NULL)
			return -1;
		b->use = v;
		b->cap = cap;
	}
	b->use[b->nuse++] = op;
	return 0;
}

void
prof_free(struct prof *p, uint32_t bi, uint32_t op)
{
	p->buf[bi].free = op;
}

/* Add size over the operations [first, last] of one iteration. */
static void
span_add(int64_t *diff, uint32_t n, uint32_t first, uint32_t last, int64_t size)
{
	if (first > last || first >= n)
		return;
	diff[first] += size;
	if (last + 1 < n)
		diff[last + 1] -= size;
}

/* The memory each buffer's lifetime adds, as a difference array. */
static void
base_diff(const struct prof *p, int64_t *diff)
{
	uint32_t n = p->nops;

	memset(diff, 0, (n + 1) * sizeof *diff);
	for (uint32_t k = 0; k < p->nbufs; k++) {
		const struct prof_buf *b = &p->buf[k];
		uint32_t first = b->alloc == PROF_NONE ? 0 : b->alloc;
		uint32_t last = b->free == PROF_NONE ? n - 1 : b->free;
		span_add(diff, n, first, last, (int64_t)b->size);
	}
}

uint64_t
prof_peak(const struct prof *p, uint32_t *at)
{
	uint32_t n = p->nops;
	int64_t *diff = malloc((n + 1) * sizeof *diff);
	int64_t run = 0, best = 0;
	uint32_t where = 0;

	if (diff == NULL || n == 0) {
		free(diff);
		if (at)
			*at = 0;
		return p->fixed;
	}
	base_diff(p, diff);
	for (uint32_t i = 0; i < n; i++) {
		run += diff[i];
		if (run > best) {
			best = run;
			where = i;
		}
	}
	free(diff);
	if (at)
		*at = where;
	return p->fixed + (uint64_t)best;
}

double
prof_time(const struct prof *p)
{
	double s = 0;
	for (uint32_t i = 0; i < p->nops; i++)
		s += p->dur[i];
	return s;
}

/*
 * Each operation's start and end, with the device idle pad[i] seconds before
 * operation i (pad NULL: never); returns the iteration's time.
 */
static double
timeline(const struct prof *p, const double *pad, double *T, double *E)
{
	double t = 0;

	for (uint32_t i = 0; i < p->nops; i++) {
		t += pad != NULL ? pad[i] : 0;
		T[i] = t;
		t += p->dur[i] > 0 ? p->dur[i] : 0;
		E[i] = t;
	}
	return t;
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

/* ---- the planner ---- */

enum gap_kind {
	GAP_BETWEEN,	/* between two uses in the iteration */
	GAP_WRAP,	/* from the last use to the first use of the next iteration */
	GAP_TAIL,	/* from the last use to the free: no restore */
	GAP_IDLE	/* a persistent buffer the iteration never uses: stays on the host */
};

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
	int64_t *diff0;		/* base_diff of the profile: what simulate starts from */
	int64_t *mem;		/* memory held at each operation, fixed not included */
	/* scratch for one simulation */
	uint32_t *order;
	double *key;
	struct plan_move *mv;
	uint32_t *cidx;		/* candidate of each move */
	int32_t *move_of;	/* move of each candidate, -1: not chosen */
	struct wait *waits;	/* by op */
	uint32_t nwaits;
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

static double
ext_T(const struct sim *s, int64_t x)
{
	int64_t k = x >= 0 ? x / s->n : -((-x + s->n - 1) / s->n);
	return s->T[x - k * s->n] + (double)k * s->S;
}

static double
ext_E(const struct sim *s, int64_t x)
{
	int64_t k = x >= 0 ? x / s->n : -((-x + s->n - 1) / s->n);
	return s->E[x - k * s->n] + (double)k * s->S;
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
static int64_t
first_start(const struct sim *s, double t)
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
static int64_t
last_end(const struct sim *s, double t)
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

static double
d2h_time(const struct sim *s, uint64_t bytes)
{
	return s->pp->copy_latency_s + (double)bytes / s->pp->d2h_bps;
}

static double
h2d_time(const struct sim *s, uint64_t bytes)
{
	return s->pp->copy_latency_s + (double)bytes / s->pp->h2d_bps;
}

/* Subtract size over the extended operations [first, last] (at most n of them). */
static void
save_span(struct sim *s, int64_t first, int64_t last, int64_t size)
{
	uint32_t n = s->n;

	if (first > last)
		return;
	if (last - first + 1 >= (int64_t)n) {
		span_add(s->diff, n, 0, n - 1, -size);
		return;
	}
	uint32_t f = (uint32_t)(first % n), l = (uint32_t)(last % n);
	if (f <= l) {
		span_add(s->diff, n, f, l, -size);
	} else {
		span_add(s->diff, n, f, n - 1, -size);
		span_add(s->diff, n, 0, l, -size);
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
copy_orders(struct sim *s, const uint32_t *chosen, uint32_t m, uint32_t *tmp)
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
		sort_by_key(s->c_d2h, s->c_nd, s->c_kd, tmp);
		sort_by_key(s->c_h2d, s->c_nh, s->c_kh, tmp);
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
			double st = ext_E(s, mv->issue) + (double)k * S + shift;
			t = (st > t ? st : t) + d2h_time(s, s->p->buf[mv->buf].size);
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
static void
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
static void
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

/*
 * Simulate the moves of the chosen candidates: both copy engines in the
 * steady state (each run twice, so what one iteration leaves queued delays
 * the next), then the memory at every operation. Fills s->mv[0..m).
 */
static void
simulate(struct sim *s, const struct cand *c, const uint32_t *chosen, uint32_t m,
    uint32_t *tmp)
{
	const struct prof *p = s->p;
	uint32_t n = s->n;
	double S = s->S;

	s->nsim++;
	s->stall = 0;
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
	 * iteration after that copy.
	 */
	copy_orders(s, chosen, m, tmp);
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
						double os = ext_E(s, (int64_t)o->issue - n);
						t = (os > t ? os : t) + d2h_time(s, p->buf[o->buf].size);
					}
				}
				if (mv == NULL)
					break;
				st = ext_E(s, at) > t ? ext_E(s, at) : t;
				en = st + d2h_time(s, p->buf[mv->buf].size);
				int64_t jn = jc < n ? (int64_t)jc : mv->wrap && at < jnext ? jnext : 2 * (int64_t)n;
				if (s->stalling || jn >= 2 * (int64_t)n || en <= ext_T(s, jn))
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

	/* H2D, planned: latest deadline first, each as late as the engine allows */
	uint32_t nh = s->c_nh;
	memcpy(s->order, s->c_h2d, nh * sizeof *s->order);
	double earliest = INFINITY;
	for (int pass = 0; pass < 2; pass++) {
		double latest = pass == 0 ? INFINITY : earliest + S;
		for (uint32_t j = 0; j < nh; j++) {
			struct plan_move *mv = &s->mv[s->order[j]];
			double dl = s->T[mv->use];
			double end = dl < latest ? dl : latest, d = h2d_time(s, p->buf[mv->buf].size);
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

	/* where each restore is issued, and where each move saves memory */
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
		int64_t r = landed_from(s, mv, first_start(s, mv->d2h_end), m);
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
		int64_t a = last_end(s, start);
		if (start < lb)
			a = last_end(s, lb) + 1;	/* the host waits for the offload: late */
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
		mv->h2d_start = fmax(ext_E(s, a), mv->d2h_end);
		save_span(s, r, a, size);
		mv->saved_first = r;
		mv->saved_last = a;
	}

	/* H2D, as issued: in issue order; a copy that ends after its deadline stalls */
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
	sort_by_key(s->order, nh, s->key, tmp);
	/*
	 * A late restore delays the device, and with it every later operation,
	 * the restores issued after them and the uses they are due for; the
	 * copies already queued go on. So late restores in one busy stretch of
	 * the engine cost the latest of them, not the sum (the restores' times
	 * here are of the timeline without delays; delay_by maps them).
	 */
	carry = 0;
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
			s->h2d_en[k] = s->h2d_st[k] + h2d_time(s, p->buf[mv->buf].size);
			t = s->h2d_en[k];
			/* pending until due: by deadline (mv->h2d_end for now) */
			pend_push(s, k);
		}
		/* what the next iteration finds queued, in its own delayed frame */
		double shifted = S + delay_by(s, S);
		carry = t > shifted ? t - shifted : 0;
	}
	s->stall += job_wait;
	s->stall += wait_stall(s, m);

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

/* Whether the extended span [first, last] holds operation op of some iteration. */
static int
span_holds(int64_t first, int64_t last, uint32_t op, uint32_t n)
{
	if (first > last)
		return 0;
	if (last - first + 1 >= (int64_t)n)
		return 1;
	for (int64_t k = first / n; k <= last / n; k++) {
		int64_t e = (int64_t)op + k * n;
		if (e >= first && e <= last)
			return 1;
	}
	return 0;
}

/*
 * Where candidate x saves memory at operation i: the extended index of i
 * in its span with idle engines, or, with late, in the span it has when
 * its restore waits until after i (a late restore: the use may stall); -1
 * when it does not.
 */
static int64_t
covers(const struct cand *x, uint32_t i, uint32_t n, int late)
{
	for (int64_t k = 0; k < 2; k++) {
		int64_t e = (int64_t)i + k * n;
		if (e >= x->r0 && e <= (late ? x->last : x->a0))
			return e;
	}
	return -1;
}

/*
 * The earliest x's copy to the host can land, behind the copies of the
 * current moves issued before it (stalling: none is deferred), in the
 * iteration of its use before the gap.
 */
static double
queued_landing(const struct sim *s, const struct cand *x)
{
	double issue = s->E[x->u];
	uint32_t lo = 0, hi = s->nd;	/* the first move issued after x */

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (ext_E(s, s->mv[s->d2h_order[mid]].issue) <= issue)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* behind the last copy ahead of it, or what the last iteration left queued */
	double t = issue, free = lo > 0 ? s->mv[s->d2h_order[lo - 1]].d2h_end : s->d2h_carry;
	if (free > t)
		t = free;
	return t + d2h_time(s, s->p->buf[x->buf].size);
}

/* The candidates: every gap of every movable buffer, with its idle-engine span. */
static struct cand *
candidates(const struct sim *s, uint32_t *count)
{
	const struct prof *p = s->p;
	uint32_t cap = 0, m = 0;
	struct cand *c = NULL;

	for (uint32_t k = 0; k < p->nbufs; k++) {
		const struct prof_buf *b = &p->buf[k];
		if (!b->movable || b->size < s->pp->min_bytes || b->size == 0)
			continue;
		cap += b->nuse + 2;
	}
	c = malloc((cap ? cap : 1) * sizeof *c);
	if (c == NULL)
		return NULL;
	for (uint32_t k = 0; k < p->nbufs; k++) {
		const struct prof_buf *b = &p->buf[k];
		if (!b->movable || b->size < s->pp->min_bytes || b->size == 0)
			continue;
		double cd = d2h_time(s, b->size), ch = h2d_time(s, b->size);
		if (b->nuse == 0) {
			if (prof_persistent(b))
				c[m++] = (struct cand){ .buf = k, .u = PROF_NONE, .v = PROF_NONE,
					.kind = GAP_IDLE, .r0 = 0, .a0 = s->n - 1, .last = s->n - 1,
					.not_before = -1, .retried_at = PROF_NONE,
					.score = 2 * s->S };
			continue;
		}
		for (uint32_t j = 0; j <= b->nuse; j++) {
			struct cand x = { .buf = k };
			double dl;
			x.not_before = -1;
			x.retried_at = PROF_NONE;
			if (j + 1 < b->nuse) {
				x.kind = GAP_BETWEEN;
				x.u = b->use[j];
				x.v = b->use[j + 1];
				dl = s->T[x.v];
			} else if (j + 1 == b->nuse && prof_persistent(b)) {
				x.kind = GAP_WRAP;
				x.u = b->use[j];
				x.v = b->use[0];
				dl = s->T[x.v] + s->S;
			} else if (j + 1 == b->nuse && b->free != PROF_NONE && b->free > b->use[j]) {
				x.kind = GAP_TAIL;
				x.u = b->use[j];
				x.v = b->free;
				dl = INFINITY;
			} else {
				continue;
			}
			x.r0 = first_start(s, s->E[x.u] + cd);
			x.a0 = x.kind == GAP_TAIL ? (int64_t)x.v : last_end(s, dl - ch);
			int64_t v_ext = (int64_t)x.v + (x.kind == GAP_WRAP ? s->n : 0);
			x.last = x.kind == GAP_TAIL ? x.a0 : v_ext - 1;
			/* too short to save anything, unless the device waits for
			 * the copy (stalls allowed: it must land by the use) */
			if (x.a0 < x.r0 && !(s->pp->allow_stall && x.kind != GAP_TAIL && x.r0 <= v_ext))
				continue;
			x.score = ext_E(s, x.a0) - ext_T(s, x.r0);
			c[m++] = x;
		}
	}
	*count = m;
	return c;
}

/* Seconds of a monotonic clock, for plan_make's time limit. */
static double
mono_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Whether the search must stop: the clock past deadline, or cancel set (by
 * plan_make, when the search on the other thread has made it moot). */
static int
out_of_time(double deadline, atomic_int *cancel)
{
	if (cancel != NULL && atomic_load_explicit(cancel, memory_order_relaxed))
		return 1;
	return deadline < INFINITY && mono_now() > deadline;
}

/*
 * plan_make's search, on the iteration with the device idle pad[i] seconds
 * before operation i (NULL: none; a wait the plan takes as a stall), until
 * the target is met, nothing more helps, or the clock passes deadline
 * (out->time_capped; INFINITY: none).
 */
static int
make(const struct prof *p, const struct plan_params *pp, const double *pad, double deadline,
    atomic_int *cancel, struct plan *out)
{
	struct sim s = { .p = p, .pp = pp, .n = p->nops };
	uint32_t n = p->nops;
	struct cand *c = NULL;
	uint32_t nc = 0, m = 0, *chosen = NULL, *tmp = NULL;
	int ret = -1;

	memset(out, 0, sizeof *out);
	out->peak_before = prof_peak(p, &out->peak_op);
	out->peak = out->peak_before;
	out->step_before_s = out->step_s = prof_time(p);
	out->host_idle_before_s = out->host_idle_s = prof_host_idle(p);
	out->step_s += out->host_idle_s;
	if (n == 0 || pp->d2h_bps <= 0 || pp->h2d_bps <= 0) {
		out->met = out->peak <= pp->target;
		return 0;
	}
	s.T = malloc(n * sizeof *s.T);
	s.E = malloc(n * sizeof *s.E);
	s.diff = malloc((n + 1) * sizeof *s.diff);
	s.diff0 = malloc((n + 1) * sizeof *s.diff0);
	s.mem = malloc(n * sizeof *s.mem);
	s.next_d2h = malloc((n + 1) * sizeof *s.next_d2h);
	s.next_h2d = malloc((n + 1) * sizeof *s.next_h2d);
	s.prev_h2d = malloc(n * sizeof *s.prev_h2d);
	if (!s.T || !s.E || !s.diff || !s.diff0 || !s.mem || !s.next_d2h || !s.next_h2d ||
	    !s.prev_h2d)
		goto out;
	base_diff(p, s.diff0);
	s.next_d2h[n] = s.next_h2d[n] = n;
	for (uint32_t i = n; i-- > 0;) {
		s.next_d2h[i] = p->xfer[i] == PROF_XFER_D2H ? i : s.next_d2h[i + 1];
		s.next_h2d[i] = p->xfer[i] == PROF_XFER_H2D ? i : s.next_h2d[i + 1];
	}
	for (uint32_t i = 0; i < n; i++)
		s.prev_h2d[i] = p->xfer[i] == PROF_XFER_H2D ? i : i > 0 ? s.prev_h2d[i - 1] : PROF_NONE;
	s.S = timeline(p, pad, s.T, s.E);
	double padded = 0;	/* the waits: stalls */
	for (uint32_t i = 0; pad != NULL && i < n; i++)
		padded += pad[i];
	/* an index into T and E by time, for the searches of every simulation */
	s.tidx = malloc((n + 1) * sizeof *s.tidx);
	s.eidx = malloc((n + 1) * sizeof *s.eidx);
	if (s.tidx != NULL && s.eidx != NULL && s.S > 0) {
		uint32_t i = 0, j = 0;
		for (uint32_t b = 0; b <= n; b++) {
			double r = b < n ? s.S * b / n : s.S;
			while (i < n && s.T[i] < r)
				i++;
			while (j < n && s.E[j] <= r)
				j++;
			s.tidx[b] = i;
			s.eidx[b] = j;
		}
	} else {
		free(s.tidx);
		free(s.eidx);
		s.tidx = s.eidx = NULL;
	}
	if (s.S <= 0) {
		ret = 0;	/* no times: nothing can be planned */
		out->met = out->peak <= pp->target;
		goto out;
	}
	c = candidates(&s, &nc);
	chosen = calloc(nc + 1, sizeof *chosen);
	tmp = malloc((nc + 1) * sizeof *tmp);
	s.order = malloc((nc + 1) * sizeof *s.order);
	s.key = malloc((nc + 1) * sizeof *s.key);
	s.mv = malloc((nc + 1) * sizeof *s.mv);
	s.cidx = malloc((nc + 1) * sizeof *s.cidx);
	s.mv_alt = malloc((nc + 1) * sizeof *s.mv_alt);
	s.cidx_alt = malloc((nc + 1) * sizeof *s.cidx_alt);
	s.d2h_order_alt = malloc((nc + 1) * sizeof *s.d2h_order_alt);
	s.mem_alt = malloc(n * sizeof *s.mem_alt);
	s.move_of = malloc((nc + 1) * sizeof *s.move_of);
	uint32_t wcap = 2 * (nc + 1);
	s.waits = malloc(wcap * sizeof *s.waits);
	s.wait_order = malloc(wcap * sizeof *s.wait_order);
	s.d2h_order = malloc((nc + 1) * sizeof *s.d2h_order);
	s.land = malloc(2 * (nc + 1) * sizeof *s.land);
	s.delay_at = malloc((nc + 1) * sizeof *s.delay_at);
	s.delay_sum = malloc((nc + 1) * sizeof *s.delay_sum);
	s.pend = malloc((nc + 1) * sizeof *s.pend);
	s.c_chosen = malloc((nc + 1) * sizeof *s.c_chosen);
	s.c_d2h = malloc((nc + 1) * sizeof *s.c_d2h);
	s.c_h2d = malloc((nc + 1) * sizeof *s.c_h2d);
	s.c_kd = malloc((nc + 1) * sizeof *s.c_kd);
	s.c_kh = malloc((nc + 1) * sizeof *s.c_kh);
	s.h2d_st = malloc((nc + 1) * sizeof *s.h2d_st);
	s.h2d_en = malloc((nc + 1) * sizeof *s.h2d_en);
	if (!c || !chosen || !tmp || !s.order || !s.key || !s.mv || !s.cidx || !s.move_of ||
	    !s.waits || !s.wait_order || !s.d2h_order || !s.land || !s.delay_at || !s.delay_sum ||
	    !s.pend || !s.h2d_st || !s.h2d_en || !s.c_chosen ||
	    !s.c_d2h || !s.c_h2d || !s.c_kd || !s.c_kh || !s.mv_alt || !s.cidx_alt ||
	    !s.d2h_order_alt || !s.mem_alt)
		goto out;
	memset(s.move_of, 0xff, (nc + 1) * sizeof *s.move_of);
	for (uint32_t k = 0; k < nc; k++)
		c[k].waited_at = c[k].tried_at = PROF_NONE;

	simulate(&s, c, chosen, 0, tmp);
	double stall = 0;
	/* the iteration's own time, the device waiting for the host included:
	 * where the job is host-bound its GPU time alone is a small part of it */
	double stall_cap = out->step_s;
	while ((uint64_t)s.peak + p->fixed > pp->target) {
		/* out of time: the plan so far (each round's is consistent) */
		if (out_of_time(deadline, cancel)) {
			out->time_capped = 1;
			break;
		}
		/* stalls as long as the iteration itself (a step twice as long):
		 * the rest is left to the reactive mover */
		if (s.stalling && s.stall >= stall_cap) {
			out->stall_capped = 1;
			break;
		}
		uint32_t at = s.peak_op;
		int64_t before = s.mem[at], peak_before = s.peak;
		/*
		 * The open candidate that covers the peak and saves the longest.
		 * When stalls are allowed and none does: a late restore, of an
		 * open candidate or of a move already chosen (whose restore the
		 * copy engine brought back before the peak), held until after the
		 * peak; of those, the one with the most time left before its use
		 * (the least stall).
		 */
		int64_t best = -1, late = -1, late_at = -1;
		int late_chosen = 0;
		double late_left = -1;
		for (uint32_t k = 0; k < nc; k++) {
			if (c[k].state != 0 || c[k].tried_at == at)
				continue;
			/* where it frees the peak with its restore held late */
			int64_t e = s.stalling ? covers(&c[k], at, n, 1) : -1;
			/* with stalls: one whose copy would land after the peak
			 * is for a wait there (below) */
			if (e >= 0 && c[k].kind != GAP_IDLE &&
			    queued_landing(&s, &c[k]) > ext_T(&s, e))
				continue;
			int64_t e0 = covers(&c[k], at, n, 0);
			/* with stalls, one whose copy lands after the peak, behind
			 * the copies queued ahead of it, saves nothing there: a try
			 * would fail (and fail again at every peak) */
			if (e0 >= 0 && s.stalling && queued_landing(&s, &c[k]) > ext_T(&s, e0))
				continue;
			if (e0 >= 0) {
				if (best < 0 || c[k].score > c[best].score ||
				    (c[k].score == c[best].score && p->buf[c[k].buf].size >
				    p->buf[c[best].buf].size))
					best = k;
				continue;
			}
			if (e < 0)
				continue;
			double left = ext_T(&s, c[k].last + 1) - ext_E(&s, e);
			if (late < 0 || left > late_left) {
				late = k;
				late_at = e;
				late_left = left;
				late_chosen = 0;
			}
		}
		for (uint32_t j = 0; best < 0 && s.stalling && j < m; j++) {
			struct cand *x = &c[chosen[j]];
			const struct plan_move *mv = &s.mv[j];
			if (mv->use == PROF_NONE || x->retried_at == at ||
			    span_holds(mv->saved_first, mv->saved_last, at, n))
				continue;
			for (int64_t k = 0; k < 2; k++) {
				int64_t e = (int64_t)at + k * n;
				/* only ever later (so the search ends) */
				if (e < mv->saved_first || e > x->last || e <= x->not_before)
					continue;
				double left = ext_T(&s, x->last + 1) - ext_E(&s, e);
				if (late < 0 || left > late_left) {
					late = chosen[j];
					late_at = e;
					late_left = left;
					late_chosen = 1;
				}
				break;
			}
		}
		if (best < 0 && late < 0 && s.stalling && s.nwaits < wcap) {
			/*
			 * Nothing frees memory at the peak in time: the device waits
			 * there for an offload that lands after it, of a move (the
			 * one that lands first) or of an open candidate (the one
			 * issued first), and every copy ahead of it. Its restore
			 * is held until after the peak.
			 */
			int64_t w = -1, we = -1;
			double wend = INFINITY;
			for (uint32_t j = 0; j < m; j++) {
				const struct cand *x = &c[chosen[j]];
				const struct plan_move *mv = &s.mv[j];
				if (mv->after == PROF_NONE || x->waited_at == at)
					continue;
				for (int64_t k = 0; k < 2; k++) {
					int64_t e = (int64_t)at + k * n;
					if (e > (int64_t)mv->issue && e < mv->saved_first && e <= x->last) {
						if (mv->d2h_end < wend) {
							wend = mv->d2h_end;
							w = chosen[j];
							we = e;
						}
						break;
					}
				}
			}
			int open = w < 0;
			for (uint32_t k = 0; open && k < nc; k++) {
				if (c[k].state != 0 || c[k].kind == GAP_IDLE)
					continue;
				for (int64_t kk = 0; kk < 2; kk++) {
					int64_t e = (int64_t)at + kk * n;
					/* (whose copy lands by its use, with idle engines) */
					if (e > (int64_t)c[k].u && e <= c[k].last &&
					    c[k].r0 <= c[k].last + (c[k].kind != GAP_TAIL)) {
						if (w < 0 || c[k].u < c[w].u || (c[k].u == c[w].u &&
						    p->buf[c[k].buf].size > p->buf[c[w].buf].size)) {
							w = k;
							we = e;
						}
						break;
					}
				}
			}
			if (w >= 0) {
				uint32_t i = s.nwaits++;	/* kept in the order of op */
				for (; i > 0 && s.waits[i - 1].op > we; i--)
					s.waits[i] = s.waits[i - 1];
				s.waits[i] = (struct wait){ we, (uint32_t)w };
				c[w].waited_at = at;
				int64_t was = c[w].not_before;
				if (c[w].kind != GAP_TAIL && c[w].not_before < we)
					c[w].not_before = we;
				if (open)
					chosen[m] = (uint32_t)w;
				sim_try(&s);
				simulate(&s, c, chosen, m + (uint32_t)open, tmp);
				if (s.mem[at] < before && s.peak <= peak_before && !s.infeasible) {
					if (open) {
						c[w].state = 1;
						m++;
					}
				} else {
					memmove(&s.waits[i], &s.waits[i + 1],
					    (--s.nwaits - i) * sizeof *s.waits);
					c[w].not_before = was;
					if (open)
						c[w].state = 2;
					sim_undo(&s);
				}
				stall = s.stall;
				continue;
			}
		}
		if (best < 0 && late < 0 && pp->allow_stall && !s.stalling) {
			/*
			 * The plan without stalls is done (its peak is the bound):
			 * go on from it with stalls, where the candidates dropped
			 * for lateness may serve, late or waited for.
			 */
			s.stalling = 1;
			out->bound = (uint64_t)s.peak + p->fixed;
			for (uint32_t k = 0; k < nc; k++)
				if (c[k].state == 2)
					c[k].state = 0;
			simulate(&s, c, chosen, m, tmp);
			stall = s.stall;
			continue;
		}
		if (best < 0 && late < 0)
			break;	/* nothing more can be moved at the peak */
		if (best < 0 && late_chosen) {
			/* hold a chosen restore until after the peak */
			int64_t was = c[late].not_before;
			c[late].not_before = late_at;
			c[late].retried_at = at;
			sim_try(&s);
			simulate(&s, c, chosen, m, tmp);
			if (!(s.mem[at] < before && s.peak <= peak_before) || s.infeasible) {
				c[late].not_before = was;
				sim_undo(&s);
			}
			stall = s.stall;
			continue;
		}
		if (best < 0) {
			best = late;
			c[best].not_before = late_at;
		} else if (s.stalling) {
			/* restored after the peak, however busy the copy engine */
			c[best].not_before = covers(&c[best], at, n, 1);
		}
		chosen[m] = (uint32_t)best;
		sim_try(&s);
		simulate(&s, c, chosen, m + 1, tmp);
		int better = s.mem[at] < before && s.peak <= peak_before;
		int on_time = (s.stalling || s.stall <= stall + 1e-9) && !s.infeasible;
		if (better && on_time) {
			c[best].state = 1;
			m++;
			stall = s.stall;
		} else {
			/* with stalls allowed, it stays open for a wait at this peak
			 * (its copy to the host may land after it) */
			if (s.stalling)
				c[best].tried_at = at;
			else
				c[best].state = 2;
			c[best].not_before = -1;
			sim_undo(&s);
		}
	}

	/* the result */
	out->mv = malloc((m ? m : 1) * sizeof *out->mv);
	if (out->mv == NULL)
		goto out;
	memcpy(out->mv, s.mv, m * sizeof *out->mv);
	out->n = m;
	for (uint32_t k = 0; k < m; k++)
		if (out->mv[k].issue != PROF_NONE && out->mv[k].issue >= n)
			out->mv[k].issue -= n;	/* in the next iteration: its position there */
	out->peak = (uint64_t)s.peak + p->fixed;
	out->peak_op = s.peak_op;
	out->stall_s = s.stall + padded;
	out->step_s = s.S + s.stall;
	out->simulations = s.nsim;
	for (uint32_t k = 0; k < m; k++) {
		uint64_t size = p->buf[out->mv[k].buf].size;
		if (out->mv[k].after != PROF_NONE)
			out->bytes_d2h += size;
		if (out->mv[k].use != PROF_NONE)
			out->bytes_h2d += size;
	}
	out->met = out->peak <= pp->target;
	if (!out->met && !s.stalling && !out->time_capped)
		out->bound = out->peak;	/* (cut short, the bound is not known) */
	if (p->host != NULL && p->barrier != NULL) {
		/* the host's side: where the executor issues each move (exec.c) */
		uint32_t *noff = calloc(n, sizeof *noff), *nres = calloc(n, sizeof *nres);
		if (noff == NULL || nres == NULL) {
			free(noff);
			free(nres);
			free(out->mv);
			out->mv = NULL;
			out->n = 0;
			goto out;
		}
		for (uint32_t k = 0; k < m; k++) {
			const struct plan_move *mv = &out->mv[k];
			noff[mv->issue == PROF_NONE ? 0 : mv->issue]++;
			if (mv->use != PROF_NONE)
				nres[mv->at]++;
		}
		out->host_idle_s = host_idle(p, pp, noff, nres);
		out->step_s += out->host_idle_s;
		free(noff);
		free(nres);
	}
	ret = 0;
out:
	free(c);
	free(chosen);
	free(tmp);
	free(s.order);
	free(s.key);
	free(s.mv);
	free(s.cidx);
	free(s.mv_alt);
	free(s.cidx_alt);
	free(s.d2h_order_alt);
	free(s.mem_alt);
	free(s.move_of);
	free(s.waits);
	free(s.wait_order);
	free(s.d2h_order);
	free(s.land);
	free(s.delay_at);
	free(s.delay_sum);
	free(s.pend);
	free(s.c_chosen);
	free(s.c_d2h);
	free(s.c_h2d);
	free(s.c_kd);
	free(s.c_kh);
	free(s.h2d_st);
	free(s.h2d_en);
	free(s.T);
	free(s.E);
	free(s.tidx);
	free(s.eidx);
	free(s.diff);
	free(s.diff0);
	free(s.mem);
	free(s.next_d2h);
	free(s.next_h2d);
	free(s.prev_h2d);
	return ret;
}

void
plan_fini(struct plan *pl)
{
	free(pl->mv);
	free(pl->waits);
	memset(pl, 0, sizeof *pl);
}

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

struct floor_item {
	double a, b;		/* seconds since its last use, until its next (INFINITY: none) */
	double size;
	int64_t last, next;	/* those uses (unrolled: below 0, the iteration before;
				 * n and up, the one after) */
};

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

static int
cmp_item_a(const void *x, const void *y)
{
	double a = ((const struct floor_item *)x)->a, b = ((const struct floor_item *)y)->a;
	return a < b ? -1 : a > b;
}

static int
cmp_by_b(const void *x, const void *y)
{
	const struct floor_key *a = x, *b = y;
	if (a->b != b->b)
		return a->b < b->b ? -1 : 1;
	return a->at < b->at ? -1 : a->at > b->at;
}

/*
 * The buffers that exist at operation i and can move, as items (it, sorted by
 * a; by_b: their positions in order of b; bsort is scratch): returns how
 * many. *base: the bytes that stay whatever the plan (what cannot move, or
 * is made or used at i with nothing in it before).
 */
static uint32_t
floor_items(const struct prof *p, const struct plan_params *pp, const double *T,
    const double *E, double S, uint32_t i, struct floor_item *it, struct floor_key *bsort,
    uint32_t *by_b, double *base)
{
	uint32_t n = p->nops, k = 0;

	*base = (double)p->fixed;
	for (uint32_t bi = 0; bi < p->nbufs; bi++) {
		const struct prof_buf *b = &p->buf[bi];
		uint32_t first = b->alloc == PROF_NONE ? 0 : b->alloc;
		uint32_t end = b->free == PROF_NONE ? n - 1 : b->free;
		if (i < first || i > end)
			continue;
		if (!b->movable || b->size < pp->min_bytes) {
			*base += (double)b->size;
			continue;
		}
		/* its uses around i: the first at or after, the last before */
		uint32_t lo = 0, hi = b->nuse;
		while (lo < hi) {
			uint32_t mid = lo + (hi - lo) / 2;
			if (b->use[mid] < i)
				lo = mid + 1;
			else
				hi = mid;
		}
		double a = INFINITY, nb = INFINITY;
		int64_t last = -1, next = -1;
		int wraps = prof_persistent(b) && b->nuse > 0;
		if (lo > 0) {
			last = b->use[lo - 1];
			a = T[i] - E[last];
		} else if (wraps) {
			last = (int64_t)b->use[b->nuse - 1] - n;
			a = T[i] - (E[b->use[b->nuse - 1]] - S);
		}
		if (lo < b->nuse) {
			next = b->use[lo];
			nb = T[next] - T[i];
		} else if (wraps) {
			next = (int64_t)b->use[0] + n;
			nb = T[b->use[0]] + S - T[i];
		}
		if (a == INFINITY) {
			/* nothing in it yet, or idle throughout: away for free, unless
			 * the operation makes it */
			if (nb == 0)
				*base += (double)b->size;
			continue;
		}
		it[k++] = (struct floor_item){ a, nb, (double)b->size, last, next };
	}
	if (k == 0)
		return 0;
	qsort(it, k, sizeof *it, cmp_item_a);
	/* by next use, for the sweeps over b: the items' positions by a, in order of b */
	for (uint32_t x = 0; x < k; x++) {
		bsort[x].b = it[x].b;
		bsort[x].at = x;
	}
	qsort(bsort, k, sizeof *bsort, cmp_by_b);
	for (uint32_t x = 0; x < k; x++)
		by_b[x] = bsort[x].at;
	return k;
}

/* The window before op i: the items of it up to ia (exclusive) in the
 * window, from 0 (none); the next choice (up to 32 choices, ties of a taken
 * along). */
static uint32_t
floor_next_a(const struct floor_item *it, uint32_t k, uint32_t ia)
{
	uint32_t next = ia + k / 32 + 1 < k ? ia + k / 32 + 1 : k;
	while (next < k && it[next].a == it[next - 1].a)
		next++;
	return next;
}

/* Fill f for operation i; it, bsort and by_b are scratch of nbufs each. */
static void
floor_at(const struct prof *p, const struct plan_params *pp, const double *T,
    const double *E, double S, uint32_t i, struct floor_item *it, struct floor_key *bsort,
    uint32_t *by_b, struct floor_op *f)
{
	f->op = i;
	for (int w = 0; w < 3; w++) {
		f->c[w] = -INFINITY;
		f->lo[w] = f->hi[w] = T[i];
	}
	uint32_t k = floor_items(p, pp, T, E, S, i, it, bsort, by_b, &f->base);
	if (k == 0)
		return;
	/*
	 * The window before: none, or up to the a of item ia - 1 (items sorted by
	 * a, up to 32 choices); the window after, for each: the best b over the
	 * items not in the window before.
	 */
	double in_a = 0;
	for (uint32_t ia = 0;; ) {
		double alpha = ia > 0 ? it[ia - 1].a : 0;
		if (ia > 0 && !isfinite(alpha))
			break;
		double got = in_a - pp->d2h_bps * alpha, after = -INFINITY, beta = 0, run = 0;
		for (uint32_t x = 0; x < k; x++) {
			const struct floor_item *y = &it[by_b[x]];
			if (by_b[x] < ia)
				continue;	/* in the window before */
			if (!isfinite(y->b))
				break;
			run += y->size;
			double v = run - pp->h2d_bps * y->b;
			if (v > after) {
				after = v;
				beta = y->b;
			}
		}
		if (ia == 0 && after > f->c[1]) {
			f->c[1] = after;
			f->hi[1] = T[i] + beta;
		}
		if (ia > 0 && got > f->c[0]) {
			f->c[0] = got;
			f->lo[0] = T[i] - alpha;
		}
		if (ia > 0 && isfinite(after) && got + after > f->c[2]) {
			f->c[2] = got + after;
			f->lo[2] = T[i] - alpha;
			f->hi[2] = T[i] + beta;
		}
		if (ia >= k)
			break;
		uint32_t next = floor_next_a(it, k, ia);
		for (uint32_t x = ia; x < next; x++)
			in_a += it[x].size;
		ia = next;
	}
}

/* With no stall: what stays at f's operation. */
static double
floor_nostall(const struct floor_op *f)
{
	double v = 0;
	for (int w = 0; w < 3; w++)
		if (f->c[w] > v)
			v = f->c[w];
	return f->base + v;
}

/*
 * The stall f's operation needs for a peak of at most P, in the windows of
 * *w (which stay, of 3): a stall lengthens the window it falls in, the one
 * before, the one after, or split between them (the faster engine gains
 * most). INFINITY when what cannot move is over P.
 */
static double
floor_need(const struct plan_params *pp, const struct floor_op *f, double P, int *w)
{
	double room = P - f->base, fast = pp->d2h_bps > pp->h2d_bps ? pp->d2h_bps : pp->h2d_bps;
	double gain[3] = { pp->d2h_bps, pp->h2d_bps, fast }, need = 0;

	*w = -1;
	if (room < 0)
		return INFINITY;
	for (int k = 0; k < 3; k++) {
		double x = (f->c[k] - room) / gain[k];
		if (x > need) {
			need = x;
			*w = k;
		}
	}
	return need;
}

/* Whether the windows [a, b] and [c, d] (of iterations of S) meet. */
static int
floor_meet(double a, double b, double c, double d, double S)
{
	if (b - a >= S || d - c >= S)
		return 1;
	double x = fmod(c - a, S), y = fmod(a - c, S);
	if (x < 0)
		x += S;
	if (y < 0)
		y += S;
	return x <= b - a || y <= d - c;
}

/* An operation's need of a stall, in the windows of f[i].lo[w], hi[w]. */
struct floor_ask {
	double x;
	uint32_t i;
	int w;
};

static int
cmp_need(const void *x, const void *y)
{
	const struct floor_ask *a = x, *b = y;
	if (a->x != b->x)
		return a->x > b->x ? -1 : 1;	/* most first */
	return a->i < b->i ? -1 : a->i > b->i;
}

/*
 * The stall every plan needs for a peak of at most P: each operation needs
 * its stall in its windows, and operations whose windows do not meet need
 * theirs apart, so the sum over any such set of operations is a floor (the
 * set: by need, most first, each whose windows meet none taken before).
 * *op: the operation that needs the most. need: scratch of nf.
 */
static double
floor_stall(const struct plan_params *pp, const struct floor_op *f, uint32_t nf, double P,
    double S, struct floor_ask *need, uint32_t *op)
{
	uint32_t m = 0, taken = 0;
	double sum = 0;

	*op = nf ? f[0].op : 0;
	for (uint32_t i = 0; i < nf; i++) {
		int w;
		double x = floor_need(pp, &f[i], P, &w);
		if (x == INFINITY) {
			*op = f[i].op;
			return INFINITY;
		}
		if (x > 0)
			need[m++] = (struct floor_ask){ x, i, w };
	}
	if (m == 0)
		return 0;
	qsort(need, m, sizeof *need, cmp_need);
	*op = f[need[0].i].op;
	for (uint32_t a = 0; a < m; a++) {
		const struct floor_ask *x = &need[a];
		int meets = 0;
		for (uint32_t b = 0; b < taken && !meets; b++) {
			const struct floor_ask *y = &need[b];
			meets = floor_meet(f[x->i].lo[x->w], f[x->i].hi[x->w], f[y->i].lo[y->w],
			    f[y->i].hi[y->w], S);
		}
		if (meets)
			continue;
		sum += x->x;
		need[taken++] = *x;	/* the taken ones first (a >= taken) */
	}
	return sum;
}

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

/*
 * plan_floor_new on the iteration with the device idle pad[i] seconds before
 * operation i (NULL: none). The floor is sampled (1024 operations, and every
 * one around the highest); with over finite, also every operation between
 * two samples either of which is over it (add_waits needs each operation
 * that asks for a stall, in an optimizer step of a hundred short launches
 * as well).
 */
static struct plan_floor *
floor_new(const struct prof *p, const struct plan_params *pp, const double *pad, uint32_t extra,
    double over)
{
	uint32_t n = p->nops;
	uint32_t stride = n / 1024 + 1;
	/* the refinement below: about 2^27 buffers looked at, a stretch more */
	uint64_t budget = isfinite(over) ? ((uint64_t)1 << 27) / (p->nbufs + 1) : 0;
	uint64_t most = n / stride + 2 * stride + 3 + (budget ? budget + stride : 0);
	uint32_t cap = most < (uint64_t)n + 1 ? (uint32_t)most : n + 1;
	struct plan_floor *fl = calloc(1, sizeof *fl);
	double *T = malloc((n + 1) * sizeof *T), *E = malloc((n + 1) * sizeof *E);
	struct floor_item *it = malloc((p->nbufs + 1) * sizeof *it);
	uint32_t *by_b = malloc((p->nbufs + 1) * sizeof *by_b);
	struct floor_key *bsort = malloc((p->nbufs + 1) * sizeof *bsort);

	if (fl != NULL) {
		fl->pp = pp;
		fl->n = n;
		fl->f = malloc(cap * sizeof *fl->f);
		fl->need = malloc(cap * sizeof *fl->need);
	}
	if (fl == NULL || fl->f == NULL || fl->need == NULL || T == NULL || E == NULL ||
	    it == NULL || by_b == NULL || bsort == NULL) {
		plan_floor_free(fl);
		fl = NULL;
		goto out;
	}
	double S = timeline(p, pad, T, E);
	fl->S = S;
	fl->low = fl->nostall = (double)p->fixed;
	if (n == 0 || pp->d2h_bps <= 0 || pp->h2d_bps <= 0 || S <= 0) {
		/* nothing can move */
		fl->low = fl->nostall = n > 0 ? (double)prof_peak(p, &fl->nostall_op) : fl->nostall;
		goto out;
	}
	/* every stride-th operation, then every one around the highest */
	uint32_t where = 0;
	for (uint32_t i = 0; i < n; i += stride) {
		floor_at(p, pp, T, E, S, i, it, bsort, by_b, &fl->f[fl->nf]);
		double v = floor_nostall(&fl->f[fl->nf++]);
		if (v > fl->nostall) {
			fl->nostall = v;
			where = i;
		}
	}
	uint32_t lo = where >= stride ? where - stride : 0;
	uint32_t hi = where + stride < n ? where + stride : n - 1;
	for (uint32_t i = lo; stride > 1 && i <= hi; i++) {
		if (i % stride == 0)
			continue;	/* sampled already */
		floor_at(p, pp, T, E, S, i, it, bsort, by_b, &fl->f[fl->nf]);
		double v = floor_nostall(&fl->f[fl->nf++]);
		if (v > fl->nostall) {
			fl->nostall = v;
			where = i;
		}
	}
	/*
	 * Every operation between two samples either of which is over over,
	 * the highest first, up to about 2^27 buffers looked at (a few tenths
	 * of a second; far below the floor that is a small part of the
	 * iteration, and the rounds of the waits search ask again).
	 */
	uint32_t ns = (n + stride - 1) / stride, nhot = 0;
	struct floor_key *hot = isfinite(over) && stride > 1 ? malloc(ns * sizeof *hot) : NULL;
	for (uint32_t j = 0; hot != NULL && j < ns; j++) {
		double v = floor_nostall(&fl->f[j]);
		if (j + 1 < ns && floor_nostall(&fl->f[j + 1]) > v)
			v = floor_nostall(&fl->f[j + 1]);
		if (v > over)
			hot[nhot++] = (struct floor_key){ -v, j };
	}
	if (nhot > 0)
		qsort(hot, nhot, sizeof *hot, cmp_by_b);
	uint64_t done = 0;
	for (uint32_t h = 0; h < nhot && done < budget; h++) {
		uint32_t j = hot[h].at;
		for (uint32_t i = j * stride + 1; i < (j + 1) * stride && i < n; i++) {
			if (i >= lo && i <= hi)
				continue;	/* done around the highest */
			floor_at(p, pp, T, E, S, i, it, bsort, by_b, &fl->f[fl->nf]);
			done++;
			double v = floor_nostall(&fl->f[fl->nf++]);
			if (v > fl->nostall) {
				fl->nostall = v;
				where = i;
			}
		}
	}
	free(hot);
	fl->nostall_op = where;
	fl->extra = PROF_NONE;
	if (extra < n) {
		/* the caller's operation, last, out of the floor itself */
		floor_at(p, pp, T, E, S, extra, it, bsort, by_b, &fl->f[fl->nf]);
		fl->extra = fl->nf++;
	}
	for (uint32_t i = 0; i < fl->nf; i++)
		if (fl->f[i].base > fl->low)
			fl->low = fl->f[i].base;
out:
	if (fl != NULL) {
		fl->T = T;	/* its own from here */
		fl->E = E;
	} else {
		free(T);
		free(E);
	}
	free(it);
	free(by_b);
	free(bsort);
	return fl;
}

struct plan_floor *
plan_floor_new(const struct prof *p, const struct plan_params *pp)
{
	return floor_new(p, pp, NULL, PROF_NONE, INFINITY);
}

void
plan_floor_free(struct plan_floor *fl)
{
	if (fl == NULL)
		return;
	free(fl->T);
	free(fl->E);
	free(fl->f);
	free(fl->need);
	free(fl);
}

uint64_t
plan_floor_peak(struct plan_floor *fl, double stall_s, uint32_t *op)
{
	double high = fl->nostall, low = fl->low;
	uint32_t at = fl->nostall_op;

	/* the lowest peak whose stalls fit in stall_s: between what cannot move
	 * anywhere and the floor without stalls */
	for (int iter = 0; stall_s > 0 && fl->nf > 0 && iter < 80 && high - low > 0.5; iter++) {
		double mid = (low + high) / 2;
		uint32_t o;
		if (floor_stall(fl->pp, fl->f, fl->nf, mid, fl->S, fl->need, &o) <= stall_s) {
			high = mid;
		} else {
			low = mid;
			at = o;
		}
	}
	if (op)
		*op = at;
	return (uint64_t)high;
}

double
plan_floor_stall(struct plan_floor *fl, uint64_t peak, uint32_t *op)
{
	uint32_t o = fl->nostall_op;
	double x = 0;

	if ((double)peak < fl->nostall)
		x = fl->nf > 0 ? floor_stall(fl->pp, fl->f, fl->nf, (double)peak, fl->S, fl->need, &o) :
		    INFINITY;
	if (op)
		*op = o;
	return x;
}

uint64_t
plan_floor(const struct prof *p, const struct plan_params *pp, double stall_s, uint32_t *op)
{
	struct plan_floor *fl = plan_floor_new(p, pp);
	if (fl == NULL)
		return 0;
	uint64_t v = plan_floor_peak(fl, stall_s, op);
	plan_floor_free(fl);
	return v;
}

void
plan_explain(const struct prof *p, const struct plan_params *pp, const struct plan *pl,
    uint32_t op, struct plan_explain *out)
{
	memset(out, 0, sizeof *out);
	out->held = out->unmovable = p->fixed;
	for (uint32_t k = 0; k < p->nbufs; k++) {
		const struct prof_buf *b = &p->buf[k];
		uint32_t first = b->alloc == PROF_NONE ? 0 : b->alloc;
		uint32_t last = b->free == PROF_NONE ? p->nops - 1 : b->free;
		if (op < first || op > last || b->size == 0)
			continue;
		out->held += b->size;
		int moved = 0;
		for (uint32_t m = 0; m < pl->n && !moved; m++)
			moved = pl->mv[m].buf == k &&
			    span_holds(pl->mv[m].saved_first, pl->mv[m].saved_last, op, p->nops);
		int used = 0;
		for (uint32_t u = 0; u < b->nuse && !used; u++)
			used = b->use[u] == op;
		if (moved)
			out->moved += b->size;
		else if (used)
			out->used += b->size;
		else if (!b->movable || b->size < pp->min_bytes)
			out->unmovable += b->size;
		else
			out->kept += b->size;
	}
}

/* ---- stalls as waits ---- */

/* A stall of x seconds that a peak needs, anywhere in pad[lo..hi]
 * (operations of the iteration unrolled: below 0 the one before, n and up
 * the one after) */
struct ask {
	int64_t lo, hi;
	double x;
};

struct asks {
	struct ask *a;
	uint32_t n, cap;
};

static int
ask_add(struct asks *q, int64_t lo, int64_t hi, double x)
{
	if (lo > hi)
		return 0;	/* no room for a stall: used at the operation itself */
	if (q->n == q->cap) {
		uint32_t cap = q->cap ? 2 * q->cap : 1024;
		struct ask *a = realloc(q->a, cap * sizeof *a);
		if (a == NULL)
			return -1;
		q->a = a;
		q->cap = cap;
	}
	q->a[q->n++] = (struct ask){ lo, hi, x };
	return 0;
}

/*
 * The stalls operation i needs for at most P to stay there (the floor's
 * windows of floor_at, each one a constraint): for each window before it,
 * each window after, and each pair of a window before (of floor_at's choices)
 * and one after, what the engines cannot copy in it beyond P, as seconds of
 * stall somewhere in it. A pair's stall gains pair_bps a second: the slower
 * engine's for waits that must serve wherever in the pair they fall, the
 * faster's for a floor. Of each kind, only those that ask more than every
 * smaller window of the kind: a larger window that asks less is met with the
 * smaller's stall. Returns 0, or -1 when out of memory.
 */
static int
floor_asks(const struct prof *p, const struct plan_params *pp, const double *T,
    const double *E, double S, uint32_t i, double P, double pair_bps, struct floor_item *it,
    struct floor_key *bsort, uint32_t *by_b, struct asks *q)
{
	double base, d2h = pp->d2h_bps, h2d = pp->h2d_bps;
	uint32_t k = floor_items(p, pp, T, E, S, i, it, bsort, by_b, &base);
	double room = P - base;

	if (k == 0 || room < 0)
		return 0;
	/* windows after */
	double run = 0, most = 0;
	for (uint32_t x = 0; x < k; x++) {
		const struct floor_item *y = &it[by_b[x]];
		if (!isfinite(y->b))
			break;
		run += y->size;
		double need = (run - h2d * y->b - room) / h2d;
		if (need > most) {
			if (ask_add(q, (int64_t)i + 1, y->next, need) != 0)
				return -1;
			most = need;
		}
	}
	/* windows before, each end of a tie of a */
	double in_a = 0;
	most = 0;
	for (uint32_t x = 0; x < k && isfinite(it[x].a); x++) {
		in_a += it[x].size;
		if (x + 1 < k && it[x + 1].a == it[x].a)
			continue;
		double need = (in_a - d2h * it[x].a - room) / d2h;
		if (need > most) {
			if (ask_add(q, it[x].last + 1, i, need) != 0)
				return -1;
			most = need;
		}
	}
	/* pairs, for floor_at's windows before */
	in_a = 0;
	for (uint32_t ia = 0;;) {
		double got = ia > 0 ? in_a - d2h * it[ia - 1].a : 0;
		if (ia > 0 && !isfinite(it[ia - 1].a))
			break;
		run = most = 0;
		for (uint32_t x = 0; got > 0 && x < k; x++) {
			const struct floor_item *y = &it[by_b[x]];
			if (by_b[x] < ia)
				continue;	/* in the window before */
			if (!isfinite(y->b))
				break;
			run += y->size;
			double after = run - h2d * y->b;
			double need = (got + after - room) / pair_bps;
			if (after > 0 && need > most) {
				if (ask_add(q, it[ia - 1].last + 1, y->next, need) != 0)
					return -1;
				most = need;
			}
		}
		if (ia >= k)
			break;
		uint32_t next = floor_next_a(it, k, ia);
		for (uint32_t x = ia; x < next; x++)
			in_a += it[x].size;
		ia = next;
	}
	return 0;
}

static int
cmp_ask_hi(const void *x, const void *y)
{
	const struct ask *a = x, *b = y;
	if (a->hi != b->hi)
		return a->hi < b->hi ? -1 : 1;
	return a->lo > b->lo ? -1 : a->lo < b->lo;	/* the shorter first */
}

/* Fenwick tree over the operations of the iteration: pads added this round */
static void
fen_add(double *t, uint32_t n, uint32_t i, double v)
{
	for (i++; i <= n; i += i & -i)
		t[i] += v;
}

static double
fen_sum(const double *t, uint32_t i)	/* of [0, i) */
{
	double v = 0;
	for (; i > 0; i -= i & -i)
		v += t[i];
	return v;
}

/* of pad[lo..hi], unrolled, around the iteration */
static double
fen_range(const double *t, uint32_t n, int64_t lo, int64_t hi)
{
	if (hi - lo + 1 >= (int64_t)n)
		return fen_sum(t, n);
	int64_t a = ((lo % n) + n) % n, b = ((hi % n) + n) % n;
	if (a <= b)
		return fen_sum(t, (uint32_t)b + 1) - fen_sum(t, (uint32_t)a);
	return fen_sum(t, n) - fen_sum(t, (uint32_t)a) + fen_sum(t, (uint32_t)b + 1);
}

/*
 * The asks of every operation of fl over P (floor_asks, pairs at pair_bps),
 * into q; at fl's extra operation, for excess less than its own floor.
 * Returns 0; 1 when what cannot move is over P at an operation (no stall
 * helps); -1 when out of memory.
 */
static int
collect_asks(const struct prof *p, const struct plan_floor *fl, const struct plan_params *pp,
    double P, double excess, double pair_bps, struct asks *q)
{
	struct floor_item *it = malloc((p->nbufs + 1) * sizeof *it);
	uint32_t *by_b = malloc((p->nbufs + 1) * sizeof *by_b);
	struct floor_key *bsort = malloc((p->nbufs + 1) * sizeof *bsort);
	int ret = -1;

	if (it == NULL || by_b == NULL || bsort == NULL)
		goto out;
	ret = 0;
	for (uint32_t i = 0; i < fl->nf && ret == 0; i++) {
		int k;
		/* at op, for excess less than its own floor */
		double Pi = i == fl->extra ? floor_nostall(&fl->f[i]) - excess : P;
		double x = floor_need(pp, &fl->f[i], Pi, &k);
		if (x == INFINITY && i == fl->extra)
			continue;
		if (x == INFINITY)
			ret = 1;
		else if (x > 0 && floor_asks(p, pp, fl->T, fl->E, fl->S, fl->f[i].op, Pi, pair_bps,
		    it, bsort, by_b, q) != 0)
			ret = -1;
	}
out:
	free(it);
	free(by_b);
	free(bsort);
	return ret;
}

/*
 * The interval greedy over q's asks, on the iteration cut at operation cut
 * (a line from there round to it again): by the end of each ask's window,
 * what it still lacks goes at its end, where it serves the most asks after
 * it. On a line that is the least total meeting every ask. An ask whose
 * window holds the cut is left out with drop (what is left lies on the
 * line: the total is then at most the least for all), and otherwise kept,
 * wrapping round (the total then meets every ask, and may be more than the
 * least: an ask ending just after the cut takes its stall there, where one
 * later could have served an ask ending before the cut as well). With x
 * (zeroed, n), the stall added before each operation. line: scratch of
 * q->n, fen of n + 1. Returns the total.
 */
static double
asks_greedy(const struct asks *q, uint32_t n, int64_t cut, int drop, struct ask *line,
    double *fen, double *x)
{
	uint32_t m = 0;
	double sum = 0;

	for (uint32_t a = 0; a < q->n; a++) {
		int64_t len = q->a[a].hi - q->a[a].lo;
		int64_t lo = ((q->a[a].lo - cut) % n + n) % n;
		if (len + 1 >= (int64_t)n) {
			if (drop)
				continue;
			lo = 0;	/* the whole iteration */
			len = n - 1;
		}
		if (lo + len >= (int64_t)n) {
			if (drop)
				continue;
			lo -= n;	/* ends after the cut: first */
		}
		line[m++] = (struct ask){ lo, lo + len, q->a[a].x };
	}
	if (m > 0)
		qsort(line, m, sizeof *line, cmp_ask_hi);
	memset(fen, 0, (n + 1) * sizeof *fen);
	for (uint32_t a = 0; a < m; a++) {
		double lack = line[a].x - fen_range(fen, n, line[a].lo, line[a].hi);
		if (lack <= 1e-12)
			continue;
		uint32_t at = (uint32_t)((line[a].hi % n + n) % n);
		fen_add(fen, n, at, lack);
		if (x != NULL)
			x[(at + cut) % n] += lack;
		sum += lack;
	}
	return sum;
}

/* Points around the iteration at which the greedy cuts it (and also at the
 * operation whose asks' windows hold the fewest). */
#define ASK_CUTS 16

/* The cuts to try: ASK_CUTS points around, then the least covered operation
 * (cover: scratch of n + 1). Returns how many (ASK_CUTS + 1). */
static uint32_t
ask_cuts(const struct asks *q, uint32_t n, int64_t *cuts, int64_t *cover)
{
	for (uint32_t c = 0; c < ASK_CUTS; c++)
		cuts[c] = (int64_t)((uint64_t)n * c / ASK_CUTS);
	memset(cover, 0, (n + 1) * sizeof *cover);
	for (uint32_t a = 0; a < q->n; a++) {
		int64_t len = q->a[a].hi - q->a[a].lo;
		if (len + 1 >= (int64_t)n) {
			cover[0]++;
			continue;
		}
		int64_t lo = ((q->a[a].lo % n) + n) % n, hi = lo + len;
		cover[lo]++;
		if (hi + 1 < (int64_t)n) {
			cover[hi + 1]--;
		} else {
			cover[n]--;	/* round the end, on from 0 */
			cover[0]++;
			cover[hi + 1 - n]--;
		}
	}
	int64_t run = 0, least = INT64_MAX, at = 0;
	for (uint32_t i = 0; i < n; i++) {
		run += cover[i];
		if (run < least) {
			least = run;
			at = i;
		}
	}
	cuts[ASK_CUTS] = at;
	return ASK_CUTS + 1;
}

/*
 * The interval greedy over q's asks from each cut of ask_cuts. With drop
 * (the asks across the cut left out), the most of the totals: a floor. Else
 * the least, and with x (n, zeroed) the stalls of that cut added to it.
 * Returns the total, or -1 when out of memory.
 */
static double
asks_over_cuts(const struct asks *q, uint32_t n, int drop, double *x)
{
	int64_t cuts[ASK_CUTS + 1], *cover = malloc((n + 1) * sizeof *cover);
	double *fen = malloc((n + 1) * sizeof *fen), best = -1;
	struct ask *line = malloc((q->n + 1) * sizeof *line);

	if (cover != NULL && fen != NULL && line != NULL) {
		uint32_t nc = ask_cuts(q, n, cuts, cover), at = 0;
		best = drop ? 0 : INFINITY;
		for (uint32_t c = 0; c < nc; c++) {
			double v = asks_greedy(q, n, cuts[c], drop, line, fen, NULL);
			if (drop ? v > best : v < best) {
				best = v;
				at = c;
			}
		}
		if (!drop && x != NULL)
			best = asks_greedy(q, n, cuts[at], 0, line, fen, x);
	}
	free(cover);
	free(fen);
	free(line);
	return best;
}

/*
 * Add to pad the waits that a peak of P needs by the floor fl (of the
 * iteration so padded): every operation of fl over P asks for stalls in its
 * windows (floor_asks); the fewest seconds that meet every ask, by the
 * interval greedy (asks_greedy) from the cut where it places the least. At
 * fl's extra operation, asks for excess less than its own floor. Returns the
 * seconds added (0: the floor needs none), INFINITY when no wait helps (what
 * cannot move is over P), or -1 when out of memory.
 */
static double
add_waits(const struct prof *p, const struct plan_floor *fl, const struct plan_params *pp,
    double *pad, double P, double excess)
{
	uint32_t n = p->nops;
	struct asks q = { 0 };
	double added = -1, slow = pp->d2h_bps < pp->h2d_bps ? pp->d2h_bps : pp->h2d_bps;
	double *x = calloc(n ? n : 1, sizeof *x);
	int r = x != NULL ? collect_asks(p, fl, pp, P, excess, slow, &q) : -1;

	if (r != 0)
		added = r > 0 ? INFINITY : -1;
	else if (q.n == 0)
		added = 0;
	else if ((added = asks_over_cuts(&q, n, 0, x)) >= 0)
		for (uint32_t i = 0; i < n; i++)
			pad[i] += x[i];
	free(q.a);
	free(x);
	return added;
}

double
plan_floor_least(const struct prof *p, const struct plan_params *pp, uint64_t peak)
{
	struct asks q = { 0 };
	double best = -1;
	struct plan_floor *fl = floor_new(p, pp, NULL, PROF_NONE, (double)peak);

	if (fl == NULL)
		return -1;
	if ((double)peak >= fl->nostall || p->nops == 0) {
		best = 0;
	} else {
		double fast = pp->d2h_bps > pp->h2d_bps ? pp->d2h_bps : pp->h2d_bps;
		int r = collect_asks(p, fl, pp, (double)peak, 0, fast, &q);
		/* on a line, the asks that do not hold the cut: never more than
		 * the least for all; the most of those over the cuts */
		best = r > 0 ? INFINITY : r < 0 ? -1 : asks_over_cuts(&q, p->nops, 1, NULL);
	}
	free(q.a);
	plan_floor_free(fl);
	return best;
}

/*
 * Under the bound, stalls placed as waits: pad the iteration where the floor
 * says stalls are needed for the target (add_waits), plan it without stalls,
 * and, while that misses the target, pad more (for a lower peak each round,
 * the planner being a little above the floor: 1/256 of the target less each
 * round, up to 12 rounds, or 5 that lower the plan's peak no more); short of
 * the target still, go on from the last with the greedy search's stalls.
 * Fills out (met or not) and returns 0; 1 when the greedy plan's stall
 * (greedy_stall) is about what the floor's waits cost already, or no wait
 * helps (out is then empty); -1 when out of memory. With greedy_stall NAN
 * (the greedy search still running) it goes on regardless, and *first_got
 * is what the floor's waits cost in the first round (NAN: none reached),
 * for the caller to compare.
 */
static int
plan_waits(const struct prof *p, const struct plan_params *pp, double greedy_stall,
    double deadline, atomic_int *cancel, double *first_got, struct plan *out)
{
	uint32_t n = p->nops;
	double *pad = calloc(n + 1, sizeof *pad);
	struct plan_params q = *pp;
	int ret = -1;

	memset(out, 0, sizeof *out);
	*first_got = NAN;
	if (pad == NULL)
		return -1;
	q.allow_stall = 0;
	/*
	 * From the target itself, then a little less each round. (Starting as
	 * far below the target as the bound is above the floor, as the planner
	 * stops about that far above the padded floor, cost more on W2: at
	 * 60.5 GiB on a W2 trace 0.465 s of stall against 0.429 s from the
	 * target, of 0.387 s that the floor's waits cost.)
	 */
	struct plan_floor *fl = NULL;
	double P = (double)pp->target, step = (double)pp->target / 256;
	double last = INFINITY;
	int flat = 0, made = 0;
	for (int round = 0; round < 12; round++) {
		/* after a miss, the floor of the iteration padded so far, and also
		 * where the plan peaked, for what it missed by (the first round
		 * has the floor of the iteration as it is) */
		if (out_of_time(deadline, cancel)) {
			out->time_capped = 1;
			break;
		}
		uint32_t extra = round ? out->peak_op : PROF_NONE;
		if (round > 0)
			P -= step;
		plan_floor_free(fl);
		if ((fl = floor_new(p, pp, pad, extra, P)) == NULL)
			break;
		if (round > 0 && fl->nostall - step < P) {
			/* the waits so far hold the floor under P already, and the
			 * plan is above it: ask for less than that floor */
			P = fl->nostall - step;
			plan_floor_free(fl);
			if ((fl = floor_new(p, pp, pad, extra, P)) == NULL)
				break;
		}
		double got = add_waits(p, fl, pp, pad, P,
		    round ? (double)out->peak - (double)pp->target : 0);
		if (got < 0 || got == INFINITY)
			break;
		/* the greedy search's stalls cost about what the floor's waits
		 * do already: nothing to gain */
		if (round == 0)
			*first_got = got;
		if (round == 0 && greedy_stall <= got * 1.05 + 1e-3) {
			ret = 1;
			goto out;
		}
		if (got == 0 && round > 0 && out->n > 0)
			continue;	/* the floor is met, the plan not: ask for a lower one */
		plan_fini(out);
		if (make(p, &q, pad, deadline, cancel, out) != 0)
			goto out;
		made = 1;
		if (out->met)
			break;
		/* the waits no longer buy a lower peak (five rounds): give up */
		if (last - (double)out->peak < step / 2) {
			if (++flat == 5)
				break;
		} else {
			flat = 0;
			last = (double)out->peak;
		}
	}
	if (!made) {
		ret = 1;	/* no wait helps */
		goto out;
	}
	if (!out->met && pp->allow_stall) {
		/* short of it still: on from there with the planner's own stalls */
		plan_fini(out);
		if (make(p, pp, pad, deadline, cancel, out) != 0)
			goto out;
	}
	/* where the device waits, for the caller */
	uint32_t k = 0;
	for (uint32_t i = 0; i < n; i++)
		k += pad[i] > 0;
	if ((out->waits = malloc((k ? k : 1) * sizeof *out->waits)) == NULL) {
		plan_fini(out);
		goto out;
	}
	for (uint32_t i = 0; i < n; i++)
		if (pad[i] > 0)
			out->waits[out->nwaits++] = (struct plan_wait){ i, pad[i] };
	ret = 0;
out:
	plan_floor_free(fl);
	free(pad);
	return ret;
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

static void *
waits_main(void *arg)
{
	struct waits_job *j = arg;

	j->r = plan_waits(j->p, j->pp, NAN, j->deadline, &j->cancel, &j->first_got, &j->alt);
	return NULL;
}

int
plan_make(const struct prof *p, const struct plan_params *pp, struct plan *out)
{
	double deadline = pp->time_limit_s > 0 ? mono_now() + pp->time_limit_s : INFINITY;
	int want_waits = pp->allow_stall && !pp->no_waits;
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
	int made = make(p, pp, NULL, deadline, NULL, out);
	int moot = made != 0 || !want_waits || out->bound == 0 || out->n == 0 ||
	    out->time_capped;
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
		if (r == 0 && (moot || (!isnan(j->first_got) &&
		    out->stall_s <= j->first_got * 1.05 + 1e-3))) {
			plan_fini(&alt);
			r = 1;
		}
		free(j);
	} else if (!moot) {
		double first_got;
		r = plan_waits(p, pp, out->stall_s, deadline, NULL, &first_got, &alt);
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
	alt.time_capped |= out->time_capped;
	int better = alt.met && (!out->met || alt.step_s < out->step_s);
	if (!better && !out->met && !alt.met && alt.peak < out->peak && alt.stall_s <= out->stall_s)
		better = 1;
	if (better) {
		alt.bound = out->bound;
		alt.simulations += out->simulations;
		alt.waited = 1;
		plan_fini(out);
		*out = alt;
	} else {
		out->simulations += alt.simulations;
		plan_fini(&alt);
	}
	return 0;
}
