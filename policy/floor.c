/*
 * floor.c: a floor under every plan (plan.h): at each operation, what must
 * stay on the device whatever is moved, at the copy engines' bandwidths,
 * and the stall a lower peak needs.
 */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan_internal.h"

/* qsort's order of floor items: by a. */
static int
cmp_item_a(const void *x, const void *y)
{
	double a = ((const struct floor_item *)x)->a, b = ((const struct floor_item *)y)->a;
	return a < b ? -1 : a > b;
}

/* qsort's order of floor keys: by b, then position. */
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
uint32_t
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
uint32_t
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
double
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
double
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

/* qsort's order of asks for stalls: the most first, then by operation. */
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

/*
 * plan_floor_new on the iteration with the device idle pad[i] seconds before
 * operation i (NULL: none). The floor is sampled (1024 operations, and every
 * one around the highest); with over finite, also every operation between
 * two samples either of which is over it (add_waits needs each operation
 * that asks for a stall, in an optimizer step of a hundred short launches
 * as well).
 */
struct plan_floor *
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
	double S = prof_timeline(p, pad, T, E);
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

/* The floor of p, for several questions (plan.h). NULL when out of memory. */
struct plan_floor *
plan_floor_new(const struct prof *p, const struct plan_params *pp)
{
	return floor_new(p, pp, NULL, PROF_NONE, INFINITY);
}

/* Free fl (NULL: nothing). */
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

/* The lowest peak any plan holds with stalls of stall_s in all (plan.h). */
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

/* The least stall with which any plan holds the peak at or under peak
 * (plan.h); INFINITY: none does. */
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

/* plan_floor_peak of a floor made for the one question; 0 when out of memory. */
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
