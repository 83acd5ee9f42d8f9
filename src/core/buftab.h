/*
 * buftab.h: the buffer table, every live allocation ebb has seen, by address.
 *
 * A treap keyed by start address: insert, remove and "which buffer holds
 * this address" in O(log n) expected. Not thread-safe: the engine holds its
 * mutex around every call.
 */
#ifndef EBB_BUFTAB_H
#define EBB_BUFTAB_H

#include <stddef.h>
#include <stdint.h>

/* Streams whose last use of a buffer is remembered individually. */
#define EBB_BUF_STREAMS 4

struct ebb_stream_use {
	uintptr_t stream;	/* normalised stream handle */
	uint64_t seq;		/* operation sequence number of the last use */
};

struct vmm_handle;
struct CUevent_st;	/* cuda.h's CUevent is a struct CUevent_st * */

/* The mover's part of a buffer (EBB_MODE=offload); see mover.h. */
struct ebb_buf_mover {
	uint8_t managed;	/* EBB_MANAGED_* */
	uint8_t state;		/* EBB_RESIDENT, EBB_OFFLOADING, EBB_ON_HOST */
	uint8_t freed;		/* freed by the job while an offload was in flight */
	uint8_t cancelled;	/* used again before its offload finished */
	uint8_t dropped;	/* its contents are dropped, not copied (being released,
				 * or released): it is remade, not restored */
	uint8_t remaking;	/* mapped again, its producers not yet launched (the
				 * remake may wait for room for its inputs, the lock
				 * released): other uses wait until it is cleared */
	uint8_t releasing;	/* its copy done (or its uses passed, for a drop), a worker
				 * unmaps it with ebb_state_lock released: still
				 * EBB_OFFLOADING, and nothing else may touch its memory
				 * until this is cleared */
	uint8_t arena;		/* its memory is a part of an arena chunk (mover_arena.c),
				 * not a handle of its own: it never moves */
	uint16_t pending;	/* worker items that refer to it */
	uint64_t rsize;		/* bytes of its range and physical handle */
	uint64_t isize;		/* bytes it asked for, rounded as rsize was (a slab's
				 * class, the granularity): its identity in a plan, where
				 * rsize may be that of a larger freed block it took */
	struct vmm_handle *handle;	/* its physical memory while mapped */
	void *host;		/* pinned copy while offloading or on the host */
	struct CUevent_st *ev;	/* the offload copy is done */
	struct CUevent_st *arrive;	/* a restore copy that later uses wait for */
	struct ebb_buf *lru_prev, *lru_next;	/* resident movable buffers, least recent first */
};

struct ebb_buf {
	uint64_t addr;		/* device address (start) */
	uint64_t size;		/* bytes */
	uint64_t id;		/* allocation ordinal since start, from 1 */
	uint64_t site;		/* call-site fingerprint */
	uintptr_t stream;	/* stream of the allocation (normalised) */
	uint64_t alloc_ns;
	uint64_t alloc_seq;	/* operations before the allocation */
	uint64_t uses;		/* operations that referenced it */
	uint64_t last_seq;	/* last operation that referenced it */
	uint64_t producer_seq;	/* first operation that referenced it, 0 if none */
	uint32_t producer_kernel;	/* kernel id of that operation, 0 if not a launch */
	uint8_t kind;		/* enum ebb_alloc_kind */
	uint8_t nstreams;	/* entries used in last[] */
	uint8_t streams_overflow;	/* more streams used it than last[] holds */
	uint8_t pinned;		/* EBB_PIN_* reasons it must stay resident */
	struct ebb_stream_use last[EBB_BUF_STREAMS];
	struct ebb_buf_mover mv;	/* the mover's */
	uint32_t plan_ord;	/* exec.c: its allocation ordinal in the iteration, plus 1 */
	uint32_t rc_gap;	/* recompute.c: its dropped gap's entry, plus 1 (0: none) */
	uint32_t rc_inputs;	/* recompute.c: dropped buffers whose remake reads it */
	uint32_t rc_idx;	/* recompute.c: its profile index, while rc_inputs */
	struct ebb_buf *free_next;	/* buftab.c: the list of recycled structs */
	/* treap links (buftab.c) */
	struct ebb_buf *left, *right;
	uint32_t prio;
	uint32_t nhints;	/* buftab.c: the hint ways that name it */
};

/* How the mover serves a buffer (ebb_buf.mv.managed). */
enum {
	EBB_UNMANAGED = 0,	/* the driver's own allocation: never moves */
	EBB_MANAGED_SMALL,	/* from ebb's slabs: never moves */
	EBB_MANAGED_BIG		/* its own range and handle: may move */
};

/* Where a movable buffer's contents are (ebb_buf.mv.state). */
enum {
	EBB_RESIDENT = 0,	/* mapped on the device */
	EBB_OFFLOADING,		/* being copied to the host; still mapped */
	EBB_ON_HOST		/* on the host only; the range is unmapped */
};

/* Why a buffer may not move (bits of ebb_buf.pinned). */
enum {
	EBB_PIN_GRAPH = 1,	/* referenced by a captured graph */
	EBB_PIN_NCCL = 2,	/* registered with NCCL */
	EBB_PIN_CAPTURE = 4,	/* allocated while a stream was capturing */
	EBB_PIN_SMALL = 8,	/* below EBB_MIN_OFFLOAD_BYTES */
	EBB_PIN_FAILED = 16,	/* an offload of it failed */
	EBB_PIN_ARENA = 32	/* served from the arena: the running plan keeps it resident */
};

/* Hints of a table: a cache of lookups by 64 KiB region, BUFTAB_HINT_SETS
 * sets of BUFTAB_HINT_WAYS buffers (a set in one cache line), each region
 * hashed to one set. */
#define BUFTAB_HINT_SETS 256
#define BUFTAB_HINT_WAYS 4

struct buftab {
	struct ebb_buf *root;
	uint64_t count;
	uint64_t bytes;
	uint64_t lo, hi;	/* no buffer starts below lo or ends above hi */
	/*
	 * The buffers lookups in each set's regions found last, newest first:
	 * a launch's pointers are mostly those of the launches before it, and
	 * a walk down the treap visits tens of nodes, each a likely cache
	 * miss, where the table holds tens of thousands of buffers. Several
	 * ways a set keep apart the small buffers that share a region (a
	 * stream-ordered pool packs them) and the regions that share a set. A
	 * hint is used when its buffer holds the address (buffers in a table
	 * do not overlap, so it is the one); removing a buffer clears the
	 * hints that name it.
	 */
	_Alignas(64) struct ebb_buf *hint[BUFTAB_HINT_SETS][BUFTAB_HINT_WAYS];
};

void buftab_init(struct buftab *t);

/*
 * Insert b (addr and size set). Returns 0, or -1 if b overlaps a buffer
 * already there (the table is unchanged).
 */
int buftab_insert(struct buftab *t, struct ebb_buf *b);

/* The buffer that starts exactly at addr, removed from the table, or NULL. */
struct ebb_buf *buftab_remove(struct buftab *t, uint64_t addr);

/* The buffer holding addr (start <= addr < start + size), or NULL. */
struct ebb_buf *buftab_find(struct buftab *t, uint64_t addr);

/* The first buffer overlapping [addr, addr + size), or NULL. */
struct ebb_buf *buftab_overlap(const struct buftab *t, uint64_t addr, uint64_t size);

/* Call fn on every buffer in address order; stops early when fn returns nonzero. */
void buftab_walk(const struct buftab *t, int (*fn)(struct ebb_buf *, void *), void *ctx);

/* buftab_note_use's part for a stream other than the one b's first entry
 * names: its entry in b->last, made or reused. */
void buftab_note_stream(struct ebb_buf *b, uintptr_t stream, uint64_t seq);

/* Remember that the operation seq on stream used b. Inline, as every
 * buffer of every operation is noted: a use on the stream of b's first
 * entry, nearly every use of a job on one stream, takes no call. */
static inline void
buftab_note_use(struct ebb_buf *b, uintptr_t stream, uint64_t seq)
{
	b->uses++;
	b->last_seq = seq;
	if (b->nstreams > 0 && b->last[0].stream == stream)
		b->last[0].seq = seq;
	else
		buftab_note_stream(b, stream, seq);
}

/* A zeroed buffer struct, recycled or allocated; NULL when out of memory.
 * Caller holds ebb_state_lock (locks.h). */
struct ebb_buf *ebb_buf_new(void);

/* Keep a buffer struct no table or copy holds any more, for ebb_buf_new.
 * Caller holds ebb_state_lock. */
void ebb_buf_put(struct ebb_buf *b);

#endif
