/*
 * mover.h: serving allocations, and moving buffers to the host and back.
 *
 * In EBB_MODE=offload the engine hands allocations and frees to the mover:
 *
 * - A buffer of at least EBB_MIN_OFFLOAD_BYTES gets its own reserved range
 *   and one physical handle (vmm.h); smaller ones come from 2 MiB slabs and
 *   never move. Memory the job frees is handed out again only after the work
 *   that used it is done (an event, or stream order on the same stream),
 *   and the driver's cuMemFree is never called.
 * - Offload: a D2H copy on ebb's own stream, ordered after every use of the
 *   buffer, then, once the copy is done, the offload worker unmaps the handle
 *   and pools it (never before the copy is done). The range stays reserved, so
 *   the job's pointer stays valid.
 * - Restore: a pooled (or new) handle mapped at the same address, an H2D
 *   copy on ebb's other stream, and the consumer stream made to wait on it;
 *   the host waits for nothing.
 * - EBB_LIMIT: when an allocation or a restore would take the memory ebb
 *   holds above the limit, resident buffers are offloaded, least recently
 *   used first, preferring those no queued work uses. When nothing can be,
 *   the allocation fails with CUDA_ERROR_OUT_OF_MEMORY, as the driver's
 *   would.
 *
 * Every function runs with ebb_state_lock held; the mover releases it
 * only while it waits for a worker to free memory.
 */
#ifndef EBB_MOVER_H
#define EBB_MOVER_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "buftab.h"
#include "cuda_compat.h"
#include "streams.h"

struct ebb_conf;

/*
 * When memory the job freed may be used again: once every (stream, seq) is
 * done, or, with `all`, once every stream has got as far as it had when the
 * memory was freed (seq[0] is then the operation count at the free).
 */
struct ebb_tag {
	struct ebb_stream *s[EBB_BUF_STREAMS];
	uint64_t seq[EBB_BUF_STREAMS];
	uint8_t n;
	uint8_t all;
};

struct mover_stats {
	uint64_t offloads, restores, cancels, refusals;
	uint64_t drops;			/* buffers whose contents the plan dropped (recompute) */
	uint64_t remakes;		/* of them, remade by the remake function */
	uint64_t remakes_nested;	/* of those, inside another remake of the same
					 * thread (an input of it dropped too) */
	uint64_t drop_waits;		/* of them, used again before they released their
					 * memory: the host waited for that, then remade them */
	uint64_t drops_undone;		/* of them, kept instead (used as ebb stopped) */
	uint64_t planned_offloads;	/* of offloads: issued by the plan */
	uint64_t planned_evictions;	/* of offloads: for room, while a plan ran (what it
					 * kept did not fit) */
	uint64_t arena_excess;		/* the most the arena's chunks held beyond its live
					 * buffers at such an eviction (mover_arena_evicted) */
	uint64_t prefetches;		/* of restores: issued by the plan ahead of use */
	uint64_t prefetches_skipped;	/* no room within the limit without evicting */
	uint64_t prefetches_early;	/* of prefetches: issued at once, there being room,
					 * without waiting for the device to near them */
	uint64_t wait_room_ns;		/* the host waited for room (copies landing, frees passed) */
	uint64_t wait_gate_ns;		/* a restore waited for the device to near it */
	uint64_t wait_landing_ns;	/* a restore waited for its buffer's offload to land */
	uint64_t wait_drop_ns;		/* a remake waited for its buffer's drop to release */
	uint64_t remake_ns;		/* the host's time in remakes: mapping the memory again,
					 * the remake function (its inputs made resident, its
					 * launches), waits for room included; a remake inside
					 * another counted in it */
	uint64_t copies_abandoned;	/* copies whose completion could not be known */
	uint64_t unmaps_failed;		/* cuMemUnmap failed: that memory stays mapped, unused */
	uint64_t over_limit;		/* the driver's allocations took the job over EBB_LIMIT */
	uint64_t driver_served_peak;	/* the most device bytes of the driver's allocations
					 * (mover_note_unmanaged) held at once */
	uint64_t arena_over;		/* handles made over EBB_LIMIT where the arena's
					 * chunks pinned the room (mover_arena_over) */
	uint64_t arena_over_bytes;	/* the most they took ebb over EBB_LIMIT */
	uint64_t bytes_d2h, bytes_h2d;
	uint64_t stall_ns, stalls_measured;
	uint64_t held, held_peak;	/* device bytes ebb holds: handles, slabs, others */
	uint64_t beyond_held;		/* the most device memory used beyond what ebb held and
					 * what was used when it started (mover_sample_device) */
	uint64_t process_peak;		/* the most device memory used beyond what was used when
					 * it started, at a sample: the process's */
	uint64_t over_samples;		/* samples of the device with the process over EBB_LIMIT */
	uint64_t over_movable;		/* 1: at one of them (the first such ends the asking),
					 * the buffers ebb could evict held the excess or more */
	uint64_t host_pinned;
	uint64_t host_pin_ns;		/* spent pinning it (out of the offloads' costs) */
	uint64_t handles_created;
	uint64_t past_driver_share;	/* allocations within EBB_LIMIT but past what the
					 * driver's own memory left ebb: handles made when
					 * nothing more could move, and the driver's own */
	/* the host's time in ebb's moves (the job's thread, or the worker holding
	 * ebb_state_lock, which the job's thread then waits for) */
	uint64_t offload_host_ns, offloads_timed;	/* issuing offload copies */
	uint64_t restore_host_ns, restores_timed;	/* mapping and issuing restore copies */
	uint64_t unmap_ns, unmaps_timed;	/* unmapping offloaded buffers (worker) */
	uint64_t drop_host_ns, drops_timed;	/* issuing drops */
};

/*
 * Set up on the first allocation, in the job's current context. Returns 0,
 * or -1 (said once: ebb then passes allocations to the driver and moves
 * nothing). The mover runs under ebb_state_lock (locks.h), its workers
 * included.
 */
int mover_init(const struct ebb_conf *conf);

/* Whether the mover serves allocations now. */
int mover_on(void);

/* The mover cannot serve this call: the driver must. */
#define MOVER_DECLINE ((CUresult)-1)

/*
 * Allocate size bytes for b (stream: NULL for cuMemAlloc, else the stream
 * of cuMemAllocAsync). Fills *dptr and b's address, size and mover fields.
 * Returns CUDA_SUCCESS, CUDA_ERROR_OUT_OF_MEMORY, or MOVER_DECLINE.
 */
CUresult mover_alloc(struct ebb_buf *b, size_t size, struct ebb_stream *stream,
    CUdeviceptr *dptr);

/*
 * Device memory of ebb's own (scratch, digests), served as an allocation of
 * the job's is: within EBB_LIMIT (other buffers move to make room), never
 * moved, in no buffer table. *out gets its buffer (its address and size),
 * for mover_own_free. Returns CUDA_SUCCESS, CUDA_ERROR_NOT_SUPPORTED where
 * the mover does not serve it (not offloading, another context), or the
 * allocation's error.
 */
CUresult mover_own_alloc(size_t size, struct ebb_buf **out);

/* Give b (mover_own_alloc's; NULL: nothing) back once stream st has passed
 * operation seq (st NULL: now). */
void mover_own_free(struct ebb_buf *b, struct ebb_stream *st, uint64_t seq);

/*
 * The job freed b (already out of the buffer table), reusable once tag is
 * done. Returns 1 when the mover keeps the struct (and recycles it later),
 * 0 when the engine may recycle it now.
 */
int mover_free(struct ebb_buf *b, const struct ebb_tag *tag);

/*
 * Make bufs resident before operation seq runs on consumer (restoring from
 * the host where needed, ordered on consumer; buffers of the operation are
 * never evicted for each other). Returns CUDA_SUCCESS or the error the
 * operation should fail with.
 */
CUresult mover_ensure(struct ebb_buf **bufs, size_t n, struct ebb_stream *consumer,
    uint64_t seq);

/*
 * Keep b mapped at its address for a question the job asks the driver about
 * it, as a use of it would (mover_ensure with no consumer): an offload in
 * flight is cancelled (the worker would unmap it while the driver answers),
 * one being unmapped is waited out and restored; on the host, its copy back
 * is queued and later uses wait for it, as after a restore ahead of use (B
 * record of kind query). Returns CUDA_SUCCESS, or the error that left it on
 * the host (no room).
 */
CUresult mover_map(struct ebb_buf *b, uint64_t seq);

/*
 * The plan (exec.c) moves buffers from now on (1) or no longer (0). While
 * it does, an allocation over the limit waits for offloads in flight before
 * it evicts anything.
 */
void mover_set_planned(int on);

/* Offload b now, behind every use of it (the plan's offload after a last
 * use), and, when after is not NULL, behind operation seq of stream after
 * (a copy of the job's to the host, which the offload would delay if it
 * were queued first). Returns 1 when issued, 0 when b cannot move now. */
int mover_plan_offload(struct ebb_buf *b, struct ebb_stream *after, uint64_t seq);

/*
 * Recompute (src/exec/recompute.c): a buffer's contents may be dropped
 * instead of copied, and remade from other buffers by the one who dropped
 * them. mover_plan_drop(b, seq) releases b's memory once every use of it
 * queued so far is done (as an offload does, on ebb's drop stream, which
 * copies nothing) and copies nothing: returns MOVER_DROPPED when issued,
 * else why b cannot be dropped now (enum mover_drop). Whenever a dropped buffer must be resident again (an
 * operation uses it, mover_ensure, mover_map), the mover maps memory at its
 * address within EBB_LIMIT and calls the remake function set by
 * mover_set_remake: fn(b, consumer, seq, &done) must fill b on the device
 * and set done to an event recorded after that work (NULL: none needed),
 * which consumer (NULL: none) and later uses wait for on the device; it
 * returns CUDA_SUCCESS or the error the operation that needed b fails with.
 * Used before the drop has released the memory, the host waits for the
 * release (drop_waits, wait_drop_ns), so that the memory the plan counts as
 * free is, and then remakes it; only as ebb stops is such a buffer kept, as
 * a cancelled offload is (b->mv.dropped is then 0 again: drops_undone).
 */
typedef CUresult (*mover_remake_fn)(struct ebb_buf *b, struct ebb_stream *consumer,
    uint64_t seq, CUevent *done);
enum mover_drop {
	MOVER_DROPPED = 0,	/* issued */
	MOVER_DROP_OFF,		/* moving is off, a capture runs, or no remake function */
	MOVER_DROP_AWAY,	/* not resident: on the host, or on its way there */
	MOVER_DROP_RETIRING,	/* an earlier move of it, cancelled, has not landed */
	MOVER_DROP_PINNED,	/* pinned where it is (a graph, a failure, a query) */
	MOVER_DROP_IN_FLIGHT,	/* a use of it is on its way to the driver */
	MOVER_DROP_FAILED	/* issuing it failed (b stays resident) */
};
enum mover_drop mover_plan_drop(struct ebb_buf *b, uint64_t seq);
/* What a refusal of mover_plan_drop means, in words. */
const char *mover_drop_why(enum mover_drop why);
void mover_set_remake(mover_remake_fn fn);

/*
 * Whether the allocation about to be made, of rsize bytes (the granularity's
 * multiple), is one the running plan keeps resident: it neither moves nor
 * drops it. Such a buffer is served from the arena (mover_arena.c), where
 * buffers share chunks instead of each holding a handle of its own size.
 * Set by the executor (NULL: none is kept).
 */
typedef int (*mover_keep_fn)(size_t rsize);
void mover_set_keeper(mover_keep_fn fn);

/*
 * Restore b ahead of its use: an H2D copy on ebb's stream that starts once
 * operation seq on stream after is done; later uses wait for the copy on
 * the device, never on the host. The host first waits until the device
 * has passed operation gate of stream after (0: no gate), so that the
 * memory is taken when the device, not the host, is near seq; then for
 * b's offload to land, if it has not. When there is no room within the
 * limit without evicting, nothing is done (the use restores it). Returns 1
 * when issued.
 */
int mover_prefetch(struct ebb_buf *b, struct ebb_stream *after, uint64_t seq, uint64_t gate);

/* Copy bandwidth in bytes a second measured at start (0 when not measured). */
void mover_bandwidth(double *d2h_bps, double *h2d_bps);

/* The median rate, in GB/s, of the last copies of ebb's own of at least 4
 * MiB that have landed, each direction (gbps[0] to the host), and how many
 * it is of (0: none, and a rate of 0). */
void mover_copy_rates(double gbps[2], uint32_t count[2]);

/* What ebb may hold (EBB_LIMIT less the driver's own memory for the
 * process since the mover started), and the bytes it holds outside
 * movable buffers (slabs of small buffers, the driver's allocations). */
uint64_t mover_limit(void);
uint64_t mover_fixed_held(void);

/* b was used by an operation: it becomes the most recently used. */
void mover_touch(struct ebb_buf *b);

/* b may never move again (a captured graph, NCCL registration). */
void mover_pin(struct ebb_buf *b);

/* Whether EBB_LIMIT went unheld in this process (the mover could not start,
 * or the driver's allocations took the job over it): 1 with the reason in
 * why, else 0. */
int mover_unheld(char *why, size_t len);

/* Whether the process went over EBB_LIMIT (by the device's samples) only
 * where what ebb could move was less than the excess: no mover holds that
 * limit (mover_stats' over_samples, over_movable). */
int mover_limit_unholdable(void);

/* Device bytes of allocations the driver served while ebb was offloading. */
void mover_note_unmanaged(int64_t bytes);

/* Make room within EBB_LIMIT for size bytes the driver is about to serve
 * (a stream capture's memory node), evicting what may move (mover_lru.c). */
void mover_room_for(size_t size);

/* The driver's allocation of size bytes is freed, by a graph (graph: in a
 * capture, its memory kept for graphs and counted) or not (mover_lru.c). */
void mover_note_driver_free(size_t size, int graph);

/* Sample the device's used memory (cuMemGetInfo) against what ebb holds
 * and what was used when the mover started: the most used beyond both is
 * beyond_held (the driver's own for the process: modules loaded lazily,
 * libraries' handles; or the memory of another process on the device),
 * and what ebb may hold is EBB_LIMIT less it. Called as what ebb holds
 * grows and at each iteration's start. */
void mover_sample_device(void);

/* While a stream capture runs (1 begin, 0 end) the plan's moves pause;
 * allocations are still served within the limit, buffers the capture does
 * not use may be evicted for them, and what it uses is restored. */
void mover_capture(int active);

void mover_stats(struct mover_stats *out);

/* The most the arena's chunks held beyond its live buffers where a plan's
 * buffers were evicted for room, since the last call (0: no such
 * eviction, or none with an excess). */
uint64_t mover_take_excess(void);

/* What the arena of buffers the plan keeps has done (mover_arena.c). */
struct mover_arena_stats {
	uint64_t allocs;		/* buffers it served */
	uint64_t bytes, bytes_peak;	/* bytes of its live buffers now, and at most */
	uint64_t chunks_mapped;		/* chunks mapped (each a new handle) */
	uint64_t chunks_released;	/* chunks released to make room elsewhere */
	int off;			/* turned off (mover_arena_off) */
	const char *off_why;		/* then why: "no room" or "under the bound" */
};
void mover_arena_stats(struct mover_arena_stats *out);

/* Serve no more buffers from the arena, for why (said once, and noted as
 * arena-off with why's spaces as underscores): its chunks pinned memory the
 * job needed ("no room"), or what they hold beyond their buffers would
 * have lowered the plan under its bound ("under the bound"). Its chunks are
 * released as they empty. Caller holds ebb_state_lock. */
void mover_arena_off(const char *why);

/*
 * Whether this thread has issued a move (a copy to the host or back, with
 * its mapping) since it last asked; asking clears it. The driver's frames
 * under a move leave the buffer's device address on the thread's stack,
 * where a launch's unfilled parameter words may pick it up (engine.c).
 */
int mover_moved_here(void);

/* What a move costs the host (struct mover_costs), from the moves so far
 * in the process; 0 where none was made. */
struct mover_costs {
	double offload_s;	/* issuing an offload's copy, and unmapping the memory
				 * once it has landed (ebb's worker does, and the
				 * driver's mappings wait for each other) */
	double restore_s;	/* mapping the memory, issuing the copy */
	double drop_s;		/* issuing a drop (an offload's copy before any drop),
				 * and unmapping the memory, as an offload's */
	double remake_s;	/* a remake's mapping, its launches aside (a mapping's
				 * mean; a restore's cost before any mapping) */
};
void mover_move_costs(struct mover_costs *c);

/* Where the moves and the driver's virtual memory calls stood
 * (mover_cost_mark), for mover_move_costs_since. */
struct mover_cost_mark {
	uint64_t moves;			/* offloads and drops issued */
	uint64_t vmm_ns;		/* every thread's creations, releases, mappings
					 * and unmappings */
	uint64_t map_ns, maps;
	uint64_t offload_host_ns, offloads_timed, restore_host_ns, restores_timed;
	uint64_t drop_host_ns, drops_timed;
};
void mover_cost_mark(struct mover_cost_mark *m);

/*
 * What a move has cost since mark m, into c, with every call of the driver's
 * virtual memory since charged to the moves: under a plan a buffer that
 * moves, unlike one it keeps, also takes memory of its own at each
 * allocation, and memory made or released for room goes with the moves;
 * the driver's calls on ebb's workers wait for the job's and theirs for
 * them. A move's cycle (away and back) is charged half the calls' time a
 * move at each end, beside issuing it. Returns 1, or 0 (c untouched) when
 * fewer than min moves were made since m.
 */
int mover_move_costs_since(const struct mover_cost_mark *m, uint64_t min, struct mover_costs *c);

/* Stop the workers (at exit). */
void mover_shutdown(void);

#endif
