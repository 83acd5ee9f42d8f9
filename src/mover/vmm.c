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

/* A physical allocation of the driver's: handles are parts of it. */
struct vmm_chunk {
	CUmemGenericAllocationHandle h;
	size_t size;
	size_t used;		/* bytes of it in handles */
	uint64_t id;		/* the order chunks were made in (spans sort by it) */
	struct vmm_chunk *next;	/* the chunks, the newest first */
};

/* A free part of a chunk: in no handle. */
struct span {
	struct vmm_chunk *chunk;
	size_t off, size;
	struct span *next;	/* by chunk, then offset: neighbours merge */
};

/* The VMM layer's state (ebb_state_lock). */
static struct vmm {
	CUdevice device;		/* the device handles are made on (vmm_init) */
	size_t gran;			/* its allocation granularity */
	size_t chunk;			/* the size of a chunk made for a smaller handle */
	uint64_t held;			/* bytes of the chunks made and not released */
	uint64_t spare;			/* bytes of the chunks in no handle */
	uint64_t chunks_made;		/* chunks made so far (the next chunk's id) */
	uint64_t split;			/* handles made of more than one extent */
	struct vmm_chunk *chunks;	/* every chunk not released, the newest first */
	struct span *spans;		/* the chunks' free parts */
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

void
vmm_set_chunk(size_t bytes)
{
	if (bytes > VMM_CHUNK_MAX)
		bytes = VMM_CHUNK_MAX;
	vmm.chunk = bytes / vmm.gran * vmm.gran;
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

/* ---- chunks and their free parts ---- */

/* Give [off, off + size) of chunk c back to the free parts, merged with its
 * neighbours. Returns 0, or -1 when there is no host memory for an entry
 * (the part is then lost to handles until the chunk goes). */
static int
span_put(struct vmm_chunk *c, size_t off, size_t size)
{
	struct span **p = &vmm.spans, *prev = NULL;

	while (*p != NULL && ((*p)->chunk->id < c->id ||
	    ((*p)->chunk == c && (*p)->off < off))) {
		prev = *p;
		p = &(*p)->next;
	}
	vmm.spare += size;
	if (prev != NULL && prev->chunk == c && prev->off + prev->size == off) {
		prev->size += size;
		struct span *nx = prev->next;
		if (nx != NULL && nx->chunk == c && prev->off + prev->size == nx->off) {
			prev->size += nx->size;
			prev->next = nx->next;
			free(nx);
		}
		return 0;
	}
	if (*p != NULL && (*p)->chunk == c && off + size == (*p)->off) {
		(*p)->off = off;
		(*p)->size += size;
		return 0;
	}
	struct span *x = malloc(sizeof *x);
	if (x == NULL) {
		vmm.spare -= size;
		return -1;
	}
	*x = (struct span){ .chunk = c, .off = off, .size = size, .next = *p };
	*p = x;
	return 0;
}

/* Take size bytes from the start of the free part *p into h's next extent
 * (the part goes when emptied). */
static void
span_take(struct span **p, size_t size, struct vmm_handle *h)
{
	struct span *x = *p;

	h->e[h->n++] = (struct vmm_extent){ .chunk = x->chunk, .off = x->off, .size = size };
	h->size += size;
	x->chunk->used += size;
	vmm.spare -= size;
	x->off += size;
	x->size -= size;
	if (x->size == 0) {
		*p = x->next;
		free(x);
	}
}

/* The free part the most bytes of which fit size: the smallest that holds
 * it, or, where none does, the largest. NULL when there is none. */
static struct span **
span_fit(size_t size)
{
	struct span **best = NULL;

	for (struct span **p = &vmm.spans; *p != NULL; p = &(*p)->next) {
		if (best == NULL)
			best = p;
		else if ((*best)->size < size ? (*p)->size > (*best)->size :
		    (*p)->size >= size && (*p)->size < (*best)->size)
			best = p;
	}
	return best;
}

/* The free part that starts chunk c (the whole chunk when it is unused). */
static struct span **
span_of_chunk(const struct vmm_chunk *c)
{
	for (struct span **p = &vmm.spans; *p != NULL; p = &(*p)->next)
		if ((*p)->chunk == c && (*p)->off == 0)
			return p;
	return NULL;
}

/* Release chunk *p, wholly unused, to the driver. Returns 0, or -1 when a
 * part of it was lost to the free parts (no host memory for an entry): it
 * is kept. */
static int
chunk_release(struct vmm_chunk **p)
{
	struct vmm_chunk *c = *p;
	struct span **sp = span_of_chunk(c), *x = sp != NULL ? *sp : NULL;

	if (x == NULL || x->size != c->size)
		return -1;
	*sp = x->next;
	free(x);
	vmm.spare -= c->size;
	uint64_t t0 = ebb_now_ns();
	ebb_real.cuMemRelease(c->h);
	count(VMM_RELEASE, t0);
	vmm.held -= c->size;
	*p = c->next;
	free(c);
	return 0;
}

uint64_t
vmm_trim(uint64_t bytes)
{
	uint64_t done = 0;

	for (struct vmm_chunk **p = &vmm.chunks; *p != NULL && done < bytes;) {
		size_t size = (*p)->size;
		if ((*p)->used != 0 || chunk_release(p) < 0)
			p = &(*p)->next;
		else
			done += size;
	}
	return done;
}

/* A new chunk of size bytes, all of it free. Returns 0 or cuMemCreate's
 * error. */
static CUresult
chunk_make(size_t size)
{
	struct vmm_chunk *c = calloc(1, sizeof *c);
	if (c == NULL)
		return CUDA_ERROR_OUT_OF_MEMORY;
	CUmemAllocationProp p = prop_of();
	uint64_t t0 = ebb_now_ns();
	CUresult r = ebb_real.cuMemCreate(&c->h, size, &p, 0);
	count(VMM_CREATE, t0);
	if (r != CUDA_SUCCESS) {
		free(c);
		return r;
	}
	c->size = size;
	c->id = vmm.chunks_made++;
	c->next = vmm.chunks;
	vmm.chunks = c;
	vmm.held += size;
	if (span_put(c, 0, size) < 0) {
		ebb_real.cuMemRelease(c->h);
		vmm.held -= size;
		vmm.chunks = c->next;
		free(c);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	return CUDA_SUCCESS;
}

/*
 * A chunk for need bytes of up to grow: vmm.chunk, or an eighth of what the
 * chunks hold where that is less (so that a chunk's free rest stays small
 * beside what the job uses), where grow allows; need where it is more; else
 * grow. Where the driver has no memory for
 * it, wholly unused chunks go and need alone is tried. Returns 0, or the
 * driver's error with *device_full set for CUDA_ERROR_OUT_OF_MEMORY.
 */
static CUresult
chunk_for(size_t need, size_t grow, int *device_full)
{
	size_t size = vmm.held / 8 < vmm.chunk ? vmm.held / 8 / vmm.gran * vmm.gran : vmm.chunk;

	if (size < need)
		size = need;

	if (size > grow)
		size = grow / vmm.gran * vmm.gran;
	CUresult r = chunk_make(size);
	if (r == CUDA_ERROR_OUT_OF_MEMORY && (vmm_trim(UINT64_MAX) > 0 || size > need))
		r = chunk_make(need);
	if (r == CUDA_ERROR_OUT_OF_MEMORY)
		*device_full = 1;
	return r;
}

/* Give h's extents back to the free parts, and h's struct. */
static void
give_back(struct vmm_handle *h)
{
	for (int i = 0; i < h->n; i++) {
		h->e[i].chunk->used -= h->e[i].size;
		span_put(h->e[i].chunk, h->e[i].off, h->e[i].size);
	}
	free(h);
}

CUresult
vmm_create(size_t rsize, size_t grow, struct vmm_handle **out, int *device_full)
{
	struct vmm_handle *h = calloc(1, sizeof *h);
	CUresult r = CUDA_SUCCESS;

	*device_full = 0;
	if (h == NULL)
		return CUDA_ERROR_OUT_OF_MEMORY;
	struct span **p = span_fit(rsize);
	/* one extent: a free part that holds it, else a new chunk */
	if (p != NULL && (*p)->size >= rsize) {
		span_take(p, rsize, h);
		*out = h;
		return CUDA_SUCCESS;
	}
	if (grow >= rsize) {
		r = chunk_for(rsize, grow, device_full);
		if (r == CUDA_SUCCESS) {
			span_take(span_of_chunk(vmm.chunks), rsize, h);
			*out = h;
			return CUDA_SUCCESS;
		}
		if (r != CUDA_ERROR_OUT_OF_MEMORY) {
			free(h);
			return r;
		}
		grow = 0;	/* the device is full: the free parts alone */
	}
	/* the largest free parts, and a chunk for what they leave */
	if (vmm.spare + grow < rsize) {
		free(h);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	while (h->size < rsize && h->n < VMM_EXTENTS - 1 && (p = span_fit(rsize - h->size)) != NULL)
		span_take(p, (*p)->size < rsize - h->size ? (*p)->size : rsize - h->size, h);
	if (h->size < rsize && (p = span_fit(rsize - h->size)) != NULL &&
	    (*p)->size >= rsize - h->size)
		span_take(p, rsize - h->size, h);
	if (h->size < rsize) {
		r = grow >= rsize - h->size ? chunk_for(rsize - h->size, grow, device_full) :
		    CUDA_ERROR_OUT_OF_MEMORY;
		if (r != CUDA_SUCCESS) {
			give_back(h);
			return r;
		}
		span_take(span_of_chunk(vmm.chunks), rsize - h->size, h);
	}
	if (h->n > 1)
		vmm.split++;
	*out = h;
	return CUDA_SUCCESS;
}

void
vmm_release(struct vmm_handle *h)
{
	give_back(h);
}

CUresult
vmm_map(CUdeviceptr va, struct vmm_handle *h)
{
	uint64_t t0 = ebb_now_ns();
	CUresult r = CUDA_SUCCESS;
	size_t done = 0;
	int i;

	for (i = 0; i < h->n && r == CUDA_SUCCESS; i++) {
		r = ebb_real.cuMemMap(va + done, h->e[i].size, h->e[i].off, h->e[i].chunk->h, 0);
		if (r == CUDA_SUCCESS)
			done += h->e[i].size;
	}
	if (r == CUDA_SUCCESS) {
		CUmemAccessDesc a;
		memset(&a, 0, sizeof a);
		a.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
		a.location.id = vmm.device;
		a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
		r = ebb_real.cuMemSetAccess(va, h->size, &a, 1);
	}
	/* undo the extents mapped */
	for (size_t off = 0, k = 0; r != CUDA_SUCCESS && off < done; off += h->e[k++].size)
		if (ebb_real.cuMemUnmap(va + off, h->e[k].size) != CUDA_SUCCESS)
			h->stuck = 1;
	count(VMM_MAP, t0);
	return r;
}

CUresult
vmm_unmap(CUdeviceptr va, const struct vmm_handle *h)
{
	uint64_t ns;
	CUresult r = vmm_unmap_call(va, h, &ns);

	vmm_unmap_done(va, h, r, ns);
	return r;
}

CUresult
vmm_unmap_call(CUdeviceptr va, const struct vmm_handle *h, uint64_t *ns)
{
	uint64_t t0 = ebb_now_ns();
	CUresult r = CUDA_SUCCESS;
	size_t off = 0;

	/* every extent, even after one fails: what can go does */
	for (int i = 0; i < h->n; off += h->e[i++].size) {
		CUresult ri = ebb_real.cuMemUnmap(va + off, h->e[i].size);
		if (r == CUDA_SUCCESS)
			r = ri;
	}
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
