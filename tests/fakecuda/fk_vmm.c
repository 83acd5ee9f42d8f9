/*
 * fk_vmm.c: virtual memory management. A reservation is a PROT_NONE mapping; a physical
 * handle is a memfd; cuMemMap maps the memfd over the reservation (still PROT_NONE),
 * cuMemSetAccess opens it, cuMemUnmap puts PROT_NONE anonymous memory back, so a later access
 * faults. Granularity 2 MiB. Physical handles count against the device budget while they
 * live (until released and unmapped). Error codes are those measured on the driver
 * (580.159.04, API 13000) where they were measured.
 */
#include "fk.h"

#include <execinfo.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define GRANULARITY ((size_t)2 << 20)

/* A physical allocation (cuMemCreate). */
struct phys {
    struct phys *next;
    int fd;
    size_t size;
    int released; /* cuMemRelease was called */
    int maps;     /* mappings using it */
};

/* A reserved virtual range (cuMemAddressReserve). */
struct reservation {
    uintptr_t base;
    size_t size;
};

/* A mapping of (part of) a physical allocation (cuMemMap). */
struct mapping {
    uintptr_t va;
    size_t size;
    struct phys *phys;
    CUmemAccess_flags access;
};

/* FAKECUDA_VMM_DELAY_US: the calling thread sleeps in cuMemUnmap and cuMemSetAccess, holding
 * no lock of the fake's (the driver's calls take tens of microseconds, and other threads' calls
 * go on meanwhile). */
static void vmm_delay(void)
{
    if (fk_cfg.vmm_delay_us > 0)
        usleep(fk_cfg.vmm_delay_us);
}

/* All under fk_lock. */
static struct phys *phys_list;
static struct reservation *reservations;
static size_t n_reservations, cap_reservations;
static struct mapping *mappings;
static size_t n_mappings, cap_mappings;

/*
 * The last UNMAP_HISTORY cuMemUnmap calls, with their callers' stacks: a fault at an
 * unmapped address prints those of its range (fk_vmm_unmap_history), which names the code
 * that unmapped memory still in use.
 */
#define UNMAP_HISTORY 4096
#define UNMAP_FRAMES 12
static struct unmap_event {
    uintptr_t va;
    size_t size;
    int nframes;
    void *frames[UNMAP_FRAMES];
} unmap_log[UNMAP_HISTORY];
static unsigned long unmap_count;

/* Grows a table of `size`-byte elements to hold one more; aborts when out of memory. */
static void *table_grow(void *table, size_t n, size_t *cap, size_t size)
{
    void *t;

    if (n < *cap)
        return table;
    *cap = *cap ? 2 * *cap : 16;
    t = realloc(table, *cap * size);
    if (!t)
        fk_die("out of host memory");
    return t;
}

/* Checks an allocation property: pinned memory on device 0. */
static int prop_ok(const CUmemAllocationProp *prop)
{
    return prop && prop->type == CU_MEM_ALLOCATION_TYPE_PINNED &&
           prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE && prop->location.id == 0;
}

/* Finds the live physical allocation behind a handle under fk_lock; NULL if none. */
static struct phys *phys_find_locked(CUmemGenericAllocationHandle handle)
{
    for (struct phys *p = phys_list; p; p = p->next)
        if ((CUmemGenericAllocationHandle)(uintptr_t)p == handle)
            return p;
    return NULL;
}

/* Frees a physical allocation that is released and unmapped, under fk_lock. */
static void phys_maybe_free_locked(struct phys *p)
{
    if (!p->released || p->maps)
        return;
    for (struct phys **pp = &phys_list; *pp; pp = &(*pp)->next)
        if (*pp == p) {
            *pp = p->next;
            break;
        }
    close(p->fd);
    fk_budget_give_locked(p->size);
    fk_stats.live_phys_handles--;
    free(p);
}

/* 1 if [va, va + size) lies inside one reservation, under fk_lock. */
static int reserved_locked(uintptr_t va, size_t size)
{
    for (size_t i = 0; i < n_reservations; i++)
        if (va >= reservations[i].base && va - reservations[i].base < reservations[i].size &&
            size <= reservations[i].size - (va - reservations[i].base))
            return 1;
    return 0;
}

/* Index of the mapping holding address a, or -1, under fk_lock. */
static long mapping_holding_locked(uintptr_t a)
{
    for (size_t i = 0; i < n_mappings; i++)
        if (a >= mappings[i].va && a - mappings[i].va < mappings[i].size)
            return (long)i;
    return -1;
}

/* Puts the PROT_NONE reservation back over mapping i and removes it, under fk_lock. */
static void mapping_remove_locked(size_t i)
{
    struct mapping m = mappings[i];

    if (mmap((void *)m.va, m.size, PROT_NONE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0) == MAP_FAILED)
        fk_die("cannot restore the reservation at %#lx", (unsigned long)m.va);
    mappings[i] = mappings[--n_mappings];
    m.phys->maps--;
    phys_maybe_free_locked(m.phys);
}

/* Looks up the VMM mapping holding p (fk.h). */
int fk_vmm_lookup_locked(uintptr_t p, uintptr_t *base, size_t *size)
{
    long i = mapping_holding_locked(p);

    if (i < 0)
        return -1;
    *base = mappings[i].va;
    *size = mappings[i].size;
    return 0;
}

/* Reports the 2 MiB granularity (minimum and recommended) for a valid property. */
CUresult cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                       CUmemAllocationGranularity_flags option)
{
    FK_ENTER(FK_NEED_INIT);
    if (fk_cfg.no_vmm)
        return CUDA_ERROR_NOT_SUPPORTED;
    if (!granularity || !prop_ok(prop) ||
        (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM && option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))
        return CUDA_ERROR_INVALID_VALUE;
    *granularity = GRANULARITY;
    return CUDA_SUCCESS;
}

/* Maps size bytes PROT_NONE at an address aligned to `align` (at addr if free and aligned). */
static void *reserve_range(size_t size, size_t align, uintptr_t addr)
{
    uint8_t *raw, *p;
    size_t head;

    if (addr && addr % align == 0) {
        p = mmap((void *)addr, size, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
        if (p == (uint8_t *)addr)
            return p;
        if (p != MAP_FAILED)
            munmap(p, size);
    }
    raw = mmap(NULL, size + align, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (raw == MAP_FAILED)
        return NULL;
    p = (uint8_t *)FK_ROUND_UP((uintptr_t)raw, align);
    head = (size_t)(p - raw);
    if (head)
        munmap(raw, head);
    if (align - head)
        munmap(p + size, align - head);
    return p;
}

/*
 * Reserves a virtual range: size a multiple of the granularity, alignment 0 (the
 * granularity) or a power of two; addr is a hint.
 */
CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                             unsigned long long flags)
{
    void *p;

    FK_ENTER(FK_NEED_INIT);
    if (fk_cfg.no_vmm)
        return CUDA_ERROR_NOT_SUPPORTED;
    if (!ptr || size == 0 || size % GRANULARITY || flags != 0 ||
        (alignment & (alignment - 1)))
        return CUDA_ERROR_INVALID_VALUE;
    if (alignment < GRANULARITY)
        alignment = GRANULARITY;
    if (size + alignment < size)
        return CUDA_ERROR_OUT_OF_MEMORY;
    p = reserve_range(size, alignment, (uintptr_t)addr);
    if (!p)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&fk_lock);
    reservations = table_grow(reservations, n_reservations, &cap_reservations, sizeof *reservations);
    reservations[n_reservations++] = (struct reservation){ (uintptr_t)p, size };
    pthread_mutex_unlock(&fk_lock);
    *ptr = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}

/*
 * Returns a reservation given exactly as reserved; CUDA_ERROR_INVALID_VALUE for anything else
 * and while something is still mapped in it.
 */
CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    CUresult rc = CUDA_ERROR_INVALID_VALUE;

    FK_ENTER(FK_NEED_INIT);
    if (fk_cfg.no_vmm)
        return CUDA_ERROR_NOT_SUPPORTED;
    pthread_mutex_lock(&fk_lock);
    for (size_t i = 0; i < n_reservations; i++) {
        int mapped = 0;

        if (reservations[i].base != (uintptr_t)ptr || reservations[i].size != size)
            continue;
        for (size_t j = 0; j < n_mappings; j++)
            if (mappings[j].va >= (uintptr_t)ptr && mappings[j].va - (uintptr_t)ptr < size)
                mapped = 1;
        if (!mapped) {
            reservations[i] = reservations[--n_reservations];
            munmap((void *)(uintptr_t)ptr, size);
            rc = CUDA_SUCCESS;
        }
        break;
    }
    pthread_mutex_unlock(&fk_lock);
    return rc;
}

/* Creates a physical allocation: a memfd of size bytes (a multiple of the granularity). */
CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                     const CUmemAllocationProp *prop, unsigned long long flags)
{
    struct phys *p;
    int fd, over;

    FK_ENTER(FK_NEED_INIT);
    if (fk_cfg.no_vmm)
        return CUDA_ERROR_NOT_SUPPORTED;
    pthread_mutex_lock(&fk_lock);
    fk_stats.mem_create_calls++;
    pthread_mutex_unlock(&fk_lock);
    if (!handle || !prop_ok(prop) || flags != 0 || size == 0 || size % GRANULARITY)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&fk_lock);
    over = fk_budget_take_locked(size);
    pthread_mutex_unlock(&fk_lock);
    if (over)
        return CUDA_ERROR_OUT_OF_MEMORY;
    fd = memfd_create("fakecuda-vmm", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, (off_t)size) != 0) {
        if (fd >= 0)
            close(fd);
        pthread_mutex_lock(&fk_lock);
        fk_budget_give_locked(size);
        pthread_mutex_unlock(&fk_lock);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    p = fk_xcalloc(1, sizeof *p);
    p->fd = fd;
    p->size = size;
    pthread_mutex_lock(&fk_lock);
    p->next = phys_list;
    phys_list = p;
    fk_stats.live_phys_handles++;
    pthread_mutex_unlock(&fk_lock);
    *handle = (CUmemGenericAllocationHandle)(uintptr_t)p;
    return CUDA_SUCCESS;
}

/* Releases a handle; its memory lives on while mapped. A second release is invalid. */
CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    struct phys *p;
    CUresult rc = CUDA_SUCCESS;

    FK_ENTER(FK_NEED_INIT);
    if (fk_cfg.no_vmm)
        return CUDA_ERROR_NOT_SUPPORTED;
    pthread_mutex_lock(&fk_lock);
    p = phys_find_locked(handle);
    if (!p || p->released) {
        rc = CUDA_ERROR_INVALID_VALUE;
    } else {
        p->released = 1;
        phys_maybe_free_locked(p);
    }
    pthread_mutex_unlock(&fk_lock);
    return rc;
}

/*
 * Maps a whole handle at ptr, still inaccessible. ptr and size must be granularity multiples,
 * the range must lie in one reservation, and the handle must not be released:
 * CUDA_ERROR_INVALID_VALUE otherwise. A range that overlaps a mapping gives
 * CUDA_ERROR_NOT_SUPPORTED, and so do an offset into the handle other than 0 and a size other
 * than the handle's (measured: 801 for 176 MiB at 1 GiB into an 8 GiB handle, and for 128 MiB
 * of a 256 MiB one at 0).
 */
CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                  CUmemGenericAllocationHandle handle, unsigned long long flags)
{
    uintptr_t va = (uintptr_t)ptr;
    struct phys *p;
    CUresult rc = CUDA_SUCCESS;

    FK_ENTER(FK_NEED_INIT);
    if (fk_cfg.no_vmm)
        return CUDA_ERROR_NOT_SUPPORTED;
    pthread_mutex_lock(&fk_lock);
    fk_stats.mem_map_calls++;
    p = phys_find_locked(handle);
    if (!p || p->released || flags != 0 || size == 0 || va % GRANULARITY ||
        size % GRANULARITY || offset % GRANULARITY || offset > p->size || size > p->size - offset)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS && !reserved_locked(va, size))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS && (offset != 0 || size != p->size))
        rc = CUDA_ERROR_NOT_SUPPORTED;
    for (size_t i = 0; rc == CUDA_SUCCESS && i < n_mappings; i++)
        if (va < mappings[i].va + mappings[i].size && mappings[i].va < va + size)
            rc = CUDA_ERROR_NOT_SUPPORTED;
    if (rc == CUDA_SUCCESS && mmap((void *)va, size, PROT_NONE, MAP_SHARED | MAP_FIXED, p->fd,
                                   (off_t)offset) == MAP_FAILED)
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    if (rc == CUDA_SUCCESS) {
        mappings = table_grow(mappings, n_mappings, &cap_mappings, sizeof *mappings);
        mappings[n_mappings++] = (struct mapping){ va, size, p, CU_MEM_ACCESS_FLAGS_PROT_NONE };
        p->maps++;
    }
    pthread_mutex_unlock(&fk_lock);
    return rc;
}

/*
 * Unmaps the mappings in [ptr, ptr + size), putting the PROT_NONE reservation back; the range
 * must lie in one reservation (holes are fine), and a mapping may not stick out of it:
 * CUDA_ERROR_INVALID_VALUE otherwise. Does not wait for queued work (neither does the driver).
 */
CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    uintptr_t va = (uintptr_t)ptr, end = (uintptr_t)ptr + size;
    CUresult rc = CUDA_SUCCESS;

    FK_ENTER(FK_NEED_INIT);
    if (fk_cfg.no_vmm)
        return CUDA_ERROR_NOT_SUPPORTED;
    vmm_delay();
    pthread_mutex_lock(&fk_lock);
    fk_stats.mem_unmap_calls++;
    if (size == 0 || end < va || va % GRANULARITY || size % GRANULARITY ||
        !reserved_locked(va, size))
        rc = CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; rc == CUDA_SUCCESS && i < n_mappings; i++)
        if (mappings[i].va < end && va < mappings[i].va + mappings[i].size &&
            (mappings[i].va < va || mappings[i].va + mappings[i].size > end))
            rc = CUDA_ERROR_INVALID_VALUE;
    for (size_t i = n_mappings; rc == CUDA_SUCCESS && i-- > 0;)
        if (mappings[i].va >= va && mappings[i].va < end)
            mapping_remove_locked(i);
    if (rc == CUDA_SUCCESS) {
        struct unmap_event *e = &unmap_log[unmap_count++ % UNMAP_HISTORY];
        e->va = va;
        e->size = size;
        e->nframes = backtrace(e->frames, UNMAP_FRAMES);
    }
    pthread_mutex_unlock(&fk_lock);
    return rc;
}

/*
 * Writes to fd the remembered cuMemUnmap calls whose range holds addr, newest first, each
 * with its caller's stack. For the fault handler, which then aborts: it takes no lock (the
 * faulting worker may hold fk_lock), and backtrace_symbols_fd is good enough there.
 */
void fk_vmm_unmap_history(uintptr_t addr, int fd)
{
    unsigned long n = unmap_count, shown = 0;

    for (unsigned long k = 0; k < n && k < UNMAP_HISTORY && shown < 3; k++) {
        const struct unmap_event *e = &unmap_log[(n - 1 - k) % UNMAP_HISTORY];
        if (addr < e->va || addr >= e->va + e->size)
            continue;
        static const char head[] = "fakecuda: that address was unmapped (the latest first) by:\n";
        if (shown++ == 0 && write(fd, head, sizeof head - 1) < 0)
            return;
        backtrace_symbols_fd((void *const *)e->frames, e->nframes, fd);
        if (write(fd, "--\n", 3) < 0)
            return;
    }
}

/*
 * Sets the access of [ptr, ptr + size), which must be mapped throughout, from the last
 * descriptor (device 0; PROT_NONE, PROT_READ or PROT_READWRITE).
 */
CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
    uintptr_t cur = (uintptr_t)ptr, end = (uintptr_t)ptr + size;
    CUmemAccess_flags access = CU_MEM_ACCESS_FLAGS_PROT_NONE;
    CUresult rc = CUDA_SUCCESS;
    int prot = PROT_NONE;

    FK_ENTER(FK_NEED_INIT);
    if (fk_cfg.no_vmm)
        return CUDA_ERROR_NOT_SUPPORTED;
    vmm_delay();
    if (!desc || count == 0 || size == 0 || end < cur || cur % GRANULARITY || size % GRANULARITY)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < count; i++) {
        if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE)
            return CUDA_ERROR_INVALID_VALUE;
        if (desc[i].location.id != 0)
            return CUDA_ERROR_INVALID_DEVICE;
        access = desc[i].flags;
        if (access == CU_MEM_ACCESS_FLAGS_PROT_NONE)
            prot = PROT_NONE;
        else if (access == CU_MEM_ACCESS_FLAGS_PROT_READ)
            prot = PROT_READ;
        else if (access == CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
            prot = PROT_READ | PROT_WRITE;
        else
            return CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_lock(&fk_lock);
    while (rc == CUDA_SUCCESS && cur < end) {
        long i = mapping_holding_locked(cur);

        if (i < 0)
            rc = CUDA_ERROR_INVALID_VALUE;
        else
            cur = mappings[i].va + mappings[i].size;
    }
    if (rc == CUDA_SUCCESS && mprotect((void *)(uintptr_t)ptr, size, prot) != 0)
        rc = CUDA_ERROR_INVALID_VALUE;
    for (cur = (uintptr_t)ptr; rc == CUDA_SUCCESS && cur < end;) {
        long i = mapping_holding_locked(cur);

        mappings[i].access = access;
        cur = mappings[i].va + mappings[i].size;
    }
    pthread_mutex_unlock(&fk_lock);
    return rc;
}

/* Gives the access flags of the mapping holding ptr, for device 0. */
CUresult cuMemGetAccess(unsigned long long *flags, const CUmemLocation *location, CUdeviceptr ptr)
{
    CUresult rc = CUDA_SUCCESS;
    long i;

    FK_ENTER(FK_NEED_INIT);
    if (fk_cfg.no_vmm)
        return CUDA_ERROR_NOT_SUPPORTED;
    if (!flags || !location || location->type != CU_MEM_LOCATION_TYPE_DEVICE)
        return CUDA_ERROR_INVALID_VALUE;
    if (location->id != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&fk_lock);
    i = mapping_holding_locked((uintptr_t)ptr);
    if (i < 0)
        rc = CUDA_ERROR_INVALID_VALUE;
    else
        *flags = mappings[i].access;
    pthread_mutex_unlock(&fk_lock);
    return rc;
}
