/*
 * fk_kernel.c: the "fakecuda" module (its kernels are host functions with the parameter
 * layouts of fakecuda.h), modules and libraries, CUfunction and CUkernel handles, and
 * launches. A launch copies the parameters into the op and runs the kernel on the stream's
 * worker.
 */
#include "fk.h"

#include <stdalign.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* Offset and size of one kernel parameter. */
struct param {
    size_t offset, size;
};

/* A kernel of the module. */
struct kdesc {
    const char *name;
    void (*fn)(const void *params); /* params: struct_size bytes, maximally aligned */
    const struct param *params;
    size_t nparams;
    size_t struct_size;              /* sizeof the fakecuda.h struct */
};

/* A CUfunction (FK_TAG_FUNC) or CUkernel (FK_TAG_KERNEL) handle. */
struct CUfunc_st {
    uint32_t tag;
    const struct kdesc *k;
    struct CUfunc_st *peer; /* a kernel's function (cuKernelGetFunction) */
    atomic_int loaded;      /* launched once: its FAKECUDA_LAZY_LOAD_BYTES are taken */
};

/* Payload of a launch: the kernel, then its parameter buffer. */
struct launch {
    const struct kdesc *k;
    alignas(max_align_t) unsigned char params[];
};

/* Writes value to dst[0..n). */
static void k_fill_u32(const void *params)
{
    struct fakecuda_fill_u32_params a;

    memcpy(&a, params, sizeof a);
    for (uint64_t i = 0; i < a.n; i++)
        a.dst[i] = a.value;
}

/* memmove(dst, src, n). */
static void k_copy_bytes(const void *params)
{
    struct fakecuda_copy_bytes_params a;

    memcpy(&a, params, sizeof a);
    memmove(a.dst, a.src, a.n);
}

/* y[i] += a * x[i]. */
static void k_axpy_f32(const void *params)
{
    struct fakecuda_axpy_f32_params a;

    memcpy(&a, params, sizeof a);
    for (uint64_t i = 0; i < a.n; i++)
        a.y[i] += a.a * a.x[i];
}

/* *out = sum of in[0..n). */
static void k_sum_u32(const void *params)
{
    struct fakecuda_sum_u32_params a;
    uint64_t sum = 0;

    memcpy(&a, params, sizeof a);
    for (uint64_t i = 0; i < a.n; i++)
        sum += a.in[i];
    *a.out = sum;
}

/* out[i] = p.a[i] + p.b[i]. */
static void k_struct_ptrs(const void *params)
{
    struct fakecuda_struct_ptrs_params a;

    memcpy(&a, params, sizeof a);
    for (uint64_t i = 0; i < a.p.n; i++)
        a.out[i] = a.p.a[i] + a.p.b[i];
}

/* Sleeps us microseconds. */
static void k_sleep_us(const void *params)
{
    struct fakecuda_sleep_us_params a;

    memcpy(&a, params, sizeof a);
    fk_sleep_us(a.us);
}

/* Sets byte 0 of each buffer the device-memory table points to. */
static void k_gather_ptrs(const void *params)
{
    struct fakecuda_gather_ptrs_params a;

    memcpy(&a, params, sizeof a);
    for (uint64_t i = 0; i < a.count; i++)
        *(uint8_t *)a.table[i] = a.value;
}

/* dst[i] = rand(seed, offset + i). */
static void k_rand_f32(const void *params)
{
    struct fakecuda_rand_f32_params a;

    memcpy(&a, params, sizeof a);
    for (uint64_t i = 0; i < a.n; i++)
        a.dst[i] = fakecuda_rand_f32(a.seed, a.offset + i);
}

/* dst[i] = rand(seed, *state + i), then *state += n. */
static void k_rand_state_f32(const void *params)
{
    struct fakecuda_rand_state_f32_params a;

    memcpy(&a, params, sizeof a);
    uint64_t off = *a.state;
    for (uint64_t i = 0; i < a.n; i++)
        a.dst[i] = fakecuda_rand_f32(a.seed, off + i);
    *a.state = off + a.n;
}

/* scratch[i] = src[i]^2, *dst = their sum. */
static void k_square_sum_f32(const void *params)
{
    struct fakecuda_square_sum_f32_params a;
    float sum = 0.0f;

    memcpy(&a, params, sizeof a);
    for (uint64_t i = 0; i < a.n; i++)
        a.scratch[i] = a.src[i] * a.src[i];
    for (uint64_t i = 0; i < a.n; i++)
        sum += a.scratch[i];
    *a.dst = sum;
}

/* scratch[i] = a * src[i], then dst[i] = scratch[i] + 1. */
static void k_scaled_ws_f32(const void *params)
{
    struct fakecuda_scaled_ws_f32_params a;

    memcpy(&a, params, sizeof a);
    for (uint64_t i = 0; i < a.n; i++)
        a.scratch[i] = a.a * a.src[i];
    for (uint64_t i = 0; i < a.n; i++)
        a.dst[i] = a.scratch[i] + 1.0f;
}

/* The flag (scratch's first word) mixed into dst, scratch[1 + i] = a * src[i], the flag
 * left at 0. */
static void k_flagged_ws_f32(const void *params)
{
    struct fakecuda_scaled_ws_f32_params a;
    uint32_t flag;

    memcpy(&a, params, sizeof a);
    memcpy(&flag, a.scratch, sizeof flag);
    for (uint64_t i = 0; i < a.n; i++)
        a.scratch[1 + i] = a.a * a.src[i];
    for (uint64_t i = 0; i < a.n; i++)
        a.dst[i] = a.scratch[1 + i] + (float)flag;
    memset(a.scratch, 0, sizeof flag);
}

/* dst[i] = value, and *aux = value where aux is given. */
static void k_fill_opt_u32(const void *params)
{
    struct fakecuda_fill_opt_u32_params a;

    memcpy(&a, params, sizeof a);
    for (uint64_t i = 0; i < a.n; i++)
        a.dst[i] = a.value;
    if (a.aux)
        *a.aux = a.value;
}

/* dst[i] = how many stamp_u32 launches have run (this one included). */
static void k_stamp_u32(const void *params)
{
    static atomic_uint stamps;
    struct fakecuda_stamp_u32_params a;

    memcpy(&a, params, sizeof a);
    uint32_t v = atomic_fetch_add(&stamps, 1) + 1;
    for (uint64_t i = 0; i < a.n; i++)
        a.dst[i] = v;
}

/* SplitMix64's finaliser. */
static uint64_t hash_mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* out[0..1] += the digest of p[0..n) (fakecuda.h, ebb_hash). */
static void k_ebb_hash(const void *params)
{
    struct fakecuda_ebb_hash_params a;
    uint64_t s0 = 0, s1 = 0, ptrs = 0;

    memcpy(&a, params, sizeof a);
    int aligned = ((uintptr_t)a.p & 7) == 0;
    for (uint64_t i = 0; i * 8 < a.n; i++) {
        uint64_t w = 0;
        for (unsigned b = 0; b < 8 && i * 8 + b < a.n; b++)
            w |= (uint64_t)a.p[i * 8 + b] << (8 * b);
        for (uint64_t k = 0; aligned && i * 8 + 8 <= a.n && k < a.nregions &&
                             k < FAKECUDA_HASH_REGIONS; k++)
            if (w >= a.lo[k] && w < a.hi[k]) {
                ptrs++;
                break;
            }
        s0 += hash_mix(w ^ (i * 0x9e3779b97f4a7c15ULL));
        s1 += hash_mix(w + i * 0xc2b2ae3d27d4eb4fULL + 0x165667b19e3779f9ULL);
    }
    a.out[0] += s0;
    a.out[1] += s1;
    a.out[2] += ptrs;
}

/* data[0][i] = data[1][i] + data[2][i] over the strided view of it. */
static void k_strided_add_f32(const void *params)
{
    struct fakecuda_strided_add_f32_params a;

    memcpy(&a, params, sizeof a);
    for (int32_t i = 0; i < a.n; i++) {
        uint64_t off[3] = { 0, 0, 0 };
        uint32_t rest = (uint32_t)i;
        for (int32_t d = 0; d < a.it.dims && d < FAKECUDA_STRIDED_DIMS; d++) {
            uint32_t size = a.it.sizes[d] ? a.it.sizes[d] : 1;
            for (int k = 0; k < 3; k++)
                off[k] += (uint64_t)(rest % size) * a.it.strides[d][k];
            rest /= size;
        }
        float *out = (float *)((char *)a.it.data[0] + off[0]);
        *out = *(const float *)((const char *)a.it.data[1] + off[1]) +
               *(const float *)((const char *)a.it.data[2] + off[2]);
    }
}

/* Offset and size of member m of struct fakecuda_<k>_params. */
#define PARAM(k, m)                                                   \
    {                                                                 \
        offsetof(struct fakecuda_##k##_params, m),                    \
        sizeof(((struct fakecuda_##k##_params *)0)->m)                \
    }

static const struct param p_fill_u32[] = { PARAM(fill_u32, dst), PARAM(fill_u32, value),
                                           PARAM(fill_u32, n) };
static const struct param p_copy_bytes[] = { PARAM(copy_bytes, dst), PARAM(copy_bytes, src),
                                             PARAM(copy_bytes, n) };
static const struct param p_axpy_f32[] = { PARAM(axpy_f32, y), PARAM(axpy_f32, x),
                                           PARAM(axpy_f32, a), PARAM(axpy_f32, n) };
static const struct param p_sum_u32[] = { PARAM(sum_u32, out), PARAM(sum_u32, in),
                                          PARAM(sum_u32, n) };
static const struct param p_struct_ptrs[] = { PARAM(struct_ptrs, p), PARAM(struct_ptrs, out) };
static const struct param p_sleep_us[] = { PARAM(sleep_us, us) };
static const struct param p_gather_ptrs[] = { PARAM(gather_ptrs, table), PARAM(gather_ptrs, count),
                                              PARAM(gather_ptrs, value) };
static const struct param p_rand_f32[] = { PARAM(rand_f32, dst), PARAM(rand_f32, n),
                                           PARAM(rand_f32, seed), PARAM(rand_f32, offset) };
static const struct param p_rand_state_f32[] = { PARAM(rand_state_f32, dst),
                                                 PARAM(rand_state_f32, state),
                                                 PARAM(rand_state_f32, n),
                                                 PARAM(rand_state_f32, seed) };
static const struct param p_fill_opt_u32[] = { PARAM(fill_opt_u32, dst), PARAM(fill_opt_u32, n),
                                               PARAM(fill_opt_u32, aux),
                                               PARAM(fill_opt_u32, value) };
static const struct param p_stamp_u32[] = { PARAM(stamp_u32, dst), PARAM(stamp_u32, n) };
/* (the regions: one struct passed by value, as hash.cu's) */
static const struct param p_ebb_hash[] = {
    PARAM(ebb_hash, p), PARAM(ebb_hash, n), PARAM(ebb_hash, out),
    { offsetof(struct fakecuda_ebb_hash_params, lo),
      sizeof(struct fakecuda_ebb_hash_params) - offsetof(struct fakecuda_ebb_hash_params, lo) }
};
static const struct param p_square_sum_f32[] = { PARAM(square_sum_f32, dst),
                                                 PARAM(square_sum_f32, src),
                                                 PARAM(square_sum_f32, scratch),
                                                 PARAM(square_sum_f32, n) };
static const struct param p_scaled_ws_f32[] = { PARAM(scaled_ws_f32, dst),
                                                PARAM(scaled_ws_f32, src),
                                                PARAM(scaled_ws_f32, scratch),
                                                PARAM(scaled_ws_f32, a),
                                                PARAM(scaled_ws_f32, n) };
#define p_flagged_ws_f32 p_scaled_ws_f32
static const struct param p_strided_add_f32[] = { PARAM(strided_add_f32, n),
                                                  PARAM(strided_add_f32, it) };

/* One kernel table entry. */
#define KERNEL(k)                                                                           \
    {                                                                                       \
        #k, k_##k, p_##k, sizeof p_##k / sizeof p_##k[0], sizeof(struct fakecuda_##k##_params) \
    }

static const struct kdesc kernels[] = {
    KERNEL(fill_u32), KERNEL(copy_bytes), KERNEL(axpy_f32), KERNEL(sum_u32),
    KERNEL(struct_ptrs), KERNEL(sleep_us), KERNEL(gather_ptrs), KERNEL(rand_f32),
    KERNEL(rand_state_f32), KERNEL(square_sum_f32), KERNEL(ebb_hash), KERNEL(stamp_u32), KERNEL(fill_opt_u32),
    KERNEL(strided_add_f32), KERNEL(scaled_ws_f32), KERNEL(flagged_ws_f32),
};

enum { N_KERNELS = sizeof kernels / sizeof kernels[0] };

/* A loaded module (FK_TAG_MODULE) or library (FK_TAG_LIBRARY). */
struct loaded {
    uint32_t tag;
    struct CUfunc_st funcs[N_KERNELS];
    struct CUfunc_st kernels[N_KERNELS];
};

/* Makes a module or library holding every kernel of the fakecuda module. */
static struct loaded *load(uint32_t tag)
{
    struct loaded *m = fk_xcalloc(1, sizeof *m);

    m->tag = tag;
    for (size_t i = 0; i < N_KERNELS; i++) {
        m->funcs[i] = (struct CUfunc_st){ FK_TAG_FUNC, &kernels[i], NULL, 0 };
        m->kernels[i] = (struct CUfunc_st){ FK_TAG_KERNEL, &kernels[i], &m->funcs[i], 0 };
    }
    return m;
}

/* Marks a module or library and its handles dead and frees it. */
static void unload(struct loaded *m)
{
    for (size_t i = 0; i < N_KERNELS; i++)
        m->funcs[i].tag = m->kernels[i].tag = FK_TAG_DEAD;
    m->tag = FK_TAG_DEAD;
    free(m);
}

/* Index of the kernel named `name`, or N_KERNELS. */
static size_t kernel_index(const char *name)
{
    for (size_t i = 0; i < N_KERNELS; i++)
        if (strcmp(kernels[i].name, name) == 0)
            return i;
    return N_KERNELS;
}

/* Loads the module by file name: "fakecuda", or a path whose last part is that. */
CUresult cuModuleLoad(CUmodule *module, const char *fname)
{
    const char *slash;

    FK_ENTER(FK_NEED_CTX);
    if (!module || !fname)
        return CUDA_ERROR_INVALID_VALUE;
    slash = strrchr(fname, '/');
    if (strcmp(slash ? slash + 1 : fname, FAKECUDA_MODULE_NAME) != 0)
        return CUDA_ERROR_FILE_NOT_FOUND;
    *module = (CUmodule)load(FK_TAG_MODULE);
    return CUDA_SUCCESS;
}

/* Whether image is PTX text (a .version directive) whose every .entry is a kernel of the
 * module: those run natively (ebb_hash, ebb's own). 1: it is, 0: it is not PTX, -1: an
 * entry the fake cannot run. */
static int ptx_of_module(const char *image)
{
    const char *e = image;

    if (strstr(image, ".version ") == NULL)
        return 0;
    while ((e = strstr(e, ".entry ")) != NULL) {
        char name[128];
        size_t n = 0;

        e += strlen(".entry ");
        while (e[n] != '\0' && e[n] != '(' && e[n] != ' ' && e[n] != '\n' && n < sizeof name - 1)
            n++;
        memcpy(name, e, n);
        name[n] = '\0';
        if (kernel_index(name) == N_KERNELS)
            return -1;
        e += n;
    }
    return 1;
}

/* Loads the module from FAKECUDA_MODULE_IMAGE, or from PTX text whose entries are kernels
 * of the module (an entry it cannot run: CUDA_ERROR_INVALID_PTX; any other image:
 * CUDA_ERROR_INVALID_IMAGE). */
CUresult cuModuleLoadData(CUmodule *module, const void *image)
{
    FK_ENTER(FK_NEED_CTX);
    if (!module || !image)
        return CUDA_ERROR_INVALID_VALUE;
    int ptx = ptx_of_module(image);
    if (ptx < 0)
        return CUDA_ERROR_INVALID_PTX;
    if (ptx == 0 && strncmp(image, FAKECUDA_MODULE_IMAGE, sizeof FAKECUDA_MODULE_IMAGE) != 0)
        return CUDA_ERROR_INVALID_IMAGE;
    *module = (CUmodule)load(FK_TAG_MODULE);
    return CUDA_SUCCESS;
}

/* Unloads a module; its CUfunction handles die with it. */
CUresult cuModuleUnload(CUmodule hmod)
{
    struct loaded *m = (struct loaded *)hmod;

    FK_ENTER(FK_NEED_CTX);
    if (!m || m->tag != FK_TAG_MODULE)
        return CUDA_ERROR_INVALID_HANDLE;
    unload(m);
    return CUDA_SUCCESS;
}

/* Gives the CUfunction of a kernel by name (CUDA_ERROR_NOT_FOUND if there is none). */
CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
    struct loaded *m = (struct loaded *)hmod;
    size_t i;

    FK_ENTER(FK_NEED_CTX);
    if (!hfunc || !name)
        return CUDA_ERROR_INVALID_VALUE;
    if (!m || m->tag != FK_TAG_MODULE)
        return CUDA_ERROR_INVALID_HANDLE;
    i = kernel_index(name);
    if (i == N_KERNELS)
        return CUDA_ERROR_NOT_FOUND;
    *hfunc = &m->funcs[i];
    return CUDA_SUCCESS;
}

/* Loads the module as a library from FAKECUDA_MODULE_IMAGE; options are ignored. */
CUresult cuLibraryLoadData(CUlibrary *library, const void *code, CUjit_option *jitOptions,
                           void **jitOptionsValues, unsigned int numJitOptions,
                           CUlibraryOption *libraryOptions, void **libraryOptionValues,
                           unsigned int numLibraryOptions)
{
    FK_ENTER(FK_NEED_INIT);
    (void)jitOptions;
    (void)jitOptionsValues;
    (void)numJitOptions;
    (void)libraryOptions;
    (void)libraryOptionValues;
    (void)numLibraryOptions;
    if (!library || !code)
        return CUDA_ERROR_INVALID_VALUE;
    if (strncmp(code, FAKECUDA_MODULE_IMAGE, sizeof FAKECUDA_MODULE_IMAGE) != 0)
        return CUDA_ERROR_INVALID_IMAGE;
    *library = (CUlibrary)load(FK_TAG_LIBRARY);
    return CUDA_SUCCESS;
}

/* Unloads a library; its CUkernel handles and their functions die with it. */
CUresult cuLibraryUnload(CUlibrary library)
{
    struct loaded *m = (struct loaded *)library;

    FK_ENTER(FK_NEED_INIT);
    if (!m || m->tag != FK_TAG_LIBRARY)
        return CUDA_ERROR_INVALID_HANDLE;
    unload(m);
    return CUDA_SUCCESS;
}

/* Gives the CUkernel of a kernel by name (CUDA_ERROR_NOT_FOUND if there is none). */
CUresult cuLibraryGetKernel(CUkernel *pKernel, CUlibrary library, const char *name)
{
    struct loaded *m = (struct loaded *)library;
    size_t i;

    FK_ENTER(FK_NEED_INIT);
    if (!pKernel || !name)
        return CUDA_ERROR_INVALID_VALUE;
    if (!m || m->tag != FK_TAG_LIBRARY)
        return CUDA_ERROR_INVALID_HANDLE;
    i = kernel_index(name);
    if (i == N_KERNELS)
        return CUDA_ERROR_NOT_FOUND;
    *pKernel = (CUkernel)&m->kernels[i];
    return CUDA_SUCCESS;
}

/* The handle behind a CUfunction or CUkernel if its tag is `tag`, else NULL. */
static struct CUfunc_st *handle_as(const void *h, uint32_t tag)
{
    struct CUfunc_st *f = (struct CUfunc_st *)h;

    return f && f->tag == tag ? f : NULL;
}

/* Gives the CUfunction (for the current context) of a CUkernel. */
CUresult cuKernelGetFunction(CUfunction *pFunc, CUkernel kernel)
{
    struct CUfunc_st *k = handle_as(kernel, FK_TAG_KERNEL);

    FK_ENTER(FK_NEED_CTX);
    if (!pFunc)
        return CUDA_ERROR_INVALID_VALUE;
    if (!k)
        return CUDA_ERROR_INVALID_HANDLE;
    *pFunc = k->peer;
    return CUDA_SUCCESS;
}

/* Gives a parameter's offset and size (either output may be NULL). */
static CUresult param_info(const struct CUfunc_st *f, size_t index, size_t *offset, size_t *size)
{
    if (!f)
        return CUDA_ERROR_INVALID_HANDLE;
    if (index >= f->k->nparams)
        return CUDA_ERROR_INVALID_VALUE;
    if (offset)
        *offset = f->k->params[index].offset;
    if (size)
        *size = f->k->params[index].size;
    return CUDA_SUCCESS;
}

/* Parameter layout of a CUkernel; a CUfunction gives CUDA_ERROR_INVALID_HANDLE. */
CUresult cuKernelGetParamInfo(CUkernel kernel, size_t paramIndex, size_t *paramOffset,
                              size_t *paramSize)
{
    FK_ENTER(FK_NEED_INIT);
    return param_info(handle_as(kernel, FK_TAG_KERNEL), paramIndex, paramOffset, paramSize);
}

/* Parameter layout of a CUfunction; a CUkernel gives CUDA_ERROR_INVALID_HANDLE. */
CUresult cuFuncGetParamInfo(CUfunction func, size_t paramIndex, size_t *paramOffset,
                            size_t *paramSize)
{
    FK_ENTER(FK_NEED_INIT);
    return param_info(handle_as(func, FK_TAG_FUNC), paramIndex, paramOffset, paramSize);
}

/* Gives a CUkernel's name. */
CUresult cuKernelGetName(const char **name, CUkernel hfunc)
{
    struct CUfunc_st *k = handle_as(hfunc, FK_TAG_KERNEL);

    FK_ENTER(FK_NEED_INIT);
    if (!name)
        return CUDA_ERROR_INVALID_VALUE;
    if (!k)
        return CUDA_ERROR_INVALID_HANDLE;
    *name = k->k->name;
    return CUDA_SUCCESS;
}

/* Gives a CUfunction's name. */
CUresult cuFuncGetName(const char **name, CUfunction hfunc)
{
    struct CUfunc_st *f = handle_as(hfunc, FK_TAG_FUNC);

    FK_ENTER(FK_NEED_INIT);
    if (!name)
        return CUDA_ERROR_INVALID_VALUE;
    if (!f)
        return CUDA_ERROR_INVALID_HANDLE;
    *name = f->k->name;
    return CUDA_SUCCESS;
}

/* A few function attributes with plausible values; the rest read 0. */
CUresult cuFuncGetAttribute(int *pi, CUfunction_attribute attrib, CUfunction hfunc)
{
    struct CUfunc_st *f = handle_as(hfunc, FK_TAG_FUNC);

    FK_ENTER(FK_NEED_INIT);
    if (!f)
        f = handle_as(hfunc, FK_TAG_KERNEL);
    if (!pi || (int)attrib < 0 || attrib >= CU_FUNC_ATTRIBUTE_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    if (!f)
        return CUDA_ERROR_INVALID_HANDLE;
    switch (attrib) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *pi = 1024; break;
    case CU_FUNC_ATTRIBUTE_NUM_REGS: *pi = 32; break;
    case CU_FUNC_ATTRIBUTE_PTX_VERSION: *pi = 90; break;
    case CU_FUNC_ATTRIBUTE_BINARY_VERSION: *pi = 90; break;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: *pi = 49152; break;
    default: *pi = 0; break;
    }
    return CUDA_SUCCESS;
}

/* The body of a launch op. */
static void launch_run(struct fk_op *op)
{
    struct launch *l = (struct launch *)op->payload;

    l->k->fn(l->params);
}

/*
 * Copies the parameters from kernelParams (one pointer per parameter) or from the extra
 * array's CU_LAUNCH_PARAM_BUFFER_POINTER / CU_LAUNCH_PARAM_BUFFER_SIZE blob into params.
 */
static CUresult copy_params(const struct kdesc *k, void **kernelParams, void **extra,
                            unsigned char *params)
{
    const struct param *last = &k->params[k->nparams - 1];
    void *buf = NULL;
    size_t *bufsize = NULL;

    if (kernelParams && extra)
        return CUDA_ERROR_INVALID_VALUE;
    if (kernelParams) {
        for (size_t i = 0; i < k->nparams; i++) {
            if (!kernelParams[i])
                return CUDA_ERROR_INVALID_VALUE;
            memcpy(params + k->params[i].offset, kernelParams[i], k->params[i].size);
        }
        return CUDA_SUCCESS;
    }
    if (!extra)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
        if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
            buf = extra[i + 1];
        else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE)
            bufsize = extra[i + 1];
        else
            return CUDA_ERROR_INVALID_VALUE;
    }
    if (!buf || !bufsize || *bufsize < last->offset + last->size)
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(params, buf, *bufsize < k->struct_size ? *bufsize : k->struct_size);
    return CUDA_SUCCESS;
}

/*
 * Launches a CUfunction or CUkernel: checks the dimensions (none 0, at most 1024 threads a
 * block), copies the parameters and queues the kernel on the stream.
 */
static CUresult launch(const char *what, CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                       unsigned bx, unsigned by, unsigned bz, CUstream h, void **kernelParams,
                       void **extra, int ptds)
{
    struct CUfunc_st *fn = handle_as(f, FK_TAG_FUNC);
    struct fk_op *op;
    struct launch *l;
    CUresult rc;

    if (!fn)
        fn = handle_as(f, FK_TAG_KERNEL);
    if (!fn)
        return CUDA_ERROR_INVALID_HANDLE;
    if (!gx || !gy || !gz || !bx || !by || !bz || (uint64_t)bx * by * bz > 1024)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUfunc_st *code = fn->tag == FK_TAG_KERNEL && fn->peer ? fn->peer : fn;
    if (fk_cfg.lazy_load_bytes && !atomic_exchange(&code->loaded, 1)) {
        /* the function's code is loaded at its first launch, as CUDA's lazy
         * loading does: device memory the job never allocated, held to the end */
        pthread_mutex_lock(&fk_lock);
        int full = fk_budget_take_locked(fk_cfg.lazy_load_bytes);
        pthread_mutex_unlock(&fk_lock);
        if (full)
            return CUDA_ERROR_OUT_OF_MEMORY;
    }
    op = fk_op_new(FK_OP_WORK, what, launch_run, sizeof *l + fn->k->struct_size);
    op->detail = fn->k->name;
    op->delay_us = fk_cfg.kernel_delay_us;
    op->act_corr = fk_activity_api();
    l = (struct launch *)op->payload;
    l->k = fn->k;
    rc = copy_params(fn->k, kernelParams, extra, l->params);
    if (rc != CUDA_SUCCESS) {
        free(op);
        return rc;
    }
    if (fk_cfg.launch_queue_delay_us)
        fk_sleep_us(fk_cfg.launch_queue_delay_us); /* the calling thread, before it queues */
    return fk_submit(h, ptds, op, 0);
}

/* Launches a kernel (legacy semantics for stream 0). */
CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                        unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                        unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                        void **kernelParams, void **extra)
{
    FK_ENTER(FK_NEED_INIT);
    (void)sharedMemBytes;
    return launch(__func__, f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                  hStream, kernelParams, extra, 0);
}

/* Launches a kernel (stream 0: the per-thread default stream). */
CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                             unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                             unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                             void **kernelParams, void **extra)
{
    FK_ENTER(FK_NEED_INIT);
    (void)sharedMemBytes;
    return launch(__func__, f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                  hStream, kernelParams, extra, 1);
}

/* Launches with a CUlaunchConfig: grid, block and stream from it, attributes ignored. */
static CUresult launch_ex(const char *what, const CUlaunchConfig *c, CUfunction f,
                          void **kernelParams, void **extra, int ptds)
{
    if (!c)
        return CUDA_ERROR_INVALID_VALUE;
    return launch(what, f, c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY,
                  c->blockDimZ, c->hStream, kernelParams, extra, ptds);
}

/* See launch_ex (legacy semantics for stream 0). */
CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **kernelParams,
                          void **extra)
{
    FK_ENTER(FK_NEED_INIT);
    return launch_ex(__func__, config, f, kernelParams, extra, 0);
}

/* See launch_ex (stream 0: the per-thread default stream). */
CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f, void **kernelParams,
                               void **extra)
{
    FK_ENTER(FK_NEED_INIT);
    return launch_ex(__func__, config, f, kernelParams, extra, 1);
}

/* A cooperative launch is an ordinary one here (legacy semantics for stream 0). */
CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                   unsigned int gridDimZ, unsigned int blockDimX,
                                   unsigned int blockDimY, unsigned int blockDimZ,
                                   unsigned int sharedMemBytes, CUstream hStream,
                                   void **kernelParams)
{
    FK_ENTER(FK_NEED_INIT);
    (void)sharedMemBytes;
    return launch(__func__, f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                  hStream, kernelParams, NULL, 0);
}

/* A cooperative launch (stream 0: the per-thread default stream). */
CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gridDimX,
                                        unsigned int gridDimY, unsigned int gridDimZ,
                                        unsigned int blockDimX, unsigned int blockDimY,
                                        unsigned int blockDimZ, unsigned int sharedMemBytes,
                                        CUstream hStream, void **kernelParams)
{
    FK_ENTER(FK_NEED_INIT);
    (void)sharedMemBytes;
    return launch(__func__, f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                  hStream, kernelParams, NULL, 1);
}
