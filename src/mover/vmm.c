/*
 * vmm.c: reserved ranges, and physical handles made of pieces (vmm.h).
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

/* A physical allocation of the driver's (cuMemCreate): a handle's part. */
struct vmm_piece {
	CUmemGenericAllocationHandle h;
	size_t size;
	uint64_t freed;		/* when it went free (vmm.clock): the oldest goes first */
	struct vmm_piece *next;	/* in the free list, while free */
};

/* The VMM layer's state (ebb_state_lock). */
static struct vmm {
	CUdevice device;		/* the device handles are made on (vmm_init) */
	size_t gran;			/* its allocation granularity */
	uint64_t held;			/* bytes of the pieces made and not released */
	uint64_t spare;			/* bytes of the free pieces */
	uint64_t clock;			/* counts pieces going free (their age) */
	uint64_t split;			/* handles made of more than one piece */
	int access_each;		/* the driver set no access over several mappings at
					 * once: vmm_map sets each piece's */
	struct vmm_piece *free;		/* the free pieces, the largest first */
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

/* ---- pieces ---- */

/* Put piece p in the free list, by size (the newest first among equals). */
static void
piece_free(struct vmm_piece *p)
{
	struct vmm_piece **q = &vmm.free;

	while (*q != NULL && (*q)->size > p->size)
		q = &(*q)->next;
	p->freed = vmm.clock++;
	p->next = *q;
	*q = p;
	vmm.spare += p->size;
}

/* Take *q off the free list and return it. */
static struct vmm_piece *
piece_unlink(struct vmm_piece **q)
{
	struct vmm_piece *p = *q;

	*q = p->next;
	p->next = NULL;
	vmm.spare -= p->size;
	return p;
}

/* The free piece of size bytes, else the largest of fewer, off the list;
 * NULL when there is none. */
static struct vmm_piece *
piece_fit(size_t size)
{
	struct vmm_piece **q = &vmm.free;

	while (*q != NULL && (*q)->size > size)
		q = &(*q)->next;
	return *q != NULL ? piece_unlink(q) : NULL;
}

/* The free piece freed longest ago, off the list, or NULL. */
static struct vmm_piece *
piece_oldest(void)
{
	struct vmm_piece **best = NULL;

	for (struct vmm_piece **q = &vmm.free; *q != NULL; q = &(*q)->next)
		if (best == NULL || (*q)->freed < (*best)->freed)
			best = q;
	return best != NULL ? piece_unlink(best) : NULL;
}

/* A new piece of size bytes. Returns 0 or cuMemCreate's error. */
static CUresult
piece_make(size_t size, struct vmm_piece **out)
{
	struct vmm_piece *p = calloc(1, sizeof *p);
	if (p == NULL)
		return CUDA_ERROR_OUT_OF_MEMORY;
	CUmemAllocationProp prop = prop_of();
	uint64_t t0 = ebb_now_ns();
	CUresult r = ebb_real.cuMemCreate(&p->h, size, &prop, 0);
	count(VMM_CREATE, t0);
	if (r != CUDA_SUCCESS) {
		free(p);
		return r;
	}
	p->size = size;
	vmm.held += size;
	*out = p;
	return CUDA_SUCCESS;
}

/* Release piece p to the driver. */
static void
piece_release(struct vmm_piece *p)
{
	uint64_t t0 = ebb_now_ns();
	ebb_real.cuMemRelease(p->h);
	count(VMM_RELEASE, t0);
	vmm.held -= p->size;
	free(p);
}

/* Add piece p to h (mapped after the pieces it has). */
static void
add_piece(struct vmm_handle *h, struct vmm_piece *p)
{
	h->e[h->n++] = p;
	h->size += p->size;
}

/* Give h's pieces back to the free list. */
static void
free_pieces(struct vmm_handle *h)
{
	while (h->n > 0)
		piece_free(h->e[--h->n]);
	h->size = 0;
}

/*
 * A handle of rsize bytes: free pieces, the one of what is left to make if
 * there is one, else the largest that fits in it, for at most VMM_EXTENTS
 * pieces; what they leave, with create, a new piece while grow allows.
 * Returns 0, or -1 with *r set: CUDA_ERROR_OUT_OF_MEMORY (*device_full set
 * where the driver had no memory) or cuMemCreate's error.
 */
static int
compose(size_t rsize, int create, size_t grow, struct vmm_handle **out, int *device_full,
    CUresult *r)
{
	struct vmm_handle *h = calloc(1, sizeof *h);
	struct vmm_piece *p;

	*r = CUDA_ERROR_OUT_OF_MEMORY;
	if (h == NULL || rsize == 0) {
		free(h);
		return -1;
	}
	while (h->size < rsize && h->n < VMM_EXTENTS - (create && grow > 0) &&
	    (p = piece_fit(rsize - h->size)) != NULL)
		add_piece(h, p);
	if (h->size < rsize) {
		size_t left = rsize - h->size;
		if (!create || left > grow)
			goto fail;
		*r = piece_make(left, &p);
		if (*r != CUDA_SUCCESS) {
			*device_full = *r == CUDA_ERROR_OUT_OF_MEMORY;
			goto fail;
		}
		add_piece(h, p);
	}
	if (h->n > 1)
		vmm.split++;
	*out = h;
	return 0;
fail:
	free_pieces(h);
	free(h);
	return -1;
}

struct vmm_handle *
vmm_pool_take(size_t rsize)
{
	struct vmm_handle *h = NULL;
	int full = 0;
	CUresult r;

	return compose(rsize, 0, 0, &h, &full, &r) == 0 ? h : NULL;
}

struct vmm_handle *
vmm_pool_any(void)
{
	struct vmm_piece *p = piece_oldest();
	struct vmm_handle *h;

	if (p == NULL)
		return NULL;
	if ((h = calloc(1, sizeof *h)) == NULL) {
		piece_release(p);	/* what the caller wanted of it */
		return NULL;
	}
	add_piece(h, p);
	return h;
}

void
vmm_pool_put(struct vmm_handle *h)
{
	if (h->stuck)
		return;	/* mapped where it could not be unmapped: never used again */
	free_pieces(h);
	free(h);
}

CUresult
vmm_create(size_t rsize, size_t grow, struct vmm_handle **out, int *device_full)
{
	CUresult r = CUDA_SUCCESS;

	*device_full = 0;
	if (compose(rsize, 1, grow, out, device_full, &r) == 0)
		return CUDA_SUCCESS;
	/* the driver is out of memory: free pieces go, and it is tried again */
	if (*device_full && vmm_trim(UINT64_MAX) > 0 &&
	    compose(rsize, 1, grow, out, device_full, &r) == 0)
		return CUDA_SUCCESS;
	return r;
}

void
vmm_release(struct vmm_handle *h)
{
	for (int i = 0; i < h->n; i++)
		piece_release(h->e[i]);
	free(h);
}

uint64_t
vmm_trim(uint64_t bytes)
{
	uint64_t done = 0;
	struct vmm_piece *p;

	while (done < bytes && (p = piece_oldest()) != NULL) {
		done += p->size;
		piece_release(p);
	}
	return done;
}

CUresult
vmm_map(CUdeviceptr va, struct vmm_handle *h)
{
	uint64_t t0 = ebb_now_ns();
	CUresult r = CUDA_SUCCESS;
	size_t done = 0;
	int i;

	for (i = 0; i < h->n && r == CUDA_SUCCESS; i++) {
		r = ebb_real.cuMemMap(va + done, h->e[i]->size, 0, h->e[i]->h, 0);
		if (r == CUDA_SUCCESS)
			done += h->e[i]->size;
	}
	if (r == CUDA_SUCCESS) {
		CUmemAccessDesc a;
		memset(&a, 0, sizeof a);
		a.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
		a.location.id = vmm.device;
		a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
		r = vmm.access_each ? CUDA_ERROR_NOT_SUPPORTED :
		    ebb_real.cuMemSetAccess(va, h->size, &a, 1);
		/* a driver that sets the access of one mapping at a time */
		if (r != CUDA_SUCCESS && h->n > 1) {
			vmm.access_each = 1;
			r = CUDA_SUCCESS;
			for (size_t off = 0, k = 0; r == CUDA_SUCCESS && k < (size_t)h->n;
			    off += h->e[k++]->size)
				r = ebb_real.cuMemSetAccess(va + off, h->e[k]->size, &a, 1);
		}
	}
	/* undo the extents mapped */
	for (size_t off = 0, k = 0; r != CUDA_SUCCESS && off < done; off += h->e[k++]->size)
		if (ebb_real.cuMemUnmap(va + off, h->e[k]->size) != CUDA_SUCCESS)
			h->stuck = 1;
	count(VMM_MAP, t0);
	return r;
}

CUresult
vmm_place(struct vmm_handle *h, CUdeviceptr *va)
{
	CUresult r = vmm_reserve(h->size, va);

	if (r == CUDA_SUCCESS && (r = vmm_map(*va, h)) != CUDA_SUCCESS)
		vmm_unreserve(*va, h->size);
	return r;
}

CUresult
vmm_unmap(CUdeviceptr va, struct vmm_handle *h)
{
	uint64_t ns;
	CUresult r = vmm_unmap_call(va, h, &ns);

	vmm_unmap_done(va, h, r, ns);
	return r;
}

/* Map again h's pieces in [va, va + upto), unmapped before a piece after
 * them failed to unmap, so that h is whole where its caller keeps it.
 * Returns 0 or the driver's error. */
static CUresult
remap(CUdeviceptr va, const struct vmm_handle *h, size_t upto)
{
	CUmemAccessDesc a;
	CUresult r = CUDA_SUCCESS;

	memset(&a, 0, sizeof a);
	a.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	a.location.id = vmm.device;
	a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	for (size_t off = 0, k = 0; r == CUDA_SUCCESS && off < upto; off += h->e[k++]->size) {
		r = ebb_real.cuMemMap(va + off, h->e[k]->size, 0, h->e[k]->h, 0);
		if (r == CUDA_SUCCESS)
			r = ebb_real.cuMemSetAccess(va + off, h->e[k]->size, &a, 1);
	}
	return r;
}

CUresult
vmm_unmap_call(CUdeviceptr va, struct vmm_handle *h, uint64_t *ns)
{
	uint64_t t0 = ebb_now_ns();
	CUresult r = CUDA_SUCCESS;
	size_t off = 0;

	for (int i = 0; i < h->n && r == CUDA_SUCCESS; i++)
		if ((r = ebb_real.cuMemUnmap(va + off, h->e[i]->size)) == CUDA_SUCCESS)
			off += h->e[i]->size;
	/* a piece stays mapped: those before it are mapped again, or, where
	 * that fails too, h is whole nowhere (a use of it faults) */
	if (r != CUDA_SUCCESS && off > 0 && remap(va, h, off) != CUDA_SUCCESS)
		h->broken = 1;
	*ns = ebb_now_ns() - t0;
	return r;
}

void
vmm_unmap_done(CUdeviceptr va, const struct vmm_handle *h, CUresult r, uint64_t ns)
{
	static int said;

	vmm.vst.calls[VMM_UNMAP]++;
	vmm.vst.ns[VMM_UNMAP] += ns;
	if (r != CUDA_SUCCESS)
		ebb_log_once(&said, EBB_LOG_WARN, "cuMemUnmap of %zu bytes at 0x%llx failed (error %d): "
		    "that memory stays mapped and is not used again (further failures are counted in "
		    "the summary, not reported)", h->size, (unsigned long long)va, (int)r);
	if (h->broken)
		ebb_log(EBB_LOG_ERROR, "the %zu bytes at 0x%llx could not be unmapped nor mapped again "
		    "whole: a use of them fails", h->size, (unsigned long long)va);
}

uint64_t
vmm_spare(void)
{
	return vmm.spare;
}

uint64_t
vmm_split_handles(void)
{
	return vmm.split;
}

uint64_t
vmm_held(void)
{
	return vmm.held;
}
