/*
 * mover_copy.c: offload and restore copies on ebb's two streams, and the
 * two workers that wait for them and retire them.
 *
 * One queue and one worker a direction: the copies of a stream finish in
 * order, and an offload's memory is released as soon as its copy lands, not
 * after a restore queued before it (whose copy may wait for the device to
 * reach its operation). A worker waits without ebb_state_lock and takes
 * it to retire a copy.
 */
#include "config.h"

#include <stdlib.h>
#include <time.h>

#include "ebb.h"
#include "hostpool.h"
#include "locks.h"
#include "real.h"
#include "log.h"
#include "mover_int.h"
#include "trace.h"
#include "vmm.h"

/* What a work item waits for: an offload copy, a restore copy (or a
 * replay that remade a dropped buffer), or a drop's uses. */
enum work_kind { W_OFFLOADED, W_RESTORED, W_DROPPED, W_KINDS };

/* The workers' names, by enum work_kind. */
static const char *const work_names[W_KINDS] = { "offload", "restore", "drop" };

/* A copy in flight, queued for its direction's worker. */
struct work {
	enum work_kind kind;
	CUevent ev;		/* the copy */
	CUevent pre;		/* W_RESTORED: the consumer reached the wait (timing) */
	CUevent start;		/* the copy's stream reached the copy (timing; NULL: untimed) */
	struct ebb_buf *b;
	void *host;
	size_t size;
	uint64_t seq;
	int keep_ev;		/* a captured graph waits on ev: never record it again */
	struct work *next;
};

/* One direction's queue and worker. */
struct wqueue {
	struct work *head, *tail;	/* oldest first; only the worker takes from it */
	pthread_cond_t cond;	/* work queued, capture ended, stopping */
	pthread_t thread;
};

struct mover_copies {
	struct wqueue queues[W_KINDS];	/* by enum work_kind */
	pthread_cond_t room_cond;	/* memory was released (a copy retired or abandoned) */
	int workers_started;		/* the workers run (mover_copy_start) */
	int stopping;			/* mover_shutdown asked the workers to stop */
	uint64_t inflight;		/* offload copies not yet retired */
	int said_abandoned;		/* a copy whose completion cannot be known was reported */
};
static struct mover_copies copies = {
	.queues = {
		[W_OFFLOADED] = { .cond = PTHREAD_COND_INITIALIZER },
		[W_RESTORED] = { .cond = PTHREAD_COND_INITIALIZER },
		[W_DROPPED] = { .cond = PTHREAD_COND_INITIALIZER },
	},
	.room_cond = PTHREAD_COND_INITIALIZER,
};

/* This thread issued a move since mover_moved_here last asked (thread-local,
 * so it cannot be a field of copies). */
static _Thread_local int moved_here;

/* Whether this thread issued a move since it last asked; asking clears it. */
int
mover_moved_here(void)
{
	int m = moved_here;

	moved_here = 0;
	return m;
}

/* Offload copies issued and not yet retired. */
uint64_t
mover_copy_inflight(void)
{
	return copies.inflight;
}

/* Wait for a worker to release memory; the time goes to *ns and an H record. */
void
mover_copy_wait_room(uint64_t *ns, const char *what, uint64_t seq)
{
	uint64_t t0 = ebb_now_ns();
	pthread_cond_wait(&copies.room_cond, &ebb_state_lock);
	mover_host_waited(ns, t0, what, seq);
}

/* Queue w for its direction's worker. */
static void
enqueue(struct work *w)
{
	struct wqueue *q = &copies.queues[w->kind];

	w->next = NULL;
	if (q->tail)
		q->tail->next = w;
	else
		q->head = w;
	q->tail = w;
	pthread_cond_signal(&q->cond);
}

/* Retire a finished offload: unmap and pool the buffer's memory (or, when
 * unmapping fails, keep it resident), or drop the host copy of a cancelled
 * one. */
static void
retire_offload(struct work *w)
{
	struct ebb_buf *b = w->b;

	if (b->mv.state == EBB_OFFLOADING) {
		/*
		 * The driver's unmap takes tens of microseconds: the job's threads
		 * go on meanwhile. The buffer stays EBB_OFFLOADING, marked
		 * releasing, which every path that would touch its memory (a
		 * cancel, a restore, a remake) waits out; a free marks it freed,
		 * as for any offload in flight, and is finished here.
		 */
		uint64_t ns;
		b->mv.releasing = 1;
		pthread_mutex_unlock(&ebb_state_lock);
		CUresult ur = vmm_unmap_call(b->addr, b->mv.rsize, &ns);
		pthread_mutex_lock(&ebb_state_lock);
		b->mv.releasing = 0;
		copies.inflight--;	/* in flight until here: waiters for room wait for it */
		vmm_unmap_done(b->addr, b->mv.rsize, ur, ns);
		mover.stats.unmap_ns += ns;
		mover.stats.unmaps_timed++;
		if (ur != CUDA_SUCCESS) {
			/* still mapped and intact: the buffer stays resident with its
			 * handle (never pooled while mapped) and may move again
			 * later; one the job freed is a freed block like any other */
			mover.stats.unmaps_failed++;
			hostpool_free(b->mv.host, b->size);
			b->mv.host = NULL;
			b->mv.dropped = 0;
			if (b->mv.freed) {
				static const struct ebb_tag done;	/* empty: done */
				mover_block_keep(b->addr, b->mv.handle, &done, NULL);
				b->mv.handle = NULL;
			} else {
				b->mv.state = EBB_RESIDENT;
				mover_lru_append(b);
			}
		} else {
			vmm_pool_put(b->mv.handle);
			b->mv.handle = NULL;
			b->mv.state = EBB_ON_HOST;
			mover_trace_move('U', 0, b, b->mv.rsize, "released");
			if (b->mv.freed) {
				hostpool_free(b->mv.host, b->size);
				b->mv.host = NULL;
				vmm_unreserve(b->addr, b->mv.rsize);
			}
		}
	} else {
		copies.inflight--;
		if (b->mv.cancelled) {
			hostpool_free(b->mv.host, b->size);
			b->mv.host = NULL;
			b->mv.cancelled = 0;
		}
	}
	streams_event_put(w->ev, 1);
	if (--b->mv.pending == 0 && b->mv.freed)
		ebb_buf_put(b);
}

/* Retire a finished restore: free its host copy, and note how long the
 * consumer stalled for it (a W record) when that was timed. */
static void
retire_restore(struct work *w)
{
	struct ebb_buf *b = w->b;

	hostpool_free(w->host, w->size);
	if (b != NULL) {
		if (b->mv.arrive == w->ev)
			b->mv.arrive = NULL;
		if (--b->mv.pending == 0 && b->mv.freed)
			ebb_buf_put(b);
	}
	if (w->pre != NULL) {
		float ms = 0;
		if (ebb_real.cuEventElapsedTime(&ms, w->pre, w->ev) == CUDA_SUCCESS && ms > 0) {
			uint64_t ns = (uint64_t)((double)ms * 1e6);
			mover.stats.stall_ns += ns;
			mover.stats.stalls_measured++;
			if (ebb_trace_on())
				ebb_trace_write_stall(ebb_now_ns(), w->seq, w->size, ns);
		}
		streams_event_put(w->pre, 1);
	}
	if (!w->keep_ev)
		streams_event_put(w->ev, 1);
}

/* What a finished copy allows: free the device memory or the host copy. */
static void
retire(struct work *w)
{
	if (w->start != NULL) {
		mover_rate_sample(w->kind == W_OFFLOADED ? 0 : 1, w->size, w->start, w->ev);
		streams_event_put(w->start, 1);
	}
	if (w->kind != W_RESTORED)
		retire_offload(w);
	else
		retire_restore(w);
	free(w);
	pthread_cond_broadcast(&copies.room_cond);
}

/*
 * A copy whose completion cannot be known (waiting for its event failed,
 * and so did querying it: the context is broken). Nothing it may still
 * touch is released or reused: the device memory stays mapped (an
 * offloaded buffer is resident again and never moves; one the job freed
 * stays reserved), the host memory stays out of the pool, and the event is
 * not recycled. Said once.
 */
static void
abandon(struct work *w, CUresult err)
{
	struct ebb_buf *b = w->b;

	ebb_log_once(&copies.said_abandoned, EBB_LOG_ERROR, "waiting for ebb's copy of buffer %llu "
	    "to the %s failed (cuEventSynchronize and cuEventQuery returned %d): the memory it may "
	    "still use is kept, never released or reused, and the buffer no longer moves (further "
	    "such copies are not reported)", (unsigned long long)b->id,
	    w->kind != W_RESTORED ? "host" : "device", (int)err);
	mover.stats.copies_abandoned++;
	if (w->start != NULL)
		streams_event_put(w->start, 1);
	if (w->kind != W_RESTORED) {
		copies.inflight--;
		if (b->mv.state == EBB_OFFLOADING && !b->mv.freed) {
			b->mv.state = EBB_RESIDENT;	/* still mapped and intact */
			b->mv.dropped = 0;
			b->pinned |= EBB_PIN_FAILED;
		}
		/* a freed buffer keeps its mapping, its handle and its range */
		b->mv.host = NULL;
		b->mv.cancelled = 0;
		if (b->mv.ev == w->ev)
			b->mv.ev = NULL;
		if (--b->mv.pending == 0 && b->mv.freed)
			ebb_buf_put(b);
	} else {
		/* later uses wait for b->mv.arrive on the device, as before */
		if (b != NULL) {
			b->pinned |= EBB_PIN_FAILED;
			mover_lru_remove(b);
			if (--b->mv.pending == 0 && b->mv.freed)
				ebb_buf_put(b);
		}
	}
	free(w);
	pthread_cond_broadcast(&copies.room_cond);
}

/* A worker: waits for its direction's copies to finish (never holding the
 * engine mutex while it waits) and retires them, until mover_shutdown. */
static void *
worker_main(void *arg)
{
	struct wqueue *q = arg;

	ebb_inside = 1;
	streams_relax();	/* its waits never touch, nor wait for, a capture of the job's */
	CUresult cr = ebb_real.cuCtxSetCurrent(mover.ctx);
	if (cr != CUDA_SUCCESS)
		ebb_log(EBB_LOG_ERROR, "ebb's %s worker cannot make the job's context current (error "
		    "%d): the memory of its copies is never released",
		    work_names[q - copies.queues], (int)cr);
	pthread_mutex_lock(&ebb_state_lock);
	for (;;) {
		while (!copies.stopping && q->head == NULL)
			pthread_cond_wait(&q->cond, &ebb_state_lock);
		if (copies.stopping && q->head == NULL)
			break;
		/* it stays queued, in flight to mover_copy_inflight_sized, until retired */
		struct work *w = q->head;
		pthread_mutex_unlock(&ebb_state_lock);
		CUresult r = streams_event_wait(w->ev);
		if (r == CUDA_SUCCESS && w->pre != NULL && streams_event_wait(w->pre) != CUDA_SUCCESS) {
			/* the stall's timing only: the copy itself is done */
			w->pre = NULL;
		}
		pthread_mutex_lock(&ebb_state_lock);
		q->head = w->next;	/* only this worker takes from q */
		if (q->head == NULL)
			q->tail = NULL;
		if (r == CUDA_SUCCESS)
			retire(w);
		else
			abandon(w, r);
	}
	pthread_mutex_unlock(&ebb_state_lock);
	return NULL;
}

/* Start the workers (offload, restore, drop). Returns 0, or
 * pthread_create's error (a worker already started then waits for work that
 * never comes). */
int
mover_copy_start(void)
{
	for (int k = 0; k < W_KINDS; k++) {
		int e = pthread_create(&copies.queues[k].thread, NULL, worker_main,
		    &copies.queues[k]);
		if (e != 0)
			return e;
	}
	copies.workers_started = 1;
	return 0;
}

/* Stop the workers (at exit), waiting at most 5 s for each. */
void
mover_shutdown(void)
{
	if (!copies.workers_started)
		return;
	copies.stopping = 1;
	for (int k = 0; k < W_KINDS; k++)
		pthread_cond_signal(&copies.queues[k].cond);
	pthread_mutex_unlock(&ebb_state_lock);
	/* The copies they wait for finish on their own; do not hang an exit on a
	 * device that stopped answering. */
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 5;
	for (int k = 0; k < W_KINDS; k++)
		if (pthread_timedjoin_np(copies.queues[k].thread, NULL, &until) != 0)
			ebb_log(EBB_LOG_WARN, "ebb's %s worker did not stop within 5 s at exit",
			    work_names[k]);
	pthread_mutex_lock(&ebb_state_lock);
	copies.workers_started = 0;
}

/* Whether an offload copy of a buffer of rsize bytes is in flight. */
int
mover_copy_inflight_sized(size_t rsize)
{
	static const enum work_kind away[] = { W_OFFLOADED, W_DROPPED };

	for (size_t k = 0; k < sizeof away / sizeof away[0]; k++)
		for (struct work *w = copies.queues[away[k]].head; w != NULL; w = w->next)
			if (w->b->mv.rsize == rsize && w->b->mv.state == EBB_OFFLOADING)
				return 1;
	return 0;
}

/* Make stream waiter (ebb's d2h or drop stream) wait for every queued use of
 * b on the streams it remembers (b->last). Returns 0 or a CUresult. */
static CUresult
after_uses(struct ebb_buf *b, CUstream waiter)
{
	if (b->mv.arrive != NULL) {
		CUresult r = ebb_real.cuStreamWaitEvent(waiter, b->mv.arrive, 0);
		if (r != CUDA_SUCCESS)
			return r;
	}
	for (uint8_t i = 0; i < b->nstreams; i++) {
		CUresult r = streams_wait((struct ebb_stream *)b->last[i].stream, b->last[i].seq,
		    waiter);
		if (r != CUDA_SUCCESS)
			return r;
	}
	return CUDA_SUCCESS;
}

struct wait_all {
	CUresult r;
	CUstream waiter;
};

/* Make the wait_all's stream wait for all that stream s has been given so
 * far; after a failure, nothing (the failure stays in the wait_all's r). */
static void
wait_stream(struct ebb_stream *s, void *p)
{
	struct wait_all *w = p;
	if (w->r == CUDA_SUCCESS)
		w->r = streams_wait(s, streams_last(s), w->waiter);
}

/* Make waiter wait for every use of b queued so far (after_uses, and every
 * stream when b's streams overflowed). Returns 0 or a CUresult. */
static CUresult
after_all_uses(struct ebb_buf *b, CUstream waiter)
{
	CUresult r = after_uses(b, waiter);
	if (r == CUDA_SUCCESS && b->streams_overflow) {
		struct wait_all w = { CUDA_SUCCESS, waiter };
		streams_each(wait_stream, &w);
		r = w.r;
	}
	return r;
}

/* Copy b to the host behind its uses; the worker releases its memory once
 * the copy is done. Returns 1 when issued, 0 when there is no pinned host
 * memory for it or a step failed (said; b then stays resident and never
 * moves again). */
int
mover_copy_offload(struct ebb_buf *b, uint64_t seq, const char *why)
{
	uint64_t t0 = ebb_now_ns(), pin0 = hostpool_pin_ns();
	moved_here = 1;
	void *host = hostpool_alloc(b->size);
	if (host == NULL)
		return 0;
	mover.stats.host_pinned = hostpool_pinned();
	/* Pinning a new slab is a cost of the pool's growth, paid once: the
	 * cost of an offload in the plan's prediction leaves it out. */
	t0 += hostpool_pin_ns() - pin0;
	const char *step = "waiting for its uses";
	CUresult r = after_all_uses(b, mover.d2h);
	/* the time the copy itself takes, after the waits above (mover_rate_sample) */
	CUevent ev = NULL, start = r == CUDA_SUCCESS ? mover_rate_copy_start(mover.d2h, b->size) :
	    NULL;
	if (r == CUDA_SUCCESS) {
		step = "cuMemcpyDtoHAsync";
		r = ebb_real.cuMemcpyDtoHAsync_v2(host, b->addr, b->size, mover.d2h);
	}
	if (r == CUDA_SUCCESS && (ev = streams_event_get(1)) == NULL) {
		step = "cuEventCreate";
		r = CUDA_ERROR_OUT_OF_MEMORY;
	}
	if (r == CUDA_SUCCESS) {
		step = "cuEventRecord";
		r = ebb_real.cuEventRecord(ev, mover.d2h);
	}
	struct work *w = r == CUDA_SUCCESS ? malloc(sizeof *w) : NULL;
	if (w == NULL) {
		/* The copy may be queued: leave the buffer resident, and the host
		 * memory to a later copy (never reused while this one may run). */
		ebb_log(EBB_LOG_WARN, "offloading buffer %llu (%llu bytes at 0x%llx, host %p) failed: "
		    "%s returned %d; it stays on the device", (unsigned long long)b->id,
		    (unsigned long long)b->size, (unsigned long long)b->addr, host, step, (int)r);
		b->pinned |= EBB_PIN_FAILED;
		mover_lru_remove(b);
		if (ev)
			streams_event_put(ev, 1);
		if (start)
			streams_event_put(start, 1);
		return 0;
	}
	mover_lru_remove(b);
	b->mv.state = EBB_OFFLOADING;
	b->mv.host = host;
	b->mv.ev = ev;
	b->mv.pending++;
	copies.inflight++;
	mover.stats.offloads++;
	mover.stats.bytes_d2h += b->size;
	*w = (struct work){ .kind = W_OFFLOADED, .ev = ev, .start = start, .b = b, .size = b->size };
	enqueue(w);
	mover_trace_move('O', seq, b, b->size, why);
	mover.stats.offload_host_ns += ebb_now_ns() - t0;
	mover.stats.offloads_timed++;
	return 1;
}

/* Drop b's contents behind its uses: once every use queued so far is done,
 * the drop worker unmaps and pools its memory, as after an offload, but
 * nothing is copied; the buffer is remade by mover.remake when it is needed
 * again. Returns 1 when issued, 0 when a step failed (b stays resident). */
static int
drop(struct ebb_buf *b, uint64_t seq)
{
	uint64_t t0 = ebb_now_ns();
	CUevent ev = NULL;
	CUresult r = after_all_uses(b, mover.drop);
	if (r == CUDA_SUCCESS && (ev = streams_event_get(1)) == NULL)
		r = CUDA_ERROR_OUT_OF_MEMORY;
	if (r == CUDA_SUCCESS)
		r = ebb_real.cuEventRecord(ev, mover.drop);
	struct work *w = r == CUDA_SUCCESS ? malloc(sizeof *w) : NULL;
	if (w == NULL) {
		if (ev != NULL)
			streams_event_put(ev, 1);
		return 0;
	}
	mover_lru_remove(b);
	b->mv.state = EBB_OFFLOADING;
	b->mv.dropped = 1;
	b->mv.ev = ev;
	b->mv.pending++;
	copies.inflight++;
	mover.stats.drops++;
	*w = (struct work){ .kind = W_DROPPED, .ev = ev, .b = b };
	enqueue(w);
	mover_trace_move('O', seq, b, 0, "drop");
	mover.stats.drop_host_ns += ebb_now_ns() - t0;
	mover.stats.drops_timed++;
	return 1;
}

/*
 * Map h at b's address and copy b back on the h2d stream (after operation
 * after_seq of stream after, when after is not NULL). Later uses wait for
 * b->mv.arrive. pre: an event on the consumer for timing the stall, or
 * NULL. Returns CUDA_SUCCESS, or the error of mapping (h is pooled again)
 * or of issuing the copy (said; the mapping and the host copy stay).
 */
static CUresult
copy_back(struct ebb_buf *b, struct vmm_handle *h, struct ebb_stream *after, uint64_t after_seq,
    CUevent pre, uint64_t seq, const char *why)
{
	uint64_t t0 = ebb_now_ns();
	moved_here = 1;
	CUresult r = vmm_map(b->addr, h);
	if (r != CUDA_SUCCESS) {
		vmm_pool_put(h);
		if (pre != NULL)
			streams_event_put(pre, 1);
		return r;
	}
	CUevent ev = streams_event_get(1);
	if (ev == NULL)
		r = CUDA_ERROR_OUT_OF_MEMORY;
	if (r == CUDA_SUCCESS && after != NULL)
		r = streams_wait(after, after_seq, mover.h2d);
	CUevent start = r == CUDA_SUCCESS ? mover_rate_copy_start(mover.h2d, b->size) : NULL;
	if (r == CUDA_SUCCESS)
		r = ebb_real.cuMemcpyHtoDAsync_v2(b->addr, b->mv.host, b->size, mover.h2d);
	if (r == CUDA_SUCCESS)
		r = ebb_real.cuEventRecord(ev, mover.h2d);
	if (r != CUDA_SUCCESS) {
		/* the copy may be queued: the mapping and the host copy stay */
		ebb_log(EBB_LOG_ERROR, "restoring buffer %llu failed (error %d)",
		    (unsigned long long)b->id, (int)r);
		if (start != NULL)
			streams_event_put(start, 1);
		return r;
	}
	struct work *w = malloc(sizeof *w);
	if (w != NULL) {
		*w = (struct work){ .kind = W_RESTORED, .ev = ev, .pre = pre, .start = start, .b = b,
			.host = b->mv.host, .size = b->size, .seq = seq, .keep_ev = mover.capturing };
		b->mv.pending++;
		enqueue(w);
	} else if (start != NULL) {
		streams_event_put(start, 1);
	}
	/* without a work item the host copy is simply not reused */
	b->mv.host = NULL;
	b->mv.handle = h;
	b->mv.state = EBB_RESIDENT;
	b->mv.arrive = w != NULL ? ev : NULL;
	mover_lru_append(b);
	mover.stats.restores++;
	mover.stats.bytes_h2d += b->size;
	mover_trace_move('B', seq, b, b->size, why);
	mover.stats.restore_host_ns += ebb_now_ns() - t0;
	mover.stats.restores_timed++;
	return CUDA_SUCCESS;
}

/* Remakes this thread is inside (remake below). */
static __thread int remaking_here;

/*
 * Map h at b's address and have mover.remake fill it (b's contents were
 * dropped): later uses, and consumer when not NULL, wait on the device for
 * the event the remake recorded, as for a restore's copy. Returns
 * CUDA_SUCCESS, or the error of mapping (h pooled again) or of the remake
 * (said; b is then mapped, its contents lost, and the operation that needed
 * it must fail).
 */
static CUresult
remake_untimed(struct ebb_buf *b, struct vmm_handle *h, struct ebb_stream *consumer, uint64_t seq)
{
	moved_here = 1;
	CUresult r = vmm_map(b->addr, h);
	if (r != CUDA_SUCCESS) {
		vmm_pool_put(h);
		return r;
	}
	b->mv.handle = h;
	b->mv.state = EBB_RESIDENT;
	b->mv.dropped = 0;
	mover_lru_append(b);
	CUevent ev = NULL;
	b->mv.remaking = 1;
	remaking_here++;
	r = mover.remake != NULL ? mover.remake(b, consumer, seq, &ev) : CUDA_ERROR_NOT_SUPPORTED;
	remaking_here--;
	b->mv.remaking = 0;
	pthread_cond_broadcast(&copies.room_cond);
	struct work *w = r == CUDA_SUCCESS && ev != NULL ? malloc(sizeof *w) : NULL;
	if (w != NULL) {
		*w = (struct work){ .kind = W_RESTORED, .ev = ev, .b = b, .seq = seq,
			.keep_ev = mover.capturing };
		b->mv.pending++;
		b->mv.arrive = ev;
		enqueue(w);
	} else if (ev != NULL && r == CUDA_SUCCESS) {
		/* without a work item to retire it, the host waits for it here */
		r = streams_event_wait(ev);
		streams_event_put(ev, 1);
	}
	if (r != CUDA_SUCCESS) {
		ebb_log(EBB_LOG_ERROR, "remaking buffer %llu (%llu bytes at 0x%llx), whose contents "
		    "the plan dropped, failed (error %d): the operation that needs it fails",
		    (unsigned long long)b->id, (unsigned long long)b->size,
		    (unsigned long long)b->addr, (int)r);
		b->pinned |= EBB_PIN_FAILED;
		mover_lru_remove(b);
		return r;
	}
	mover.stats.remakes++;
	mover_trace_move('B', seq, b, 0, "remake");
	if (consumer != NULL && b->mv.arrive != NULL)
		r = streams_after_event(consumer, b->mv.arrive, mover.capturing);
	return r;
}

/* remake_untimed, its host time counted in remake_ns where it is not inside
 * another remake of this thread's, and counted as nested where it is. */
static CUresult
remake(struct ebb_buf *b, struct vmm_handle *h, struct ebb_stream *consumer, uint64_t seq)
{
	uint64_t t0 = remaking_here == 0 ? ebb_now_ns() : 0;
	CUresult r = remake_untimed(b, h, consumer, seq);

	if (t0 != 0)
		mover.stats.remake_ns += ebb_now_ns() - t0;
	else if (r == CUDA_SUCCESS)
		mover.stats.remakes_nested++;
	return r;
}

/* Bring b back to the device for operation seq on consumer, which waits
 * for the copy (timed as a stall); with no consumer (a question about the
 * buffer, mover_map), later uses wait for it. Returns CUDA_SUCCESS, or the
 * error of making room (refused), of the copy, or of the consumer's wait. */
CUresult
mover_copy_restore(struct ebb_buf *b, struct ebb_stream *consumer, uint64_t seq)
{
	CUresult err;
	struct vmm_handle *h = mover_get_handle(b->mv.rsize, seq, 0, &err);

	if (h == NULL) {
		mover_refuse(b->size, consumer != NULL ? "no room to restore a buffer an operation "
		    "needs" : "no room to map a buffer the job asks about");
		return err;
	}
	if (b->mv.dropped)
		return remake(b, h, consumer, seq);
	if (consumer == NULL)
		return copy_back(b, h, NULL, 0, NULL, seq, "query");
	CUstream c = streams_handle(consumer);
	CUevent pre = mover.capturing ? NULL : streams_event_get(1);
	if (pre != NULL && ebb_real.cuEventRecord(pre, c) != CUDA_SUCCESS) {
		streams_event_put(pre, 1);
		pre = NULL;
	}
	CUevent ev;
	CUresult r = copy_back(b, h, NULL, 0, pre, seq, "fault");
	if (r == CUDA_SUCCESS && (ev = b->mv.arrive) != NULL)
		r = streams_after_event(consumer, ev, mover.capturing);
	return r;
}

/* The plan's offload of b, behind operation seq of after when not NULL
 * (mover_plan_offload). Returns 1 when issued, 0 when b cannot move now. */
int
mover_copy_plan_offload(struct ebb_buf *b, struct ebb_stream *after, uint64_t seq)
{
	if (!mover.on || mover.capturing || b->mv.managed != EBB_MANAGED_BIG ||
	    b->mv.state != EBB_RESIDENT || b->pinned || b->mv.cancelled || mover_lru_in_flight(b))
		return 0;
	/* the d2h stream is in order: later copies wait too, as the plan has them */
	if (after != NULL && streams_wait(after, seq, mover.d2h) != CUDA_SUCCESS)
		return 0;
	if (!mover_copy_offload(b, seq, "plan"))
		return 0;
	mover.stats.planned_offloads++;
	return 1;
}

/* The plan's drop of b after its last use before a gap (mover_plan_drop). */
enum mover_drop
mover_copy_plan_drop(struct ebb_buf *b, uint64_t seq)
{
	if (!mover.on || mover.capturing || mover.remake == NULL ||
	    b->mv.managed != EBB_MANAGED_BIG)
		return MOVER_DROP_OFF;
	if (b->mv.state != EBB_RESIDENT)
		return MOVER_DROP_AWAY;
	if (b->pinned)
		return MOVER_DROP_PINNED;
	if (b->mv.cancelled || b->mv.pending)
		return MOVER_DROP_RETIRING;
	if (mover_lru_in_flight(b))
		return MOVER_DROP_IN_FLIGHT;
	return drop(b, seq) ? MOVER_DROPPED : MOVER_DROP_FAILED;
}

/* The plan's restore of b ahead of its use (mover_prefetch). Returns 1 when
 * issued, 0 when not (b not on the host, no room without evicting, freed
 * meanwhile, or the copy failed). */
int
mover_copy_prefetch(struct ebb_buf *b, struct ebb_stream *after, uint64_t seq, uint64_t gate)
{
	if (!mover.on || mover.capturing || b->mv.managed != EBB_MANAGED_BIG || b->pinned ||
	    b->mv.state == EBB_RESIDENT || b->mv.dropped)
		return 0;
	CUevent gate_ev = gate != 0 && after != NULL ? streams_marker(after, gate) : NULL;
	struct vmm_handle *h = NULL;
	int full = 0;
	CUresult err = CUDA_SUCCESS;
	/*
	 * The buffer is on the host and there is room now: the copy is ordered
	 * after operation seq on the device all the same, and the memory it
	 * takes is within the limit, so the host need not wait for the device
	 * to near it (which would leave the device little queued work).
	 */
	if (gate_ev != NULL && b->mv.state == EBB_ON_HOST && !b->mv.cancelled && !b->mv.freed &&
	    (h = mover_try_handle(b->mv.rsize, &full, &err)) != NULL) {
		gate_ev = NULL;
		mover.stats.prefetches_early++;
	}
	b->mv.pending++;	/* b may be freed while the mutex is released */
	if (gate_ev != NULL) {
		/* the host is ahead of the device: take the memory when the device is near */
		uint64_t t0 = ebb_now_ns();
		pthread_mutex_unlock(&ebb_state_lock);
		ebb_real.cuEventSynchronize(gate_ev);
		pthread_mutex_lock(&ebb_state_lock);
		mover_host_waited(&mover.stats.wait_gate_ns, t0, "gate", seq);
		streams_done(after, gate);
	}
	/* and the offload must have landed */
	while (b->mv.state == EBB_OFFLOADING && !b->mv.cancelled && !b->mv.freed &&
	    !copies.stopping)
		mover_copy_wait_room(&mover.stats.wait_landing_ns, "landing", seq);
	if (--b->mv.pending == 0 && b->mv.freed) {
		if (h != NULL)
			vmm_pool_put(h);
		ebb_buf_put(b);
		return 0;
	}
	if (b->mv.freed || mover.capturing || b->mv.state != EBB_ON_HOST) {
		if (h != NULL)
			vmm_pool_put(h);
		return 0;
	}
	if (h == NULL)
		h = mover_get_handle(b->mv.rsize, seq, MOVER_NO_EVICT, &err);
	if (h == NULL) {
		mover.stats.prefetches_skipped++;
		mover_trace_move('J', seq, b, b->size, "prefetch-no-room");
		return 0;
	}
	if (copy_back(b, h, after, seq, NULL, seq, "prefetch") != CUDA_SUCCESS)
		return 0;
	mover.stats.prefetches++;
	return 1;
}

/* Make the movable buffers of bufs resident for operation seq on consumer
 * (mover_ensure). Returns CUDA_SUCCESS or the first error. */
CUresult
mover_copy_ensure(struct ebb_buf **bufs, size_t n, struct ebb_stream *consumer, uint64_t seq)
{
	for (size_t i = 0; i < n; i++) {
		struct ebb_buf *b = bufs[i];
		if (b->mv.managed != EBB_MANAGED_BIG)
			continue;
		/* a worker is unmapping it: it is away once that is done */
		if (b->mv.releasing) {
			b->mv.pending++;
			while (b->mv.releasing)
				mover_copy_wait_room(&mover.stats.wait_landing_ns, "landing", seq);
			b->mv.pending--;
		}
		if (b->mv.state == EBB_OFFLOADING && b->mv.dropped) {
			/*
			 * The plan's drop has not released the memory yet (the
			 * host is ahead of the device): the host waits for it,
			 * then the buffer is remade. Kept instead, the memory the
			 * plan counts as free would stay held, and what the plan
			 * puts there would find no room. (Another thread may
			 * remake it meanwhile: then it is resident, below.)
			 */
			b->mv.pending++;
			mover.stats.drop_waits++;
			while (b->mv.state == EBB_OFFLOADING && b->mv.dropped && !copies.stopping)
				mover_copy_wait_room(&mover.stats.wait_drop_ns, "drop", seq);
			b->mv.pending--;
		}
		/* being remade by another thread (which waits for room for its
		 * inputs): its event comes once its producers are launched (this
		 * thread, inside a remake, never waits for one) */
		while (b->mv.state == EBB_RESIDENT && b->mv.remaking && remaking_here == 0 &&
		    !copies.stopping)
			mover_copy_wait_room(&mover.stats.wait_drop_ns, "remake", seq);
		if (b->mv.state == EBB_RESIDENT) {
			/* restored ahead of this use: the device waits for the copy
			 * (a question, with no consumer, needs the mapping only) */
			if (b->mv.arrive != NULL && consumer != NULL) {
				CUresult r = streams_after_event(consumer, b->mv.arrive, mover.capturing);
				if (r != CUDA_SUCCESS)
					return r;
			}
			continue;
		}
		if (b->mv.state == EBB_OFFLOADING) {
			/*
			 * Still mapped and intact: keep it, drop the copy when it
			 * lands. The use is not ordered after the copy (it would wait
			 * behind the whole offload queue), so the copy may read the
			 * buffer while the use writes it; what it read is never used,
			 * and the buffer does not move again, nor is its memory reused,
			 * before the copy has landed (the victim choice passes over a
			 * cancelled buffer; a free waits for its copy).
			 */
			if (b->mv.dropped)
				mover.stats.drops_undone++;	/* only when stopping */
			b->mv.state = EBB_RESIDENT;
			b->mv.cancelled = 1;
			b->mv.dropped = 0;
			mover_lru_append(b);
			mover.stats.cancels++;
			mover_trace_move('B', seq, b, 0, "cancel");
			continue;
		}
		CUresult r = mover_copy_restore(b, consumer, seq);
		if (r != CUDA_SUCCESS)
			return r;
	}
	return CUDA_SUCCESS;
}
