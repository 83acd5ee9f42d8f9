/*
 * mover.c: serving allocations under EBB_LIMIT, and the mover's entry
 * points (mover.h). Small buffers come from mover_slab.c; a big one gets
 * its own range and a physical handle from here, made room for within the
 * limit by reusing freed blocks, releasing idle memory, waiting for copies
 * in flight (mover_copy.c) or evicting the least recently used buffer
 * (mover_lru.c).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf.h"
#include "hostpool.h"
#include "real.h"
#include "log.h"
#include "mover_int.h"
#include "trace.h"
#include "tracer.h"
#include "vmm.h"

/* A freed big buffer: still mapped, waiting for its tag (and its fence) or
 * for reuse. */
struct block {
	CUdeviceptr va;
	struct vmm_handle *h;
	struct ebb_tag tag;
	CUevent fence;		/* NULL, or done once a copy or a remake into the buffer,
				 * in flight when it was freed, is done (the block's) */
	struct block *next;
};

/* What mover.c alone keeps (ebb_state_lock held). */
struct mover_serving {
	const char *failed_why;	/* why mover_init failed for good (NULL: it has not) */
	uint64_t min_offload;	/* buffers of fewer bytes never move */
	double reuse_slack;	/* EBB_REUSE_SLACK */
	uint64_t other_held;	/* device bytes of the driver's allocations
				 * (mover_note_unmanaged) */
	uint64_t used_at_start;	/* the device's used memory when the mover started */
	int start_known;	/* used_at_start was measured */
	uint64_t driver_now;	/* the last sample of the device's memory beyond ebb's and
				 * used_at_start: the driver's own for the process */
	int host_short;		/* an offload found no pinned host memory */
	int planned;		/* the engine's plan moves buffers (mover_set_planned) */
	struct block *blocks;	/* freed big buffers, the oldest freed first */
	struct block *blocks_tail;	/* the newest freed (NULL when there is none) */
	int said_refused;	/* a refusal was said at EBB_LOG_WARN (later ones: NOTE) */
	int said_host_short;	/* running out of pinned host memory was said */
	int said_over_limit;	/* the driver's allocations over EBB_LIMIT were said */
	int said_extra;		/* the device's memory beyond ebb's, large, was said */
	int said_past_share;	/* a handle past the driver's share was said */
	int said_create;	/* a failed cuMemCreate was said */
};
static struct mover_serving serving;

struct mover mover;

/* Keep a freed block, still mapped at va with h, for reuse once tag is done
 * and fence (NULL: none; the block's from now on) too. Returns 0, or -1
 * when there is no memory for the list entry. */
int
mover_block_keep(CUdeviceptr va, struct vmm_handle *h, const struct ebb_tag *tag, CUevent fence)
{
	struct block *k = malloc(sizeof *k);

	if (k == NULL)
		return -1;
	*k = (struct block){ .va = va, .h = h, .tag = *tag, .fence = fence };
	if (serving.blocks_tail != NULL)
		serving.blocks_tail->next = k;
	else
		serving.blocks = k;
	serving.blocks_tail = k;
	return 0;
}

/* Take the block *p off the list (prev: the one before it, NULL for the
 * first) and return it. */
static struct block *
block_unlink(struct block **p, struct block *prev)
{
	struct block *k = *p;

	*p = k->next;
	if (serving.blocks_tail == k)
		serving.blocks_tail = prev;
	return k;
}

/* Whether block k may be used again by any stream now. */
static int
block_done(struct block *k)
{
	if (!mover_tag_done(&k->tag))
		return 0;
	if (k->fence != NULL) {
		if (ebb_real.cuEventQuery(k->fence) != CUDA_SUCCESS)
			return 0;
		streams_event_put(k->fence, 0);
		k->fence = NULL;
	}
	return 1;
}

/* Make stream s wait for block k (its tag and fence). Returns 0 or a
 * CUresult. */
static CUresult
block_wait(const struct block *k, CUstream s)
{
	CUresult r = mover_tag_wait(&k->tag, s);

	if (r == CUDA_SUCCESS && k->fence != NULL)
		r = ebb_real.cuStreamWaitEvent(s, k->fence, 0);
	return r;
}

/* Block until block k is done. Returns 0 or a CUresult. */
static CUresult
block_sync(const struct block *k)
{
	CUresult r = mover_tag_sync(&k->tag);

	return r == CUDA_SUCCESS && k->fence != NULL ? streams_event_wait(k->fence) : r;
}

/* Forget block k (taken off the list): its fence goes back. */
static void
block_free(struct block *k)
{
	if (k->fence != NULL)
		streams_event_put(k->fence, 0);
	free(k);
}

/* Write a move record (O, B, U, J) when tracing is on. */
void
mover_trace_move(char type, uint64_t seq, const struct ebb_buf *b, uint64_t bytes,
    const char *what)
{
	if (!ebb_trace_on())
		return;
	uint64_t t = ebb_now_ns(), bid = b ? b->id : 0;
	switch (type) {
	case 'O': ebb_trace_write_offload(t, seq, bid, bytes, what); break;
	case 'B': ebb_trace_write_restore(t, seq, bid, bytes, what); break;
	case 'U': ebb_trace_write_release(t, seq, bid, bytes, what); break;
	case 'J': ebb_trace_write_refusal(t, seq, bid, bytes, what); break;
	}
}

/* Device bytes ebb holds: handles, slabs and the driver's allocations. */
uint64_t
mover_held_total(void)
{
	return vmm_held() + mover_slab_held() + serving.other_held;
}

/* Raise held_peak to what ebb holds now. */
void
mover_note_held(void)
{
	uint64_t h = mover_held_total();
	if (h > mover.stats.held_peak)
		mover.stats.held_peak = h;
}

/* The host waited since t0 (for what, serving operation seq, 0 for an
 * allocation): add it to *ns and write an H record. */
void
mover_host_waited(uint64_t *ns, uint64_t t0, const char *what, uint64_t seq)
{
	uint64_t t = ebb_now_ns(), d = t - t0;

	*ns += d;
	ebb_trace_write_hostwait(t, seq, d, what);
}

/* ---- making room under the limit ---- */

/*
 * Unmap a freed block of rsize bytes (any size when 0) whose tag is done,
 * or, when wait, after waiting for the first freed one's, and pool its
 * handle. Returns 1 when one was reclaimed.
 *
 * The oldest freed comes first, done or waited for: the device passes it
 * first, and its size is the least likely to be needed again soon. The
 * sizes the job frees last are the ones it is going through (a layer's
 * buffers, freed and made again by the next), and the newest free is often
 * the job's last one, right before the allocation that needs the room:
 * waiting for it would let the device run dry while the host maps memory.
 */
static int
reclaim_block(int wait, size_t rsize)
{
	struct block **p, **first = NULL, *prev = NULL, *first_prev = NULL;

	for (p = &serving.blocks; *p != NULL; prev = *p, p = &(*p)->next) {
		if (rsize != 0 && (*p)->h->size != rsize)
			continue;
		if (block_done(*p))
			break;
		if (first == NULL) {
			first = p;
			first_prev = prev;
		}
	}
	if (*p == NULL) {
		/* None is done: wait for the first freed. The wait holds
		 * ebb_state_lock: the work it waits for needs no lock. */
		if (!wait || first == NULL || block_sync(*first) != CUDA_SUCCESS)
			return 0;
		p = first;
		prev = first_prev;
	}
	struct block *k = block_unlink(p, prev);
	if (vmm_unmap(k->va, k->h->size) != CUDA_SUCCESS) {
		/* still mapped: the range and its handle are never used again */
		mover.stats.unmaps_failed++;
		block_free(k);
		return reclaim_block(wait, rsize);
	}
	vmm_unreserve(k->va, k->h->size);
	vmm_pool_put(k->h);
	block_free(k);
	return 1;
}

/*
 * Offload the least recently used movable buffer not used by operation seq
 * (of rsize bytes when not 0; mover_lru_victim). Returns 1 when an offload
 * was issued, 0 when none may move or there is no pinned host memory for
 * it (said once, and counted as a refusal).
 */
static int
evict_one(uint64_t seq, size_t rsize)
{
	struct ebb_buf *pick = mover_lru_victim(seq, rsize);

	if (pick == NULL)
		return 0;
	if (mover_copy_offload(pick, seq, "limit")) {
		if (serving.planned)
			mover_arena_evicted();
		return 1;
	}
	serving.host_short = 1;
	if (!serving.said_host_short) {
		ebb_log(EBB_LOG_WARN, "no pinned host memory for a %llu-byte buffer (%llu bytes pinned, "
		    "%llu in use; EBB_HOST_LIMIT, or the system refuses to pin more): buffers stay on "
		    "the device", (unsigned long long)pick->size,
		    (unsigned long long)hostpool_pinned(), (unsigned long long)hostpool_used());
		serving.said_host_short = 1;
	}
	mover.stats.refusals++;
	mover_trace_move('J', seq, pick, pick->size, "host-memory");
	return 0;
}

/*
 * A handle of rsize bytes within the limit if one is to be had without
 * waiting or moving anything: a pooled one, a new one (unless *device_full),
 * a freed block of that size the device has passed. Else NULL, with *err
 * set when creating one failed other than for want of memory, and
 * *device_full set when the device itself is full.
 */
struct vmm_handle *
mover_try_handle(size_t rsize, int *device_full, CUresult *err)
{
	int sampled = 0;

	for (;;) {
		struct vmm_handle *h = vmm_pool_take(rsize);
		if (h != NULL)
			return h;
		/* what ebb holds may grow: the driver's own memory first, once */
		if (!*device_full && !sampled && mover_held_total() + rsize <= mover.limit_conf) {
			mover_sample_device();
			sampled = 1;
		}
		if (!*device_full && mover_held_total() + rsize <= mover.limit) {
			CUresult r = mover_make_handle(rsize, &h);
			if (r == CUDA_SUCCESS)
				return h;
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
 * Nothing more can move, and a handle of rsize bytes does not fit beside
 * the driver's memory for the process (its own, and its allocations, such
 * as a graph's, that ebb counts as held), but beside ebb's own buffers it
 * fits under EBB_LIMIT: make it (failing the job's allocation would be
 * worse than the driver's memory going over), count it, and say once by
 * how much the process goes over. NULL, with *err set where the driver
 * failed, when it does not fit or cannot be made.
 */
static struct vmm_handle *
past_driver_share(size_t rsize, CUresult *err)
{
	struct vmm_handle *h;

	if (mover_held_total() - serving.other_held + rsize > mover.limit_conf)
		return NULL;
	CUresult r = mover_make_handle(rsize, &h);
	if (r != CUDA_SUCCESS) {
		*err = r;
		return NULL;
	}
	mover.stats.past_driver_share++;
	ebb_log_once(&serving.said_past_share, EBB_LOG_WARN, "nothing more can be moved, and what "
	    "the job needs does not fit under EBB_LIMIT=%llu beside the driver's own %llu bytes "
	    "for the process: ebb holds %llu bytes, within EBB_LIMIT, and the driver's memory "
	    "takes the process over it (counted in the summary)",
	    (unsigned long long)mover.limit_conf,
	    (unsigned long long)(serving.driver_now + serving.other_held),
	    (unsigned long long)(mover_held_total() - serving.other_held));
	return h;
}

/*
 * Make a physical handle of rsize bytes available within the limit, for
 * operation seq (whose buffers are not evicted; 0 for an allocation).
 * Over the limit, a pooled handle or a passed freed block of that size comes
 * first; then memory held idle in other sizes (pooled handles, passed freed
 * blocks, and last the arena's empty chunks) is released, so that a new
 * handle fits; only then does the host wait for offloads in flight (one of
 * that size first, before evicting another buffer) or evict. The plan counts bytes, not handles: memory idle
 * in another size makes room as well as a handle of this one, so the host
 * never waits for a copy while such memory sits unused. Returns the handle,
 * or NULL with *err set (CUDA_ERROR_OUT_OF_MEMORY when nothing more can be
 * moved).
 */
struct vmm_handle *
mover_get_handle(size_t rsize, uint64_t seq, int flags, CUresult *err)
{
	int no_evict = flags & MOVER_NO_EVICT;
	int device_full = 0;

	for (;;) {
		CUresult r = CUDA_SUCCESS;
		struct vmm_handle *h = mover_try_handle(rsize, &device_full, &r);
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
		/* the arena's empty chunks last: the buffers it serves come back
		 * every iteration, and want them again */
		if (mover_arena_release_one()) {
			device_full = 0;
			continue;
		}
		if (mover_copy_inflight_sized(rsize)) {
			mover_copy_wait_room(&mover.stats.wait_room_ns, "room", seq);
			continue;
		}
		/* under a plan, its offloads in flight and the job's frees make the
		 * room: nothing the plan keeps is evicted before they are waited for */
		int plan = serving.planned || no_evict;
		if (!plan && evict_one(seq, rsize))
			continue;
		if (mover_copy_inflight() > 0) {
			mover_copy_wait_room(&mover.stats.wait_room_ns, "room", seq);
			device_full = 0;
			continue;
		}
		/* memory the job freed ahead of the device: wait for the device to
		 * get there, as the plan assumed */
		if (plan) {
			uint64_t t0 = ebb_now_ns();
			int got = reclaim_block(1, 0);
			mover_host_waited(&mover.stats.wait_room_ns, t0, "frees", seq);
			if (got)
				continue;
		}
		if (no_evict) {
			*err = CUDA_ERROR_OUT_OF_MEMORY;
			return NULL;
		}
		/* the arena's units the job freed, where waiting empties a chunk */
		if (mover_arena_wait_frees())
			continue;
		if (evict_one(seq, 0))
			continue;
		if (reclaim_block(1, 0))
			continue;
		*err = CUDA_ERROR_OUT_OF_MEMORY;
		if (flags & MOVER_WITHIN)
			return NULL;
		h = past_driver_share(rsize, err);
		return h != NULL || *err != CUDA_ERROR_OUT_OF_MEMORY ? h : mover_arena_over(rsize, err);
	}
}

/* Explain an allocation or restore ebb must refuse: the job gets
 * CUDA_ERROR_OUT_OF_MEMORY. The first is always said, later ones at
 * EBB_VERBOSE>=1 (the summary counts them all). */
void
mover_refuse(size_t size, const char *why)
{
	uint64_t movable = mover_lru_bytes();

	char driver[96] = "";

	mover.stats.refusals++;
	int level = serving.said_refused ? EBB_LOG_NOTE : EBB_LOG_WARN;
	serving.said_refused = 1;
	if (mover.limit < mover.limit_conf)
		snprintf(driver, sizeof driver, " (%llu of it the driver's own for the process)",
		    (unsigned long long)(mover.limit_conf - mover.limit));
	ebb_log(level, "out of memory for %zu bytes under EBB_LIMIT=%llu%s: %llu bytes held, "
	    "%llu of them in movable resident buffers and %llu the driver's allocations (a graph's "
	    "memory), %llu offloads in flight (%s%s)", size, (unsigned long long)mover.limit_conf,
	    driver, (unsigned long long)mover_held_total(), (unsigned long long)movable,
	    (unsigned long long)serving.other_held, (unsigned long long)mover_copy_inflight(), why,
	    serving.host_short ? "; pinned host memory ran out" : "");
	mover_trace_move('J', 0, NULL, size, why);
}

/* ---- initialisation ---- */

/* Set up in the job's current context: the limit, the host pool, the
 * slabs, the copy streams, the bandwidth, the workers. Returns 0, or -1
 * (not yet, with no current context; or for good, said, with the reason in
 * serving.failed_why). */
int
mover_init(const struct ebb_conf *conf)
{
	CUdevice dev;
	size_t total = 0;

	if (mover.on)
		return 0;
	if (serving.failed_why != NULL)
		return -1;
	if (ebb_real.cuCtxGetCurrent(&mover.ctx) != CUDA_SUCCESS || mover.ctx == NULL)
		return -1;	/* not yet: try again at the next allocation */
	CUresult r = ebb_real.cuCtxGetDevice(&dev);
	if (r != CUDA_SUCCESS) {
		ebb_log(EBB_LOG_WARN, "cuCtxGetDevice failed (error %d): ebb cannot offload, EBB_LIMIT "
		    "is not enforced and allocations go to the driver", (int)r);
		serving.failed_why = "cuCtxGetDevice failed: ebb could not offload";
		return -1;
	}
	if (vmm_init(dev) < 0) {
		serving.failed_why = "the device's virtual memory management is not there: ebb could "
		    "not offload";
		return -1;
	}
	r = ebb_real.cuDeviceTotalMem_v2(&total, dev);
	if (r != CUDA_SUCCESS && conf->limit == 0) {
		ebb_log(EBB_LOG_WARN, "cuDeviceTotalMem failed (error %d) and EBB_LIMIT is not set: "
		    "ebb does not know what to hold the job to; it does not offload", (int)r);
		serving.failed_why = "cuDeviceTotalMem failed and EBB_LIMIT is not set: ebb did not "
		    "offload";
		return -1;
	}
	mover.limit_conf = mover.limit = conf->limit ? conf->limit : total;
	serving.min_offload = conf->min_offload_bytes;
	serving.reuse_slack = conf->reuse_slack;
	if (serving.min_offload < vmm_granularity())
		serving.min_offload = vmm_granularity();
	hostpool_init(conf->host_limit, (uint64_t)1 << 30);
	mover_slab_setup();
	size_t dfree = 0, dtotal = 0;
	if (ebb_real.cuMemGetInfo_v2(&dfree, &dtotal) == CUDA_SUCCESS && dtotal >= dfree) {
		serving.used_at_start = (uint64_t)(dtotal - dfree) - mover_held_total();
		serving.start_known = 1;
	}
	if (ebb_real.cuStreamCreate(&mover.d2h, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS ||
	    ebb_real.cuStreamCreate(&mover.h2d, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS ||
	    ebb_real.cuStreamCreate(&mover.drop, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS ||
	    ebb_real.cuStreamCreate(&mover.fence, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) {
		ebb_log(EBB_LOG_WARN, "cannot create ebb's copy streams; ebb moves nothing");
		serving.failed_why = "ebb's copy streams could not be created: ebb could not offload";
		return -1;
	}
	ebb_cupti_ignore_stream(mover.ctx, mover.d2h);
	ebb_cupti_ignore_stream(mover.ctx, mover.h2d);
	ebb_cupti_ignore_stream(mover.ctx, mover.drop);
	ebb_cupti_ignore_stream(mover.ctx, mover.fence);
	mover_rate_measure(conf);
	int e = mover_copy_start();
	if (e != 0) {
		ebb_log(EBB_LOG_WARN, "cannot start ebb's worker threads (%s); ebb moves "
		    "nothing", strerror(e));
		serving.failed_why = "ebb's worker threads could not start: ebb could not offload";
		return -1;
	}
	mover.on = 1;
	if (total != 0)
		ebb_log(EBB_LOG_NOTE, "offloading: EBB_LIMIT=%llu bytes of %zu on device %d, buffers "
		    "of %llu bytes or more move", (unsigned long long)mover.limit, total, (int)dev,
		    (unsigned long long)serving.min_offload);
	else
		ebb_log(EBB_LOG_NOTE, "offloading: EBB_LIMIT=%llu bytes on device %d (its size is "
		    "unknown), buffers of %llu bytes or more move", (unsigned long long)mover.limit,
		    (int)dev, (unsigned long long)serving.min_offload);
	return 0;
}

/* Raise beyond_held to the device memory used now beyond what ebb holds
 * and what was used at start; nothing when either is unknown. */
void
mover_sample_device(void)
{
	size_t dfree = 0, dtotal = 0;

	if (!mover.on || !serving.start_known ||
	    ebb_real.cuMemGetInfo_v2(&dfree, &dtotal) != CUDA_SUCCESS || dtotal < dfree)
		return;
	uint64_t used = (uint64_t)(dtotal - dfree), held = mover_held_total() + serving.used_at_start;
	uint64_t extra = used > held ? used - held : 0;
	if (extra > mover.stats.beyond_held)
		mover.stats.beyond_held = extra;
	if (used > serving.used_at_start && used - serving.used_at_start > mover.stats.process_peak)
		mover.stats.process_peak = used - serving.used_at_start;
	/* over the limit: could evicting what can move have brought it under?
	 * (asked until one sample says so: the list is walked only then) */
	if (used > serving.used_at_start + mover.limit_conf) {
		mover.stats.over_samples++;
		if (!mover.stats.over_movable &&
		    mover_lru_bytes() >= used - serving.used_at_start - mover.limit_conf)
			mover.stats.over_movable = 1;
	}
	serving.driver_now = extra;
	/* the last sample, not the most: what another process or a library
	 * holds a while is given back to ebb when it goes */
	mover.limit = extra < mover.limit_conf ? mover.limit_conf - extra : 0;
	if (extra > mover.limit_conf / 8)
		ebb_log_once(&serving.said_extra, EBB_LOG_WARN, "the device holds %llu bytes more than "
		    "ebb's buffers and what was in use when ebb started (modules the driver loaded, "
		    "libraries' own memory, or another process on the device): EBB_LIMIT=%llu "
		    "counts them, and leaves ebb %llu bytes", (unsigned long long)extra,
		    (unsigned long long)mover.limit_conf, (unsigned long long)mover.limit);
}

/* Whether the mover serves allocations now. */
int
mover_on(void)
{
	return mover.on;
}

/* A stream capture begins (1) or ends (0). */
void
mover_capture(int active)
{
	mover.capturing = active;
}

/* Why mover_init failed for good (NULL: it has not). */
const char *
mover_failed_why(void)
{
	return serving.failed_why;
}

/* Count bytes (negative: freed) of the driver's own allocations as held;
 * one that takes the job over the limit is counted and said once. */
void
mover_note_unmanaged(int64_t bytes)
{
	serving.other_held += (uint64_t)bytes;
	if (serving.other_held > mover.stats.driver_served_peak)
		mover.stats.driver_served_peak = serving.other_held;
	mover_note_held();
	/* the driver's allocations are not refused: they can take the job over
	 * the limit (those of a stream capture, PyTorch's graph pools) */
	if (bytes <= 0 || !mover.on)
		return;
	if (mover_held_total() > mover.limit_conf) {
		mover.stats.over_limit++;
		ebb_log_once(&serving.said_over_limit, EBB_LOG_WARN, "allocations the driver served "
		    "(%llu bytes: made during a stream capture, or not served by ebb) take what the "
		    "job holds to %llu bytes, over EBB_LIMIT=%llu; ebb cannot move them (further such "
		    "are counted in the summary)", (unsigned long long)serving.other_held,
		    (unsigned long long)mover_held_total(), (unsigned long long)mover.limit_conf);
	} else if (mover_held_total() > mover.limit) {
		/* within EBB_LIMIT, past what the driver's own memory leaves ebb */
		mover.stats.past_driver_share++;
		ebb_log_once(&serving.said_past_share, EBB_LOG_WARN, "allocations the driver served "
		    "(%llu bytes: made during a stream capture, or not served by ebb) take what the "
		    "job holds to %llu bytes, within EBB_LIMIT=%llu, and with the driver's own %llu "
		    "bytes for the process over it (counted in the summary)",
		    (unsigned long long)serving.other_held, (unsigned long long)mover_held_total(),
		    (unsigned long long)mover.limit_conf,
		    (unsigned long long)(mover.limit_conf - mover.limit));
	}
}

/* ---- allocation ---- */

/* A freed block an allocation of rsize bytes may have now on stream s (NULL
 * for cuMemAlloc), off the list, with its address in *va: of rsize bytes, or
 * up to EBB_REUSE_SLACK of them more (the buffer then holds the block's
 * size: its range and handle as they are), the smallest of those done or
 * ordered on s, the first freed of a size first, else the smallest of the
 * others, which s is made to wait for. NULL when there is none. */
static struct vmm_handle *
reuse_block(size_t rsize, struct ebb_stream *s, CUdeviceptr *va)
{
	size_t most = rsize + (size_t)((double)rsize * serving.reuse_slack);
	struct block **pick = NULL, *prev = NULL, *pick_prev = NULL;
	int pick_ready = 0;
	for (struct block **p = &serving.blocks; *p != NULL; prev = *p, p = &(*p)->next) {
		size_t sz = (*p)->h->size;
		if (sz < rsize || sz > most)
			continue;
		const struct ebb_tag *t = &(*p)->tag;
		int ready = block_done(*p) || (mover_tag_only(t, s) && (*p)->fence == NULL);
		if (!ready && s == NULL)
			continue;
		/* ready before waiting; the smallest of each */
		if (pick == NULL || (ready && !pick_ready) ||
		    (ready == pick_ready && sz < (*pick)->h->size)) {
			pick = p;
			pick_prev = prev;
			pick_ready = ready;
			if (ready && sz == rsize)
				break;
		}
	}
	if (pick == NULL || !(pick_ready ||
	    block_wait(*pick, streams_handle(s)) == CUDA_SUCCESS))
		return NULL;
	struct block *k = block_unlink(pick, pick_prev);
	struct vmm_handle *h = k->h;
	*va = k->va;
	block_free(k);
	return h;
}

/* Allocate size bytes for b on stream s (NULL: cuMemAlloc); job: the job's
 * allocation, which comes from the arena when the plan keeps it resident
 * (mover_set_keeper), not ebb's own. Returns as mover_alloc. */
static CUresult
alloc(struct ebb_buf *b, size_t size, struct ebb_stream *s, int job, CUdeviceptr *dptr)
{
	if (!mover_on())
		return MOVER_DECLINE;
	if (size == 0)
		return MOVER_DECLINE;	/* the driver's own answer */
	CUcontext cur = NULL;
	if (ebb_real.cuCtxGetCurrent(&cur) != CUDA_SUCCESS || cur != mover.ctx)
		return MOVER_DECLINE;	/* ebb moves the buffers of one context, the first */
	if (mover_slab_serves(size))
		return mover_slab_alloc(b, size, s, dptr);
	size_t rsize = vmm_round(size);
	if (rsize > mover.limit_conf) {
		mover_refuse(size, "larger than EBB_LIMIT");
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	/* a buffer the plan keeps shares the arena's chunks; where it cannot (no
	 * arena, no room for a chunk) it gets memory of its own, as any other */
	if (job && mover.keep != NULL && !mover.capturing && mover_arena_serves(rsize) &&
	    mover.keep(rsize) && mover_arena_alloc(b, rsize, s, dptr) == CUDA_SUCCESS)
		return CUDA_SUCCESS;
	CUdeviceptr va;
	struct vmm_handle *h = reuse_block(rsize, s, &va);
	if (h == NULL) {
		CUresult err;
		h = mover_get_handle(rsize, 0, 0, &err);
		if (h == NULL) {
			if (err != CUDA_ERROR_OUT_OF_MEMORY) {
				if (!serving.said_create)
					ebb_log(EBB_LOG_WARN, "cuMemCreate failed (error %d): new buffers stay "
					    "where the driver puts them and do not move", (int)err);
				serving.said_create = 1;
				mover.stats.refusals++;
				mover_trace_move('J', 0, NULL, size, "create");
				return MOVER_DECLINE;
			}
			mover_refuse(size, mover.capturing ? "nothing more can be moved: what a stream "
			    "capture uses, and what is allocated during it, stays on the device" :
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
	b->mv.managed = EBB_MANAGED_BIG;
	b->mv.state = EBB_RESIDENT;
	b->mv.rsize = h->size;
	b->mv.isize = rsize;
	b->mv.handle = h;
	if (size < serving.min_offload)
		b->pinned |= EBB_PIN_SMALL;
	else
		mover_lru_append(b);
	*dptr = va;
	return CUDA_SUCCESS;
}

/* Allocate size bytes for b (mover.h). */
CUresult
mover_alloc(struct ebb_buf *b, size_t size, struct ebb_stream *s, CUdeviceptr *dptr)
{
	return alloc(b, size, s, 1, dptr);
}

/* An event done once ev is, recorded on the fence stream (which waits for
 * ev), so that it stays valid after ev's owner recycles ev; NULL when one
 * cannot be made. */
static CUevent
fence_after(CUevent ev)
{
	CUevent f = streams_event_get(0);

	if (f != NULL && (ebb_real.cuStreamWaitEvent(mover.fence, ev, 0) != CUDA_SUCCESS ||
	    ebb_real.cuEventRecord(f, mover.fence) != CUDA_SUCCESS)) {
		streams_event_put(f, 0);
		f = NULL;
	}
	return f;
}

/* The job freed b (mover.h): a small buffer's slot goes back to its slab, a big
 * buffer's memory becomes a freed block (resident), or its host copy and
 * range go back (on the host). Returns 1 when the mover keeps the struct,
 * a worker item still referring to it. */
int
mover_free(struct ebb_buf *b, const struct ebb_tag *tag)
{
	if (b->mv.managed == EBB_MANAGED_SMALL) {
		mover_slab_free(b, tag);
		return 0;
	}
	if (b->mv.managed != EBB_MANAGED_BIG)
		return 0;
	if (b->mv.arena) {
		mover_arena_free(b, tag);
		return 0;
	}
	mover_lru_remove(b);
	switch (b->mv.state) {
	case EBB_RESIDENT: {
		/*
		 * Freed before a restore copy or a remake into it is done (under a
		 * plan, often: a buffer brought back for its last use is freed
		 * right after it, the host ahead of the device): the block is
		 * not reused before a fence recorded after it is done, and the
		 * host goes on. Without a fence, the host waits for it.
		 */
		CUresult r = CUDA_SUCCESS;
		CUevent fence = NULL;
		if (b->mv.arrive != NULL && !mover.capturing &&
		    ebb_real.cuEventQuery(b->mv.arrive) == CUDA_ERROR_NOT_READY)
			fence = fence_after(b->mv.arrive);
		if (b->mv.arrive != NULL && fence == NULL)
			r = streams_event_wait(b->mv.arrive);
		/*
		 * A cancelled copy to the host may still read it: the d2h stream
		 * runs behind other copies, and nothing orders it after the free,
		 * so the memory could be unmapped (once the job's streams pass the
		 * free) before that copy has run. Let it run first (rare: a use
		 * and a free between an offload and its copy).
		 */
		if (r == CUDA_SUCCESS && b->mv.cancelled &&
		    ebb_real.cuEventQuery(b->mv.ev) == CUDA_ERROR_NOT_READY) {
			uint64_t t0 = ebb_now_ns();
			r = streams_event_wait(b->mv.ev);
			mover_host_waited(&mover.stats.wait_landing_ns, t0, "landing", 0);
		}
		if (r != CUDA_SUCCESS) {
			/* a copy may still use it: the memory is never reused */
			mover.stats.copies_abandoned++;
		} else if (mover_block_keep(b->addr, b->mv.handle, tag, fence) < 0) {
			/* keep it simple: wait, then pool the handle */
			if (fence != NULL) {
				r = streams_event_wait(fence);
				streams_event_put(fence, 0);
			}
			if (r == CUDA_SUCCESS && mover_tag_sync(tag) == CUDA_SUCCESS &&
			    vmm_unmap(b->addr, b->mv.rsize) == CUDA_SUCCESS) {
				vmm_unreserve(b->addr, b->mv.rsize);
				vmm_pool_put(b->mv.handle);
			}
		} else {
			mover_tag_mark(tag);
		}
		b->mv.handle = NULL;
		if (b->mv.pending) {	/* a cancelled offload still holds its host copy */
			b->mv.freed = 1;
			return 1;
		}
		return 0;
	}
	case EBB_OFFLOADING:
		b->mv.freed = 1;
		return 1;
	default:	/* on the host: its copy and its range go back */
		hostpool_free(b->mv.host, b->size);
		b->mv.host = NULL;
		vmm_unreserve(b->addr, b->mv.rsize);
		if (b->mv.pending) {
			b->mv.freed = 1;
			return 1;
		}
		return 0;
	}
}

/* ---- settings and statistics ---- */

/* The plan moves buffers from now on (1) or no longer (0). */
void
mover_set_planned(int onoff)
{
	serving.planned = onoff;
}

/* EBB_LIMIT as the mover applies it. */
uint64_t
mover_limit(void)
{
	return mover.limit;
}

/* Device bytes held outside movable buffers: slabs, the driver's. */
uint64_t
mover_fixed_held(void)
{
	return mover_slab_held() + serving.other_held;
}

/* The counters, with what is held and pinned now. */
void
mover_stats(struct mover_stats *out)
{
	*out = mover.stats;
	out->held = mover_held_total();
	out->host_pinned = hostpool_pinned();
	out->host_pin_ns = hostpool_pin_ns();
}


/* ---- the entry points ---- */

/* Device memory of ebb's own, within EBB_LIMIT and never moved (mover.h). */
CUresult
mover_own_alloc(size_t size, struct ebb_buf **out)
{
	struct ebb_buf *b = ebb_buf_new();
	CUdeviceptr p;

	*out = NULL;
	if (b == NULL)
		return CUDA_ERROR_OUT_OF_MEMORY;
	CUresult r = alloc(b, size, NULL, 0, &p);
	if (r != CUDA_SUCCESS) {
		ebb_buf_put(b);
		return r == MOVER_DECLINE ? CUDA_ERROR_NOT_SUPPORTED : r;
	}
	/* what the engine's record of an allocation gives a buffer (its kind stays
	 * 0, cuMemAlloc's) */
	b->addr = p;
	b->size = size;
	if (b->mv.managed == EBB_MANAGED_BIG)
		mover_pin(b);
	*out = b;
	return CUDA_SUCCESS;
}

/* Give ebb's own memory b back once st has passed seq (mover.h). */
void
mover_own_free(struct ebb_buf *b, struct ebb_stream *st, uint64_t seq)
{
	struct ebb_tag t = { .n = st != NULL };

	if (b == NULL)
		return;
	t.s[0] = st;
	t.seq[0] = seq;
	if (!mover_free(b, &t))
		ebb_buf_put(b);
}

/* The plan's offload of b (mover.h). */
int
mover_plan_offload(struct ebb_buf *b, struct ebb_stream *after, uint64_t seq)
{
	return mover_copy_plan_offload(b, after, seq);
}

/* The plan's drop of b (mover.h). */
enum mover_drop
mover_plan_drop(struct ebb_buf *b, uint64_t seq)
{
	return mover_copy_plan_drop(b, seq);
}

const char *
mover_drop_why(enum mover_drop why)
{
	switch (why) {
	case MOVER_DROPPED: return "dropped";
	case MOVER_DROP_OFF: return "moving is off or a capture runs";
	case MOVER_DROP_AWAY: return "not resident";
	case MOVER_DROP_RETIRING: return "an earlier move of it, cancelled, has not landed";
	case MOVER_DROP_PINNED: return "pinned";
	case MOVER_DROP_IN_FLIGHT: return "a use of it is on its way to the driver";
	case MOVER_DROP_FAILED: return "issuing the drop failed";
	}
	return "?";
}

void
mover_set_remake(mover_remake_fn fn)
{
	mover.remake = fn;
}

void
mover_set_keeper(mover_keep_fn fn)
{
	mover.keep = fn;
}

/* The plan's restore of b ahead of its use (mover.h). */
int
mover_prefetch(struct ebb_buf *b, struct ebb_stream *after, uint64_t seq, uint64_t gate)
{
	return mover_copy_prefetch(b, after, seq, gate);
}

/* Make an operation's buffers resident (mover.h). */
CUresult
mover_ensure(struct ebb_buf **bufs, size_t n, struct ebb_stream *consumer, uint64_t seq)
{
	return mover_copy_ensure(bufs, n, consumer, seq);
}

/* Keep b mapped for a question about it, as a use would (mover.h). */
CUresult
mover_map(struct ebb_buf *b, uint64_t seq)
{
	if (!mover.on || b->mv.managed != EBB_MANAGED_BIG)
		return CUDA_SUCCESS;
	return mover_copy_ensure(&b, 1, NULL, seq);
}
