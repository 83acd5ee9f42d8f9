/*
 * fk_mem.c: device memory (one private anonymous mapping per allocation, drawn from the
 * FAKECUDA_MEM_BYTES budget, left PROT_NONE for a while after the free), stream-ordered
 * allocation, the default memory pool, pinned and registered host memory, and pointer
 * attributes.
 */
#include "fk.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* What a region of the memory table is. */
enum region_kind {
    REGION_DEVICE,  /* cuMemAlloc* */
    REGION_HOST,    /* cuMemHostAlloc / cuMemAllocHost */
    REGION_HOSTREG  /* cuMemHostRegister */
};

/* One allocation or registration: [base, base + size); span bytes are mapped (0: none). */
struct region {
    uintptr_t base;
    size_t size;
    size_t span;
    enum region_kind kind;
};

static struct region *regions; /* under fk_lock */
static size_t n_regions, cap_regions;

/* The default memory pool of device 0 (attributes are accepted and not modelled). */
static struct CUmemPoolHandle_st {
    uint32_t tag;
} default_pool = { FK_TAG_POOL };

/*
 * Freed device ranges stay reserved PROT_NONE (their pages are returned) until
 * QUARANTINE later frees, so a use after free faults instead of hitting a new mapping.
 */
enum { QUARANTINE = 4096 };
static struct {
    void *base;
    size_t span;
} quarantine[QUARANTINE]; /* under fk_lock */
static size_t quarantine_next;

/* Payload of a stream-ordered free. */
struct async_free {
    void *base;
    size_t span;
    size_t size;
};

/* Takes budget (fk.h). */
int fk_budget_take_locked(uint64_t n)
{
    if (n > fk_cfg.mem_bytes - fk_stats.device_bytes_in_use)
        return -1;
    fk_stats.device_bytes_in_use += n;
    if (fk_stats.device_bytes_in_use > fk_stats.device_bytes_peak)
        fk_stats.device_bytes_peak = fk_stats.device_bytes_in_use;
    return 0;
}

/* Gives budget back (fk.h). */
void fk_budget_give_locked(uint64_t n)
{
    fk_stats.device_bytes_in_use -= n;
}

/* The page size. */
static size_t page_size(void)
{
    static size_t page;

    if (!page)
        page = (size_t)sysconf(_SC_PAGESIZE);
    return page;
}

/* Adds a region under fk_lock. */
static void region_add_locked(uintptr_t base, size_t size, size_t span, enum region_kind kind)
{
    if (n_regions == cap_regions) {
        size_t cap = cap_regions ? 2 * cap_regions : 64;
        struct region *r = realloc(regions, cap * sizeof *r);

        if (!r)
            fk_die("out of host memory");
        regions = r;
        cap_regions = cap;
    }
    regions[n_regions++] = (struct region){ base, size, span, kind };
}

/* Index of the region of `kind` that starts at base, or -1, under fk_lock. */
static long region_at_locked(uintptr_t base, enum region_kind kind)
{
    for (size_t i = 0; i < n_regions; i++)
        if (regions[i].base == base && regions[i].kind == kind)
            return (long)i;
    return -1;
}

/* Index of the region holding p, or -1, under fk_lock. */
static long region_holding_locked(uintptr_t p)
{
    for (size_t i = 0; i < n_regions; i++)
        if (p >= regions[i].base && p - regions[i].base < regions[i].size)
            return (long)i;
    return -1;
}

/* Removes region i under fk_lock (order is not kept). */
static void region_remove_locked(size_t i)
{
    regions[i] = regions[--n_regions];
}

/* Maps size bytes read/write; NULL when the host refuses. */
static void *map_anon(size_t span)
{
    void *p = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);

    return p == MAP_FAILED ? NULL : p;
}

/* Retires a freed device range: PROT_NONE now, unmapped QUARANTINE frees later. */
static void retire_range(void *base, size_t span)
{
    void *old_base;
    size_t old_span;

    if (mmap(base, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1,
             0) == MAP_FAILED) {
        munmap(base, span);
        return;
    }
    pthread_mutex_lock(&fk_lock);
    old_base = quarantine[quarantine_next].base;
    old_span = quarantine[quarantine_next].span;
    quarantine[quarantine_next].base = base;
    quarantine[quarantine_next].span = span;
    quarantine_next = (quarantine_next + 1) % QUARANTINE;
    pthread_mutex_unlock(&fk_lock);
    if (old_base)
        munmap(old_base, old_span);
}

/* Allocates size bytes of device memory: budget first, then a mapping of its own. */
static CUresult device_alloc(CUdeviceptr *dptr, size_t size)
{
    size_t span;
    void *p;
    int over;

    if (!dptr || size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    span = FK_ROUND_UP(size, page_size());
    if (span < size)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&fk_lock);
    over = fk_budget_take_locked(size);
    pthread_mutex_unlock(&fk_lock);
    if (over)
        return CUDA_ERROR_OUT_OF_MEMORY;
    p = map_anon(span);
    pthread_mutex_lock(&fk_lock);
    if (p)
        region_add_locked((uintptr_t)p, size, span, REGION_DEVICE);
    else
        fk_budget_give_locked(size);
    pthread_mutex_unlock(&fk_lock);
    if (!p)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *dptr = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}

/* Reports free and total device memory from the budget. */
CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total)
{
    FK_ENTER(FK_NEED_CTX);
    if (!free_bytes || !total)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&fk_lock);
    *total = fk_cfg.mem_bytes;
    *free_bytes = fk_cfg.mem_bytes - fk_stats.device_bytes_in_use;
    pthread_mutex_unlock(&fk_lock);
    return CUDA_SUCCESS;
}

/* Allocates device memory (see device_alloc); a potentially unsafe call during capture. */
CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    CUresult rc;

    FK_ENTER(FK_NEED_CTX);
    rc = fk_capture_unsafe();
    return rc == CUDA_SUCCESS ? device_alloc(dptr, bytesize) : rc;
}

/*
 * Allocates Height rows of WidthInBytes rounded up to a 512-byte pitch; a potentially unsafe
 * call during capture.
 */
CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes,
                            size_t Height, unsigned int ElementSizeBytes)
{
    size_t pitch;
    CUresult rc;

    FK_ENTER(FK_NEED_CTX);
    rc = fk_capture_unsafe();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!pPitch || WidthInBytes == 0 || Height == 0 ||
        (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16))
        return CUDA_ERROR_INVALID_VALUE;
    pitch = FK_ROUND_UP(WidthInBytes, 512);
    if (pitch < WidthInBytes || Height > SIZE_MAX / pitch)
        return CUDA_ERROR_OUT_OF_MEMORY;
    rc = device_alloc(dptr, pitch * Height);
    if (rc == CUDA_SUCCESS)
        *pPitch = pitch;
    return rc;
}

/*
 * Frees device memory after every stream of the device drained (the real driver waits for
 * the whole device). 0 is accepted; anything that is not an allocation's base is
 * CUDA_ERROR_INVALID_VALUE. A potentially unsafe call during capture.
 */
CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    struct region r;
    CUresult rc;
    long i;

    FK_ENTER(FK_NEED_CTX);
    pthread_mutex_lock(&fk_lock);
    fk_stats.mem_free_calls++;
    rc = fk_capture_unsafe_locked();
    pthread_mutex_unlock(&fk_lock);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!dptr)
        return CUDA_SUCCESS;
    fk_drain_device();
    pthread_mutex_lock(&fk_lock);
    i = region_at_locked((uintptr_t)dptr, REGION_DEVICE);
    if (i >= 0) {
        r = regions[i];
        region_remove_locked((size_t)i);
        fk_budget_give_locked(r.size);
    }
    pthread_mutex_unlock(&fk_lock);
    if (i < 0)
        return CUDA_ERROR_INVALID_VALUE;
    retire_range((void *)r.base, r.span);
    return CUDA_SUCCESS;
}

/* FAKECUDA_QUERY_DELAY_US: a question about an address sleeps before it looks the address up,
 * holding none of the fake's locks (other threads' calls, an unmap among them, go on). */
static void query_delay(void)
{
    if (fk_cfg.query_delay_us > 0)
        usleep(fk_cfg.query_delay_us);
}

/* Gives the base and size of the allocation or VMM mapping holding dptr. */
CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
    uintptr_t base = 0;
    size_t size = 0;
    long i;
    CUresult rc = CUDA_SUCCESS;

    FK_ENTER(FK_NEED_CTX);
    query_delay();
    pthread_mutex_lock(&fk_lock);
    i = region_holding_locked((uintptr_t)dptr);
    if (i >= 0 && regions[i].kind == REGION_DEVICE) {
        base = regions[i].base;
        size = regions[i].size;
    } else if (fk_vmm_lookup_locked((uintptr_t)dptr, &base, &size) != 0) {
        rc = CUDA_ERROR_NOT_FOUND;
    }
    pthread_mutex_unlock(&fk_lock);
    if (rc == CUDA_SUCCESS) {
        if (pbase)
            *pbase = (CUdeviceptr)base;
        if (psize)
            *psize = size;
    }
    return rc;
}

/*
 * Checks the stream of a stream-ordered allocation or free under fk_lock: it must exist;
 * on a stream that captures, the capture must be valid (the call is a graph memory node,
 * *captured set), and elsewhere the call is potentially unsafe while other captures run.
 */
static CUresult check_async_stream_locked(CUstream hStream, int ptds, struct fk_stream **s,
                                          int *captured)
{
    CUresult rc = fk_stream_find_locked(hStream, ptds, s);

    *captured = 0;
    if (rc != CUDA_SUCCESS)
        return rc;
    if ((*s)->capture) {
        *captured = 1;
        return (*s)->capture_invalid ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED : CUDA_SUCCESS;
    }
    return fk_capture_unsafe_locked();
}

/*
 * Stream-ordered allocation: the memory exists at once, so it is ready on every stream. On a
 * capturing stream it is the graph's memory node's: it exists from the capture on, for
 * every launch of the graph, as the driver's graph memory pool keeps it.
 */
static CUresult alloc_async(CUdeviceptr *dptr, size_t bytesize, CUstream hStream, int ptds)
{
    struct fk_stream *s;
    int captured;
    CUresult rc;

    pthread_mutex_lock(&fk_lock);
    rc = check_async_stream_locked(hStream, ptds, &s, &captured);
    pthread_mutex_unlock(&fk_lock);
    return rc == CUDA_SUCCESS ? device_alloc(dptr, bytesize) : rc;
}

/* See alloc_async (legacy semantics for 0). */
CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    FK_ENTER(FK_NEED_INIT);
    return alloc_async(dptr, bytesize, hStream, 0);
}

/* See alloc_async (0 is the per-thread default stream). */
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    FK_ENTER(FK_NEED_INIT);
    return alloc_async(dptr, bytesize, hStream, 1);
}

/* See alloc_async; the pool must be the default pool. */
CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                 CUstream hStream)
{
    FK_ENTER(FK_NEED_INIT);
    if (pool != &default_pool)
        return CUDA_ERROR_INVALID_VALUE;
    return alloc_async(dptr, bytesize, hStream, 0);
}

/* See cuMemAllocFromPoolAsync (0 is the per-thread default stream). */
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                      CUstream hStream)
{
    FK_ENTER(FK_NEED_INIT);
    if (pool != &default_pool)
        return CUDA_ERROR_INVALID_VALUE;
    return alloc_async(dptr, bytesize, hStream, 1);
}

/* The body of a stream-ordered free: retire the range, then give the budget back. */
static void async_free_run(struct fk_op *op)
{
    struct async_free *f = (struct async_free *)op->payload;

    retire_range(f->base, f->span);
    pthread_mutex_lock(&fk_lock);
    fk_budget_give_locked(f->size);
    pthread_mutex_unlock(&fk_lock);
}

/*
 * Stream-ordered free: the address stops being an allocation now (a second free fails),
 * and the stream retires it when it reaches the free. On a capturing stream it is the graph's
 * free node: the memory stays, for the graph's launches (not modelled: its reuse by later
 * allocations in the graph, and its release when the graph is destroyed).
 */
static CUresult free_async(CUdeviceptr dptr, CUstream hStream, int ptds)
{
    struct fk_stream *s;
    int captured;
    CUresult rc;
    long i;

    pthread_mutex_lock(&fk_lock);
    rc = check_async_stream_locked(hStream, ptds, &s, &captured);
    i = rc == CUDA_SUCCESS ? region_at_locked((uintptr_t)dptr, REGION_DEVICE) : -1;
    if (rc == CUDA_SUCCESS && i < 0)
        rc = CUDA_ERROR_INVALID_VALUE;
    /* a graph's free node: the memory stays for the graph's launches */
    if (rc == CUDA_SUCCESS && !captured) {
        struct fk_op *op = fk_op_new(FK_OP_WORK, "cuMemFreeAsync", async_free_run,
                                     sizeof(struct async_free));
        struct async_free *f = (struct async_free *)op->payload;
        struct region r = regions[i];

        f->base = (void *)r.base;
        f->span = r.span;
        f->size = r.size;
        region_remove_locked((size_t)i);
        rc = fk_submit_locked(s, op);
        if (rc != CUDA_SUCCESS)
            region_add_locked(r.base, r.size, r.span, REGION_DEVICE);
    }
    pthread_mutex_unlock(&fk_lock);
    return rc;
}

/* See free_async (legacy semantics for 0). */
CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    FK_ENTER(FK_NEED_INIT);
    return free_async(dptr, hStream, 0);
}

/* See free_async (0 is the per-thread default stream). */
CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
    FK_ENTER(FK_NEED_INIT);
    return free_async(dptr, hStream, 1);
}

/* Gives the default memory pool of device 0. */
CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev)
{
    FK_ENTER(FK_NEED_INIT);
    if (!pool_out)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    *pool_out = &default_pool;
    return CUDA_SUCCESS;
}

/* Accepts a pool attribute and ignores it. */
CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    FK_ENTER(FK_NEED_INIT);
    (void)attr;
    if (pool != &default_pool)
        return CUDA_ERROR_INVALID_VALUE;
    return value ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* Reads every pool attribute as 0 (int or cuuint64_t, as the attribute's type is). */
CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    FK_ENTER(FK_NEED_INIT);
    if (pool != &default_pool || !value)
        return CUDA_ERROR_INVALID_VALUE;
    switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
        *(int *)value = 0;
        break;
    default:
        *(cuuint64_t *)value = 0;
        break;
    }
    return CUDA_SUCCESS;
}

/* ---- host memory ---- */

/*
 * Maps bytesize bytes of "pinned" host memory (outside the device budget); a potentially
 * unsafe call during capture.
 */
static CUresult host_alloc(void **pp, size_t bytesize)
{
    size_t span;
    CUresult rc;
    void *p;

    pthread_mutex_lock(&fk_lock);
    fk_stats.host_alloc_calls++;
    rc = fk_capture_unsafe_locked();
    pthread_mutex_unlock(&fk_lock);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!pp || bytesize == 0)
        return CUDA_ERROR_INVALID_VALUE;
    span = FK_ROUND_UP(bytesize, page_size());
    if (span < bytesize)
        return CUDA_ERROR_OUT_OF_MEMORY;
    p = map_anon(span);
    if (!p)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&fk_lock);
    region_add_locked((uintptr_t)p, bytesize, span, REGION_HOST);
    pthread_mutex_unlock(&fk_lock);
    *pp = p;
    return CUDA_SUCCESS;
}

/* See host_alloc; the flags (portable, mapped, write-combined) change nothing. */
CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
    FK_ENTER(FK_NEED_CTX);
    if (Flags & ~(unsigned)(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP |
                            CU_MEMHOSTALLOC_WRITECOMBINED))
        return CUDA_ERROR_INVALID_VALUE;
    return host_alloc(pp, bytesize);
}

/* cuMemAllocHost (CUDA 2.0 ABI, 32-bit size): see host_alloc. */
CUresult cuMemAllocHost(void **pp, unsigned int bytesize)
{
    FK_ENTER(FK_NEED_CTX);
    return host_alloc(pp, bytesize);
}

/* cuMemAllocHost_v2 (CUDA 3.2 ABI): see host_alloc. */
CUresult cuMemAllocHost_v2(void **pp, size_t bytesize)
{
    FK_ENTER(FK_NEED_CTX);
    return host_alloc(pp, bytesize);
}

/* Frees memory from cuMemHostAlloc / cuMemAllocHost (else CUDA_ERROR_INVALID_VALUE). */
CUresult cuMemFreeHost(void *p)
{
    struct region r;
    long i;

    FK_ENTER(FK_NEED_INIT);
    pthread_mutex_lock(&fk_lock);
    i = region_at_locked((uintptr_t)p, REGION_HOST);
    if (i >= 0) {
        r = regions[i];
        region_remove_locked((size_t)i);
    }
    pthread_mutex_unlock(&fk_lock);
    if (i < 0)
        return CUDA_ERROR_INVALID_VALUE;
    munmap((void *)r.base, r.span);
    return CUDA_SUCCESS;
}

/*
 * Registers host memory (bookkeeping only). Overlapping pinned or registered memory gives
 * CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED. A potentially unsafe call during capture.
 */
static CUresult host_register(void *p, size_t bytesize)
{
    uintptr_t a = (uintptr_t)p;
    CUresult rc;

    if (!p || bytesize == 0 || a + bytesize < a)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&fk_lock);
    rc = fk_capture_unsafe_locked();
    for (size_t i = 0; rc == CUDA_SUCCESS && i < n_regions; i++)
        if (regions[i].kind != REGION_DEVICE && a < regions[i].base + regions[i].size &&
            regions[i].base < a + bytesize)
            rc = CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
    if (rc == CUDA_SUCCESS)
        region_add_locked(a, bytesize, 0, REGION_HOSTREG);
    pthread_mutex_unlock(&fk_lock);
    return rc;
}

/* cuMemHostRegister (CUDA 4.0 ABI): see host_register. */
CUresult cuMemHostRegister(void *p, size_t bytesize, unsigned int Flags)
{
    FK_ENTER(FK_NEED_CTX);
    (void)Flags;
    return host_register(p, bytesize);
}

/* cuMemHostRegister_v2 (CUDA 6.5 ABI): see host_register. */
CUresult cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags)
{
    FK_ENTER(FK_NEED_CTX);
    (void)Flags;
    return host_register(p, bytesize);
}

/*
 * Unregisters memory registered at exactly p. A pointer inside a registration gives
 * CUDA_ERROR_INVALID_VALUE, one outside any CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED (as measured
 * on the driver).
 */
CUresult cuMemHostUnregister(void *p)
{
    CUresult rc = CUDA_SUCCESS;
    long i;

    FK_ENTER(FK_NEED_CTX);
    pthread_mutex_lock(&fk_lock);
    i = region_at_locked((uintptr_t)p, REGION_HOSTREG);
    if (i >= 0) {
        region_remove_locked((size_t)i);
    } else {
        i = region_holding_locked((uintptr_t)p);
        rc = i >= 0 && regions[i].kind == REGION_HOSTREG ? CUDA_ERROR_INVALID_VALUE
                                                         : CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
    }
    pthread_mutex_unlock(&fk_lock);
    return rc;
}

/* Gives the device address of pinned or registered host memory: the same address. */
CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int Flags)
{
    long i;

    FK_ENTER(FK_NEED_CTX);
    if (!pdptr || Flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&fk_lock);
    i = region_holding_locked((uintptr_t)p);
    if (i >= 0 && regions[i].kind == REGION_DEVICE)
        i = -1;
    pthread_mutex_unlock(&fk_lock);
    if (i < 0)
        return CUDA_ERROR_INVALID_VALUE;
    *pdptr = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}

/* ---- pointer attributes ---- */

/*
 * Answers CONTEXT, MEMORY_TYPE, DEVICE_POINTER, HOST_POINTER, RANGE_START_ADDR, RANGE_SIZE,
 * IS_MANAGED, DEVICE_ORDINAL and MAPPED for device allocations, VMM mappings and pinned or
 * registered host memory. Other pointers and attributes: CUDA_ERROR_INVALID_VALUE.
 */
CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
    uintptr_t base = 0;
    size_t size = 0;
    int host = 0, found = 1;
    long i;

    FK_ENTER(FK_NEED_INIT);
    if (!data)
        return CUDA_ERROR_INVALID_VALUE;
    query_delay();
    pthread_mutex_lock(&fk_lock);
    i = region_holding_locked((uintptr_t)ptr);
    if (i >= 0) {
        base = regions[i].base;
        size = regions[i].size;
        host = regions[i].kind != REGION_DEVICE;
    } else if (fk_vmm_lookup_locked((uintptr_t)ptr, &base, &size) != 0) {
        found = 0;
    }
    pthread_mutex_unlock(&fk_lock);
    if (!found)
        return CUDA_ERROR_INVALID_VALUE;
    switch (attribute) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
        *(CUcontext *)data = fk_ctx_primary();
        break;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *(unsigned int *)data = host ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
        break;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
        *(CUdeviceptr *)data = ptr;
        break;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
        if (!host)
            return CUDA_ERROR_INVALID_VALUE;
        *(void **)data = (void *)(uintptr_t)ptr;
        break;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
        *(CUdeviceptr *)data = (CUdeviceptr)base;
        break;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
        *(size_t *)data = size;
        break;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
        *(unsigned int *)data = 0;
        break;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        *(int *)data = 0;
        break;
    case CU_POINTER_ATTRIBUTE_MAPPED:
        *(unsigned int *)data = 1;
        break;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}
