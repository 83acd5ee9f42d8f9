/*
 * exec_plan.c: making the plan of a recorded iteration (exec_plan_make,
 * without ebb_state_lock), saying what it does and installing it (see
 * exec.h).
 */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf.h"
#include "ebb.h"
#include "exec.h"
#include "exec_int.h"
#include "idmap.h"
#include "log.h"
#include "lrec.h"
#include "mover.h"
#include "plan.h"
#include "probe.h"
#include "recompute.h"
#include "remake.h"
#include "replay.h"
#include "verify.h"
#include "planrun.h"
#include "record.h"
#include "trace.h"
#include "tracer.h"

/* A restore takes its memory when the device has this much work left
 * before the restore's copy may start (the host runs ahead). */
#define GATE_LEAD_S 1e-3

/* The moves the running plan must have made for the plan with recomputes
 * to be costed by them (cost_by_run). */
#define RUN_COSTED_MOVES 8

static double
gib(uint64_t b)
{
	return (double)b / (double)(1ULL << 30);
}

/* ---- per-token times ---- */

/* The times of token tok so far (added when add), or NULL. */
static struct tokdur *
tok_slot(uint32_t tok, int add)
{
	uint32_t i = idmap_get(&exec.tokidx, tok);

	if (i != IDMAP_NONE)
		return &exec.toks[i];
	if (!add)
		return NULL;
	if (exec.ntoks == exec.captoks) {
		uint32_t cap = exec.captoks ? exec.captoks * 2 : 1024;
		struct tokdur *v = realloc(exec.toks, cap * sizeof *v);
		if (v == NULL)
			return NULL;
		exec.toks = v;
		exec.captoks = cap;
	}
	if (idmap_put(&exec.tokidx, tok, exec.ntoks) < 0)
		return NULL;
	exec.toks[exec.ntoks] = (struct tokdur){ 0, 0 };
	return &exec.toks[exec.ntoks++];
}

/* ---- planning ---- */

/* The last position before at with GATE_LEAD_S of work between it and at's
 * end, or PROF_NONE. */
static uint32_t
gate_of(const struct prof *p, uint32_t at)
{
	double left = 0;

	for (uint32_t j = at; j > 0; j--) {
		left += p->dur[j];
		if (left >= GATE_LEAD_S)
			return j - 1;
	}
	return PROF_NONE;
}

/* Name buffer i of profile p across iterations into xb: a persistent one
 * by its id and address (addr, the recording's of the naddr buffers alive at
 * its start, which come first), one the iteration allocates by its ordinal.
 * Returns 0, or -1 for a persistent buffer without an address. */
static int
name_xbuf(const struct prof *p, uint32_t i, const uint64_t *addr, uint32_t naddr,
    struct xbuf *xb)
{
	uint64_t key = p->buf[i].key;

	*xb = (struct xbuf){ 0 };
	if (key & REC_KEY_ORDINAL) {
		xb->ord = (uint32_t)(key & ~(REC_KEY_ORDINAL | REC_KEY_SMALL));
		xb->small = (key & REC_KEY_SMALL) != 0;
		return 0;
	}
	if (i >= naddr)
		return -1;
	*xb = (struct xbuf){ .id = key, .addr = addr[i], .persistent = 1 };
	return 0;
}

/* The plan's actions by position, from the planner's moves. */
static struct xplan *
build(const struct prof *p, const struct plan *pl, const uint64_t *addr, uint32_t naddr)
{
	struct xplan *x = calloc(1, sizeof *x);
	int32_t *xb_of = malloc((p->nbufs ? p->nbufs : 1) * sizeof *xb_of);

	if (x == NULL || xb_of == NULL)
		goto fail;
	x->period = p->nops;
	memset(xb_of, 0xff, (p->nbufs ? p->nbufs : 1) * sizeof *xb_of);
	x->buf = calloc(pl->n ? pl->n : 1, sizeof *x->buf);
	x->first = calloc(p->nops + 1, sizeof *x->first);
	x->gate_mark = calloc(p->nops + 1, 1);
	x->act = calloc(2 * (size_t)pl->n + 1, sizeof *x->act);
	if (x->buf == NULL || x->first == NULL || x->gate_mark == NULL || x->act == NULL)
		goto fail;
	/* ordinals: the size of every allocation the recording saw, the small
	 * ones apart */
	for (uint32_t k = 0; k < p->nbufs; k++) {
		uint64_t key = p->buf[k].key;
		uint32_t o = (uint32_t)(key & ~(REC_KEY_ORDINAL | REC_KEY_SMALL));
		uint32_t *n = key & REC_KEY_SMALL ? &x->nsmall : &x->nord;
		if ((key & REC_KEY_ORDINAL) && o + 1 > *n)
			*n = o + 1;
	}
	x->ord_size = calloc(x->nord ? x->nord : 1, sizeof *x->ord_size);
	x->slot = calloc(x->nord ? x->nord : 1, sizeof *x->slot);
	x->slot_id = calloc(x->nord ? x->nord : 1, sizeof *x->slot_id);
	x->small_size = calloc(x->nsmall ? x->nsmall : 1, sizeof *x->small_size);
	x->small_slot = calloc(x->nsmall ? x->nsmall : 1, sizeof *x->small_slot);
	x->small_slot_id = calloc(x->nsmall ? x->nsmall : 1, sizeof *x->small_slot_id);
	if (x->ord_size == NULL || x->slot == NULL || x->slot_id == NULL || x->small_size == NULL ||
	    x->small_slot == NULL || x->small_slot_id == NULL)
		goto fail;
	for (uint32_t k = 0; k < p->nbufs; k++) {
		uint64_t key = p->buf[k].key;
		uint32_t o = (uint32_t)(key & ~(REC_KEY_ORDINAL | REC_KEY_SMALL));
		if ((key & REC_KEY_ORDINAL) && (key & REC_KEY_SMALL))
			x->small_size[o] = prof_span(&p->buf[k]);
		else if (key & REC_KEY_ORDINAL)
			x->ord_size[o] = p->buf[k].size;
	}
	/* buffers, and how many actions each position has */
	for (uint32_t m = 0; m < pl->n; m++) {
		const struct plan_move *mv = &pl->mv[m];
		if (xb_of[mv->buf] < 0) {
			if (name_xbuf(p, mv->buf, addr, naddr, &x->buf[x->nbuf]) < 0)
				continue;	/* cannot happen: live buffers come first */
			xb_of[mv->buf] = (int32_t)x->nbuf++;
		}
		x->first[(mv->issue == PROF_NONE ? 0 : mv->issue) + 1]++;
		if (mv->use != PROF_NONE)
			x->first[mv->at + 1]++;
	}
	for (uint32_t i = 0; i < p->nops; i++)
		x->first[i + 1] += x->first[i];
	/* fill: offloads first at each position, so their memory goes first */
	uint32_t *fill = calloc(p->nops + 1, sizeof *fill);
	if (fill == NULL)
		goto fail;
	memcpy(fill, x->first, (p->nops + 1) * sizeof *fill);
	for (int pass = 0; pass < 2; pass++)
		for (uint32_t m = 0; m < pl->n; m++) {
			const struct plan_move *mv = &pl->mv[m];
			if (xb_of[mv->buf] < 0)
				continue;
			if (pass == 0) {
				uint32_t pos = mv->issue == PROF_NONE ? 0 : mv->issue;
				x->act[fill[pos]++] = (struct xact){ (uint32_t)xb_of[mv->buf], PROF_NONE, 0,
				    mv->issue != mv->after };
			} else if (mv->use != PROF_NONE) {
				uint32_t gate = gate_of(p, mv->at);
				if (gate != PROF_NONE)
					x->gate_mark[gate] = 1;
				x->act[fill[mv->at]++] = (struct xact){ (uint32_t)xb_of[mv->buf], gate, 1, 0 };
			}
		}
	free(fill);
	free(xb_of);
	return x;
fail:
	free(xb_of);
	exec_xplan_free(x);
	return NULL;
}

/* The durations of the recording: CUPTI's, else each token's mean from an
 * earlier timed recording (*untimed: the operations whose token never was,
 * which count none), else the host's issue times. */
static const char *
durations(struct rec *r, const uint32_t *tok, const uint64_t *host, const double *gpu,
    uint64_t ngpu, uint32_t *untimed)
{
	uint32_t n = r->p.nops;
	const char *source = "cupti";

	for (uint32_t i = 0; gpu != NULL && i < n && i < ngpu; i++)
		if (gpu[i] > 0)
			rec_time(r, r->s0 + i, gpu[i]);
	if (r->timed > 0) {
		for (uint32_t i = 0; i < n; i++) {
			struct tokdur *t = r->p.dur[i] > 0 ? tok_slot(tok[i], 1) : NULL;
			if (t != NULL) {
				t->sum += r->p.dur[i];
				t->n++;
			}
		}
		return source;
	}
	uint32_t known = 0;
	for (uint32_t i = 0; i < n; i++) {
		struct tokdur *t = tok_slot(tok[i], 0);
		if (t != NULL && t->n > 0) {
			r->p.dur[i] = t->sum / t->n;
			known++;
		}
	}
	if (known > 0) {
		*untimed = n - known;
		return "learned";
	}
	/* (an operation ebb issued itself, for NCCL's registration, has no time) */
	for (uint32_t i = 0; i < n; i++)
		r->p.dur[i] = host[i] != 0 && host[i + 1] > host[i] ?
		    (double)(host[i + 1] - host[i]) / 1e9 : 0;
	return "host";
}


/* What exec_plan_make made: the plan (x), or why there is none, and what
 * the trace notes (plan_notes) and log lines (plan_logs) tell of it. */
struct exec_made {
	struct exec_recorded *rec;	/* the recorded iteration */
	struct xplan *x;		/* the plan by position; NULL: none */
	const char *why;		/* why there is none */
	int have;			/* pl was made (plan_fini frees it) */
	struct plan pl;			/* the planner's plan */
	struct plan_params pp;		/* what it was made under */
	struct plan_explain ex;		/* what is on the device at its peak */
	const char *source;		/* where the durations came from */
	uint32_t untimed;		/* "learned": operations whose token was never timed */
	uint64_t target;		/* the peak it aims at, bytes */
	uint64_t bound;			/* the lowest peak without stalls, bytes */
	uint64_t floor_nostall;		/* plan_floor without stalls, bytes */
	uint64_t made_ns;		/* the time taken to make it */
	double d2h, h2d;		/* the copy bandwidth assumed, bytes a second */
	int replay_have;		/* replay was found (EBB_RECOMPUTE) */
	struct replay_set replay;	/* the gaps a replay could bridge */
	int kept;			/* exec.kept holds it until its recompute plan
					 * (exec_made_free leaves it) */
	int run_costed;			/* run_costs holds what the running plan's moves
					 * cost the host (exec_replan_take) */
	struct mover_costs run_costs;
};

/* Write the plan's trace notes (plan-*, and the copy rates assumed and got). */
static void
plan_notes(const struct exec_made *rp)
{
	const struct rec *r = &rp->rec->r;
	const struct plan *pl = &rp->pl;
	const struct plan_params *pp = &rp->pp;
	const struct plan_explain *ex = &rp->ex;
	char buf[256];

	ebb_trace_note("plan-times", rp->source);
	if (strcmp(rp->source, "learned") == 0)
		ebb_trace_note_u64("plan-times-untimed", rp->untimed);
	ebb_trace_note_u64("plan-operations", r->p.nops);
	ebb_trace_note_u64("plan-buffers", r->p.nbufs);
	ebb_trace_note_u64("plan-moves", pl->n);
	ebb_trace_note_u64("plan-moves-shared", pl->shared);
	ebb_trace_note_u64("plan-stage-markers", rp->rec->markers);
	uint64_t deferred = 0;
	for (uint32_t m = 0; m < pl->n; m++)
		deferred += pl->mv[m].issue != pl->mv[m].after;
	ebb_trace_note_u64("plan-job-copies-to-host", prof_xfers(&r->p, PROF_XFER_D2H));
	ebb_trace_note_u64("plan-job-copies-to-device", prof_xfers(&r->p, PROF_XFER_H2D));
	ebb_trace_note_u64("plan-offloads-deferred", deferred);
	ebb_trace_note_u64("plan-target-bytes", rp->target);
	ebb_trace_note_u64("plan-peak-before-bytes", pl->peak_before);
	ebb_trace_note_u64("plan-peak-bytes", pl->peak);
	ebb_trace_note_u64("plan-bound-bytes", rp->bound);
	ebb_trace_note_u64("plan-floor-bytes", rp->floor_nostall);
	ebb_trace_note_u64("plan-bytes-to-host", pl->bytes_d2h);
	ebb_trace_note_u64("plan-bytes-to-device", pl->bytes_h2d);
	ebb_trace_note_u64("plan-step-before-ns", (uint64_t)(pl->step_before_s * 1e9));
	ebb_trace_note_u64("plan-step-ns", (uint64_t)(pl->step_s * 1e9));
	ebb_trace_note_u64("plan-stall-ns", (uint64_t)(pl->stall_s * 1e9));
	ebb_trace_note_u64("plan-host-idle-ns", (uint64_t)(pl->host_idle_s * 1e9));
	ebb_trace_note_u64("plan-host-idle-before-ns", (uint64_t)(pl->host_idle_before_s * 1e9));
	ebb_trace_note_u64("plan-host-offload-ns", (uint64_t)(pp->host_offload_s * 1e9));
	ebb_trace_note_u64("plan-host-restore-ns", (uint64_t)(pp->host_restore_s * 1e9));
	ebb_trace_note_u64("plan-host-drop-ns", (uint64_t)(pp->host_drop_s * 1e9));
	ebb_trace_note_u64("plan-host-remake-ns", (uint64_t)(pp->host_remake_s * 1e9));
	ebb_trace_note_u64("plan-stall-capped", (uint64_t)pl->stall_capped);
	ebb_trace_note_u64("plan-time-capped", (uint64_t)pl->time_capped);
	ebb_trace_note_u64("plan-waited", (uint64_t)pl->waited);
	double waited_s = 0;
	for (uint32_t k = 0; k < pl->nwaits; k++)
		waited_s += pl->waits[k].s;
	ebb_trace_note_u64("plan-waits", pl->nwaits);
	ebb_trace_note_u64("plan-waits-ns", (uint64_t)(waited_s * 1e9));
	for (uint32_t k = 0; k < pl->nwaits; k++) {
		/* where: the position in the iteration, and for how long */
		snprintf(buf, sizeof buf, "%u:%llu", pl->waits[k].op,
		    (unsigned long long)(pl->waits[k].s * 1e9));
		ebb_trace_note("plan-wait", buf);
	}
	ebb_trace_note_u64("plan-made-ns", rp->made_ns);
	ebb_trace_note_u64("plan-simulations", pl->simulations);
	ebb_trace_note_u64("plan-peak-seq", r->s0 + pl->peak_op);
	ebb_trace_note_u64("plan-peak-used-bytes", ex->used);
	ebb_trace_note_u64("plan-peak-unmovable-bytes", ex->unmovable);
	ebb_trace_note_u64("plan-peak-kept-bytes", ex->kept);
	ebb_trace_note_u64("plan-peak-moved-bytes", ex->moved);
	snprintf(buf, sizeof buf, "%.2f", rp->d2h / 1e9);
	ebb_trace_note("d2h-gbps", buf);
	snprintf(buf, sizeof buf, "%.2f", rp->h2d / 1e9);
	ebb_trace_note("h2d-gbps", buf);
	/* what ebb's own copies got so far, beside the rates assumed */
	double got[2];
	uint32_t ncopies[2];
	mover_copy_rates(got, ncopies);
	snprintf(buf, sizeof buf, "%.2f/%u", got[0], ncopies[0]);
	ebb_trace_note("d2h-gbps-copies", buf);
	snprintf(buf, sizeof buf, "%.2f/%u", got[1], ncopies[1]);
	ebb_trace_note("h2d-gbps-copies", buf);
}

/* Say what the plan does and costs, and where it cannot hold EBB_LIMIT. */
static void
plan_logs(const struct exec_made *rp)
{
	const struct rec *r = &rp->rec->r;
	const struct plan *pl = &rp->pl;
	const struct plan_params *pp = &rp->pp;
	const struct plan_explain *ex = &rp->ex;

	ebb_log(EBB_LOG_INFO, "plan: %u moves an iteration of %u operations (%s times), %.1f GiB "
	    "to the host and %.1f GiB back; peak %.2f -> %.2f GiB (target %.2f, lowest without "
	    "stalls %.2f); %.3f s an iteration predicted, %.3f s of it stalls (%.3f s without "
	    "moves); made in %.3f s (%u simulations)", pl->n, r->p.nops, rp->source,
	    gib(pl->bytes_d2h), gib(pl->bytes_h2d), gib(pl->peak_before), gib(pl->peak),
	    gib(rp->target), gib(rp->bound), pl->step_s, pl->stall_s,
	    pl->step_before_s + pl->host_idle_before_s, (double)rp->made_ns / 1e9, pl->simulations);
	if (r->p.host != NULL)
		ebb_log(EBB_LOG_INFO, "plan: of that, the device waits %.3f s for the host to issue "
		    "work (%.3f s without moves; as measured so far, an offload costs the host "
		    "%.0f us, a restore %.0f us, a drop %.0f us, a remake %.0f us and its "
		    "launches)", pl->host_idle_s, pl->host_idle_before_s, pp->host_offload_s * 1e6,
		    pp->host_restore_s * 1e6, pp->host_drop_s * 1e6, pp->host_remake_s * 1e6);
	else
		ebb_log(EBB_LOG_INFO, "plan: the host's time is not in the prediction (the "
		    "durations are the host's)");
	ebb_log(EBB_LOG_INFO, "plan: at its peak (operation %llu of the recorded iteration, "
	    "position %u) %.2f GiB are used by the operation, %.2f GiB cannot move (pinned, "
	    "small, ebb's slabs, the driver's), %.2f GiB are idle in gaps too short to bridge, "
	    "%.2f GiB are on the host", (unsigned long long)(r->s0 + pl->peak_op), pl->peak_op,
	    gib(ex->used), gib(ex->unmovable), gib(ex->kept), gib(ex->moved));
	/* what the plan costs and why, at -v 1: its bound is where the link
	 * becomes the limit */
	double before = pl->step_before_s + pl->host_idle_before_s;
	char lowered[96] = "";
	if (exec.lowered > 0)
		snprintf(lowered, sizeof lowered, " and %.2f GiB the arena's chunks held beyond their "
		    "buffers", gib(exec.lowered));
	ebb_log(EBB_LOG_NOTE, "plan: %s %.2f GiB (target %.2f, EBB_LIMIT less EBB_PLAN_MARGIN%s) "
	    "by moving %.2f GiB an iteration each way; %.3f s an iteration predicted against "
	    "%.3f s without moves (%+.1f%%)%s", pl->met ? "holds" : "reaches", gib(pl->peak),
	    gib(rp->target), lowered, gib(pl->bytes_d2h), pl->step_s, before,
	    before > 0 ? (pl->step_s / before - 1) * 100 : 0,
	    rp->target < rp->bound ? "" : "; the link is not the limit there");
	if (rp->target < rp->bound)
		ebb_log(EBB_LOG_NOTE, "plan: the lowest peak without stalls is %.2f GiB: below it "
		    "the copies at %.1f and %.1f GB/s cannot keep up, and the device waits for "
		    "them %.3f s an iteration", gib(rp->bound), rp->d2h / 1e9, rp->h2d / 1e9,
		    pl->stall_s);
	/* what must be on the device at once, wherever the rest is */
	if (ex->used + ex->unmovable > rp->target)
		ebb_log(EBB_LOG_WARN, "EBB_LIMIT cannot be held by moving buffers: operation %u of "
		    "the iteration uses %.2f GiB at once, and %.2f GiB more cannot move (pinned, "
		    "small, ebb's slabs, the driver's), against a target of %.2f GiB; allocations "
		    "over EBB_LIMIT fail with CUDA_ERROR_OUT_OF_MEMORY", pl->peak_op, gib(ex->used),
		    gib(ex->unmovable), gib(rp->target));
	if (pl->stall_capped)
		ebb_log(EBB_LOG_WARN, "the plan stops at %.2f GiB, above its target of %.2f GiB: "
		    "its predicted stalls (%.3f s) reached the iteration's own time; above "
		    "EBB_LIMIT the reactive mover does the rest", gib(pl->peak), gib(rp->target),
		    pl->stall_s);
	if (pl->time_capped && !pl->met)
		ebb_log(EBB_LOG_WARN, "the plan stops at %.2f GiB, above its target of %.2f GiB: "
		    "its search reached EBB_PLAN_SECONDS=%g; above EBB_LIMIT the reactive mover "
		    "does the rest", gib(pl->peak), gib(rp->target), exec.conf->plan_seconds);
	else if (pl->time_capped)
		ebb_log(EBB_LOG_WARN, "the plan meets its target of %.2f GiB, but its search "
		    "reached EBB_PLAN_SECONDS=%g before it was done: a longer one may find "
		    "a faster plan", gib(rp->target), exec.conf->plan_seconds);
}

/* The trace's notes of the job's host pace in recording rc (profile p):
 * its sum, ebb's host time the pace left out, and the launches' waits for
 * the device's queue it left out (queued_s). */
static void
note_pace(const struct prof *p, const struct exec_recorded *rc, double queued_s)
{
	double pace = 0;

	for (uint32_t i = 0; i < p->nops; i++)
		pace += p->host[i];
	ebb_trace_note_u64("plan-host-pace-ns", (uint64_t)(pace * 1e9));
	ebb_trace_note_u64("plan-host-ebb-ns", rc->self[p->nops] - rc->self[0]);
	ebb_trace_note_u64("plan-host-queued-ns", (uint64_t)(queued_s * 1e9));
}

/* The E records of recording rc (nops operations from s0; from
 * rc->pace_s0 where the pace is of the iteration there, which the
 * plan-pace-from note names): what the pace above is made of, so that ebb
 * plan can plan the recording with the pace the library had
 * (ebb-trace(5)). The last is the next operation's issue. */
static void
trace_pace(const struct exec_recorded *rc, uint64_t s0, uint32_t nops)
{
	if (!ebb_trace_on())
		return;
	if (rc->pace_s0 != 0) {
		s0 = rc->pace_s0;
		ebb_trace_note_u64("plan-pace-from", s0);
	}
	for (uint32_t i = 0; i <= nops; i++)
		ebb_trace_write_pace(s0 + i, rc->host[i], rc->self[i] - rc->self[0],
		    i < nops ? rc->call[i] : 0, i < nops && rc->sync[i]);
}

const struct lrec *
exec_recorded_launch(const struct exec_recorded *r, uint64_t i)
{
	return i < r->launches.n ? lrec_at(&r->launches, (uint32_t)i) : NULL;
}

struct exec_made *
exec_plan_make(struct exec_recorded *rc)
{
	struct exec_made *m = calloc(1, sizeof *m);

	if (m == NULL) {
		exec_recorded_free(rc);
		return NULL;
	}
	m->rec = rc;
	struct rec *r = &rc->r;
	m->source = durations(r, rc->tok, rc->host, rc->gpu, rc->ngpu, &m->untimed);
	rec_end(r);
	r->p.fixed = rc->fixed;
	/* the phases the stage markers cut (without, the memory's turns) */
	for (uint32_t i = 0; rc->markers > 0 && i < rc->nstart; i++)
		if (prof_cut(&r->p, rc->start[i]) < 0)
			r->oom = 1;
	/* the host's side, when the durations are the device's */
	double queued = 0;
	if (strcmp(m->source, "host") != 0) {
		if (prof_host_pace(&r->p, rc->host, rc->self, rc->call, rc->sync, &queued) == 0)
			note_pace(&r->p, rc, queued);
	} else {
		/* the durations are the host's: the pace only for the notes */
		struct prof q = { 0 };
		if (prof_init(&q, r->p.nops) == 0 &&
		    prof_host_pace(&q, rc->host, rc->self, rc->call, rc->sync, &queued) == 0)
			note_pace(&q, rc, queued);
		prof_fini(&q);
	}	/* (without memory, none) */
	trace_pace(rc, r->s0, r->p.nops);

	mover_bandwidth(&m->d2h, &m->h2d);
	if (r->p.replay != NULL) {
		struct replay_params rp = { .min_bytes = exec.conf->min_offload_bytes };
		m->replay_have = replay_find(&r->p, &rp, &m->replay) == 0;
	}
	uint64_t learned = prof_peak(&r->p, NULL);
	/* EBB_PLAN_MARGIN: what is held at a moment on the host's side runs a
	 * little ahead of the device's */
	uint64_t limit = rc->limit;
	m->target = limit - (uint64_t)((double)limit * exec.conf->plan_margin);
	m->target = m->target > exec.lowered ? m->target - exec.lowered : 0;
	if (exec.conf->target > 0 && (uint64_t)(exec.conf->target * (double)learned) < m->target)
		m->target = (uint64_t)(exec.conf->target * (double)learned);
	m->pp = (struct plan_params){
		.target = m->target, .d2h_bps = m->d2h, .h2d_bps = m->h2d,
		.copy_latency_s = PLAN_COPY_LATENCY_S, .min_bytes = exec.conf->min_offload_bytes,
		/* under the bound, stalls rather than faults */
		.allow_stall = 1, .no_waits = !exec.conf->plan_waits,
		.time_limit_s = exec.conf->plan_seconds, .phases = exec.conf->plan_phases,
		.host_offload_s = rc->costs.offload_s, .host_restore_s = rc->costs.restore_s,
		.host_drop_s = rc->costs.drop_s, .host_remake_s = rc->costs.remake_s,
	};
	uint64_t t0 = ebb_now_ns();
	m->have = !r->oom && m->d2h > 0 && m->h2d > 0 && plan_make(&r->p, &m->pp, &m->pl) == 0;
	if (m->have) {
		/* under the bound the plan went through it; else it is lower */
		m->bound = m->pl.bound ? m->pl.bound : plan_bound(&r->p, &m->pp);
		m->floor_nostall = plan_floor(&r->p, &m->pp, 0, NULL);
		plan_explain(&r->p, &m->pp, &m->pl, m->pl.peak_op, &m->ex);
		m->x = build(&r->p, &m->pl, rc->addr, rc->naddr);
	}
	m->made_ns = ebb_now_ns() - t0;	/* the job ran without a plan meanwhile */
	if (m->x == NULL)
		m->why = r->oom ? "out of memory" : m->d2h <= 0 || m->h2d <= 0 ?
		    "no copy bandwidth: set EBB_D2H_GBPS and EBB_H2D_GBPS" : "out of memory";
	return m;
}

/* What replay could bridge in m's iteration, into the statistics. */
static void
replay_counts(const struct exec_made *m)
{
	const struct replay_set *rs = &m->replay;
	uint64_t buffers, bytes;

	if (!m->replay_have)
		return;
	replay_totals(rs, &buffers, &bytes);
	exec.xs.replay_considered = rs->considered;
	exec.xs.replay_gaps = rs->n;
	exec.xs.replay_extended = rs->extended;
	exec.xs.replay_buffers = buffers;
	exec.xs.replay_bytes = bytes;
	exec.xs.replay_refused = rs->refused;
}

/* Have the candidates of m replayed once in the plan's first iteration
 * (verify.h), with its recording's launch records, which go with them. */
static void
prepare_verify(struct exec_made *m)
{
	const struct prof *p = &m->rec->r.p;
	struct xbuf *xb = calloc(p->nbufs ? p->nbufs : 1, sizeof *xb);

	if (xb == NULL)
		return;
	for (uint32_t i = 0; i < p->nbufs; i++)
		if (name_xbuf(p, i, m->rec->addr, m->rec->naddr, &xb[i]) < 0)
			xb[i] = (struct xbuf){ .persistent = 1 };	/* found nowhere */
	if (verify_prepare(p, &m->replay, &m->rec->launches, xb) < 0)
		ebb_log(EBB_LOG_WARN, "no memory to verify the recompute candidates; nothing is "
		    "recomputed");
	else
		m->kept = 1;	/* for the plan with recomputes, once they are verified */
	free(xb);
}

int
exec_plan_install(struct exec_made *m)
{
	if (m->x == NULL) {
		ebb_log(EBB_LOG_WARN, "ebb could not plan the iteration (%s); buffers move only when "
		    "over EBB_LIMIT", m->why);
		return -1;
	}
	exec_retire(exec.ready);
	exec.ready = m->x;
	m->x = NULL;
	exec.xs.plans++;
	replay_counts(m);
	if (m->replay_have && m->replay.n > 0)
		prepare_verify(m);
	exec.xs.planned_peak = m->pl.peak;
	exec.xs.predicted_step_ns = (uint64_t)(m->pl.step_s * 1e9);
	exec.xs.unmoved_step_ns = (uint64_t)((m->pl.step_before_s + m->pl.host_idle_before_s) *
	    1e9);
	exec.xs.target_bytes = m->target;
	exec.xs.bound_bytes = m->bound;
	plan_notes(m);
	plan_logs(m);
	if (m->kept) {
		/* a plan kept before (its verification was replaced above) goes */
		struct exec_made *old = exec.kept;
		exec.kept = m;
		if (old != NULL) {
			old->kept = 0;
			exec_made_free(old);
		}
	}
	return 0;
}

void
exec_kept_drop(void)
{
	struct exec_made *m = exec.kept;

	exec.kept = NULL;
	verify_forget();
	if (m != NULL) {
		m->kept = 0;
		exec_made_free(m);
	}
}

void
exec_made_free(struct exec_made *m)
{
	if (m == NULL || m->kept)
		return;
	if (m->have)
		plan_fini(&m->pl);
	if (m->replay_have)
		replay_set_fini(&m->replay);
	exec_xplan_free(m->x);
	exec_recorded_free(m->rec);
	free(m);
}

/* ---- the plan with recomputes ---- */

/* What exec_replan_make made: the plan with recomputes, or none. */
struct exec_remade {
	struct exec_made *m;		/* the recorded iteration and its first plan */
	int have;			/* rc holds a plan (plan_rc_fini frees it) */
	struct plan_rc rc;		/* the planner's */
	struct xplan *x;		/* by position, with its recomputes; NULL: none */
	uint32_t verified;		/* candidates verified */
	uint64_t made_ns;
	/* where none is better: what recompute alone reaches at the target */
	uint32_t alone_picks;
	uint64_t alone_peak;
	struct rc_skipped alone_skipped;
};

/* (exec.h) */
int
exec_replan_pending(void)
{
	return exec.kept != NULL;
}

int
exec_replan_due(void)
{
	uint32_t n;

	return exec.kept != NULL && verify_results(&n) != NULL;
}

struct exec_made *
exec_replan_take(uint8_t **ok)
{
	struct exec_made *m = exec.kept;
	uint32_t n = 0;
	const uint8_t *res = verify_results(&n);

	*ok = NULL;
	if (m == NULL || res == NULL || n != m->replay.n)
		return NULL;
	*ok = malloc(n ? n : 1);
	if (*ok == NULL)
		return NULL;
	memcpy(*ok, res, n);
	exec.kept = NULL;
	verify_forget();
	m->kept = 0;
	m->run_costed = mover_move_costs_since(&exec.run_mark, RUN_COSTED_MOVES, &m->run_costs);
	return m;
}

/* Small numbers for the recording's streams, by operation (0: none), into
 * a new array, or NULL. */
static uint32_t *
stream_ids(const struct exec_recorded *rc)
{
	uint32_t n = rc->r.p.nops;
	uint32_t *id = calloc(n ? n : 1, sizeof *id);
	const struct ebb_stream *seen[64];
	uint32_t nseen = 0;

	if (id == NULL)
		return NULL;
	for (uint32_t i = 0; i < n; i++) {
		const struct ebb_stream *s = rc->st != NULL ? rc->st[i] : NULL;
		if (s == NULL)
			continue;
		uint32_t k = 0;
		while (k < nseen && seen[k] != s)
			k++;
		if (k == nseen && nseen < 64)
			seen[nseen++] = s;
		id[i] = k + 1;	/* past 64 streams, one name for the rest */
	}
	return id;
}

/* Order 64-bit keys. */
static int
by_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Order recomputed gaps by their drop. */
static int
by_drop(const void *a, const void *b)
{
	const struct remake_gap *x = a, *y = b;

	return x->drop_at < y->drop_at ? -1 : x->drop_at > y->drop_at;
}

/*
 * The executor's side of rc's recomputes, of m's recording: every buffer's
 * name, each gap's drop, point, chain and inputs, the reads of the inputs
 * while their gaps are dropped, each position's stream, and the launch
 * records, which it takes from the recording. Returns it, or NULL when out
 * of memory.
 */
static struct remake_plan *
remake_build(struct exec_made *m, const struct plan_rc *rc)
{
	const struct prof *p = &m->rec->r.p;
	const struct replay_set *rs = &m->replay;
	struct remake_plan *x = calloc(1, sizeof *x);
	uint32_t nchain = 0, nin = 0, nreads = 0, nsc = 0;
	uint32_t **in = calloc(rc->npick ? rc->npick : 1, sizeof *in);
	uint32_t *nins = calloc(rc->npick ? rc->npick : 1, sizeof *nins);
	struct prof_opindex ix = { 0 };

	if (x == NULL || in == NULL || nins == NULL || prof_opindex_build(p, &ix) < 0)
		goto fail;
	for (uint32_t k = 0; k < rc->npick; k++) {
		const struct replay_cand *c = &rs->c[rc->pick[k].cand];
		if (rc_inputs(p, &ix, rs, c, &in[k], &nins[k]) < 0)
			goto fail;
		nchain += c->nchain;
		nin += nins[k];
		uint64_t bytes;
		if (c->scratch > 0)
			nsc += replay_scratch(p, rs, c, NULL, NULL, 0, &bytes);
		for (uint32_t j = 0; j < nins[k]; j++)
			nreads += p->buf[in[k][j]].nuse;
	}
	x->nops = p->nops;
	x->nbufs = p->nbufs;
	x->ninputs = nin;
	x->bufs = calloc(p->nbufs ? p->nbufs : 1, sizeof *x->bufs);
	x->gap = calloc(rc->npick ? rc->npick : 1, sizeof *x->gap);
	x->chain = malloc((nchain ? nchain : 1) * sizeof *x->chain);
	x->inputs = malloc((nin ? nin : 1) * sizeof *x->inputs);
	x->scratch = malloc((nsc ? nsc : 1) * sizeof *x->scratch);
	x->scratch_off = malloc((nsc ? nsc : 1) * sizeof *x->scratch_off);
	x->reads = malloc((nreads ? nreads : 1) * sizeof *x->reads);
	x->pos_st = calloc(p->nops ? p->nops : 1, sizeof *x->pos_st);
	x->ls = calloc(1, sizeof *x->ls);
	if (x->bufs == NULL || x->gap == NULL || x->chain == NULL || x->inputs == NULL ||
	    x->scratch == NULL || x->scratch_off == NULL ||
	    x->reads == NULL || x->pos_st == NULL || x->ls == NULL)
		goto fail;
	for (uint32_t i = 0; i < p->nbufs; i++)
		if (name_xbuf(p, i, m->rec->addr, m->rec->naddr, &x->bufs[i]) < 0)
			x->bufs[i] = (struct xbuf){ .persistent = 1 };	/* found nowhere */
	uint32_t ci = 0, ii = 0, si = 0;
	for (uint32_t k = 0; k < rc->npick; k++) {
		const struct replay_cand *c = &rs->c[rc->pick[k].cand];
		const struct prof_buf *b = &p->buf[c->buf];
		struct remake_gap *g = &x->gap[x->ngap++];
		*g = (struct remake_gap){ .x = c->buf, .drop_at = b->use[c->gap], .r = rc->pick[k].r,
			.next_use = b->use[c->gap + 1], .chain_first = ci, .nchain = c->nchain,
			.in_first = ii, .nin = nins[k], .size = c->bytes };
		memcpy(x->chain + ci, replay_chain(rs, c), c->nchain * sizeof *x->chain);
		ci += c->nchain;
		g->sc_first = si;
		if (c->scratch > 0) {
			g->nsc = replay_scratch(p, rs, c, x->scratch + si, x->scratch_off + si, nsc - si,
			    &g->sc_bytes);
			si += g->nsc;
		}
		/* an input the job frees right before the point: the replay goes
		 * before the operation it is freed after, while it exists */
		g->r = rc_replay_at(p, &ix, rs, c, g->r);
		/* the inputs' reads while the buffer is away, as recorded */
		for (uint32_t j = 0; j < nins[k]; j++) {
			uint32_t bi = in[k][j];
			const struct prof_buf *ib = &p->buf[bi];
			x->inputs[ii++] = bi;
			for (uint32_t u = 0; u < ib->nuse; u++)
				if (ib->use[u] > g->drop_at && ib->use[u] <= g->r &&
				    prof_access_of(p, bi, ib->use[u]) == PROF_ACC_READ)
					x->reads[x->nreads++] = (uint64_t)ib->use[u] << 32 | bi;
		}
		x->bytes += c->bytes;
	}
	qsort(x->gap, x->ngap, sizeof *x->gap, by_drop);
	qsort(x->reads, x->nreads, sizeof *x->reads, by_u64);
	uint32_t u = 0;
	for (uint32_t i = 0; i < x->nreads; i++)
		if (u == 0 || x->reads[u - 1] != x->reads[i])
			x->reads[u++] = x->reads[i];
	x->nreads = u;
	if (m->rec->st != NULL)
		memcpy(x->pos_st, m->rec->st, p->nops * sizeof *x->pos_st);
	/* the launch records go with the plan */
	*x->ls = m->rec->launches;
	memset(&m->rec->launches, 0, sizeof m->rec->launches);
	for (uint32_t k = 0; k < rc->npick; k++)
		free(in[k]);
	free(in);
	free(nins);
	prof_opindex_free(&ix);
	return x;
fail:
	for (uint32_t k = 0; in != NULL && k < rc->npick; k++)
		free(in[k]);
	free(in);
	free(nins);
	prof_opindex_free(&ix);
	remake_plan_free(x);
	return NULL;
}

/*
 * The plan with recomputes under what the running plan's moves have cost
 * the host, where it made enough of them (m->run_costs): the recording's
 * costs leave out the memory a moving buffer takes at each allocation and
 * what is made and released for room. The plan of moves alone it is
 * compared with keeps the recording's costs: its search takes as long as
 * the plan's first (25 s for W1 under a tight limit), and a job of a few
 * dozen iterations would end before the plan with recomputes starts.
 */
static void
cost_by_run(struct exec_made *m)
{
	struct plan_params *q = &m->pp;

	if (!m->run_costed || !m->have)
		return;
	q->host_offload_s = m->run_costs.offload_s;
	q->host_restore_s = m->run_costs.restore_s;
	q->host_drop_s = m->run_costs.drop_s;
	q->host_remake_s = m->run_costs.remake_s;
	ebb_trace_note_u64("plan-recompute-host-offload-ns", (uint64_t)(q->host_offload_s * 1e9));
	ebb_trace_note_u64("plan-recompute-host-restore-ns", (uint64_t)(q->host_restore_s * 1e9));
	ebb_trace_note_u64("plan-recompute-host-drop-ns", (uint64_t)(q->host_drop_s * 1e9));
	ebb_trace_note_u64("plan-recompute-host-remake-ns", (uint64_t)(q->host_remake_s * 1e9));
	ebb_log(EBB_LOG_INFO, "plan: the plan with recomputes counts what the running plan's moves "
	    "cost the host, its driver's memory calls on every thread included: an offload %.0f "
	    "us, a restore %.0f us, a drop %.0f us, a remake %.0f us and its launches",
	    q->host_offload_s * 1e6, q->host_restore_s * 1e6, q->host_drop_s * 1e6,
	    q->host_remake_s * 1e6);
}

struct exec_remade *
exec_replan_make(struct exec_made *m, const uint8_t *ok)
{
	struct exec_remade *r = calloc(1, sizeof *r);
	uint32_t *sid = stream_ids(m->rec);

	if (r == NULL || sid == NULL) {
		free(r);
		free(sid);
		return NULL;
	}
	r->m = m;
	for (uint32_t i = 0; i < m->replay.n; i++)
		r->verified += ok[i] != 0;
	uint64_t t0 = ebb_now_ns();
	if (r->verified > 0)
		cost_by_run(m);
	int got = r->verified > 0 ? plan_make_recompute(&m->rec->r.p, &m->replay, ok, sid, &m->pp,
	    &m->pl, &r->rc) : 0;
	r->have = got == 1;
	if (!r->have && r->verified > 0) {
		/* why not: what the choice alone reaches at the target */
		struct rc_pick *pk = NULL;
		if (rc_choose(&m->rec->r.p, &m->replay, ok, sid, m->pp.target, &pk, &r->alone_picks,
		    &r->alone_skipped, &r->alone_peak) < 0)
			r->alone_picks = 0;
		free(pk);
	}
	if (r->have) {
		r->x = build(&r->rc.derived, &r->rc.pl, m->rec->addr, m->rec->naddr);
		if (r->x != NULL && (r->x->rc = remake_build(m, &r->rc)) == NULL) {
			exec_xplan_free(r->x);
			r->x = NULL;
		}
	}
	r->made_ns = ebb_now_ns() - t0;
	free(sid);
	return r;
}

/* Say what the plan with recomputes does, beside the plan it replaces. */
static void
replan_logs(const struct exec_remade *r)
{
	const struct plan *pl = &r->rc.pl, *before = &r->m->pl;
	const struct rc_skipped *sk = &r->rc.skipped;

	ebb_log(EBB_LOG_NOTE, "plan: recomputes %u gaps (%.2f GiB, %.3f s of replays an "
	    "iteration; %u of them first for a replay that reads them) of %u verified, and moves "
	    "the rest; peak %.2f GiB (target %.2f), %.3f s "
	    "an iteration predicted, against %.2f GiB and %.3f s by moves alone", r->rc.npick,
	    gib(r->rc.bytes_recomputed), r->rc.recompute_s, r->rc.hoisted, r->verified, gib(pl->peak),
	    gib(r->m->target), pl->step_s, gib(before->peak), before->step_s);
	ebb_log(EBB_LOG_INFO, "plan: of the verified gaps, %llu not recomputed for a use on "
	    "another stream, %llu for a conflict with the others (an input recomputed too would be "
	    "away too briefly), %llu for an absence "
	    "shorter than %.1f ms of the device's time; made in %.3f s",
	    (unsigned long long)sk->streams, (unsigned long long)sk->conflict,
	    (unsigned long long)sk->brief, RC_MIN_AWAY_S * 1e3, (double)r->made_ns / 1e9);
}

int
exec_replan_install(struct exec_remade *r)
{
	if (r->x == NULL) {
		const struct rc_skipped *sk = &r->alone_skipped;
		if (r->verified > 0 && !r->have)
			ebb_log(EBB_LOG_NOTE, "plan: recomputing some of the %u verified gaps is not "
			    "better than moving alone; the plan stays (recompute alone would take %u "
			    "of them to reach %.2f GiB against a target of %.2f; passed over: %llu "
			    "for a use on another stream, %llu for conflicts, %llu away too briefly)",
			    r->verified, r->alone_picks, gib(r->alone_peak), gib(r->m->target),
			    (unsigned long long)sk->streams, (unsigned long long)sk->conflict,
			    (unsigned long long)sk->brief);
		else if (r->have)
			ebb_log(EBB_LOG_WARN, "no memory for the plan with recomputes; the plan "
			    "stays");
		ebb_trace_note_u64("plan-recompute-gaps", 0);
		return -1;
	}
	exec_retire(exec.ready);
	exec.ready = r->x;
	r->x = NULL;
	exec.xs.plans++;
	exec.xs.planned_peak = r->rc.pl.peak;
	exec.xs.predicted_step_ns = (uint64_t)(r->rc.pl.step_s * 1e9);
	exec.xs.recompute_gaps = r->rc.npick;
	exec.xs.recompute_bytes = r->rc.bytes_recomputed;
	exec.xs.recompute_ns = (uint64_t)(r->rc.recompute_s * 1e9);
	ebb_trace_note_u64("plan-recompute-gaps", r->rc.npick);
	ebb_trace_note_u64("plan-recompute-bytes", r->rc.bytes_recomputed);
	ebb_trace_note_u64("plan-recompute-hoisted", r->rc.hoisted);
	ebb_trace_note_u64("plan-recompute-ns", (uint64_t)(r->rc.recompute_s * 1e9));
	ebb_trace_note_u64("plan-recompute-moves", r->rc.pl.n);
	ebb_trace_note_u64("plan-recompute-peak-bytes", r->rc.pl.peak);
	ebb_trace_note_u64("plan-recompute-step-ns", (uint64_t)(r->rc.pl.step_s * 1e9));
	ebb_trace_note_u64("plan-recompute-made-ns", r->made_ns);
	replan_logs(r);
	return 0;
}

void
exec_remade_free(struct exec_remade *r)
{
	if (r == NULL)
		return;
	if (r->have)
		plan_rc_fini(&r->rc);
	exec_xplan_free(r->x);
	exec_made_free(r->m);
	free(r);
}
