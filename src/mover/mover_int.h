/*
 * mover_int.h: what the files of the mover share (mover.h is its API).
 *
 * mover.c       the entry points, initialisation and the limit: handles
 *               within EBB_LIMIT, freed big blocks, eviction, refusals
 * mover_slab.c  small buffers, carved from slabs
 * mover_tag.c   when memory the job freed may be used again
 * mover_lru.c   the resident movable buffers, least recently used first
 * mover_copy.c  offload and restore copies, drops and remakes, and the workers
 *               that retire them
 * mover_rate.c  copy bandwidth measured at start, and the rates copies get
 *
 * Everything here runs with ebb_state_lock held, as the entry points do,
 * unless it says otherwise.
 */
#ifndef EBB_MOVER_INT_H
#define EBB_MOVER_INT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "buftab.h"
#include "cuda_compat.h"
#include "mover.h"
#include "streams.h"

struct ebb_conf;
struct vmm_handle;

/* The state more than one file of the mover reads (defined in mover.c). */
struct mover {
	int on;				/* mover_init succeeded: the mover serves allocations */
	CUcontext ctx;			/* the context whose buffers move: the first one's */
	CUstream d2h, h2d;		/* ebb's copy streams, to the host and to the device */
	CUstream drop;			/* where a drop waits for its buffer's uses: no copies,
					 * so nothing queued delays the release */
	CUstream fence;			/* where a freed block's fence waits for a copy or a
					 * remake into it still in flight (mover_block_keep) */
	mover_remake_fn remake;		/* fills a dropped buffer (mover_set_remake) */
	uint64_t limit_conf;		/* EBB_LIMIT, or the device's size, in bytes */
	uint64_t limit;			/* what ebb may hold: limit_conf less what the driver
					 * took for the process beyond ebb's since the mover
					 * started (mover_sample_device) */
	int capturing;			/* a stream capture runs: the plan's moves pause, and a
					 * consumer waits on a restore's event (kept for the graph) */
	uint64_t graph_kept;		/* bytes of the driver's allocations that graphs freed,
					 * which the driver keeps for graphs (mover_room_for) */
	struct mover_stats stats;	/* the counters mover_stats reports */
	mover_keep_fn keep;		/* the buffers the plan keeps (mover_set_keeper) */
};
extern struct mover mover;

/* ---- mover.c ---- */

/* Device bytes ebb holds now: handles, slabs and the driver's allocations. */
uint64_t mover_held_total(void);

/* Raise the held_peak statistic to what ebb holds now, if it is more. */
void mover_note_held(void);

/* Write a move record of type (O, B, U, J) for operation seq, buffer b
 * (NULL: none) and bytes, with what as its reason, when tracing is on. */
void mover_trace_move(char type, uint64_t seq, const struct ebb_buf *b, uint64_t bytes,
    const char *what);

/* The host waited since t0 (for what, serving operation seq, 0 for an
 * allocation): add it to *ns and write an H record. */
void mover_host_waited(uint64_t *ns, uint64_t t0, const char *what, uint64_t seq);

/* A handle of rsize bytes within the limit without waiting or moving
 * anything, or NULL (*err set when creating one failed other than for want
 * of memory, *device_full when the device itself is full). */
struct vmm_handle *mover_try_handle(size_t rsize, int *device_full, CUresult *err);

/* How mover_get_handle may make room (flags). */
#define MOVER_NO_EVICT 1	/* wait for memory, but evict nothing */
#define MOVER_WITHIN 2		/* make no handle past EBB_LIMIT's share when nothing can move */

/* A handle of rsize bytes within the limit for operation seq (0: an
 * allocation), waiting for memory or, unless MOVER_NO_EVICT, evicting
 * buffers for it. Returns NULL with *err set (CUDA_ERROR_OUT_OF_MEMORY when
 * nothing more can be moved). */
struct vmm_handle *mover_get_handle(size_t rsize, uint64_t seq, int flags, CUresult *err);

/* Keep a freed big block, still mapped at va with h, for reuse once tag is
 * done and fence (NULL: none; the block owns it) too. Returns 0, or -1 when
 * there is no memory to keep it. */
int mover_block_keep(CUdeviceptr va, struct vmm_handle *h, const struct ebb_tag *tag,
    CUevent fence);

/* Explain an allocation or restore of size bytes that fails with
 * CUDA_ERROR_OUT_OF_MEMORY, for the reason why. */
void mover_refuse(size_t size, const char *why);

/* ---- mover_arena.c ---- */

/* Whether a buffer of rsize bytes (a multiple of the granularity) fits in
 * an arena chunk. */
int mover_arena_serves(size_t rsize);

/* Serve b's rsize bytes from the arena for an allocation on stream s (NULL
 * for cuMemAlloc): units a chunk already has free, freed on s, or of a
 * chunk mapped for it within the limit. Returns CUDA_SUCCESS with b set up
 * (resident, pinned with EBB_PIN_ARENA, no handle), or an error when the
 * arena cannot serve it (MOVER_DECLINE: none; else the error of making room
 * or of mapping): the buffer then gets a handle of its own. */
CUresult mover_arena_alloc(struct ebb_buf *b, size_t rsize, struct ebb_stream *s,
    CUdeviceptr *dptr);

/* The job freed arena buffer b: its units are reused once tag is done (or
 * at once for an allocation on tag's one stream). */
void mover_arena_free(struct ebb_buf *b, const struct ebb_tag *tag);

/* Release one mapped arena chunk none of whose units is in use, the highest
 * first. Returns 1 when one was released. */
int mover_arena_release_one(void);

/* Wait for the device to pass the arena's freed units, the oldest first,
 * until a chunk has none in use and is released. Returns 1 when one was,
 * 0 when none can be so (a live buffer in each). */
int mover_arena_wait_frees(void);

/* Bytes of the arena's chunks mapped now. */
uint64_t mover_arena_mapped(void);

/* A buffer was evicted for room while a plan ran: what the plan keeps did
 * not fit. Counted, with the arena's chunks beyond its live buffers then
 * (the units free between them, and those freed the device has not
 * passed), which the plan does not count (mover_take_excess). */
void mover_arena_evicted(void);

/* Nothing more can move, and only what the arena's chunks pin stands
 * between the job and rsize bytes: a handle over EBB_LIMIT, by at most what
 * they hold (said once; the exit says EBB_LIMIT was not held), and the
 * arena turned off. NULL, with *err set where the driver failed, where the
 * arena is not why or the handle cannot be made. */
struct vmm_handle *mover_arena_over(size_t rsize, CUresult *err);

/* A new physical handle of rsize bytes, counted as held. Returns
 * CUDA_SUCCESS or the driver's error. */
CUresult mover_make_handle(size_t rsize, struct vmm_handle **h);

/* ---- mover_slab.c ---- */

/* Set up the size classes of small buffers. */
void mover_slab_setup(void);

/* Whether small-buffer slabs serve an allocation of size bytes. */
int mover_slab_serves(size_t size);

/* Allocate b's size bytes from a slab (stream s: NULL for cuMemAlloc).
 * Returns CUDA_SUCCESS, CUDA_ERROR_OUT_OF_MEMORY, or MOVER_DECLINE. */
CUresult mover_slab_alloc(struct ebb_buf *b, size_t size, struct ebb_stream *s,
    CUdeviceptr *dptr);

/* The job freed small buffer b: its slot is reused once tag is done. */
void mover_slab_free(struct ebb_buf *b, const struct ebb_tag *tag);

/* Device bytes held in slabs. */
uint64_t mover_slab_held(void);

/* ---- mover_tag.c ---- */

/* Whether memory freed under t may be used again by any stream now. */
int mover_tag_done(const struct ebb_tag *t);

/* Make stream waiter wait for t. Returns CUDA_SUCCESS or the driver's error. */
CUresult mover_tag_wait(const struct ebb_tag *t, CUstream waiter);

/* Block until t is done. Returns CUDA_SUCCESS or the driver's error. */
CUresult mover_tag_sync(const struct ebb_tag *t);

/* Whether t names stream s alone (s not NULL): memory freed under it may be
 * used at once by work on s, stream order covering its last use. */
int mover_tag_only(const struct ebb_tag *t, const struct ebb_stream *s);

/* Record a marker where each stream of t now is, unless one covers t there. */
void mover_tag_mark(const struct ebb_tag *t);

/* ---- mover_lru.c ---- */

/* b becomes the most recently used resident movable buffer. */
void mover_lru_append(struct ebb_buf *b);

/* b leaves the list (nothing happens when it is not on it). */
void mover_lru_remove(struct ebb_buf *b);

/* The bytes of the resident movable buffers on the list. */
uint64_t mover_lru_bytes(void);

/* Why mover_init failed for good (NULL: it has not). */
const char *mover_failed_why(void);

/* Whether an operation using b is on its way to the driver. */
int mover_lru_in_flight(const struct ebb_buf *b);

/* The buffer to offload to make room for operation seq (of rsize bytes
 * when not 0), or NULL when none may move. */
struct ebb_buf *mover_lru_victim(uint64_t seq, size_t rsize);

/* ---- mover_copy.c ---- */

/* Start the workers (offload, restore, drop). Returns 0 or the error
 * pthread_create returned. */
int mover_copy_start(void);

/* Offload copies issued and not yet retired. */
uint64_t mover_copy_inflight(void);

/* Whether an offload copy of a buffer of rsize bytes is in flight. */
int mover_copy_inflight_sized(size_t rsize);

/* Wait for a worker to release memory; the time goes to *ns and an H record. */
void mover_copy_wait_room(uint64_t *ns, const char *what, uint64_t seq);

/* Copy b to the host behind its uses, for operation seq (why: the trace's
 * reason). Returns 1 when issued, 0 when not (no pinned host memory, or a
 * copy failed). */
int mover_copy_offload(struct ebb_buf *b, uint64_t seq, const char *why);

/* Bring b back for operation seq on consumer (NULL: a question about it).
 * Returns CUDA_SUCCESS or the error the operation should fail with. */
CUresult mover_copy_restore(struct ebb_buf *b, struct ebb_stream *consumer, uint64_t seq);

/* mover_plan_offload, mover_prefetch and mover_ensure, untimed. */
int mover_copy_plan_offload(struct ebb_buf *b, struct ebb_stream *after, uint64_t seq);
enum mover_drop mover_copy_plan_drop(struct ebb_buf *b, uint64_t seq);
int mover_copy_prefetch(struct ebb_buf *b, struct ebb_stream *after, uint64_t seq,
    uint64_t gate);
CUresult mover_copy_ensure(struct ebb_buf **bufs, size_t n, struct ebb_stream *consumer,
    uint64_t seq);

/* ---- mover_rate.c ---- */

/* Set the copy bandwidth the planner assumes: from conf, or measured now. */
void mover_rate_measure(const struct ebb_conf *conf);

/* A timing event recorded on s now, before a copy of bytes (NULL: too small
 * to time, or no event), for mover_rate_sample. */
CUevent mover_rate_copy_start(CUstream s, size_t bytes);

/* Note the rate of a copy of bytes in direction dir (0 to the host) that
 * ran from event start to event end. */
void mover_rate_sample(int dir, size_t bytes, CUevent start, CUevent end);

#endif
