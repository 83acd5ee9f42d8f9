/*
 * plansvg.c: the pictures of `ebb plan` (plancmd_int.h): the predicted peak
 * against the step time over the targets (--svg), and the device memory
 * over the planned iteration as the plans predict it and as the trace's
 * records measured it (--memory-svg).
 *
 * A plan's memory at operation i is what the planner counts: every buffer
 * alive at i (the fixed bytes included), less the buffers its moves keep
 * elsewhere there (each move's saved span, folded onto the iteration: in
 * the steady state a span that reaches into the next iteration frees that
 * iteration's operations too). Its highest value is the plan's peak.
 *
 * The measured memory is that of the trace's last whole iteration: the
 * bytes of the buffers on the device by the A, F, U and B records, the
 * highest between each operation and the next. It is what ebb holds, not
 * what the device reports (NVML counts the driver's and the framework's
 * own memory too).
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plancmd_int.h"
#include "svg.h"

#define GIB (1024.0 * 1024.0 * 1024.0)
#define MIB (1024.0 * 1024.0)

/* Fold the span [first, last] of extended operations onto the n of one
 * iteration, adding size to each operation it covers (diff: a difference
 * array of n + 1). */
static void
span_fold(int64_t *diff, uint32_t n, int64_t first, int64_t last, int64_t size)
{
	if (first > last || n == 0)
		return;
	if (last - first + 1 >= (int64_t)n) {
		diff[0] += size;
		diff[n] -= size;
		return;
	}
	for (int64_t k = first / n; k <= last / n; k++) {
		int64_t lo = first > k * n ? first : k * n;
		int64_t hi = last < k * n + n - 1 ? last : k * n + n - 1;
		if (lo > hi)
			continue;
		diff[lo - k * n] += size;
		diff[hi - k * n + 1] -= size;
	}
}

/* plansvg_curve (plancmd_int.h) */
int
plansvg_curve(const struct prof *p, const struct plan *pl, double *out)
{
	uint32_t n = p->nops;
	int64_t *diff = calloc((size_t)n + 1, sizeof *diff);

	if (diff == NULL)
		return -1;
	for (uint32_t k = 0; k < p->nbufs; k++) {
		const struct prof_buf *b = &p->buf[k];
		uint32_t first = b->alloc == PROF_NONE ? 0 : b->alloc;
		uint32_t last = b->free == PROF_NONE ? n - 1 : b->free;
		span_fold(diff, n, first, last, (int64_t)b->size);
	}
	for (uint32_t m = 0; pl != NULL && m < pl->n; m++)
		span_fold(diff, n, pl->mv[m].saved_first, pl->mv[m].saved_last,
		    -(int64_t)p->buf[pl->mv[m].buf].size);
	int64_t run = (int64_t)p->fixed;
	for (uint32_t i = 0; i < n; i++) {
		run += diff[i];
		out[i] = (double)run;
	}
	free(diff);
	return 0;
}

/* Whether buffer k of p is on the device at operation op under pl. */
static int
resident(const struct prof *p, const struct plan *pl, uint32_t k, uint32_t op)
{
	const struct prof_buf *b = &p->buf[k];
	uint32_t first = b->alloc == PROF_NONE ? 0 : b->alloc;
	uint32_t last = b->free == PROF_NONE ? p->nops - 1 : b->free;

	if (op < first || op > last || b->size == 0)
		return 0;
	for (uint32_t m = 0; pl != NULL && m < pl->n; m++)
		if (pl->mv[m].buf == k && plan_move_holds(&pl->mv[m], op, p->nops))
			return 0;
	return 1;
}

/* plansvg_peak_names (plancmd_int.h) */
void
plansvg_peak_names(const struct plancmd *g, const struct prof *p, const struct plan *pl,
    const uint32_t *orig, uint32_t op, struct plancmd_named *out, size_t *n)
{
	*n = 0;
	for (uint32_t k = 0; k < p->nbufs; k++) {
		if (!resident(p, pl, k, op))
			continue;
		uint64_t size = p->buf[k].size;
		size_t at = *n < PLANCMD_NAMED ? (*n)++ : PLANCMD_NAMED;
		if (at == PLANCMD_NAMED) {	/* full: replace the smallest, if smaller */
			if (size <= out[PLANCMD_NAMED - 1].size)
				continue;
			at = PLANCMD_NAMED - 1;
		}
		while (at > 0 && out[at - 1].size < size) {
			out[at] = out[at - 1];
			at--;
		}
		uint32_t ob = orig != NULL ? orig[k] : k;
		out[at].size = size;
		out[at].bid = ob < g->b.cbid ? g->b.bid[ob] : 0;
	}
}

/* Field i of r as a number into *v; -1 when it is not one (the first
 * pass checked them, so only a file changed since). */
static int
field_u64(const struct ebb_trace_rec *r, size_t i, uint64_t *v)
{
	return i < r->nfields ? ebb_trace_u64(r, i, v) : -1;
}

/*
 * The memory held at each of the period operations from seq s0 on, by the
 * trace's records: out[i] the highest between operation s0 + i and the
 * next. Returns 0, or -1 (said on g->s.err).
 */
static int
measured(struct plancmd *g, uint64_t s0, uint64_t period, double *out)
{
	struct plancmd_src *s = &g->s;
	struct planheld h = { 0 };
	char why[EBB_TRACE_ERRLEN];
	uint64_t cur = 0;
	int rc = 0;

	for (uint64_t i = 0; i < period; i++)
		out[i] = -1;
	if (ebb_trace_rewind(&s->rd) < 0) {
		fprintf(s->err, "ebb plan: %s: %s\n", s->path, strerror(errno));
		return -1;
	}
	while ((rc = ebb_trace_next(&s->rd, why, sizeof why)) == 1) {
		const struct ebb_trace_rec *r = &s->rd.rec;
		if (strchr("LCMNRY", r->type) != NULL && field_u64(r, 1, &cur) < 0) {
			rc = -2;
			break;
		}
		if (cur >= s0 + period)
			break;
		if (planheld_record(&h, r) < 0) {
			rc = -2;
			break;
		}
		if (cur >= s0 && (double)h.device > out[cur - s0])
			out[cur - s0] = (double)h.device;
	}
	uint64_t held = h.device;
	planheld_free(&h);
	if (rc == -1)
		fprintf(s->err, "ebb plan: %s\n", why);
	else if (rc == -2)
		fprintf(s->err, "ebb plan: %s: out of memory, or changed since it was read\n",
		    s->path);
	if (rc < 0)
		return -1;
	/* an operation the trace lacks holds what the one before it did */
	for (uint64_t i = 0; i < period; i++)
		if (out[i] < 0)
			out[i] = i > 0 ? out[i - 1] : (double)held;
	return 0;
}

/* Open path for writing the picture; NULL when it cannot be (said). */
static FILE *
open_out(const struct plancmd *g, const char *path)
{
	FILE *f = fopen(path, "w");

	if (f == NULL)
		fprintf(g->s.err, "ebb plan: cannot write %s: %s\n", path, strerror(errno));
	return f;
}

/* Close f, saying so when writing it failed. Returns 0, or -1. */
static int
close_out(const struct plancmd *g, FILE *f, const char *path, int rc)
{
	if (fclose(f) != 0 || rc < 0) {
		fprintf(g->s.err, "ebb plan: writing %s failed: %s\n", path, strerror(errno));
		return -1;
	}
	return 0;
}

/* plansvg_targets (plancmd_int.h) */
int
plansvg_targets(const struct plancmd *g, const struct ebb_plan_opts *o)
{
	size_t n = g->nrows, nm = o->nmark, nall = n + nm + 2;
	double *x = calloc(nall, sizeof *x), *y = calloc(nall, sizeof *y);
	char (*tagbuf)[48] = calloc(nall, sizeof *tagbuf);
	const char **tag = calloc(nall, sizeof *tag);
	int rc = -1;

	if (x == NULL || y == NULL || tagbuf == NULL || tag == NULL) {
		fprintf(g->s.err, "ebb plan: out of memory\n");
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		x[i] = g->rows[i].ratio;
		y[i] = g->rows[i].peak / GIB;
		snprintf(tagbuf[i], sizeof tagbuf[i], "%.1fG%s", g->rows[i].target / GIB,
		    g->rows[i].met ? "" : " (missed)");
		tag[i] = tagbuf[i];
	}
	/* the job without ebb, then the user's marks */
	x[n] = 1.0;
	y[n] = (double)g->peak / GIB;
	tag[n] = "without moves";
	for (size_t i = 0; i < nm; i++) {
		x[n + 1 + i] = o->mark[i].ratio;
		y[n + 1 + i] = (double)o->mark[i].bytes / GIB;
		tag[n + 1 + i] = o->mark[i].label;
	}
	struct svg_series s[4] = {
		{ .id = "moves", .label = "ebb plan: moves", .color = "#1f77b4", .x = x, .y = y,
		  .n = n, .points = 1, .tag = tag },
		{ .id = "baseline", .label = "nothing moved", .color = "#333333", .x = x + n,
		  .y = y + n, .n = 1, .points = 1, .tag = tag + n },
		{ .id = "marks", .label = "marks (--mark)", .color = "#d62728", .x = x + n + 1,
		  .y = y + n + 1, .n = nm, .points = 1, .tag = tag + n + 1 },
	};
	size_t ns = 3;
	if (g->rc_made) {
		x[nall - 1] = g->rc_ratio;
		y[nall - 1] = g->rc_peak / GIB;
		snprintf(tagbuf[nall - 1], sizeof tagbuf[0], "%.1fG", g->rc_target / GIB);
		tag[nall - 1] = tagbuf[nall - 1];
		s[ns++] = (struct svg_series){ .id = "recompute", .label = "ebb plan: with recompute",
		    .color = "#2ca02c", .x = x + nall - 1, .y = y + nall - 1, .n = 1, .points = 1,
		    .tag = tag + nall - 1 };
	}
	char note[2][512];
	snprintf(note[0], sizeof note[0], "%s, iteration %llu (%llu operations), d2h %.1f GB/s, "
	    "h2d %.1f GB/s", g->s.path, (unsigned long long)g->ch.m->iter,
	    (unsigned long long)g->ch.m->period, g->gbps[0], g->gbps[1]);
	snprintf(note[1], sizeof note[1], "ratio: predicted step time over %.3f s, the "
	    "iteration's with nothing moved", g->rows_before_s);
	const char *notes[2] = { note[0], note[1] };
	struct svg_plot p = {
		.title = "ebb plan: predicted peak against step time", .xlabel = "step time / "
		"step time with nothing moved", .ylabel = "peak device memory, GiB", .s = s,
		.ns = ns, .note = notes, .nnote = 2, .y_from_zero = 1,
	};
	FILE *f = open_out(g, o->svg);
	if (f != NULL)
		rc = close_out(g, f, o->svg, svg_write(f, &p));
out:
	free(x);
	free(y);
	free(tagbuf);
	free(tag);
	return rc;
}

/* The index of the highest value of v[0 .. n). */
static uint32_t
argmax(const double *v, uint32_t n)
{
	uint32_t at = 0;

	for (uint32_t i = 1; i < n; i++)
		if (v[i] > v[at])
			at = i;
	return at;
}

/*
 * The iteration the measured curve shows: the trace's last whole one of the
 * planned period that the job did not depart from (the plan that ran last,
 * in an offload-mode trace), else the one planned.
 */
static const struct plancmd_mark *
last_whole(const struct plancmd *g)
{
	const struct plancmd_scan *sc = &g->sc;
	uint64_t period = g->ch.m->period;

	for (size_t i = sc->nmark; i-- > 0;) {
		const struct plancmd_mark *m = &sc->mark[i];
		if (m->period != period || m->seq + period > sc->last_seq + 1)
			continue;
		int departed = 0;
		for (size_t d = 0; d < sc->ndep && !departed; d++)
			departed = sc->dep[d] >= m->seq && sc->dep[d] < m->seq + period;
		if (!departed)
			return m;
	}
	return g->ch.m;
}

/* plansvg_memory (plancmd_int.h) */
int
plansvg_memory(struct plancmd *g, const struct ebb_plan_opts *o, uint64_t target)
{
	const struct prof *p = &g->b.r.p;
	uint32_t n = p->nops;
	const struct plancmd_mark *last = last_whole(g);
	uint64_t period = last->period;
	double *x = malloc(((size_t)n > period ? n : period) * sizeof *x);
	double *none = malloc(n * sizeof *none), *moves = malloc(n * sizeof *moves);
	double *meas = malloc(period * sizeof *meas);
	double *rcm = NULL, *xd = NULL;	/* the plan with recompute's memory, and its x */
	int rc = -1;

	if (x == NULL || none == NULL || moves == NULL || meas == NULL ||
	    plansvg_curve(p, NULL, none) < 0 || plansvg_curve(p, &g->pl, moves) < 0) {
		fprintf(g->s.err, "ebb plan: out of memory\n");
		goto out;
	}
	if (measured(g, last->seq, period, meas) < 0)
		goto out;
	for (size_t i = 0; i < ((size_t)n > period ? n : period); i++)
		x[i] = (double)i;
	for (uint32_t i = 0; i < n; i++) {
		none[i] /= GIB;
		moves[i] /= GIB;
	}
	for (uint64_t i = 0; i < period; i++)
		meas[i] /= GIB;
	uint32_t pn = argmax(none, n), pm = argmax(moves, n), pr = argmax(meas, (uint32_t)period);
	char lab[4][128];
	snprintf(lab[0], sizeof lab[0], "nothing moved: peak %.2f GiB at %u", none[pn], pn);
	snprintf(lab[1], sizeof lab[1], "measured, iteration %llu: peak %.2f GiB at %u",
	    (unsigned long long)last->iter, meas[pr], pr);
	snprintf(lab[2], sizeof lab[2], "plan, moves: peak %.2f GiB at %u", moves[pm], pm);
	snprintf(lab[3], sizeof lab[3], "target %.2f GiB", (double)target / GIB);
	struct svg_series s[5] = {
		{ .id = "unmoved", .label = lab[0], .color = "#999999", .x = x, .y = none,
		  .n = n, .step = 1 },
		{ .id = "measured", .label = lab[1], .color = "#d62728", .x = x, .y = meas,
		  .n = period, .step = 1 },
		{ .id = "predicted", .label = lab[2], .color = "#1f77b4", .x = x, .y = moves, .n = n,
		  .step = 1 },
	};
	double tx[2] = { 0, (double)(n > 0 ? n - 1 : 0) }, ty[2] = { (double)target / GIB,
	    (double)target / GIB };
	s[3] = (struct svg_series){ .id = "target", .label = lab[3], .color = "#ff7f0e", .x = tx,
	    .y = ty, .n = 2 };
	size_t ns = 4;
	/* the plan the picture names: with recompute where one was made */
	const struct prof *pp = p;
	const struct plan *pl = &g->pl;
	const uint32_t *orig = NULL;
	uint32_t at = pm;
	char rclab[128];
	if (g->rc != NULL) {
		uint32_t nd = g->rc->derived.nops;
		rcm = malloc(nd * sizeof *rcm);
		xd = malloc(nd * sizeof *xd);
		if (rcm == NULL || xd == NULL || plansvg_curve(&g->rc->derived, &g->rc->pl, rcm) < 0) {
			fprintf(g->s.err, "ebb plan: out of memory\n");
			goto out;
		}
		for (uint32_t i = 0; i < nd; i++) {
			xd[i] = (double)i;
			rcm[i] /= GIB;
		}
		at = argmax(rcm, nd);
		snprintf(rclab, sizeof rclab, "plan, with recompute: peak %.2f GiB at %u", rcm[at], at);
		s[ns++] = (struct svg_series){ .id = "predicted-recompute", .label = rclab,
		    .color = "#2ca02c", .x = xd, .y = rcm, .n = nd, .step = 1 };
		pp = &g->rc->derived;
		pl = &g->rc->pl;
		orig = g->rc->orig;
	}
	struct plancmd_named top[PLANCMD_NAMED];
	size_t ntop;
	plansvg_peak_names(g, pp, pl, orig, at, top, &ntop);
	char note[2 + PLANCMD_NAMED][160];
	const char *notes[2 + PLANCMD_NAMED];
	snprintf(note[0], sizeof note[0], "%s: iteration %llu planned (operation 0 = seq %llu); "
	    "measured: the bytes of ebb's buffers on the device, by the trace's records",
	    g->s.path, (unsigned long long)g->ch.m->iter, (unsigned long long)g->s0);
	snprintf(note[1], sizeof note[1], "at the predicted peak (operation %u) the largest "
	    "buffers on the device:", at);
	for (size_t i = 0; i < ntop; i++)
		snprintf(note[2 + i], sizeof note[0], "  buffer %llu (its A record's id): %.1f MiB",
		    (unsigned long long)top[i].bid, (double)top[i].size / MIB);
	for (size_t i = 0; i < 2 + ntop; i++)
		notes[i] = note[i];
	struct svg_plot plot = {
		.title = "device memory over one iteration", .xlabel = "operation of the iteration",
		.ylabel = "device memory, GiB", .s = s, .ns = ns, .note = notes, .nnote = 2 + ntop,
		.y_from_zero = 1,
	};
	FILE *f = open_out(g, o->memory_svg);
	if (f != NULL)
		rc = close_out(g, f, o->memory_svg, svg_write(f, &plot));
out:
	free(x);
	free(none);
	free(moves);
	free(meas);
	free(rcm);
	free(xd);
	return rc;
}
