/*
 * planprint.c: `ebb plan`'s report: what it learned from the trace, the
 * floor under any plan, one row for the plan at each target, and the moves
 * of the last one.
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "plan.h"
#include "plancmd_int.h"
#include "record.h"

#define GIB (1024.0 * 1024.0 * 1024.0)
#define MIB (1024.0 * 1024.0)

/* Operation op of the iteration (of the next one when next) as a seq, or "-". */
static void
put_op(char *out, size_t len, uint64_t s0, uint32_t nops, uint32_t op, int next)
{
	if (op == PROF_NONE)
		snprintf(out, len, "-");
	else
		snprintf(out, len, "%llu", (unsigned long long)(s0 + op + (next ? nops : 0)));
}

/* planprint_moves (plancmd_int.h): the moves of one plan, by buffer id and
 * by the profile's key, and where a waited plan's stalls are. */
void
planprint_moves(FILE *out, const struct plancmd_build *b, const struct plan *pl, uint64_t s0,
    uint64_t target)
{
	const struct prof *p = &b->r.p;
	char key[32], after[24], at[24], use[24];

	fprintf(out, "\nmoves at target %.2f GiB:\n", (double)target / GIB);
	fprintf(out, "%10s  %12s  %10s  %13s  %13s  %10s  %4s\n", "bid", "key", "MiB",
	    "offload after", "restore after", "for use", "wrap");
	if (pl->n == 0)
		fprintf(out, "(none)\n");
	for (uint32_t k = 0; k < pl->n; k++) {
		const struct plan_move *mv = &pl->mv[k];
		const struct prof_buf *pb = &p->buf[mv->buf];
		if (pb->key & REC_KEY_ORDINAL)
			snprintf(key, sizeof key, "alloc#%llu",
			    (unsigned long long)(pb->key & ~REC_KEY_ORDINAL));
		else
			snprintf(key, sizeof key, "%llu", (unsigned long long)pb->key);
		if (mv->after == PROF_NONE)
			snprintf(after, sizeof after, "host");
		else	/* issued in the next iteration when before the use it follows */
			put_op(after, sizeof after, s0, p->nops, mv->issue, mv->issue < mv->after);
		/* a wrapping restore is issued in the next iteration when it comes before
		 * the last use (it follows the offload, which follows that use) */
		put_op(at, sizeof at, s0, p->nops, mv->at, mv->wrap && mv->at < mv->after);
		put_op(use, sizeof use, s0, p->nops, mv->use, mv->wrap);
		fprintf(out, "%10llu  %12s  %10.2f  %13s  %13s  %10s  %4s\n",
		    (unsigned long long)b->bid[mv->buf], key, (double)pb->size / MIB, after, at, use,
		    mv->wrap ? "yes" : "no");
	}
	if (pl->nwaits == 0)
		return;
	/* a waited plan: where its stalls are */
	double all = 0;
	for (uint32_t k = 0; k < pl->nwaits; k++)
		all += pl->waits[k].s;
	fprintf(out, "\nwaits of the plan (the device waits before the operation; %.6f s in all):\n",
	    all);
	fprintf(out, "%13s  %10s\n", "before", "s");
	for (uint32_t k = 0; k < pl->nwaits; k++) {
		put_op(at, sizeof at, s0, p->nops, pl->waits[k].op, 0);
		fprintf(out, "%13s  %10.6f\n", at, pl->waits[k].s);
	}
}

/* planprint_learned (plancmd_int.h): the iteration, its times, buffers and
 * peak, the bandwidths, the host's side and the bound. */
void
planprint_learned(const struct plancmd *g, const struct ebb_plan_opts *o, FILE *out)
{
	static const char *const dir[2] = { "d2h", "h2d" };
	const struct prof *p = &g->b.r.p;
	const struct plancmd_choice *ch = &g->ch;
	uint32_t nmov = 0;

	for (uint32_t k = 0; k < p->nbufs; k++)
		nmov += p->buf[k].movable && p->buf[k].size >= o->min_bytes && p->buf[k].size > 0;
	fprintf(out, "trace: %s\n", g->s.path);
	fprintf(out, "iteration: %llu, from operation %llu, %llu operations\n",
	    (unsigned long long)ch->m->iter, (unsigned long long)g->s0,
	    (unsigned long long)ch->m->period);
	if (ch->cupti)
		fprintf(out, "time source: cupti (G records for %llu of its %llu launches)\n",
		    (unsigned long long)ch->ntimed, (unsigned long long)ch->nlaunch);
	else
		fprintf(out, "time source: host (no whole iteration has G records for half its "
		    "launches: the time from each operation's call to the next stands in for its "
		    "GPU time)\n");
	if (ch->last != ch->m)
		fprintf(out, "note: iteration %llu (from operation %llu, %llu operations) is later "
		    "but has G records for fewer than half its launches\n",
		    (unsigned long long)ch->last->iter, (unsigned long long)ch->last->seq,
		    (unsigned long long)ch->last->period);
	fprintf(out, "%s time per iteration: %.6f s\n", ch->cupti ? "gpu" : "host", prof_time(p));
	fprintf(out, "buffers: %u, movable: %u (of at least %.2f MiB)\n", p->nbufs, nmov,
	    (double)o->min_bytes / MIB);
	fprintf(out, "job's copies: %u to the host, %u to the device (the plan keeps clear of them)\n",
	    prof_xfers(p, PROF_XFER_D2H), prof_xfers(p, PROF_XFER_H2D));
	fprintf(out, "learned peak: %.2f GiB\n", (double)g->peak / GIB);
	fprintf(out, "bandwidth: d2h %.2f GB/s (%s), h2d %.2f GB/s (%s)\n", g->gbps[0], g->from[0],
	    g->gbps[1], g->from[1]);
	if (g->assumed == 3)
		fprintf(out, "note: the trace has no d2h-gbps or h2d-gbps note: %.0f GB/s assumed each "
		    "way; give the link's bandwidths with --d2h GBPS --h2d GBPS\n", PLANCMD_ASSUMED_GBPS);
	else if (g->assumed)
		fprintf(out, "note: the trace has no %s-gbps note: %.0f GB/s assumed; give it with "
		    "--%s GBPS\n", dir[g->assumed - 1], PLANCMD_ASSUMED_GBPS, dir[g->assumed - 1]);
	if (g->b.pace_e)
		fprintf(out, "host pace: %llu ns an iteration, the job's own, as the library planned "
		    "with it (the trace's E records: ebb's %llu ns and the driver's queue %llu ns left "
		    "out)\n", (unsigned long long)(g->b.pace_s * 1e9),
		    (unsigned long long)(g->b.pace_ebb_s * 1e9),
		    (unsigned long long)(g->b.pace_queued_s * 1e9));
	if (p->host != NULL) {
		fprintf(out, "host: the job's pace from %s; with nothing moved "
		    "the device waits %.6f s an iteration for the host; a move costs the host %.0f us "
		    "to the host, %.0f us back (%s)\n", g->b.pace_e ? "the library's recording (E "
		    "records)" : g->sc.offload ? "the trace's issue times (an offload-mode trace: "
		    "ebb's own work then is in them; the recording the library planned, --iteration "
		    "recorded, has it apart)" : "the trace's issue times", prof_host_idle(p),
		    g->pp.host_offload_s * 1e6, g->pp.host_restore_s * 1e6, o->move_given ? "given" :
		    g->sc.move_ns[0] >= 0 ? "from the trace's plan-host notes" : "not in the trace: "
		    "give them with --move-cost; a run's plan-host-* notes have them");
	} else {
		fprintf(out, "host: not in the prediction (the times are the host's)\n");
	}
	if (prof_time(p) <= 0)
		fprintf(out, "note: the iteration's operations have no times: nothing can be planned\n");
	fprintf(out, "bound: %.2f GiB (the lowest peak with no restore late)\n",
	    (double)g->bound / GIB);
}

/* planprint_floor (plancmd_int.h): where the iteration has times, the floor
 * under any plan, with no stall and with stalls of 5% of the iteration.
 * Returns 0, or -1 when out of memory (not said). */
int
planprint_floor(struct plancmd *g, FILE *out)
{
	const struct prof *p = &g->b.r.p;

	if (prof_time(p) <= 0)
		return 0;
	if ((g->fl = plan_floor_new(p, &g->pp)) == NULL)
		return -1;
	uint32_t at0, at5;
	double st5 = prof_time(p) * 0.05;
	uint64_t f0 = plan_floor_peak(g->fl, 0, &at0), f5 = plan_floor_peak(g->fl, st5, &at5);
	fprintf(out, "floor: %.2f GiB with no stall (at operation %llu), %.2f GiB with "
	    "stalls of %.6f s, 5%% of the iteration (at operation %llu): no plan of whole "
	    "buffers moved at these bandwidths goes lower\n", (double)f0 / GIB,
	    (unsigned long long)(g->s0 + at0), (double)f5 / GIB, st5,
	    (unsigned long long)(g->s0 + at5));
	return 0;
}

/* planprint_targets (plancmd_int.h): plan for each target and print one row
 * each, what the rows' marks mean, and what holds the memory at the last
 * plan's peak. Returns 0, or -1 when out of memory (not said). */
int
planprint_targets(struct plancmd *g, const struct ebb_plan_opts *o, FILE *out, uint64_t *last)
{
	static const double fractions[] = { 0.9, 0.8, 0.7, 0.6, 0.5, 0.4 };
	const struct prof *p = &g->b.r.p;
	struct plan *pl = &g->pl;
	size_t nt = o->ntarget ? o->ntarget : sizeof fractions / sizeof fractions[0];
	uint64_t target = 0;
	int capped = 0, timed = 0;
	uint64_t unholdable = 0;	/* the highest target no plan can hold, 0: none */

	fprintf(out, "\n%10s  %10s  %4s  %5s  %11s  %8s  %10s  %10s  %10s  %6s  %12s\n",
	    "target GiB", "peak GiB", "met", "moves", "to host GiB", "back GiB", "step s", "stall s",
	    "host s", "ratio", "least stall");
	for (size_t i = 0; i < nt; i++) {
		double f = o->ntarget ? o->target[i].fraction : fractions[i];
		target = o->ntarget && o->target[i].bytes ? o->target[i].bytes :
		    (uint64_t)(f * (double)g->peak);
		*last = target;
		/* as the library plans: without stalls, and only if that misses
		 * the target (and --allow-stall), on from there with them */
		g->pp.target = target;
		plan_fini(pl);
		if (plan_make(p, &g->pp, pl) < 0)
			return -1;
		capped |= pl->stall_capped;
		timed |= pl->time_capped;
		struct plan_explain at;
		plan_explain(p, &g->pp, pl, pl->peak_op, &at);
		if (at.used + at.unmovable > target && target > unholdable)
			unholdable = target;
		double before = pl->step_before_s + pl->host_idle_before_s;
		/* the least stall of any plan for the target (the floor's) */
		double least = g->fl != NULL ? plan_floor_least(p, &g->pp, target) : 0;
		if (least < 0)
			return -1;
		if (o->svg != NULL) {
			struct plancmd_row *rw = realloc(g->rows, (g->nrows + 1) * sizeof *rw);
			if (rw == NULL)
				return -1;
			g->rows = rw;
			g->rows[g->nrows++] = (struct plancmd_row){ (double)target, (double)pl->peak,
			    before > 0 ? pl->step_s / before : 1.0, pl->met };
			g->rows_before_s = before;
		}
		fprintf(out, "%10.2f  %10.2f  %4s  %5u  %11.2f  %8.2f  %10.6f  %10.6f  %10.6f  %6.3f  "
		    "%12.6f\n", (double)target / GIB, (double)pl->peak / GIB,
		    pl->time_capped ? (pl->met ? "yes+" : "no+") : pl->met ? "yes" :
		    pl->stall_capped ? "no*" : "no", pl->n,
		    (double)pl->bytes_d2h / GIB, (double)pl->bytes_h2d / GIB, pl->step_s, pl->stall_s,
		    pl->host_idle_s, before > 0 ? pl->step_s / before : 1.0, least);
	}
	if (capped)
		fprintf(out, "no*: stopped where the predicted stalls reached the iteration's own "
		    "time; the library leaves the rest to the reactive mover\n");
	if (timed)
		fprintf(out, "+: the search stopped at its time limit (--time-limit, %g s), with the "
		    "plan it had; a longer search may do better\n", o->time_limit_s);
	if (unholdable > 0)
		fprintf(out, "targets of %.2f GiB and below cannot be held by moving buffers: at "
		    "the plan's peak one operation uses, with what cannot move, more than that; "
		    "the library says so, and allocations over the limit fail\n",
		    (double)unholdable / GIB);
	if (nt > 0) {
		/* what holds the memory where the last target's plan peaks */
		struct plan_explain ex;
		plan_explain(p, &g->pp, pl, pl->peak_op, &ex);
		fprintf(out, "\nat the peak of the plan for %.2f GiB (operation %llu): %.2f GiB used by "
		    "it, %.2f GiB that cannot move, %.2f GiB idle in gaps too short to bridge, %.2f GiB "
		    "on the host\n", (double)target / GIB, (unsigned long long)(g->s0 + pl->peak_op),
		    (double)ex.used / GIB, (double)ex.unmovable / GIB, (double)ex.kept / GIB,
		    (double)ex.moved / GIB);
		if (pl->shared > 0)
			fprintf(out, "of its %u moves, %u were chosen with a sibling's, in the "
			    "micro-batches alike\n", pl->n, pl->shared);
	}
	return 0;
}
