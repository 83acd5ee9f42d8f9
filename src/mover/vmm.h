/*
 * vmm.h: device memory through the driver's virtual memory management.
 *
 * A buffer ebb may move gets its own reserved virtual range; the physical
 * memory behind it is one handle of the range's size. Offloading unmaps the
 * handle (the range stays reserved, so the job's pointer stays valid) and
 * restoring maps one back at the same address. Handles are pooled by size,
 * and ranges too.
 *
 * A handle is not a driver allocation of its own: it is one part (an
 * extent), or a few, of the driver's physical allocations, chunks of
 * vmm_set_chunk's size or fewer made with cuMemCreate as memory is needed and
 * mapped part by part (cuMemMap's offset). The driver's cost of a handle is
 * per call, not per byte, and making and releasing one per buffer cost as
 * much as mapping it; carving parts out of chunks and giving them back
 * costs no driver call, so memory idle in one size serves another at the
 * cost of mapping alone. Chunks are released only when wholly unused and
 * the device or the limit wants their memory (vmm_trim).
 *
 * Not thread-safe: the engine holds its mutex.
 */
#ifndef EBB_VMM_H
#define EBB_VMM_H

#include <stddef.h>
#include <stdint.h>

#include "cuda_compat.h"

/* A driver allocation (cuMemCreate) that handles are parts of. */
struct vmm_chunk;

/* The most extents a handle has: one where a free part of a chunk holds it,
 * more only when the free memory is in smaller pieces (one map call each). */
#define VMM_EXTENTS 4

/* The most bytes of a chunk made for a smaller handle (vmm_set_chunk); a
 * buffer larger gets a chunk of its own size. */
#define VMM_CHUNK_MAX ((size_t)1 << 30)

struct vmm_extent {
	struct vmm_chunk *chunk;
	size_t off;			/* where in the chunk */
	size_t size;
};

struct vmm_handle {
	size_t size;			/* the sum of its extents */
	int stuck;			/* a failed map left it mapped: never pooled */
	int n;				/* extents, mapped in order from the range's start */
	struct vmm_extent e[VMM_EXTENTS];
	struct vmm_handle *next;	/* in the pool */
};

/*
 * Set up for device dev. Returns 0, or -1 when the device has no VMM
 * support (said once; ebb then moves nothing).
 */
int vmm_init(CUdevice dev);

/* Make chunks of bytes (rounded down to the granularity, at most
 * VMM_CHUNK_MAX, and at most an eighth of what the chunks hold) where there
 * is room; a chunk's free rest is memory no buffer uses until one needs it. */
void vmm_set_chunk(size_t bytes);

/* The allocation granularity (2 MiB on current GPUs). */
size_t vmm_granularity(void);

/* size rounded up to the granularity. */
size_t vmm_round(size_t size);

/* A reserved range of rsize bytes. Returns 0 or a CUresult. */
CUresult vmm_reserve(size_t rsize, CUdeviceptr *va);
/* Give a range back (it must be unmapped). */
void vmm_unreserve(CUdeviceptr va, size_t rsize);

/* A handle of rsize bytes from the pool, or NULL. */
struct vmm_handle *vmm_pool_take(size_t rsize);
/* The pooled handle pooled longest ago (to be released to make room), or
 * NULL. The sizes the job is going through now are the ones it pooled last,
 * so the oldest is the one least likely to be needed again soon. */
struct vmm_handle *vmm_pool_any(void);
/* Put a handle in the pool (one left mapped by a failed vmm_map stays out). */
void vmm_pool_put(struct vmm_handle *h);

/*
 * A handle of rsize bytes: the free part of a chunk that fits it best, or
 * parts of a new chunk of up to grow bytes (the physical memory the caller
 * lets ebb add), or, when free memory is in pieces, the largest few of them
 * and a chunk for what they leave. Returns 0, or CUDA_ERROR_OUT_OF_MEMORY
 * with *device_full set where the driver itself had no memory for a chunk
 * (after releasing wholly unused chunks and trying again for what is
 * needed alone) and clear where the free memory and grow do not hold it,
 * or another CUresult of cuMemCreate's.
 */
CUresult vmm_create(size_t rsize, size_t grow, struct vmm_handle **out, int *device_full);
/* Give a handle's memory back to its chunks (it must be unmapped
 * everywhere); no driver call. */
void vmm_release(struct vmm_handle *h);
/* Release wholly unused chunks to the driver, the newest first, until
 * bytes are released or none is left. Returns the bytes released. */
uint64_t vmm_trim(uint64_t bytes);

/* Map h at va with read-write access. Returns 0 or a CUresult (then h is
 * not mapped at va, or, where undoing the map failed too, marked stuck). */
CUresult vmm_map(CUdeviceptr va, struct vmm_handle *h);
/* Unmap h, mapped at va (one call for each of its extents). Returns 0 or a
 * CUresult (said once: then some of it stays mapped, and the caller never
 * reuses the range or the handle). */
CUresult vmm_unmap(CUdeviceptr va, const struct vmm_handle *h);
/* vmm_unmap in two parts, for a caller that unmaps without ebb_state_lock:
 * the driver's calls (touching nothing of the VMM layer's but h, which
 * does not change while mapped; *ns their time), then, with the lock held
 * again, their counting and their failure said. */
CUresult vmm_unmap_call(CUdeviceptr va, const struct vmm_handle *h, uint64_t *ns);
void vmm_unmap_done(CUdeviceptr va, const struct vmm_handle *h, CUresult r, uint64_t ns);

/* Bytes of physical memory ebb holds: its chunks, whether their parts are
 * in handles or free. */
uint64_t vmm_held(void);
/* Bytes of the chunks in no handle: memory a handle takes without adding
 * to vmm_held. */
uint64_t vmm_spare(void);
/* Handles made of more than one extent so far (a summary count). */
uint64_t vmm_split_handles(void);

/* The driver calls of ebb's virtual memory so far, and the host's time in
 * them (the Z records vmm-*: ebb-trace(5)). */
enum vmm_call { VMM_CREATE, VMM_RELEASE, VMM_RESERVE, VMM_MAP, VMM_UNMAP, VMM_NCALLS };
struct vmm_stats {
	uint64_t calls[VMM_NCALLS];
	uint64_t ns[VMM_NCALLS];
};
void vmm_stats(struct vmm_stats *out);

#endif
