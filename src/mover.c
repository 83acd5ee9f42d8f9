/*
 * mover.c: serving allocations under EBB_LIMIT and moving buffers to pinned
 * host memory and back at the same device address.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "conf.h"
#include "ebb.h"
#include "hostpool.h"
#include "interpose.h"
#include "log.h"
#include "mover.h"
#include "trace.h"
#include "tracer.h"
#include "vmm.h"

/* Small allocations come from slabs of this size, in these classes. */
#define SLAB_BYTES ((size_t)2 << 20)
#define SMALL_MAX ((size_t)1 << 20)
#define NCLASSES 32	/* 256 B to 1 MiB in steps of 1.5 and 2 need 25 */

/* Victims looked at for one that no queued work uses, before taking the oldest. */
#define IDLE_SCAN 32
/* Least recent buffers looked through for a victim of a given size. */
#define SIZED_SCAN 256

/* ---- state (engine mutex held unless said otherwise) ---- */

static int on;			/* mover_init succeeded */
static const char *failed_why;	/* why mover_init failed for good (NULL: it has not) */
static pthread_mutex_t *lock;
static void (*recycle)(struct ebb_buf *);
static CUcontext ctx;
static CUstream d2h, h2d;
static uint64_t limit;
static uint64_t min_offload;
static uint64_t slab_held, other_held;
static uint64_t used_at_start;	/* the device's used memory when the mover started (0: unknown) */
static int capturing;		/* a stream capture runs: the plan's moves pause, and a
				 * consumer waits on a restore's event (kept for the graph) */
static int host_short;		/* an offload found no pinned host memory */
static int planned;		/* the engine's plan moves buffers */
static double bw_d2h, bw_h2d;	/* measured at start, bytes a second */
static struct mover_stats st;

/* resident movable buffers, least recently used first */
static struct ebb_buf *lru_head, *lru_tail;

/* Big freed blocks: still mapped, waiting for their tag or for reuse. */
struct block {
	CUdeviceptr va;
	struct vmm_handle *h;
	struct ebb_tag tag;
	struct block *next;
};
static struct block *blocks;

/* Keep a freed block, still mapped at va with h, for reuse once tag is done. */
static int
block_keep(CUdeviceptr va, struct vmm_handle *h, const struct ebb_tag *tag)
{
	struct block *k = malloc(sizeof *k);

	if (k == NULL)
		return -1;
	*k = (struct block){ .va = va, .h = h, .tag = *tag, .next = blocks };
	blocks = k;
	return 0;
}

/* ---- tags ---- */

/* The three things asked of a (stream, seq) of a tag. */
enum tag_how { TAG_DONE, TAG_WAIT, TAG_SYNC };

static CUresult
tag_one(struct ebb_stream *s, uint64_t seq, enum tag_how how, CUstream waiter)
{
	switch (how) {
	case TAG_DONE: return streams_done(s, seq) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
	case TAG_WAIT: return streams_wait(s, seq, waiter);
	default: return streams_sync(s, seq);
	}
}

/*
 * A tag with `all` stands for every stream as far as it had got when the
 * memory was freed (t->seq[0], the operation count then).
 */
struct tag_walk {
	const struct ebb_tag *t;
	CUstream waiter;
	enum tag_how how;
	CUresult r;
};

static void
tag_walk_one(struct ebb_stream *s, void *p)
{
	struct tag_walk *w = p;
	uint64_t upto = streams_last(s) < w->t->seq[0] ? streams_last(s) : w->t->seq[0];

	if (w->r == CUDA_SUCCESS && upto != 0)
		w->r = tag_one(s, upto, w->how, w->waiter);
}

/* Apply one of the three to every (stream, seq) of t. */
static CUresult
tag_apply(const struct ebb_tag *t, enum tag_how how, CUstream waiter)
{
	if (t->all) {
		struct tag_walk w = { t, waiter, how, CUDA_SUCCESS };
		streams_each(tag_walk_one, &w);
		return w.r;
	}
	for (uint8_t i = 0; i < t->n; i++) {
		CUresult r = tag_one(t->s[i], t->seq[i], how, waiter);
		if (r != CUDA_SUCCESS)
			return r;
	}
	return CUDA_SUCCESS;
}

/* Whether memory freed under tag may be used again by any stream now. */
static int
tag_done(const struct ebb_tag *t)
{
	return tag_apply(t, TAG_DONE, NULL) == CUDA_SUCCESS;
}

/* Make stream waiter wait for t. Returns 0 or a CUresult. */
static CUresult
tag_wait(const struct ebb_tag *t, CUstream waiter)
{
	return tag_apply(t, TAG_WAIT, waiter);
}

/*
 * Record a marker where each stream of t now is, unless one covers t there
 * already (streams.c marks every 32 operations): a wait for t then ends
 * when the device passes that point, near the freed memory's last use, and
 * not at a marker recorded only when the wait begins, where the host then
 * is (the device then runs dry while the host maps the memory).
 */
static void
tag_mark(const struct ebb_tag *t)
{
	if (t->all)
		return;
	for (uint8_t i = 0; i < t->n; i++)
		streams_cover(t->s[i], t->seq[i]);
}

/* Block until t is done. Returns 0 or a CUresult. */
static CUresult
tag_sync(const struct ebb_tag *t)
{
	return tag_apply(t, TAG_SYNC, NULL);
}

/* ---- trace ---- */

static void
trace_move(char type, uint64_t seq, const struct ebb_buf *b, uint64_t bytes, const char *what)
{
	struct ebb_line l;

	if (!ebb_trace_on())
		return;
	ebb_line_begin(&l, type);
	ebb_line_u64(&l, ebb_now_ns());
	ebb_line_u64(&l, seq);
	ebb_line_u64(&l, b ? b->id : 0);
	ebb_line_u64(&l, bytes);
	ebb_line_str(&l, what);
	ebb_line_end(&l);
}

static uint64_t
held_total(void)
{
	return vmm_held() + slab_held + other_held;
}

static void
note_held(void)
{
	uint64_t h = held_total();
	if (h > st.held_peak)
		st.held_peak = h;
}

/* ---- the least-recently-used list ---- */

static void
lru_remove(struct ebb_buf *b)
{
	if (b->lru_prev)
		b->lru_prev->lru_next = b->lru_next;
	else if (lru_head == b)
		lru_head = b->lru_next;
	else
		return;	/* not on the list */
	if (b->lru_next)
		b->lru_next->lru_prev = b->lru_prev;
	else
		lru_tail = b->lru_prev;
	b->lru_prev = b->lru_next = NULL;
}

static void
lru_append(struct ebb_buf *b)
{
	b->lru_prev = lru_tail;
	b->lru_next = NULL;
	if (lru_tail)
		lru_tail->lru_next = b;
	else
		lru_head = b;
	lru_tail = b;
}

void
mover_touch(struct ebb_buf *b)
{
	if (b->managed != EBB_MANAGED_BIG || b->state != EBB_RESIDENT || b->pinned)
		return;
	if (lru_tail == b)
		return;
	lru_remove(b);
	lru_append(b);
}

void
mover_pin(struct ebb_buf *b)
{
	lru_remove(b);
}

/* ---- the workers ---- */

enum work_kind { W_OFFLOADED, W_RESTORED };

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

/*
 * One queue and one worker a direction: the copies of a stream finish in
 * order, and an offload's memory is released as soon as its copy lands, not
 * after a restore queued before it (whose copy may wait for the device to
 * reach its operation).
 */
static struct wqueue {
	struct work *head, *tail;
	pthread_cond_t cond;	/* work queued, capture ended, stopping */
	pthread_t thread;
} queues[2] = {
	[W_OFFLOADED] = { .cond = PTHREAD_COND_INITIALIZER },
	[W_RESTORED] = { .cond = PTHREAD_COND_INITIALIZER },
};
static pthread_cond_t room_cond = PTHREAD_COND_INITIALIZER;	/* memory was released */
static int workers_started, stopping;
static uint64_t inflight;	/* offload copies not yet retired */

/* The host waited since t0 (for what, serving operation seq, 0 for an
 * allocation): add it to *ns and write an H record. */
static void
host_waited(uint64_t *ns, uint64_t t0, const char *what, uint64_t seq)
{
	uint64_t t = ebb_now_ns(), d = t - t0;
	struct ebb_line l;

	*ns += d;
	if (!ebb_trace_on())
		return;
	ebb_line_begin(&l, 'H');
	ebb_line_u64(&l, t);
	ebb_line_u64(&l, seq);
	ebb_line_u64(&l, d);
	ebb_line_str(&l, what);
	ebb_line_end(&l);
}

/* Wait for a worker to release memory; the time goes to *ns and an H record. */
static void
wait_room(uint64_t *ns, const char *what, uint64_t seq)
{
	uint64_t t0 = ebb_now_ns();
	pthread_cond_wait(&room_cond, lock);
	host_waited(ns, t0, what, seq);
}

static void
enqueue(struct work *w)
{
	struct wqueue *q = &queues[w->kind];

	w->next = NULL;
	if (q->tail)
		q->tail->next = w;
	else
		q->head = w;
	q->tail = w;
	pthread_cond_signal(&q->cond);
}

/*
 * The rates ebb's own copies got, as the device ran them (the time from the
 * copy's stream reaching it to its end): the last RATE_SAMPLES copies of at
 * least RATE_MIN_BYTES a direction. The planner uses the rates measured at
 * start; these are noted beside them when a plan is made (trace notes
 * d2h-gbps-copies, h2d-gbps-copies), to see what its copies then got.
 */
#define RATE_SAMPLES 256
#define RATE_MIN_BYTES ((size_t)4 << 20)
static struct {
	float gbps[RATE_SAMPLES];
	uint32_t n;	/* samples taken, all told */
} rates[2];

static void
rate_sample(int dir, size_t bytes, CUevent start, CUevent end)
{
	float ms = 0;

	if (ebb_real.cuEventElapsedTime(&ms, start, end) != CUDA_SUCCESS || ms <= 0)
		return;
	rates[dir].gbps[rates[dir].n++ % RATE_SAMPLES] = (float)((double)bytes / ((double)ms * 1e6));
}

static int
cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;

	return (x > y) - (x < y);
}

void
mover_copy_rates(double gbps[2], uint32_t count[2])
{
	for (int d = 0; d < 2; d++) {
		uint32_t n = rates[d].n < RATE_SAMPLES ? rates[d].n : RATE_SAMPLES;
		float v[RATE_SAMPLES];

		memcpy(v, rates[d].gbps, n * sizeof v[0]);
		qsort(v, n, sizeof v[0], cmp_float);
		gbps[d] = n > 0 ? (double)v[n / 2] : 0;
		count[d] = n;
	}
}

/* A timing event recorded on s now, before a copy of bytes (NULL: too
 * small to time, or no event): rate_sample's start. */
static CUevent
copy_start(CUstream s, size_t bytes)
{
	CUevent ev = bytes >= RATE_MIN_BYTES ? streams_event_get(1) : NULL;

	if (ev != NULL && ebb_real.cuEventRecord(ev, s) != CUDA_SUCCESS) {
		streams_event_put(ev, 1);
		ev = NULL;
	}
	return ev;
}

/* What a finished copy allows: free the device memory or the host copy. */
static void
retire(struct work *w)
{
	struct ebb_buf *b = w->b;
	struct ebb_line l;

	if (w->start != NULL) {
		rate_sample(w->kind == W_OFFLOADED ? 0 : 1, w->size, w->start, w->ev);
		streams_event_put(w->start, 1);
	}
	if (w->kind == W_OFFLOADED) {
		inflight--;
		if (b->state == EBB_OFFLOADING) {
			uint64_t t0 = ebb_now_ns();
			CUresult ur = vmm_unmap(b->addr, b->rsize);
			st.unmap_ns += ebb_now_ns() - t0;	/* with the mutex held */
			st.unmaps_timed++;
			if (ur != CUDA_SUCCESS) {
				/* still mapped and intact: the buffer stays resident with its
				 * handle (never pooled while mapped) and may move again
				 * later; one the job freed is a freed block like any other */
				st.unmaps_failed++;
				hostpool_free(b->host, b->size);
				b->host = NULL;
				if (b->freed) {
					static const struct ebb_tag done;	/* empty: done */
					block_keep(b->addr, b->handle, &done);
					b->handle = NULL;
				} else {
					b->state = EBB_RESIDENT;
					lru_append(b);
				}
			} else {
				vmm_pool_put(b->handle);
				b->handle = NULL;
				b->state = EBB_ON_HOST;
				trace_move('U', 0, b, b->rsize, "released");
				if (b->freed) {
					hostpool_free(b->host, b->size);
					b->host = NULL;
					vmm_unreserve(b->addr, b->rsize);
				}
			}
		} else if (b->cancelled) {
			hostpool_free(b->host, b->size);
			b->host = NULL;
			b->cancelled = 0;
		}
		streams_event_put(w->ev, 1);
		if (--b->pending == 0 && b->freed)
			recycle(b);
	} else {
		hostpool_free(w->host, w->size);
		if (b != NULL) {
			if (b->arrive == w->ev)
				b->arrive = NULL;
			if (--b->pending == 0 && b->freed)
				recycle(b);
		}
		if (w->pre != NULL) {
			float ms = 0;
			if (ebb_real.cuEventElapsedTime(&ms, w->pre, w->ev) == CUDA_SUCCESS && ms > 0) {
				uint64_t ns = (uint64_t)((double)ms * 1e6);
				st.stall_ns += ns;
				st.stalls_measured++;
				if (ebb_trace_on()) {
					ebb_line_begin(&l, 'W');
					ebb_line_u64(&l, ebb_now_ns());
					ebb_line_u64(&l, w->seq);
					ebb_line_u64(&l, w->size);
					ebb_line_u64(&l, ns);
					ebb_line_end(&l);
				}
			}
			streams_event_put(w->pre, 1);
		}
		if (!w->keep_ev)
			streams_event_put(w->ev, 1);
	}
	free(w);
	pthread_cond_broadcast(&room_cond);
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
	static int said;
	struct ebb_buf *b = w->b;

	ebb_log_once(&said, EBB_LOG_ERROR, "waiting for ebb's copy of buffer %llu to the %s failed "
	    "(cuEventSynchronize and cuEventQuery returned %d): the memory it may still use is kept, "
	    "never released or reused, and the buffer no longer moves (further such copies are not "
	    "reported)", (unsigned long long)b->id, w->kind == W_OFFLOADED ? "host" : "device",
	    (int)err);
	st.copies_abandoned++;
	if (w->start != NULL)
		streams_event_put(w->start, 1);
	if (w->kind == W_OFFLOADED) {
		inflight--;
		if (b->state == EBB_OFFLOADING && !b->freed) {
			b->state = EBB_RESIDENT;	/* still mapped and intact */
			b->pinned |= EBB_PIN_FAILED;
		}
		/* a freed buffer keeps its mapping, its handle and its range */
		b->host = NULL;
		b->cancelled = 0;
		if (b->ev == w->ev)
			b->ev = NULL;
		if (--b->pending == 0 && b->freed)
			recycle(b);
	} else {
		/* later uses wait for b->arrive on the device, as before */
		if (b != NULL) {
			b->pinned |= EBB_PIN_FAILED;
			lru_remove(b);
			if (--b->pending == 0 && b->freed)
				recycle(b);
		}
	}
	free(w);
	pthread_cond_broadcast(&room_cond);
}

/* A worker: waits for its direction's copies to finish (never holding the
 * engine mutex while it waits) and retires them. */
static void *
worker_main(void *arg)
{
	struct wqueue *q = arg;

	ebb_inside = 1;
	streams_relax();	/* its waits never touch, nor wait for, a capture of the job's */
	CUresult cr = ebb_real.cuCtxSetCurrent(ctx);
	if (cr != CUDA_SUCCESS)
		ebb_log(EBB_LOG_ERROR, "ebb's %s worker cannot make the job's context current (error "
		    "%d): the memory of its copies is never released", q == &queues[W_OFFLOADED] ?
		    "offload" : "restore", (int)cr);
	pthread_mutex_lock(lock);
	for (;;) {
		while (!stopping && q->head == NULL)
			pthread_cond_wait(&q->cond, lock);
		if (stopping && q->head == NULL)
			break;
		/* it stays queued, in flight to inflight_sized, until retired */
		struct work *w = q->head;
		pthread_mutex_unlock(lock);
		CUresult r = streams_event_wait(w->ev);
		if (r == CUDA_SUCCESS && w->pre != NULL && streams_event_wait(w->pre) != CUDA_SUCCESS) {
			/* the stall's timing only: the copy itself is done */
			w->pre = NULL;
		}
		pthread_mutex_lock(lock);
		q->head = w->next;	/* only this worker takes from q */
		if (q->head == NULL)
			q->tail = NULL;
		if (r == CUDA_SUCCESS)
			retire(w);
		else
			abandon(w, r);
	}
	pthread_mutex_unlock(lock);
	return NULL;
}

/* ---- slabs for small allocations ---- */

struct slot {
	CUdeviceptr p;
	struct ebb_tag tag;
	struct slot *next;
};

static struct slabclass {
	size_t size;
	struct slot *ready;			/* free and done */
	struct slot *pending, *pending_tail;	/* free, reusable once their tag is done */
	CUdeviceptr bump;			/* next uncarved byte of the current slab */
	size_t left;				/* bytes left in it */
} classes[NCLASSES];
static int nclasses;

static void
slab_setup(void)
{
	/* 256 B to 1 MiB: powers of two and one and a half times them */
	nclasses = 0;
	for (size_t s = 256; s <= SMALL_MAX && nclasses < NCLASSES; s *= 2) {
		classes[nclasses++].size = s;
		if (s + s / 2 <= SMALL_MAX && nclasses < NCLASSES)
			classes[nclasses++].size = s + s / 2;
	}
}

static struct slabclass *
class_of(size_t size)
{
	for (int i = 0; i < nclasses; i++)
		if (classes[i].size >= size)
			return &classes[i];
	return NULL;
}

/* ---- making room under the limit ---- */

static int offload(struct ebb_buf *b, uint64_t seq, const char *why);
static int uses_orderable(struct ebb_buf *b);

/* Unmap a freed block of rsize bytes (any size when 0) whose tag is done,
 * or, when wait, after waiting for the oldest one's, and pool its handle.
 * Returns 1 when one was reclaimed. */
static int
reclaim_block(int wait, size_t rsize)
{
	struct block **oldest = NULL, **p;

	for (p = &blocks; *p != NULL; p = &(*p)->next) {
		if (rsize != 0 && (*p)->h->size != rsize)
			continue;
		if (tag_done(&(*p)->tag))
			break;
		oldest = p;	/* the list runs from the newest free */
	}
	if (*p == NULL) {
		/*
		 * None is done: wait for the oldest, which the device passes
		 * first. The newest is often the job's last free, right before
		 * the allocation that waits: waiting for it let the device run
		 * dry while the host then mapped the memory (2 ms a time on W2).
		 * The wait holds the engine mutex: the work it waits for needs
		 * no lock.
		 */
		if (!wait || oldest == NULL || tag_sync(&(*oldest)->tag) != CUDA_SUCCESS)
			return 0;
		p = oldest;
	}
	struct block *k = *p;
	*p = k->next;
	if (vmm_unmap(k->va, k->h->size) != CUDA_SUCCESS) {
		/* still mapped: the range and its handle are never used again */
		st.unmaps_failed++;
		free(k);
		return reclaim_block(wait, rsize);
	}
	vmm_unreserve(k->va, k->h->size);
	vmm_pool_put(k->h);
	free(k);
	return 1;
}

/* Whether an operation using b is on its way to the driver (its use noted,
 * not yet submitted): then nothing may move b. */
static int
in_flight(const struct ebb_buf *b)
{
	for (uint8_t i = 0; i < b->nstreams; i++)
		if (b->last[i].seq > streams_last((struct ebb_stream *)b->last[i].stream))
			return 1;
	return 0;
}

/* Whether every queued use of b has completed. */
static int
idle(const struct ebb_buf *b)
{
	for (uint8_t i = 0; i < b->nstreams; i++)
		if (!streams_done((struct ebb_stream *)b->last[i].stream, b->last[i].seq))
			return 0;
	return 1;
}

/*
 * Offload the least recently used movable buffer not used by operation seq
 * (of rsize bytes when not 0, among the SIZED_SCAN least recent). Returns 1
 * when an offload was issued.
 */
static int
evict_one(uint64_t seq, size_t rsize)
{
	static int said_host;
	struct ebb_buf *first = NULL, *pick = NULL;
	int looked = 0, seen = 0;

	for (struct ebb_buf *b = lru_head; b != NULL && looked < IDLE_SCAN && seen < SIZED_SCAN;
	    b = b->lru_next) {
		seen++;
		/* not pinned, not in an operation being issued, no copy of it in flight */
		/* (a restore copy in flight is fine: the offload waits for it) */
		if (b->pinned || b->cancelled || (seq != 0 && b->last_seq == seq) || in_flight(b) ||
		    (rsize != 0 && b->rsize != rsize) || (capturing && !uses_orderable(b)))
			continue;
		if (first == NULL)
			first = b;
		looked++;
		if (idle(b)) {
			pick = b;
			break;
		}
	}
	if (pick == NULL)
		pick = first;
	if (pick == NULL)
		return 0;
	if (offload(pick, seq, "limit"))
		return 1;
	host_short = 1;
	if (!said_host) {
		ebb_log(EBB_LOG_WARN, "no pinned host memory for a %llu-byte buffer (%llu bytes pinned, "
		    "%llu in use; EBB_HOST_LIMIT, or the system refuses to pin more): buffers stay on "
		    "the device", (unsigned long long)pick->size,
		    (unsigned long long)hostpool_pinned(), (unsigned long long)hostpool_used());
		said_host = 1;
	}
	st.refusals++;
	trace_move('J', seq, pick, pick->size, "host-memory");
	return 0;
}

/* Offload copies in flight of buffers of rsize bytes. */
static int
inflight_sized(size_t rsize)
{
	for (struct work *w = queues[W_OFFLOADED].head; w != NULL; w = w->next)
		if (w->b->rsize == rsize && w->b->state == EBB_OFFLOADING)
			return 1;
	return 0;
}

/*
 * A handle of rsize bytes within the limit if one is to be had without
 * waiting or moving anything: a pooled one, a new one (unless *device_full),
 * a freed block of that size the device has passed. Else NULL, with *err
 * set when creating one failed other than for want of memory, and
 * *device_full set when the device itself is full.
 */
static struct vmm_handle *
try_handle(size_t rsize, int *device_full, CUresult *err)
{
	for (;;) {
		struct vmm_handle *h = vmm_pool_take(rsize);
		if (h != NULL)
			return h;
		if (!*device_full && held_total() + rsize <= limit) {
			CUresult r = vmm_create(rsize, &h);
			if (r == CUDA_SUCCESS) {
				st.handles_created++;
				note_held();
				return h;
			}
			if (r != CUDA_ERROR_OUT_OF_MEMORY) {
				*err = r;
				return NULL;
			}
			*device_full = 1;	/* the device itself is full: make room, then try again */
		}
		if (!reclaim_block(0, rsize))
			return NULL;
	}
}

/*
 * Make a physical handle of rsize bytes available within the limit, for
 * operation seq (whose buffers are not evicted; 0 for an allocation).
 * Over the limit, a pooled handle or a passed freed block of that size comes
 * first; then memory held idle in other sizes (pooled handles, passed freed
 * blocks) is released, so that a new handle fits; only then does the host
 * wait for offloads in flight (one of that size first, before evicting
 * another buffer) or evict. The plan counts bytes, not handles: waiting for
 * an offload of the same size while a landed one of another size sat in the
 * pool held W2's optimizer step up by 70 ms an iteration. Returns the
 * handle, or NULL with *err set (CUDA_ERROR_OUT_OF_MEMORY when nothing more
 * can be moved).
 */
static struct vmm_handle *
get_handle(size_t rsize, uint64_t seq, int no_evict, CUresult *err)
{
	int device_full = 0;

	for (;;) {
		CUresult r = CUDA_SUCCESS;
		struct vmm_handle *h = try_handle(rsize, &device_full, &r);
		if (h != NULL)
			return h;
		if (r != CUDA_SUCCESS) {
			*err = r;
			return NULL;
		}
		/* idle memory of other sizes before any wait */
		if ((h = vmm_pool_any()) != NULL) {
			vmm_release(h);
			device_full = 0;
			continue;
		}
		if (reclaim_block(0, 0))
			continue;
		if (inflight_sized(rsize)) {
			wait_room(&st.wait_room_ns, "room", seq);
			continue;
		}
		/* under a plan, its offloads in flight and the job's frees make the
		 * room: nothing the plan keeps is evicted before they are waited for */
		int plan = planned || no_evict;
		if (!plan && evict_one(seq, rsize))
			continue;
		if (inflight > 0) {
			wait_room(&st.wait_room_ns, "room", seq);
			device_full = 0;
			continue;
		}
		/* memory the job freed ahead of the device: wait for the device to
		 * get there, as the plan assumed */
		if (plan) {
			uint64_t t0 = ebb_now_ns();
			int got = reclaim_block(1, 0);
			host_waited(&st.wait_room_ns, t0, "frees", seq);
			if (got)
				continue;
		}
		if (no_evict) {
			*err = CUDA_ERROR_OUT_OF_MEMORY;
			return NULL;
		}
		if (evict_one(seq, 0))
			continue;
		if (reclaim_block(1, 0))
			continue;
		*err = CUDA_ERROR_OUT_OF_MEMORY;
		return NULL;
	}
}

/* Explain an allocation or restore ebb must refuse: the job gets
 * CUDA_ERROR_OUT_OF_MEMORY. The first is always said, later ones at
 * EBB_VERBOSE>=1 (the summary counts them all). */
static void
refuse(size_t size, const char *why)
{
	static int said;
	uint64_t movable = 0;

	for (struct ebb_buf *b = lru_head; b != NULL; b = b->lru_next)
		movable += b->size;
	st.refusals++;
	int level = said ? EBB_LOG_NOTE : EBB_LOG_WARN;
	said = 1;
	ebb_log(level, "out of memory for %zu bytes under "
	    "EBB_LIMIT=%llu: %llu bytes held, "
	    "%llu of them in movable resident buffers, %llu offloads in flight (%s%s)", size,
	    (unsigned long long)limit, (unsigned long long)held_total(),
	    (unsigned long long)movable, (unsigned long long)inflight, why,
	    host_short ? "; pinned host memory ran out" : "");
	trace_move('J', 0, NULL, size, why);
}

/* ---- initialisation ---- */

/* One direction's bandwidth: the best of three copies of bytes. */
static double
time_copies(int to_host, CUdeviceptr dev, void *host, size_t bytes)
{
	CUstream s = to_host ? d2h : h2d;
	CUevent e0 = streams_event_get(1), e1 = streams_event_get(1);
	float best = 0;

	for (int rep = 0; e0 != NULL && e1 != NULL && rep < 3; rep++) {
		float ms = 0;
		CUresult r = ebb_real.cuEventRecord(e0, s);
		if (r == CUDA_SUCCESS)
			r = to_host ? ebb_real.cuMemcpyDtoHAsync_v2(host, dev, bytes, s) :
			    ebb_real.cuMemcpyHtoDAsync_v2(dev, host, bytes, s);
		if (r == CUDA_SUCCESS)
			r = ebb_real.cuEventRecord(e1, s);
		if (r == CUDA_SUCCESS)
			r = ebb_real.cuEventSynchronize(e1);
		if (r == CUDA_SUCCESS)
			r = ebb_real.cuEventElapsedTime(&ms, e0, e1);
		if (r != CUDA_SUCCESS)
			break;
		if (ms > 0 && (best == 0 || ms < best))
			best = ms;
	}
	ebb_real.cuStreamSynchronize(s);	/* nothing of it is in flight when it is unmapped */
	if (e0 != NULL)
		streams_event_put(e0, 1);
	if (e1 != NULL)
		streams_event_put(e1, 1);
	return best > 0 ? (double)bytes / ((double)best / 1e3) : 0;
}

/*
 * Both directions at once, half of bytes each way (from one half of dev and
 * host, into the other): what each direction gets while the other copies
 * too, the median of BOTH_TRIALS. The engines share the link (an H200: 55.4
 * GB/s alone, 101.5 GB/s in all at once), and where a plan stalls both are
 * busy. A direction's rate then varies from copy to copy (on an H200, 1 GiB
 * to the device: 40 to 52 GB/s); the best of three once came out at 45.6
 * GB/s for all three, and the plan waited 0.45 s where the step idled 0.39.
 */
#define BOTH_TRIALS 7

static void
time_both(CUdeviceptr dev, void *host, size_t bytes, double *d2h_bps, double *h2d_bps)
{
	size_t half = bytes / 2;
	CUevent e[4];
	float times[2][BOTH_TRIALS];
	int got = 0, n = 0;

	for (int k = 0; k < 4; k++)
		if ((e[k] = streams_event_get(1)) != NULL)
			got++;
	for (int rep = 0; got == 4 && rep < BOTH_TRIALS; rep++) {
		CUresult r = ebb_real.cuEventRecord(e[0], d2h);
		if (r == CUDA_SUCCESS)
			r = ebb_real.cuEventRecord(e[2], h2d);
		if (r == CUDA_SUCCESS)
			r = ebb_real.cuMemcpyDtoHAsync_v2(host, dev, half, d2h);
		if (r == CUDA_SUCCESS)
			r = ebb_real.cuMemcpyHtoDAsync_v2(dev + half, (char *)host + half, half, h2d);
		if (r == CUDA_SUCCESS)
			r = ebb_real.cuEventRecord(e[1], d2h);
		if (r == CUDA_SUCCESS)
			r = ebb_real.cuEventRecord(e[3], h2d);
		float ms[2] = { 0, 0 };
		for (int d = 0; d < 2 && r == CUDA_SUCCESS; d++) {
			r = ebb_real.cuEventSynchronize(e[2 * d + 1]);
			if (r == CUDA_SUCCESS)
				r = ebb_real.cuEventElapsedTime(&ms[d], e[2 * d], e[2 * d + 1]);
		}
		if (r != CUDA_SUCCESS || ms[0] <= 0 || ms[1] <= 0)
			break;
		times[0][n] = ms[0];
		times[1][n] = ms[1];
		n++;
	}
	ebb_real.cuStreamSynchronize(d2h);
	ebb_real.cuStreamSynchronize(h2d);
	for (int k = 0; k < 4; k++)
		if (e[k] != NULL)
			streams_event_put(e[k], 1);
	*d2h_bps = *h2d_bps = 0;
	if (n < BOTH_TRIALS)
		return;	/* a copy failed: the rates alone count */
	for (int d = 0; d < 2; d++) {
		qsort(times[d], (size_t)n, sizeof times[d][0], cmp_float);
		double bps = (double)half / ((double)times[d][n / 2] / 1e3);
		*(d == 0 ? d2h_bps : h2d_bps) = bps;
	}
}

/* The copy bandwidth the planner assumes: EBB_D2H_GBPS / EBB_H2D_GBPS, or
 * measured now, on an idle device, with pinned memory: each direction's
 * while the other copies too, where that is less than alone. */
static void
measure_bandwidth(const struct ebb_conf *conf)
{
	CUdeviceptr dev = 0;
	size_t bytes = (size_t)256 << 20;

	/* the device memory it takes stays well within EBB_LIMIT */
	if (bytes > limit / 8)
		bytes = (size_t)(limit / 8) & ~(((size_t)1 << 20) - 1);
	if (bytes < ((size_t)1 << 20))
		bytes = (size_t)1 << 20;
	bw_d2h = conf->d2h_gbps * 1e9;
	bw_h2d = conf->h2d_gbps * 1e9;
	if (bw_d2h > 0 && bw_h2d > 0)
		return;
	/* memory as buffers get it, so that the handle is pooled after (never cuMemFree) */
	struct vmm_handle *h = NULL;
	bytes = vmm_round(bytes);
	if (vmm_create(bytes, &h) != CUDA_SUCCESS)
		h = NULL;
	else if (vmm_reserve(bytes, &dev) != CUDA_SUCCESS)
		dev = 0;
	else if (vmm_map(dev, h) != CUDA_SUCCESS) {
		vmm_unreserve(dev, bytes);
		dev = 0;
	}
	void *host = dev ? hostpool_alloc(bytes) : NULL;
	double alone[2] = { bw_d2h, bw_h2d }, both[2] = { 0, 0 };
	if (host != NULL) {
		if (bw_d2h <= 0)
			alone[0] = time_copies(1, dev, host, bytes);
		if (bw_h2d <= 0)
			alone[1] = time_copies(0, dev, host, bytes);
		time_both(dev, host, bytes, &both[0], &both[1]);
		hostpool_free(host, bytes);
		/* where plans stall both engines copy: the rate both at once,
		 * where it is the lower, is what a stalled plan gets (plans at the
		 * rates alone ran slower: bench/RESULTS.md) */
		if (bw_d2h <= 0)
			bw_d2h = both[0] > 0 && both[0] < alone[0] ? both[0] : alone[0];
		if (bw_h2d <= 0)
			bw_h2d = both[1] > 0 && both[1] < alone[1] ? both[1] : alone[1];
	}
	/* time_copies waited for its copies; memory still mapped is not reused */
	int mapped = dev != 0 && vmm_unmap(dev, bytes) != CUDA_SUCCESS;
	if (dev != 0 && !mapped)
		vmm_unreserve(dev, bytes);
	if (h != NULL) {
		st.handles_created++;
		note_held();
		if (!mapped)
			vmm_pool_put(h);
	}
	if (bw_d2h <= 0 || bw_h2d <= 0)
		ebb_log(EBB_LOG_WARN, "could not measure the copy bandwidth; the plan needs "
		    "EBB_D2H_GBPS and EBB_H2D_GBPS");
	else
		ebb_log(EBB_LOG_INFO, "copy bandwidth: %.1f GB/s to the host, %.1f GB/s to the device "
		    "(alone %.1f and %.1f, both at once %.1f and %.1f)", bw_d2h / 1e9, bw_h2d / 1e9,
		    alone[0] / 1e9, alone[1] / 1e9, both[0] / 1e9, both[1] / 1e9);
}

int
mover_init(const struct ebb_conf *conf, pthread_mutex_t *mutex, void (*put)(struct ebb_buf *))
{
	CUdevice dev;
	size_t total = 0;

	if (on)
		return 0;
	if (failed_why != NULL)
		return -1;
	if (ebb_real.cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || ctx == NULL)
		return -1;	/* not yet: try again at the next allocation */
	lock = mutex;
	recycle = put;
	CUresult r = ebb_real.cuCtxGetDevice(&dev);
	if (r != CUDA_SUCCESS) {
		ebb_log(EBB_LOG_WARN, "cuCtxGetDevice failed (error %d): ebb cannot offload, EBB_LIMIT "
		    "is not enforced and allocations go to the driver", (int)r);
		failed_why = "cuCtxGetDevice failed: ebb could not offload";
		return -1;
	}
	if (vmm_init(dev) < 0) {
		failed_why = "the device's virtual memory management is not there: ebb could not offload";
		return -1;
	}
	r = ebb_real.cuDeviceTotalMem_v2(&total, dev);
	if (r != CUDA_SUCCESS && conf->limit == 0) {
		ebb_log(EBB_LOG_WARN, "cuDeviceTotalMem failed (error %d) and EBB_LIMIT is not set: "
		    "ebb does not know what to hold the job to; it does not offload", (int)r);
		failed_why = "cuDeviceTotalMem failed and EBB_LIMIT is not set: ebb did not offload";
		return -1;
	}
	limit = conf->limit ? conf->limit : total;
	min_offload = conf->min_offload_bytes;
	if (min_offload < vmm_granularity())
		min_offload = vmm_granularity();
	hostpool_init(conf->host_limit, (uint64_t)1 << 30);
	slab_setup();
	size_t dfree = 0, dtotal = 0;
	if (ebb_real.cuMemGetInfo_v2(&dfree, &dtotal) == CUDA_SUCCESS && dtotal >= dfree)
		used_at_start = (uint64_t)(dtotal - dfree) - held_total();
	if (ebb_real.cuStreamCreate(&d2h, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS ||
	    ebb_real.cuStreamCreate(&h2d, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) {
		ebb_log(EBB_LOG_WARN, "cannot create ebb's copy streams; ebb moves nothing");
		failed_why = "ebb's copy streams could not be created: ebb could not offload";
		return -1;
	}
	ebb_cupti_ignore_stream(ctx, d2h);
	ebb_cupti_ignore_stream(ctx, h2d);
	measure_bandwidth(conf);
	for (int k = 0; k < 2; k++) {
		int e = pthread_create(&queues[k].thread, NULL, worker_main, &queues[k]);
		if (e != 0) {
			ebb_log(EBB_LOG_WARN, "cannot start ebb's worker threads (%s); ebb moves "
			    "nothing", strerror(e));
			/* the one started waits for work that never comes */
			failed_why = "ebb's worker threads could not start: ebb could not offload";
			return -1;
		}
	}
	workers_started = 1;
	on = 1;
	if (total != 0)
		ebb_log(EBB_LOG_NOTE, "offloading: EBB_LIMIT=%llu bytes of %zu on device %d, buffers "
		    "of %llu bytes or more move", (unsigned long long)limit, total, (int)dev,
		    (unsigned long long)min_offload);
	else
		ebb_log(EBB_LOG_NOTE, "offloading: EBB_LIMIT=%llu bytes on device %d (its size is "
		    "unknown), buffers of %llu bytes or more move", (unsigned long long)limit, (int)dev,
		    (unsigned long long)min_offload);
	return 0;
}

void
mover_sample_device(void)
{
	size_t dfree = 0, dtotal = 0;

	if (!on || used_at_start == 0 ||
	    ebb_real.cuMemGetInfo_v2(&dfree, &dtotal) != CUDA_SUCCESS || dtotal < dfree)
		return;
	uint64_t used = (uint64_t)(dtotal - dfree), held = held_total() + used_at_start;
	if (used > held && used - held > st.beyond_held)
		st.beyond_held = used - held;
}

int
mover_on(void)
{
	return on;
}

void
mover_capture(int active)
{
	capturing = active;
}

int
mover_unheld(char *why, size_t len)
{
	if (failed_why != NULL) {
		snprintf(why, len, "%s", failed_why);
		return 1;
	}
	if (st.over_limit > 0) {
		snprintf(why, len, "allocations the driver served took the job to %llu bytes, over "
		    "EBB_LIMIT=%llu", (unsigned long long)st.held_peak, (unsigned long long)limit);
		return 1;
	}
	return 0;
}

void
mover_note_unmanaged(int64_t bytes)
{
	static int said;

	other_held += (uint64_t)bytes;
	note_held();
	/* the driver's allocations are not refused: they can take the job over
	 * the limit (those of a stream capture, PyTorch's graph pools) */
	if (bytes > 0 && on && held_total() > limit) {
		st.over_limit++;
		ebb_log_once(&said, EBB_LOG_WARN, "allocations the driver served (%llu bytes: made "
		    "during a stream capture, or not served by ebb) take what the job holds to %llu "
		    "bytes, over EBB_LIMIT=%llu; ebb cannot move them (further such are counted in "
		    "the summary)", (unsigned long long)other_held, (unsigned long long)held_total(),
		    (unsigned long long)limit);
	}
}

/* ---- allocation ---- */

/* A new slab within the limit (making room as for a handle of its size). */
static CUresult
new_slab(CUdeviceptr *out)
{
	for (int tries = 0;; tries++) {
		if (held_total() + SLAB_BYTES <= limit) {
			CUresult r = ebb_real.cuMemAlloc_v2(out, SLAB_BYTES);
			if (r == CUDA_SUCCESS) {
				slab_held += SLAB_BYTES;
				note_held();
				return r;
			}
			if (r != CUDA_ERROR_OUT_OF_MEMORY || tries > 64)
				return r;
		}
		CUresult err;
		struct vmm_handle *h = get_handle(vmm_round(SLAB_BYTES), 0, 0, &err);
		if (h == NULL)
			return err;
		vmm_release(h);	/* its room is the slab's */
	}
}

static CUresult
alloc_small(struct ebb_buf *b, size_t size, struct ebb_stream *s, CUdeviceptr *dptr)
{
	struct slabclass *c = class_of(size);
	struct slot *x = c->ready;

	if (x != NULL) {
		c->ready = x->next;
	} else {
		/* the oldest pending slots whose tag is done, or on this stream */
		struct slot **p = &c->pending, *prev = NULL;
		int looked = 0;
		for (; *p != NULL && looked < 64; prev = *p, p = &(*p)->next, looked++) {
			struct slot *y = *p;
			int same = s != NULL && y->tag.n == 1 && !y->tag.all && y->tag.s[0] == s;
			if (same || tag_done(&y->tag)) {
				*p = y->next;
				if (c->pending_tail == y)
					c->pending_tail = prev;
				x = y;
				break;
			}
		}
	}
	/* None is done: a marker where the oldest one's streams now are, so
	 * that it is done once the device passes its free (streams.c marks
	 * only every few operations). Over the limit, it is waited for before
	 * a new slab makes room by moving buffers, or fails: the device passes
	 * its last use soon, as it passes the frees the job made. */
	if (x == NULL && c->pending != NULL)
		tag_mark(&c->pending->tag);
	if (x == NULL && c->left < c->size && c->pending != NULL &&
	    held_total() + SLAB_BYTES > limit) {
		uint64_t t0 = ebb_now_ns();
		CUresult r = tag_sync(&c->pending->tag);
		host_waited(&st.wait_room_ns, t0, "frees", 0);
		if (r == CUDA_SUCCESS) {
			x = c->pending;
			c->pending = x->next;
			if (c->pending_tail == x)
				c->pending_tail = NULL;
		}
	}
	CUdeviceptr p;
	if (x != NULL) {
		p = x->p;
		free(x);
	} else {
		if (c->left < c->size) {
			CUresult r = new_slab(&c->bump);
			if (r == CUDA_ERROR_OUT_OF_MEMORY) {
				refuse(size, "no room for a new slab of small buffers");
				return r;
			}
			if (r != CUDA_SUCCESS) {
				ebb_log(EBB_LOG_INFO, "a new slab failed (error %d); the driver serves this "
				    "allocation", (int)r);
				return MOVER_DECLINE;
			}
			c->left = SLAB_BYTES;
		}
		p = c->bump;
		c->bump += c->size;
		c->left -= c->size;
	}
	b->managed = EBB_MANAGED_SMALL;
	b->rsize = c->size;
	*dptr = p;
	return CUDA_SUCCESS;
}

static CUresult
alloc_impl(struct ebb_buf *b, size_t size, struct ebb_stream *s, CUdeviceptr *dptr)
{
	static int said_create;

	if (!mover_on())
		return MOVER_DECLINE;
	if (size == 0)
		return MOVER_DECLINE;	/* the driver's own answer */
	CUcontext cur = NULL;
	if (ebb_real.cuCtxGetCurrent(&cur) != CUDA_SUCCESS || cur != ctx)
		return MOVER_DECLINE;	/* ebb moves the buffers of one context, the first */
	if (size <= SMALL_MAX && class_of(size) != NULL)
		return alloc_small(b, size, s, dptr);
	size_t rsize = vmm_round(size);
	if (rsize > limit) {
		refuse(size, "larger than EBB_LIMIT");
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	/* a freed block of this size: done, or ordered on this stream */
	struct block **pick = NULL;
	for (struct block **p = &blocks; *p != NULL; p = &(*p)->next) {
		if ((*p)->h->size != rsize)
			continue;
		const struct ebb_tag *t = &(*p)->tag;
		if (tag_done(t) || (s != NULL && t->n == 1 && !t->all && t->s[0] == s)) {
			pick = p;
			break;
		}
		if (pick == NULL && s != NULL)
			pick = p;	/* usable after a stream wait */
	}
	CUdeviceptr va;
	struct vmm_handle *h;
	if (pick != NULL && (tag_done(&(*pick)->tag) ||
	    tag_wait(&(*pick)->tag, streams_handle(s)) == CUDA_SUCCESS)) {
		struct block *k = *pick;
		*pick = k->next;
		va = k->va;
		h = k->h;
		free(k);
	} else {
		CUresult err;
		h = get_handle(rsize, 0, 0, &err);
		if (h == NULL) {
			if (err != CUDA_ERROR_OUT_OF_MEMORY) {
				if (!said_create)
					ebb_log(EBB_LOG_WARN, "cuMemCreate failed (error %d): new buffers stay "
					    "where the driver puts them and do not move", (int)err);
				said_create = 1;
				st.refusals++;
				trace_move('J', 0, NULL, size, "create");
				return MOVER_DECLINE;
			}
			refuse(size, capturing ? "nothing more can be moved: what a stream capture "
			    "uses, and what is allocated during it, stays on the device" :
			    "nothing more can be moved");
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
		CUresult r = vmm_reserve(rsize, &va);
		if (r == CUDA_SUCCESS && (r = vmm_map(va, h)) != CUDA_SUCCESS)
			vmm_unreserve(va, rsize);
		if (r != CUDA_SUCCESS) {
			vmm_pool_put(h);
			ebb_log(EBB_LOG_WARN, "mapping a %zu-byte buffer failed (error %d); it is left to "
			    "the driver", size, (int)r);
			return MOVER_DECLINE;
		}
	}
	b->managed = EBB_MANAGED_BIG;
	b->state = EBB_RESIDENT;
	b->rsize = rsize;
	b->handle = h;
	if (size < min_offload)
		b->pinned |= EBB_PIN_SMALL;
	else
		lru_append(b);
	*dptr = va;
	return CUDA_SUCCESS;
}

static int
free_impl(struct ebb_buf *b, const struct ebb_tag *tag)
{
	if (b->managed == EBB_MANAGED_SMALL) {
		struct slabclass *c = class_of(b->rsize);
		struct slot *x = malloc(sizeof *x);
		if (x == NULL)
			return 0;	/* the slot is lost; nothing else breaks */
		x->p = b->addr;
		x->tag = *tag;
		x->next = NULL;
		if (c->pending_tail)
			c->pending_tail->next = x;
		else
			c->pending = x;
		c->pending_tail = x;
		return 0;
	}
	if (b->managed != EBB_MANAGED_BIG)
		return 0;
	lru_remove(b);
	switch (b->state) {
	case EBB_RESIDENT: {
		/* freed before a restore copy into it landed (rare): let it land */
		CUresult r = CUDA_SUCCESS;
		if (b->arrive != NULL)
			r = streams_event_wait(b->arrive);
		/*
		 * A cancelled copy to the host may still read it: the d2h stream
		 * runs behind other copies, and nothing orders it after the free,
		 * so the memory could be unmapped (once the job's streams pass the
		 * free) before that copy has run. Let it run first (rare: a use
		 * and a free between an offload and its copy).
		 */
		if (r == CUDA_SUCCESS && b->cancelled &&
		    ebb_real.cuEventQuery(b->ev) == CUDA_ERROR_NOT_READY) {
			uint64_t t0 = ebb_now_ns();
			r = streams_event_wait(b->ev);
			host_waited(&st.wait_landing_ns, t0, "landing", 0);
		}
		if (r != CUDA_SUCCESS) {
			/* a copy may still use it: the memory is never reused */
			st.copies_abandoned++;
		} else if (block_keep(b->addr, b->handle, tag) < 0) {
			/* keep it simple: wait, then pool the handle */
			if (tag_sync(tag) == CUDA_SUCCESS && vmm_unmap(b->addr, b->rsize) == CUDA_SUCCESS) {
				vmm_unreserve(b->addr, b->rsize);
				vmm_pool_put(b->handle);
			}
		} else {
			tag_mark(tag);
		}
		b->handle = NULL;
		if (b->pending) {	/* a cancelled offload still holds its host copy */
			b->freed = 1;
			return 1;
		}
		return 0;
	}
	case EBB_OFFLOADING:
		b->freed = 1;
		return 1;
	default:	/* on the host: its copy and its range go back */
		hostpool_free(b->host, b->size);
		b->host = NULL;
		vmm_unreserve(b->addr, b->rsize);
		if (b->pending) {
			b->freed = 1;
			return 1;
		}
		return 0;
	}
}

/* ---- offload and restore ---- */

/* Make stream d2h wait for every queued use of b. Returns 0 or a CUresult. */
static CUresult
after_uses(struct ebb_buf *b)
{
	if (b->arrive != NULL) {
		CUresult r = ebb_real.cuStreamWaitEvent(d2h, b->arrive, 0);
		if (r != CUDA_SUCCESS)
			return r;
	}
	for (uint8_t i = 0; i < b->nstreams; i++) {
		CUresult r = streams_wait((struct ebb_stream *)b->last[i].stream, b->last[i].seq, d2h);
		if (r != CUDA_SUCCESS)
			return r;
	}
	return CUDA_SUCCESS;
}

struct wait_all {
	CUresult r;
};

static void
wait_stream(struct ebb_stream *s, void *p)
{
	struct wait_all *w = p;
	if (w->r == CUDA_SUCCESS)
		w->r = streams_wait(s, streams_last(s), d2h);
}

/* Whether an offload of b can be ordered after its uses now: while a
 * capture runs, no marker can be recorded on a capturing stream, so one
 * recorded before must cover the use. */
static int
uses_orderable(struct ebb_buf *b)
{
	if (b->streams_overflow)
		return 0;
	for (uint8_t i = 0; i < b->nstreams; i++)
		if (!streams_orderable((struct ebb_stream *)b->last[i].stream, b->last[i].seq))
			return 0;
	return 1;
}

/* This thread issued a move since mover_moved_here last asked. */
static _Thread_local int moved_here;

int
mover_moved_here(void)
{
	int m = moved_here;

	moved_here = 0;
	return m;
}

/* Copy b to the host behind its uses; the worker releases its memory once
 * the copy is done. Returns 1 when issued. */
static int
offload(struct ebb_buf *b, uint64_t seq, const char *why)
{
	uint64_t t0 = ebb_now_ns(), pin0 = hostpool_pin_ns();
	moved_here = 1;
	void *host = hostpool_alloc(b->size);
	if (host == NULL)
		return 0;
	st.host_pinned = hostpool_pinned();
	/* Pinning a new slab is a cost of the pool's growth, paid once: the
	 * cost of an offload in the plan's prediction leaves it out. */
	t0 += hostpool_pin_ns() - pin0;
	const char *step = "waiting for its uses";
	CUresult r = after_uses(b);
	if (r == CUDA_SUCCESS && b->streams_overflow) {
		struct wait_all w = { CUDA_SUCCESS };
		streams_each(wait_stream, &w);
		r = w.r;
	}
	/* the time the copy itself takes, after the waits above (rate_sample) */
	CUevent ev = NULL, start = r == CUDA_SUCCESS ? copy_start(d2h, b->size) : NULL;
	if (r == CUDA_SUCCESS) {
		step = "cuMemcpyDtoHAsync";
		r = ebb_real.cuMemcpyDtoHAsync_v2(host, b->addr, b->size, d2h);
	}
	if (r == CUDA_SUCCESS && (ev = streams_event_get(1)) == NULL) {
		step = "cuEventCreate";
		r = CUDA_ERROR_OUT_OF_MEMORY;
	}
	if (r == CUDA_SUCCESS) {
		step = "cuEventRecord";
		r = ebb_real.cuEventRecord(ev, d2h);
	}
	struct work *w = r == CUDA_SUCCESS ? malloc(sizeof *w) : NULL;
	if (w == NULL) {
		/* The copy may be queued: leave the buffer resident, and the host
		 * memory to a later copy (never reused while this one may run). */
		ebb_log(EBB_LOG_WARN, "offloading buffer %llu (%llu bytes at 0x%llx, host %p) failed: "
		    "%s returned %d; it stays on the device", (unsigned long long)b->id,
		    (unsigned long long)b->size, (unsigned long long)b->addr, host, step, (int)r);
		b->pinned |= EBB_PIN_FAILED;
		lru_remove(b);
		if (ev)
			streams_event_put(ev, 1);
		if (start)
			streams_event_put(start, 1);
		return 0;
	}
	lru_remove(b);
	b->state = EBB_OFFLOADING;
	b->host = host;
	b->ev = ev;
	b->pending++;
	inflight++;
	st.offloads++;
	st.bytes_d2h += b->size;
	*w = (struct work){ .kind = W_OFFLOADED, .ev = ev, .start = start, .b = b, .size = b->size };
	enqueue(w);
	trace_move('O', seq, b, b->size, why);
	st.offload_host_ns += ebb_now_ns() - t0;
	st.offloads_timed++;
	return 1;
}

/*
 * Map h at b's address and copy b back on the h2d stream (after operation
 * after_seq of stream after, when after is not NULL). Later uses wait for
 * b->arrive. pre: an event on the consumer for timing the stall, or NULL.
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
		r = streams_wait(after, after_seq, h2d);
	CUevent start = r == CUDA_SUCCESS ? copy_start(h2d, b->size) : NULL;
	if (r == CUDA_SUCCESS)
		r = ebb_real.cuMemcpyHtoDAsync_v2(b->addr, b->host, b->size, h2d);
	if (r == CUDA_SUCCESS)
		r = ebb_real.cuEventRecord(ev, h2d);
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
			.host = b->host, .size = b->size, .seq = seq, .keep_ev = capturing };
		b->pending++;
		enqueue(w);
	} else if (start != NULL) {
		streams_event_put(start, 1);
	}
	/* without a work item the host copy is simply not reused */
	b->host = NULL;
	b->handle = h;
	b->state = EBB_RESIDENT;
	b->arrive = w != NULL ? ev : NULL;
	lru_append(b);
	st.restores++;
	st.bytes_h2d += b->size;
	trace_move('B', seq, b, b->size, why);
	st.restore_host_ns += ebb_now_ns() - t0;
	st.restores_timed++;
	return CUDA_SUCCESS;
}

/* Bring b back to the device for operation seq on consumer, which waits
 * for the copy (timed as a stall); with no consumer (a question about the
 * buffer, mover_map), later uses wait for it. */
static CUresult
restore(struct ebb_buf *b, struct ebb_stream *consumer, uint64_t seq)
{
	CUresult err;
	struct vmm_handle *h = get_handle(b->rsize, seq, 0, &err);

	if (h == NULL) {
		refuse(b->size, consumer != NULL ? "no room to restore a buffer an operation needs" :
		    "no room to map a buffer the job asks about");
		return err;
	}
	if (consumer == NULL)
		return copy_back(b, h, NULL, 0, NULL, seq, "query");
	CUstream c = streams_handle(consumer);
	CUevent pre = capturing ? NULL : streams_event_get(1);
	if (pre != NULL && ebb_real.cuEventRecord(pre, c) != CUDA_SUCCESS) {
		streams_event_put(pre, 1);
		pre = NULL;
	}
	CUevent ev;
	CUresult r = copy_back(b, h, NULL, 0, pre, seq, "fault");
	if (r == CUDA_SUCCESS && (ev = b->arrive) != NULL)
		r = ebb_real.cuStreamWaitEvent(c, ev, 0);
	return r;
}

static int
plan_offload_impl(struct ebb_buf *b, struct ebb_stream *after, uint64_t seq)
{
	if (!on || capturing || b->managed != EBB_MANAGED_BIG || b->state != EBB_RESIDENT ||
	    b->pinned || b->cancelled || in_flight(b))
		return 0;
	/* the d2h stream is in order: later copies wait too, as the plan has them */
	if (after != NULL && streams_wait(after, seq, d2h) != CUDA_SUCCESS)
		return 0;
	if (!offload(b, seq, "plan"))
		return 0;
	st.planned_offloads++;
	return 1;
}

static int
prefetch_impl(struct ebb_buf *b, struct ebb_stream *after, uint64_t seq, uint64_t gate)
{
	if (!on || capturing || b->managed != EBB_MANAGED_BIG || b->pinned ||
	    b->state == EBB_RESIDENT)
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
	if (gate_ev != NULL && b->state == EBB_ON_HOST && !b->cancelled && !b->freed &&
	    (h = try_handle(b->rsize, &full, &err)) != NULL) {
		gate_ev = NULL;
		st.prefetches_early++;
	}
	b->pending++;	/* b may be freed while the mutex is released */
	if (gate_ev != NULL) {
		/* the host is ahead of the device: take the memory when the device is near */
		uint64_t t0 = ebb_now_ns();
		pthread_mutex_unlock(lock);
		ebb_real.cuEventSynchronize(gate_ev);
		pthread_mutex_lock(lock);
		host_waited(&st.wait_gate_ns, t0, "gate", seq);
		streams_done(after, gate);
	}
	/* and the offload must have landed */
	while (b->state == EBB_OFFLOADING && !b->cancelled && !b->freed && !stopping)
		wait_room(&st.wait_landing_ns, "landing", seq);
	if (--b->pending == 0 && b->freed) {
		if (h != NULL)
			vmm_pool_put(h);
		recycle(b);
		return 0;
	}
	if (b->freed || capturing || b->state != EBB_ON_HOST) {
		if (h != NULL)
			vmm_pool_put(h);
		return 0;
	}
	if (h == NULL)
		h = get_handle(b->rsize, seq, 1, &err);
	if (h == NULL) {
		st.prefetches_skipped++;
		trace_move('J', seq, b, b->size, "prefetch-no-room");
		return 0;
	}
	if (copy_back(b, h, after, seq, NULL, seq, "prefetch") != CUDA_SUCCESS)
		return 0;
	st.prefetches++;
	return 1;
}

void
mover_set_planned(int onoff)
{
	planned = onoff;
}

void
mover_bandwidth(double *d2h_bps, double *h2d_bps)
{
	*d2h_bps = bw_d2h;
	*h2d_bps = bw_h2d;
}

uint64_t
mover_limit(void)
{
	return limit;
}

uint64_t
mover_fixed_held(void)
{
	return slab_held + other_held;
}

static CUresult
ensure_impl(struct ebb_buf **bufs, size_t n, struct ebb_stream *consumer, uint64_t seq)
{
	for (size_t i = 0; i < n; i++) {
		struct ebb_buf *b = bufs[i];
		if (b->managed != EBB_MANAGED_BIG)
			continue;
		if (b->state == EBB_RESIDENT) {
			/* restored ahead of this use: the device waits for the copy */
			if (b->arrive != NULL) {
				CUresult r = ebb_real.cuStreamWaitEvent(streams_handle(consumer),
				    b->arrive, 0);
				if (r != CUDA_SUCCESS)
					return r;
			}
			continue;
		}
		if (b->state == EBB_OFFLOADING) {
			/* still mapped and intact: keep it, drop the copy when it lands */
			b->state = EBB_RESIDENT;
			b->cancelled = 1;
			lru_append(b);
			st.cancels++;
			trace_move('B', seq, b, 0, "cancel");
			continue;
		}
		CUresult r = restore(b, consumer, seq);
		if (r != CUDA_SUCCESS)
			return r;
	}
	return CUDA_SUCCESS;
}

void
mover_stats(struct mover_stats *out)
{
	*out = st;
	out->held = held_total();
	out->host_pinned = hostpool_pinned();
	out->host_pin_ns = hostpool_pin_ns();
}

void
mover_shutdown(void)
{
	if (!workers_started)
		return;
	stopping = 1;
	for (int k = 0; k < 2; k++)
		pthread_cond_signal(&queues[k].cond);
	pthread_mutex_unlock(lock);
	/* The copies they wait for finish on their own; do not hang an exit on a
	 * device that stopped answering. */
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 5;
	for (int k = 0; k < 2; k++)
		if (pthread_timedjoin_np(queues[k].thread, NULL, &until) != 0)
			ebb_log(EBB_LOG_WARN, "ebb's %s worker did not stop within 5 s at exit",
			    k == W_OFFLOADED ? "offload" : "restore");
	pthread_mutex_lock(lock);
	workers_started = 0;
}

/* The entry points' host time, while an iteration is recorded (exec.c): off
 * the path of every launch and allocation otherwise. */
static int self_timing;

void
mover_time_self(int timing)
{
	self_timing = timing;
}

static uint64_t
self_begin(void)
{
	return self_timing ? ebb_now_ns() : 0;
}

static void
self_end(uint64_t t0)
{
	if (t0 != 0)
		st.self_ns += ebb_now_ns() - t0;
}

CUresult
mover_alloc(struct ebb_buf *b, size_t size, struct ebb_stream *s, CUdeviceptr *dptr)
{
	uint64_t t0 = self_begin();
	CUresult r = alloc_impl(b, size, s, dptr);
	self_end(t0);
	return r;
}

int
mover_free(struct ebb_buf *b, const struct ebb_tag *tag)
{
	uint64_t t0 = self_begin();
	int r = free_impl(b, tag);
	self_end(t0);
	return r;
}

int
mover_plan_offload(struct ebb_buf *b, struct ebb_stream *after, uint64_t seq)
{
	uint64_t t0 = self_begin();
	int r = plan_offload_impl(b, after, seq);
	self_end(t0);
	return r;
}

int
mover_prefetch(struct ebb_buf *b, struct ebb_stream *after, uint64_t seq, uint64_t gate)
{
	uint64_t t0 = self_begin();
	int r = prefetch_impl(b, after, seq, gate);
	self_end(t0);
	return r;
}

CUresult
mover_ensure(struct ebb_buf **bufs, size_t n, struct ebb_stream *consumer, uint64_t seq)
{
	uint64_t t0 = self_begin();
	CUresult r = ensure_impl(bufs, n, consumer, seq);
	self_end(t0);
	return r;
}

CUresult
mover_map(struct ebb_buf *b, uint64_t seq)
{
	if (!on || b->managed != EBB_MANAGED_BIG || b->state != EBB_ON_HOST)
		return CUDA_SUCCESS;
	uint64_t t0 = self_begin();
	CUresult r = restore(b, NULL, seq);
	self_end(t0);
	return r;
}

uint64_t
mover_self_ns(void)
{
	return st.self_ns;
}

void
mover_move_costs(double *offload_s, double *restore_s)
{
	*offload_s = (st.offloads_timed ? (double)st.offload_host_ns / (double)st.offloads_timed : 0) +
	    (st.unmaps_timed ? (double)st.unmap_ns / (double)st.unmaps_timed : 0);
	*restore_s = st.restores_timed ? (double)st.restore_host_ns / (double)st.restores_timed : 0;
	*offload_s /= 1e9;
	*restore_s /= 1e9;
}
