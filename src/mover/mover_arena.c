/*
 * mover_arena.c: big buffers the running plan keeps resident, carved from
 * chunks of one size instead of a handle of their own.
 *
 * A buffer with its own handle holds memory of its size: when the job frees
 * memory in one size and needs it in another, ebb releases handles and makes
 * new ones, with their mappings (a creation, a mapping with its access
 * grant, an unmapping and a release: hundreds of microseconds a buffer on
 * the GPU). The buffers the plan neither moves nor drops never need their
 * own handle, so they share chunks: 64 MiB each (less under a small
 * EBB_LIMIT), mapped at their place in one reserved range, in units of the
 * device's granularity. A
 * buffer lies within one chunk, so that the driver's answer about its
 * address is one allocation, as for a slab's buffers. A freed buffer's units
 * wait for its tag (or serve an allocation on the one stream that freed it
 * at once, stream order covering it); a chunk none of whose units is in use
 * is released when memory is needed elsewhere.
 *
 * A live buffer pins its whole chunk: none of it can move. Where nothing
 * else can move and only what the chunks pin stands between the job and its
 * memory, the mover holds that memory over EBB_LIMIT rather than fail the
 * job (mover_arena_over), and the arena is turned off for the rest of
 * the process (mover_arena_off): later buffers get memory of their own,
 * which can move, and its chunks go as they empty.
 */
#include "config.h"

#include <stdlib.h>

#include "log.h"
#include "mover_int.h"
#include "trace.h"
#include "vmm.h"

#define ARENA_CHUNK_MAX ((size_t)64 << 20)
#define ARENA_UNITS_MAX 32	/* units a chunk at most: one bit each in a 32-bit mask */
#define ARENA_CHUNKS_MIN 32	/* EBB_LIMIT holds at least this many chunks */

/* Freed units of a chunk, waiting for their tag or for reuse. */
struct arena_freed {
	uint32_t chunk;
	uint8_t unit, n;	/* the first unit and how many */
	struct ebb_tag tag;
	struct arena_freed *next;
};

/* One chunk of the reserved range. */
struct arena_chunk {
	struct vmm_handle *h;	/* mapped: its handle; NULL: unmapped */
	uint32_t used;		/* units allocated or freed and pending, one bit each */
};

/* The arena's state (ebb_state_lock). */
struct mover_arena {
	int tried;			/* set up was attempted (arena_setup) */
	CUdeviceptr base;		/* the reserved range; 0: no arena */
	size_t unit;			/* bytes a unit: the granularity */
	size_t chunk_bytes;		/* bytes a chunk: ARENA_CHUNK_MAX, or less under a small
					 * EBB_LIMIT, so that it holds ARENA_CHUNKS_MIN of them */
	unsigned units;			/* units a chunk */
	uint32_t nchunks;		/* chunks of the range */
	struct arena_chunk *chunk;	/* nchunks of them */
	struct arena_freed *freed, *freed_tail;	/* freed units, the oldest first */
	struct mover_arena_stats st;	/* mover_arena_stats; st.off: it serves no more
					 * buffers (mover_arena_off) */
	uint64_t excess_since;		/* the most its chunks held beyond its buffers at an
					 * eviction under a plan, since mover_take_excess */
};
static struct mover_arena arena;

/* Reserve the range (once): chunks of up to ARENA_UNITS_MAX units, at most
 * 64 MiB, as many as EBB_LIMIT holds, it holding at least ARENA_CHUNKS_MIN
 * (a chunk is memory the arena may hold unused). Returns 0, or -1 when there
 * is no arena (a limit too small, no reservation). */
static int
arena_setup(void)
{
	if (arena.tried)
		return arena.base != 0 ? 0 : -1;
	arena.tried = 1;
	arena.unit = vmm_granularity();
	if (arena.unit == 0)
		return -1;
	arena.units = ARENA_UNITS_MAX;
	while (arena.units > 1 && ((uint64_t)arena.units * arena.unit > ARENA_CHUNK_MAX ||
	    (uint64_t)arena.units * arena.unit * ARENA_CHUNKS_MIN > mover.limit_conf))
		arena.units /= 2;
	arena.chunk_bytes = arena.units * arena.unit;
	if (arena.units < 2)
		return -1;	/* a limit of a few chunks: every big buffer has its own */
	uint64_t n = (mover.limit_conf + arena.chunk_bytes - 1) / arena.chunk_bytes;
	arena.chunk = calloc(n ? n : 1, sizeof *arena.chunk);
	if (arena.chunk == NULL)
		return -1;
	if (vmm_reserve(n * arena.chunk_bytes, &arena.base) != CUDA_SUCCESS) {
		free(arena.chunk);
		arena.chunk = NULL;
		arena.base = 0;
		ebb_log(EBB_LOG_NOTE, "no address range for the arena of %llu bytes: every big "
		    "buffer gets its own memory", (unsigned long long)(n * arena.chunk_bytes));
		return -1;
	}
	arena.nchunks = (uint32_t)n;
	return 0;
}

/* The mask of n units from unit u. */
static uint32_t
units_mask(unsigned u, unsigned n)
{
	return (n >= 32 ? 0xffffffffu : ((1u << n) - 1)) << u;
}

/* The first unit of a run of n free units in a chunk whose used mask is
 * used, or -1 when there is none. */
static int
free_run(uint32_t used, unsigned n)
{
	for (unsigned u = 0; u + n <= arena.units; u++) {
		uint32_t m = units_mask(u, n);
		if ((used & m) == 0)
			return (int)u;
		/* skip past the highest used unit of the window */
		u = 31u - (unsigned)__builtin_clz(used & m);
	}
	return -1;
}

/* Take the freed entry *p off the list (prev: the one before it, NULL for
 * the first); with release, its units become free and the entry goes. */
static void
freed_unlink(struct arena_freed **p, struct arena_freed *prev, int release)
{
	struct arena_freed *f = *p;

	*p = f->next;
	if (arena.freed_tail == f)
		arena.freed_tail = prev;
	if (release)
		arena.chunk[f->chunk].used &= ~units_mask(f->unit, f->n);
	free(f);
}

/* Freed units whose tags are done become free, the oldest first, looking
 * at 64 at most. */
static void
collect(void)
{
	struct arena_freed **p = &arena.freed, *prev = NULL;

	for (int looked = 0; *p != NULL && looked < 64; looked++) {
		struct arena_freed *f = *p;
		if (!mover_tag_done(&f->tag)) {
			prev = f;
			p = &f->next;
			continue;
		}
		freed_unlink(p, prev, 1);
	}
}

/* Units for n on stream s that the one stream freed (stream order covers
 * their last use), taken off the freed list: the chunk in *c, the first unit
 * returned, or -1. The smallest such run that holds n is taken; what is left
 * of it stays freed under its tag. */
static int
take_freed(struct ebb_stream *s, unsigned n, uint32_t *c)
{
	struct arena_freed **best = NULL, *best_prev = NULL, *prev = NULL;
	int looked = 0;

	if (s == NULL)
		return -1;
	for (struct arena_freed **p = &arena.freed; *p != NULL && looked < 64;
	    prev = *p, p = &(*p)->next, looked++) {
		if ((*p)->n < n || !mover_tag_only(&(*p)->tag, s))
			continue;
		if (best == NULL || (*p)->n < (*best)->n) {
			best = p;
			best_prev = prev;
			if ((*p)->n == n)
				break;
		}
	}
	if (best == NULL)
		return -1;
	struct arena_freed *f = *best;
	int u = f->unit;
	*c = f->chunk;
	if (f->n > n) {
		f->unit = (uint8_t)(f->unit + n);
		f->n = (uint8_t)(f->n - n);
		return u;
	}
	freed_unlink(best, best_prev, 0);	/* its units are the allocation's now */
	return u;
}

/* Map chunk c with a new handle made room for within the limit. Returns
 * CUDA_SUCCESS or the error of making room or of mapping. */
static CUresult
map_chunk(uint32_t c)
{
	CUresult err;
	struct vmm_handle *h = mover_get_handle(arena.chunk_bytes, 0, MOVER_NO_EVICT, &err);

	if (h == NULL)
		return err;
	CUresult r = vmm_map(arena.base + (CUdeviceptr)c * arena.chunk_bytes, h);
	if (r != CUDA_SUCCESS) {
		vmm_pool_put(h);
		return r;
	}
	arena.chunk[c].h = h;
	arena.chunk[c].used = 0;
	arena.st.chunks_mapped++;
	return CUDA_SUCCESS;
}

int
mover_arena_serves(size_t rsize)
{
	return !arena.st.off && arena_setup() == 0 && rsize <= arena.chunk_bytes;
}

void
mover_arena_off(const char *why)
{
	if (arena.st.off || arena.base == 0)
		return;
	arena.st.off = 1;
	arena.st.off_why = why;
	ebb_log(EBB_LOG_NOTE, "arena: off from now on (%s): its chunks hold %llu bytes for %llu "
	    "bytes of live buffers, and a chunk with a live buffer cannot move; later buffers "
	    "the plan keeps get memory of their own", why,
	    (unsigned long long)mover_arena_mapped(), (unsigned long long)arena.st.bytes);
	ebb_trace_note("arena-off", why);
}

void
mover_arena_evicted(void)
{
	uint64_t mapped = mover_arena_mapped();
	uint64_t excess = mapped > arena.st.bytes ? mapped - arena.st.bytes : 0;

	ebb_trace_note_u64("plan-eviction-excess", excess);
	mover.stats.planned_evictions++;
	if (excess > mover.stats.arena_excess)
		mover.stats.arena_excess = excess;
	if (excess > arena.excess_since)
		arena.excess_since = excess;
}

uint64_t
mover_take_excess(void)
{
	uint64_t e = arena.excess_since;

	arena.excess_since = 0;
	return e;
}

uint64_t
mover_arena_mapped(void)
{
	uint64_t n = 0;

	for (uint32_t k = 0; k < arena.nchunks; k++)
		n += arena.chunk[k].h != NULL;
	return n * arena.chunk_bytes;
}

int
mover_arena_wait_frees(void)
{
	while (arena.freed != NULL) {
		uint64_t t0 = ebb_now_ns();
		CUresult r = mover_tag_sync(&arena.freed->tag);
		mover_host_waited(&mover.stats.wait_room_ns, t0, "frees", 0);
		if (r != CUDA_SUCCESS)
			return 0;
		freed_unlink(&arena.freed, NULL, 1);
		if (mover_arena_release_one())
			return 1;
	}
	return 0;
}

/* Units for n on stream s in a mapped chunk, the lowest with room first so
 * that the high ones empty and can be released, or in a chunk mapped for
 * them: the chunk in *c, the first unit returned, or -1 with *err set
 * (MOVER_DECLINE when every chunk is mapped and full). */
static int
find_units(struct ebb_stream *s, unsigned n, uint32_t *c, CUresult *err)
{
	int u = take_freed(s, n, c);

	if (u >= 0)
		return u;
	collect();
	int unmapped = -1;
	for (uint32_t k = 0; k < arena.nchunks; k++) {
		if (arena.chunk[k].h == NULL) {
			if (unmapped < 0)
				unmapped = (int)k;
			continue;
		}
		if ((u = free_run(arena.chunk[k].used, n)) >= 0) {
			*c = k;
			return u;
		}
	}
	*err = unmapped < 0 ? MOVER_DECLINE : map_chunk((uint32_t)unmapped);
	if (*err != CUDA_SUCCESS)
		return -1;
	*c = (uint32_t)unmapped;
	return 0;
}

CUresult
mover_arena_alloc(struct ebb_buf *b, size_t rsize, struct ebb_stream *s, CUdeviceptr *dptr)
{
	if (rsize == 0 || !mover_arena_serves(rsize))
		return MOVER_DECLINE;
	unsigned n = (unsigned)(rsize / arena.unit);
	uint32_t c = 0;
	CUresult err = CUDA_SUCCESS;
	int u;
	/*
	 * No room, and none for a chunk (or every chunk is mapped): the memory
	 * the job freed into the arena ahead of the device is what the plan
	 * counted on. Wait for the device to pass the oldest such free, as for
	 * a freed block of a buffer of its own (the wait holds ebb_state_lock;
	 * the work it waits for needs none), and look again.
	 */
	while ((u = find_units(s, n, &c, &err)) < 0) {
		if ((err != CUDA_ERROR_OUT_OF_MEMORY && err != MOVER_DECLINE) || arena.freed == NULL)
			return err;
		uint64_t t0 = ebb_now_ns();
		CUresult r = mover_tag_sync(&arena.freed->tag);
		mover_host_waited(&mover.stats.wait_room_ns, t0, "frees", 0);
		if (r != CUDA_SUCCESS)
			return r;
		freed_unlink(&arena.freed, NULL, 1);
	}
	arena.chunk[c].used |= units_mask((unsigned)u, n);
	arena.st.allocs++;
	arena.st.bytes += rsize;
	if (arena.st.bytes > arena.st.bytes_peak)
		arena.st.bytes_peak = arena.st.bytes;
	b->mv.managed = EBB_MANAGED_BIG;
	b->mv.state = EBB_RESIDENT;
	b->mv.rsize = rsize;
	b->mv.isize = rsize;
	b->mv.handle = NULL;
	b->mv.arena = 1;
	b->pinned |= EBB_PIN_ARENA;
	*dptr = arena.base + (CUdeviceptr)c * arena.chunk_bytes + (CUdeviceptr)u * arena.unit;
	return CUDA_SUCCESS;
}

void
mover_arena_free(struct ebb_buf *b, const struct ebb_tag *tag)
{
	struct arena_freed *f = malloc(sizeof *f);
	uint64_t off = b->addr - arena.base;

	arena.st.bytes -= b->mv.rsize;
	b->mv.arena = 0;
	if (f == NULL)
		return;	/* the units stay in use; nothing else breaks */
	*f = (struct arena_freed){ .chunk = (uint32_t)(off / arena.chunk_bytes),
		.unit = (uint8_t)(off % arena.chunk_bytes / arena.unit),
		.n = (uint8_t)(b->mv.rsize / arena.unit), .tag = *tag };
	if (arena.freed_tail != NULL)
		arena.freed_tail->next = f;
	else
		arena.freed = f;
	arena.freed_tail = f;
	mover_tag_mark(tag);
}

int
mover_arena_release_one(void)
{
	if (arena.base == 0)
		return 0;
	collect();
	for (uint32_t k = arena.nchunks; k-- > 0;) {
		struct arena_chunk *c = &arena.chunk[k];
		if (c->h == NULL || c->used != 0)
			continue;
		CUdeviceptr va = arena.base + (CUdeviceptr)k * arena.chunk_bytes;
		if (vmm_unmap(va, arena.chunk_bytes) != CUDA_SUCCESS) {
			/* still mapped: the chunk is never used again */
			mover.stats.unmaps_failed++;
			c->used = 0xffffffffu;
			continue;
		}
		vmm_release(c->h);
		c->h = NULL;
		arena.st.chunks_released++;
		return 1;
	}
	return 0;
}

/* A handle over EBB_LIMIT where only the arena's chunks pin the room
 * (mover_int.h): the arena is ebb's own, and failing the job for it would
 * be worse than going over by what it holds. */
struct vmm_handle *
mover_arena_over(size_t rsize, CUresult *err)
{
	static int said;
	uint64_t pinned = mover_arena_mapped();
	struct vmm_handle *h;

	if (pinned == 0 || mover_held_total() + rsize > mover.limit_conf + pinned)
		return NULL;
	CUresult r = mover_make_handle(rsize, &h);
	if (r != CUDA_SUCCESS) {
		*err = r;
		return NULL;
	}
	mover.stats.arena_over++;
	if (mover_held_total() > mover.limit_conf &&
	    mover_held_total() - mover.limit_conf > mover.stats.arena_over_bytes)
		mover.stats.arena_over_bytes = mover_held_total() - mover.limit_conf;
	ebb_log_once(&said, EBB_LOG_WARN, "no room under EBB_LIMIT=%llu for "
	    "the %llu bytes the job needs, and nothing more can move: the arena's chunks hold "
	    "%llu bytes, pinned by the buffers the plan keeps in them; ebb holds the buffer over "
	    "EBB_LIMIT rather than fail the job, and serves no more buffers from the arena "
	    "(EBB_ARENA=0 keeps every buffer movable)", (unsigned long long)mover.limit_conf,
	    (unsigned long long)rsize, (unsigned long long)pinned);
	mover_arena_off("no room");
	return h;
}

void
mover_arena_stats(struct mover_arena_stats *out)
{
	*out = arena.st;
}
