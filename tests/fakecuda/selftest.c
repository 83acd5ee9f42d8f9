/*
 * selftest.c: checks the fake driver (libcuda.so.1) and the fake NCCL (libnccl.so.2) alone,
 * without ebb. The driver is reached as libcudart reaches it: dlopen("libcuda.so.1"), dlsym
 * of cuGetProcAddress_v2, then every entry point through cuGetProcAddress_v2.
 *
 * The libraries come from $EBB_TEST_FAKECUDA (set by `make check`; else the .libs folder
 * next to this program); the program re-executes itself with that folder first in
 * LD_LIBRARY_PATH, so that libnccl.so.2's own libcuda.so.1 is the same fake. Tests that need
 * a fresh process (environment variables read once) re-execute it with a mode argument;
 * fault tests fork. Prints each failure; exits 0 when everything passed, 1 otherwise.
 */
#define _GNU_SOURCE 1
#define __CUDA_API_VERSION_INTERNAL 1

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cuda.h>
#include <cudaTypedefs.h>
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <nccl.h>
#pragma GCC diagnostic pop

#include "fakecuda.h"

/* Every entry point the test uses: base name, version asked for, expected ELF name. */
#define LEGACY_APIS(X)                                                                      \
    X(cuInit, 2000, cuInit) X(cuDriverGetVersion, 2020, cuDriverGetVersion)                 \
    X(cuGetErrorName, 6000, cuGetErrorName) X(cuGetErrorString, 6000, cuGetErrorString)     \
    X(cuDeviceGet, 2000, cuDeviceGet) X(cuDeviceGetCount, 2000, cuDeviceGetCount)           \
    X(cuDeviceGetName, 2000, cuDeviceGetName) X(cuDeviceTotalMem, 3020, cuDeviceTotalMem_v2) \
    X(cuDeviceGetAttribute, 2000, cuDeviceGetAttribute)                                     \
    X(cuDevicePrimaryCtxRetain, 7000, cuDevicePrimaryCtxRetain)                             \
    X(cuDevicePrimaryCtxRelease, 11000, cuDevicePrimaryCtxRelease_v2)                       \
    X(cuCtxCreate, 12050, cuCtxCreate_v4) X(cuCtxDestroy, 4000, cuCtxDestroy_v2)            \
    X(cuCtxGetCurrent, 4000, cuCtxGetCurrent) X(cuCtxSetCurrent, 4000, cuCtxSetCurrent)     \
    X(cuCtxPushCurrent, 4000, cuCtxPushCurrent_v2) X(cuCtxPopCurrent, 4000, cuCtxPopCurrent_v2) \
    X(cuCtxGetDevice, 13000, cuCtxGetDevice_v2) X(cuCtxSynchronize, 13000, cuCtxSynchronize_v2) \
    X(cuMemGetInfo, 3020, cuMemGetInfo_v2) X(cuMemAlloc, 3020, cuMemAlloc_v2)               \
    X(cuMemAllocPitch, 3020, cuMemAllocPitch_v2) X(cuMemFree, 3020, cuMemFree_v2)           \
    X(cuMemGetAddressRange, 3020, cuMemGetAddressRange_v2)                                  \
    X(cuMemAllocAsync, 11020, cuMemAllocAsync)                                              \
    X(cuMemAllocFromPoolAsync, 11020, cuMemAllocFromPoolAsync)                              \
    X(cuMemFreeAsync, 11020, cuMemFreeAsync)                                                \
    X(cuDeviceGetDefaultMemPool, 11020, cuDeviceGetDefaultMemPool)                          \
    X(cuMemPoolSetAttribute, 11020, cuMemPoolSetAttribute)                                  \
    X(cuMemPoolGetAttribute, 11020, cuMemPoolGetAttribute)                                  \
    X(cuPointerGetAttribute, 4000, cuPointerGetAttribute)                                   \
    X(cuMemHostAlloc, 2020, cuMemHostAlloc) X(cuMemAllocHost, 3020, cuMemAllocHost_v2)      \
    X(cuMemFreeHost, 2000, cuMemFreeHost) X(cuMemHostRegister, 6050, cuMemHostRegister_v2)  \
    X(cuMemHostUnregister, 4000, cuMemHostUnregister)                                       \
    X(cuMemHostGetDevicePointer, 3020, cuMemHostGetDevicePointer_v2)                        \
    X(cuMemGetAllocationGranularity, 10020, cuMemGetAllocationGranularity)                  \
    X(cuMemAddressReserve, 10020, cuMemAddressReserve)                                      \
    X(cuMemAddressFree, 10020, cuMemAddressFree) X(cuMemCreate, 10020, cuMemCreate)         \
    X(cuMemRelease, 10020, cuMemRelease) X(cuMemMap, 10020, cuMemMap)                       \
    X(cuMemUnmap, 10020, cuMemUnmap) X(cuMemSetAccess, 10020, cuMemSetAccess)               \
    X(cuMemGetAccess, 10020, cuMemGetAccess)                                                \
    X(cuStreamCreate, 2000, cuStreamCreate)                                                 \
    X(cuStreamCreateWithPriority, 5050, cuStreamCreateWithPriority)                         \
    X(cuStreamDestroy, 4000, cuStreamDestroy_v2)                                            \
    X(cuStreamSynchronize, 2000, cuStreamSynchronize) X(cuStreamQuery, 2000, cuStreamQuery) \
    X(cuStreamWaitEvent, 3020, cuStreamWaitEvent)                                           \
    X(cuStreamAddCallback, 5000, cuStreamAddCallback)                                       \
    X(cuLaunchHostFunc, 10000, cuLaunchHostFunc) X(cuStreamGetFlags, 5050, cuStreamGetFlags) \
    X(cuStreamGetCtx, 12050, cuStreamGetCtx_v2)                                             \
    X(cuStreamBeginCapture, 10010, cuStreamBeginCapture_v2)                                 \
    X(cuStreamEndCapture, 10000, cuStreamEndCapture)                                        \
    X(cuStreamIsCapturing, 10000, cuStreamIsCapturing)                                      \
    X(cuThreadExchangeStreamCaptureMode, 10010, cuThreadExchangeStreamCaptureMode)          \
    X(cuStreamGetCaptureInfo, 12030, cuStreamGetCaptureInfo_v3)                             \
    X(cuGraphInstantiateWithFlags, 11040, cuGraphInstantiateWithFlags)                      \
    X(cuGraphLaunch, 10000, cuGraphLaunch) X(cuGraphUpload, 11010, cuGraphUpload)           \
    X(cuGraphDestroy, 10000, cuGraphDestroy) X(cuGraphExecDestroy, 10000, cuGraphExecDestroy) \
    X(cuEventCreate, 2000, cuEventCreate) X(cuEventDestroy, 4000, cuEventDestroy_v2)        \
    X(cuEventRecord, 2000, cuEventRecord)                                                   \
    X(cuEventRecordWithFlags, 11010, cuEventRecordWithFlags)                                \
    X(cuEventSynchronize, 2000, cuEventSynchronize) X(cuEventQuery, 2000, cuEventQuery)     \
    X(cuEventElapsedTime, 12080, cuEventElapsedTime_v2)                                     \
    X(cuMemcpy, 4000, cuMemcpy) X(cuMemcpyAsync, 4000, cuMemcpyAsync)                       \
    X(cuMemcpyHtoD, 3020, cuMemcpyHtoD_v2) X(cuMemcpyDtoH, 3020, cuMemcpyDtoH_v2)           \
    X(cuMemcpyDtoD, 3020, cuMemcpyDtoD_v2) X(cuMemcpyHtoDAsync, 3020, cuMemcpyHtoDAsync_v2) \
    X(cuMemcpyDtoHAsync, 3020, cuMemcpyDtoHAsync_v2)                                        \
    X(cuMemcpyDtoDAsync, 3020, cuMemcpyDtoDAsync_v2) X(cuMemcpyPeer, 4000, cuMemcpyPeer)    \
    X(cuMemcpyPeerAsync, 4000, cuMemcpyPeerAsync) X(cuMemcpy2D, 3020, cuMemcpy2D_v2)        \
    X(cuMemcpy2DUnaligned, 3020, cuMemcpy2DUnaligned_v2)                                    \
    X(cuMemcpy2DAsync, 3020, cuMemcpy2DAsync_v2) X(cuMemcpy3D, 3020, cuMemcpy3D_v2)         \
    X(cuMemcpy3DAsync, 3020, cuMemcpy3DAsync_v2) X(cuMemsetD8, 3020, cuMemsetD8_v2)         \
    X(cuMemsetD16, 3020, cuMemsetD16_v2) X(cuMemsetD32, 3020, cuMemsetD32_v2)               \
    X(cuMemsetD2D8, 3020, cuMemsetD2D8_v2) X(cuMemsetD2D16, 3020, cuMemsetD2D16_v2)         \
    X(cuMemsetD2D32, 3020, cuMemsetD2D32_v2) X(cuMemsetD8Async, 3020, cuMemsetD8Async)      \
    X(cuMemsetD16Async, 3020, cuMemsetD16Async) X(cuMemsetD32Async, 3020, cuMemsetD32Async) \
    X(cuMemsetD2D8Async, 3020, cuMemsetD2D8Async)                                           \
    X(cuMemsetD2D16Async, 3020, cuMemsetD2D16Async)                                         \
    X(cuMemsetD2D32Async, 3020, cuMemsetD2D32Async) X(cuModuleLoad, 2000, cuModuleLoad)     \
    X(cuModuleLoadData, 2000, cuModuleLoadData) X(cuModuleUnload, 2000, cuModuleUnload)     \
    X(cuModuleGetFunction, 2000, cuModuleGetFunction)                                       \
    X(cuLibraryLoadData, 12000, cuLibraryLoadData) X(cuLibraryUnload, 12000, cuLibraryUnload) \
    X(cuLibraryGetKernel, 12000, cuLibraryGetKernel)                                        \
    X(cuKernelGetFunction, 12000, cuKernelGetFunction)                                      \
    X(cuKernelGetParamInfo, 12040, cuKernelGetParamInfo)                                    \
    X(cuFuncGetParamInfo, 12040, cuFuncGetParamInfo)                                        \
    X(cuKernelGetName, 12030, cuKernelGetName) X(cuFuncGetName, 12030, cuFuncGetName)       \
    X(cuFuncGetAttribute, 2020, cuFuncGetAttribute) X(cuLaunchKernel, 4000, cuLaunchKernel) \
    X(cuLaunchKernelEx, 11060, cuLaunchKernelEx)                                            \
    X(cuLaunchCooperativeKernel, 9000, cuLaunchCooperativeKernel)                           \
    X(cuGetProcAddress, 12000, cuGetProcAddress_v2)

/* Per-thread-stream variants: base name, version, PFN suffix, expected ELF name. */
#define PT_APIS(X)                                                                          \
    X(cuLaunchKernel, 7000, _ptsz, cuLaunchKernel_ptsz)                                     \
    X(cuMemcpyHtoD, 7000, _ptds, cuMemcpyHtoD_v2_ptds)                                      \
    X(cuMemcpyDtoH, 7000, _ptds, cuMemcpyDtoH_v2_ptds)                                      \
    X(cuMemcpyDtoDAsync, 7000, _ptsz, cuMemcpyDtoDAsync_v2_ptsz)                            \
    X(cuMemsetD32, 7000, _ptds, cuMemsetD32_v2_ptds)                                        \
    X(cuStreamSynchronize, 7000, _ptsz, cuStreamSynchronize_ptsz)                           \
    X(cuStreamQuery, 7000, _ptsz, cuStreamQuery_ptsz)                                       \
    X(cuStreamBeginCapture, 10010, _ptsz, cuStreamBeginCapture_v2_ptsz)                     \
    X(cuStreamEndCapture, 10000, _ptsz, cuStreamEndCapture_ptsz)                            \
    X(cuGraphLaunch, 10000, _ptsz, cuGraphLaunch_ptsz)

/* The driver entry points, fetched with cuGetProcAddress_v2. */
static struct {
#define FIELD(name, ver, elf) PFN_##name##_v##ver name;
    LEGACY_APIS(FIELD)
#undef FIELD
#define FIELD(name, ver, sfx, elf) PFN_##name##_v##ver##sfx name##sfx;
    PT_APIS(FIELD)
#undef FIELD
    void (*stats)(struct fakecuda_stats *);
} D;

/* The NCCL entry points, from dlsym on libnccl.so.2. */
#define NCCL_APIS(X)                                                                        \
    X(ncclGetVersion) X(ncclGetUniqueId) X(ncclCommInitRank) X(ncclCommInitAll)              \
    X(ncclCommDestroy) X(ncclCommCount) X(ncclCommUserRank) X(ncclCommCuDevice) X(ncclSend)  \
    X(ncclRecv) X(ncclAllReduce) X(ncclBroadcast) X(ncclReduce) X(ncclAllGather)            \
    X(ncclReduceScatter) X(ncclGroupStart) X(ncclGroupEnd) X(ncclCommRegister)              \
    X(ncclCommDeregister) X(ncclMemAlloc) X(ncclMemFree) X(ncclGetErrorString)              \
    X(ncclGetLastError)

static struct {
#define FIELD(name) __typeof__(&name) name;
    NCCL_APIS(FIELD)
#undef FIELD
} NC;

static void *cuda_lib;           /* dlopen handle of libcuda.so.1 */
static char lib_dir[PATH_MAX];   /* where the fake libraries are ("" : the loader's path) */
static int failures;
static CUcontext ctx;            /* the primary context, current in the main thread */
static CUfunction fn_fill, fn_copy, fn_axpy, fn_sum, fn_pair, fn_sleep, fn_gather;
static CUfunction fn_rand, fn_rand_state, fn_square_sum, fn_strided;

/*
 * A decoy of a driver entry point exported by this program (linked with -export-dynamic),
 * as a preloaded interposer such as libebb.so exports one: cuGetProcAddress must still give
 * the driver's own function, never the decoy.
 */
CUresult cuDriverGetVersion(int *driverVersion)
{
    *driverVersion = -1;
    return CUDA_SUCCESS;
}

/* Counts and prints a failed check. */
#define CHECK(cond)                                                                 \
    do {                                                                            \
        if (!(cond)) {                                                              \
            fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);         \
            failures++;                                                             \
        }                                                                           \
    } while (0)

/* Checks that a driver call returned `want`. */
#define EXPECT(want, call) expect_rc((want), (call), #call, __LINE__)

/* Checks that a driver call succeeded. */
#define OK(call) EXPECT(CUDA_SUCCESS, call)

/* Reports a driver call that returned something other than `want`; returns got == want. */
static int expect_rc(CUresult want, CUresult got, const char *call, int line)
{
    if (got == want)
        return 1;
    fprintf(stderr, "FAIL %s:%d: %s returned %d, expected %d\n", __FILE__, line, call, (int)got,
            (int)want);
    failures++;
    return 0;
}

/* Milliseconds of CLOCK_MONOTONIC. */
static double now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* A device pointer as a host pointer (device memory is host memory in the fake). */
static void *hp(CUdeviceptr d)
{
    return (void *)(uintptr_t)d;
}

/* Path of a fake library: in lib_dir, or the bare name for the loader to find. */
static const char *lib_path(const char *name, char *buf, size_t size)
{
    if (!lib_dir[0])
        return name;
    snprintf(buf, size, "%s/%s", lib_dir, name);
    return buf;
}

/*
 * Finds the library folder ($EBB_TEST_FAKECUDA, else .libs next to this program) and
 * re-executes the program with it first in LD_LIBRARY_PATH unless it is there already.
 */
static void setup_library_path(char **argv)
{
    const char *dir = getenv("EBB_TEST_FAKECUDA"), *old = getenv("LD_LIBRARY_PATH");
    char exe[PATH_MAX - 16], *slash, *path;
    ssize_t n;
    size_t len;

    if (dir && *dir) {
        snprintf(lib_dir, sizeof lib_dir, "%s", dir);
    } else if ((n = readlink("/proc/self/exe", exe, sizeof exe - 1)) > 0) {
        exe[n] = '\0';
        slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            snprintf(lib_dir, sizeof lib_dir, "%s/.libs", exe);
            if (access(lib_dir, F_OK) != 0)
                lib_dir[0] = '\0';
        }
    }
    if (!lib_dir[0])
        return;
    len = strlen(lib_dir);
    if (old && strncmp(old, lib_dir, len) == 0 && (old[len] == ':' || old[len] == '\0'))
        return;
    if (asprintf(&path, "%s%s%s", lib_dir, old && *old ? ":" : "", old && *old ? old : "") < 0)
        exit(1);
    setenv("LD_LIBRARY_PATH", path, 1);
    execv("/proc/self/exe", argv);
    fprintf(stderr, "selftest: cannot re-execute itself: %s\n", strerror(errno));
    exit(1);
}

/* Loads libcuda.so.1 and fetches every entry point through cuGetProcAddress_v2. */
static void load_driver(void)
{
    PFN_cuGetProcAddress_v12000 gpa;
    CUdriverProcAddressQueryResult st;
    char buf[PATH_MAX + 32];
    void *p;

    cuda_lib = dlopen(lib_path("libcuda.so.1", buf, sizeof buf), RTLD_NOW | RTLD_GLOBAL);
    if (!cuda_lib) {
        fprintf(stderr, "selftest: %s\n", dlerror());
        exit(1);
    }
    *(void **)&D.stats = dlsym(cuda_lib, "fakecuda_stats");
    if (!D.stats) {
        fprintf(stderr, "selftest: %s is not the fake driver\n", buf);
        exit(1);
    }
    *(void **)&gpa = dlsym(cuda_lib, "cuGetProcAddress_v2");
    if (!gpa) {
        fprintf(stderr, "selftest: no cuGetProcAddress_v2\n");
        exit(1);
    }
#define FETCH(name, ver, elf)                                                                  \
    p = NULL;                                                                                  \
    if (gpa(#name, &p, ver, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &st) != CUDA_SUCCESS || !p ||   \
        st != CU_GET_PROC_ADDRESS_SUCCESS || p != dlsym(cuda_lib, #elf)) {                     \
        fprintf(stderr, "FAIL: cuGetProcAddress_v2(%s, %d) is not %s\n", #name, ver, #elf);    \
        exit(1);                                                                               \
    }                                                                                          \
    *(void **)&D.name = p;
    LEGACY_APIS(FETCH)
#undef FETCH
#define FETCH(name, ver, sfx, elf)                                                             \
    p = NULL;                                                                                  \
    if (gpa(#name, &p, ver, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st) != CUDA_SUCCESS \
        || !p || st != CU_GET_PROC_ADDRESS_SUCCESS || p != dlsym(cuda_lib, #elf)) {           \
        fprintf(stderr, "FAIL: cuGetProcAddress_v2(%s, %d, per-thread) is not %s\n", #name, ver, \
                #elf);                                                                         \
        exit(1);                                                                               \
    }                                                                                          \
    *(void **)&D.name##sfx = p;
    PT_APIS(FETCH)
#undef FETCH
}

/* cuInit, the primary context made current, and the kernels of the fakecuda module. */
static void init_driver(void)
{
    CUmodule mod;

    OK(D.cuInit(0));
    OK(D.cuDevicePrimaryCtxRetain(&ctx, 0));
    OK(D.cuCtxSetCurrent(ctx));
    OK(D.cuModuleLoad(&mod, FAKECUDA_MODULE_NAME));
    OK(D.cuModuleGetFunction(&fn_fill, mod, "fill_u32"));
    OK(D.cuModuleGetFunction(&fn_copy, mod, "copy_bytes"));
    OK(D.cuModuleGetFunction(&fn_axpy, mod, "axpy_f32"));
    OK(D.cuModuleGetFunction(&fn_sum, mod, "sum_u32"));
    OK(D.cuModuleGetFunction(&fn_pair, mod, "struct_ptrs"));
    OK(D.cuModuleGetFunction(&fn_sleep, mod, "sleep_us"));
    OK(D.cuModuleGetFunction(&fn_gather, mod, "gather_ptrs"));
    OK(D.cuModuleGetFunction(&fn_rand, mod, "rand_f32"));
    OK(D.cuModuleGetFunction(&fn_rand_state, mod, "rand_state_f32"));
    OK(D.cuModuleGetFunction(&fn_square_sum, mod, "square_sum_f32"));
    OK(D.cuModuleGetFunction(&fn_strided, mod, "strided_add_f32"));
}

/* Launches fill_u32(dst, value, n) on stream s. */
static CUresult launch_fill(CUstream s, CUdeviceptr dst, uint32_t value, uint64_t n)
{
    struct fakecuda_fill_u32_params a = { hp(dst), value, n };
    void *args[] = { &a.dst, &a.value, &a.n };

    return D.cuLaunchKernel(fn_fill, 1, 1, 1, 128, 1, 1, 0, s, args, NULL);
}

/* Launches sleep_us(us) on stream s. */
static CUresult launch_sleep(CUstream s, uint32_t us)
{
    void *args[] = { &us };

    return D.cuLaunchKernel(fn_sleep, 1, 1, 1, 1, 1, 1, 0, s, args, NULL);
}

/* Reads the 32-bit word at device address d (synchronous copy). */
static uint32_t read_u32(CUdeviceptr d)
{
    uint32_t v = 0xdeadbeef;

    OK(D.cuMemcpyDtoH(&v, d, sizeof v));
    return v;
}

/* ---- cuGetProcAddress ---- */

/*
 * Asks cuGetProcAddress_v2 for (name, version, flags); it must succeed with status
 * want_status and give the function named elf (NULL: no function).
 */
static void expect_proc(const char *name, int version, cuuint64_t flags,
                        CUdriverProcAddressQueryResult want_status, const char *elf)
{
    CUdriverProcAddressQueryResult st = (CUdriverProcAddressQueryResult)-1;
    void *p = (void *)1;
    CUresult rc = D.cuGetProcAddress(name, &p, version, flags, &st);

    if (rc != CUDA_SUCCESS || st != want_status || p != (elf ? dlsym(cuda_lib, elf) : NULL)) {
        fprintf(stderr, "FAIL: cuGetProcAddress_v2(%s, %d, %llu): rc %d status %d, expected %s\n",
                name, version, (unsigned long long)flags, (int)rc, (int)st, elf ? elf : "none");
        failures++;
    }
}

/*
 * Version and per-thread resolution through both cuGetProcAddress ABIs, with the answers
 * measured on the driver (580.159.04): a per-thread request below the version of the
 * _ptsz/_ptds variant finds nothing (no fallback), _v2 reports "not found" as CUDA_SUCCESS
 * with a NULL function and a status, the 4-argument one as CUDA_ERROR_NOT_FOUND.
 */
static void test_procaddr(void)
{
    const cuuint64_t pt = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
    const CUdriverProcAddressQueryResult ok = CU_GET_PROC_ADDRESS_SUCCESS;
    const CUdriverProcAddressQueryResult too_old = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
    CUdriverProcAddressQueryResult st = (CUdriverProcAddressQueryResult)7;
    PFN_cuGetProcAddress_v11030 gpa4;
    void *p = (void *)1;

    expect_proc("cuMemAlloc", 13000, 0, ok, "cuMemAlloc_v2");
    expect_proc("cuMemAlloc", 13000, pt, ok, "cuMemAlloc_v2");
    expect_proc("cuMemAlloc", 1000, 0, too_old, NULL);
    expect_proc("cuNoSuchCall", 13000, 0, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND, NULL);
    expect_proc("cuLaunchKernel", 13000, 0, ok, "cuLaunchKernel");
    expect_proc("cuLaunchKernel", 7000, CU_GET_PROC_ADDRESS_LEGACY_STREAM, ok, "cuLaunchKernel");
    expect_proc("cuLaunchKernel", 13000, pt, ok, "cuLaunchKernel_ptsz");
    expect_proc("cuLaunchKernel", 7000, pt | CU_GET_PROC_ADDRESS_LEGACY_STREAM, ok,
                "cuLaunchKernel_ptsz");
    expect_proc("cuLaunchKernel", 4000, pt, too_old, NULL);
    expect_proc("cuMemcpyHtoD", 13000, pt, ok, "cuMemcpyHtoD_v2_ptds");
    expect_proc("cuMemcpyHtoD", 6000, pt, too_old, NULL);
    expect_proc("cuMemcpyHtoD", 3020, 0, ok, "cuMemcpyHtoD_v2");
    expect_proc("cuMemsetD8Async", 7000, pt, ok, "cuMemsetD8Async_ptsz");
    expect_proc("cuEventElapsedTime", 12000, 0, ok, "cuEventElapsedTime");
    expect_proc("cuEventElapsedTime", 12080, 0, ok, "cuEventElapsedTime_v2");
    expect_proc("cuCtxSynchronize", 12090, 0, ok, "cuCtxSynchronize");
    expect_proc("cuCtxSynchronize", 13000, 0, ok, "cuCtxSynchronize_v2");
    expect_proc("cuStreamBeginCapture", 10000, pt, ok, "cuStreamBeginCapture_ptsz");
    expect_proc("cuStreamBeginCapture", 13000, pt, ok, "cuStreamBeginCapture_v2_ptsz");
    expect_proc("cuStreamGetCaptureInfo", 11030, pt, ok, "cuStreamGetCaptureInfo_v2_ptsz");
    expect_proc("cuGraphInstantiate", 12000, 0, ok, "cuGraphInstantiate_v2");
    expect_proc("cuGetProcAddress", 11030, 0, ok, "cuGetProcAddress");
    expect_proc("cuGetProcAddress", 12000, 0, ok, "cuGetProcAddress_v2");
    EXPECT(CUDA_ERROR_INVALID_VALUE, D.cuGetProcAddress("cuInit", &p, 13010, 0, &st));
    EXPECT(CUDA_ERROR_INVALID_VALUE, D.cuGetProcAddress("cuInit", &p, 13000, 4, &st));
    CHECK(p == (void *)1 && st == 7);
    *(void **)&gpa4 = dlsym(cuda_lib, "cuGetProcAddress");
    CHECK(gpa4 != NULL);
    if (gpa4) {
        OK(gpa4("cuStreamQuery", &p, 12000, pt));
        CHECK(p == dlsym(cuda_lib, "cuStreamQuery_ptsz"));
        p = (void *)1;
        EXPECT(CUDA_ERROR_NOT_FOUND, gpa4("cuNoSuchCall", &p, 12000, 0));
        EXPECT(CUDA_ERROR_NOT_FOUND, gpa4("cuLaunchKernel", &p, 4000, pt));
        EXPECT(CUDA_ERROR_INVALID_VALUE, gpa4("cuInit", &p, 13010, 0));
        CHECK(p == (void *)1);
    }
}

/* ---- init, device, contexts, errors ---- */

/* cuInit, device queries, context stack, error names. */
static void test_init(void)
{
    CUcontext c2 = NULL, cur = NULL;
    CUdevice dev = -1;
    char name[64];
    const char *s = NULL;
    size_t total = 0;
    int v = 0, major = 0, minor = 0;

    EXPECT(CUDA_ERROR_NOT_INITIALIZED, D.cuDeviceGetCount(&v));
    OK(D.cuDriverGetVersion(&v));
    CHECK(v == 13000);
    init_driver();
    OK(D.cuDeviceGetCount(&v));
    CHECK(v == 1);
    OK(D.cuDeviceGet(&dev, 0));
    CHECK(dev == 0);
    EXPECT(CUDA_ERROR_INVALID_DEVICE, D.cuDeviceGet(&dev, 1));
    OK(D.cuDeviceGetName(name, sizeof name, 0));
    CHECK(name[0] != '\0');
    OK(D.cuDeviceTotalMem(&total, 0));
    CHECK(total == (size_t)1 << 30);
    OK(D.cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0));
    CHECK(v == 1);
    OK(D.cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 0));
    CHECK(v == 1);
    OK(D.cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, 0));
    CHECK(v == 1);
    OK(D.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0));
    OK(D.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0));
    CHECK(major == 9 && minor == 0);

    OK(D.cuCtxGetCurrent(&cur));
    CHECK(cur == ctx);
    OK(D.cuCtxGetDevice(&dev, NULL));
    CHECK(dev == 0);
    OK(D.cuCtxCreate(&c2, NULL, 0, 0));
    OK(D.cuCtxGetCurrent(&cur));
    CHECK(cur == c2 && c2 != ctx);
    OK(D.cuCtxPopCurrent(&cur));
    CHECK(cur == c2);
    OK(D.cuCtxGetCurrent(&cur));
    CHECK(cur == ctx);
    OK(D.cuCtxDestroy(c2));
    EXPECT(CUDA_ERROR_INVALID_CONTEXT, D.cuCtxPushCurrent(c2));
    OK(D.cuCtxPushCurrent(ctx));
    OK(D.cuCtxPopCurrent(&cur));
    OK(D.cuCtxSynchronize(NULL));

    OK(D.cuGetErrorName(CUDA_ERROR_OUT_OF_MEMORY, &s));
    CHECK(s && strcmp(s, "CUDA_ERROR_OUT_OF_MEMORY") == 0);
    OK(D.cuGetErrorString(CUDA_ERROR_OUT_OF_MEMORY, &s));
    CHECK(s && strcmp(s, "out of memory") == 0);
    EXPECT(CUDA_ERROR_INVALID_VALUE, D.cuGetErrorName((CUresult)12345, &s));
    CHECK(s == NULL);
}

/* A thread with no current context: allocation fails with CUDA_ERROR_INVALID_CONTEXT. */
static void *no_context_thread(void *arg)
{
    CUdeviceptr d;

    (void)arg;
    EXPECT(CUDA_ERROR_INVALID_CONTEXT, D.cuMemAlloc(&d, 64));
    return NULL;
}

/* ---- memory ---- */

/* Device allocations, budget, address ranges, attributes, cuMemFree waiting for the device. */
static void test_device_memory(void)
{
    struct fakecuda_stats st0, st1;
    CUdeviceptr d = 0, d2 = 0, base = 0;
    size_t free0, free1, total, size = 0, pitch = 0;
    unsigned int mtype = 0;
    CUstream nb;
    pthread_t t;
    double t0;

    pthread_create(&t, NULL, no_context_thread, NULL);
    pthread_join(t, NULL);
    D.stats(&st0);
    OK(D.cuMemGetInfo(&free0, &total));
    CHECK(total == (size_t)1 << 30);
    OK(D.cuMemAlloc(&d, 1 << 20));
    OK(D.cuMemGetInfo(&free1, &total));
    CHECK(free0 - free1 == 1 << 20);
    D.stats(&st1);
    CHECK(st1.device_bytes_in_use == st0.device_bytes_in_use + (1 << 20));
    CHECK(st1.device_bytes_peak >= st1.device_bytes_in_use);
    OK(D.cuMemGetAddressRange(&base, &size, d + 100));
    CHECK(base == d && size == 1 << 20);
    OK(D.cuPointerGetAttribute(&base, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, d + 7));
    CHECK(base == d);
    OK(D.cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, d + 7));
    CHECK(size == 1 << 20);
    OK(D.cuPointerGetAttribute(&base, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, d + 7));
    CHECK(base == d + 7);
    OK(D.cuPointerGetAttribute(&mtype, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, d));
    CHECK(mtype == CU_MEMORYTYPE_DEVICE);
    EXPECT(CUDA_ERROR_INVALID_VALUE,
           D.cuPointerGetAttribute(&mtype, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)16));
    EXPECT(CUDA_ERROR_OUT_OF_MEMORY, D.cuMemAlloc(&d2, (size_t)2 << 30));
    EXPECT(CUDA_ERROR_INVALID_VALUE, D.cuMemAlloc(&d2, 0));
    OK(D.cuMemAllocPitch(&d2, &pitch, 1000, 3, 4));
    CHECK(pitch == 1024);
    OK(D.cuMemFree(d2));
    EXPECT(CUDA_ERROR_INVALID_VALUE, D.cuMemFree(d + 1));

    OK(D.cuStreamCreate(&nb, CU_STREAM_NON_BLOCKING));
    OK(launch_sleep(nb, 300000));
    t0 = now_ms();
    OK(D.cuMemFree(d));
    CHECK(now_ms() - t0 > 200);
    EXPECT(CUDA_ERROR_INVALID_VALUE, D.cuMemFree(d));
    D.stats(&st1);
    CHECK(st1.mem_free_calls == st0.mem_free_calls + 4);
    CHECK(st1.device_bytes_in_use == st0.device_bytes_in_use);
    OK(D.cuStreamDestroy(nb));
}

/* Stream-ordered allocation and free, the default pool. */
static void test_async_memory(void)
{
    struct fakecuda_stats st0, st1;
    CUmemoryPool pool;
    CUdeviceptr d, d2;
    cuuint64_t threshold = 1;
    CUstream s;

    OK(D.cuStreamCreate(&s, 0));
    D.stats(&st0);
    OK(D.cuMemAllocAsync(&d, 4096, s));
    OK(launch_fill(s, d, 42, 1024));
    OK(launch_sleep(s, 200000));
    OK(D.cuMemFreeAsync(d, s));
    EXPECT(CUDA_ERROR_INVALID_VALUE, D.cuMemFreeAsync(d, s));
    D.stats(&st1);
    CHECK(st1.device_bytes_in_use == st0.device_bytes_in_use + 4096);
    OK(D.cuStreamSynchronize(s));
    D.stats(&st1);
    CHECK(st1.device_bytes_in_use == st0.device_bytes_in_use);

    OK(D.cuDeviceGetDefaultMemPool(&pool, 0));
    OK(D.cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold));
    OK(D.cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold));
    CHECK(threshold == 0);
    OK(D.cuMemAllocFromPoolAsync(&d2, 256, pool, s));
    OK(launch_fill(s, d2, 7, 64));
    OK(D.cuStreamSynchronize(s));
    CHECK(read_u32(d2 + 60) == 7);
    OK(D.cuMemFreeAsync(d2, s));
    OK(D.cuStreamSynchronize(s));
    OK(D.cuStreamDestroy(s));
}

/* Pinned and registered host memory. */
static void test_host_memory(void)
{
    struct fakecuda_stats st0, st1;
    unsigned int mtype = 0;
    void *h1 = NULL, *h2 = NULL;
    char *buf = malloc(1 << 16);
    CUdeviceptr d = 0;

    D.stats(&st0);
    OK(D.cuMemHostAlloc(&h1, 1 << 16, CU_MEMHOSTALLOC_PORTABLE));
    OK(D.cuMemAllocHost(&h2, 100));
    D.stats(&st1);
    CHECK(st1.host_alloc_calls == st0.host_alloc_calls + 2);
    CHECK(st1.device_bytes_in_use == st0.device_bytes_in_use);
    OK(D.cuMemHostGetDevicePointer(&d, (char *)h1 + 10, 0));
    CHECK(hp(d) == (char *)h1 + 10);
    OK(D.cuPointerGetAttribute(&mtype, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)h2));
    CHECK(mtype == CU_MEMORYTYPE_HOST);
    memset(h1, 3, 1 << 16);
    EXPECT(CUDA_ERROR_INVALID_VALUE, D.cuMemFreeHost((char *)h1 + 1));
    OK(D.cuMemFreeHost(h1));
    OK(D.cuMemFreeHost(h2));

    OK(D.cuMemHostRegister(buf, 1 << 16, 0));
    EXPECT(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, D.cuMemHostRegister(buf + 4096, 4096, 0));
    EXPECT(CUDA_ERROR_INVALID_VALUE, D.cuMemHostUnregister(buf + 4096));
    OK(D.cuMemHostGetDevicePointer(&d, buf + 5, 0));
    CHECK(hp(d) == buf + 5);
    OK(D.cuMemHostUnregister(buf));
    EXPECT(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, D.cuMemHostUnregister(buf));
    EXPECT(CUDA_ERROR_INVALID_VALUE, D.cuMemHostGetDevicePointer(&d, buf, 0));
    free(buf);
}

/* ---- copies and memsets ---- */

/* Every copy flavour, checked byte for byte. */
static void test_copies(void)
{
    unsigned char src[256], dst[256], h2d[4][16], back[4][16];
    CUdeviceptr a, b, p2;
    size_t pitch;
    CUstream s;

    for (int i = 0; i < 256; i++)
        src[i] = (unsigned char)i;
    OK(D.cuStreamCreate(&s, 0));
    OK(D.cuMemAlloc(&a, 256));
    OK(D.cuMemAlloc(&b, 256));
    OK(D.cuMemcpyHtoD(a, src, 256));
    OK(D.cuMemcpyDtoD(b, a, 256));
    memset(dst, 0, sizeof dst);
    OK(D.cuMemcpyDtoH(dst, b, 256));
    CHECK(memcmp(src, dst, 256) == 0);

    OK(D.cuMemsetD8(b, 0, 256));
    OK(D.cuMemcpy(b, a, 128));
    OK(D.cuMemcpyPeer(b + 128, ctx, a + 128, ctx, 128));
    memset(dst, 0, sizeof dst);
    OK(D.cuMemcpyDtoH_ptds(dst, b, 256));
    CHECK(memcmp(src, dst, 256) == 0);

    OK(D.cuMemsetD8(b, 0, 256));
    OK(D.cuMemcpyHtoDAsync(b, src, 64, s));
    OK(D.cuMemcpyDtoDAsync(b + 64, a + 64, 64, s));
    OK(D.cuMemcpyAsync(b + 128, a + 128, 64, s));
    OK(D.cuMemcpyPeerAsync(b + 192, ctx, a + 192, ctx, 64, s));
    memset(dst, 0, sizeof dst);
    OK(D.cuMemcpyDtoHAsync(dst, b, 256, s));
    OK(D.cuStreamSynchronize(s));
    CHECK(memcmp(src, dst, 256) == 0);

    OK(D.cuMemsetD8(b, 0, 256));
    OK(D.cuMemcpyHtoD_ptds(b, src, 100));
    OK(D.cuMemcpyDtoDAsync_ptsz(b + 100, a + 100, 156, NULL));
    OK(D.cuStreamSynchronize_ptsz(NULL));
    OK(D.cuMemcpyDtoH(dst, b, 256));
    CHECK(memcmp(src, dst, 256) == 0);

    /* 2D: host rows of 16 bytes, 10 used, into a pitched allocation and back. */
    OK(D.cuMemAllocPitch(&p2, &pitch, 10, 4, 4));
    for (int y = 0; y < 4; y++)
        for (int x = 0; x < 16; x++)
            h2d[y][x] = (unsigned char)(16 * y + x);
    {
        CUDA_MEMCPY2D c = { 0 };

        c.srcMemoryType = CU_MEMORYTYPE_HOST;
        c.srcHost = h2d;
        c.srcPitch = 16;
        c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
        c.dstDevice = p2;
        c.dstPitch = pitch;
        c.WidthInBytes = 10;
        c.Height = 4;
        OK(D.cuMemcpy2D(&c));
        memset(back, 0xee, sizeof back);
        c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
        c.srcDevice = p2;
        c.srcPitch = pitch;
        c.dstMemoryType = CU_MEMORYTYPE_HOST;
        c.dstHost = back;
        c.dstPitch = 16;
        OK(D.cuMemcpy2DUnaligned(&c));
        for (int y = 0; y < 4; y++)
            CHECK(memcmp(back[y], h2d[y], 10) == 0 && back[y][10] == 0xee);
        c.srcXInBytes = 2;
        c.srcY = 1;
        c.WidthInBytes = 4;
        c.Height = 2;
        memset(back, 0, sizeof back);
        OK(D.cuMemcpy2DAsync(&c, s));
        OK(D.cuStreamSynchronize(s));
        CHECK(memcmp(back[0], &h2d[1][2], 4) == 0 && memcmp(back[1], &h2d[2][2], 4) == 0);
        c.srcMemoryType = CU_MEMORYTYPE_ARRAY;
        EXPECT(CUDA_ERROR_NOT_SUPPORTED, D.cuMemcpy2D(&c));
        c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
        c.srcPitch = 1;
        EXPECT(CUDA_ERROR_INVALID_VALUE, D.cuMemcpy2D(&c));
    }
    /* 3D: 2 slices of 2 rows of 8 bytes, host pitch 8 and height 2, device pitch 32 height 4. */
    {
        CUDA_MEMCPY3D c = { 0 };
        unsigned char h3[2][2][8], b3[2][2][8];
        CUdeviceptr d3;

        OK(D.cuMemAlloc(&d3, 32 * 4 * 2));
        for (int i = 0; i < 32; i++)
            ((unsigned char *)h3)[i] = (unsigned char)(100 + i);
        c.srcMemoryType = CU_MEMORYTYPE_HOST;
        c.srcHost = h3;
        c.srcPitch = 8;
        c.srcHeight = 2;
        c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
        c.dstDevice = d3;
        c.dstPitch = 32;
        c.dstHeight = 4;
        c.WidthInBytes = 8;
        c.Height = 2;
        c.Depth = 2;
        OK(D.cuMemcpy3D(&c));
        CHECK(((unsigned char *)hp(d3))[32 * 4 + 32] == h3[1][1][0]);
        memset(b3, 0, sizeof b3);
        c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
        c.srcDevice = d3;
        c.srcPitch = 32;
        c.srcHeight = 4;
        c.dstMemoryType = CU_MEMORYTYPE_HOST;
        c.dstHost = b3;
        c.dstPitch = 8;
        c.dstHeight = 2;
        OK(D.cuMemcpy3DAsync(&c, s));
        OK(D.cuStreamSynchronize(s));
        CHECK(memcmp(b3, h3, sizeof h3) == 0);
        OK(D.cuMemFree(d3));
    }
    OK(D.cuMemFree(a));
    OK(D.cuMemFree(b));
    OK(D.cuMemFree(p2));
    OK(D.cuStreamDestroy(s));
}

/* Every memset flavour, including the pitch gaps they must not touch. */
static void test_memsets(void)
{
    CUdeviceptr d;
    unsigned char *h;
    CUstream s;
    int ok = 1;

    OK(D.cuStreamCreate(&s, 0));
    OK(D.cuMemAlloc(&d, 4096));
    h = hp(d);
    OK(D.cuMemsetD8(d, 0xab, 4096));
    for (int i = 0; i < 4096; i++)
        ok &= h[i] == 0xab;
    CHECK(ok);
    OK(D.cuMemsetD16(d, 0x1234, 8));
    CHECK(((uint16_t *)h)[7] == 0x1234 && h[16] == 0xab);
    OK(D.cuMemsetD32(d, 0xcafef00d, 4));
    CHECK(((uint32_t *)h)[3] == 0xcafef00d && h[16] == 0xab);
    OK(D.cuMemsetD32_ptds(d + 64, 5, 1));
    CHECK(((uint32_t *)h)[16] == 5);
    EXPECT(CUDA_ERROR_INVALID_VALUE, D.cuMemsetD16(d + 1, 1, 1));
    EXPECT(CUDA_ERROR_INVALID_VALUE, D.cuMemsetD32(d + 2, 1, 1));
    OK(D.cuMemsetD2D8(d, 64, 0x11, 10, 3));
    CHECK(h[0] == 0x11 && h[9] == 0x11 && h[10] != 0x11 && h[128 + 9] == 0x11 && h[192] != 0x11);
    OK(D.cuMemsetD2D16(d + 256, 64, 0x2222, 4, 2));
    CHECK(((uint16_t *)(h + 256))[3] == 0x2222 && ((uint16_t *)(h + 320))[3] == 0x2222 &&
          h[256 + 8] != 0x22);
    OK(D.cuMemsetD2D32(d + 512, 64, 0x33333333, 2, 2));
    CHECK(((uint32_t *)(h + 576))[1] == 0x33333333 && h[576 + 8] != 0x33);

    OK(D.cuMemsetD8Async(d + 1024, 1, 16, s));
    OK(D.cuMemsetD16Async(d + 1040, 0x0202, 8, s));
    OK(D.cuMemsetD32Async(d + 1056, 0x03030303, 4, s));
    OK(D.cuMemsetD2D8Async(d + 2048, 32, 4, 8, 2, s));
    OK(D.cuMemsetD2D16Async(d + 2112, 32, 0x0505, 4, 2, s));
    OK(D.cuMemsetD2D32Async(d + 2176, 32, 0x06060606, 2, 2, s));
    OK(D.cuStreamSynchronize(s));
    CHECK(h[1024] == 1 && h[1039] == 1 && h[1040] == 2 && h[1055] == 2 && h[1056] == 3 &&
          h[1071] == 3 && h[1072] == 0xab);
    CHECK(h[2048] == 4 && h[2055] == 4 && h[2056] != 4 && h[2080 + 7] == 4);
    CHECK(h[2112] == 5 && h[2119] == 5 && h[2120] != 5 && h[2144 + 7] == 5);
    CHECK(h[2176] == 6 && h[2183] == 6 && h[2184] != 6 && h[2208 + 7] == 6);
    OK(D.cuMemFree(d));
    OK(D.cuStreamDestroy(s));
}

/* ---- kernels ---- */

/* Checks one parameter's offset and size through cuFuncGetParamInfo or cuKernelGetParamInfo. */
static void expect_param(void *handle, int is_kernel, size_t index, size_t off, size_t size)
{
    size_t o = 99, sz = 99;

    if (is_kernel)
        OK(D.cuKernelGetParamInfo((CUkernel)handle, index, &o, &sz));
    else
        OK(D.cuFuncGetParamInfo((CUfunction)handle, index, &o, &sz));
    if (o != off || sz != size) {
        fprintf(stderr, "FAIL: parameter %zu at %zu+%zu, expected %zu+%zu\n", index, o, sz, off,
                size);
        failures++;
    }
}

/* Module and library loading, handles, parameter layouts, names, attributes. */
static void test_kernel_handles(void)
{
    CUmodule mod;
    CUlibrary lib;
    CUkernel k_pair, k_gather;
    CUfunction f;
    const char *name = NULL;
    size_t o, sz;
    int v = 0;

    EXPECT(CUDA_ERROR_FILE_NOT_FOUND, D.cuModuleLoad(&mod, "nope.cubin"));
    EXPECT(CUDA_ERROR_INVALID_IMAGE, D.cuModuleLoadData(&mod, "not an image"));
    OK(D.cuModuleLoadData(&mod, FAKECUDA_MODULE_IMAGE));
    EXPECT(CUDA_ERROR_NOT_FOUND, D.cuModuleGetFunction(&f, mod, "nope"));
    OK(D.cuModuleGetFunction(&f, mod, "axpy_f32"));
    expect_param(f, 0, 0, 0, 8);
    expect_param(f, 0, 1, 8, 8);
    expect_param(f, 0, 2, 16, 4);
    expect_param(f, 0, 3, 24, 8);
    EXPECT(CUDA_ERROR_INVALID_VALUE, D.cuFuncGetParamInfo(f, 4, &o, &sz));
    EXPECT(CUDA_ERROR_INVALID_HANDLE, D.cuKernelGetParamInfo((CUkernel)f, 0, &o, &sz));
    OK(D.cuFuncGetName(&name, f));
    CHECK(name && strcmp(name, "axpy_f32") == 0);
    OK(D.cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f));
    CHECK(v == 1024);
    expect_param(fn_fill, 0, 0, 0, 8);
    expect_param(fn_fill, 0, 1, 8, 4);
    expect_param(fn_fill, 0, 2, 16, 8);
    expect_param(fn_sleep, 0, 0, 0, 4);
    OK(D.cuModuleUnload(mod));

    EXPECT(CUDA_ERROR_INVALID_IMAGE,
           D.cuLibraryLoadData(&lib, "junk", NULL, NULL, 0, NULL, NULL, 0));
    OK(D.cuLibraryLoadData(&lib, FAKECUDA_MODULE_IMAGE, NULL, NULL, 0, NULL, NULL, 0));
    OK(D.cuLibraryGetKernel(&k_pair, lib, "struct_ptrs"));
    OK(D.cuLibraryGetKernel(&k_gather, lib, "gather_ptrs"));
    expect_param(k_pair, 1, 0, 0, 24);
    expect_param(k_pair, 1, 1, 24, 8);
    expect_param(k_gather, 1, 0, 0, 8);
    expect_param(k_gather, 1, 1, 8, 8);
    expect_param(k_gather, 1, 2, 16, 1);
    EXPECT(CUDA_ERROR_INVALID_HANDLE, D.cuFuncGetParamInfo((CUfunction)k_pair, 0, &o, &sz));
    OK(D.cuKernelGetName(&name, k_pair));
    CHECK(name && strcmp(name, "struct_ptrs") == 0);
    EXPECT(CUDA_ERROR_INVALID_HANDLE, D.cuKernelGetName(&name, (CUkernel)fn_fill));
    OK(D.cuKernelGetFunction(&f, k_pair));
    expect_param(f, 0, 1, 24, 8);
    OK(D.cuFuncGetName(&name, f));
    CHECK(name && strcmp(name, "struct_ptrs") == 0);
    OK(D.cuLibraryUnload(lib));
}

/* Every kernel with its data checked, through CUfunction, CUkernel, Ex, cooperative, extra. */
static void test_kernel_launches(void)
{
    enum { N = 1000 };
    CUdeviceptr u, u2, out64, fx, fy, fo, bufs[3], table;
    float *x, *y, *o;
    uint32_t *uh;
    uint64_t sum = 0;
    CUlibrary lib;
    CUkernel k;
    CUstream s;
    int ok = 1;

    OK(D.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    OK(D.cuMemAlloc(&u, N * 4));
    OK(D.cuMemAlloc(&u2, N * 4));
    OK(D.cuMemAlloc(&out64, 8));
    OK(D.cuMemAlloc(&fx, N * 4));
    OK(D.cuMemAlloc(&fy, N * 4));
    OK(D.cuMemAlloc(&fo, N * 4));
    uh = hp(u);
    x = hp(fx);
    y = hp(fy);
    o = hp(fo);

    OK(launch_fill(s, u, 0x01020304, N));
    OK(D.cuStreamSynchronize(s));
    for (int i = 0; i < N; i++)
        ok &= uh[i] == 0x01020304;
    CHECK(ok);

    for (int i = 0; i < N; i++)
        uh[i] = (uint32_t)i;
    {
        struct fakecuda_copy_bytes_params a = { hp(u2), hp(u), N * 4 };
        void *args[] = { &a.dst, &a.src, &a.n };

        OK(D.cuLaunchKernel(fn_copy, 4, 1, 1, 256, 1, 1, 0, s, args, NULL));
    }
    {
        struct fakecuda_sum_u32_params a = { hp(out64), hp(u2), N };
        void *args[] = { &a.out, &a.in, &a.n };

        OK(D.cuLaunchKernel(fn_sum, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
    }
    OK(D.cuMemcpyDtoHAsync(&sum, out64, 8, s));
    OK(D.cuStreamSynchronize(s));
    CHECK(sum == (uint64_t)N * (N - 1) / 2);

    for (int i = 0; i < N; i++) {
        x[i] = (float)i;
        y[i] = 1.0f;
    }
    {
        struct fakecuda_axpy_f32_params a = { hp(fy), hp(fx), 2.0f, N };
        void *args[] = { &a.y, &a.x, &a.a, &a.n };
        CUlaunchConfig cfg = { 2, 1, 1, 512, 1, 1, 0, s, NULL, 0 };

        OK(D.cuLaunchKernelEx(&cfg, fn_axpy, args, NULL));
        OK(D.cuLaunchCooperativeKernel(fn_axpy, 1, 1, 1, 32, 1, 1, 0, s, args));
        OK(D.cuStreamSynchronize(s));
        CHECK(y[10] == 41.0f && y[999] == 1.0f + 4.0f * 999);
    }
    {
        struct fakecuda_struct_ptrs_params a = { { hp(fx), hp(fy), N }, hp(fo) };
        void *args[] = { &a.p, &a.out };

        OK(D.cuLibraryLoadData(&lib, FAKECUDA_MODULE_IMAGE, NULL, NULL, 0, NULL, NULL, 0));
        OK(D.cuLibraryGetKernel(&k, lib, "struct_ptrs"));
        OK(D.cuLaunchKernel((CUfunction)k, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
        OK(D.cuStreamSynchronize(s));
        CHECK(o[3] == x[3] + y[3] && o[999] == x[999] + y[999]);
        OK(D.cuLibraryUnload(lib));
    }
    {
        /* strided_add_f32 over 40 x 25: out row-major, a read transposed, b row-major. */
        struct fakecuda_strided_add_f32_params a;
        void *args[] = { &a.n, &a.it };
        size_t off, size;

        memset(&a, 0, sizeof a);
        a.n = 1000;
        a.it = (struct fakecuda_strided3){ { hp(fo), hp(fx), hp(fy) }, 2, { 25, 40 },
                                           { { 4, 160, 4 }, { 100, 4, 100 } } };
        OK(D.cuFuncGetParamInfo(fn_strided, 1, &off, &size));
        CHECK(off == 8 && size == sizeof(struct fakecuda_strided3) && size == 288);
        OK(D.cuLaunchKernel(fn_strided, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
        OK(D.cuStreamSynchronize(s));
        CHECK(o[0] == x[0] + y[0] && o[1] == x[40] + y[1] && o[26] == x[41] + y[26] &&
              o[999] == x[999] + y[999]);
    }
    {
        struct fakecuda_gather_ptrs_params a;
        void *args[] = { &a.table, &a.count, &a.value };
        void *ptrs[3];

        for (int i = 0; i < 3; i++) {
            OK(D.cuMemAlloc(&bufs[i], 64));
            OK(D.cuMemsetD8(bufs[i], 0, 64));
            ptrs[i] = hp(bufs[i]);
        }
        OK(D.cuMemAlloc(&table, sizeof ptrs));
        OK(D.cuMemcpyHtoD(table, ptrs, sizeof ptrs));
        a.table = hp(table);
        a.count = 3;
        a.value = 0x5a;
        OK(D.cuLaunchKernel(fn_gather, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
        OK(D.cuStreamSynchronize(s));
        for (int i = 0; i < 3; i++) {
            CHECK(((unsigned char *)ptrs[i])[0] == 0x5a && ((unsigned char *)ptrs[i])[1] == 0);
            OK(D.cuMemFree(bufs[i]));
        }
        OK(D.cuMemFree(table));
    }
    {
        /* Parameters are copied at launch: changing them afterwards changes nothing. */
        struct fakecuda_fill_u32_params a = { hp(u), 77, N };
        void *args[] = { &a.dst, &a.value, &a.n };

        OK(launch_sleep(s, 100000));
        OK(D.cuLaunchKernel(fn_fill, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
        a.value = 78;
        OK(D.cuStreamSynchronize(s));
        CHECK(uh[N - 1] == 77);
    }
    {
        /* The packed `extra` blob. */
        struct fakecuda_fill_u32_params a = { hp(u), 99, N };
        size_t size = sizeof a, small = 12;
        void *extra[] = { CU_LAUNCH_PARAM_BUFFER_POINTER, &a, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                          CU_LAUNCH_PARAM_END };
        void *bad[] = { CU_LAUNCH_PARAM_BUFFER_POINTER, &a, CU_LAUNCH_PARAM_BUFFER_SIZE, &small,
                        CU_LAUNCH_PARAM_END };

        OK(D.cuLaunchKernel(fn_fill, 1, 1, 1, 1, 1, 1, 0, s, NULL, extra));
        OK(D.cuStreamSynchronize(s));
        CHECK(uh[0] == 99 && uh[N - 1] == 99);
        EXPECT(CUDA_ERROR_INVALID_VALUE,
               D.cuLaunchKernel(fn_fill, 1, 1, 1, 1, 1, 1, 0, s, NULL, bad));
    }
    {
        /* The per-thread default stream and a timed sleep. */
        double t0 = now_ms();
        uint32_t us = 300000;
        void *args[] = { &us };

        OK(D.cuLaunchKernel_ptsz(fn_sleep, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
        CHECK(now_ms() - t0 < 200);
        EXPECT(CUDA_ERROR_NOT_READY, D.cuStreamQuery_ptsz(NULL));
        OK(D.cuStreamSynchronize(CU_STREAM_PER_THREAD));
        CHECK(now_ms() - t0 >= 290);
    }
    {
        uint32_t us = 0;
        void *args[] = { &us };
        uint32_t fake_handle[8] = { 0 };

        EXPECT(CUDA_ERROR_INVALID_VALUE,
               D.cuLaunchKernel(fn_sleep, 0, 1, 1, 1, 1, 1, 0, s, args, NULL));
        EXPECT(CUDA_ERROR_INVALID_VALUE,
               D.cuLaunchKernel(fn_sleep, 1, 1, 1, 2048, 1, 1, 0, s, args, NULL));
        EXPECT(CUDA_ERROR_INVALID_HANDLE,
               D.cuLaunchKernel((CUfunction)fake_handle, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
    }
    OK(D.cuMemFree(u));
    OK(D.cuMemFree(u2));
    OK(D.cuMemFree(out64));
    OK(D.cuMemFree(fx));
    OK(D.cuMemFree(fy));
    OK(D.cuMemFree(fo));
    OK(D.cuStreamDestroy(s));
}

/* ---- streams and events ---- */

static int order_log[8], order_n;
static CUstream callback_stream;
static CUresult callback_status = CUDA_ERROR_UNKNOWN;

/* Host function: appends its number to order_log. */
static void log_host_fn(void *arg)
{
    order_log[order_n++] = (int)(intptr_t)arg;
}

/* Stream callback: records its stream and status, appends its number. */
static void log_callback(CUstream s, CUresult status, void *arg)
{
    callback_stream = s;
    callback_status = status;
    order_log[order_n++] = (int)(intptr_t)arg;
}

/* Legacy-stream ordering against blocking and non-blocking streams; stream queries. */
/* The kernels a replay test predicts: random numbers from parameters repeat, those from
 * device state do not until the state is put back, and scratch written first does not
 * matter. */
static void test_replay_kernels(void)
{
    enum { N = 512 };
    CUdeviceptr d1, d2, state, src, scratch, out;
    CUfunction fr = fn_rand, fs = fn_rand_state, fq = fn_square_sum;
    CUstream s;
    float *a, *b, *sq;
    uint64_t *st;

    OK(D.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    OK(D.cuMemAlloc(&d1, N * 4));
    OK(D.cuMemAlloc(&d2, N * 4));
    OK(D.cuMemAlloc(&state, 8));
    OK(D.cuMemAlloc(&src, N * 4));
    OK(D.cuMemAlloc(&scratch, N * 4));
    OK(D.cuMemAlloc(&out, 4));
    a = hp(d1);
    b = hp(d2);
    st = hp(state);
    sq = hp(scratch);
    {
        struct fakecuda_rand_f32_params p = { a, N, 7, 100 };
        void *args[] = { &p.dst, &p.n, &p.seed, &p.offset };

        OK(D.cuLaunchKernel(fr, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
        p.dst = b;
        OK(D.cuLaunchKernel(fr, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
        OK(D.cuStreamSynchronize(s));
        CHECK(memcmp(a, b, N * 4) == 0);
        CHECK(a[0] >= 0.0f && a[0] < 1.0f && a[0] != a[1]);
        CHECK(a[5] == fakecuda_rand_f32(7, 105));
        p.offset = 101;
        OK(D.cuLaunchKernel(fr, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
        OK(D.cuStreamSynchronize(s));
        CHECK(b[0] == a[1] && memcmp(a, b, N * 4) != 0);
    }
    {
        struct fakecuda_rand_state_f32_params p = { a, hp(state), N, 9 };
        void *args[] = { &p.dst, &p.state, &p.n, &p.seed };

        *st = 40;
        OK(D.cuLaunchKernel(fs, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
        p.dst = b;
        OK(D.cuLaunchKernel(fs, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
        OK(D.cuStreamSynchronize(s));
        CHECK(*st == 40 + 2 * N && memcmp(a, b, N * 4) != 0);
        CHECK(a[0] == fakecuda_rand_f32(9, 40) && b[0] == fakecuda_rand_f32(9, 40 + N));
        *st = 40;	/* the state put back: the same numbers again */
        OK(D.cuLaunchKernel(fs, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
        OK(D.cuStreamSynchronize(s));
        CHECK(memcmp(a, b, N * 4) == 0 && *st == 40 + N);
    }
    {
        struct fakecuda_square_sum_f32_params p = { hp(out), hp(src), sq, N };
        void *args[] = { &p.dst, &p.src, &p.scratch, &p.n };
        float *in = hp(src), first;

        for (int i = 0; i < N; i++) {
            in[i] = (float)(i % 7) - 3.0f;
            sq[i] = 0.0f;
        }
        OK(D.cuLaunchKernel(fq, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
        OK(D.cuStreamSynchronize(s));
        first = *(float *)hp(out);
        for (int i = 0; i < N; i++)
            sq[i] = 1e30f;	/* what scratch held before does not matter */
        OK(D.cuLaunchKernel(fq, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
        OK(D.cuStreamSynchronize(s));
        CHECK(*(float *)hp(out) == first && first > 0.0f && sq[4] == 1.0f && sq[0] == 9.0f);
    }
    OK(D.cuMemFree(d1));
    OK(D.cuMemFree(d2));
    OK(D.cuMemFree(state));
    OK(D.cuMemFree(src));
    OK(D.cuMemFree(scratch));
    OK(D.cuMemFree(out));
    OK(D.cuStreamDestroy(s));
}

static void test_stream_order(void)
{
    CUdeviceptr x, y, z;
    CUstream sb, sn, sp;
    CUcontext c = NULL;
    unsigned flags = 99;
    double t0;

    OK(D.cuStreamCreate(&sb, 0));
    OK(D.cuStreamCreate(&sn, CU_STREAM_NON_BLOCKING));
    OK(D.cuStreamCreateWithPriority(&sp, 0, -1));
    OK(D.cuMemAlloc(&x, 4));
    OK(D.cuMemAlloc(&y, 4));
    OK(D.cuMemAlloc(&z, 4));
    OK(D.cuMemsetD32(x, 0, 1));
    OK(D.cuMemsetD32(y, 0, 1));
    OK(D.cuMemsetD32(z, 0, 1));

    /* Work on the legacy stream waits for earlier work of a blocking stream. */
    OK(launch_sleep(sb, 200000));
    OK(launch_fill(sb, x, 1, 1));
    OK(D.cuMemcpyDtoDAsync(y, x, 4, NULL));
    CHECK(read_u32(y) == 1);

    /* Later work on a blocking stream waits for the legacy stream. */
    OK(launch_sleep(NULL, 200000));
    OK(launch_fill(CU_STREAM_LEGACY, x, 2, 1));
    OK(D.cuMemcpyDtoDAsync(y, x, 4, sp));
    OK(D.cuStreamSynchronize(sp));
    CHECK(read_u32(y) == 2);

    /* ... and so does the per-thread default stream (a blocking stream). */
    OK(launch_sleep(NULL, 200000));
    OK(launch_fill(NULL, x, 3, 1));
    OK(D.cuMemcpyDtoDAsync_ptsz(y, x, 4, NULL));
    OK(D.cuStreamSynchronize_ptsz(NULL));
    CHECK(read_u32(y) == 3);

    /* A non-blocking stream is exempt both ways. */
    OK(launch_sleep(sn, 400000));
    OK(launch_fill(sn, z, 5, 1));
    t0 = now_ms();
    OK(D.cuMemsetD32Async(y, 7, 1, NULL));
    OK(D.cuStreamSynchronize(NULL));
    CHECK(now_ms() - t0 < 300);
    CHECK(read_u32(y) == 7);
    EXPECT(CUDA_ERROR_NOT_READY, D.cuStreamQuery(sn));
    CHECK(read_u32(z) == 0);
    OK(D.cuStreamSynchronize(sn));
    CHECK(read_u32(z) == 5);
    OK(D.cuStreamQuery(sn));

    /* Streams run concurrently: two 300 ms sleeps take well under 600 ms. */
    t0 = now_ms();
    OK(launch_sleep(sn, 300000));
    OK(launch_sleep(sb, 300000));
    OK(D.cuCtxSynchronize(NULL));
    CHECK(now_ms() - t0 < 550);

    OK(D.cuStreamGetFlags(sn, &flags));
    CHECK(flags == CU_STREAM_NON_BLOCKING);
    OK(D.cuStreamGetFlags(sb, &flags));
    CHECK(flags == 0);
    OK(D.cuStreamGetCtx(sb, &c, NULL));
    CHECK(c == ctx);

    /* Host functions and callbacks run in order on the worker. */
    order_n = 0;
    OK(D.cuLaunchHostFunc(sb, log_host_fn, (void *)1));
    OK(D.cuStreamAddCallback(sb, log_callback, (void *)2, 0));
    OK(D.cuLaunchHostFunc(sb, log_host_fn, (void *)3));
    OK(D.cuStreamSynchronize(sb));
    CHECK(order_n == 3 && order_log[0] == 1 && order_log[1] == 2 && order_log[2] == 3);
    CHECK(callback_stream == sb && callback_status == CUDA_SUCCESS);
    EXPECT(CUDA_ERROR_INVALID_VALUE, D.cuStreamAddCallback(sb, log_callback, NULL, 1));

    /* Destroying a stream lets its queued work finish; the handle dies at once. */
    OK(launch_sleep(sp, 100000));
    OK(launch_fill(sp, z, 6, 1));
    OK(D.cuStreamDestroy(sp));
    EXPECT(CUDA_ERROR_INVALID_HANDLE, D.cuStreamQuery(sp));
    OK(D.cuCtxSynchronize(NULL));
    CHECK(read_u32(z) == 6);

    OK(D.cuStreamDestroy(sb));
    OK(D.cuStreamDestroy(sn));
    OK(D.cuMemFree(x));
    OK(D.cuMemFree(y));
    OK(D.cuMemFree(z));
}

/* Event records, queries, timing and cross-stream waits. */
static void test_events(void)
{
    PFN_cuEventElapsedTime_v2000 elapsed_v1;
    CUevent e1, e2, e3, notime;
    CUdeviceptr x, y;
    CUstream s1, s2;
    float ms = 0;
    double t0;

    OK(D.cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
    OK(D.cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    OK(D.cuEventCreate(&e1, 0));
    OK(D.cuEventCreate(&e2, CU_EVENT_BLOCKING_SYNC));
    OK(D.cuEventCreate(&e3, 0));
    OK(D.cuEventCreate(&notime, CU_EVENT_DISABLE_TIMING));
    OK(D.cuMemAlloc(&x, 4));
    OK(D.cuMemAlloc(&y, 4));
    OK(D.cuMemsetD32(x, 0, 1));
    OK(D.cuMemsetD32(y, 0, 1));

    OK(D.cuEventQuery(e1));
    EXPECT(CUDA_ERROR_INVALID_HANDLE, D.cuEventElapsedTime(&ms, e1, e2));
    OK(D.cuEventRecord(e1, s1));
    OK(launch_sleep(s1, 150000));
    OK(D.cuEventRecordWithFlags(e2, s1, 0));
    EXPECT(CUDA_ERROR_NOT_READY, D.cuEventQuery(e2));
    EXPECT(CUDA_ERROR_NOT_READY, D.cuEventElapsedTime(&ms, e1, e2));
    OK(D.cuEventSynchronize(e2));
    OK(D.cuEventQuery(e2));
    OK(D.cuEventElapsedTime(&ms, e1, e2));
    CHECK(ms >= 140 && ms < 2000);
    OK(D.cuGetProcAddress("cuEventElapsedTime", (void **)&elapsed_v1, 12000, 0, NULL));
    ms = 0;
    OK(elapsed_v1(&ms, e1, e2));
    CHECK(ms >= 140);
    OK(D.cuEventRecord(notime, s1));
    OK(D.cuEventSynchronize(notime));
    EXPECT(CUDA_ERROR_INVALID_HANDLE, D.cuEventElapsedTime(&ms, e1, notime));

    /* s2 waits for s1's record, not for s1's later work. */
    OK(launch_sleep(s1, 200000));
    OK(launch_fill(s1, x, 9, 1));
    OK(D.cuEventRecord(e3, s1));
    OK(D.cuStreamWaitEvent(s2, e3, 0));
    OK(D.cuMemcpyDtoDAsync(y, x, 4, s2));
    t0 = now_ms();
    OK(launch_sleep(s1, 600000));
    OK(D.cuEventRecord(e3, s1));
    OK(D.cuStreamSynchronize(s2));
    CHECK(read_u32(y) == 9);
    CHECK(now_ms() - t0 < 500);
    EXPECT(CUDA_ERROR_NOT_READY, D.cuEventQuery(e3));
    OK(D.cuEventSynchronize(e3));

    OK(D.cuEventDestroy(e1));
    OK(D.cuEventDestroy(e2));
    OK(D.cuEventDestroy(e3));
    OK(D.cuEventDestroy(notime));
    OK(D.cuMemFree(x));
    OK(D.cuMemFree(y));
    OK(D.cuStreamDestroy(s1));
    OK(D.cuStreamDestroy(s2));
}

/* ---- faults in child processes ---- */

/*
 * Forks; the child sends stderr to a pipe and runs fn(arg) (which should not return; a
 * child still alive after 60 s dies of SIGALRM). Gives its wait status and what it printed.
 */
static int fork_and_capture(void (*fn)(void *), void *arg, char *out, size_t outsize)
{
    int fds[2], status = 0;
    size_t len = 0;
    ssize_t n;
    pid_t pid;

    if (pipe(fds) != 0)
        return -1;
    fflush(NULL);
    pid = fork();
    if (pid == 0) {
        alarm(60);
        dup2(fds[1], STDERR_FILENO);
        close(fds[0]);
        close(fds[1]);
        fn(arg);
        _exit(0);
    }
    close(fds[1]);
    while (len + 1 < outsize && (n = read(fds[0], out + len, outsize - 1 - len)) > 0)
        len += (size_t)n;
    out[len] = '\0';
    close(fds[0]);
    waitpid(pid, &status, 0);
    return status;
}

/* Child: touches the device address directly from this (non-worker) thread. */
static void touch_directly(void *arg)
{
    *(volatile uint32_t *)arg = 1;
}

/* Child: lets a kernel touch the device address. */
static void touch_with_kernel(void *arg)
{
    launch_fill(NULL, (CUdeviceptr)(uintptr_t)arg, 1, 1);
    D.cuCtxSynchronize(NULL);
}

/* Checks that fn(addr) in a child dies of SIGSEGV or SIGABRT (and names the op if `what`). */
static void expect_fault(void (*fn)(void *), CUdeviceptr addr, const char *what)
{
    char out[4096];
    int st = fork_and_capture(fn, hp(addr), out, sizeof out);

    if (!WIFSIGNALED(st) || (WTERMSIG(st) != SIGSEGV && WTERMSIG(st) != SIGABRT)) {
        fprintf(stderr, "FAIL: access to %#llx did not fault (status %#x)\n",
                (unsigned long long)addr, st);
        failures++;
    }
    if (what && (!strstr(out, "fakecuda: fault at 0x") || !strstr(out, what))) {
        fprintf(stderr, "FAIL: fault report lacks '%s': %s\n", what, out);
        failures++;
    }
}

/* ---- VMM ---- */

/* Reserve, create, map, access, unmap, release, free; errors; faults after unmap. */
static void test_vmm(void)
{
    const size_t g = (size_t)2 << 20;
    CUmemAllocationProp prop = { 0 };
    CUmemAccessDesc acc = { { CU_MEM_LOCATION_TYPE_DEVICE, 0 }, CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
    CUmemLocation loc = { CU_MEM_LOCATION_TYPE_DEVICE, 0 };
    CUmemGenericAllocationHandle h, h2, bad;
    struct fakecuda_stats st0, st1;
    unsigned long long aflags = 0;
    size_t gran = 0, size = 0;
    CUdeviceptr va, base;

    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    D.stats(&st0);
    OK(D.cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    CHECK(gran == g);
    OK(D.cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
    CHECK(gran == g);
    EXPECT(CUDA_ERROR_INVALID_VALUE, D.cuMemAddressReserve(&va, g + 1, 0, 0, 0));
    OK(D.cuMemAddressReserve(&va, 4 * g, 0, 0, 0));
    CHECK(va % g == 0);
    EXPECT(CUDA_ERROR_INVALID_VALUE, D.cuMemCreate(&bad, g / 2, &prop, 0));
    OK(D.cuMemCreate(&h, 2 * g, &prop, 0));
    D.stats(&st1);
    CHECK(st1.live_phys_handles == st0.live_phys_handles + 1);
    CHECK(st1.device_bytes_in_use == st0.device_bytes_in_use + 2 * g);
    OK(D.cuMemMap(va, 2 * g, 0, h, 0));
    EXPECT(CUDA_ERROR_NOT_SUPPORTED, D.cuMemMap(va + g, 2 * g, 0, h, 0));
    EXPECT(CUDA_ERROR_INVALID_VALUE, D.cuMemMap(va + 2 * g, g + 4096, 0, h, 0));
    EXPECT(CUDA_ERROR_INVALID_VALUE, D.cuMemMap(va + 8 * g, g, 0, h, 0));
    EXPECT(CUDA_ERROR_NOT_SUPPORTED, D.cuMemMap(va + 2 * g, g, g, h, 0));
    EXPECT(CUDA_ERROR_NOT_SUPPORTED, D.cuMemMap(va + 2 * g, g, 0, h, 0));
    OK(D.cuMemUnmap(va + 2 * g, g));
    EXPECT(CUDA_ERROR_INVALID_VALUE, D.cuMemUnmap(va, g));
    EXPECT(CUDA_ERROR_INVALID_VALUE, D.cuMemUnmap(va + 8 * g, g));
    EXPECT(CUDA_ERROR_INVALID_VALUE, D.cuMemAddressFree(va, 4 * g));
    expect_fault(touch_directly, va, NULL);
    OK(D.cuMemSetAccess(va, 2 * g, &acc, 1));
    OK(D.cuMemGetAccess(&aflags, &loc, va + 5));
    CHECK(aflags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    OK(launch_fill(NULL, va, 0xabcd, 2 * g / 4));
    CHECK(read_u32(va + 2 * g - 4) == 0xabcd);
    OK(D.cuMemGetAddressRange(&base, &size, va + 12345));
    CHECK(base == va && size == 2 * g);

    OK(D.cuMemRelease(h));
    EXPECT(CUDA_ERROR_INVALID_VALUE, D.cuMemRelease(h));
    D.stats(&st1);
    CHECK(st1.live_phys_handles == st0.live_phys_handles + 1);
    CHECK(read_u32(va) == 0xabcd);
    OK(D.cuMemUnmap(va, 2 * g));
    D.stats(&st1);
    CHECK(st1.live_phys_handles == st0.live_phys_handles);
    CHECK(st1.device_bytes_in_use == st0.device_bytes_in_use);
    CHECK(st1.mem_create_calls == st0.mem_create_calls + 2);
    CHECK(st1.mem_map_calls == st0.mem_map_calls + 6);
    CHECK(st1.mem_unmap_calls == st0.mem_unmap_calls + 4);
    expect_fault(touch_directly, va + 64, NULL);
    expect_fault(touch_with_kernel, va + 64, "cuLaunchKernel fill_u32 on stream legacy");

    /* A fresh handle at the same address, then two mappings unmapped at once. */
    OK(D.cuMemCreate(&h, g, &prop, 0));
    OK(D.cuMemCreate(&h2, g, &prop, 0));
    OK(D.cuMemMap(va, g, 0, h, 0));
    OK(D.cuMemMap(va + g, g, 0, h2, 0));
    OK(D.cuMemSetAccess(va, 2 * g, &acc, 1));
    CHECK(read_u32(va) == 0);
    OK(launch_fill(NULL, va, 3, 2 * g / 4));
    CHECK(read_u32(va + g) == 3);
    OK(D.cuMemUnmap(va, 4 * g));
    OK(D.cuMemRelease(h));
    OK(D.cuMemRelease(h2));
    EXPECT(CUDA_ERROR_INVALID_VALUE, D.cuMemAddressFree(va, g));
    OK(D.cuMemAddressFree(va, 4 * g));
    D.stats(&st1);
    CHECK(st1.live_phys_handles == st0.live_phys_handles);
    CHECK(st1.device_bytes_in_use == st0.device_bytes_in_use);
}

/* A kernel touching freed device memory faults with a report. */
static void test_use_after_free(void)
{
    CUdeviceptr d;

    OK(D.cuMemAlloc(&d, 4096));
    OK(D.cuMemFree(d));
    expect_fault(touch_with_kernel, d, "fill_u32");
}

/* ---- capture and graphs ---- */

static int graph_host_runs;

/* Host function captured into a graph. */
static void count_graph_run(void *arg)
{
    (void)arg;
    graph_host_runs++;
}

/* Capture of launches, copies, memsets and host functions; graph instantiate and launch. */
static void test_capture(void)
{
    enum { N = 256 };
    CUdeviceptr dx, dy, dz;
    CUstreamCaptureStatus cs;
    const CUgraphNode *deps = (const CUgraphNode *)1;
    const CUgraphEdgeData *edges = (const CUgraphEdgeData *)1;
    size_t ndeps = 9;
    cuuint64_t id = 0;
    CUgraph g = NULL, g2 = NULL;
    CUgraphExec x;
    CUstream s, s2;
    uint32_t word;
    float *y;

    OK(D.cuStreamCreate(&s, 0));
    OK(D.cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    OK(D.cuMemAlloc(&dx, N * 4));
    OK(D.cuMemAlloc(&dy, N * 4));
    OK(D.cuMemAlloc(&dz, N * 4));
    y = hp(dy);
    for (int i = 0; i < N; i++) {
        ((float *)hp(dx))[i] = (float)i;
        y[i] = 0.0f;
    }
    OK(D.cuMemsetD32(dz, 0, N));

    EXPECT(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
           D.cuStreamBeginCapture(NULL, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(D.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    EXPECT(CUDA_ERROR_ILLEGAL_STATE, D.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(D.cuStreamIsCapturing(s, &cs));
    CHECK(cs == CU_STREAM_CAPTURE_STATUS_ACTIVE);
    OK(D.cuStreamGetCaptureInfo(s, &cs, &id, &g, &deps, &edges, &ndeps));
    CHECK(cs == CU_STREAM_CAPTURE_STATUS_ACTIVE && id != 0 && g != NULL && deps == NULL &&
          edges == NULL && ndeps == 0);
    {
        struct fakecuda_axpy_f32_params a = { hp(dy), hp(dx), 2.0f, N };
        void *args[] = { &a.y, &a.x, &a.a, &a.n };

        OK(D.cuLaunchKernel(fn_axpy, 1, 1, 1, 256, 1, 1, 0, s, args, NULL));
    }
    OK(D.cuMemsetD32Async(dz, 1, N / 2, s));
    OK(D.cuMemcpyDtoDAsync(dz + N * 2, dz, N * 2, s));
    OK(D.cuLaunchHostFunc(s, count_graph_run, NULL));
    OK(D.cuMemcpyDtoHAsync(&word, dz, 4, s2));
    OK(D.cuMemGetAddressRange(NULL, NULL, dz));
    usleep(100000);
    CHECK(y[5] == 0.0f && ((uint32_t *)hp(dz))[0] == 0 && graph_host_runs == 0);
    OK(D.cuStreamEndCapture(s, &g));
    CHECK(g != NULL);
    OK(D.cuStreamSynchronize(s2));
    CHECK(word == 0);
    OK(D.cuStreamIsCapturing(s, &cs));
    CHECK(cs == CU_STREAM_CAPTURE_STATUS_NONE);
    EXPECT(CUDA_ERROR_ILLEGAL_STATE, D.cuStreamEndCapture(s, &g2));

    OK(D.cuGraphInstantiateWithFlags(&x, g, 0));
    OK(D.cuGraphUpload(x, s));
    OK(D.cuGraphLaunch(x, s));
    OK(D.cuStreamSynchronize(s));
    OK(D.cuGraphLaunch(x, s2));
    OK(D.cuStreamSynchronize(s2));
    CHECK(y[5] == 20.0f && y[N - 1] == 4.0f * (N - 1));
    CHECK(read_u32(dz + 4) == 1 && read_u32(dz + N * 2 + 4) == 1);
    CHECK(graph_host_runs == 2);
    OK(D.cuGraphExecDestroy(x));
    OK(D.cuGraphDestroy(g));

    /* Capture on the per-thread default stream through the _ptsz entry points. */
    OK(D.cuStreamBeginCapture_ptsz(NULL, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    OK(D.cuMemcpyDtoDAsync_ptsz(dz, dx, 4, NULL));
    OK(D.cuStreamEndCapture_ptsz(NULL, &g));
    OK(D.cuGraphInstantiateWithFlags(&x, g, 0));
    OK(D.cuGraphLaunch_ptsz(x, NULL));
    OK(D.cuStreamSynchronize_ptsz(NULL));
    CHECK(*(float *)hp(dz) == 0.0f && read_u32(dz + 4) == 1);
    OK(D.cuGraphExecDestroy(x));
    OK(D.cuGraphDestroy(g));

    OK(D.cuMemFree(dx));
    OK(D.cuMemFree(dy));
    OK(D.cuMemFree(dz));
    OK(D.cuStreamDestroy(s));
    OK(D.cuStreamDestroy(s2));
}

/* Thread body: a cuMemAlloc (and free) from a thread that did not begin the capture. */
static void *alloc_in_thread(void *arg)
{
    CUdeviceptr d;
    CUresult rc;

    OK(D.cuCtxSetCurrent(ctx));
    rc = D.cuMemAlloc(&d, 64);
    if (rc == CUDA_SUCCESS)
        OK(D.cuMemFree(d));
    *(CUresult *)arg = rc;
    return NULL;
}

/* Runs alloc_in_thread in a new thread; gives cuMemAlloc's result. */
static CUresult alloc_elsewhere(void)
{
    CUresult rc = CUDA_ERROR_UNKNOWN;
    pthread_t t;

    pthread_create(&t, NULL, alloc_in_thread, &rc);
    pthread_join(t, NULL);
    return rc;
}

/* Ends a capture that must have been invalidated: no graph, status none afterwards. */
static void expect_invalidated(CUstream s)
{
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_ACTIVE;
    CUgraph g = (CUgraph)1;

    OK(D.cuStreamIsCapturing(s, &cs));
    CHECK(cs == CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    EXPECT(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, D.cuStreamEndCapture(s, &g));
    CHECK(g == NULL);
    OK(D.cuStreamIsCapturing(s, &cs));
    CHECK(cs == CU_STREAM_CAPTURE_STATUS_NONE);
}

/*
 * Calls a capture cannot take invalidate it, with the driver's codes (measured on
 * 580.159.04): unsafe calls by capture mode and thread, the legacy stream against a capturing
 * blocking stream, synchronising or querying the capturing stream, cuCtxSynchronize.
 */
static void test_capture_invalidation(void)
{
    CUdeviceptr d, tmp;
    unsigned char byte = 0;
    uint32_t us = 0;
    void *args[] = { &us };
    CUstream sb, sn;

    OK(D.cuStreamCreate(&sb, 0));
    OK(D.cuStreamCreate(&sn, CU_STREAM_NON_BLOCKING));
    OK(D.cuMemAlloc(&d, 64));

    OK(D.cuStreamBeginCapture(sn, CU_STREAM_CAPTURE_MODE_GLOBAL));
    EXPECT(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, D.cuStreamSynchronize(sn));
    EXPECT(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,
           D.cuLaunchKernel(fn_sleep, 1, 1, 1, 1, 1, 1, 0, sn, args, NULL));
    expect_invalidated(sn);

    OK(D.cuStreamBeginCapture(sn, CU_STREAM_CAPTURE_MODE_GLOBAL));
    EXPECT(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, alloc_elsewhere());
    expect_invalidated(sn);

    OK(D.cuStreamBeginCapture(sn, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    OK(alloc_elsewhere());
    EXPECT(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, D.cuMemAlloc(&tmp, 64));
    expect_invalidated(sn);

    OK(D.cuStreamBeginCapture(sn, CU_STREAM_CAPTURE_MODE_RELAXED));
    OK(D.cuMemAlloc(&tmp, 64));
    OK(D.cuMemFree(tmp));
    OK(D.cuMemcpyDtoH(&byte, d, 1));
    /* on the capturing stream itself: graph memory nodes, the capture still valid; one
     * the graph does not free holds what the launch wrote */
    {
        CUgraph g = NULL;
        CUgraphExec ge = NULL;
        CUdeviceptr kept;
        unsigned char got[64];
        OK(D.cuMemAllocAsync(&tmp, 64, sn));
        OK(D.cuMemAllocAsync(&kept, 64, sn));
        OK(D.cuMemsetD8Async(tmp, 7, 64, sn));
        OK(D.cuMemcpyDtoDAsync(kept, tmp, 64, sn));
        OK(D.cuMemFreeAsync(tmp, sn));
        OK(D.cuStreamEndCapture(sn, &g));
        CHECK(g != NULL);
        OK(D.cuGraphInstantiateWithFlags(&ge, g, 0));
        OK(D.cuGraphLaunch(ge, sn));
        OK(D.cuStreamSynchronize(sn));
        OK(D.cuMemcpyDtoH(got, kept, sizeof got));
        CHECK(got[0] == 7 && got[63] == 7);
        OK(D.cuMemFree(kept));
        OK(D.cuGraphExecDestroy(ge));
        OK(D.cuGraphDestroy(g));
    }

    OK(D.cuStreamBeginCapture(sn, CU_STREAM_CAPTURE_MODE_RELAXED));
    EXPECT(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, D.cuCtxSynchronize(NULL));
    expect_invalidated(sn);

    OK(D.cuStreamBeginCapture(sn, CU_STREAM_CAPTURE_MODE_RELAXED));
    EXPECT(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, D.cuStreamAddCallback(sn, log_callback, NULL, 0));
    expect_invalidated(sn);

    OK(D.cuStreamBeginCapture(sb, CU_STREAM_CAPTURE_MODE_RELAXED));
    EXPECT(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, D.cuMemsetD8(d, 0, 1));
    expect_invalidated(sb);

    OK(D.cuStreamBeginCapture(sb, CU_STREAM_CAPTURE_MODE_RELAXED));
    EXPECT(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, D.cuStreamQuery(sb));
    expect_invalidated(sb);

    OK(D.cuMemFree(d));
    OK(D.cuStreamDestroy(sb));
    OK(D.cuStreamDestroy(sn));
}

/*
 * A thread's own interaction mode (cuThreadExchangeStreamCaptureMode): relaxed, its unsafe
 * calls neither fail nor invalidate the global capture it began; a stream
 * that waits on an event recorded in a capture joins it, is reported capturing, and its work
 * lands in the graph, in issue order; its work never waited for ends the capture unjoined.
 */
static void test_capture_join(void)
{
    CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
    CUstreamCaptureStatus cs;
    CUstream s, side;
    CUevent fork, join;
    CUdeviceptr d, tmp;
    CUgraph g;
    CUgraphExec x;

    OK(D.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    OK(D.cuStreamCreate(&side, CU_STREAM_NON_BLOCKING));
    OK(D.cuEventCreate(&fork, CU_EVENT_DISABLE_TIMING));
    OK(D.cuEventCreate(&join, CU_EVENT_DISABLE_TIMING));
    OK(D.cuMemAlloc(&d, 2 * 64 * 4));
    OK(launch_fill(s, d, 0, 128));
    OK(D.cuStreamSynchronize(s));

    EXPECT(CUDA_ERROR_INVALID_VALUE, D.cuThreadExchangeStreamCaptureMode(NULL));
    OK(D.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(D.cuThreadExchangeStreamCaptureMode(&m));
    CHECK(m == CU_STREAM_CAPTURE_MODE_GLOBAL);
    OK(D.cuMemAlloc(&tmp, 64));
    OK(D.cuMemFree(tmp));
    OK(D.cuThreadExchangeStreamCaptureMode(&m));
    CHECK(m == CU_STREAM_CAPTURE_MODE_RELAXED);
    OK(D.cuEventRecord(fork, s));
    OK(D.cuStreamIsCapturing(side, &cs));
    CHECK(cs == CU_STREAM_CAPTURE_STATUS_NONE);
    OK(D.cuStreamWaitEvent(side, fork, 0));
    OK(D.cuStreamIsCapturing(side, &cs));
    CHECK(cs == CU_STREAM_CAPTURE_STATUS_ACTIVE);
    OK(launch_fill(s, d, 5, 64));
    OK(launch_fill(side, d + 64 * 4, 6, 64));
    EXPECT(CUDA_ERROR_STREAM_CAPTURE_UNMATCHED, D.cuStreamEndCapture(side, &g));
    OK(D.cuEventRecord(join, side));
    OK(D.cuStreamWaitEvent(s, join, 0));
    OK(D.cuStreamEndCapture(s, &g));
    CHECK(g != NULL);
    OK(D.cuStreamIsCapturing(side, &cs));
    CHECK(cs == CU_STREAM_CAPTURE_STATUS_NONE);
    CHECK(((uint32_t *)hp(d))[0] == 0 && ((uint32_t *)hp(d))[64] == 0);
    OK(D.cuGraphInstantiateWithFlags(&x, g, 0));
    OK(D.cuGraphLaunch(x, s));
    OK(D.cuStreamSynchronize(s));
    CHECK(((uint32_t *)hp(d))[0] == 5 && ((uint32_t *)hp(d))[64] == 6);
    OK(D.cuGraphExecDestroy(x));
    OK(D.cuGraphDestroy(g));

    OK(D.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(D.cuEventRecord(fork, s));
    OK(D.cuStreamWaitEvent(side, fork, 0));
    OK(launch_fill(side, d, 7, 64));
    EXPECT(CUDA_ERROR_STREAM_CAPTURE_UNJOINED, D.cuStreamEndCapture(s, &g));
    OK(D.cuStreamIsCapturing(s, &cs));
    CHECK(cs == CU_STREAM_CAPTURE_STATUS_NONE);
    OK(D.cuStreamIsCapturing(side, &cs));
    CHECK(cs == CU_STREAM_CAPTURE_STATUS_NONE);

    OK(D.cuMemFree(d));
    OK(D.cuEventDestroy(fork));
    OK(D.cuEventDestroy(join));
    OK(D.cuStreamDestroy(side));
    OK(D.cuStreamDestroy(s));
}

/*
 * The capture matrix measured on the driver (580.159.04): for each call, what happens to a
 * capture on a non-blocking stream when the call is made during it, in global, thread-local
 * and relaxed mode, from another thread and from the capturing thread ("GgTtRr": upper case
 * another thread). 'x': CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and the capture invalidated;
 * '.': the call works and the capture goes on.
 */
static const struct {
    const char *name;
    const char *outcome; /* G g T t R r */
} capture_matrix[] = {
    { "cuMemAlloc", "xx.x.." },         { "cuMemFree", "xx.x.." },
    { "cuMemCreate", "......" },        { "cuMemMap", "......" },
    { "cuMemSetAccess", "......" },     { "cuMemUnmap", "......" },
    { "cuMemRelease", "......" },       { "cuMemHostAlloc", "xx.x.." },
    { "cuMemAllocAsync", "xx.x.." },    { "cuMemcpyDtoHAsync", "......" },
    { "cuStreamSynchronize", "xx.x.." }, { "cuEventQuery", "xx.x.." },
    { "cuCtxSynchronize", "xxxxxx" },   { "cuMemcpyDtoH", "......" },
    { "cuMemHostRegister", "xx.x.." },  { "cuMemAddressReserve", "......" },
    { "cuEventSynchronize", "xx.x.." }, { "cuMemGetInfo", "......" },
    { "cuMemFreeAsync", "xx.x.." },     { "cuMemAllocHost", "xx.x.." },
};

/* What one matrix call works on: made before the capture, released after it. */
static struct {
    CUstream other;
    CUevent ev;
    CUdeviceptr buf, va;
    CUmemGenericAllocationHandle handle;
    int call;
} mx;

/* Makes matrix call mx.call; gives its result. */
static CUresult matrix_call(void)
{
    CUmemAllocationProp pr = { 0 };
    CUmemAccessDesc acc = { { CU_MEM_LOCATION_TYPE_DEVICE, 0 }, CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
    const size_t g = (size_t)2 << 20;
    CUmemGenericAllocationHandle h;
    static char host[8192];
    CUdeviceptr d;
    size_t f, t;
    void *p;
    CUresult rc;

    pr.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    pr.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    switch (mx.call) {
    case 0: rc = D.cuMemAlloc(&d, 64); return rc == CUDA_SUCCESS ? D.cuMemFree(d) : rc;
    case 1: return D.cuMemFree(mx.buf);
    case 2: rc = D.cuMemCreate(&h, g, &pr, 0); return rc == CUDA_SUCCESS ? D.cuMemRelease(h) : rc;
    case 3: return D.cuMemMap(mx.va, g, 0, mx.handle, 0);
    case 4: return D.cuMemSetAccess(mx.va, g, &acc, 1);
    case 5: return D.cuMemUnmap(mx.va, g);
    case 6: return D.cuMemRelease(mx.handle);
    case 7: rc = D.cuMemHostAlloc(&p, 4096, 0); return rc == CUDA_SUCCESS ? D.cuMemFreeHost(p) : rc;
    case 8: rc = D.cuMemAllocAsync(&d, 64, mx.other);
            return rc == CUDA_SUCCESS ? D.cuMemFreeAsync(d, mx.other) : rc;
    case 9: return D.cuMemcpyDtoHAsync(host, mx.buf, 8, mx.other);
    case 10: return D.cuStreamSynchronize(mx.other);
    case 11: rc = D.cuEventQuery(mx.ev); return rc == CUDA_ERROR_NOT_READY ? CUDA_SUCCESS : rc;
    case 12: return D.cuCtxSynchronize(NULL);
    case 13: return D.cuMemcpyDtoH(host, mx.buf, 8);
    case 14: rc = D.cuMemHostRegister(host, sizeof host, 0);
             return rc == CUDA_SUCCESS ? D.cuMemHostUnregister(host) : rc;
    case 15: rc = D.cuMemAddressReserve(&d, g, 0, 0, 0);
             return rc == CUDA_SUCCESS ? D.cuMemAddressFree(d, g) : rc;
    case 16: return D.cuEventSynchronize(mx.ev);
    case 17: return D.cuMemGetInfo(&f, &t);
    case 18: return D.cuMemFreeAsync(mx.buf, mx.other);
    default: rc = D.cuMemAllocHost(&p, 4096); return rc == CUDA_SUCCESS ? D.cuMemFreeHost(p) : rc;
    }
}

/* Thread body: makes the matrix call with the primary context current. */
static void *matrix_thread(void *arg)
{
    OK(D.cuCtxSetCurrent(ctx));
    *(CUresult *)arg = matrix_call();
    return NULL;
}

/* Runs the capture matrix and compares every outcome with the driver's. */
static void test_capture_matrix(void)
{
    static const CUstreamCaptureMode modes[] = { CU_STREAM_CAPTURE_MODE_GLOBAL,
                                                 CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
                                                 CU_STREAM_CAPTURE_MODE_RELAXED };
    CUmemAllocationProp pr = { 0 };
    CUmemAccessDesc acc = { { CU_MEM_LOCATION_TYPE_DEVICE, 0 }, CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
    const size_t g = (size_t)2 << 20;
    CUstream s;

    pr.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    pr.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    OK(D.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    OK(D.cuStreamCreate(&mx.other, CU_STREAM_NON_BLOCKING));
    OK(D.cuEventCreate(&mx.ev, 0));
    for (int col = 0; col < 6; col++) {
        for (mx.call = 0; mx.call < (int)(sizeof capture_matrix / sizeof capture_matrix[0]);
             mx.call++) {
            CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
            int invalid = capture_matrix[mx.call].outcome[col] == 'x';
            CUresult rc = CUDA_ERROR_UNKNOWN, end;
            CUgraph graph = NULL;

            OK(D.cuMemAlloc(&mx.buf, 4096));
            OK(D.cuMemAddressReserve(&mx.va, g, 0, 0, 0));
            OK(D.cuMemCreate(&mx.handle, g, &pr, 0));
            if (mx.call == 4 || mx.call == 5) {
                OK(D.cuMemMap(mx.va, g, 0, mx.handle, 0));
                OK(D.cuMemSetAccess(mx.va, g, &acc, 1));
            }
            OK(D.cuEventRecord(mx.ev, mx.other));
            OK(D.cuStreamBeginCapture(s, modes[col / 2]));
            if (col % 2 == 0) {
                pthread_t t;

                pthread_create(&t, NULL, matrix_thread, &rc);
                pthread_join(t, NULL);
            } else {
                rc = matrix_call();
            }
            OK(D.cuStreamIsCapturing(s, &cs));
            end = D.cuStreamEndCapture(s, &graph);
            if ((invalid && (rc != CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED ||
                             cs != CU_STREAM_CAPTURE_STATUS_INVALIDATED ||
                             end != CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)) ||
                (!invalid && (rc != CUDA_SUCCESS || cs != CU_STREAM_CAPTURE_STATUS_ACTIVE ||
                              end != CUDA_SUCCESS))) {
                fprintf(stderr, "FAIL: capture matrix %s, column %c: rc %d status %d end %d\n",
                        capture_matrix[mx.call].name, "GgTtRr"[col], (int)rc, (int)cs, (int)end);
                failures++;
            }
            if (graph)
                OK(D.cuGraphDestroy(graph));
            if ((mx.call == 1 || mx.call == 18) && rc == CUDA_SUCCESS)
                mx.buf = 0;
            OK(D.cuStreamSynchronize(mx.other));
            if (mx.call == 3 || mx.call == 4 || mx.call == 5)
                D.cuMemUnmap(mx.va, g);
            if (mx.call != 6 || rc != CUDA_SUCCESS)
                OK(D.cuMemRelease(mx.handle));
            OK(D.cuMemAddressFree(mx.va, g));
            if (mx.buf)
                OK(D.cuMemFree(mx.buf));
        }
    }
    OK(D.cuEventDestroy(mx.ev));
    OK(D.cuStreamDestroy(mx.other));
    OK(D.cuStreamDestroy(s));
}

/* ---- child processes for the environment ---- */

/*
 * Runs this program again with `mode` and the given NAME=VALUE settings (killed by SIGALRM
 * after 60 s); gives its wait status and what it printed on stderr.
 */
static int run_mode(const char *mode, const char *const *env, char *out, size_t outsize)
{
    int fds[2], status = 0;
    size_t len = 0;
    ssize_t n;
    pid_t pid;

    if (pipe(fds) != 0)
        return -1;
    fflush(NULL);
    pid = fork();
    if (pid == 0) {
        char *argv[] = { "selftest", (char *)mode, NULL };

        alarm(60);
        dup2(fds[1], STDERR_FILENO);
        close(fds[0]);
        close(fds[1]);
        for (; env && *env; env++)
            putenv((char *)*env);
        execv("/proc/self/exe", argv);
        _exit(127);
    }
    close(fds[1]);
    while (len + 1 < outsize && (n = read(fds[0], out + len, outsize - 1 - len)) > 0)
        len += (size_t)n;
    out[len] = '\0';
    close(fds[0]);
    waitpid(pid, &status, 0);
    return status;
}

/* Checks that a mode exited 0, printing its output if not. */
static void expect_mode_ok(const char *mode, const char *const *env)
{
    char out[8192];
    int st = run_mode(mode, env, out, sizeof out);

    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "FAIL: mode %s (status %#x):\n%s", mode, st, out);
        failures++;
    }
}

/* The environment variables, each in a fresh process. */
static void test_environment(void)
{
    static const char *const fail_env[] = {
        "FAKECUDA_FAIL=cuInit:1:0,cuMemAlloc:2:1,cuMemCreate:1=CUDA_ERROR_INVALID_VALUE,"
        "cuLaunchKernel:3=700", NULL
    };
    static const char *const bad_env[] = { "FAKECUDA_FAIL=cuNoSuchCall:1", NULL };
    static const char *const novmm_env[] = { "FAKECUDA_NO_VMM=1", NULL };
    static const char *const verbose_env[] = { "FAKECUDA_VERBOSE=1", NULL };
    static const char *const delay_env[] = { "FAKECUDA_KERNEL_DELAY_US=150000",
                                             "FAKECUDA_COPY_DELAY_US=150000",
                                             "FAKECUDA_MEM_BYTES=64M", NULL };
    char out[8192];
    int st;

    expect_mode_ok("fail", fail_env);
    expect_mode_ok("novmm", novmm_env);
    expect_mode_ok("delay", delay_env);
    st = run_mode("verbose", verbose_env, out, sizeof out);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CHECK(strstr(out, "fakecuda: cuInit\n") && strstr(out, "fakecuda: cuDriverGetVersion\n"));
    st = run_mode("verbose", bad_env, out, sizeof out);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
    CHECK(strstr(out, "cuNoSuchCall") != NULL);
}

/* Mode "fail": FAKECUDA_FAIL counting and codes. */
static int mode_fail(void)
{
    CUmemAllocationProp prop = { 0 };
    CUmemGenericAllocationHandle h;
    CUdeviceptr d[4];
    uint32_t us = 0;
    void *args[] = { &us };

    EXPECT(CUDA_ERROR_UNKNOWN, D.cuInit(0));
    init_driver();
    OK(D.cuMemAlloc(&d[0], 64));
    EXPECT(CUDA_ERROR_OUT_OF_MEMORY, D.cuMemAlloc(&d[1], 64));
    EXPECT(CUDA_ERROR_OUT_OF_MEMORY, D.cuMemAlloc(&d[2], 64));
    OK(D.cuMemAlloc(&d[3], 64));
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    EXPECT(CUDA_ERROR_INVALID_VALUE, D.cuMemCreate(&h, (size_t)2 << 20, &prop, 0));
    EXPECT(CUDA_ERROR_INVALID_VALUE, D.cuMemCreate(&h, (size_t)2 << 20, &prop, 0));
    OK(D.cuLaunchKernel(fn_sleep, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
    OK(D.cuLaunchKernel_ptsz(fn_sleep, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
    EXPECT(CUDA_ERROR_ILLEGAL_ADDRESS, D.cuLaunchKernel(fn_sleep, 1, 1, 1, 1, 1, 1, 0, NULL, args,
                                                        NULL));
    EXPECT(CUDA_ERROR_ILLEGAL_ADDRESS, D.cuLaunchKernel_ptsz(fn_sleep, 1, 1, 1, 1, 1, 1, 0, NULL,
                                                             args, NULL));
    return failures ? 1 : 0;
}

/* Mode "novmm": FAKECUDA_NO_VMM=1. */
static int mode_novmm(void)
{
    CUmemAllocationProp prop = { 0 };
    CUmemGenericAllocationHandle h;
    CUdeviceptr va;
    size_t gran;
    int v = 1;

    init_driver();
    OK(D.cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0));
    CHECK(v == 0);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    EXPECT(CUDA_ERROR_NOT_SUPPORTED,
           D.cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    EXPECT(CUDA_ERROR_NOT_SUPPORTED, D.cuMemAddressReserve(&va, (size_t)2 << 20, 0, 0, 0));
    EXPECT(CUDA_ERROR_NOT_SUPPORTED, D.cuMemCreate(&h, (size_t)2 << 20, &prop, 0));
    return failures ? 1 : 0;
}

/* Mode "delay": kernel and copy delays, FAKECUDA_MEM_BYTES with a suffix. */
static int mode_delay(void)
{
    CUdeviceptr d;
    size_t total = 0;
    uint32_t v = 1;
    double t0;

    init_driver();
    OK(D.cuDeviceTotalMem(&total, 0));
    CHECK(total == (size_t)64 << 20);
    EXPECT(CUDA_ERROR_OUT_OF_MEMORY, D.cuMemAlloc(&d, (size_t)65 << 20));
    OK(D.cuMemAlloc(&d, 4));
    t0 = now_ms();
    OK(launch_sleep(NULL, 0));
    OK(D.cuStreamSynchronize(NULL));
    CHECK(now_ms() - t0 >= 140);
    t0 = now_ms();
    OK(D.cuMemcpyHtoD(d, &v, 4));
    CHECK(now_ms() - t0 >= 140);
    return failures ? 1 : 0;
}

/* Mode "verbose": a couple of calls to trace. */
static int mode_verbose(void)
{
    int v;

    OK(D.cuInit(0));
    OK(D.cuDriverGetVersion(&v));
    return failures ? 1 : 0;
}

/* ---- NCCL ---- */

static ncclUniqueId nccl_id;

/* One rank of the two-rank NCCL test. */
static void *nccl_rank(void *arg)
{
    enum { N = 1024 };
    int rank = (int)(intptr_t)arg, peer = 1 - rank, v = -1;
    ncclComm_t comm;
    CUdeviceptr sb, rb, ag, rs;
    float *send, *recv;
    CUstream s;
    void *reg = NULL;

    OK(D.cuCtxSetCurrent(ctx));
    OK(D.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CHECK(NC.ncclCommInitRank(&comm, 2, nccl_id, rank) == ncclSuccess);
    CHECK(NC.ncclCommCount(comm, &v) == ncclSuccess && v == 2);
    CHECK(NC.ncclCommUserRank(comm, &v) == ncclSuccess && v == rank);
    CHECK(NC.ncclCommCuDevice(comm, &v) == ncclSuccess && v == 0);
    OK(D.cuMemAlloc(&sb, N * 4));
    OK(D.cuMemAlloc(&rb, N * 4));
    OK(D.cuMemAlloc(&ag, 2 * N * 4));
    OK(D.cuMemAlloc(&rs, N * 4));
    CHECK(NC.ncclCommRegister(comm, hp(sb), N * 4, &reg) == ncclSuccess);
    send = hp(sb);
    recv = hp(rb);
    for (int i = 0; i < N; i++)
        send[i] = (float)(1000 * rank + i);

    /* Send/receive exchange in a group. */
    CHECK(NC.ncclGroupStart() == ncclSuccess);
    CHECK(NC.ncclSend(send, N, ncclFloat, peer, comm, (cudaStream_t)s) == ncclSuccess);
    CHECK(NC.ncclRecv(recv, N, ncclFloat, peer, comm, (cudaStream_t)s) == ncclSuccess);
    CHECK(NC.ncclGroupEnd() == ncclSuccess);
    OK(D.cuStreamSynchronize(s));
    CHECK(recv[7] == (float)(1000 * peer + 7));

    /* All-reduce (sum), all-gather, broadcast, reduce-scatter, reduce. */
    CHECK(NC.ncclAllReduce(send, recv, N, ncclFloat, ncclSum, comm, (cudaStream_t)s) == ncclSuccess);
    CHECK(NC.ncclAllGather(send, hp(ag), N, ncclFloat, comm, (cudaStream_t)s) == ncclSuccess);
    OK(D.cuStreamSynchronize(s));
    CHECK(recv[3] == 1000.0f + 6.0f);
    CHECK(((float *)hp(ag))[N + 2] == 1002.0f && ((float *)hp(ag))[2] == 2.0f);
    CHECK(NC.ncclBroadcast(send, recv, N, ncclFloat, 1, comm, (cudaStream_t)s) == ncclSuccess);
    OK(D.cuStreamSynchronize(s));
    CHECK(recv[4] == 1004.0f);
    CHECK(NC.ncclReduceScatter(hp(ag), hp(rs), N / 2, ncclFloat, ncclMax, comm, (cudaStream_t)s) ==
          ncclSuccess);
    CHECK(NC.ncclReduce(send, recv, N, ncclFloat, ncclMin, 0, comm, (cudaStream_t)s) ==
          ncclSuccess);
    OK(D.cuStreamSynchronize(s));
    CHECK(((float *)hp(rs))[1] == (rank == 0 ? 1.0f : (float)(N / 2 + 1)));
    if (rank == 0)
        CHECK(recv[9] == 9.0f);

    CHECK(NC.ncclAllReduce(send, recv, N, ncclFloat16, ncclSum, comm, (cudaStream_t)s) ==
          ncclInvalidArgument);
    CHECK(NC.ncclGetLastError(comm)[0] != '\0');
    CHECK(NC.ncclCommDeregister(comm, reg) == ncclSuccess);
    CHECK(NC.ncclCommDestroy(comm) == ncclSuccess);
    OK(D.cuMemFree(sb));
    OK(D.cuMemFree(rb));
    OK(D.cuMemFree(ag));
    OK(D.cuMemFree(rs));
    OK(D.cuStreamDestroy(s));
    return NULL;
}

/* The fake NCCL: two ranks in two threads, then two communicators from one thread. */
static void test_nccl(void)
{
    char buf[PATH_MAX + 32];
    ncclComm_t comms[2];
    CUstream s[2];
    CUdeviceptr d[2];
    pthread_t t[2];
    void *lib, *mem = NULL;
    int v = 0;

    lib = dlopen(lib_path("libnccl.so.2", buf, sizeof buf), RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "FAIL: %s\n", dlerror());
        failures++;
        return;
    }
    CHECK(dlsym(lib, "cuInit") == dlsym(cuda_lib, "cuInit"));
#define LOAD(name) *(void **)&NC.name = dlsym(lib, #name); CHECK(NC.name != NULL);
    NCCL_APIS(LOAD)
#undef LOAD
    if (failures)
        return;
    CHECK(NC.ncclGetVersion(&v) == ncclSuccess && v == NCCL_VERSION_CODE);
    CHECK(NC.ncclGetUniqueId(&nccl_id) == ncclSuccess);
    for (int r = 0; r < 2; r++)
        pthread_create(&t[r], NULL, nccl_rank, (void *)(intptr_t)r);
    for (int r = 0; r < 2; r++)
        pthread_join(t[r], NULL);

    CHECK(NC.ncclCommInitAll(comms, 2, NULL) == ncclSuccess);
    CHECK(NC.ncclMemAlloc(&mem, 4096) == ncclSuccess);
    for (int r = 0; r < 2; r++) {
        OK(D.cuStreamCreate(&s[r], 0));
        OK(D.cuMemAlloc(&d[r], 64 * 8));
        for (int i = 0; i < 64; i++)
            ((int64_t *)hp(d[r]))[i] = r + 1;
    }
    CHECK(NC.ncclGroupStart() == ncclSuccess);
    for (int r = 0; r < 2; r++)
        CHECK(NC.ncclAllReduce(hp(d[r]), hp(d[r]), 64, ncclInt64, ncclProd, comms[r],
                              (cudaStream_t)s[r]) == ncclSuccess);
    CHECK(NC.ncclGroupEnd() == ncclSuccess);
    for (int r = 0; r < 2; r++) {
        OK(D.cuStreamSynchronize(s[r]));
        CHECK(((int64_t *)hp(d[r]))[63] == 2);
        OK(D.cuMemFree(d[r]));
        OK(D.cuStreamDestroy(s[r]));
        CHECK(NC.ncclCommDestroy(comms[r]) == ncclSuccess);
    }
    CHECK(NC.ncclMemFree(mem) == ncclSuccess);
    CHECK(strcmp(NC.ncclGetErrorString(ncclInvalidArgument), "no error") != 0);
    CHECK(NC.ncclGroupEnd() == ncclInvalidUsage);
}

/* Runs every test, or one mode of a re-executed child. */
int main(int argc, char **argv)
{
    setup_library_path(argv);
    if (argc < 2)
        setenv("FAKECUDA_MEM_BYTES", "1G", 1);
    load_driver();
    if (argc >= 2) {
        if (strcmp(argv[1], "fail") == 0)
            return mode_fail();
        if (strcmp(argv[1], "novmm") == 0)
            return mode_novmm();
        if (strcmp(argv[1], "delay") == 0)
            return mode_delay();
        if (strcmp(argv[1], "verbose") == 0)
            return mode_verbose();
        fprintf(stderr, "selftest: unknown mode %s\n", argv[1]);
        return 1;
    }
    test_procaddr();
    test_init();
    test_device_memory();
    test_async_memory();
    test_host_memory();
    test_copies();
    test_memsets();
    test_kernel_handles();
    test_kernel_launches();
    test_replay_kernels();
    test_stream_order();
    test_events();
    test_vmm();
    test_use_after_free();
    test_capture();
    test_capture_invalidation();
    test_capture_join();
    test_capture_matrix();
    test_environment();
    test_nccl();
    if (failures) {
        fprintf(stderr, "selftest: %d check(s) failed\n", failures);
        return 1;
    }
    printf("selftest: all checks passed\n");
    return 0;
}
