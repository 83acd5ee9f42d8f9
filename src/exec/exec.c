/*
 * exec.c: recording an iteration and running its plan, on the lifecycle
 * owner's orders (see exec.h); exec_plan.c makes the plan.
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
#include "remake.h"
#include "verify.h"
#include "planrun.h"
#include "record.h"
#include "trace.h"
#include "tracer.h"


/* The executor's state (exec_int.h), guarded by ebb_state_lock but for the
 * GPU times. */
struct exec exec = { .times_lock = PTHREAD_MUTEX_INITIALIZER };

static int
movable(const struct ebb_buf *b)
{
	return b->mv.managed == EBB_MANAGED_BIG && !b->pinned;
}

/* The buffer xb names in the running iteration (remake_resolve_fn). */
static struct ebb_buf *resolve_name(const struct xbuf *xb);

/* Whether the running plan keeps the allocation about to be made, the next
 * ordinal of the iteration, resident (mover_keep_fn): it is of the size
 * learned and the plan neither moves nor drops that ordinal. */
static int
keeps(size_t rsize)
{
	const struct xplan *x = exec.running;
	uint32_t o = exec.run_ord;

	return x != NULL && x->ord_kept != NULL && exec.run_s0 != 0 && o < x->nord &&
	    x->ord_size[o] == rsize && x->ord_kept[o];
}

void
exec_init(const struct ebb_conf *c, struct buftab *t)
{
	exec.conf = c;
	exec.tab = t;
	if (c->recompute && c->mode == EBB_MODE_OFFLOAD)
		remake_init(resolve_name);
	if (c->arena && c->mode == EBB_MODE_OFFLOAD && c->plan)
		mover_set_keeper(keeps);
}

/* ---- the plan's life ---- */

/* Free a plan's structure (exec_int.h). */
void
exec_xplan_free(struct xplan *x)
{
	if (x == NULL)
		return;
	free(x->buf);
	free(x->first);
	free(x->gate_mark);
	free(x->act);
	free(x->ord_size);
	free(x->ord_kept);
	free(x->slot);
	free(x->slot_id);
	free(x->small_size);
	free(x->small_slot);
	free(x->small_slot_id);
	remake_plan_free(x->rc);
	free(x);
}

/* A plan that stops: exec_after_op may still be walking it while it waits
 * with the mutex released, so it is freed only at exit. */
void
exec_retire(struct xplan *x)
{
	if (x == NULL)
		return;
	x->retired_next = exec.retired;
	exec.retired = x;
}

/* Free what r holds (not r). */
static void
recorded_fini(struct exec_recorded *r)
{
	rec_fini(&r->r);
	lrec_set_fini(&r->launches);
	free(r->addr);
	free(r->tok);
	free(r->host);
	free(r->self);
	free(r->call);
	free(r->sync);
	free(r->st);
	free(r->gpu);
	free(r->start);
}

/* Forget the pace iteration. */
static void
pace_free(void)
{
	free(exec.pace.host);
	free(exec.pace.self);
	free(exec.pace.call);
	free(exec.pace.sync);
	memset(&exec.pace, 0, sizeof exec.pace);
}

static void
recording_free(void)
{
	pace_free();
	exec.recording = 0;
	exec.ended = 0;
	probe_drop();
	probe_shape_drop();
	recorded_fini(&exec.cur);
	memset(&exec.cur, 0, sizeof exec.cur);
	exec.cur_addr_cap = 0;
	pthread_mutex_lock(&exec.times_lock);
	free(exec.times);
	exec.times = NULL;
	exec.times_n = 0;
	pthread_mutex_unlock(&exec.times_lock);
}

/* ---- recording ---- */

static int
add_live(struct ebb_buf *b, void *ctx)
{
	(void)ctx;
	if (b->mv.managed != EBB_MANAGED_BIG && b->mv.managed != EBB_MANAGED_SMALL)
		return 0;
	if (exec.cur.naddr == exec.cur_addr_cap) {
		uint32_t cap = exec.cur_addr_cap ? exec.cur_addr_cap * 2 : 1024;
		uint64_t *v = realloc(exec.cur.addr, cap * sizeof *v);
		if (v == NULL) {
			exec.cur.r.oom = 1;
			return 1;
		}
		exec.cur.addr = v;
		exec.cur_addr_cap = cap;
	}
	/* rec_live gives the buffers alive at the start the first indices */
	exec.cur.addr[exec.cur.naddr++] = b->addr;
	if (b->mv.managed == EBB_MANAGED_SMALL)
		rec_live_small(&exec.cur.r, b->id, b->mv.isize);
	else
		rec_live(&exec.cur.r, b->id, b->mv.isize, movable(b));
	return 0;
}

/* Say, once a process, that launches of the recorded iteration are not
 * recorded from position pos of its n operations on
 * (EBB_LAUNCH_RECORD_BYTES). */
static void
say_unrecorded(uint32_t pos, uint32_t n)
{
	static int said;

	if (exec.conf->launch_record_bytes == 0)
		return;		/* none wanted */
	ebb_log_once(&said, EBB_LOG_NOTE, "launch records: EBB_LAUNCH_RECORD_BYTES=%llu is "
	    "reached at position %u of the recorded iteration's %u operations; its later launches "
	    "are not recorded, and cannot be replayed", (unsigned long long)exec.conf->launch_record_bytes,
	    pos, n);
}

int
exec_record_begin(uint64_t s0, uint64_t period)
{
	if (period == 0 || period > (1u << 28) || rec_begin(&exec.cur.r, s0, (uint32_t)period) < 0) {
		ebb_log(EBB_LOG_WARN, "cannot record an iteration of %llu operations; ebb does not plan",
		    (unsigned long long)period);
		return -1;
	}
	/* a lowering is of the iteration it was measured in: another one (the
	 * whole step after a micro-batch taken for it) is planned without */
	if (exec.lowered > 0 && period != exec.lowered_period)
		ebb_log(EBB_LOG_NOTE, "plan: the iteration is another (%llu operations): planned "
		    "%llu bytes higher, without the lowerings of the last",
		    (unsigned long long)period, (unsigned long long)exec_plan_unlower());
	exec.cur.tok = calloc(period, sizeof *exec.cur.tok);
	exec.cur.host = calloc(period + 1, sizeof *exec.cur.host);
	exec.cur.self = calloc(period + 1, sizeof *exec.cur.self);
	exec.cur.call = calloc(period, sizeof *exec.cur.call);
	exec.cur.sync = calloc(period, 1);
	exec.cur.st = calloc(period, sizeof *exec.cur.st);
	exec.cur.start = calloc(period, sizeof *exec.cur.start);
	double *t = calloc(period, sizeof *t);
	if (exec.cur.tok == NULL || exec.cur.host == NULL || exec.cur.self == NULL ||
	    exec.cur.call == NULL || exec.cur.sync == NULL ||
	    exec.cur.st == NULL || exec.cur.start == NULL || t == NULL) {
		free(t);
		recording_free();
		ebb_log(EBB_LOG_WARN, "no memory to record an iteration of %llu operations; ebb does "
		    "not plan", (unsigned long long)period);
		return -1;
	}
	int lr = lrec_set_init(&exec.cur.launches, (uint32_t)period, exec.conf->launch_record_bytes);
	if (lr == -1)
		say_unrecorded(0, (uint32_t)period);
	else if (lr < 0)
		ebb_log(EBB_LOG_WARN, "no memory for the launch records of an iteration of %llu "
		    "operations; its launches are not recorded", (unsigned long long)period);
	buftab_walk(exec.tab, add_live, NULL);
	pthread_mutex_lock(&exec.times_lock);
	exec.times = t;
	exec.times_s0 = s0;
	exec.times_n = period;
	pthread_mutex_unlock(&exec.times_lock);
	exec.recording = 1;
	if (exec.conf->recompute && probe_shape_begin((uint32_t)period) < 0)
		ebb_log(EBB_LOG_WARN, "no memory to learn the write sets of an iteration of %llu "
		    "operations (EBB_RECOMPUTE); nothing is recomputed", (unsigned long long)period);
	ebb_trace_note_u64("plan-recording", s0);
	ebb_log(exec.xs.recordings++ ? EBB_LOG_INFO : EBB_LOG_NOTE, "recording the iteration "
	    "from operation %llu (%llu operations); the plan is made once the device has done it",
	    (unsigned long long)s0, (unsigned long long)period);
	return 0;
}

void
exec_record_end(uint64_t self_ns)
{
	if (!exec.recording)
		return;
	exec.cur.host[exec.cur.r.p.nops] = ebb_now_ns();
	exec.cur.self[exec.cur.r.p.nops] = self_ns;
	exec.recording = 0;
	exec.ended = 1;
	const struct lrec_stats *ls = &exec.cur.launches.st;
	exec.xs.launch_records = ls->records;
	exec.xs.launch_records_unreplayable = ls->unreplayable;
	exec.xs.launch_records_unrecorded = ls->unrecorded;
	exec.xs.launch_record_param_bytes = ls->param_bytes;
	exec.xs.launch_record_bytes = ls->bytes;
}

void
exec_record_drop(void)
{
	recording_free();
}

int
exec_pace_begin(uint64_t s0, uint64_t period)
{
	uint32_t n = exec.cur.r.p.nops;

	pace_free();
	if (!exec.ended || period != n || n == 0)
		return -1;
	exec.pace.host = calloc((size_t)n + 1, sizeof *exec.pace.host);
	exec.pace.self = calloc((size_t)n + 1, sizeof *exec.pace.self);
	exec.pace.call = calloc(n, sizeof *exec.pace.call);
	exec.pace.sync = calloc(n, 1);
	if (exec.pace.host == NULL || exec.pace.self == NULL || exec.pace.call == NULL ||
	    exec.pace.sync == NULL) {
		pace_free();
		return -1;
	}
	exec.pace.s0 = s0;
	exec.pace.n = n;
	exec.pace.on = 1;
	exec.pace.same = 1;
	return 0;
}

void
exec_pace_end(uint64_t self_ns)
{
	if (!exec.pace.on)
		return;
	exec.pace.host[exec.pace.n] = ebb_now_ns();
	exec.pace.self[exec.pace.n] = self_ns;
	if (!exec.pace.same || !exec.ended) {
		ebb_trace_note_u64("plan-pace-unlike", exec.pace.s0);
		pace_free();
		return;
	}
	/* its host times are the recording's from now on */
	free(exec.cur.host);
	free(exec.cur.self);
	free(exec.cur.call);
	free(exec.cur.sync);
	exec.cur.host = exec.pace.host;
	exec.cur.self = exec.pace.self;
	exec.cur.call = exec.pace.call;
	exec.cur.sync = exec.pace.sync;
	exec.cur.pace_s0 = exec.pace.s0;
	exec.pace.host = exec.pace.self = exec.pace.call = NULL;
	exec.pace.sync = NULL;
	pace_free();
}

/* Position of operation seq in the pace iteration, or -1 when it is not in it. */
static int64_t
paced(uint64_t seq)
{
	return exec.pace.on && seq >= exec.pace.s0 && seq - exec.pace.s0 < exec.pace.n ?
	    (int64_t)(seq - exec.pace.s0) : -1;
}

/* Small buffer b, allocated before operation next_seq: recorded, or named
 * by its ordinal among the small ones in the running iteration. One whose
 * size is not the recorded one's gets no name (what names it is then not
 * found; the iteration may go on). */
static void
alloc_small(struct ebb_buf *b, uint64_t next_seq)
{
	b->plan_ord = 0;
	if (exec.recording) {
		rec_alloc_small(&exec.cur.r, b->id, b->mv.isize, next_seq);
		return;
	}
	struct xplan *x = exec.running;
	if (x == NULL)
		return;
	uint32_t o = exec.run_small++;
	if (o >= x->nsmall || x->small_size[o] != b->mv.isize)
		return;
	x->small_slot[o] = b;
	x->small_slot_id[o] = b->id;
	b->plan_ord = o + 1;
}

int
exec_alloc(struct ebb_buf *b, uint64_t next_seq, char *why, size_t len)
{
	if (b->mv.managed == EBB_MANAGED_SMALL) {
		alloc_small(b, next_seq);
		return 0;
	}
	if (b->mv.managed != EBB_MANAGED_BIG)
		return 0;
	b->plan_ord = 0;
	if (exec.recording) {
		rec_alloc(&exec.cur.r, b->id, b->mv.isize, movable(b), next_seq);
		return 0;
	}
	if (exec.running == NULL)
		return 0;
	struct xplan *x = exec.running;
	uint32_t o = exec.run_ord++;
	if (o >= x->nord || x->ord_size[o] != b->mv.isize) {
		if (o >= x->nord)
			snprintf(why, len, "allocation %u of the iteration; %u were learned", o,
			    x->nord);
		else
			snprintf(why, len, "allocation %u of the iteration has %llu bytes, not %llu",
			    o, (unsigned long long)b->mv.isize, (unsigned long long)x->ord_size[o]);
		return -1;
	}
	x->slot[o] = b;
	x->slot_id[o] = b->id;
	b->plan_ord = o + 1;
	return 0;
}

void
exec_free(struct ebb_buf *b, uint64_t last_seq)
{
	int small = b->mv.managed == EBB_MANAGED_SMALL;

	if (b->mv.managed != EBB_MANAGED_BIG && !small)
		return;
	/* a free after the iteration's last operation, before the next one, is
	 * the iteration's (rec_free takes those within it) */
	if (exec.recording || exec.ended)
		rec_free(&exec.cur.r, b->id, last_seq);
	if (b->rc_gap != 0 || b->rc_inputs != 0)
		remake_free(b, last_seq + 1);
	struct xplan *x = exec.running;
	uint32_t n = x == NULL ? 0 : small ? x->nsmall : x->nord;
	struct ebb_buf **slot = x == NULL ? NULL : small ? x->small_slot : x->slot;
	if (b->plan_ord != 0 && b->plan_ord <= n && slot[b->plan_ord - 1] == b)
		slot[b->plan_ord - 1] = NULL;
	b->plan_ord = 0;
}

/* Whether operation seq is in the iteration being recorded. */
static int
recorded(uint64_t seq)
{
	return exec.recording && seq >= exec.cur.r.s0 && seq - exec.cur.r.s0 < exec.cur.r.p.nops;
}

void
exec_op_called(uint64_t seq, uint64_t call_ns)
{
	int64_t p = paced(seq);

	if (recorded(seq))
		exec.cur.call[seq - exec.cur.r.s0] = call_ns;
	else if (p >= 0)
		exec.pace.call[p] = call_ns;
}

/* Operation i of host (issued at host[i] so far), a synchronisation called
 * at called: issued then, its wait its call's time (exec_sync_called). */
static void
sync_called(uint64_t *host, uint64_t *call, uint64_t i, uint64_t called)
{
	uint64_t now = host[i];

	host[i] = called;
	call[i] = now > called ? now - called : 0;
}

void
exec_sync_called(uint64_t seq, uint64_t called)
{
	int64_t p = paced(seq);

	if (recorded(seq))
		sync_called(exec.cur.host, exec.cur.call, seq - exec.cur.r.s0, called);
	else if (p >= 0)
		sync_called(exec.pace.host, exec.pace.call, (uint64_t)p, called);
}

/* The marker exec_stage gave for the operation exec_op is given next. */
static struct {
	uint64_t seq;		/* 0: none */
	int send;
} stage;

void
exec_stage(uint64_t seq, int send)
{
	stage.seq = seq;
	stage.send = send;
}

void
exec_op(uint64_t seq, uint32_t token, struct ebb_buf *const *bufs, size_t n, unsigned xfer,
    int sync, struct ebb_stream *st, uint64_t self_ns)
{
	int marker = stage.seq == seq && seq != 0, send = marker && stage.send;

	stage.seq = 0;
	int64_t p = paced(seq);

	if (p >= 0) {
		/* the pace iteration: the host's side only, of the same operations */
		exec.pace.same &= exec.cur.tok[p] == token && exec.cur.sync[p] == (sync != 0);
		exec.pace.host[p] = ebb_now_ns();
		exec.pace.self[p] = self_ns;
		exec.pace.sync[p] = sync != 0;
		return;
	}
	if (!recorded(seq))
		return;
	uint64_t i = seq - exec.cur.r.s0;
	exec.cur.tok[i] = token;
	if (exec.cur.st != NULL)
		exec.cur.st[i] = st;
	exec.cur.host[i] = ebb_now_ns();
	exec.cur.self[i] = self_ns;
	exec.cur.sync[i] = sync != 0;
	exec.cur.markers += marker;
	phase_cut_record(exec.cur.start, &exec.cur.nstart, exec.cur.r.p.nops, (uint32_t)i,
	    phase_cut_next(&exec.cur.cut, marker, send));
	rec_xfer(&exec.cur.r, seq, xfer);
	if (exec.conf->recompute)
		probe_shape_op((uint32_t)i, bufs, n);
	for (size_t k = 0; k < n; k++)
		if (bufs[k]->mv.managed == EBB_MANAGED_BIG || bufs[k]->mv.managed == EBB_MANAGED_SMALL)
			rec_use(&exec.cur.r, seq, bufs[k]->id);
}

/* At EBB_VERBOSE=3: the launch record of position pos, one line. */
static void
say_launch(uint32_t pos, const struct lrec *r)
{
	static const char *const states[] = {
		[LREC_REPLAYABLE] = "replayable", [LREC_UNREPLAYABLE] = "not replayable",
		[LREC_UNRECORDED] = "not recorded",
	};

	if (r == NULL)
		return;
	ebb_log(EBB_LOG_DEBUG, "launch record %u: function %#llx grid %ux%ux%u block %ux%ux%u "
	    "shared %u stream %#llx%s, %u attributes, %u parameter bytes%s (%s)", pos,
	    (unsigned long long)r->func, r->grid[0], r->grid[1], r->grid[2], r->block[0],
	    r->block[1], r->block[2], r->shmem, (unsigned long long)(uintptr_t)r->stream,
	    r->per_thread ? " (per-thread)" : "", r->nattrs, r->nbytes,
	    r->packed ? " packed" : "", states[r->state]);
}

/* lrec_relocate's name of the buffer holding address word: its index in the
 * recording's profile, with the word's offset in it. */
static uint32_t
name_buffer(uint64_t word, uint64_t *delta, void *ctx)
{
	(void)ctx;
	struct ebb_buf *b = buftab_find(exec.tab, word);
	if (b == NULL)
		return LREC_NO_BUF;
	uint32_t k = b->mv.managed == EBB_MANAGED_BIG || b->mv.managed == EBB_MANAGED_SMALL ?
	    idmap_get(&exec.cur.r.ids, b->id) : IDMAP_NONE;
	if (k == IDMAP_NONE)
		return LREC_UNNAMED;
	*delta = word - b->addr;
	return k;
}

void
exec_launch(uint64_t seq, const struct ebb_launch *l, const struct ebb_kinfo *k,
    CUstream stream, int per_thread, struct ebb_stream *tracker, int captured)
{
	if (!exec.recording || seq < exec.cur.r.s0 || seq - exec.cur.r.s0 >= exec.cur.r.p.nops)
		return;
	uint32_t i = (uint32_t)(seq - exec.cur.r.s0);
	struct lrec_set *ls = &exec.cur.launches;
	if (exec.conf->recompute)
		probe_shape_launch(i);
	int st = lrec_add(ls, i, l, k, stream, per_thread, tracker, captured);
	if (st == LREC_UNRECORDED && ls->at != NULL)
		say_unrecorded(i, ls->n);
	/* for a replay in another iteration: which of its words are buffers */
	if (st == LREC_REPLAYABLE && exec.conf->recompute)
		lrec_relocate(ls, i, name_buffer, NULL);
	if (ebb_log_level() >= EBB_LOG_DEBUG)
		say_launch(i, lrec_at(ls, i));
}

void
exec_gpu_time(uint64_t seq, uint64_t start, uint64_t end)
{
	pthread_mutex_lock(&exec.times_lock);
	if (exec.times != NULL && seq >= exec.times_s0 && seq - exec.times_s0 < exec.times_n && end > start)
		exec.times[seq - exec.times_s0] += (double)(end - start) / 1e9;
	pthread_mutex_unlock(&exec.times_lock);
}

/* ---- running ---- */

/* The ordinals of the n buffers b of x, each allocated in the iteration,
 * are not kept. */
static void
unkeep(struct xplan *x, const struct xbuf *b, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		if (!b[i].persistent && !b[i].small && b[i].ord < x->nord)
			x->ord_kept[b[i].ord] = 0;
}

/* Mark the ordinals x keeps resident: those no move of x names, nor any
 * buffer of its recomputes (dropped, their inputs and scratch). Without
 * memory for the marks, none is kept. */
static void
mark_kept(struct xplan *x)
{
	if (x->ord_kept != NULL || x->nord == 0 || (x->ord_kept = malloc(x->nord)) == NULL)
		return;
	memset(x->ord_kept, 1, x->nord);
	unkeep(x, x->buf, x->nbuf);
	if (x->rc != NULL)
		unkeep(x, x->rc->bufs, x->rc->nbufs);
}

void
exec_run_start(uint64_t next_seq)
{
	if (exec.ready == NULL)
		return;
	/* a plan that replaces the running one (the recompute plan) */
	remake_stop(next_seq);
	exec_retire(exec.running);
	exec.running = exec.ready;
	exec.ready = NULL;
	mark_kept(exec.running);
	if (exec.running->rc != NULL && remake_start(exec.running->rc) == 0)
		ebb_trace_note_u64("plan-recompute-started", next_seq);
	mover_set_planned(1);
	mover_cost_mark(&exec.run_mark);
	ebb_trace_note_u64("plan-started", next_seq);
	exec.run_done = 0;
	exec.run_s0 = 0;
	exec.run_gen++;
}

int
exec_run_boundary(uint64_t next_seq, uint64_t period, char *why, size_t len)
{
	if (exec.running == NULL)
		return 0;
	if (period != exec.running->period) {
		snprintf(why, len, "the iteration's length changed");
		return -1;
	}
	if (exec.run_s0 != 0)
		exec.run_done++;
	/* before the slots of the iteration that ends are forgotten */
	remake_boundary(next_seq);
	exec.run_s0 = next_seq;
	exec.run_ord = exec.run_small = 0;
	memset(exec.running->slot, 0, exec.running->nord * sizeof *exec.running->slot);
	memset(exec.running->small_slot, 0,
	    exec.running->nsmall * sizeof *exec.running->small_slot);
	exec.xs.iterations_run++;
	verify_boundary();
	return 0;
}

uint64_t
exec_plan_lower(uint64_t bytes)
{
	exec.lowered += bytes;
	exec.lowered_period = exec.running != NULL ? exec.running->period : 0;
	ebb_trace_note_u64("plan-target-lowered-bytes", exec.lowered);
	return exec.lowered;
}

uint64_t
exec_plan_unlower(void)
{
	uint64_t was = exec.lowered;

	exec.lowered = 0;
	if (was > 0)
		ebb_trace_note_u64("plan-target-raised-bytes", was);
	return was;
}

/* Stop the running plan (parked where park, else retired, as a parked one
 * before it is) and drop an installed one. */
static void
run_stop(uint64_t seq, int park)
{
	struct xplan *x = exec.running;

	remake_stop(seq);
	exec_retire(exec.parked);
	exec.parked = park ? x : NULL;
	if (x == NULL && exec.ready == NULL)
		return;
	if (!park)
		exec_retire(x);
	exec_retire(exec.ready);
	exec.running = exec.ready = NULL;
	exec.run_gen++;
	mover_set_planned(0);
	exec_kept_drop();
}

void
exec_run_stop(uint64_t seq)
{
	run_stop(seq, 0);
}

void
exec_run_park(uint64_t seq)
{
	run_stop(seq, 1);
}

int
exec_run_unpark(void)
{
	if (exec.parked == NULL)
		return -1;
	exec_retire(exec.ready);
	exec.ready = exec.parked;
	exec.parked = NULL;
	return 0;
}

uint64_t
exec_run_iterations(void)
{
	return exec.running != NULL ? exec.run_done : 0;
}

static struct ebb_buf *
resolve(const struct xplan *x, const struct xbuf *xb)
{
	if (xb->persistent) {
		struct ebb_buf *b = buftab_find(exec.tab, xb->addr);
		return b != NULL && b->addr == xb->addr && b->id == xb->id ? b : NULL;
	}
	if (xb->small) {
		if (xb->ord >= x->nsmall)
			return NULL;
		struct ebb_buf *b = x->small_slot[xb->ord];
		return b != NULL && b->id == x->small_slot_id[xb->ord] ? b : NULL;
	}
	struct ebb_buf *b = x->slot[xb->ord];
	return b != NULL && b->id == x->slot_id[xb->ord] ? b : NULL;
}

static struct ebb_buf *
resolve_name(const struct xbuf *xb)
{
	const struct xplan *x = exec.running;

	if (x == NULL || (!xb->persistent && !xb->small && xb->ord >= x->nord))
		return NULL;
	return resolve(x, xb);
}

/* The buffer xb names in the running iteration (verify_resolve_fn). */
static struct ebb_buf *
resolve_running(const struct xbuf *xb, void *ctx)
{
	(void)ctx;
	return resolve_name(xb);
}

CUresult
exec_check_op(uint64_t seq, struct ebb_stream *st, const struct ebb_launch *l,
    struct ebb_buf *const *bufs, size_t n)
{
	const struct xplan *x = exec.running;

	if (x == NULL || x->rc == NULL || exec.run_s0 == 0 || seq < exec.run_s0 ||
	    seq - exec.run_s0 >= x->period)
		return CUDA_SUCCESS;
	return remake_before((uint32_t)(seq - exec.run_s0), seq, st, l, bufs, n);
}

void
exec_capture(uint64_t seq)
{
	remake_capture(seq);
}

void
exec_before_op(uint64_t seq, struct ebb_stream *st, const struct ebb_launch *l)
{
	const struct xplan *x = exec.running;

	if (x == NULL || exec.run_s0 == 0 || seq < exec.run_s0 || seq - exec.run_s0 >= x->period)
		return;
	verify_before((uint32_t)(seq - exec.run_s0), seq, st, l, resolve_running, NULL);
}

int
exec_after_op(uint64_t seq, struct ebb_stream *st)
{
	int moved = 0;
	struct xplan *x = exec.running;
	uint64_t gen = exec.run_gen;

	if (x == NULL)
		return 0;
	if (seq < exec.run_s0 || seq - exec.run_s0 >= x->period)
		return 0;
	uint64_t pos = seq - exec.run_s0;
	if (st != NULL && x->gate_mark[pos])
		streams_mark_now(st);
	for (uint32_t k = x->first[pos]; k < x->first[pos + 1]; k++) {
		/* a prefetch may have waited with the mutex released, and the
		 * plan stopped meanwhile (and started again, after a detour) */
		if (exec.running != x || exec.run_gen != gen)
			return moved;
		const struct xact *a = &x->act[k];
		struct ebb_buf *b = resolve(x, &x->buf[a->buf]);
		if (b == NULL) {
			exec.xs.actions_missed++;
			continue;
		}
		moved = 1;
		if (a->prefetch)
			mover_prefetch(b, st, seq, a->gate < pos ? exec.run_s0 + a->gate : 0);
		else
			mover_plan_offload(b, a->after_op ? st : NULL, seq);
	}
	if (x->rc != NULL && exec.running == x && exec.run_gen == gen) {
		remake_after((uint32_t)pos, seq);
		moved = 1;
	}
	return moved;
}


/* Free a recording taken out (NULL: none). */
void
exec_recorded_free(struct exec_recorded *r)
{
	if (r == NULL)
		return;
	recorded_fini(r);
	free(r);
}

struct exec_recorded *
exec_record_take(void)
{
	struct exec_recorded *r = calloc(1, sizeof *r);

	if (r == NULL) {
		recording_free();
		return NULL;
	}
	*r = exec.cur;
	memset(&exec.cur, 0, sizeof exec.cur);
	exec.cur_addr_cap = 0;
	exec.recording = 0;
	exec.ended = 0;
	/* the probe's write sets, where it was read, go with the recording */
	struct probe_stats ps;
	exec.xs.replayable_launches = probe_apply(&r->r, &r->launches, &ps,
	    &exec.xs.wild_launches);
	exec.xs.write_set_pointers = ps.pointers;
	exec.xs.write_set_chance = ps.chance;
	exec.xs.write_set_loose = ps.loose;
	exec.xs.write_set_launches = ps.launches;
	exec.xs.write_set_unmeasured = ps.unmeasured;
	exec.xs.write_set_refs = ps.refs;
	exec.xs.write_set_written = ps.written;
	exec.xs.probe_hashes = ps.hashes;
	exec.xs.probe_bytes = ps.bytes;
	probe_drop();
	probe_shape_drop();
	r->fixed = mover_fixed_held();
	r->limit = mover_limit();
	mover_move_costs(&r->costs);
	/* the GPU times are in (CUPTI was flushed): take them with the rest,
	 * before a departure lets another recording start */
	pthread_mutex_lock(&exec.times_lock);
	r->gpu = exec.times;
	r->ngpu = exec.times_n;
	exec.times = NULL;
	exec.times_n = 0;
	pthread_mutex_unlock(&exec.times_lock);
	return r;
}


void
exec_stats(struct exec_stats *out)
{
	struct verify_stats vs;

	*out = exec.xs;
	verify_stats(&vs);
	out->replay_tried = vs.tried;
	out->replay_verified = vs.verified;
	out->replay_failed = vs.failed;
	out->replay_skipped = vs.skipped;
	out->replay_skipped_unfit = vs.skipped_unfit;
	out->replay_skipped_passed = vs.skipped_passed;
	out->replay_skipped_stream = vs.skipped_stream;
	out->replay_skipped_buffers = vs.skipped_buffers;
	out->replay_skipped_resident = vs.skipped_resident;
	out->replay_skipped_launch = vs.skipped_launch;
	out->replay_skipped_memory = vs.skipped_memory;
	struct remake_stats rs;
	remake_stats(&rs);
	out->recompute_drops = rs.drops;
	out->recompute_remakes = rs.remakes;
	out->recompute_early = rs.early;
	out->recompute_kept = rs.kept;
	out->recompute_kept_busy = rs.kept_busy;
	out->recompute_kept_args = rs.kept_args;
	out->recompute_kept_inputs = rs.kept_inputs;
	out->recompute_kept_mover = rs.kept_mover;
	out->recompute_failed = rs.failed;
}
