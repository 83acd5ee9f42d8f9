/*
 * waits.c: stalls placed as waits (plan.h). Each operation over a peak asks
 * for seconds of stall somewhere in its windows; the fewest seconds that
 * meet every ask (an interval greedy over a Fenwick tree, the iteration cut
 * at several points) pad the iteration, which the greedy search then plans
 * without stalls. Also the floor's least stall by the same asks, and the
 * rule that picks between the waits' plan and the greedy search's.
 */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan_internal.h"

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

/* Add the ask of a stall of x seconds anywhere in [lo, hi] to q (none where
 * lo > hi). Returns 0, or -1 when out of memory. */
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

/* qsort's order of asks: by the end of the window, the shorter first. */
static int
cmp_ask_hi(const void *x, const void *y)
{
	const struct ask *a = x, *b = y;
	if (a->hi != b->hi)
		return a->hi < b->hi ? -1 : 1;
	return a->lo > b->lo ? -1 : a->lo < b->lo;	/* the shorter first */
}

/* Fenwick tree over the operations of the iteration (pads added this round):
 * add v at i. */
static void
fen_add(double *t, uint32_t n, uint32_t i, double v)
{
	for (i++; i <= n; i += i & -i)
		t[i] += v;
}

/* The sum of the tree's entries [0, i). */
static double
fen_sum(const double *t, uint32_t i)
{
	double v = 0;
	for (; i > 0; i -= i & -i)
		v += t[i];
	return v;
}

/* The tree's sum of pad[lo..hi], unrolled, around the iteration. */
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

/* The least stall with which any plan holds the peak at or under peak, by the
 * interval greedy (plan.h); INFINITY: none; -1 when out of memory. */
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
 * for the caller to compare (plan_waits_no_gain). Stops where stop says so
 * (out->time_capped).
 */
int
plan_waits(const struct prof *p, const struct plan_params *pp, double greedy_stall,
    const struct plan_stop *stop, double *first_got, struct plan *out)
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
	 * stops about that far above the padded floor, costs more stall.)
	 */
	struct plan_floor *fl = NULL;
	double P = (double)pp->target, step = (double)pp->target / 256;
	double last = INFINITY;
	int flat = 0, made = 0;
	for (int round = 0; round < 12; round++) {
		/* after a miss, the floor of the iteration padded so far, and also
		 * where the plan peaked, for what it missed by (the first round
		 * has the floor of the iteration as it is) */
		if (search_stopped(stop)) {
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
		if (round == 0 && plan_waits_no_gain(greedy_stall, got)) {
			ret = 1;
			goto out;
		}
		if (got == 0 && round > 0 && out->n > 0)
			continue;	/* the floor is met, the plan not: ask for a lower one */
		plan_fini(out);
		if (search_run(p, &q, pad, stop, out) != 0)
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
		if (search_run(p, pp, pad, stop, out) != 0)
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

/* ---- the rule between the greedy search's plan and the waits' ---- */

/* Whether plan_make searches for waits beside the greedy search. */
int
plan_waits_wanted(const struct plan_params *pp)
{
	return pp->allow_stall && !pp->no_waits;
}

/*
 * Whether the greedy search's result leaves the search for waits nothing to
 * do: the greedy search failed (made != 0), waits are not wanted, the target
 * is not under the bound, nothing moves, or the time is out.
 */
int
plan_waits_moot(const struct plan_params *pp, int made, const struct plan *greedy)
{
	return made != 0 || !plan_waits_wanted(pp) || greedy->bound == 0 || greedy->n == 0 ||
	    greedy->time_capped;
}

/* Whether a greedy plan's stall is about what the floor's waits cost in the
 * first round already (first_got; NAN: not known, then 0). */
int
plan_waits_no_gain(double greedy_stall, double first_got)
{
	return !isnan(first_got) && greedy_stall <= first_got * 1.05 + 1e-3;
}

/*
 * Keep the better of the greedy search's plan (greedy) and the waits' plan
 * (waited) in greedy: the one that meets the target, of two the faster; of
 * two that miss, the waits' where it peaks lower with no more stall. The
 * other is freed, and waited is left empty.
 */
void
plan_pick(struct plan *greedy, struct plan *waited)
{
	waited->time_capped |= greedy->time_capped;
	int better = waited->met && (!greedy->met || waited->step_s < greedy->step_s);
	if (!better && !greedy->met && !waited->met && waited->peak < greedy->peak &&
	    waited->stall_s <= greedy->stall_s)
		better = 1;
	if (better) {
		waited->bound = greedy->bound;
		waited->simulations += greedy->simulations;
		waited->waited = 1;
		plan_fini(greedy);
		*greedy = *waited;
		memset(waited, 0, sizeof *waited);
	} else {
		greedy->simulations += waited->simulations;
		plan_fini(waited);
	}
}
