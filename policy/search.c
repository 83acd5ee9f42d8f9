/*
 * search.c: the greedy search for a plan (plan.h), and what a plan holds
 * at an operation.
 *
 * Each round takes the peak of the simulation of the moves chosen so far
 * and tries what may lower it: the open gap that covers it and saves the
 * longest; with stalls allowed, else a restore held until after the peak
 * or the device waiting there for an offload; a trial stands if the peak
 * fell (and, without stalls, no restore is late), else it is not tried
 * again there.
 *
 * With pp->phases, a gap chosen without stalls is first tried together with
 * the same gap of each of its buffer's siblings (phase.h: the buffers made at
 * its place in the phases alike), or, for a buffer without siblings that is
 * used once a micro-batch (a weight), with its gaps a micro-batch apart: one
 * trial where the search would otherwise take a round for each micro-batch
 * to reach the same moves. The trial stands on the same terms; if it fails,
 * the gap is tried alone.
 */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "phase.h"
#include "plan_internal.h"

/* The greedy search's state. */
struct search {
	const struct prof *p;
	const struct plan_params *pp;
	struct sim s;		/* the simulation of the moves chosen */
	struct cand *c;		/* every gap that may be bridged */
	uint32_t nc;
	uint32_t *chosen;	/* the candidates chosen, in order (room for nc + 1) */
	uint32_t m;		/* how many */
	double stall;		/* the stall of the moves chosen: without stalls allowed,
				 * a trial that adds to it is dropped */
	/* pp->phases: each buffer's siblings (phase_siblings; NULL: none), and
	 * its candidates c[cfirst[b] .. cfirst[b] + cnum[b]) */
	uint32_t *sib_next, *sib_prev, *sib_shift, *cfirst, *cnum;
	uint32_t period;	/* the shift most links have: a micro-batch's operations */
	uint32_t shared;	/* candidates chosen with a sibling's */
};

/* The peak a round of the search works on, as the round found it. */
struct round {
	uint32_t at;		/* the operation at the peak */
	int64_t before;		/* the memory there */
	int64_t peak_before;	/* the peak */
};

/* What a round may try at the peak. */
struct pick {
	int64_t best;		/* the open candidate that covers the peak and saves the
				 * longest (-1: none) */
	int64_t late;		/* else, with stalls: a candidate whose restore is held
				 * until after the peak (-1: none) */
	int64_t late_at;	/* the extended operation of the peak it is held past */
	int late_chosen;	/* late is a move already chosen */
	double late_left;	/* the time late leaves before its use */
};

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
		if (sim_ext_E(s, s->mv[s->d2h_order[mid]].issue) <= issue)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* behind the last copy ahead of it, or what the last iteration left queued */
	double t = issue, free = lo > 0 ? s->mv[s->d2h_order[lo - 1]].d2h_end : s->d2h_carry;
	if (free > t)
		t = free;
	return t + sim_d2h_time(s, s->p->buf[x->buf].size);
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
		double cd = sim_d2h_time(s, b->size), ch = sim_h2d_time(s, b->size);
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
			x.r0 = sim_first_start(s, s->E[x.u] + cd);
			x.a0 = x.kind == GAP_TAIL ? (int64_t)x.v : sim_last_end(s, dl - ch);
			int64_t v_ext = (int64_t)x.v + (x.kind == GAP_WRAP ? s->n : 0);
			x.last = x.kind == GAP_TAIL ? x.a0 : v_ext - 1;
			/* too short to save anything, unless the device waits for
			 * the copy (stalls allowed: it must land by the use) */
			if (x.a0 < x.r0 && !(s->pp->allow_stall && x.kind != GAP_TAIL && x.r0 <= v_ext))
				continue;
			x.score = sim_ext_E(s, x.a0) - sim_ext_T(s, x.r0);
			c[m++] = x;
		}
	}
	*count = m;
	return c;
}

/* The siblings of pp->phases into g (struct search). Returns 0, also where
 * the phases cannot be found (no siblings: each gap is tried alone), or -1
 * when out of memory. */
static int
siblings_init(struct search *g)
{
	const struct prof *p = g->p;
	const uint32_t zero = 0;
	uint32_t nb = p->nbufs ? p->nbufs : 1;
	struct phase_set ps;

	if (!g->pp->phases)
		return 0;
	g->sib_next = malloc(nb * sizeof *g->sib_next);
	g->sib_prev = malloc(nb * sizeof *g->sib_prev);
	g->sib_shift = malloc(nb * sizeof *g->sib_shift);
	g->cfirst = calloc(nb, sizeof *g->cfirst);
	g->cnum = calloc(nb, sizeof *g->cnum);
	if (g->sib_next == NULL || g->sib_prev == NULL || g->sib_shift == NULL ||
	    g->cfirst == NULL || g->cnum == NULL)
		return -1;
	/* the phases cut where the job marked them, else at the memory's turns */
	const uint32_t *cut = p->cut != NULL ? p->cut : &zero;
	if (phase_split(p, cut, p->cut != NULL ? p->ncut : 1, &ps) < 0) {
		free(g->sib_next);
		g->sib_next = NULL;
		return 0;
	}
	int64_t links = phase_siblings(p, &ps, g->sib_next, g->sib_prev, g->sib_shift);
	phase_fini(&ps);
	if (links < 0)
		return -1;
	if (links == 0) {
		free(g->sib_next);
		g->sib_next = NULL;
		return 0;
	}
	for (uint32_t k = 0; k < g->nc; k++) {	/* (each buffer's candidates are together) */
		uint32_t b = g->c[k].buf;
		if (g->cnum[b]++ == 0)
			g->cfirst[b] = k;
	}
	/* the period: the shift of most links (Boyer-Moore's majority vote, then
	 * counted; none where no shift has half of them) */
	uint32_t cand = 0, votes = 0, n = 0, of = 0;
	for (uint32_t b = 0; b < p->nbufs; b++)
		if (g->sib_next[b] != PROF_NONE) {
			n++;
			if (votes == 0)
				cand = g->sib_shift[b];
			votes += g->sib_shift[b] == cand ? 1 : (uint32_t)-1;
		}
	for (uint32_t b = 0; b < p->nbufs; b++)
		of += g->sib_next[b] != PROF_NONE && g->sib_shift[b] == cand;
	g->period = 2 * of >= n ? cand : 0;
	return 0;
}

/* The candidate of buffer b that bridges its gap of kind from use u
 * (PROF_NONE: none). */
static uint32_t
gap_at(const struct search *g, uint32_t b, uint8_t kind, int64_t u)
{
	const struct cand *c = g->c;

	for (uint32_t k = g->cfirst[b]; k < g->cfirst[b] + g->cnum[b]; k++)
		if (c[k].kind == kind && (int64_t)c[k].u == u)
			return k;
	return PROF_NONE;
}

/* Whether the operation d after the peak at (d < 0: before it) is over the
 * target too: the place in another micro-batch where a sibling of the move
 * tried at the peak saves memory (none past the iteration's ends). */
static int
over_there(const struct search *g, uint32_t at, int64_t d)
{
	int64_t e = (int64_t)at + d;

	return e >= 0 && e < (int64_t)g->s.n &&
	    (uint64_t)g->s.mem[e] + g->p->fixed > g->pp->target;
}

/* The open candidates that bridge candidate x's gap in the siblings of its
 * buffer (the same kind of gap, its uses shifted as the buffer is) into
 * out; and for a buffer that lives through the micro-batches (a weight, a
 * gradient: no siblings), its own gaps between uses a period apart, each
 * shifted by the period from the one before (until one is missing). Of
 * those, only the ones whose place of the peak at, shifted as they are, is
 * over the target too: the micro-batches that need the move. Returns how
 * many. */
static uint32_t
siblings_of(const struct search *g, uint32_t x, uint32_t at, uint32_t *out)
{
	const struct cand *c = g->c;
	uint32_t m = 0;

	if (g->sib_next == NULL)
		return 0;
	if (g->sib_next[c[x].buf] == PROF_NONE && g->sib_prev[c[x].buf] == PROF_NONE) {
		if (g->period == 0 || c[x].kind != GAP_BETWEEN ||
		    c[x].v < c[x].u || c[x].v - c[x].u > g->period)
			return 0;
		int64_t u0 = c[x].u, v0 = c[x].v;
		for (int64_t d = -(int64_t)g->period; d != 0; d = d < 0 ? (int64_t)g->period : 0)
			for (int64_t u = u0 + d; u >= 0 && u < (int64_t)g->s.n; u += d) {
				uint32_t k = gap_at(g, c[x].buf, c[x].kind, u);
				if (k == PROF_NONE || (int64_t)c[k].v != v0 + (u - u0))
					break;
				if (c[k].state == 0 && over_there(g, at, u - u0))
					out[m++] = k;
			}
		return m;
	}
	for (int later = 0; later < 2; later++) {
		uint32_t b = c[x].buf;
		int64_t d = 0;
		for (;;) {
			uint32_t o = later ? g->sib_next[b] : g->sib_prev[b];
			if (o == PROF_NONE)
				break;
			d += later ? (int64_t)g->sib_shift[b] : -(int64_t)g->sib_shift[o];
			b = o;
			uint32_t k = gap_at(g, b, c[x].kind, (int64_t)c[x].u + d);
			if (k != PROF_NONE && c[k].state == 0 && over_there(g, at, d))
				out[m++] = k;
		}
	}
	return m;
}

/*
 * Of the open candidates: the one that covers the peak at operation at and
 * saves the longest (pk->best); with stalls, also the one whose restore,
 * held until after the peak, leaves the most time before its use (pk->late).
 * Candidates whose copy would land after the peak are left for a wait.
 */
static void
pick_open(const struct search *g, uint32_t at, struct pick *pk)
{
	const struct sim *s = &g->s;
	const struct cand *c = g->c;
	const struct prof *p = g->p;
	uint32_t n = s->n;

	*pk = (struct pick){ .best = -1, .late = -1, .late_at = -1, .late_left = -1 };
	for (uint32_t k = 0; k < g->nc; k++) {
		if (c[k].state != 0 || c[k].tried_at == at)
			continue;
		/* where it frees the peak with its restore held late */
		int64_t e = s->stalling ? covers(&c[k], at, n, 1) : -1;
		/* with stalls: one whose copy would land after the peak
		 * is for a wait there (below) */
		if (e >= 0 && c[k].kind != GAP_IDLE &&
		    queued_landing(s, &c[k]) > sim_ext_T(s, e))
			continue;
		int64_t e0 = covers(&c[k], at, n, 0);
		/* with stalls, one whose copy lands after the peak, behind
		 * the copies queued ahead of it, saves nothing there: a try
		 * would fail (and fail again at every peak) */
		if (e0 >= 0 && s->stalling && queued_landing(s, &c[k]) > sim_ext_T(s, e0))
			continue;
		if (e0 >= 0) {
			if (pk->best < 0 || c[k].score > c[pk->best].score ||
			    (c[k].score == c[pk->best].score && p->buf[c[k].buf].size >
			    p->buf[c[pk->best].buf].size))
				pk->best = k;
			continue;
		}
		if (e < 0)
			continue;
		double left = sim_ext_T(s, c[k].last + 1) - sim_ext_E(s, e);
		if (pk->late < 0 || left > pk->late_left) {
			pk->late = k;
			pk->late_at = e;
			pk->late_left = left;
			pk->late_chosen = 0;
		}
	}
}

/*
 * With stalls and no open candidate covering the peak: a move already chosen
 * (whose restore the copy engine brought back before the peak) whose restore
 * may be held until after the peak, if it leaves more time before its use
 * than pk->late does (then it becomes pk->late).
 */
static void
pick_late_chosen(const struct search *g, uint32_t at, struct pick *pk)
{
	const struct sim *s = &g->s;
	uint32_t n = s->n;

	for (uint32_t j = 0; j < g->m; j++) {
		const struct cand *x = &g->c[g->chosen[j]];
		const struct plan_move *mv = &s->mv[j];
		if (mv->use == PROF_NONE || x->retried_at == at ||
		    span_holds(mv->saved_first, mv->saved_last, at, n))
			continue;
		for (int64_t k = 0; k < 2; k++) {
			int64_t e = (int64_t)at + k * n;
			/* only ever later (so the search ends) */
			if (e < mv->saved_first || e > x->last || e <= x->not_before)
				continue;
			double left = sim_ext_T(s, x->last + 1) - sim_ext_E(s, e);
			if (pk->late < 0 || left > pk->late_left) {
				pk->late = g->chosen[j];
				pk->late_at = e;
				pk->late_left = left;
				pk->late_chosen = 1;
			}
			break;
		}
	}
}

/*
 * What the device may wait for at the peak at operation at: the offload of
 * a move (the one that lands first) or, failing that, of an open candidate
 * (the one issued first). Returns the candidate (-1: none), *we the extended
 * operation of the wait, and *open whether it is an open candidate.
 */
static int64_t
pick_wait(const struct search *g, uint32_t at, int64_t *we, int *open)
{
	const struct sim *s = &g->s;
	const struct cand *c = g->c;
	const struct prof *p = g->p;
	uint32_t n = s->n;
	int64_t w = -1;
	double wend = INFINITY;

	*we = -1;
	for (uint32_t j = 0; j < g->m; j++) {
		const struct cand *x = &c[g->chosen[j]];
		const struct plan_move *mv = &s->mv[j];
		if (mv->after == PROF_NONE || x->waited_at == at)
			continue;
		for (int64_t k = 0; k < 2; k++) {
			int64_t e = (int64_t)at + k * n;
			if (e > (int64_t)mv->issue && e < mv->saved_first && e <= x->last) {
				if (mv->d2h_end < wend) {
					wend = mv->d2h_end;
					w = g->chosen[j];
					*we = e;
				}
				break;
			}
		}
	}
	*open = w < 0;
	for (uint32_t k = 0; *open && k < g->nc; k++) {
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
					*we = e;
				}
				break;
			}
		}
	}
	return w;
}

/*
 * Nothing frees memory at the peak in time: the device waits there for an
 * offload that lands after it (pick_wait), and every copy ahead of it; its
 * restore is held until after the peak. Kept if the peak falls and every
 * offload can be issued. Returns 1 when a wait was tried, 0 when there is
 * none to try.
 */
static int
try_wait(struct search *g, const struct round *r)
{
	struct sim *s = &g->s;
	struct cand *c = g->c;
	int open;
	int64_t we, w = pick_wait(g, r->at, &we, &open);

	if (w < 0)
		return 0;
	uint32_t i = s->nwaits++;	/* kept in the order of op */
	for (; i > 0 && s->waits[i - 1].op > we; i--)
		s->waits[i] = s->waits[i - 1];
	s->waits[i] = (struct wait){ we, (uint32_t)w };
	c[w].waited_at = r->at;
	int64_t was = c[w].not_before;
	if (c[w].kind != GAP_TAIL && c[w].not_before < we)
		c[w].not_before = we;
	if (open)
		g->chosen[g->m] = (uint32_t)w;
	sim_try(s);
	sim_run(s, c, g->chosen, g->m + (uint32_t)open);
	if (s->mem[r->at] < r->before && s->peak <= r->peak_before && !s->infeasible) {
		if (open) {
			c[w].state = 1;
			g->m++;
		}
	} else {
		memmove(&s->waits[i], &s->waits[i + 1], (--s->nwaits - i) * sizeof *s->waits);
		c[w].not_before = was;
		if (open)
			c[w].state = 2;
		sim_undo(s);
	}
	g->stall = s->stall;
	return 1;
}

/*
 * The plan without stalls is done (its peak is the bound, out->bound): go
 * on from it with stalls, where the candidates dropped for lateness may
 * serve, late or waited for.
 */
static void
start_stalling(struct search *g, struct plan *out)
{
	struct sim *s = &g->s;

	s->stalling = 1;
	out->bound = (uint64_t)s->peak + g->p->fixed;
	for (uint32_t k = 0; k < g->nc; k++)
		if (g->c[k].state == 2)
			g->c[k].state = 0;
	sim_run(s, g->c, g->chosen, g->m);
	g->stall = s->stall;
}

/* Hold the restore of the chosen move pk->late until after the peak; kept if
 * the peak falls and every offload can be issued. */
static void
hold_late(struct search *g, const struct pick *pk, const struct round *r)
{
	struct sim *s = &g->s;
	struct cand *x = &g->c[pk->late];
	int64_t was = x->not_before;

	x->not_before = pk->late_at;
	x->retried_at = r->at;
	sim_try(s);
	sim_run(s, g->c, g->chosen, g->m);
	if (!(s->mem[r->at] < r->before && s->peak <= r->peak_before) || s->infeasible) {
		x->not_before = was;
		sim_undo(s);
	}
	g->stall = s->stall;
}

/*
 * Choose pk->best (with stalls, restored after the peak however busy the
 * copy engine), else the open pk->late held until after the peak: kept if
 * the peak falls and, unless stalls are allowed, no restore is later than
 * before; otherwise never tried again (with stalls: not at this peak, where
 * it stays open for a wait, as its copy may land after it).
 */
static void
try_move(struct search *g, const struct pick *pk, const struct round *r)
{
	struct sim *s = &g->s;
	struct cand *c = g->c;
	int64_t best = pk->best;

	if (best < 0) {
		best = pk->late;
		c[best].not_before = pk->late_at;
	} else if (s->stalling) {
		c[best].not_before = covers(&c[best], r->at, s->n, 1);
	}
	g->chosen[g->m] = (uint32_t)best;
	/* with its siblings first (search.c above) */
	uint32_t sibs = pk->best >= 0 && !s->stalling ?
	    siblings_of(g, (uint32_t)best, r->at, g->chosen + g->m + 1) : 0;
	if (sibs > 0) {
		sim_try(s);
		sim_run(s, c, g->chosen, g->m + 1 + sibs);
		if (s->mem[r->at] < r->before && s->peak <= r->peak_before &&
		    s->stall <= g->stall + 1e-9 && !s->infeasible) {
			for (uint32_t k = 0; k <= sibs; k++)
				c[g->chosen[g->m + k]].state = 1;
			g->m += 1 + sibs;
			g->shared += sibs;
			g->stall = s->stall;
			return;
		}
		sim_undo(s);
	}
	sim_try(s);
	sim_run(s, c, g->chosen, g->m + 1);
	int better = s->mem[r->at] < r->before && s->peak <= r->peak_before;
	int on_time = (s->stalling || s->stall <= g->stall + 1e-9) && !s->infeasible;
	if (better && on_time) {
		c[best].state = 1;
		g->m++;
		g->stall = s->stall;
	} else {
		if (s->stalling)
			c[best].tried_at = r->at;
		else
			c[best].state = 2;
		c[best].not_before = -1;
		sim_undo(s);
	}
}

/*
 * One round of the greedy search at the current peak: a candidate that
 * covers it, else (with stalls) a restore held late, a wait, or the switch
 * to stalls. Returns 1 when the search ends (stopped, out of stall, or
 * nothing more can be moved at the peak), 0 to go on.
 */
static int
search_round(struct search *g, double stall_cap, const struct plan_stop *stop,
    struct plan *out)
{
	struct sim *s = &g->s;

	/* out of time: the plan so far (each round's is consistent) */
	if (search_stopped(stop)) {
		out->time_capped = 1;
		return 1;
	}
	/* stalls as long as the iteration itself (a step twice as long):
	 * the rest is left to the reactive mover */
	if (s->stalling && s->stall >= stall_cap) {
		out->stall_capped = 1;
		return 1;
	}
	struct round r = { .at = s->peak_op, .before = s->mem[s->peak_op], .peak_before = s->peak };
	struct pick pk;
	pick_open(g, r.at, &pk);
	if (pk.best < 0 && s->stalling)
		pick_late_chosen(g, r.at, &pk);
	int none = pk.best < 0 && pk.late < 0;
	if (none && s->stalling && s->nwaits < s->wcap && try_wait(g, &r))
		return 0;
	if (none && g->pp->allow_stall && !s->stalling) {
		start_stalling(g, out);
		return 0;
	}
	if (none)
		return 1;	/* nothing more can be moved at the peak */
	if (pk.best < 0 && pk.late_chosen)
		hold_late(g, &pk, &r);
	else
		try_move(g, &pk, &r);
	return 0;
}

/* The plan with nothing moved: out's fields before the search. */
static void
search_begin(const struct prof *p, struct plan *out)
{
	memset(out, 0, sizeof *out);
	out->peak_before = prof_peak(p, &out->peak_op);
	out->peak = out->peak_before;
	out->step_before_s = out->step_s = prof_time(p);
	out->host_idle_before_s = out->host_idle_s = prof_host_idle(p);
	out->step_s += out->host_idle_s;
}

/*
 * The search's plan into out: its moves, the simulation's peak, stalls
 * (padded: the waits of the pad, stalls too) and bytes, and with the
 * profile's host side, where the executor issues each move (exec.c) and
 * what that costs the host. Returns 0, or -1 when out of memory.
 */
static int
search_result(const struct search *g, double padded, struct plan *out)
{
	const struct prof *p = g->p;
	const struct sim *s = &g->s;
	uint32_t n = s->n, m = g->m;

	out->mv = malloc((m ? m : 1) * sizeof *out->mv);
	if (out->mv == NULL)
		return -1;
	memcpy(out->mv, s->mv, m * sizeof *out->mv);
	out->n = m;
	for (uint32_t k = 0; k < m; k++)
		if (out->mv[k].issue != PROF_NONE && out->mv[k].issue >= n)
			out->mv[k].issue -= n;	/* in the next iteration: its position there */
	out->peak = (uint64_t)s->peak + p->fixed;
	out->peak_op = s->peak_op;
	out->stall_s = s->stall + padded;
	out->step_s = s->S + s->stall;
	out->simulations = s->nsim;
	out->shared = g->shared;
	for (uint32_t k = 0; k < m; k++) {
		uint64_t size = p->buf[out->mv[k].buf].size;
		if (out->mv[k].after != PROF_NONE)
			out->bytes_d2h += size;
		if (out->mv[k].use != PROF_NONE)
			out->bytes_h2d += size;
	}
	out->met = out->peak <= g->pp->target;
	if (!out->met && !s->stalling && !out->time_capped)
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
			return -1;
		}
		for (uint32_t k = 0; k < m; k++) {
			const struct plan_move *mv = &out->mv[k];
			noff[mv->issue == PROF_NONE ? 0 : mv->issue]++;
			if (mv->use != PROF_NONE)
				nres[mv->at]++;
		}
		out->host_idle_s = prof_host_idle_moves(p, g->pp, noff, nres);
		out->step_s += out->host_idle_s;
		free(noff);
		free(nres);
	}
	return 0;
}

/*
 * The greedy search on the iteration padded by pad (plan_internal.h): the
 * rounds of search_round until the peak is at or under the target, or a
 * round ends the search. Returns 0 (out filled), or -1 when out of memory.
 */
int
search_run(const struct prof *p, const struct plan_params *pp, const double *pad,
    const struct plan_stop *stop, struct plan *out)
{
	struct search g = { .p = p, .pp = pp };
	uint32_t n = p->nops;
	int ret = -1;

	search_begin(p, out);
	if (n == 0 || pp->d2h_bps <= 0 || pp->h2d_bps <= 0) {
		out->met = out->peak <= pp->target;
		return 0;
	}
	if (sim_init(&g.s, p, pp, pad) != 0)
		goto out;
	double padded = 0;	/* the waits: stalls */
	for (uint32_t i = 0; pad != NULL && i < n; i++)
		padded += pad[i];
	if (g.s.S <= 0) {
		ret = 0;	/* no times: nothing can be planned */
		out->met = out->peak <= pp->target;
		goto out;
	}
	g.c = candidates(&g.s, &g.nc);
	g.chosen = calloc(g.nc + 1, sizeof *g.chosen);
	if (g.c == NULL || g.chosen == NULL || sim_init_moves(&g.s, g.nc) != 0)
		goto out;
	for (uint32_t k = 0; k < g.nc; k++)
		g.c[k].waited_at = g.c[k].tried_at = PROF_NONE;
	if (siblings_init(&g) != 0)
		goto out;

	sim_run(&g.s, g.c, g.chosen, 0);
	/* the iteration's own time, the device waiting for the host included:
	 * where the job is host-bound its GPU time alone is a small part of it */
	double stall_cap = out->step_s;
	while ((uint64_t)g.s.peak + p->fixed > pp->target &&
	    search_round(&g, stall_cap, stop, out) == 0)
		;
	ret = search_result(&g, padded, out);
out:
	free(g.c);
	free(g.chosen);
	free(g.sib_next);
	free(g.sib_prev);
	free(g.sib_shift);
	free(g.cfirst);
	free(g.cnum);
	sim_fini(&g.s);
	return ret;
}

/* The greedy search on the iteration as it is (plan.h). Returns 0, or -1 when
 * out of memory. */
int
plan_greedy(const struct prof *p, const struct plan_params *pp, const struct plan_stop *stop,
    struct plan *out)
{
	return search_run(p, pp, NULL, stop, out);
}

/* Free what the plan holds, and empty it. */
void
plan_fini(struct plan *pl)
{
	free(pl->mv);
	free(pl->waits);
	memset(pl, 0, sizeof *pl);
}

/* plan_move_holds (plan.h) */
int
plan_move_holds(const struct plan_move *mv, uint32_t op, uint32_t nops)
{
	return span_holds(mv->saved_first, mv->saved_last, op, nops);
}

/* What holds the memory at operation op under the plan (plan.h). */
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
