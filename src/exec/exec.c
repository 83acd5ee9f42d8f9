/*
 * exec.c: recording an iteration, planning it, and running the plan, on
 * the lifecycle owner's orders (see exec.h).
 */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf.h"
#include "ebb.h"
#include "exec.h"
#include "idmap.h"
#include "log.h"
#include "lrec.h"
#include "mover.h"
#include "plan.h"
#include "probe.h"
#include "planrun.h"
#include "record.h"
#include "trace.h"
#include "tracer.h"

/* A restore takes its memory when the device has this much work left
 * before the restore's copy may start (the host runs ahead). */
#define GATE_LEAD_S 1e-3

/* A buffer the plan moves: a persistent one by id and address, one the
 * iteration allocates by its ordinal. */
struct xbuf {
	uint64_t id, addr;
	uint32_t ord;
	uint8_t persistent;
};

struct xact {
	uint32_t buf;
	uint32_t gate;		/* prefetch: position the device must pass first; PROF_NONE: none */
	uint8_t prefetch;
	uint8_t after_op;	/* offload: not before the operation at its position is done
				 * (a copy of the job's to the host it must not delay) */
};

struct xplan {
	uint64_t period;
	struct xbuf *buf;
	uint32_t nbuf;
	uint32_t *first;	/* actions of position i: act[first[i] .. first[i+1]) */
	uint8_t *gate_mark;	/* a marker is wanted after position i (a gate) */
	struct xact *act;
	uint64_t *ord_size;	/* size of each movable-class allocation of the iteration */
	uint32_t nord;
	struct ebb_buf **slot;	/* this iteration's buffer of each ordinal */
	uint64_t *slot_id;
	struct xplan *retired_next;
};

/* A recorded iteration: the one being recorded (cur), or one taken out for
 * planning with the mover's state the plan depends on. */
struct exec_recorded {
	struct rec r;			/* the recording */
	uint64_t *addr;			/* address of each buffer alive at its start */
	uint32_t naddr;
	uint32_t *tok;			/* each operation's token */
	uint64_t *host, *self;		/* host issue times, the mover's host time */
	uint8_t *sync;			/* the host waited for the device there */
	double *gpu;			/* GPU times from CUPTI, by position (taken out only) */
	uint64_t ngpu;
	uint64_t fixed, limit;		/* the mover's fixed bytes, what ebb may hold (taken out
					 * only) */
	double off_s, res_s;		/* what a move has cost the host so far */
	struct lrec_set launches;	/* each launch's record, by position */
};

/* mean GPU time of each token, from the timed recordings */
struct tokdur {
	uint32_t n;
	double sum;
};

/* The executor's state, guarded by ebb_state_lock but for the GPU times. */
static struct exec {
	const struct ebb_conf *conf;	/* the configuration (exec_init) */
	struct buftab *tab;		/* the engine's buffer table */
	struct exec_stats xs;		/* what exec_stats reports */
	/* the recording */
	int recording;			/* open: operations, allocations and frees go into it */
	int ended;			/* ended, not yet taken: frees after its last operation
					 * still go into it */
	struct exec_recorded cur;	/* the recording */
	uint32_t cur_addr_cap;		/* room in cur.addr */
	/* GPU times, arriving on whichever thread flushes CUPTI: times_lock */
	pthread_mutex_t times_lock;
	uint64_t times_s0, times_n;	/* the operations they are for: times_s0 on, times_n */
	double *times;
	/* the planner's alone (one plan at a time) */
	struct tokdur *toks;		/* mean GPU time of each token */
	uint32_t ntoks, captoks;
	struct idmap tokidx;		/* token -> index in toks */
	/* the plan */
	struct xplan *ready, *running;	/* installed, and running */
	struct xplan *retired;		/* stopped plans, freed at exit (exec_after_op may
					 * still walk one) */
	uint64_t run_s0;		/* the running plan's iteration started with this operation */
	uint32_t run_ord;		/* allocations of that iteration so far */
	uint64_t run_done;		/* whole iterations the running plan has run */
} exec = { .times_lock = PTHREAD_MUTEX_INITIALIZER };

static double
gib(uint64_t b)
{
	return (double)b / (double)(1ULL << 30);
}

static int
movable(const struct ebb_buf *b)
{
	return b->mv.managed == EBB_MANAGED_BIG && !b->pinned;
}

void
exec_init(const struct ebb_conf *c, struct buftab *t)
{
	exec.conf = c;
	exec.tab = t;
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

/* ---- the plan's life ---- */

static void
xplan_free(struct xplan *x)
{
	if (x == NULL)
		return;
	free(x->buf);
	free(x->first);
	free(x->gate_mark);
	free(x->act);
	free(x->ord_size);
	free(x->slot);
	free(x->slot_id);
	free(x);
}

/* A plan that stops: exec_after_op may still be walking it while it waits
 * with the mutex released, so it is freed only at exit. */
static void
retire(struct xplan *x)
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
	free(r->sync);
	free(r->gpu);
}

static void
recording_free(void)
{
	exec.recording = 0;
	exec.ended = 0;
	mover_time_self(0);
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
	if (b->mv.managed != EBB_MANAGED_BIG)
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
	rec_live(&exec.cur.r, b->id, b->mv.rsize, movable(b));
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
	exec.cur.tok = calloc(period, sizeof *exec.cur.tok);
	exec.cur.host = calloc(period + 1, sizeof *exec.cur.host);
	exec.cur.self = calloc(period + 1, sizeof *exec.cur.self);
	exec.cur.sync = calloc(period, 1);
	double *t = calloc(period, sizeof *t);
	if (exec.cur.tok == NULL || exec.cur.host == NULL || exec.cur.self == NULL || exec.cur.sync == NULL || t == NULL) {
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
	mover_time_self(1);
	if (exec.conf->recompute && probe_shape_begin((uint32_t)period) < 0)
		ebb_log(EBB_LOG_WARN, "no memory to learn the write sets of an iteration of %llu "
		    "operations (EBB_RECOMPUTE); nothing is recomputed", (unsigned long long)period);
	ebb_trace_note_u64("plan-recording", s0);
	return 0;
}

void
exec_record_end(void)
{
	if (!exec.recording)
		return;
	exec.cur.host[exec.cur.r.p.nops] = ebb_now_ns();
	exec.cur.self[exec.cur.r.p.nops] = mover_self_ns();
	mover_time_self(0);
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
exec_alloc(struct ebb_buf *b, uint64_t next_seq, char *why, size_t len)
{
	if (b->mv.managed != EBB_MANAGED_BIG)
		return 0;
	b->plan_ord = 0;
	if (exec.recording) {
		rec_alloc(&exec.cur.r, b->id, b->mv.rsize, movable(b), next_seq);
		return 0;
	}
	if (exec.running == NULL)
		return 0;
	struct xplan *x = exec.running;
	uint32_t o = exec.run_ord++;
	if (o >= x->nord || x->ord_size[o] != b->mv.rsize) {
		if (o >= x->nord)
			snprintf(why, len, "allocation %u of the iteration; %u were learned", o,
			    x->nord);
		else
			snprintf(why, len, "allocation %u of the iteration has %llu bytes, not %llu",
			    o, (unsigned long long)b->mv.rsize, (unsigned long long)x->ord_size[o]);
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
	if (b->mv.managed != EBB_MANAGED_BIG)
		return;
	/* a free after the iteration's last operation, before the next one, is
	 * the iteration's (rec_free takes those within it) */
	if (exec.recording || exec.ended)
		rec_free(&exec.cur.r, b->id, last_seq);
	if (exec.running != NULL && b->plan_ord != 0 && b->plan_ord <= exec.running->nord &&
	    exec.running->slot[b->plan_ord - 1] == b)
		exec.running->slot[b->plan_ord - 1] = NULL;
	b->plan_ord = 0;
}

void
exec_op(uint64_t seq, uint32_t token, struct ebb_buf *const *bufs, size_t n, unsigned xfer,
    int sync)
{
	if (!exec.recording || seq < exec.cur.r.s0 || seq - exec.cur.r.s0 >= exec.cur.r.p.nops)
		return;
	uint64_t i = seq - exec.cur.r.s0;
	exec.cur.tok[i] = token;
	exec.cur.host[i] = ebb_now_ns();
	exec.cur.self[i] = mover_self_ns();
	exec.cur.sync[i] = sync != 0;
	rec_xfer(&exec.cur.r, seq, xfer);
	if (exec.conf->recompute)
		probe_shape_op((uint32_t)i, bufs, n);
	for (size_t k = 0; k < n; k++)
		if (bufs[k]->mv.managed == EBB_MANAGED_BIG)
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
	uint32_t k = b->mv.managed == EBB_MANAGED_BIG ? idmap_get(&exec.cur.r.ids, b->id) :
	    IDMAP_NONE;
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

void
exec_run_start(uint64_t next_seq)
{
	exec.running = exec.ready;
	exec.ready = NULL;
	if (exec.running == NULL)
		return;
	mover_set_planned(1);
	ebb_trace_note_u64("plan-started", next_seq);
	exec.run_done = 0;
	exec.run_s0 = 0;
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
	exec.run_s0 = next_seq;
	exec.run_ord = 0;
	memset(exec.running->slot, 0, exec.running->nord * sizeof *exec.running->slot);
	exec.xs.iterations_run++;
	return 0;
}

void
exec_run_stop(void)
{
	if (exec.running == NULL && exec.ready == NULL)
		return;
	retire(exec.running);
	retire(exec.ready);
	exec.running = exec.ready = NULL;
	mover_set_planned(0);
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
	struct ebb_buf *b = x->slot[xb->ord];
	return b != NULL && b->id == x->slot_id[xb->ord] ? b : NULL;
}

int
exec_after_op(uint64_t seq, struct ebb_stream *st)
{
	int moved = 0;

	struct xplan *x = exec.running;

	if (x == NULL)
		return 0;
	if (seq < exec.run_s0 || seq - exec.run_s0 >= x->period)
		return 0;
	uint64_t pos = seq - exec.run_s0;
	if (st != NULL && x->gate_mark[pos])
		streams_mark_now(st);
	for (uint32_t k = x->first[pos]; k < x->first[pos + 1]; k++) {
		/* a prefetch may have waited with the mutex released */
		if (exec.running != x)
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
	return moved;
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
	/* ordinals: the size of every allocation the recording saw */
	for (uint32_t k = 0; k < p->nbufs; k++)
		if (p->buf[k].key & REC_KEY_ORDINAL) {
			uint32_t o = (uint32_t)(p->buf[k].key & ~REC_KEY_ORDINAL);
			if (o + 1 > x->nord)
				x->nord = o + 1;
		}
	x->ord_size = calloc(x->nord ? x->nord : 1, sizeof *x->ord_size);
	x->slot = calloc(x->nord ? x->nord : 1, sizeof *x->slot);
	x->slot_id = calloc(x->nord ? x->nord : 1, sizeof *x->slot_id);
	if (x->ord_size == NULL || x->slot == NULL || x->slot_id == NULL)
		goto fail;
	for (uint32_t k = 0; k < p->nbufs; k++)
		if (p->buf[k].key & REC_KEY_ORDINAL)
			x->ord_size[p->buf[k].key & ~REC_KEY_ORDINAL] = p->buf[k].size;
	/* buffers, and how many actions each position has */
	for (uint32_t m = 0; m < pl->n; m++) {
		const struct plan_move *mv = &pl->mv[m];
		const struct prof_buf *pb = &p->buf[mv->buf];
		if (xb_of[mv->buf] < 0) {
			struct xbuf *xb = &x->buf[x->nbuf];
			if (pb->key & REC_KEY_ORDINAL) {
				xb->ord = (uint32_t)(pb->key & ~REC_KEY_ORDINAL);
			} else {
				if (mv->buf >= naddr)
					continue;	/* cannot happen: live buffers come first */
				xb->persistent = 1;
				xb->id = pb->key;
				xb->addr = addr[mv->buf];
			}
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
	xplan_free(x);
	return NULL;
}

/* The durations of the recording: CUPTI's, else each token's mean from an
 * earlier timed recording, else the host's issue times. */
static const char *
durations(struct rec *r, const uint32_t *tok, const uint64_t *host, const double *gpu,
    uint64_t ngpu)
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
	if (known > 0)
		return "learned";
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
	uint64_t target;		/* the peak it aims at, bytes */
	uint64_t bound;			/* the lowest peak without stalls, bytes */
	uint64_t floor_nostall;		/* plan_floor without stalls, bytes */
	uint64_t made_ns;		/* the time taken to make it */
	double d2h, h2d;		/* the copy bandwidth assumed, bytes a second */
	int replay_have;		/* replay was found (EBB_RECOMPUTE) */
	struct replay_set replay;	/* the gaps a replay could bridge */
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
	ebb_trace_note_u64("plan-operations", r->p.nops);
	ebb_trace_note_u64("plan-buffers", r->p.nbufs);
	ebb_trace_note_u64("plan-moves", pl->n);
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
		    "work (%.3f s without moves; a move costs the host %.0f us to the host, %.0f us "
		    "back, as measured so far)", pl->host_idle_s, pl->host_idle_before_s,
		    pp->host_offload_s * 1e6, pp->host_restore_s * 1e6);
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
	ebb_log(EBB_LOG_NOTE, "plan: %s %.2f GiB (target %.2f, EBB_LIMIT less EBB_PLAN_MARGIN) "
	    "by moving %.2f GiB an iteration each way; %.3f s an iteration predicted against "
	    "%.3f s without moves (%+.1f%%)%s", pl->met ? "holds" : "reaches", gib(pl->peak),
	    gib(rp->target), gib(pl->bytes_d2h), pl->step_s, before,
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

/* Free a recording taken out (NULL: none). */
static void
recorded_free(struct exec_recorded *r)
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
	exec.xs.replayable_launches = probe_apply(&r->r.p, &r->r.ids, &r->launches, &ps,
	    &exec.xs.wild_launches);
	exec.xs.write_set_pointers = ps.pointers;
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
	mover_move_costs(&r->off_s, &r->res_s);
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
		recorded_free(rc);
		return NULL;
	}
	m->rec = rc;
	struct rec *r = &rc->r;
	m->source = durations(r, rc->tok, rc->host, rc->gpu, rc->ngpu);
	rec_end(r);
	r->p.fixed = rc->fixed;
	/* the host's side, when the durations are the device's */
	if (strcmp(m->source, "host") != 0)
		prof_host_pace(&r->p, rc->host, rc->self, rc->sync);	/* (without memory, none) */

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
	if (exec.conf->target > 0 && (uint64_t)(exec.conf->target * (double)learned) < m->target)
		m->target = (uint64_t)(exec.conf->target * (double)learned);
	m->pp = (struct plan_params){
		.target = m->target, .d2h_bps = m->d2h, .h2d_bps = m->h2d,
		.copy_latency_s = PLAN_COPY_LATENCY_S, .min_bytes = exec.conf->min_offload_bytes,
		/* under the bound, stalls rather than faults */
		.allow_stall = 1, .no_waits = !exec.conf->plan_waits,
		.time_limit_s = exec.conf->plan_seconds,
		.host_offload_s = rc->off_s, .host_restore_s = rc->res_s,
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
	uint64_t buffers = 0, bytes = 0;

	if (!m->replay_have)
		return;
	for (uint32_t i = 0; i < rs->n; i++) {
		if (i > 0 && rs->c[i].buf == rs->c[i - 1].buf)
			continue;	/* by buffer, then gap */
		buffers++;
		bytes += rs->c[i].bytes;
	}
	exec.xs.replay_considered = rs->considered;
	exec.xs.replay_gaps = rs->n;
	exec.xs.replay_buffers = buffers;
	exec.xs.replay_bytes = bytes;
	exec.xs.replay_refused = rs->refused;
}

int
exec_plan_install(struct exec_made *m)
{
	if (m->x == NULL) {
		ebb_log(EBB_LOG_WARN, "ebb could not plan the iteration (%s); buffers move only when "
		    "over EBB_LIMIT", m->why);
		return -1;
	}
	retire(exec.ready);
	exec.ready = m->x;
	m->x = NULL;
	exec.xs.plans++;
	replay_counts(m);
	exec.xs.planned_peak = m->pl.peak;
	exec.xs.predicted_step_ns = (uint64_t)(m->pl.step_s * 1e9);
	plan_notes(m);
	plan_logs(m);
	return 0;
}

void
exec_made_free(struct exec_made *m)
{
	if (m == NULL)
		return;
	if (m->have)
		plan_fini(&m->pl);
	if (m->replay_have)
		replay_set_fini(&m->replay);
	xplan_free(m->x);
	recorded_free(m->rec);
	free(m);
}

void
exec_stats(struct exec_stats *out)
{
	*out = exec.xs;
}
