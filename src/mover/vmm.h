/*
 * vmm.h: device memory through the driver's virtual memory management.
 *
 * A buffer ebb may move gets its own reserved virtual range; the physical
 * memory behind it is one handle of the range's size. Offloading unmaps the
 * handle (the range stays reserved, so the job's pointer stays valid) and
 * restoring maps one back at the same address. Ranges are pooled by size.
 *
 * A handle is made of pieces: driver allocations (cuMemCreate), mapped one
 * after the other in its range, one where the free pieces hold one of its
 * size, more where it takes free pieces of other sizes (at most
 * VMM_EXTENTS). The driver maps a handle only whole, at offset 0 (it refuses
 * another offset with CUDA_ERROR_NOT_SUPPORTED), and releasing one and
 * making another costs more than mapping it; pieces let memory freed in one
 * size serve another without either. A piece is released only to make
 * room. Free pieces are held and counted as held, as pooled handles were.
 *
 * Not thread-safe: the engine holds its mutex.
 */
#ifndef EBB_VMM_H
#define EBB_VMM_H

#include <stddef.h>
#include <stdint.h>

#include "cuda_compat.h"

/* A driver allocation (cuMemCreate): a part of handles. */
struct vmm_piece;

/* The most pieces a handle has. */
#define VMM_EXTENTS 4

struct vmm_handle {
	size_t size;			/* the sum of its pieces */
	int stuck;			/* a failed map left it mapped: never pooled */
	int broken;			/* a failed unmap left it partly mapped (said) */
	int n;				/* pieces, mapped in order from the range's start */
	struct vmm_piece *e[VMM_EXTENTS];
};

/*
 * Set up for device dev. Returns 0, or -1 when the device has no VMM
 * support (said once; ebb then moves nothing).
 */
int vmm_init(CUdevice dev);

/* The allocation granularity (2 MiB on current GPUs). */
size_t vmm_granularity(void);

/* size rounded up to the granularity. */
size_t vmm_round(size_t size);

/* A reserved range of rsize bytes. Returns 0 or a CUresult. */
CUresult vmm_reserve(size_t rsize, CUdeviceptr *va);
/* Give a range back (it must be unmapped). */
void vmm_unreserve(CUdeviceptr va, size_t rsize);

/* A handle of rsize bytes made of free pieces, or NULL. */
struct vmm_handle *vmm_pool_take(size_t rsize);
/* The free piece freed longest ago, as a handle (to be released to make
 * room), or NULL. The sizes the job is going through now are the ones it
 * freed last, so the oldest is the one least likely to be needed again
 * soon. */
struct vmm_handle *vmm_pool_any(void);
/* Give a handle's pieces back to the free lists (one left mapped by a failed
 * vmm_map stays out). */
void vmm_pool_put(struct vmm_handle *h);

/*
 * A handle of rsize bytes: free pieces (the one of its size, else the
 * largest that fit in what is left), and for what they leave a new piece
 * while grow (the bytes the caller lets ebb add) allows. Returns 0, or
 * CUDA_ERROR_OUT_OF_MEMORY with *device_full set where the driver itself
 * had no memory for a piece (after releasing the free pieces and trying
 * again) and clear where the free pieces and grow do not make it, or
 * another CUresult of cuMemCreate's.
 */
CUresult vmm_create(size_t rsize, size_t grow, struct vmm_handle **out, int *device_full);
/* Release a handle's pieces to the driver (it must be unmapped everywhere). */
void vmm_release(struct vmm_handle *h);
/* Release free pieces, the oldest first, until bytes are released or none
 * is left. Returns the bytes released. */
uint64_t vmm_trim(uint64_t bytes);

/* Map h at va with read-write access. Returns 0 or a CUresult (then h is
 * not mapped at va, or, where undoing the map failed too, marked stuck). */
CUresult vmm_map(CUdeviceptr va, struct vmm_handle *h);
/* Map h in a range of its own, reserved for it, at *va. Returns 0 or a
 * CUresult (then no range is kept). */
CUresult vmm_place(struct vmm_handle *h, CUdeviceptr *va);
/* Unmap h, mapped at va (one call for each of its pieces). Returns 0 or a
 * CUresult (said once): then h stays mapped whole (the pieces unmapped
 * before the one that failed are mapped again, or, where that fails too, h
 * is marked broken and said), and the caller never reuses the range or
 * the handle. */
CUresult vmm_unmap(CUdeviceptr va, struct vmm_handle *h);
/* vmm_unmap in two parts, for a caller that unmaps without ebb_state_lock:
 * the driver's calls (touching nothing of the VMM layer's but h, which
 * nothing else touches while it is mapped; *ns their time), then, with the
 * lock held again, their counting and their failure said. */
CUresult vmm_unmap_call(CUdeviceptr va, struct vmm_handle *h, uint64_t *ns);
void vmm_unmap_done(CUdeviceptr va, const struct vmm_handle *h, CUresult r, uint64_t ns);

/* Bytes of physical memory ebb holds: its pieces, in handles or free. */
uint64_t vmm_held(void);
/* Bytes of the free pieces. */
uint64_t vmm_spare(void);
/* Handles made of more than one piece so far (a summary count). */
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
