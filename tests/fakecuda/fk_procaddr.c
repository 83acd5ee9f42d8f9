/*
 * fk_procaddr.c: cuGetProcAddress (CUDA 11.3 ABI, 4 arguments) and cuGetProcAddress_v2
 * (CUDA 12.0 ABI, 5 arguments), resolving by base name, requested version and flags from the
 * table in fk_entries.def.
 */
#include "fk.h"

#include <string.h>

/* Each entry's function must have the type of its cudaTypedefs.h typedef. */
#define FK_SYM(base, version, sfx, sym)                                       \
    _Static_assert(_Generic(&sym, PFN_##base##_v##version##sfx: 1, default: 0), \
                   #sym " does not match PFN_" #base "_v" #version #sfx);
#define FK_SYM_AS(base, version, sym, pfn) \
    _Static_assert(_Generic(&sym, pfn: 1, default: 0), #sym " does not match " #pfn);
#include "fk_entries.def"
#undef FK_SYM
#undef FK_SYM_AS

/* One way to resolve a base name. */
struct entry {
    const char *base;
    int version;
    int per_thread; /* the _ptsz / _ptds variant */
    void *fn;
};

static const struct entry table[] = {
#define FK_SYM(base, version, sfx, sym) { #base, version, sizeof #sfx > 1, (void *)sym },
#define FK_SYM_AS(base, version, sym, pfn) { #base, version, 0, (void *)sym },
#include "fk_entries.def"
#undef FK_SYM
#undef FK_SYM_AS
};

/* 1 if base names an entry point of the table (fk.h). */
int fk_proc_known(const char *base)
{
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcmp(table[i].base, base) == 0)
            return 1;
    return 0;
}

/*
 * Resolves symbol for cudaVersion: the newest variant at or below that version, the
 * per-thread one when flags ask for it and it is at least as new as the legacy one. Not
 * found: CUDA_ERROR_NOT_FOUND with *status CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND, or
 * CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT when only newer variants exist. A version above
 * the driver's (13000) or unknown flags: CUDA_ERROR_INVALID_VALUE.
 */
static CUresult lookup(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                       CUdriverProcAddressQueryResult *status)
{
    const struct entry *legacy = NULL, *pt = NULL, *best;
    int seen = 0;

    if (status)
        *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    if (pfn)
        *pfn = NULL;
    if (!symbol || !pfn || cudaVersion > 13000 ||
        (flags & ~(cuuint64_t)(CU_GET_PROC_ADDRESS_LEGACY_STREAM |
                               CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)))
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        const struct entry *e = &table[i];
        const struct entry **slot = e->per_thread ? &pt : &legacy;

        if (strcmp(e->base, symbol) != 0)
            continue;
        seen = 1;
        if (e->version <= cudaVersion && (!*slot || (*slot)->version < e->version))
            *slot = e;
    }
    best = legacy;
    if ((flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) && pt &&
        (!legacy || pt->version >= legacy->version))
        best = pt;
    if (!best) {
        if (status && seen)
            *status = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
        return CUDA_ERROR_NOT_FOUND;
    }
    *pfn = best->fn;
    if (status)
        *status = CU_GET_PROC_ADDRESS_SUCCESS;
    return CUDA_SUCCESS;
}

/* cuGetProcAddress (CUDA 11.3 ABI): see lookup. */
CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
    FK_ENTER(FK_NEED_NONE);
    return lookup(symbol, pfn, cudaVersion, flags, NULL);
}

/* cuGetProcAddress_v2 (CUDA 12.0 ABI): see lookup. */
CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                             CUdriverProcAddressQueryResult *symbolStatus)
{
    FK_ENTER(FK_NEED_NONE);
    return lookup(symbol, pfn, cudaVersion, flags, symbolStatus);
}
