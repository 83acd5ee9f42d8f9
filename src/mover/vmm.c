/*
 * vmm.c: reserved ranges and pooled physical handles.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "real.h"
#include "log.h"
#include "trace.h"
#include "vmm.h"

/* Reserved ranges not in use, by size (a short list per size is enough). */
struct range {
	CUdeviceptr va;
	size_t size;
	struct range *next;
};

/* The VMM layer's state (ebb_state_lock). */
static struct vmm {
	CUdevice device;		/* the device handles are made on (vmm_init) */
	size_t gran;			/* its allocation granularity */
	uint64_t held;			/* bytes of the handles made and not released */
	struct vmm_handle *pool;	/* handles kept unmapped for reuse, the oldest pooled first */
	struct vmm_handle *pool_tail;	/* the newest pooled (NULL when the pool is empty) */
	struct range *free_ranges;	/* reserved ranges not in use */
	struct vmm_stats vst;		/* the calls counted and timed (vmm_stats) */
} vmm;

static void
count(enum vmm_call c, uint64_t t0)
{
	vmm.vst.calls[c]++;
	vmm.vst.ns[c] += ebb_now_ns() - t0;
}

void
vmm_stats(struct vmm_stats *out)
{
	*out = vmm.vst;
}

static CUmemAllocationProp
prop_of(void)
{
	CUmemAllocationProp p;

	memset(&p, 0, sizeof p);
	p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	p.location.id = vmm.device;
	return p;
}

int
vmm_init(CUdevice dev)
{
	int supported = 0;

	vmm.device = dev;
	if (ebb_real.cuDeviceGetAttribute == NULL || ebb_real.cuMemCreate == NULL ||
	    ebb_real.cuDeviceGetAttribute(&supported,
	    CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev) != CUDA_SUCCESS ||
	    !supported) {
		ebb_log(EBB_LOG_WARN, "device %d has no virtual memory management; ebb moves nothing",
		    (int)dev);
		return -1;
	}
	CUmemAllocationProp p = prop_of();
	if (ebb_real.cuMemGetAllocationGranularity(&vmm.gran, &p,
	    CU_MEM_ALLOC_GRANULARITY_RECOMMENDED) != CUDA_SUCCESS || vmm.gran == 0) {
		ebb_log(EBB_LOG_WARN, "cuMemGetAllocationGranularity failed; ebb moves nothing");
		return -1;
	}
	return 0;
}

size_t
vmm_granularity(void)
{
	return vmm.gran;
}

size_t
vmm_round(size_t size)
{
	return (size + vmm.gran - 1) / vmm.gran * vmm.gran;
}

CUresult
vmm_reserve(size_t rsize, CUdeviceptr *va)
{
	for (struct range **r = &vmm.free_ranges; *r != NULL; r = &(*r)->next)
		if ((*r)->size == rsize) {
			struct range *x = *r;
			*r = x->next;
			*va = x->va;
			free(x);
			return CUDA_SUCCESS;
		}
	uint64_t t0 = ebb_now_ns();
	CUresult r = ebb_real.cuMemAddressReserve(va, rsize, vmm.gran, 0, 0);
	count(VMM_RESERVE, t0);
	return r;
}

void
vmm_unreserve(CUdeviceptr va, size_t rsize)
{
	struct range *x = malloc(sizeof *x);

	if (x == NULL) {
		ebb_real.cuMemAddressFree(va, rsize);
		return;
	}
	x->va = va;
	x->size = rsize;
	x->next = vmm.free_ranges;
	vmm.free_ranges = x;
}

/* Unlink *h from the pool, prev being its predecessor (NULL for the first). */
static struct vmm_handle *
pool_unlink(struct vmm_handle **h, struct vmm_handle *prev)
{
	struct vmm_handle *x = *h;

	*h = x->next;
	if (vmm.pool_tail == x)
		vmm.pool_tail = prev;
	x->next = NULL;
	return x;
}

struct vmm_handle *
vmm_pool_take(size_t rsize)
{
	struct vmm_handle *prev = NULL;

	for (struct vmm_handle **h = &vmm.pool; *h != NULL; prev = *h, h = &(*h)->next)
		if ((*h)->size == rsize)
			return pool_unlink(h, prev);
	return NULL;
}

struct vmm_handle *
vmm_pool_any(void)
{
	return vmm.pool != NULL ? pool_unlink(&vmm.pool, NULL) : NULL;
}

void
vmm_pool_put(struct vmm_handle *h)
{
	if (h->stuck)
		return;	/* mapped where it could not be unmapped: never used again */
	h->next = NULL;
	if (vmm.pool_tail != NULL)
		vmm.pool_tail->next = h;
	else
		vmm.pool = h;
	vmm.pool_tail = h;
}

CUresult
vmm_create(size_t rsize, struct vmm_handle **out)
{
	struct vmm_handle *h = calloc(1, sizeof *h);
	if (h == NULL)
		return CUDA_ERROR_OUT_OF_MEMORY;
	CUmemAllocationProp p = prop_of();
	uint64_t t0 = ebb_now_ns();
	CUresult r = ebb_real.cuMemCreate(&h->h, rsize, &p, 0);
	count(VMM_CREATE, t0);
	if (r != CUDA_SUCCESS) {
		free(h);
		return r;
	}
	h->size = rsize;
	vmm.held += rsize;
	*out = h;
	return CUDA_SUCCESS;
}

void
vmm_release(struct vmm_handle *h)
{
	uint64_t t0 = ebb_now_ns();
	ebb_real.cuMemRelease(h->h);
	count(VMM_RELEASE, t0);
	vmm.held -= h->size;
	free(h);
}

CUresult
vmm_map(CUdeviceptr va, struct vmm_handle *h)
{
	uint64_t t0 = ebb_now_ns();
	CUresult r = ebb_real.cuMemMap(va, h->size, 0, h->h, 0);
	if (r != CUDA_SUCCESS)
		return r;
	CUmemAccessDesc a;
	memset(&a, 0, sizeof a);
	a.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	a.location.id = vmm.device;
	a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	r = ebb_real.cuMemSetAccess(va, h->size, &a, 1);
	if (r != CUDA_SUCCESS && ebb_real.cuMemUnmap(va, h->size) != CUDA_SUCCESS)
		h->stuck = 1;
	count(VMM_MAP, t0);
	return r;
}

CUresult
vmm_unmap(CUdeviceptr va, size_t rsize)
{
	uint64_t ns;
	CUresult r = vmm_unmap_call(va, rsize, &ns);

	vmm_unmap_done(va, rsize, r, ns);
	return r;
}

CUresult
vmm_unmap_call(CUdeviceptr va, size_t rsize, uint64_t *ns)
{
	uint64_t t0 = ebb_now_ns();
	CUresult r = ebb_real.cuMemUnmap(va, rsize);

	*ns = ebb_now_ns() - t0;
	return r;
}

void
vmm_unmap_done(CUdeviceptr va, size_t rsize, CUresult r, uint64_t ns)
{
	static int said;

	vmm.vst.calls[VMM_UNMAP]++;
	vmm.vst.ns[VMM_UNMAP] += ns;
	if (r != CUDA_SUCCESS)
		ebb_log_once(&said, EBB_LOG_WARN, "cuMemUnmap of %zu bytes at 0x%llx failed (error %d): "
		    "that memory stays mapped and is not used again (further failures are counted in "
		    "the summary, not reported)", rsize, (unsigned long long)va, (int)r);
}

uint64_t
vmm_held(void)
{
	return vmm.held;
}
