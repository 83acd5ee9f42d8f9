/*
 * fk_core.c: the fake driver's configuration (FAKECUDA_* environment), the prologue of
 * every entry point (verbose trace, fault injection, init and context checks), error names,
 * initialisation, the one device, contexts and the statistics.
 */
#include "fk.h"

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct fk_config fk_cfg = { .mem_bytes = 8ull << 30 };
struct fakecuda_stats fk_stats;

/* One FAKECUDA_FAIL item: calls nth .. nth+count of `name` return `code`. */
struct fail_spec {
    char name[64];
    uint64_t nth;
    uint64_t count;        /* UINT64_MAX: every later call */
    CUresult code;
    atomic_uint_fast64_t calls;
};

enum { MAX_FAIL_SPECS = 32 };
static struct fail_spec fail_specs[MAX_FAIL_SPECS];
static int n_fail_specs;

static pthread_once_t config_once = PTHREAD_ONCE_INIT;
static atomic_int initialized;

/* A context: the primary one of device 0, or one made by cuCtxCreate. */
struct CUctx_st {
    uint32_t tag;
    int primary;
    struct CUctx_st *next_dead; /* on dead_ctxs */
};

static struct CUctx_st primary_ctx = { FK_TAG_CTX, 1, NULL };
static int primary_refs;             /* under fk_lock */
static struct CUctx_st *dead_ctxs;   /* destroyed contexts, reused by cuCtxCreate; fk_lock */

/* The calling thread's context stack (cuCtxPushCurrent / cuCtxPopCurrent). */
enum { CTX_STACK_MAX = 32 };
static _Thread_local CUcontext ctx_stack[CTX_STACK_MAX];
static _Thread_local int ctx_depth;

/* Prints "fakecuda: <message>" on stderr and aborts. */
_Noreturn void fk_die(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    fputs("fakecuda: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    abort();
}

/* calloc that aborts when the host is out of memory. */
void *fk_xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);

    if (!p)
        fk_die("out of host memory");
    return p;
}

/* Sleeps us microseconds, resuming after signals. */
void fk_sleep_us(unsigned us)
{
    struct timespec ts = { us / 1000000, (long)(us % 1000000) * 1000 };

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t fk_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The error table: code, name and text. */
static const struct {
    CUresult code;
    const char *name;
    const char *text;
} errors[] = {
#define FK_ERROR(code, text) { code, #code, text },
#include "fk_errors.def"
#undef FK_ERROR
};

/* Looks up a CUresult's name; NULL when unknown. */
static const char *error_name(CUresult code)
{
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
        if (errors[i].code == code)
            return errors[i].name;
    return NULL;
}

/* Parses a CUDA_ERROR_... name or a decimal number; returns 0 or -1. */
static int error_parse(const char *text, CUresult *out)
{
    char *end;
    unsigned long v;

    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
        if (strcmp(errors[i].name, text) == 0) {
            *out = errors[i].code;
            return 0;
        }
    errno = 0;
    v = strtoul(text, &end, 10);
    if (errno || end == text || *end || v > 0x7fffffff)
        return -1;
    *out = (CUresult)v;
    return 0;
}

/* Parses an unsigned decimal with an optional K/M/G suffix (powers of 1024); -1 if bad. */
static int parse_size(const char *text, int suffixes, uint64_t *out)
{
    char *end;
    unsigned long long v;
    unsigned shift = 0;

    if (*text < '0' || *text > '9')
        return -1;
    errno = 0;
    v = strtoull(text, &end, 10);
    if (errno)
        return -1;
    if (suffixes && *end) {
        switch (*end) {
        case 'k': case 'K': shift = 10; break;
        case 'm': case 'M': shift = 20; break;
        case 'g': case 'G': shift = 30; break;
        default: return -1;
        }
        end++;
    }
    if (*end || (shift && v > (UINT64_MAX >> shift)))
        return -1;
    *out = (uint64_t)v << shift;
    return 0;
}

/* Reads an unsigned variable of at most `max`; aborts on a bad value. */
static uint64_t env_number(const char *var, int suffixes, uint64_t dflt, uint64_t max)
{
    const char *text = getenv(var);
    uint64_t v;

    if (!text || !*text)
        return dflt;
    if (parse_size(text, suffixes, &v) != 0 || v > max)
        fk_die("bad %s='%s'", var, text);
    return v;
}

/* True for the entry points whose injected failure defaults to CUDA_ERROR_OUT_OF_MEMORY. */
static int is_allocation_call(const char *base)
{
    static const char *const names[] = {
        "cuMemAlloc", "cuMemAllocPitch", "cuMemAllocAsync", "cuMemAllocFromPoolAsync",
        "cuMemAllocHost", "cuMemHostAlloc", "cuMemHostRegister", "cuMemCreate",
        "cuMemAddressReserve",
    };

    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(base, names[i]) == 0)
            return 1;
    return 0;
}

/* Parses one FAKECUDA_FAIL item "name:N[:count][=code]"; aborts when it is malformed. */
static void parse_fail_item(const char *item)
{
    struct fail_spec *f;
    char buf[160], *code, *nth, *count, *end;
    unsigned long long v;

    if (n_fail_specs == MAX_FAIL_SPECS)
        fk_die("FAKECUDA_FAIL: more than %d items", MAX_FAIL_SPECS);
    if (strlen(item) >= sizeof buf)
        fk_die("FAKECUDA_FAIL: item too long: '%s'", item);
    f = &fail_specs[n_fail_specs];
    strcpy(buf, item);
    code = strchr(buf, '=');
    if (code)
        *code++ = '\0';
    nth = strchr(buf, ':');
    if (!nth)
        fk_die("FAKECUDA_FAIL: '%s' lacks ':N'", item);
    *nth++ = '\0';
    count = strchr(nth, ':');
    if (count)
        *count++ = '\0';
    if (strlen(buf) >= sizeof f->name || !fk_proc_known(buf))
        fk_die("FAKECUDA_FAIL: '%s' names no entry point of the fake", item);
    strcpy(f->name, buf);
    errno = 0;
    v = strtoull(nth, &end, 10);
    if (errno || end == nth || *end || v == 0 || *nth == '-')
        fk_die("FAKECUDA_FAIL: bad call number in '%s'", item);
    f->nth = v;
    f->count = UINT64_MAX;
    if (count) {
        errno = 0;
        v = strtoull(count, &end, 10);
        if (errno || end == count || *end || *count == '-')
            fk_die("FAKECUDA_FAIL: bad count in '%s'", item);
        f->count = v;
    }
    f->code = is_allocation_call(f->name) ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_UNKNOWN;
    if (code && error_parse(code, &f->code) != 0)
        fk_die("FAKECUDA_FAIL: bad code in '%s'", item);
    atomic_init(&f->calls, 0);
    n_fail_specs++;
}

/* Reads the FAKECUDA_* environment once and installs the process-wide handlers. */
static void config_read(void)
{
    const char *fail = getenv("FAKECUDA_FAIL");

    fk_cfg.mem_bytes = env_number("FAKECUDA_MEM_BYTES", 1, 8ull << 30, UINT64_MAX);
    if (fk_cfg.mem_bytes == 0)
        fk_die("bad FAKECUDA_MEM_BYTES='%s'", getenv("FAKECUDA_MEM_BYTES"));
    fk_cfg.kernel_delay_us = (unsigned)env_number("FAKECUDA_KERNEL_DELAY_US", 0, 0, 60000000);
    fk_cfg.copy_delay_us = (unsigned)env_number("FAKECUDA_COPY_DELAY_US", 0, 0, 60000000);
    fk_cfg.launch_queue_delay_us =
        (unsigned)env_number("FAKECUDA_LAUNCH_QUEUE_DELAY_US", 0, 0, 60000000);
    fk_cfg.vmm_delay_us = (unsigned)env_number("FAKECUDA_VMM_DELAY_US", 0, 0, 60000000);
    fk_cfg.query_delay_us = (unsigned)env_number("FAKECUDA_QUERY_DELAY_US", 0, 0, 60000000);
    fk_cfg.no_vmm = (int)env_number("FAKECUDA_NO_VMM", 0, 0, 1);
    fk_cfg.verbose = (int)env_number("FAKECUDA_VERBOSE", 0, 0, 1);
    fk_cfg.lazy_load_bytes = env_number("FAKECUDA_LAZY_LOAD_BYTES", 1, 0, 1ull << 40);
    fk_cfg.graph_pool_bytes = env_number("FAKECUDA_GRAPH_POOL_BYTES", 1, 0, 1ull << 40);
    if (fail && *fail) {
        char *copy = fk_xcalloc(strlen(fail) + 1, 1), *save = NULL;

        strcpy(copy, fail);
        for (char *item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save))
            parse_fail_item(item);
        free(copy);
    }
    fk_streams_setup();
}

/* Copies func's base name (no _vN, _ptsz or _ptds suffix) into out. */
static void base_name(const char *func, char *out, size_t size)
{
    size_t n = strlen(func);

    if (n >= size)
        n = size - 1;
    memcpy(out, func, n);
    out[n] = '\0';
    if (n > 5 && (strcmp(out + n - 5, "_ptsz") == 0 || strcmp(out + n - 5, "_ptds") == 0))
        out[n -= 5] = '\0';
    for (size_t i = n; i > 2; i--) {
        if (out[i - 1] < '0' || out[i - 1] > '9') {
            if (i < n && out[i - 1] == 'v' && out[i - 2] == '_')
                out[i - 2] = '\0';
            break;
        }
    }
}

/* The prologue of every entry point: see fk.h. */
CUresult fk_enter(const char *func, enum fk_need need)
{
    pthread_once(&config_once, config_read);
    fk_streams_after_fork();
    if (fk_cfg.verbose)
        fprintf(stderr, "fakecuda: %s\n", func);
    if (n_fail_specs) {
        char base[64];

        base_name(func, base, sizeof base);
        for (int i = 0; i < n_fail_specs; i++) {
            struct fail_spec *f = &fail_specs[i];
            uint64_t call;

            if (strcmp(f->name, base) != 0)
                continue;
            call = atomic_fetch_add(&f->calls, 1) + 1;
            if (call >= f->nth && (f->count == UINT64_MAX || call - f->nth <= f->count)) {
                if (fk_cfg.verbose)
                    fprintf(stderr, "fakecuda: %s fails (FAKECUDA_FAIL)\n", func);
                return f->code;
            }
        }
    }
    if ((need & FK_NEED_INIT) && !atomic_load(&initialized))
        return CUDA_ERROR_NOT_INITIALIZED;
    if (need == FK_NEED_CTX && !fk_ctx_current())
        return CUDA_ERROR_INVALID_CONTEXT;
    return CUDA_SUCCESS;
}

/* ---- initialisation, version, errors ---- */

/* Initialises the driver: starts the legacy stream. Flags must be 0. */
CUresult cuInit(unsigned int Flags)
{
    static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
    CUresult rc = CUDA_SUCCESS;

    FK_ENTER(FK_NEED_NONE);
    if (Flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&init_lock);
    if (!atomic_load(&initialized)) {
        rc = fk_streams_init();
        if (rc == CUDA_SUCCESS)
            atomic_store(&initialized, 1);
    }
    pthread_mutex_unlock(&init_lock);
    return rc;
}

/* Reports driver API version 13000 (CUDA 13.0). */
CUresult cuDriverGetVersion(int *driverVersion)
{
    FK_ENTER(FK_NEED_NONE);
    if (!driverVersion)
        return CUDA_ERROR_INVALID_VALUE;
    *driverVersion = 13000;
    return CUDA_SUCCESS;
}

/* Gives the name of a CUresult (CUDA_ERROR_INVALID_VALUE and NULL for an unknown one). */
CUresult cuGetErrorName(CUresult error, const char **pStr)
{
    FK_ENTER(FK_NEED_NONE);
    if (!pStr)
        return CUDA_ERROR_INVALID_VALUE;
    *pStr = error_name(error);
    return *pStr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* Gives the description of a CUresult (CUDA_ERROR_INVALID_VALUE and NULL for unknown). */
CUresult cuGetErrorString(CUresult error, const char **pStr)
{
    FK_ENTER(FK_NEED_NONE);
    if (!pStr)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
        if (errors[i].code == error) {
            *pStr = errors[i].text;
            return CUDA_SUCCESS;
        }
    *pStr = NULL;
    return CUDA_ERROR_INVALID_VALUE;
}

/* ---- the device ---- */

/* Gives device `ordinal`: only 0 exists. */
CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
    FK_ENTER(FK_NEED_INIT);
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    if (ordinal != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    *device = 0;
    return CUDA_SUCCESS;
}

/* Reports one device. */
CUresult cuDeviceGetCount(int *count)
{
    FK_ENTER(FK_NEED_INIT);
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    *count = 1;
    return CUDA_SUCCESS;
}

/* Copies the device name, truncated to len bytes with its NUL. */
CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
    FK_ENTER(FK_NEED_INIT);
    if (!name || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    snprintf(name, (size_t)len, "%s", "fakecuda H200 (CPU)");
    return CUDA_SUCCESS;
}

/* Reports FAKECUDA_MEM_BYTES as the device memory. */
CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    FK_ENTER(FK_NEED_INIT);
    if (!bytes)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    *bytes = fk_cfg.mem_bytes;
    return CUDA_SUCCESS;
}

/* Reports an H200-like attribute value; attributes the fake does not model read 0. */
CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
    FK_ENTER(FK_NEED_INIT);
    if (!pi || (int)attrib <= 0 || attrib >= CU_DEVICE_ATTRIBUTE_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    switch (attrib) {
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *pi = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: *pi = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: *pi = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: *pi = 64; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: *pi = 2147483647; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: *pi = 65535; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: *pi = 65535; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: *pi = 49152; break;
    case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY: *pi = 65536; break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *pi = 32; break;
    case CU_DEVICE_ATTRIBUTE_MAX_PITCH: *pi = 2147483647; break;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: *pi = 65536; break;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: *pi = 1980000; break;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT: *pi = 512; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *pi = 132; break;
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY: *pi = 1; break;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS: *pi = 1; break;
    case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT: *pi = 2; break;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: *pi = 1; break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: *pi = 2619000; break;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: *pi = 5120; break;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: *pi = 52428800; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: *pi = 2048; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *pi = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *pi = 0; break;
    case CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED: *pi = 1; break;
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH: *pi = 1; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *pi = 232448; break;
    case CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM: *pi = 1; break;
    case CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED: *pi = 1; break;
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: *pi = !fk_cfg.no_vmm; break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: *pi = 1; break;
    default: *pi = 0; break;
    }
    return CUDA_SUCCESS;
}

/* ---- contexts ---- */

/* The calling thread's current context, or NULL. */
CUcontext fk_ctx_current(void)
{
    return ctx_depth ? ctx_stack[ctx_depth - 1] : NULL;
}

/* The primary context of device 0. */
CUcontext fk_ctx_primary(void)
{
    return &primary_ctx;
}

/* 1 if ctx is a live context handle. */
static int ctx_valid(CUcontext ctx)
{
    return ctx && ctx->tag == FK_TAG_CTX;
}

/* Retains the primary context of device 0 and gives it. */
CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    FK_ENTER(FK_NEED_INIT);
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&fk_lock);
    primary_refs++;
    pthread_mutex_unlock(&fk_lock);
    *pctx = &primary_ctx;
    return CUDA_SUCCESS;
}

/* Drops a reference to the primary context (the context itself lives on). */
static CUresult primary_release(CUdevice dev)
{
    CUresult rc = CUDA_SUCCESS;

    if (dev != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&fk_lock);
    if (primary_refs > 0)
        primary_refs--;
    else
        rc = CUDA_ERROR_INVALID_CONTEXT;
    pthread_mutex_unlock(&fk_lock);
    return rc;
}

/* cuDevicePrimaryCtxRelease (CUDA 7.0 ABI): see primary_release. */
CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{
    FK_ENTER(FK_NEED_INIT);
    return primary_release(dev);
}

/* cuDevicePrimaryCtxRelease_v2 (CUDA 11.0 ABI): see primary_release. */
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    FK_ENTER(FK_NEED_INIT);
    return primary_release(dev);
}

/* Pushes ctx on the calling thread's stack; CUDA_ERROR_INVALID_VALUE when it is full. */
static CUresult ctx_push(CUcontext ctx)
{
    if (ctx_depth == CTX_STACK_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    ctx_stack[ctx_depth++] = ctx;
    return CUDA_SUCCESS;
}

/* Makes a new context on device 0 and pushes it, as every cuCtxCreate version does. */
static CUresult ctx_create(CUcontext *pctx, CUdevice dev)
{
    struct CUctx_st *ctx;
    CUresult rc;

    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&fk_lock);
    ctx = dead_ctxs;
    if (ctx)
        dead_ctxs = ctx->next_dead;
    pthread_mutex_unlock(&fk_lock);
    if (!ctx)
        ctx = fk_xcalloc(1, sizeof *ctx);
    ctx->tag = FK_TAG_CTX;
    rc = ctx_push(ctx);
    if (rc != CUDA_SUCCESS) {
        ctx->tag = FK_TAG_DEAD;
        pthread_mutex_lock(&fk_lock);
        ctx->next_dead = dead_ctxs;
        dead_ctxs = ctx;
        pthread_mutex_unlock(&fk_lock);
        return rc;
    }
    *pctx = ctx;
    return CUDA_SUCCESS;
}

/* cuCtxCreate (CUDA 2.0 ABI): see ctx_create; flags are ignored. */
CUresult cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    FK_ENTER(FK_NEED_INIT);
    (void)flags;
    return ctx_create(pctx, dev);
}

/* cuCtxCreate_v2 (CUDA 3.2 ABI): see ctx_create; flags are ignored. */
CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    FK_ENTER(FK_NEED_INIT);
    (void)flags;
    return ctx_create(pctx, dev);
}

/* cuCtxCreate_v3 (CUDA 11.4 ABI): see ctx_create; affinity and flags are ignored. */
CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray, int numParams,
                        unsigned int flags, CUdevice dev)
{
    FK_ENTER(FK_NEED_INIT);
    (void)paramsArray;
    (void)numParams;
    (void)flags;
    return ctx_create(pctx, dev);
}

/* cuCtxCreate_v4 (CUDA 12.5 ABI): see ctx_create; parameters and flags are ignored. */
CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams, unsigned int flags,
                        CUdevice dev)
{
    FK_ENTER(FK_NEED_INIT);
    (void)ctxCreateParams;
    (void)flags;
    return ctx_create(pctx, dev);
}

/*
 * Destroys a context made by cuCtxCreate and pops it when it is current. The memory is kept
 * for a later cuCtxCreate (another thread may still hold the dead handle), never freed.
 */
static CUresult ctx_destroy(CUcontext ctx)
{
    if (!ctx_valid(ctx) || ctx->primary)
        return CUDA_ERROR_INVALID_CONTEXT;
    fk_drain_device();
    for (int i = 0; i < ctx_depth; i++)
        if (ctx_stack[i] == ctx) {
            memmove(&ctx_stack[i], &ctx_stack[i + 1], (size_t)(ctx_depth - i - 1) * sizeof ctx);
            ctx_depth--;
            i--;
        }
    pthread_mutex_lock(&fk_lock);
    ctx->tag = FK_TAG_DEAD;
    ctx->next_dead = dead_ctxs;
    dead_ctxs = ctx;
    pthread_mutex_unlock(&fk_lock);
    return CUDA_SUCCESS;
}

/* cuCtxDestroy (CUDA 2.0 ABI): see ctx_destroy. */
CUresult cuCtxDestroy(CUcontext ctx)
{
    FK_ENTER(FK_NEED_INIT);
    return ctx_destroy(ctx);
}

/* cuCtxDestroy_v2 (CUDA 4.0 ABI): see ctx_destroy. */
CUresult cuCtxDestroy_v2(CUcontext ctx)
{
    FK_ENTER(FK_NEED_INIT);
    return ctx_destroy(ctx);
}

/* Gives the calling thread's current context (NULL when none). */
CUresult cuCtxGetCurrent(CUcontext *pctx)
{
    FK_ENTER(FK_NEED_INIT);
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    *pctx = fk_ctx_current();
    return CUDA_SUCCESS;
}

/* Replaces the top of the calling thread's stack with ctx (NULL pops it). */
CUresult cuCtxSetCurrent(CUcontext ctx)
{
    FK_ENTER(FK_NEED_INIT);
    if (!ctx) {
        if (ctx_depth)
            ctx_depth--;
        return CUDA_SUCCESS;
    }
    if (!ctx_valid(ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    if (ctx_depth)
        ctx_stack[ctx_depth - 1] = ctx;
    else
        ctx_stack[ctx_depth++] = ctx;
    return CUDA_SUCCESS;
}

/* Pushes a valid context on the calling thread's stack. */
static CUresult ctx_push_checked(CUcontext ctx)
{
    if (!ctx_valid(ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    return ctx_push(ctx);
}

/* cuCtxPushCurrent (CUDA 2.0 ABI): see ctx_push_checked. */
CUresult cuCtxPushCurrent(CUcontext ctx)
{
    FK_ENTER(FK_NEED_INIT);
    return ctx_push_checked(ctx);
}

/* cuCtxPushCurrent_v2 (CUDA 4.0 ABI): see ctx_push_checked. */
CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{
    FK_ENTER(FK_NEED_INIT);
    return ctx_push_checked(ctx);
}

/* Pops the calling thread's current context into *pctx (may be NULL). */
static CUresult ctx_pop(CUcontext *pctx)
{
    if (!ctx_depth)
        return CUDA_ERROR_INVALID_CONTEXT;
    ctx_depth--;
    if (pctx)
        *pctx = ctx_stack[ctx_depth];
    return CUDA_SUCCESS;
}

/* cuCtxPopCurrent (CUDA 2.0 ABI): see ctx_pop. */
CUresult cuCtxPopCurrent(CUcontext *pctx)
{
    FK_ENTER(FK_NEED_INIT);
    return ctx_pop(pctx);
}

/* cuCtxPopCurrent_v2 (CUDA 4.0 ABI): see ctx_pop. */
CUresult cuCtxPopCurrent_v2(CUcontext *pctx)
{
    FK_ENTER(FK_NEED_INIT);
    return ctx_pop(pctx);
}

/* Gives the device of the current context: 0. */
CUresult cuCtxGetDevice(CUdevice *device)
{
    FK_ENTER(FK_NEED_CTX);
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    *device = 0;
    return CUDA_SUCCESS;
}

/* Gives the device of ctx (NULL: the current context): 0. */
CUresult cuCtxGetDevice_v2(CUdevice *device, CUcontext ctx)
{
    FK_ENTER(ctx ? FK_NEED_INIT : FK_NEED_CTX);
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    if (ctx && !ctx_valid(ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    *device = 0;
    return CUDA_SUCCESS;
}

/*
 * Waits for all work of the device (every context shares the one device). While any stream
 * captures: CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, and the captures are invalidated.
 */
static CUresult ctx_sync(void)
{
    CUresult rc = fk_capture_ctx_sync();

    if (rc == CUDA_SUCCESS)
        fk_drain_device();
    return rc;
}

/* cuCtxSynchronize (CUDA 2.0 ABI): see ctx_sync. */
CUresult cuCtxSynchronize(void)
{
    FK_ENTER(FK_NEED_CTX);
    return ctx_sync();
}

/* cuCtxSynchronize_v2 (CUDA 13.0 ABI) of ctx (NULL: the current context): see ctx_sync. */
CUresult cuCtxSynchronize_v2(CUcontext ctx)
{
    FK_ENTER(ctx ? FK_NEED_INIT : FK_NEED_CTX);
    if (ctx && !ctx_valid(ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    return ctx_sync();
}

/* ---- the test API ---- */

/* Copies the statistics (fakecuda.h). */
void fakecuda_stats(struct fakecuda_stats *out)
{
    pthread_mutex_lock(&fk_lock);
    *out = fk_stats;
    pthread_mutex_unlock(&fk_lock);
}

/* Sets the delay of the copies queued from now on (fakecuda.h). */
void fakecuda_set_copy_delay_us(unsigned us)
{
    __atomic_store_n(&fk_cfg.copy_delay_us, us, __ATOMIC_RELAXED);
}

/* The activity hooks (fakecuda.h). */
static const struct fakecuda_activity *_Atomic fk_hooks;

void fakecuda_set_activity(const struct fakecuda_activity *hooks)
{
    atomic_store(&fk_hooks, hooks);
}

/* A correlation id for the launch being made, or 0 without hooks (fk.h). */
uint32_t fk_activity_api(void)
{
    const struct fakecuda_activity *h = atomic_load(&fk_hooks);

    return h != NULL ? h->api() : 0;
}

/* The kernel of correlation id corr ran from start to end (fk.h). */
void fk_activity_kernel(uint32_t corr, uint64_t start, uint64_t end, uint32_t stream)
{
    const struct fakecuda_activity *h = atomic_load(&fk_hooks);

    if (h != NULL)
        h->kernel(corr, start, end, stream);
}

/* Resets the peak to the bytes in use now (fakecuda.h). */
void fakecuda_reset_peak(void)
{
    pthread_mutex_lock(&fk_lock);
    fk_stats.device_bytes_peak = fk_stats.device_bytes_in_use;
    pthread_mutex_unlock(&fk_lock);
}
