/*
 * fk_procaddr.c: cuGetProcAddress (CUDA 11.3 ABI, 4 arguments) and cuGetProcAddress_v2
 * (CUDA 12.0 ABI, 5 arguments), resolving by base name, requested version and flags from the
 * table in fk_entries.def, with the driver's answers (measured on 580.159.04, API 13000).
 */
#include "fk.h"

#include <string.h>

/* Each entry's function must have the type of its cudaTypedefs.h typedef. */
#define FK_SYM(base, version, sfx, sym)                                       \
    _Static_assert(_Generic(&sym, PFN_##base##_v##version##sfx: 1, default: 0), \
                   #sym " does not match PFN_" #base "_v" #version #sfx);
#include "fk_entries.def"
#undef FK_SYM

/* One way to resolve a base name. */
struct entry {
    const char *base;
    int version;
    int per_thread; /* a _ptsz / _ptds variant */
    void *fn;
};

static const struct entry table[] = {
#define FK_SYM(base, version, sfx, sym) { #base, version, sizeof #sfx > 1, (void *)sym },
#include "fk_entries.def"
#undef FK_SYM
};

enum { N_ENTRIES = sizeof table / sizeof table[0] };

/* 1 if base names an entry point of the table (fk.h). */
int fk_proc_known(const char *base)
{
    for (size_t i = 0; i < N_ENTRIES; i++)
        if (strcmp(table[i].base, base) == 0)
            return 1;
    return 0;
}

/*
 * Finds the function for (symbol, cudaVersion, flags) as the driver does (measured on
 * 580.159.04): the newest variant at or below the version; with
 * CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, among the _ptsz/_ptds variants when the name
 * has any (none old enough: CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT, no fallback to the
 * legacy one), else among the others. Gives the query result and *fn when found.
 */
static CUdriverProcAddressQueryResult find(const char *symbol, int cudaVersion,
                                           cuuint64_t flags, void **fn)
{
    const struct entry *legacy = NULL, *pt = NULL, *best;
    int seen = 0, has_pt = 0;

    for (size_t i = 0; i < N_ENTRIES; i++) {
        const struct entry *e = &table[i];
        const struct entry **slot = e->per_thread ? &pt : &legacy;

        if (strcmp(e->base, symbol) != 0)
            continue;
        seen = 1;
        has_pt |= e->per_thread;
        if (e->version <= cudaVersion && (!*slot || (*slot)->version < e->version))
            *slot = e;
    }
    best = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) && has_pt ? pt : legacy;
    if (best) {
        *fn = best->fn;
        return CU_GET_PROC_ADDRESS_SUCCESS;
    }
    return seen ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
}

/* 1 for arguments the driver refuses with CUDA_ERROR_INVALID_VALUE, outputs untouched. */
static int bad_args(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
    return !symbol || !pfn || cudaVersion > 13000 ||
           (flags & ~(cuuint64_t)(CU_GET_PROC_ADDRESS_LEGACY_STREAM |
                                  CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM));
}

/*
 * cuGetProcAddress (CUDA 11.3 ABI): see find. A symbol not found, or not for this version,
 * gives CUDA_ERROR_NOT_FOUND and leaves *pfn alone; a version above the driver's (13000) or
 * unknown flags give CUDA_ERROR_INVALID_VALUE.
 */
CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
    void *fn;

    FK_ENTER(FK_NEED_NONE);
    if (bad_args(symbol, pfn, cudaVersion, flags))
        return CUDA_ERROR_INVALID_VALUE;
    if (find(symbol, cudaVersion, flags, &fn) != CU_GET_PROC_ADDRESS_SUCCESS)
        return CUDA_ERROR_NOT_FOUND;
    *pfn = fn;
    return CUDA_SUCCESS;
}

/*
 * cuGetProcAddress_v2 (CUDA 12.0 ABI): see find. CUDA_SUCCESS whether found or not, with
 * *pfn NULL and *symbolStatus saying why when not; a version above the driver's (13000) or
 * unknown flags give CUDA_ERROR_INVALID_VALUE with the outputs untouched.
 */
CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                             CUdriverProcAddressQueryResult *symbolStatus)
{
    CUdriverProcAddressQueryResult st;
    void *fn = NULL;

    FK_ENTER(FK_NEED_NONE);
    if (bad_args(symbol, pfn, cudaVersion, flags))
        return CUDA_ERROR_INVALID_VALUE;
    st = find(symbol, cudaVersion, flags, &fn);
    *pfn = fn;
    if (symbolStatus)
        *symbolStatus = st;
    return CUDA_SUCCESS;
}
