/*
 * vmm.h: device memory through the driver's virtual memory management.
 *
 * A buffer ebb may move gets its own reserved virtual range; the physical
 * memory behind it is one handle of the range's size. Offloading unmaps the
 * handle (the range stays reserved, so the job's pointer stays valid) and
 * restoring maps one back at the same address. Handles are pooled by size,
 * so steady-state training creates none; ranges are pooled by size too.
 *
 * Not thread-safe: the engine holds its mutex.
 */
#ifndef EBB_VMM_H
#define EBB_VMM_H

#include <stddef.h>
#include <stdint.h>

#include "cuda_compat.h"

struct vmm_handle {
	CUmemGenericAllocationHandle h;
	size_t size;
	int stuck;			/* a failed map left it mapped: never pooled */
	struct vmm_handle *next;	/* in the pool */
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

/* A handle of rsize bytes from the pool, or NULL. */
struct vmm_handle *vmm_pool_take(size_t rsize);
/* The pooled handle pooled longest ago (to be released to make room), or
 * NULL. The sizes the job is going through now are the ones it pooled last,
 * so the oldest is the one least likely to be needed again soon. */
struct vmm_handle *vmm_pool_any(void);
/* Put a handle in the pool (one left mapped by a failed vmm_map stays out). */
void vmm_pool_put(struct vmm_handle *h);

/* Create a handle with the driver. Returns 0 or a CUresult. */
CUresult vmm_create(size_t rsize, struct vmm_handle **out);
/* Release a handle (it must be unmapped everywhere). */
void vmm_release(struct vmm_handle *h);

/* Map h at va with read-write access. Returns 0 or a CUresult (then h is
 * not mapped at va, or, where undoing the map failed too, marked stuck). */
CUresult vmm_map(CUdeviceptr va, struct vmm_handle *h);
/* Unmap what is mapped at [va, va + rsize). Returns 0 or a CUresult (said
 * once: then it stays mapped, and the caller never reuses the range or the
 * handle). */
CUresult vmm_unmap(CUdeviceptr va, size_t rsize);
/* vmm_unmap in two parts, for a caller that unmaps without ebb_state_lock:
 * the driver's call (touching nothing of the VMM layer's; *ns its time),
 * then, with the lock held again, its counting and its failure said. */
CUresult vmm_unmap_call(CUdeviceptr va, size_t rsize, uint64_t *ns);
void vmm_unmap_done(CUdeviceptr va, size_t rsize, CUresult r, uint64_t ns);

/* Bytes of physical memory ebb holds in handles (mapped or pooled). */
uint64_t vmm_held(void);

/* The driver calls of ebb's virtual memory so far, and the host's time in
 * them (the Z records vmm-*: ebb-trace(5)). */
enum vmm_call { VMM_CREATE, VMM_RELEASE, VMM_RESERVE, VMM_MAP, VMM_UNMAP, VMM_NCALLS };
struct vmm_stats {
	uint64_t calls[VMM_NCALLS];
	uint64_t ns[VMM_NCALLS];
};
void vmm_stats(struct vmm_stats *out);

#endif
