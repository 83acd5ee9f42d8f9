/*
 * fakecuda.h: the test-side API of the fake CUDA driver (libcuda.so.1 built from this
 * folder; see README.md). Tests include it next to <cuda.h> to read the fake's statistics,
 * to queue host work on a stream, and to launch the kernels of the "fakecuda" module.
 */
#ifndef EBB_FAKECUDA_H
#define EBB_FAKECUDA_H

#include <stddef.h>
#include <stdint.h>

#include <cuda.h>

/* cuModuleLoad() file name of the kernel module. */
#define FAKECUDA_MODULE_NAME "fakecuda"

/* cuModuleLoadData() / cuLibraryLoadData() image of the kernel module (a C string). */
#define FAKECUDA_MODULE_IMAGE "fakecuda-module-image-1"

/* What fakecuda_stats() reports. Counters count calls since the library was loaded. */
struct fakecuda_stats {
    uint64_t mem_free_calls;      /* cuMemFree (every version) */
    uint64_t mem_create_calls;    /* cuMemCreate */
    uint64_t mem_map_calls;       /* cuMemMap */
    uint64_t mem_unmap_calls;     /* cuMemUnmap */
    uint64_t host_alloc_calls;    /* cuMemHostAlloc and cuMemAllocHost (every version) */
    uint64_t device_bytes_in_use; /* cuMemAlloc* allocations and live cuMemCreate handles */
    uint64_t device_bytes_peak;   /* highest device_bytes_in_use since load or the last reset */
    uint64_t live_phys_handles;   /* cuMemCreate handles not yet released and unmapped */
    uint64_t event_query_calls;   /* cuEventQuery */
    uint64_t event_record_calls;  /* cuEventRecord and cuEventRecordWithFlags (every version) */
};

/* Fills *out with the current statistics. */
void fakecuda_stats(struct fakecuda_stats *out);

/* Sets device_bytes_peak to the current device_bytes_in_use. */
void fakecuda_reset_peak(void);

/* Sets the delay of every copy queued from now on (FAKECUDA_COPY_DELAY_US's):
 * a link that slows while the job runs. */
void fakecuda_set_copy_delay_us(unsigned us);

/*
 * Activity hooks, for a CUPTI of the fake's (fakecupti.c): while set, each
 * kernel launch calls api() on the launching thread, as the driver API
 * call that CUPTI gives a correlation id, and once the kernel has run,
 * kernel(that id, start, end, stream) on the stream's worker, with
 * CLOCK_MONOTONIC nanoseconds around its run (after any FAKECUDA delay) and
 * the stream's handle as a number. Kernels replayed from a graph have none.
 */
struct fakecuda_activity {
    uint32_t (*api)(void);
    void (*kernel)(uint32_t corr, uint64_t start, uint64_t end, uint32_t stream);
};

/* Sets the activity hooks (NULL: none, the default); *hooks must outlive them. */
void fakecuda_set_activity(const struct fakecuda_activity *hooks);

/*
 * Runs fn(arg) on the worker of stream (0, CU_STREAM_LEGACY or CU_STREAM_PER_THREAD allowed:
 * 0 means the legacy stream), in order with the stream's other work. Returns
 * CUDA_ERROR_INVALID_HANDLE for an unknown stream, CUDA_ERROR_INVALID_CONTEXT when a default
 * stream is named without a current context, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED while the
 * stream captures. Used by the fake libnccl.so.2.
 */
CUresult fakecuda_enqueue(CUstream stream, void (*fn)(void *), void *arg);

/*
 * The kernels of the "fakecuda" module. Each struct is the kernel's parameter buffer: a
 * launch passes kernelParams[i] = &params.<i-th member>, or the whole struct as the `extra`
 * CU_LAUNCH_PARAM_BUFFER_POINTER blob. Offsets are those of the C struct (natural alignment),
 * and cuKernelGetParamInfo / cuFuncGetParamInfo report the same offsets and sizes. Grid and
 * block dimensions are checked but otherwise ignored: each kernel does all n elements.
 */

/* fill_u32: dst[i] = value for i < n. */
struct fakecuda_fill_u32_params {
    uint32_t *dst;
    uint32_t value;
    uint64_t n;
};

/* copy_bytes: memmove(dst, src, n). */
struct fakecuda_copy_bytes_params {
    void *dst;
    const void *src;
    uint64_t n;
};

/* axpy_f32: y[i] += a * x[i] for i < n. */
struct fakecuda_axpy_f32_params {
    float *y;
    const float *x;
    float a;
    uint64_t n;
};

/* sum_u32: *out = in[0] + ... + in[n - 1], summed in 64 bits. */
struct fakecuda_sum_u32_params {
    uint64_t *out;
    const uint32_t *in;
    uint64_t n;
};

/* The by-value struct argument of struct_ptrs: 24 bytes holding two pointers. */
struct fakecuda_pair {
    float *a;
    const float *b;
    uint64_t n;
};

/* struct_ptrs: out[i] = p.a[i] + p.b[i] for i < p.n (p at offset 0, out at offset 24). */
struct fakecuda_struct_ptrs_params {
    struct fakecuda_pair p;
    float *out;
};

/* sleep_us: sleeps us microseconds; touches no memory. */
struct fakecuda_sleep_us_params {
    uint32_t us;
};

/*
 * gather_ptrs: for i < count, sets byte 0 of the buffer table[i] points to to value. The
 * table itself lives in device memory, so those pointers are invisible in the parameters.
 */
struct fakecuda_gather_ptrs_params {
    void *const *table;
    uint64_t count;
    uint8_t value;
};

/*
 * Kernels whose replay a test can predict (launching a recorded kernel again
 * to remake its output): their random numbers, and what they write beside it.
 * The random numbers are those of fakecuda_rand_f32(seed, i), in [0, 1).
 */

/* rand_f32: dst[i] = fakecuda_rand_f32(seed, offset + i) for i < n: random numbers from
 * parameters only, as a dropout kernel given its seed and offset by value; a replay with
 * the same parameters gives the same numbers. */
struct fakecuda_rand_f32_params {
    float *dst;
    uint64_t n;
    uint64_t seed;
    uint64_t offset;
};

/* rand_state_f32: dst[i] = fakecuda_rand_f32(seed, *state + i) for i < n, then
 * *state += n: the offset is read from device memory and advanced, as a generator
 * whose state lives on the device; a replay gives other numbers unless *state is
 * what it was, and it writes state too. */
struct fakecuda_rand_state_f32_params {
    float *dst;
    uint64_t *state;
    uint64_t n;
    uint64_t seed;
};

/* square_sum_f32: scratch[i] = src[i] * src[i] for i < n, then *dst = their sum (in
 * order, in float): scratch is written before it is read, so what it held before does
 * not matter; it holds the squares after. */
struct fakecuda_square_sum_f32_params {
    float *dst;
    const float *src;
    float *scratch;
    uint64_t n;
};

/* scaled_ws_f32: scratch[i] = a * src[i], then dst[i] = scratch[i] + 1 for i < n: as a
 * GEMM that stages through a workspace, dst depends on src alone, and scratch holds
 * the scaled values after. */
struct fakecuda_scaled_ws_f32_params {
    float *dst;
    const float *src;
    float *scratch;
    float a;
    uint64_t n;
};

/* flagged_ws_f32 (the params of scaled_ws_f32): as a GEMM whose cooperating blocks count
 * on flags in their workspace, which they leave at zero: flag = the first word of scratch,
 * as a u32; scratch[1 + i] = a * src[i], dst[i] = scratch[1 + i] + flag for i < n; the flag
 * is 0 on exit. dst is right only where the workspace's flag was 0 on entry. */
#define fakecuda_flagged_ws_f32_params fakecuda_scaled_ws_f32_params

/* fill_opt_u32: dst[i] = value for i < n, and *aux = value where aux is not NULL (an
 * optional output, as kernels that report a flag or an index have). */
struct fakecuda_fill_opt_u32_params {
    uint32_t *dst;
    uint64_t n;
    uint32_t *aux;
    uint32_t value;
};

/* stamp_u32: dst[i] = the number of stamp_u32 launches run so far in the process, for
 * i < n: what it writes depends on nothing it is given (a kernel that is not
 * deterministic, as one reading a clock or racing atomics is). */
struct fakecuda_stamp_u32_params {
    uint32_t *dst;
    uint64_t n;
};

/* ebb_hash: the kernel ebb carries as PTX (src/exec/hash.cu), run natively when a
 * module loaded from PTX text names it: adds a 128-bit digest of the n bytes at p into
 * out[0] and out[1], and into out[2] the number of whole words, p 8-byte aligned, whose
 * value lies inside one of the regions [lo[k], hi[k]), k < nregions (at most 16). The
 * bytes are little-endian 8-byte words w_i, the last padded with zeros; out[0] += sum
 * of mix(w_i ^ i * 0x9e3779b97f4a7c15), out[1] += sum of mix(w_i + i *
 * 0xc2b2ae3d27d4eb4f + 0x165667b19e3779f9), mod 2^64, mix being SplitMix64's
 * finaliser. */
#define FAKECUDA_HASH_REGIONS 16
struct fakecuda_ebb_hash_params {
    const unsigned char *p;
    uint64_t n;
    uint64_t *out;
    uint64_t lo[FAKECUDA_HASH_REGIONS], hi[FAKECUDA_HASH_REGIONS];
    uint64_t nregions;
};

/* Dimensions of the offset calculator of strided_add_f32. */
#define FAKECUDA_STRIDED_DIMS 16

/*
 * The by-value struct argument of strided_add_f32, shaped like what PyTorch's elementwise
 * kernels pass (the data pointers of a TensorIterator and its offset calculator): 288 bytes,
 * 36 8-byte words of which three are pointers and the rest small integers or zeros.
 */
struct fakecuda_strided3 {
    float *data[3];                                  /* out, a, b */
    int32_t dims;                                    /* dimensions used, at most 16 */
    uint32_t sizes[FAKECUDA_STRIDED_DIMS];           /* elements of each, innermost first */
    uint32_t strides[FAKECUDA_STRIDED_DIMS][3];      /* bytes between elements of each, per
                                                      * pointer of data */
};

/*
 * strided_add_f32: out = a + b over the n elements of a strided view: element i's index
 * in dimension d is (i / (sizes[0] * ... * sizes[d - 1])) % sizes[d], and its byte offset
 * from data[k] the sum over d of that index times strides[d][k]. n is an int as PyTorch's
 * N is (4 bytes, at offset 0); it at offset 8.
 */
struct fakecuda_strided_add_f32_params {
    int32_t n;
    struct fakecuda_strided3 it;
};

/* The random number of rand_f32 and rand_state_f32 at (seed, i): a mix of both bits,
 * 24 of them as a float in [0, 1). */
static inline float fakecuda_rand_f32(uint64_t seed, uint64_t i)
{
    uint64_t x = seed * 0x9e3779b97f4a7c15ULL + i;

    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return (float)(x >> 40) / 16777216.0f;
}

#endif /* EBB_FAKECUDA_H */
