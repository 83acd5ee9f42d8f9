/*
 * workload.c: a CUDA driver API program for the integration tests.
 *
 * It reaches the driver the way the tests name on its command line:
 *   procaddress       dlopen libcuda.so.1, dlsym cuGetProcAddress_v2, fetch
 *                     everything through it (what libcudart does)
 *   procaddress-ptsz  the same with CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
 *   procaddress-v1    through the 4-argument cuGetProcAddress
 *   dlsym             dlsym every entry point by its ELF name
 * or, built as workload-linked, through the ELF symbols of -lcuda.
 *
 * Scenarios: basic, loop N, threads N, fork, fork-exit, churn N, vmm N, pool N,
 * query, capture, capture-limit (a graph's pool allocated while capturing),
 * capture-async (a graph's memory nodes: cuMemAllocAsync while capturing),
 * capture-unjoined (a side stream the capture never joins; exits 3 when its
 * end fails),
 * nccl [N] (N rounds of communicators made and destroyed), pipeline N (a
 * pipeline stage's micro-batches on one rank), stage N (one
 * stage of a pipeline of processes), unresolved,
 * offload N (random buffers, streams and operations, every result checked;
 * run it under a small EBB_LIMIT), toobig (one buffer larger than the limit),
 * sizes (memory freed in one size makes room for a buffer of another),
 * reclaim N (idle memory of three sizes, two of which fit under the limit),
 * queues (an offload lands while restores queued before it still copy),
 * frees (room from the job's frees, oldest first),
 * train N and plan N (training loops in miniature, every result checked),
 * ahead N (a host that runs ahead of the device, freeing and allocating).
 * Prints "ok" and exits 0 when the data it computed is right.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#include "fakecuda.h"

#define FAIL(...) do { fprintf(stderr, "workload: " __VA_ARGS__); fprintf(stderr, "\n"); exit(1); } while (0)
#define CK(call) do { CUresult r_ = (call); if (r_ != CUDA_SUCCESS) FAIL("%s failed: %d (line %d)", #call, (int)r_, __LINE__); } while (0)

/* The entry points used: field, base name, legacy ELF name, version. */
#define ENTRIES(X)								\
	X(Init, cuInit, cuInit, 2000, (unsigned))				\
	X(DeviceGet, cuDeviceGet, cuDeviceGet, 2000, (CUdevice *, int))		\
	X(PrimaryCtxRetain, cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain, 7000, (CUcontext *, CUdevice)) \
	X(CtxSetCurrent, cuCtxSetCurrent, cuCtxSetCurrent, 4000, (CUcontext))	\
	X(MemAlloc, cuMemAlloc, cuMemAlloc_v2, 3020, (CUdeviceptr *, size_t))	\
	X(MemFree, cuMemFree, cuMemFree_v2, 3020, (CUdeviceptr))		\
	X(MemAllocAsync, cuMemAllocAsync, cuMemAllocAsync, 11020, (CUdeviceptr *, size_t, CUstream)) \
	X(MemFreeAsync, cuMemFreeAsync, cuMemFreeAsync, 11020, (CUdeviceptr, CUstream)) \
	X(MemcpyHtoD, cuMemcpyHtoD, cuMemcpyHtoD_v2, 3020, (CUdeviceptr, const void *, size_t)) \
	X(MemcpyDtoH, cuMemcpyDtoH, cuMemcpyDtoH_v2, 3020, (void *, CUdeviceptr, size_t)) \
	X(MemcpyDtoHAsync, cuMemcpyDtoHAsync, cuMemcpyDtoHAsync_v2, 3020, (void *, CUdeviceptr, size_t, CUstream)) \
	X(MemsetD32, cuMemsetD32, cuMemsetD32_v2, 3020, (CUdeviceptr, unsigned, size_t)) \
	X(MemsetD8Async, cuMemsetD8Async, cuMemsetD8Async, 3020, (CUdeviceptr, unsigned char, size_t, CUstream)) \
	X(StreamCreate, cuStreamCreate, cuStreamCreate, 2000, (CUstream *, unsigned)) \
	X(StreamSynchronize, cuStreamSynchronize, cuStreamSynchronize, 2000, (CUstream)) \
	X(CtxSynchronize, cuCtxSynchronize, cuCtxSynchronize, 2000, (void))	\
	X(ModuleLoadData, cuModuleLoadData, cuModuleLoadData, 2000, (CUmodule *, const void *)) \
	X(ModuleGetFunction, cuModuleGetFunction, cuModuleGetFunction, 2000, (CUfunction *, CUmodule, const char *)) \
	X(LibraryLoadData, cuLibraryLoadData, cuLibraryLoadData, 12000, (CUlibrary *, const void *, CUjit_option *, void **, unsigned, CUlibraryOption *, void **, unsigned)) \
	X(LibraryGetKernel, cuLibraryGetKernel, cuLibraryGetKernel, 12000, (CUkernel *, CUlibrary, const char *)) \
	X(LaunchKernel, cuLaunchKernel, cuLaunchKernel, 4000, (CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream, void **, void **)) \
	X(LaunchKernelEx, cuLaunchKernelEx, cuLaunchKernelEx, 11060, (const CUlaunchConfig *, CUfunction, void **, void **)) \
	X(StreamBeginCapture, cuStreamBeginCapture, cuStreamBeginCapture_v2, 10010, (CUstream, CUstreamCaptureMode)) \
	X(StreamEndCapture, cuStreamEndCapture, cuStreamEndCapture, 10000, (CUstream, CUgraph *)) \
	X(GraphInstantiate, cuGraphInstantiateWithFlags, cuGraphInstantiateWithFlags, 11040, (CUgraphExec *, CUgraph, unsigned long long)) \
	X(GraphLaunch, cuGraphLaunch, cuGraphLaunch, 10000, (CUgraphExec, CUstream)) \
	X(EventCreate, cuEventCreate, cuEventCreate, 2000, (CUevent *, unsigned))	\
	X(EventRecord, cuEventRecord, cuEventRecord, 2000, (CUevent, CUstream))	\
	X(StreamWaitEvent, cuStreamWaitEvent, cuStreamWaitEvent, 3020, (CUstream, CUevent, unsigned)) \
	X(MemcpyDtoDAsync, cuMemcpyDtoDAsync, cuMemcpyDtoDAsync_v2, 3020, (CUdeviceptr, CUdeviceptr, size_t, CUstream)) \
	X(MemcpyHtoDAsync, cuMemcpyHtoDAsync, cuMemcpyHtoDAsync_v2, 3020, (CUdeviceptr, const void *, size_t, CUstream)) \
	X(MemCreate, cuMemCreate, cuMemCreate, 10020, (CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long)) \
	X(MemRelease, cuMemRelease, cuMemRelease, 10020, (CUmemGenericAllocationHandle)) \
	X(MemAddressReserve, cuMemAddressReserve, cuMemAddressReserve, 10020, (CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long)) \
	X(MemAddressFree, cuMemAddressFree, cuMemAddressFree, 10020, (CUdeviceptr, size_t)) \
	X(MemMap, cuMemMap, cuMemMap, 10020, (CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long)) \
	X(MemUnmap, cuMemUnmap, cuMemUnmap, 10020, (CUdeviceptr, size_t)) \
	X(MemSetAccess, cuMemSetAccess, cuMemSetAccess, 10020, (CUdeviceptr, size_t, const CUmemAccessDesc *, size_t)) \
	X(DeviceGetDefaultMemPool, cuDeviceGetDefaultMemPool, cuDeviceGetDefaultMemPool, 11020, (CUmemoryPool *, CUdevice)) \
	X(MemAllocFromPoolAsync, cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync, 11020, (CUdeviceptr *, size_t, CUmemoryPool, CUstream)) \
	X(PointerGetAttribute, cuPointerGetAttribute, cuPointerGetAttribute, 4000, (void *, CUpointer_attribute, CUdeviceptr)) \
	X(MemGetAddressRange, cuMemGetAddressRange, cuMemGetAddressRange_v2, 3020, (CUdeviceptr *, size_t *, CUdeviceptr)) \
	X(ThreadExchangeStreamCaptureMode, cuThreadExchangeStreamCaptureMode, cuThreadExchangeStreamCaptureMode, 10010, (CUstreamCaptureMode *))

static struct {
#define X(field, base, elf, ver, params) CUresult (*field) params;
	ENTRIES(X)
#undef X
} cu;

static CUcontext ctx;
static void *driver_lib;	/* the libcuda.so.1 handle, when dlopened */
static CUfunction k_scaled_ws, k_flagged_ws;
static CUfunction k_fill, k_copy, k_axpy, k_pair, k_sleep, k_rand_state, k_square_sum, k_gather,
    k_stamp, k_sum, k_fill_opt;

#ifdef WORKLOAD_LINKED
/* Bind every entry to the ELF symbol (resolved by the dynamic linker). */
static void
resolve(const char *how)
{
	(void)how;
#define X(field, base, elf, ver, params) cu.field = elf;
	ENTRIES(X)
#undef X
}
#else
static void
resolve(const char *how)
{
	void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (lib == NULL)
		FAIL("dlopen libcuda.so.1: %s", dlerror());
	driver_lib = lib;
	if (strcmp(how, "dlsym") == 0) {
#define X(field, base, elf, ver, params)				\
		if ((*(void **)&cu.field = dlsym(lib, #elf)) == NULL)	\
			FAIL("dlsym %s", #elf);
		ENTRIES(X)
#undef X
		return;
	}
	cuuint64_t flags = strcmp(how, "procaddress-ptsz") == 0 ?
	    CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : CU_GET_PROC_ADDRESS_DEFAULT;
	if (strcmp(how, "procaddress-v1") == 0) {
		CUresult (*gpa)(const char *, void **, int, cuuint64_t) =
		    (CUresult (*)(const char *, void **, int, cuuint64_t))dlsym(lib, "cuGetProcAddress");
		if (gpa == NULL)
			FAIL("dlsym cuGetProcAddress");
#define X(field, base, elf, ver, params)				\
		if (gpa(#base, (void **)&cu.field, ver, flags) != CUDA_SUCCESS || !cu.field) \
			FAIL("cuGetProcAddress(%s, %d)", #base, ver);
		ENTRIES(X)
#undef X
		return;
	}
	CUresult (*gpa2)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *) =
	    (CUresult (*)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *))
	    dlsym(lib, "cuGetProcAddress_v2");
	if (gpa2 == NULL)
		FAIL("dlsym cuGetProcAddress_v2");
	/* libcudart fetches cuGetProcAddress itself through it, and uses that. */
	void *self = NULL;
	CUdriverProcAddressQueryResult st;
	if (gpa2("cuGetProcAddress", &self, 12000, 0, &st) != CUDA_SUCCESS || self == NULL)
		FAIL("cuGetProcAddress(cuGetProcAddress)");
	gpa2 = (CUresult (*)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *))self;
	/* Per-thread variants exist from CUDA 7.0: ask for at least that. */
	int min_ver = flags == CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM ? 7000 : 0;
#define X(field, base, elf, ver, params)					\
	if (gpa2(#base, (void **)&cu.field, ver > min_ver ? ver : min_ver, flags, &st) != \
	    CUDA_SUCCESS || !cu.field)						\
		FAIL("cuGetProcAddress_v2(%s, %d)", #base, ver);
	ENTRIES(X)
#undef X
}
#endif

static void
setup(void)
{
	CUdevice dev;
	CUmodule mod;
	CUlibrary lib;
	CUkernel k;

	CK(cu.Init(0));
	CK(cu.DeviceGet(&dev, 0));
	CK(cu.PrimaryCtxRetain(&ctx, dev));
	CK(cu.CtxSetCurrent(ctx));
	/* copy and sleep through a module (CUfunction handles) ... */
	CK(cu.ModuleLoadData(&mod, FAKECUDA_MODULE_IMAGE));
	CK(cu.ModuleGetFunction(&k_copy, mod, "copy_bytes"));
	CK(cu.ModuleGetFunction(&k_sleep, mod, "sleep_us"));
	/* ... the rest through a library (CUkernel handles, as PyTorch launches them) */
	CK(cu.LibraryLoadData(&lib, FAKECUDA_MODULE_IMAGE, NULL, NULL, 0, NULL, NULL, 0));
	CK(cu.LibraryGetKernel(&k, lib, "fill_u32"));
	k_fill = (CUfunction)k;
	CK(cu.LibraryGetKernel(&k, lib, "axpy_f32"));
	k_axpy = (CUfunction)k;
	CK(cu.LibraryGetKernel(&k, lib, "struct_ptrs"));
	k_pair = (CUfunction)k;
	CK(cu.LibraryGetKernel(&k, lib, "rand_state_f32"));
	k_rand_state = (CUfunction)k;
	CK(cu.LibraryGetKernel(&k, lib, "square_sum_f32"));
	k_square_sum = (CUfunction)k;
	CK(cu.LibraryGetKernel(&k, lib, "gather_ptrs"));
	k_gather = (CUfunction)k;
	CK(cu.LibraryGetKernel(&k, lib, "stamp_u32"));
	k_stamp = (CUfunction)k;
	CK(cu.LibraryGetKernel(&k, lib, "sum_u32"));
	k_sum = (CUfunction)k;
	CK(cu.LibraryGetKernel(&k, lib, "fill_opt_u32"));
	k_fill_opt = (CUfunction)k;
	CK(cu.LibraryGetKernel(&k, lib, "scaled_ws_f32"));
	k_scaled_ws = (CUfunction)k;
	CK(cu.LibraryGetKernel(&k, lib, "flagged_ws_f32"));
	k_flagged_ws = (CUfunction)k;
}

static void
launch_fill(CUdeviceptr dst, uint32_t value, uint64_t n, CUstream s)
{
	struct fakecuda_fill_u32_params p = { (uint32_t *)dst, value, n };
	void *args[] = { &p.dst, &p.value, &p.n };
	CK(cu.LaunchKernel(k_fill, 1, 1, 1, 128, 1, 1, 0, s, args, NULL));
}

/* copy_bytes through the packed `extra` argument buffer. */
static void
launch_copy(CUdeviceptr dst, CUdeviceptr src, uint64_t n, CUstream s)
{
	struct fakecuda_copy_bytes_params p = { (void *)dst, (const void *)src, n };
	size_t size = sizeof p;
	void *extra[] = { CU_LAUNCH_PARAM_BUFFER_POINTER, &p, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
		CU_LAUNCH_PARAM_END };
	CK(cu.LaunchKernel(k_copy, 1, 1, 1, 128, 1, 1, 0, s, NULL, extra));
}

static void
launch_axpy(CUdeviceptr y, CUdeviceptr x, float a, uint64_t n, CUstream s)
{
	struct fakecuda_axpy_f32_params p = { (float *)y, (const float *)x, a, n };
	void *args[] = { &p.y, &p.x, &p.a, &p.n };
	/* a geometry of its own and an attribute, as launchers pass them (the fake
	 * ignores both; ebb's launch records keep them) */
	CUlaunchAttribute attr = { .id = CU_LAUNCH_ATTRIBUTE_PRIORITY, .value.priority = 0 };
	CUlaunchConfig cfg = { 2, 3, 4, 32, 2, 1, 16, s, &attr, 1 };
	CK(cu.LaunchKernelEx(&cfg, k_axpy, args, NULL));
}

static void
launch_sleep(uint32_t us, CUstream s)
{
	struct fakecuda_sleep_us_params p = { us };
	void *args[] = { &p.us };
	CK(cu.LaunchKernel(k_sleep, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
}

static int
scenario_basic(void)
{
	const size_t n = 1 << 18;	/* 1 MiB of u32 */
	CUstream s;
	CUdeviceptr A, B, C, P1, P2, OUT;

	CK(cu.StreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CK(cu.MemAlloc(&A, n * 4));			/* bid 1 */
	CK(cu.MemAllocAsync(&B, n * 4, s));		/* bid 2 */
	CK(cu.MemAlloc(&C, n * 4));			/* bid 3 */
	CK(cu.MemAlloc(&P1, 1024 * 4));			/* bid 4 */
	CK(cu.MemAlloc(&P2, 1024 * 4));			/* bid 5 */
	CK(cu.MemAlloc(&OUT, 1024 * 4));		/* bid 6 */
	float ones[1024], twos[1024], got[1024];
	for (int i = 0; i < 1024; i++) {
		ones[i] = 1.0f;
		twos[i] = 2.0f;
	}
	CK(cu.MemcpyHtoD(P1, ones, sizeof ones));
	CK(cu.MemcpyHtoD(P2, twos, sizeof twos));
	CK(cu.MemsetD32(C, 5, n));
	CK(cu.MemsetD8Async(B, 0, n * 4, s));
	launch_fill(A, 7, n, NULL);
	launch_fill(A + 4096, 9, 16, NULL);		/* a pointer into the middle of A */
	launch_copy(C, A, n * 4, NULL);
	struct fakecuda_struct_ptrs_params sp = { { (float *)P1, (const float *)P2, 1024 },
		(float *)OUT };
	void *args[] = { &sp.p, &sp.out };
	CK(cu.LaunchKernel(k_pair, 1, 1, 1, 32, 1, 1, 0, NULL, args, NULL));
	launch_axpy(OUT, P1, 2.0f, 1024, NULL);		/* OUT = 3 + 2 * 1 = 5 */
	launch_sleep(10, NULL);				/* no pointer at all */
	CK(cu.CtxSynchronize());
	uint32_t *host = malloc(n * 4);
	CK(cu.MemcpyDtoH(host, C, n * 4));
	for (size_t i = 0; i < n; i++) {
		uint32_t want = (i >= 1024 && i < 1040) ? 9 : 7;
		if (host[i] != want)
			FAIL("C[%zu] = %u, want %u", i, host[i], want);
	}
	CK(cu.MemcpyDtoHAsync(got, OUT, sizeof got, s));
	CK(cu.StreamSynchronize(s));
	for (int i = 0; i < 1024; i++)
		if (got[i] != 5.0f)
			FAIL("OUT[%d] = %g, want 5", i, (double)got[i]);
	free(host);
	CK(cu.MemFreeAsync(B, s));
	CK(cu.StreamSynchronize(s));
	CK(cu.MemFree(A));
	CK(cu.MemFree(C));
	CK(cu.MemFree(P1));
	CK(cu.MemFree(P2));
	CK(cu.MemFree(OUT));
	return 0;
}

/* A training-like loop: N iterations of the same operations, a sync at the end of each. */
static int
scenario_loop(int iters)
{
	CUstream s;
	CUdeviceptr w, g;
	const size_t n = 4096;

	CK(cu.StreamCreate(&s, 0));
	CK(cu.MemAlloc(&w, n * 4));
	CK(cu.MemAlloc(&g, n * 4));
	launch_fill(w, 0, n, s);
	for (int it = 0; it < iters; it++) {
		CUdeviceptr act, tmp;
		CK(cu.MemAllocAsync(&act, n * 4, s));
		CK(cu.MemAllocAsync(&tmp, n * 4, s));
		launch_fill(act, (uint32_t)it, n, s);		/* forward */
		launch_copy(tmp, act, n * 4, s);
		launch_fill(g, 1, n, s);			/* backward */
		launch_copy(g, tmp, n * 4, s);
		launch_axpy(w, g, 0.0f, n, s);			/* optimizer */
		CK(cu.MemFreeAsync(tmp, s));
		CK(cu.MemFreeAsync(act, s));
		uint32_t last;
		CK(cu.MemcpyDtoHAsync(&last, g + 4 * (n - 1), 4, s));	/* loss.item() */
		CK(cu.StreamSynchronize(s));
		if (last != (uint32_t)it)
			FAIL("iteration %d: got %u", it, last);
	}
	CK(cu.MemFree(w));
	CK(cu.MemFree(g));
	return 0;
}

struct thread_arg {
	int id, iters;
};

static void *
thread_main(void *p)
{
	struct thread_arg *a = p;
	CUstream s;
	const size_t n = 2048;

	CK(cu.CtxSetCurrent(ctx));
	CK(cu.StreamCreate(&s, CU_STREAM_NON_BLOCKING));
	for (int it = 0; it < a->iters; it++) {
		CUdeviceptr x, y;
		CK(cu.MemAllocAsync(&x, n * 4, s));
		CK(cu.MemAlloc(&y, n * 4));
		launch_fill(x, (uint32_t)(a->id * 1000 + it), n, s);
		launch_copy(y, x, n * 4, s);
		uint32_t v;
		CK(cu.MemcpyDtoHAsync(&v, y + 4 * (n - 1), 4, s));
		CK(cu.StreamSynchronize(s));
		if (v != (uint32_t)(a->id * 1000 + it))
			FAIL("thread %d iteration %d: got %u", a->id, it, v);
		CK(cu.MemFreeAsync(x, s));
		CK(cu.StreamSynchronize(s));
		CK(cu.MemFree(y));
	}
	return NULL;
}

static int
scenario_threads(int nthreads)
{
	pthread_t t[64];
	struct thread_arg a[64];

	if (nthreads > 64)
		nthreads = 64;
	for (int i = 0; i < nthreads; i++) {
		a[i].id = i;
		a[i].iters = 50;
		pthread_create(&t[i], NULL, thread_main, &a[i]);
	}
	for (int i = 0; i < nthreads; i++)
		pthread_join(t[i], NULL);
	return 0;
}

/* Work, fork a child that exits without touching the device, work again.
 * The child ends with _exit, or with exit (running the atexit handlers and
 * destructors it inherited, as a Python worker process does) when
 * by_exit. */
/*
 * LeakSanitizer asks this before its check at exit (the program's own
 * definition wins over its runtime's): a child forked while other threads
 * of the parent (the fake driver's, ebb's) were in the sanitizer's
 * allocator inherits its lock held by a thread the child does not have, and
 * the check would wait on it for ever. The child of scenario_fork has
 * nothing of its own to check.
 */
static int forked_child;
int __lsan_is_turned_off(void);
int
__lsan_is_turned_off(void)
{
	return forked_child;
}

static int
scenario_fork(int by_exit)
{
	scenario_loop(3);
	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0)
		FAIL("fork");
	if (pid == 0) {
		/* A child that never uses CUDA, like a DataLoader worker. */
		forked_child = 1;
		if (by_exit)
			exit(0);
		_exit(0);
	}
	int st;
	waitpid(pid, &st, 0);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		FAIL("child exited with %d", st);
	return scenario_loop(3);
}

/* Capture a launch into a graph and replay it. */
static void check_bytes(CUdeviceptr p, uint32_t v, size_t bytes, CUstream s, const char *what,
    int i);

static int
scenario_capture(void)
{
	CUstream s;
	CUdeviceptr x, y;
	CUgraph g;
	CUgraphExec ge;
	const size_t n = 1024;

	/* WORKLOAD_CAPTURE_SPARE_MB: a buffer of that many MiB the graph does
	 * not use, filled before the capture and checked after the launch */
	size_t spare = getenv("WORKLOAD_CAPTURE_SPARE_MB") ?
	    (size_t)atoi(getenv("WORKLOAD_CAPTURE_SPARE_MB")) << 20 : 0;
	CUdeviceptr z = 0;

	CK(cu.StreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CK(cu.MemAlloc(&x, n * 4));	/* bid 1 */
	CK(cu.MemAlloc(&y, n * 4));	/* bid 2 */
	launch_fill(x, 3, n, s);
	if (spare > 0) {
		CK(cu.MemAlloc(&z, spare));
		launch_fill(z, 5, spare / 4, s);
	}
	CK(cu.StreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
	launch_copy(y, x, n * 4, s);
	CK(cu.StreamEndCapture(s, &g));
	CK(cu.GraphInstantiate(&ge, g, 0));
	CK(cu.GraphLaunch(ge, s));
	uint32_t v;
	CK(cu.MemcpyDtoHAsync(&v, y, 4, s));
	CK(cu.StreamSynchronize(s));
	if (v != 3)
		FAIL("graph copy gave %u", v);
	if (spare > 0)
		check_bytes(z, 5, spare, s, "the spare buffer", 0);
	return 0;
}

/*
 * A capture under a limit, made as PyTorch makes its graphs: buffers in use
 * before the capture; a global-mode capture on s that forks onto a side
 * stream and joins back; buffers allocated during it with cuMemAlloc in
 * relaxed mode (the caching allocator's graph pool), written by the graph,
 * and an end capture on the joined stream, which fails and ends nothing;
 * then replays of the graph with a new input each, and the earlier buffers
 * read between them. Every value is checked.
 */
static void print_driver_stats(void);

/* The capture scenarios' buffers from before a capture, of sz bytes each:
 * in (7) and n others (100 + i), filled on s and waited for. */
static void
capture_inputs(CUstream s, size_t sz, CUdeviceptr *in, CUdeviceptr *other, int n)
{
	CK(cu.MemAlloc(in, sz));
	launch_fill(*in, 7, sz / 4, s);
	for (int i = 0; i < n; i++) {
		CK(cu.MemAlloc(&other[i], sz));
		launch_fill(other[i], 100 + (uint32_t)i, sz / 4, s);
	}
	CK(cu.StreamSynchronize(s));
}

/* Round round of a capture scenario: a new input (7 + round), a launch of
 * ge on s, its ncap outputs copies of it, and the n buffers from before as
 * they were. */
static void
capture_replay(CUgraphExec ge, CUstream s, size_t sz, CUdeviceptr in, const CUdeviceptr *cap,
    int ncap, const CUdeviceptr *other, int n, int round)
{
	launch_fill(in, 7 + (uint32_t)round, sz / 4, s);
	CK(cu.GraphLaunch(ge, s));
	for (int i = 0; i < ncap; i++)
		check_bytes(cap[i], 7 + (uint32_t)round, sz, s, "graph output", i);
	for (int i = 0; i < n; i++)
		check_bytes(other[i], 100 + (uint32_t)i, sz, s, "buffer from before", i);
}

static int
scenario_capture_limit(void)
{
	enum { NOTHER = 6, NCAP = 4, ROUNDS = 3 };
	const size_t sz = 4 << 20;
	CUstream s, side;
	CUevent fork, join;
	CUdeviceptr other[NOTHER], in, cap[NCAP];
	CUgraph g;
	CUgraphExec ge;

	CK(cu.StreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CK(cu.StreamCreate(&side, CU_STREAM_NON_BLOCKING));
	CK(cu.EventCreate(&fork, CU_EVENT_DISABLE_TIMING));
	CK(cu.EventCreate(&join, CU_EVENT_DISABLE_TIMING));
	capture_inputs(s, sz, &in, other, NOTHER);
	CK(cu.StreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
	CK(cu.EventRecord(fork, s));
	CK(cu.StreamWaitEvent(side, fork, 0));
	for (int i = 0; i < NCAP; i++) {
		CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
		CUgraph none;
		if (i == 1 && cu.StreamEndCapture(side, &none) != CUDA_ERROR_STREAM_CAPTURE_UNMATCHED)
			FAIL("ending the capture on the stream that joined it did not fail");
		CK(cu.ThreadExchangeStreamCaptureMode(&m));
		CK(cu.MemAlloc(&cap[i], sz));
		CK(cu.ThreadExchangeStreamCaptureMode(&m));
		launch_copy(cap[i], in, sz, i % 2 ? side : s);
	}
	CK(cu.EventRecord(join, side));
	CK(cu.StreamWaitEvent(s, join, 0));
	CK(cu.StreamEndCapture(s, &g));
	CK(cu.GraphInstantiate(&ge, g, 0));
	for (int round = 0; round < ROUNDS; round++)
		capture_replay(ge, s, sz, in, cap, NCAP, other, NOTHER, round);
	print_driver_stats();
	return 0;
}

/*
 * A capture whose memory is the graph's own, as PyTorch's cudaMallocAsync
 * backend makes it: buffers in use before the capture (one of them the
 * graph's input); a global-mode capture on s that allocates its outputs and
 * a temporary with cuMemAllocAsync on s (graph memory nodes, which the
 * driver serves), copies the first of the earlier buffers into one more,
 * frees the temporary on s, and ends; then replays with a new input each,
 * the earlier buffers read between them. Every value is checked.
 */
static int
scenario_capture_async(void)
{
	enum { NOTHER = 6, NCAP = 4, ROUNDS = 3 };
	const size_t sz = 4 << 20;
	CUstream s;
	CUdeviceptr other[NOTHER], in, cap[NCAP], tmp, kept;
	CUgraph g;
	CUgraphExec ge;

	CK(cu.StreamCreate(&s, CU_STREAM_NON_BLOCKING));
	capture_inputs(s, sz, &in, other, NOTHER);
	CK(cu.StreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
	CK(cu.MemAllocAsync(&tmp, sz, s));
	launch_copy(tmp, in, sz, s);
	for (int i = 0; i < NCAP; i++) {
		CK(cu.MemAllocAsync(&cap[i], sz, s));
		launch_copy(cap[i], tmp, sz, s);
	}
	/* and one of the buffers from before, used by the graph from here on */
	CK(cu.MemAllocAsync(&kept, sz, s));
	launch_copy(kept, other[0], sz, s);
	CK(cu.MemFreeAsync(tmp, s));
	CK(cu.StreamEndCapture(s, &g));
	CK(cu.GraphInstantiate(&ge, g, 0));
	for (int round = 0; round < ROUNDS; round++) {
		capture_replay(ge, s, sz, in, cap, NCAP, other, NOTHER, round);
		check_bytes(kept, 100, sz, s, "graph copy of a buffer from before", 0);
	}
	print_driver_stats();
	return 0;
}

/*
 * A capture that forks onto a side stream and never joins it back, as
 * PyTorch's cudaMallocAsync backend leaves some (a copy on the side stream
 * after the fork, nothing waited for): without a join the driver fails the
 * end of the capture with CUDA_ERROR_STREAM_CAPTURE_UNJOINED, which this
 * says ("unjoined") and exits 3 for. Where the end succeeds, the graph's
 * replays give each input's copy on both streams, checked.
 */
static int
scenario_capture_unjoined(void)
{
	const size_t sz = 4 << 20, n = sz / 4;
	CUstream s, side;
	CUevent fork;
	CUdeviceptr in, a, b;
	CUgraph g;
	CUgraphExec ge;

	CK(cu.StreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CK(cu.StreamCreate(&side, CU_STREAM_NON_BLOCKING));
	CK(cu.EventCreate(&fork, CU_EVENT_DISABLE_TIMING));
	CK(cu.MemAlloc(&in, sz));
	CK(cu.MemAlloc(&a, sz));
	CK(cu.MemAlloc(&b, sz));
	CK(cu.StreamSynchronize(s));
	CK(cu.StreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
	CK(cu.EventRecord(fork, s));
	CK(cu.StreamWaitEvent(side, fork, 0));
	launch_copy(a, in, sz, s);
	launch_copy(b, in, sz, side);
	CUresult r = cu.StreamEndCapture(s, &g);
	if (r == CUDA_ERROR_STREAM_CAPTURE_UNJOINED) {
		printf("unjoined\n");
		return 3;
	}
	CK(r);
	CK(cu.GraphInstantiate(&ge, g, 0));
	for (int round = 0; round < 3; round++) {
		launch_fill(in, 40 + (uint32_t)round, n, s);
		CK(cu.GraphLaunch(ge, s));
		check_bytes(a, 40 + (uint32_t)round, sz, s, "copy on the capturing stream", round);
		check_bytes(b, 40 + (uint32_t)round, sz, s, "copy on the side stream", round);
	}
	printf("joined\n");
	return 0;
}

/* Launches whose parameter layout the driver will not give (the test sets FAKECUDA_FAIL). */
static int
scenario_unresolved(void)
{
	CUdeviceptr x;

	CK(cu.MemAlloc(&x, 4096));
	launch_fill(x, 1, 1024, NULL);
	CK(cu.CtxSynchronize());
	CK(cu.MemFree(x));
	return 0;
}

/* The fake driver's statistics, when it is the driver. */
static void
print_driver_stats(void)
{
	void (*stats)(struct fakecuda_stats *) = (void (*)(struct fakecuda_stats *))
	    dlsym(driver_lib ? driver_lib : RTLD_DEFAULT, "fakecuda_stats");
	struct fakecuda_stats fs;

	if (stats == NULL)
		return;
	stats(&fs);
	printf("driver: cuMemFree %llu, cuMemCreate %llu, cuMemMap %llu, cuMemUnmap %llu, "
	    "peak %llu, cuEventQuery %llu, cuEventRecord %llu\n", (unsigned long long)fs.mem_free_calls,
	    (unsigned long long)fs.mem_create_calls, (unsigned long long)fs.mem_map_calls,
	    (unsigned long long)fs.mem_unmap_calls, (unsigned long long)fs.device_bytes_peak,
	    (unsigned long long)fs.event_query_calls, (unsigned long long)fs.event_record_calls);
}

/* Fill [p, p + bytes) with v on s (bytes a multiple of 4). */
static void
fill_bytes(CUdeviceptr p, uint32_t v, size_t bytes, CUstream s)
{
	launch_fill(p, v, bytes / 4, s);
}

/* Check that [p, p + bytes) holds v everywhere, reading on s. */
static void
check_bytes(CUdeviceptr p, uint32_t v, size_t bytes, CUstream s, const char *what, int i)
{
	uint32_t *h = malloc(bytes);
	if (h == NULL)
		FAIL("malloc");
	CK(cu.MemcpyDtoHAsync(h, p, bytes, s));
	CK(cu.StreamSynchronize(s));
	for (size_t k = 0; k < bytes / 4; k++)
		if (h[k] != v)
			FAIL("%s: buffer %d word %zu is %u, want %u", what, i, k, h[k], v);
	free(h);
}

/*
 * Random buffers (2 to 8 MiB, some not multiples of 2 MiB), three streams,
 * random fills, copies and checks; the program orders its streams with
 * events as a correct CUDA program must. Under a small EBB_LIMIT, buffers
 * move to the host and back all the time; every value must survive.
 */
static int
offload_rounds(int rounds, unsigned seed)
{
	enum { NB = 12, NS = 3 };
	CUstream st[NS];
	CUevent ev[NB];
	int last[NB];
	CUdeviceptr buf[NB];
	size_t n[NB];
	uint32_t val[NB];
	for (int s = 0; s < NS; s++)
		CK(cu.StreamCreate(&st[s], s == 0 ? 0 : CU_STREAM_NON_BLOCKING));
	for (int i = 0; i < NB; i++) {
		n[i] = ((size_t)(2 + i % 3 * 3) << 20) + (i % 3 == 1 ? 12288 : 0);
		if (i % 2)
			CK(cu.MemAlloc(&buf[i], n[i]));
		else
			CK(cu.MemAllocAsync(&buf[i], n[i], st[i % NS]));
		CK(cu.EventCreate(&ev[i], CU_EVENT_DISABLE_TIMING));
		last[i] = i % 2 ? -1 : i % NS;
		int s = i % NS;
		val[i] = 1000u + (unsigned)i;
		fill_bytes(buf[i], val[i], n[i], st[s]);
		CK(cu.EventRecord(ev[i], st[s]));
		last[i] = s;
	}
	for (int r = 0; r < rounds; r++) {
		int i = rand_r(&seed) % NB, s = rand_r(&seed) % NS, op = rand_r(&seed) % 4;
		if (last[i] != s)
			CK(cu.StreamWaitEvent(st[s], ev[i], 0));
		if (op == 0) {
			val[i] = (unsigned)rand_r(&seed);
			fill_bytes(buf[i], val[i], n[i], st[s]);
		} else if (op == 1 || op == 2) {
			/* copy from another buffer of the same size, by kernel or by copy */
			int j = (i + 3 * (1 + rand_r(&seed) % (NB / 3 - 1))) % NB;
			if (last[j] != s)
				CK(cu.StreamWaitEvent(st[s], ev[j], 0));
			if (op == 1)
				launch_copy(buf[i], buf[j], n[i], st[s]);
			else
				CK(cu.MemcpyDtoDAsync(buf[i], buf[j], n[i], st[s]));
			val[i] = val[j];
			CK(cu.EventRecord(ev[j], st[s]));
			last[j] = s;
		} else {
			check_bytes(buf[i], val[i], n[i], st[s], "round", i);
		}
		CK(cu.EventRecord(ev[i], st[s]));
		last[i] = s;
	}
	for (int i = 0; i < NB; i++) {
		int s = (i + 1) % NS;
		if (last[i] != s)
			CK(cu.StreamWaitEvent(st[s], ev[i], 0));
		check_bytes(buf[i], val[i], n[i], st[s], "final", i);
		if (i % 2)
			CK(cu.MemFree(buf[i]));
		else
			CK(cu.MemFreeAsync(buf[i], st[s]));
	}
	for (int s = 0; s < NS; s++)
		CK(cu.StreamSynchronize(st[s]));
	return 0;
}

static unsigned
seed_of(void)
{
	const char *env = getenv("WORKLOAD_SEED");
	return env != NULL ? (unsigned)atoi(env) : 4242u;
}

static int
scenario_offload(int rounds)
{
	offload_rounds(rounds, seed_of());
	CK(cu.CtxSynchronize());
	print_driver_stats();
	return 0;
}

/*
 * Memory held idle in one size makes room for a buffer of another: under a
 * 12 MiB limit, p (8 MiB) and q (4 MiB); s (4 MiB) sends q to the host;
 * then p is freed and q is used again. q's copy back takes p's memory
 * (released, a new handle made), without sending s to the host to reuse its
 * 4 MiB handle.
 */
static int
scenario_sizes(void)
{
	const size_t big = (size_t)8 << 20, small = (size_t)4 << 20;
	CUdeviceptr p, q, s;

	CK(cu.MemAlloc(&p, big));
	CK(cu.MemAlloc(&q, small));
	fill_bytes(p, 1, big, 0);
	fill_bytes(q, 2, small, 0);
	CK(cu.CtxSynchronize());
	CK(cu.MemAlloc(&s, small));	/* over the limit: q goes to the host */
	fill_bytes(s, 3, small, 0);
	CK(cu.CtxSynchronize());
	CK(cu.MemFree(p));
	check_bytes(q, 2, small, 0, "q", 0);
	check_bytes(s, 3, small, 0, "s", 0);
	CK(cu.MemFree(q));
	CK(cu.MemFree(s));
	CK(cu.CtxSynchronize());
	return 0;
}

/*
 * Idle memory of three sizes under a limit that holds two of them: each
 * iteration allocates and frees one buffer of 2 MiB, then goes through
 * 4 and 6 MiB buffers in turn, four times, one alive at a time. Freed
 * memory stays idle until room is needed; the memory to release for a 6 MiB
 * buffer is the 2 MiB freed at the iteration's start, not the 4 MiB the job
 * is going through. Prints the handles created in all and after the first
 * two iterations (fakecuda_stats).
 */
static int
scenario_reclaim(int iters)
{
	const size_t sz[3] = { 2u << 20, 4u << 20, 6u << 20 };
	void (*stats)(struct fakecuda_stats *) = (void (*)(struct fakecuda_stats *))
	    dlsym(driver_lib ? driver_lib : RTLD_DEFAULT, "fakecuda_stats");
	struct fakecuda_stats fs;
	uint64_t warm = 0;
	CUstream s;

	CK(cu.StreamCreate(&s, CU_STREAM_NON_BLOCKING));
	for (int it = 0; it < iters; it++) {
		for (int k = 0; k < 9; k++) {
			size_t n = sz[k == 0 ? 0 : 1 + (k - 1) % 2];
			CUdeviceptr p;
			CK(cu.MemAllocAsync(&p, n, s));
			uint32_t v = (uint32_t)(it * 16 + k);
			fill_bytes(p, v, n, s);
			check_bytes(p, v, 64, s, "reclaim buffer", it);
			/* freed in stream order, then passed by the device: the
			 * memory is idle when the next allocation needs room */
			CK(cu.MemFreeAsync(p, s));
			CK(cu.StreamSynchronize(s));
		}
		if (it == 1 && stats != NULL) {
			stats(&fs);
			warm = fs.mem_create_calls;
		}
	}
	if (stats != NULL) {
		stats(&fs);
		printf("handles created: %llu, after warm-up %llu\n",
		    (unsigned long long)fs.mem_create_calls,
		    (unsigned long long)(fs.mem_create_calls - warm));
	}
	return 0;
}

/*
 * Small buffers churned by several threads: each of nthreads threads, on
 * a stream of its own, allocates 1 MiB with cuMemAlloc, fills it, and frees
 * it with cuMemFree, keeping two alive at a time, 300 times. Live memory
 * stays at 2 MiB a thread: run it under a limit far above that and far
 * below what the churn allocates in all.
 */
struct churn_arg {
	int id;
};

static void *
churn_main(void *p)
{
	const struct churn_arg *a = p;
	const size_t n = (size_t)1 << 20;
	CUstream s;
	CUdeviceptr keep[2] = { 0, 0 };

	CK(cu.CtxSetCurrent(ctx));
	CK(cu.StreamCreate(&s, CU_STREAM_NON_BLOCKING));
	for (int it = 0; it < 300; it++) {
		CUdeviceptr x;
		CK(cu.MemAlloc(&x, n));
		uint32_t v = (uint32_t)(a->id * 100000 + it);
		fill_bytes(x, v, n, s);
		if (it % 50 == 0)
			check_bytes(x, v, n, s, "churned buffer", it);
		if (keep[it % 2] != 0)
			CK(cu.MemFree(keep[it % 2]));
		keep[it % 2] = x;
	}
	CK(cu.StreamSynchronize(s));
	for (int k = 0; k < 2; k++)
		CK(cu.MemFree(keep[k]));
	return NULL;
}

static int
scenario_churn(int nthreads)
{
	pthread_t t[16];
	struct churn_arg a[16];

	if (nthreads > 16)
		nthreads = 16;
	for (int i = 0; i < nthreads; i++) {
		a[i].id = i;
		pthread_create(&t[i], NULL, churn_main, &a[i]);
	}
	for (int i = 0; i < nthreads; i++)
		pthread_join(t[i], NULL);
	return 0;
}

/*
 * A launcher's questions about its pointer arguments, as Triton's and
 * inductor's ask before each launch: under a limit of three 4 MiB buffers,
 * a, b and c are filled, then d and e send a and b to the host; the
 * device pointer of each of a and b is asked for, and its address range,
 * before a copy reads it; every answer is the pointer's own, and every
 * value right.
 */
static int
scenario_query(void)
{
	const size_t n = (size_t)4 << 20;
	CUdeviceptr a, b, c, d, e;

	CK(cu.MemAlloc(&a, n));
	CK(cu.MemAlloc(&b, n));
	CK(cu.MemAlloc(&c, n));
	fill_bytes(a, 1, n, 0);
	fill_bytes(b, 2, n, 0);
	fill_bytes(c, 3, n, 0);
	CK(cu.CtxSynchronize());
	CK(cu.MemAlloc(&d, n));
	CK(cu.MemAlloc(&e, n));
	fill_bytes(d, 4, n, 0);
	fill_bytes(e, 5, n, 0);
	CK(cu.CtxSynchronize());
	CUdeviceptr bufs[2] = { a + 4096, b };
	for (int k = 0; k < 2; k++) {
		CUdeviceptr got = 0, base = 0;
		size_t size = 0;
		CK(cu.PointerGetAttribute(&got, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, bufs[k]));
		if (got != bufs[k])
			FAIL("the device pointer of 0x%llx is 0x%llx", (unsigned long long)bufs[k],
			    (unsigned long long)got);
		CK(cu.MemGetAddressRange(&base, &size, bufs[k]));
		if (base > bufs[k] || base + size < bufs[k] + n - (bufs[k] - (k ? b : a)))
			FAIL("the range of 0x%llx is 0x%llx + %zu", (unsigned long long)bufs[k],
			    (unsigned long long)base, size);
		launch_copy(c, k ? b : a, n, 0);
		check_bytes(c, (uint32_t)(k + 1), n, 0, "copy of a queried buffer", k);
	}
	check_bytes(d, 4, n, 0, "d", 0);
	check_bytes(e, 5, n, 0, "e", 0);
	CUdeviceptr all[5] = { a, b, c, d, e };
	for (int k = 0; k < 5; k++)
		CK(cu.MemFree(all[k]));
	CK(cu.CtxSynchronize());
	return 0;
}

/*
 * The job's own virtual memory, as XLA allocates every buffer: maps (1
 * unless given) handles of 4 MiB mapped side by side into a range it reserved, each filled by a
 * kernel, copied, read back, and unmapped; twice, the second time at the
 * same addresses.
 */
static int
scenario_vmm(int maps)
{
	const size_t n = (size_t)4 << 20;
	CUmemAllocationProp prop;
	memset(&prop, 0, sizeof prop);
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = 0;
	CUmemAccessDesc acc;
	memset(&acc, 0, sizeof acc);
	acc.location = prop.location;
	acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	CUdeviceptr va, out;
	CUmemGenericAllocationHandle h[8];
	if (maps < 1 || maps > 8)
		return 2;
	CK(cu.MemAddressReserve(&va, n * (size_t)maps, 0, 0, 0));
	CK(cu.MemAlloc(&out, n));
	for (int round = 0; round < 2; round++) {
		for (int k = 0; k < maps; k++) {
			CUdeviceptr at = va + n * (size_t)k;
			uint32_t v = (uint32_t)(10 + round + 2 * k);
			CK(cu.MemCreate(&h[k], n, &prop, 0));
			CK(cu.MemMap(at, n, 0, h[k], 0));
			CK(cu.MemSetAccess(at, n, &acc, 1));
			fill_bytes(at, v, n, 0);
		}
		for (int k = 0; k < maps; k++) {
			launch_copy(out, va + n * (size_t)k, n, 0);
			check_bytes(out, (uint32_t)(10 + round + 2 * k), n, 0, "copy of mapped memory",
			    round);
		}
		CK(cu.CtxSynchronize());
		for (int k = 0; k < maps; k++) {
			CK(cu.MemUnmap(va + n * (size_t)k, n));
			CK(cu.MemRelease(h[k]));
		}
	}
	CK(cu.MemAddressFree(va, n * (size_t)maps));
	CK(cu.MemFree(out));
	return 0;
}

/*
 * Stream-ordered allocations from the device's default pool, as XLA's
 * cuda_async allocator makes them: each iteration allocates three 4 MiB
 * buffers on s, fills and combines them, checks the result, and frees them
 * on s. Under a limit of a few buffers, ebb serves and moves them.
 */
static int
scenario_pool(int iters)
{
	const size_t n = (size_t)4 << 20;
	CUmemoryPool pool;
	CUstream s;

	CK(cu.DeviceGetDefaultMemPool(&pool, 0));
	CK(cu.StreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CUdeviceptr keep[6];
	for (int k = 0; k < 6; k++) {
		CK(cu.MemAllocFromPoolAsync(&keep[k], n, pool, s));
		fill_bytes(keep[k], (uint32_t)(100 + k), n, s);
	}
	for (int it = 0; it < iters; it++) {
		CUdeviceptr a, b, c;
		CK(cu.MemAllocFromPoolAsync(&a, n, pool, s));
		CK(cu.MemAllocFromPoolAsync(&b, n, pool, s));
		CK(cu.MemAllocFromPoolAsync(&c, n, pool, s));
		fill_bytes(a, (uint32_t)it, n, s);
		launch_copy(b, a, n, s);
		launch_copy(c, keep[it % 6], n, s);
		check_bytes(b, (uint32_t)it, n, s, "pool buffer", it);
		check_bytes(c, (uint32_t)(100 + it % 6), n, s, "kept pool buffer", it);
		CK(cu.MemFreeAsync(a, s));
		CK(cu.MemFreeAsync(b, s));
		CK(cu.MemFreeAsync(c, s));
	}
	for (int k = 0; k < 6; k++)
		CK(cu.MemFreeAsync(keep[k], s));
	CK(cu.StreamSynchronize(s));
	print_driver_stats();
	return 0;
}

/*
 * An offload lands while restores queued before it still copy: under a
 * 16 MiB limit, a, b, d, e (4 MiB each); f and g send a and b to the host
 * and are freed; a and b come back on use, their copies queued one behind
 * the other; then c sends d to the host. Its memory is for c once d's copy
 * has landed, not once b's has too (the test checks the host's wait).
 */
static int
scenario_queues(void)
{
	const size_t n = (size_t)4 << 20;
	CUdeviceptr a, b, c, d, e, f, g;

	CK(cu.MemAlloc(&a, n));
	CK(cu.MemAlloc(&b, n));
	CK(cu.MemAlloc(&d, n));
	CK(cu.MemAlloc(&e, n));
	fill_bytes(a, 1, n, 0);
	fill_bytes(b, 2, n, 0);
	fill_bytes(d, 4, n, 0);
	fill_bytes(e, 5, n, 0);
	CK(cu.CtxSynchronize());
	CK(cu.MemAlloc(&f, n));	/* a goes to the host */
	CK(cu.MemAlloc(&g, n));	/* b goes to the host */
	CK(cu.CtxSynchronize());
	CK(cu.MemFree(f));
	CK(cu.MemFree(g));
	launch_copy(a, a, n, 0);	/* uses: a and b come back, one copy behind the other */
	launch_copy(b, b, n, 0);
	CK(cu.MemAlloc(&c, n));	/* d goes to the host */
	fill_bytes(c, 3, n, 0);
	check_bytes(a, 1, n, 0, "a", 0);
	check_bytes(b, 2, n, 0, "b", 0);
	check_bytes(c, 3, n, 0, "c", 0);
	check_bytes(d, 4, n, 0, "d", 0);
	check_bytes(e, 5, n, 0, "e", 0);
	CK(cu.MemFree(a));
	CK(cu.MemFree(b));
	CK(cu.MemFree(c));
	CK(cu.MemFree(d));
	CK(cu.MemFree(e));
	CK(cu.CtxSynchronize());
	return 0;
}

/*
 * Room from the job's frees comes as the device passes them, oldest first:
 * under a 16 MiB limit with nothing movable (run it with a large
 * EBB_MIN_OFFLOAD_BYTES), x, y (4 MiB) and z (8 MiB); x's last use ends
 * after a 100 ms kernel, y's after a 300 ms one more; both are freed, and a
 * new 4 MiB buffer waits for the device to pass x's use, not y's. Prints
 * the milliseconds the allocation took.
 */
static int
scenario_frees(void)
{
	const size_t n = (size_t)4 << 20;
	CUdeviceptr x, y, z, w;
	struct timespec t0, t1;

	CK(cu.MemAlloc(&x, n));
	CK(cu.MemAlloc(&y, n));
	CK(cu.MemAlloc(&z, 2 * n));
	launch_sleep(100000, 0);
	fill_bytes(x, 1, n, 0);
	CK(cu.MemFree(x));
	launch_sleep(300000, 0);
	fill_bytes(y, 2, n, 0);
	CK(cu.MemFree(y));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	CK(cu.MemAlloc(&w, n));
	clock_gettime(CLOCK_MONOTONIC, &t1);
	fill_bytes(w, 3, n, 0);
	check_bytes(w, 3, n, 0, "w", 0);
	CK(cu.MemFree(w));
	CK(cu.MemFree(z));
	CK(cu.CtxSynchronize());
	printf("allocation took %.0f ms\n", (double)(t1.tv_sec - t0.tv_sec) * 1e3 +
	    (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
	return 0;
}

/*
 * A buffer freed while a cancelled copy of it to the host is still queued,
 * and its memory taken back once the device has passed the free. Run under
 * a 12 MiB limit with FAKECUDA_COPY_DELAY_US=300000 (and the bandwidths
 * given, so that none is measured): x, y, z (4 MiB each) are last used
 * behind a 400 ms kernel on s. Another thread allocates 4 MiB, which sends
 * x to the host: the copy starts at about 400 ms and reads x at about 700.
 * x is used again at once, which cancels the copy (x stays), and freed;
 * the device passes the free at about 400 ms. At about 500 ms a 2 MiB
 * allocation needs room, and the only memory to take is x's. The cancelled
 * copy still reads x: x must stay mapped until that copy is done.
 */
struct cancelfree_arg {
	CUdeviceptr c;
};

static void *
cancelfree_thread(void *p)
{
	struct cancelfree_arg *a = p;
	CK(cu.CtxSetCurrent(ctx));
	CK(cu.MemAlloc(&a->c, (size_t)4 << 20));
	return NULL;
}

static void
sleep_ms(long ms)
{
	const struct timespec t = { ms / 1000, ms % 1000 * 1000000L };
	nanosleep(&t, NULL);
}

static int
scenario_cancelfree(void)
{
	const size_t n = (size_t)4 << 20;
	CUstream s;
	CUdeviceptr x, y, z, d;
	pthread_t t;
	struct cancelfree_arg a = { 0 };

	CK(cu.StreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CK(cu.MemAlloc(&x, n));
	CK(cu.MemAlloc(&y, n));
	CK(cu.MemAlloc(&z, n));
	launch_sleep(400000, s);
	fill_bytes(x, 1, n, s);
	fill_bytes(y, 2, n, s);
	fill_bytes(z, 3, n, s);
	pthread_create(&t, NULL, cancelfree_thread, &a);
	sleep_ms(50);		/* its allocation has sent x on its way */
	fill_bytes(x, 4, n, s);	/* x back: its copy is cancelled */
	CK(cu.MemFreeAsync(x, s));
	sleep_ms(450);		/* the device has passed the free; x's copy runs at 700 ms */
	CK(cu.MemAlloc(&d, n / 2));
	fill_bytes(d, 5, n / 2, s);
	check_bytes(d, 5, n / 2, s, "d", 0);
	pthread_join(t, NULL);
	fill_bytes(a.c, 6, n, s);
	check_bytes(a.c, 6, n, s, "c", 0);
	check_bytes(y, 2, n, s, "y", 0);
	check_bytes(z, 3, n, s, "z", 0);
	CK(cu.MemFree(a.c));
	CK(cu.MemFree(d));
	CK(cu.MemFree(y));
	CK(cu.MemFree(z));
	CK(cu.CtxSynchronize());
	return 0;
}

struct offload_arg {
	int rounds;
	unsigned seed;
};

static void *
offload_thread(void *p)
{
	struct offload_arg *a = p;
	CK(cu.CtxSetCurrent(ctx));
	offload_rounds(a->rounds, a->seed);
	return NULL;
}

/* Several threads, each with its own buffers and streams, at once. */
static int
scenario_offload_threads(int nthreads)
{
	pthread_t t[16];
	struct offload_arg a[16];

	if (nthreads > 16)
		nthreads = 16;
	for (int i = 0; i < nthreads; i++) {
		a[i].rounds = 120;
		a[i].seed = seed_of() + (unsigned)i * 7919u;
		pthread_create(&t[i], NULL, offload_thread, &a[i]);
	}
	for (int i = 0; i < nthreads; i++)
		pthread_join(t[i], NULL);
	CK(cu.CtxSynchronize());
	print_driver_stats();
	return 0;
}

/*
 * Two threads on one stream, under a limit of three 4 MiB buffers x, z and
 * v. Run with FAKECUDA_LAUNCH_QUEUE_DELAY_US=300000: a launch then reaches
 * the driver's queue 300 ms after ebb has seen it. A second thread fills x
 * by kernel on the shared stream s; while that launch is on its way, the
 * main thread sets z on s many times (operations later than the launch that
 * reach the driver first), synchronises s, and allocates w, for which one
 * buffer must go to the host. v, queued behind a long kernel on a stream of
 * its own, is the one that may go: x's use has not reached the driver, and
 * neither has an operation before z's. Every value must survive.
 */
struct shared_arg {
	CUdeviceptr x;
	CUstream s;
};

static void *
shared_thread(void *p)
{
	struct shared_arg *a = p;
	CK(cu.CtxSetCurrent(ctx));
	launch_fill(a->x, 9, ((size_t)4 << 20) / 4, a->s);
	return NULL;
}

static int
scenario_shared_stream(void)
{
	const size_t n = (size_t)4 << 20;
	CUstream s, s2;
	CUdeviceptr x, z, v, w;
	pthread_t t;

	CK(cu.StreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CK(cu.StreamCreate(&s2, CU_STREAM_NON_BLOCKING));
	CK(cu.MemAlloc(&x, n));
	CK(cu.MemAlloc(&v, n));
	CK(cu.MemAlloc(&z, n));
	CK(cu.MemsetD8Async(x, 1, n, s));
	CK(cu.MemsetD8Async(v, 2, n, s));
	CK(cu.MemsetD8Async(z, 3, n, s));
	CK(cu.StreamSynchronize(s));
	launch_sleep(1000000, s2);	/* v stays in use for a second */
	CK(cu.MemsetD8Async(v, 7, n, s2));
	struct shared_arg a = { x, s };
	pthread_create(&t, NULL, shared_thread, &a);
	sleep_ms(50);		/* its launch is on its way to the driver */
	for (int i = 0; i < 40; i++)
		CK(cu.MemsetD8Async(z, (unsigned char)(4 + i % 2), n, s));
	CK(cu.StreamSynchronize(s));
	CK(cu.MemAlloc(&w, n));
	CK(cu.MemsetD8Async(w, 6, n, s));
	pthread_join(t, NULL);
	check_bytes(x, 9, n, s, "x", 0);
	check_bytes(z, 0x05050505u, n, s, "z", 0);
	check_bytes(w, 0x06060606u, n, s, "w", 0);
	check_bytes(v, 0x07070707u, n, s2, "v", 0);
	CK(cu.MemFree(x));
	CK(cu.MemFree(z));
	CK(cu.MemFree(v));
	CK(cu.MemFree(w));
	CK(cu.CtxSynchronize());
	return 0;
}

/*
 * As shared-stream, for a use that ebb no longer keeps among a buffer's
 * streams (it keeps the EBB_BUF_STREAMS, 4, most recent). Run with
 * FAKECUDA_LAUNCH_QUEUE_DELAY_US=300000. A second thread fills x by kernel
 * on s; while that launch is on its way to the driver, the main thread reads
 * x on four other streams (copies of a few bytes, which reach the driver
 * first), so that s drops out of x's streams; then it uses z and v (x is the
 * least recently used) and allocates w, for which one buffer must go to the
 * host: not x, whose fill has not reached the driver. Every value must
 * survive.
 */
static int
scenario_overflow_stream(void)
{
	const size_t n = (size_t)4 << 20;
	CUstream s, o[4];
	CUdeviceptr x, z, v, w, peek;
	pthread_t t;

	CK(cu.StreamCreate(&s, CU_STREAM_NON_BLOCKING));
	for (int i = 0; i < 4; i++)
		CK(cu.StreamCreate(&o[i], CU_STREAM_NON_BLOCKING));
	CK(cu.MemAlloc(&x, n));
	CK(cu.MemAlloc(&z, n));
	CK(cu.MemAlloc(&v, n));
	CK(cu.MemAlloc(&peek, 4 * 4096));
	CK(cu.MemsetD8Async(x, 1, n, s));
	CK(cu.StreamSynchronize(s));
	struct shared_arg a = { x, s };
	pthread_create(&t, NULL, shared_thread, &a);
	sleep_ms(50);		/* its launch is on its way to the driver */
	for (int i = 0; i < 4; i++) {
		CK(cu.MemcpyDtoDAsync(peek + (CUdeviceptr)i * 4096, x, 4096, o[i]));
		CK(cu.StreamSynchronize(o[i]));
	}
	CK(cu.MemsetD8Async(z, 3, n, o[0]));
	CK(cu.MemsetD8Async(v, 4, n, o[0]));
	CK(cu.StreamSynchronize(o[0]));
	CK(cu.MemAlloc(&w, n));
	CK(cu.MemsetD8Async(w, 6, n, o[0]));
	pthread_join(t, NULL);
	check_bytes(x, 9, n, s, "x", 0);
	check_bytes(z, 0x03030303u, n, o[0], "z", 0);
	check_bytes(v, 0x04040404u, n, o[0], "v", 0);
	check_bytes(w, 0x06060606u, n, o[0], "w", 0);
	CK(cu.MemFree(x));
	CK(cu.MemFree(z));
	CK(cu.MemFree(v));
	CK(cu.MemFree(w));
	CK(cu.MemFree(peek));
	CK(cu.CtxSynchronize());
	return 0;
}

/*
 * A training loop in miniature: weights that stay, a forward pass that keeps
 * an activation of one of four sizes per layer, a backward pass that uses
 * them in reverse order and frees them, a sync. Prints the driver's
 * cuMemCreate count after the warm-up iterations and at the end, so a test
 * can see that steady state creates no handles.
 */
static int
scenario_train(int iters)
{
	enum { L = 16 };
	CUstream s;
	CUdeviceptr w[4], act[L];
	size_t sz[4] = { 2u << 20, 3u << 20, 4u << 20, 6u << 20 };
	void (*stats)(struct fakecuda_stats *) = (void (*)(struct fakecuda_stats *))
	    dlsym(driver_lib ? driver_lib : RTLD_DEFAULT, "fakecuda_stats");
	struct fakecuda_stats fs;

	CK(cu.StreamCreate(&s, 0));
	for (int i = 0; i < 4; i++) {
		CK(cu.MemAlloc(&w[i], sz[i]));
		fill_bytes(w[i], 7u, sz[i], s);
	}
	for (int it = 0; it < iters; it++) {
		for (int l = 0; l < L; l++) {
			CK(cu.MemAllocAsync(&act[l], sz[l % 4], s));
			fill_bytes(act[l], (uint32_t)(it * 100 + l), sz[l % 4], s);
			launch_copy(act[l], act[l], 4096, s);	/* uses the weights' neighbour: stays simple */
		}
		for (int l = L - 1; l >= 0; l--) {
			uint32_t v;
			CK(cu.MemcpyDtoHAsync(&v, act[l] + sz[l % 4] - 4, 4, s));
			CK(cu.StreamSynchronize(s));
			if (v != (uint32_t)(it * 100 + l))
				FAIL("iteration %d layer %d: got %u", it, l, v);
			CK(cu.MemFreeAsync(act[l], s));
		}
		if (it == 4 && stats != NULL) {
			stats(&fs);
			printf("creates after warm-up: %llu\n", (unsigned long long)fs.mem_create_calls);
		}
	}
	if (stats != NULL) {
		stats(&fs);
		printf("creates at the end: %llu\n", (unsigned long long)fs.mem_create_calls);
	}
	return 0;
}

/*
 * A host that runs ahead of the device, as a training job's does: each
 * layer allocates small and large buffers stream-ordered, launches a kernel
 * that takes the device a while and writes them, and frees them; one sync
 * per iteration. Checks one value per layer at the sync.
 */
static int
scenario_ahead(int iters)
{
	enum { L = 64, SMALL = 64 << 10, BIG = 3 << 20 };
	CUstream s;
	CUdeviceptr small[L], big[L], out;
	uint32_t got[L];

	CK(cu.StreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CK(cu.MemAlloc(&out, L * 4));
	for (int it = 0; it < iters; it++) {
		for (int l = 0; l < L; l++) {
			CK(cu.MemAllocAsync(&small[l], SMALL, s));
			CK(cu.MemAllocAsync(&big[l], BIG, s));
			launch_sleep(20, s);
			fill_bytes(small[l], (uint32_t)(it * 1000 + l), SMALL, s);
			fill_bytes(big[l], (uint32_t)l, 4096, s);
			launch_copy(out + 4 * (CUdeviceptr)l, small[l], 4, s);
			if (l > 0) {
				CK(cu.MemFreeAsync(small[l - 1], s));
				CK(cu.MemFreeAsync(big[l - 1], s));
			}
		}
		CK(cu.MemFreeAsync(small[L - 1], s));
		CK(cu.MemFreeAsync(big[L - 1], s));
		CK(cu.MemcpyDtoHAsync(got, out, sizeof got, s));
		CK(cu.StreamSynchronize(s));
		for (int l = 0; l < L; l++)
			if (got[l] != (uint32_t)(it * 1000 + l))
				FAIL("iteration %d layer %d: got %u", it, l, got[l]);
	}
	print_driver_stats();
	return 0;
}

/*
 * What the planner is for: weights that stay, optimizer state used only at
 * the end of each iteration, a forward pass that keeps an activation per
 * layer and a backward pass that reads them in reverse, with compute time
 * (sleep kernels) for the copies to hide behind, one sync per iteration.
 * Checks every activation's last word each iteration and the optimizer
 * state (o += w with w = 1.0f) at the end.
 */
/* Spin the host for us microseconds (its own work, not a wait). */
static void
host_work(unsigned us)
{
	struct timespec t0, t;

	if (us == 0)
		return;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do
		clock_gettime(CLOCK_MONOTONIC, &t);
	while ((uint64_t)(t.tv_sec - t0.tv_sec) * 1000000u + (uint64_t)(t.tv_nsec - t0.tv_nsec) / 1000u <
	    us);
}

static int
scenario_plan(int iters)
{
	enum { L = 12, NW = 4, NO = 2 };
	/* every buffer this many times larger */
	size_t scale = getenv("WORKLOAD_SCALE") ? (size_t)atoi(getenv("WORKLOAD_SCALE")) : 1;
	const size_t wsz = (4u << 20) * scale, osz = (8u << 20) * scale;
	const size_t asz[3] = { (2u << 20) * scale, (4u << 20) * scale, (6u << 20) * scale };
	/* each layer also allocates a temporary, forward and backward, that it
	 * fills from its activation and frees: 2 to 8 MiB, a size a layer */
	int temps = getenv("WORKLOAD_TEMPS") != NULL && atoi(getenv("WORKLOAD_TEMPS")) != 0;
	/* the temporaries this many times larger (WORKLOAD_TEMP_SCALE) */
	size_t tscale = getenv("WORKLOAD_TEMP_SCALE") ?
	    (size_t)atoi(getenv("WORKLOAD_TEMP_SCALE")) : 1;
	const size_t tsz[4] = { (2u << 20) * tscale, (4u << 20) * tscale, (6u << 20) * tscale,
		(8u << 20) * tscale };
	CUstream s;
	CUdeviceptr w[NW], o[NO], act[L], res;
	uint32_t got[L];
	uint64_t sum = 0xcbf29ce484222325ULL;
	unsigned us = (unsigned)(getenv("WORKLOAD_LAYER_US") ? atoi(getenv("WORKLOAD_LAYER_US")) : 400);
	/* from this iteration on the activations have other sizes (a departure) */
	int change = getenv("WORKLOAD_CHANGE_AT") ? atoi(getenv("WORKLOAD_CHANGE_AT")) : -1;
	/* micro-batches of gradient accumulation: forward and backward this many
	 * times an iteration, no sync between them */
	int accum = getenv("WORKLOAD_ACCUM") ? atoi(getenv("WORKLOAD_ACCUM")) : 1;
	/* the host's own work after each layer's launches, in us (a job whose
	 * host sets the pace) */
	unsigned host_us = (unsigned)(getenv("WORKLOAD_HOST_US") ? atoi(getenv("WORKLOAD_HOST_US")) : 0);
	/* after each layer's launches, the host asks for the device pointer of
	 * the layer before's activation, which the plan offloads there (a
	 * launcher asking about its arguments, as Triton's does) */
	int query = getenv("WORKLOAD_QUERY") != NULL && atoi(getenv("WORKLOAD_QUERY")) != 0;
	/* from this iteration on every copy takes WORKLOAD_SLOW_LINK_US more (the
	 * fake driver's fakecuda_set_copy_delay_us): a link that slows after ebb
	 * has learned the job */
	int slow_at = getenv("WORKLOAD_SLOW_LINK_AT") ? atoi(getenv("WORKLOAD_SLOW_LINK_AT")) : -1;
	unsigned slow_us = (unsigned)(getenv("WORKLOAD_SLOW_LINK_US") ?
	    atoi(getenv("WORKLOAD_SLOW_LINK_US")) : 20000);
	/* from this iteration on the host's own work after each layer's
	 * launches is WORKLOAD_SLOW_HOST_US (a job that slows by itself after
	 * ebb has learned it) */
	int slow_host_at = getenv("WORKLOAD_SLOW_HOST_AT") ? atoi(getenv("WORKLOAD_SLOW_HOST_AT")) : -1;
	/* from this iteration on each layer also launches a kernel the job has
	 * not launched before (sum_u32 over 16 words of its activation, into
	 * its first 8 bytes): a job whose kernels change after ebb learned it */
	int new_kernel_at = getenv("WORKLOAD_NEW_KERNEL_AT") ?
	    atoi(getenv("WORKLOAD_NEW_KERNEL_AT")) : -1;
	unsigned slow_host_us = (unsigned)(getenv("WORKLOAD_SLOW_HOST_US") ?
	    atoi(getenv("WORKLOAD_SLOW_HOST_US")) : 20000);
	/* from this iteration on the job also holds WORKLOAD_HOARD_MIB buffers
	 * of 1 MiB (small: a slab's) from the middle of its forward pass (with
	 * WORKLOAD_TEMPS, while that layer's temporary lives) to the end of its
	 * backward pass: memory ebb learned the iteration without, which no
	 * operation uses */
	int hoard_at = getenv("WORKLOAD_HOARD_AT") ? atoi(getenv("WORKLOAD_HOARD_AT")) : -1;
	/* every this many iterations (the last of each K) the job fills the
	 * middle layer's activation again with what it holds: one launch more,
	 * as a job that logs every K steps has (a departure from the iteration
	 * learned, and a detour: the next iteration is as before) */
	int detour_every = getenv("WORKLOAD_DETOUR_EVERY") ?
	    atoi(getenv("WORKLOAD_DETOUR_EVERY")) : 0;
	/* with WORKLOAD_TEMPS, each layer's forward also keeps a buffer of this
	 * many MiB (0: none), allocated while its temporary lives and freed in
	 * its backward: small buffers the plan keeps, each beside a temporary
	 * that is gone soon (in the arena, each pins a chunk the temporaries
	 * leave mostly free) */
	int saved_mib = getenv("WORKLOAD_SAVED_MIB") ? atoi(getenv("WORKLOAD_SAVED_MIB")) : 0;
	CUdeviceptr saved[L];
	int hoard_mib = getenv("WORKLOAD_HOARD_MIB") ? atoi(getenv("WORKLOAD_HOARD_MIB")) : 16;
	CUdeviceptr hoard[256];
	if (hoard_mib < 0 || hoard_mib > 256)
		FAIL("WORKLOAD_HOARD_MIB=%d: 0 to 256", hoard_mib);

	CK(cu.StreamCreate(&s, 0));
	for (int i = 0; i < NW; i++) {
		CK(cu.MemAlloc(&w[i], wsz));
		fill_bytes(w[i], 0x3f800000u, wsz, s);	/* 1.0f */
	}
	for (int i = 0; i < NO; i++) {
		CK(cu.MemAlloc(&o[i], osz));
		fill_bytes(o[i], 0, osz, s);
	}
	CK(cu.MemAlloc(&res, L * sizeof(uint32_t)));
	for (int it = 0; it < iters; it++) {
		int shift = change >= 0 && it >= change;
		if (it == slow_at) {
			void (*set)(unsigned) = (void (*)(unsigned))dlsym(driver_lib ? driver_lib :
			    RTLD_DEFAULT, "fakecuda_set_copy_delay_us");
			if (set == NULL)
				FAIL("WORKLOAD_SLOW_LINK_AT needs the fake driver");
			set(slow_us);
		}
		if (it == slow_host_at)
			host_us = slow_host_us;
		for (int mb = 0; mb < accum; mb++) {
			for (int l = 0; l < L; l++) {
				size_t n = asz[(l + shift) % 3];
				CK(cu.MemAllocAsync(&act[l], n, s));
				launch_copy(act[l], w[l % NW], 4096, s);	/* reads a weight */
				fill_bytes(act[l] + 4096, (uint32_t)(it * 1000 + l), n - 4096, s);
				if (detour_every > 0 && it % detour_every == detour_every - 1 &&
				    l == L / 2 && mb == 0)
					fill_bytes(act[l] + 4096, (uint32_t)(it * 1000 + l), n - 4096, s);
				if (new_kernel_at >= 0 && it >= new_kernel_at) {
					struct fakecuda_sum_u32_params up = { (uint64_t *)act[l],
						(const uint32_t *)(act[l] + 4096), 16 };
					void *args[] = { &up.out, &up.in, &up.n };
					CK(cu.LaunchKernel(k_sum, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
				}
				launch_sleep(us, s);
				host_work(host_us);
				int hoarding = hoard_at >= 0 && it >= hoard_at && l == L / 2;
				if (temps) {
					CUdeviceptr t;
					CK(cu.MemAllocAsync(&t, tsz[l % 4], s));
					launch_copy(t, act[l], 4096, s);
					if (saved_mib > 0) {
						CK(cu.MemAllocAsync(&saved[l], (size_t)saved_mib << 20, s));
						launch_copy(saved[l], act[l], 4096, s);
					}
					for (int k = 0; hoarding && k < hoard_mib; k++)
						CK(cu.MemAllocAsync(&hoard[k], 1u << 20, s));
					CK(cu.MemFreeAsync(t, s));
				} else {
					for (int k = 0; hoarding && k < hoard_mib; k++)
						CK(cu.MemAllocAsync(&hoard[k], 1u << 20, s));
				}
				if (query && l > 0) {
					CUdeviceptr got_ptr = 0;
					CK(cu.PointerGetAttribute(&got_ptr, CU_POINTER_ATTRIBUTE_DEVICE_POINTER,
					    act[l - 1]));
					if (got_ptr != act[l - 1])
						FAIL("the device pointer of 0x%llx is 0x%llx",
						    (unsigned long long)act[l - 1], (unsigned long long)got_ptr);
				}
			}
			for (int l = L - 1; l >= 0; l--) {
				size_t n = asz[(l + shift) % 3];
				launch_sleep(2 * us, s);
				host_work(host_us);
				if (temps) {
					CUdeviceptr t;
					CK(cu.MemAllocAsync(&t, tsz[(l + 1) % 4], s));
					launch_copy(t, act[l], 4096, s);
					CK(cu.MemFreeAsync(t, s));
				}
				launch_copy(res + (CUdeviceptr)l * 4, act[l] + n - 4, 4, s);
				CK(cu.MemFreeAsync(act[l], s));
				if (temps && saved_mib > 0) {
					/* read, so that the plan sees it used in the backward */
					launch_copy(saved[l], saved[l] + 4096, 4, s);
					CK(cu.MemFreeAsync(saved[l], s));
				}
			}
			for (int k = 0; hoard_at >= 0 && it >= hoard_at && k < hoard_mib; k++)
				CK(cu.MemFreeAsync(hoard[k], s));
		}
		for (int i = 0; i < NO; i++)
			launch_axpy(o[i], w[i], 1.0f, wsz / 4, s);
		CK(cu.MemcpyDtoHAsync(got, res, sizeof got, s));
		CK(cu.StreamSynchronize(s));
		for (int l = 0; l < L; l++)
			if (got[l] != (uint32_t)(it * 1000 + l))
				FAIL("iteration %d layer %d: got %u", it, l, got[l]);
		for (int l = 0; l < L; l++)
			sum = (sum ^ got[l]) * 0x100000001b3ULL;
	}
	for (int i = 0; i < NO; i++) {
		float *h = malloc(wsz);
		if (h == NULL)
			FAIL("malloc");
		CK(cu.MemcpyDtoHAsync(h, o[i], wsz, s));
		CK(cu.StreamSynchronize(s));
		for (size_t k = 0; k < wsz / 4; k++) {
			if (h[k] != (float)iters)
				FAIL("optimizer state %d word %zu is %g, want %d", i, k, (double)h[k], iters);
			uint32_t bits;
			memcpy(&bits, &h[k], sizeof bits);
			sum = (sum ^ bits) * 0x100000001b3ULL;
		}
		free(h);
	}
	/* every value read back, hashed: two runs that computed the same print the same */
	printf("checksum %016llx\n", (unsigned long long)sum);
	print_driver_stats();
	return 0;
}

/*
 * Kernels whose write sets the test knows, each writing what it changes with
 * values that differ from one iteration to the next: fill (writes x, y),
 * axpy (writes y, reads x), rand_state (writes z and, through a pointer that
 * looks like an input, its state), square_sum (writes the sum and its
 * scratch, reads z), struct_ptrs (reads x and y through a struct, writes o),
 * gather (reads a table of pointers and writes through it into x and y,
 * which it does not reference). With WORKLOAD_STAMP=1, also stamp
 * (writes t with a count of its launches: not deterministic) and sum_u32
 * (reads t, writes the sum's second word). With WORKLOAD_SEEDPTR=k, in the
 * iterations of k's parity rand_state's seed is an address inside a buffer
 * of its own, which ebb takes for a reference (the checksum then leaves the
 * sum out: the address, and so the seed, changes from run to run); with
 * WORKLOAD_SEEDPTR2=1 too, in the others an address inside a second buffer,
 * of another size. With WORKLOAD_FARDATA=1, the job also maps memory of its
 * own at 32 TiB (or 256 GiB, where a sanitizer holds that), far below the
 * driver's allocations; fill writes e, then copy (writes e, reads d) copies
 * d's 64-bit words of 64 TiB + i * 8 over it: between the two, inside
 * [lowest, highest tracked address), and in no tracked buffer's region
 * (data, not pointers). With WORKLOAD_AUXPTR=k, fill_opt fills f and, in
 * the iterations of k's parity, writes its optional output too, a buffer
 * of its own (aux), which its launch then references (one more buffer than
 * in the others). One sync an iteration; prints a checksum of every sum and
 * of o's last word, the same with and without ebb.
 */
static int
scenario_writesets(int iters)
{
	const size_t n = 2u << 20, words = n / 4;
	CUstream s;
	CUdeviceptr x, y, z, o, t, state, scratch, sum, table;
	uint64_t check = 0xcbf29ce484222325ULL, zero = 0;
	int stamp = getenv("WORKLOAD_STAMP") != NULL && atoi(getenv("WORKLOAD_STAMP")) != 0;
	int seedptr = getenv("WORKLOAD_SEEDPTR") != NULL ? atoi(getenv("WORKLOAD_SEEDPTR")) : -1;
	int fardata = getenv("WORKLOAD_FARDATA") != NULL && atoi(getenv("WORKLOAD_FARDATA")) != 0;
	int auxptr = getenv("WORKLOAD_AUXPTR") != NULL ? atoi(getenv("WORKLOAD_AUXPTR")) : -1;

	CK(cu.StreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CK(cu.MemAlloc(&state, n));
	CK(cu.MemAlloc(&scratch, n));
	CK(cu.MemAlloc(&sum, n));
	CK(cu.MemAlloc(&table, n));	/* its own mapping: in the plan's profile */
	CUdeviceptr other = 0;
	if (seedptr >= 0)
		CK(cu.MemAlloc(&other, 3 * n / 2));	/* of a size none of the others has */
	CUdeviceptr other2 = 0;
	if (seedptr >= 0 && getenv("WORKLOAD_SEEDPTR2") != NULL && atoi(getenv("WORKLOAD_SEEDPTR2")))
		CK(cu.MemAlloc(&other2, 7 * n / 4));	/* nor this one */
	CUdeviceptr f = 0, aux = 0;
	if (auxptr >= 0) {
		CK(cu.MemAlloc(&f, n));
		CK(cu.MemAlloc(&aux, 5 * n / 4));	/* of a size none of the others has */
	}
	CUdeviceptr far = 0, d = 0, e = 0;
	CUmemGenericAllocationHandle farh = 0;
	if (fardata) {
		/* 32 TiB, else 256 GiB: free of the sanitizers' shadow memory */
		const CUdeviceptr ats[] = { (CUdeviceptr)32 << 40, (CUdeviceptr)256 << 30 };
		CUmemAllocationProp prop;
		memset(&prop, 0, sizeof prop);
		prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
		prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
		CUmemAccessDesc acc;
		memset(&acc, 0, sizeof acc);
		acc.location = prop.location;
		acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
		for (size_t i = 0; i < sizeof ats / sizeof *ats; i++) {
			CK(cu.MemAddressReserve(&far, n, 0, ats[i], 0));
			if (far == ats[i])
				break;
			CK(cu.MemAddressFree(far, n));
			far = 0;
		}
		if (far == 0)
			FAIL("cuMemAddressReserve gave %#llx, not %#llx or %#llx as asked",
			    (unsigned long long)far, (unsigned long long)ats[0],
			    (unsigned long long)ats[1]);
		CK(cu.MemCreate(&farh, n, &prop, 0));
		CK(cu.MemMap(far, n, 0, farh, 0));
		CK(cu.MemSetAccess(far, n, &acc, 1));
		CK(cu.MemAlloc(&d, n));
		CK(cu.MemAlloc(&e, n));
		uint64_t *words64 = malloc(n);
		if (words64 == NULL)
			FAIL("out of host memory");
		for (size_t i = 0; i < n / 8; i++)
			words64[i] = ((uint64_t)64 << 40) + i * 8;
		CK(cu.MemcpyHtoD(d, words64, n));
		free(words64);
	}
	CK(cu.MemcpyHtoD(state, &zero, sizeof zero));
	for (int it = 0; it < iters; it++) {
		CK(cu.MemAllocAsync(&x, n, s));
		CK(cu.MemAllocAsync(&y, n, s));
		CK(cu.MemAllocAsync(&z, n, s));
		CK(cu.MemAllocAsync(&o, n, s));
		if (stamp) {
			CK(cu.MemAllocAsync(&t, n, s));
			struct fakecuda_stamp_u32_params tp = { (uint32_t *)t, words };
			void *ta[] = { &tp.dst, &tp.n };
			CK(cu.LaunchKernel(k_stamp, 1, 1, 1, 32, 1, 1, 0, s, ta, NULL));
		}
		launch_fill(x, (uint32_t)it + 1, words, s);
		launch_fill(y, (uint32_t)it * 7 + 3, words, s);
		launch_axpy(y, x, 2.0f, words, s);
		/* WORKLOAD_SEEDPTR=k: in iterations of k's parity, a seed that is an
		 * address inside other (a word that looks like a pointer, by chance) */
		uint64_t seed = seedptr >= 0 && it % 2 == seedptr % 2 ? (uint64_t)other + 64 :
		    other2 != 0 ? (uint64_t)other2 + 64 : 42;
		struct fakecuda_rand_state_f32_params rp = { (float *)z, (uint64_t *)state, words,
			seed };
		void *ra[] = { &rp.dst, &rp.state, &rp.n, &rp.seed };
		CK(cu.LaunchKernel(k_rand_state, 1, 1, 1, 128, 1, 1, 0, s, ra, NULL));
		struct fakecuda_square_sum_f32_params sq = { (float *)sum, (const float *)z,
			(float *)scratch, words };
		void *sa[] = { &sq.dst, &sq.src, &sq.scratch, &sq.n };
		CK(cu.LaunchKernel(k_square_sum, 1, 1, 1, 128, 1, 1, 0, s, sa, NULL));
		struct fakecuda_struct_ptrs_params sp = { { (float *)x, (const float *)y, words },
			(float *)o };
		void *pa[] = { &sp.p, &sp.out };
		CK(cu.LaunchKernel(k_pair, 1, 1, 1, 32, 1, 1, 0, s, pa, NULL));
		CUdeviceptr ptrs[2] = { x, y };
		CK(cu.MemcpyHtoDAsync(table, ptrs, sizeof ptrs, s));
		struct fakecuda_gather_ptrs_params gp = { (void *const *)table, 2, (uint8_t)it };
		void *ga[] = { &gp.table, &gp.count, &gp.value };
		CK(cu.LaunchKernel(k_gather, 1, 1, 1, 32, 1, 1, 0, s, ga, NULL));
		if (fardata) {
			launch_fill(e, (uint32_t)it + 5, words, s);
			launch_copy(e, d, n, s);
		}
		if (auxptr >= 0) {
			struct fakecuda_fill_opt_u32_params fp = { (uint32_t *)f, words,
				it % 2 == auxptr % 2 ? (uint32_t *)aux : NULL, (uint32_t)it + 11 };
			void *fa[] = { &fp.dst, &fp.n, &fp.aux, &fp.value };
			CK(cu.LaunchKernel(k_fill_opt, 1, 1, 1, 32, 1, 1, 0, s, fa, NULL));
		}
		if (stamp) {
			struct fakecuda_sum_u32_params up = { (uint64_t *)(sum + 8), (const uint32_t *)t,
				words };
			void *ua[] = { &up.out, &up.in, &up.n };
			CK(cu.LaunchKernel(k_sum, 1, 1, 1, 32, 1, 1, 0, s, ua, NULL));
			CK(cu.MemFreeAsync(t, s));
		}
		float got[2];
		CK(cu.MemcpyDtoHAsync(&got[0], sum, sizeof got[0], s));
		CK(cu.MemcpyDtoHAsync(&got[1], o + n - 4, sizeof got[1], s));
		CK(cu.StreamSynchronize(s));
		uint32_t bits[2];
		memcpy(bits, got, sizeof bits);
		if (seedptr < 0)	/* (the seed, an address, changes the sum from run to run) */
			check = (check ^ bits[0]) * 0x100000001b3ULL;
		check = (check ^ bits[1]) * 0x100000001b3ULL;
		CK(cu.MemFreeAsync(x, s));
		CK(cu.MemFreeAsync(y, s));
		CK(cu.MemFreeAsync(z, s));
		CK(cu.MemFreeAsync(o, s));
	}
	if (fardata) {
		CK(cu.CtxSynchronize());
		CK(cu.MemUnmap(far, n));
		CK(cu.MemRelease(farh));
		CK(cu.MemAddressFree(far, n));
	}
	printf("checksum %016llx\n", (unsigned long long)check);
	return 0;
}

/*
 * A forward and a backward over layers, on one stream, as training runs
 * them: activation l is made by fill, then axpy in place from activation
 * l - 1 (cheap producers, from an input that stays), read by the next
 * layer, and read again only in the backward, which frees it. Every
 * backward step reads its activation into a fresh gradient and adds that to
 * acc, which lives across iterations. One sync an iteration; prints a
 * checksum of acc's last word after each, the same with and without ebb.
 * With WORKLOAD_LAYERS, that many layers (default 8); with WORKLOAD_DEPART=i,
 * iteration i departs from the others: in the middle of its forward, at
 * layer m = layers / 2, extra axpys change activations 1 .. m - 2 in place
 * (the inputs activations 2 .. m - 1 are made from). With
 * WORKLOAD_LEAD_US=us, each iteration's forward begins with a kernel that
 * keeps the stream busy that long, so that the host issues the iteration
 * well ahead of the device. With WORKLOAD_WORKSPACE=1, activation l is
 * made by one scaled_ws launch from activation l - 1 through a workspace
 * the job allocates once (as cuBLAS does), whose last word each iteration
 * also goes into the checksum: a replay that wrote it would show; with
 * WORKLOAD_WORKSPACE=2, by one flagged_ws launch instead, which is right
 * only where the workspace's first word is 0 (it leaves it so). With
 * WORKLOAD_PAIRS=1, each layer also makes u from its activation and v from
 * u (fill, then axpy), as an MLP makes an activation function's output and
 * a product from it, and adds v into acc; the backward reads v, then u,
 * then the activation: a replay of v reads u, itself a candidate. With WORKLOAD_SMALL=1, each
 * layer also allocates a 4 KiB buffer (from ebb's slabs), fills it, and
 * adds it into the last words of its activation, as a bias; the backward
 * frees it with the activation: a replay of the activation reads it.
 */
static int
scenario_recompute(int iters)
{
	/* a size that is not a whole number of mapping granules (2 MiB): the
	 * buffers' ranges (4 MiB) are larger than what the job asked for */
	const size_t n = 3u << 20, words = n / 4;
	int layers = getenv("WORKLOAD_LAYERS") != NULL ? atoi(getenv("WORKLOAD_LAYERS")) : 8;
	int depart = getenv("WORKLOAD_DEPART") != NULL ? atoi(getenv("WORKLOAD_DEPART")) : -1;
	int lead = getenv("WORKLOAD_LEAD_US") != NULL ? atoi(getenv("WORKLOAD_LEAD_US")) : 0;
	int wsp = getenv("WORKLOAD_WORKSPACE") != NULL ? atoi(getenv("WORKLOAD_WORKSPACE")) : 0;
	int pairs = getenv("WORKLOAD_PAIRS") != NULL && atoi(getenv("WORKLOAD_PAIRS")) != 0;
	int small = getenv("WORKLOAD_SMALL") != NULL && atoi(getenv("WORKLOAD_SMALL")) != 0;
	const size_t sn = 4096;
	CUdeviceptr a[65], u[65], v[65], b[65], g, acc, ws = 0;
	CUstream s;
	uint64_t check = 0xcbf29ce484222325ULL;

	if (layers < 1 || layers > 64)
		FAIL("WORKLOAD_LAYERS=%d: from 1 to 64", layers);
	CK(cu.StreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CK(cu.MemAlloc(&acc, n));
	launch_fill(acc, 0, words, s);
	/* (flagged_ws's flag takes a word before the staged values) */
	const size_t wsn = wsp == 2 ? n + 4096 : n;
	if (wsp) {
		CK(cu.MemAlloc(&ws, wsn));
		launch_fill(ws, 0, wsn / 4, s);
	}
	for (int it = 0; it < iters; it++) {
		CK(cu.MemAllocAsync(&a[0], n, s));
		/* (floats near 1: the bits of 1.0f and a little) */
		launch_fill(a[0], 0x3f800000u + (uint32_t)it + 1, words, s);
		if (lead > 0)
			launch_sleep((unsigned)lead, s);
		for (int l = 1; l <= layers; l++) {
			CK(cu.MemAllocAsync(&a[l], n, s));
			if (wsp) {
				struct fakecuda_scaled_ws_f32_params p = { 0, 0, 0, 0.5f, words };
				void *args[] = { &a[l], &a[l - 1], &ws, &p.a, &p.n };
				CK(cu.LaunchKernel(wsp == 2 ? k_flagged_ws : k_scaled_ws, 1, 1, 1, 128, 1, 1,
				    0, s, args, NULL));
				continue;
			}
			launch_fill(a[l], 0x3f800000u + (uint32_t)(l * 3 + it), words, s);
			launch_axpy(a[l], a[l - 1], 0.5f, words, s);
			if (small) {
				CK(cu.MemAllocAsync(&b[l], sn, s));
				launch_fill(b[l], 0x3f000000u + (uint32_t)(l + it), sn / 4, s);
				/* into its last words, which the checksum follows */
				launch_axpy(a[l] + n - sn, b[l], 0.25f, sn / 4, s);
			}
			for (int j = 1; it == depart && l == layers / 2 && j < l - 1; j++)
				launch_axpy(a[j], a[0], 1.0f, words, s);
			if (!pairs)
				continue;
			CK(cu.MemAllocAsync(&u[l], n, s));
			launch_fill(u[l], 0x3f800000u + (uint32_t)(l * 5 + it), words, s);
			launch_axpy(u[l], a[l], 0.5f, words, s);
			CK(cu.MemAllocAsync(&v[l], n, s));
			launch_fill(v[l], 0x3f800000u + (uint32_t)(l * 7 + it), words, s);
			launch_axpy(v[l], u[l], 0.5f, words, s);
			/* v read once more: dropped after u */
			launch_axpy(acc, v[l], 0.125f, words, s);
		}
		launch_axpy(acc, a[layers], 1.0f, words, s);
		for (int l = layers; l >= 1; l--) {
			CK(cu.MemAllocAsync(&g, n, s));
			launch_fill(g, 0, words, s);
			if (pairs) {
				launch_axpy(g, v[l], 0.25f, words, s);
				launch_axpy(g, u[l], 0.25f, words, s);
				CK(cu.MemFreeAsync(v[l], s));
				CK(cu.MemFreeAsync(u[l], s));
			}
			launch_axpy(g, a[l], 0.25f, words, s);
			launch_axpy(acc, g, 1.0f, words, s);
			CK(cu.MemFreeAsync(g, s));
			CK(cu.MemFreeAsync(a[l], s));
			if (small)
				CK(cu.MemFreeAsync(b[l], s));
		}
		CK(cu.MemFreeAsync(a[0], s));
		float got, wlast = 0;
		CK(cu.MemcpyDtoHAsync(&got, acc + n - 4, sizeof got, s));
		if (wsp)
			CK(cu.MemcpyDtoHAsync(&wlast, ws + (wsp == 2 ? n : n - 4), sizeof wlast, s));
		CK(cu.StreamSynchronize(s));
		uint32_t bits, wbits;
		memcpy(&bits, &got, sizeof bits);
		memcpy(&wbits, &wlast, sizeof wbits);
		check = (check ^ bits) * 0x100000001b3ULL;
		if (wsp)
			check = (check ^ wbits) * 0x100000001b3ULL;
	}
	if (wsp)
		CK(cu.MemFree(ws));
	CK(cu.MemFree(acc));
	printf("checksum %016llx\n", (unsigned long long)check);
	return 0;
}

/* One buffer larger than EBB_LIMIT: the driver's out-of-memory error, no crash. */
static int
scenario_toobig(void)
{
	CUdeviceptr p;
	CUresult r = cu.MemAlloc(&p, (size_t)64 << 20);

	if (r != CUDA_ERROR_OUT_OF_MEMORY)
		FAIL("a 64 MiB allocation under the limit gave %d, not CUDA_ERROR_OUT_OF_MEMORY", (int)r);
	printf("out of memory, as expected\n");
	CK(cu.MemAlloc(&p, (size_t)1 << 20));	/* a small one still works */
	CK(cu.MemFree(p));
	return 0;
}

#ifndef WORKLOAD_LINKED
/* Two ranks, threads of this process, through the fake libnccl.so.2. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <nccl.h>
#pragma GCC diagnostic pop

struct nccl_fns {
	ncclResult_t (*CommInitAll)(ncclComm_t *, int, const int *);
	ncclResult_t (*Send)(const void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
	ncclResult_t (*Recv)(void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
	ncclResult_t (*AllReduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t,
	    ncclComm_t, cudaStream_t);
	ncclResult_t (*GroupStart)(void);
	ncclResult_t (*GroupEnd)(void);
	ncclResult_t (*CommDestroy)(ncclComm_t);
	ncclResult_t (*CommInitRank)(ncclComm_t *, int, ncclUniqueId, int);
};
static struct nccl_fns nc;

/* Load libnccl.so.2 and bind nc, like libtorch: through symbols bound at
 * load time (here via RTLD_DEFAULT, which reaches the preloaded libebb
 * first). Fails the workload where any is missing. */
static void
nccl_bind(void)
{
	if (dlopen("libnccl.so.2", RTLD_NOW | RTLD_GLOBAL) == NULL)
		FAIL("dlopen libnccl.so.2: %s", dlerror());
	*(void **)&nc.CommInitAll = dlsym(RTLD_DEFAULT, "ncclCommInitAll");
	*(void **)&nc.CommInitRank = dlsym(RTLD_DEFAULT, "ncclCommInitRank");
	*(void **)&nc.CommDestroy = dlsym(RTLD_DEFAULT, "ncclCommDestroy");
	*(void **)&nc.Send = dlsym(RTLD_DEFAULT, "ncclSend");
	*(void **)&nc.Recv = dlsym(RTLD_DEFAULT, "ncclRecv");
	*(void **)&nc.AllReduce = dlsym(RTLD_DEFAULT, "ncclAllReduce");
	*(void **)&nc.GroupStart = dlsym(RTLD_DEFAULT, "ncclGroupStart");
	*(void **)&nc.GroupEnd = dlsym(RTLD_DEFAULT, "ncclGroupEnd");
	if (!nc.CommInitAll || !nc.CommInitRank || !nc.CommDestroy || !nc.Send || !nc.Recv ||
	    !nc.AllReduce || !nc.GroupStart || !nc.GroupEnd)
		FAIL("NCCL symbols missing");
}
static ncclComm_t comms[2];
static CUdeviceptr nbuf[2];

static void *
rank_main(void *p)
{
	int rank = (int)(intptr_t)p;
	CUstream s;
	const size_t n = 256;

	CK(cu.CtxSetCurrent(ctx));
	CK(cu.StreamCreate(&s, CU_STREAM_NON_BLOCKING));
	if (rank == 0) {
		launch_fill(nbuf[0], 42, n, s);
		if (nc.Send((void *)nbuf[0], n, ncclUint32, 1, comms[0], s) != ncclSuccess)
			FAIL("ncclSend");
	} else {
		if (nc.Recv((void *)nbuf[1], n, ncclUint32, 0, comms[1], s) != ncclSuccess)
			FAIL("ncclRecv");
	}
	if (nc.AllReduce((void *)nbuf[rank], (void *)nbuf[rank], n, ncclUint32, ncclSum,
	    comms[rank], s) != ncclSuccess)
		FAIL("ncclAllReduce");
	uint32_t v;
	CK(cu.MemcpyDtoHAsync(&v, nbuf[rank], 4, s));
	CK(cu.StreamSynchronize(s));
	if (v != 84)
		FAIL("rank %d got %u, want 84", rank, v);
	return NULL;
}

/* rounds: each makes the two communicators, runs the ranks and destroys the
 * communicators (rank 0's first), so that the next round's may be made at
 * the addresses of the last's, in the other order. */
static int
scenario_nccl(int rounds)
{
	nccl_bind();
	int devs[2] = { 0, 0 };
	CK(cu.MemAlloc(&nbuf[0], 4096));	/* bid 1 */
	CK(cu.MemAlloc(&nbuf[1], 4096));	/* bid 2 */
	for (int round = 0; round < (rounds > 0 ? rounds : 1); round++) {
		if (nc.CommInitAll(comms, 2, devs) != ncclSuccess)
			FAIL("ncclCommInitAll");
		pthread_t t[2];
		for (int r = 0; r < 2; r++)
			pthread_create(&t[r], NULL, rank_main, (void *)(intptr_t)r);
		for (int r = 0; r < 2; r++)
			pthread_join(t[r], NULL);
		for (int r = 0; r < 2; r++)
			if (nc.CommDestroy(comms[r]) != ncclSuccess)
				FAIL("ncclCommDestroy");
	}
	return 0;
}

/*
 * A pipeline's stage on one rank (a communicator of one, as a single-GPU
 * job makes): M micro-batches a step in 1F1B order (F0 B0 F1 B1 ...), or
 * GPipe's with WORKLOAD_SCHEDULE=gpipe (every forward, then the backwards
 * from the last). Each phase opens with the send and receive a stage makes
 * to the stages beside it, here to itself in one group: the forward
 * receives its input, the backward its gradient. A forward makes L
 * activations, each from a weight and the input; its backward reads them
 * in reverse and frees them. One sync a step; prints a checksum of every
 * value read back, the same with and without ebb.
 */
static int
scenario_pipeline(int iters)
{
	enum { M = 4, L = 6 };
	const size_t asz = 4u << 20, wsz = 1u << 20;
	int gpipe = getenv("WORKLOAD_SCHEDULE") != NULL &&
	    strcmp(getenv("WORKLOAD_SCHEDULE"), "gpipe") == 0;
	ncclComm_t comm;
	CUstream s;
	CUdeviceptr w, x, tok_out, tok_in, res, act[M][L];
	uint32_t got[M * L];
	uint64_t sum = 0xcbf29ce484222325ULL;

	nccl_bind();
	int dev = 0;
	if (nc.CommInitAll(&comm, 1, &dev) != ncclSuccess)
		FAIL("ncclCommInitAll");
	CK(cu.StreamCreate(&s, 0));
	CK(cu.MemAlloc(&w, wsz));
	CK(cu.MemAlloc(&x, 4096));
	CK(cu.MemAlloc(&tok_out, 4096));
	CK(cu.MemAlloc(&tok_in, 4096));
	CK(cu.MemAlloc(&res, sizeof got));
	fill_bytes(w, 0x3f800000u, wsz, s);
	for (int it = 0; it < iters; it++) {
		for (int k = 0; k < 2 * M; k++) {
			/* step k: 1F1B's F0 B0 F1 B1 ..., or GPipe's F0 .. F3 B3 .. B0 */
			int fwd = gpipe ? k < M : k % 2 == 0;
			int mb = gpipe ? (fwd ? k : 2 * M - 1 - k) : k / 2;
			launch_fill(tok_out, (uint32_t)(it * 100 + k), 1024, s);
			if (nc.GroupStart() != ncclSuccess ||
			    nc.Send((void *)tok_out, 1024, ncclUint32, 0, comm, s) != ncclSuccess ||
			    nc.Recv((void *)tok_in, 1024, ncclUint32, 0, comm, s) != ncclSuccess ||
			    nc.GroupEnd() != ncclSuccess)
				FAIL("the stage's send and receive");
			if (fwd) {
				launch_copy(x, tok_in, 4096, s);
				for (int l = 0; l < L; l++) {
					CK(cu.MemAllocAsync(&act[mb][l], asz, s));
					launch_copy(act[mb][l], w, 4096, s);
					launch_copy(act[mb][l] + 4096, x, 4, s);
					fill_bytes(act[mb][l] + 8192, (uint32_t)(it * 1000 + mb * 10 + l),
					    asz - 8192, s);
					launch_sleep(300, s);
				}
				continue;
			}
			for (int l = L - 1; l >= 0; l--) {
				launch_sleep(600, s);
				launch_copy(res + (CUdeviceptr)(mb * L + l) * 4, act[mb][l] + asz - 4, 4, s);
				CK(cu.MemFreeAsync(act[mb][l], s));
			}
		}
		CK(cu.MemcpyDtoHAsync(got, res, sizeof got, s));
		CK(cu.StreamSynchronize(s));
		for (int mb = 0; mb < M; mb++)
			for (int l = 0; l < L; l++) {
				if (got[mb * L + l] != (uint32_t)(it * 1000 + mb * 10 + l))
					FAIL("step %d micro-batch %d layer %d: got %u", it, mb, l,
					    got[mb * L + l]);
				sum = (sum ^ got[mb * L + l]) * 0x100000001b3ULL;
			}
	}
	if (nc.CommDestroy(comm) != ncclSuccess)
		FAIL("ncclCommDestroy");
	printf("checksum %016llx\n", (unsigned long long)sum);
	print_driver_stats();
	return 0;
}

/*
 * One stage of a pipeline whose stages are processes (the fake NCCL's
 * communicator in shared memory, named by WORKLOAD_NCCL_ID): rank
 * WORKLOAD_RANK of WORKLOAD_RANKS, 8 micro-batches a step in the order of
 * WORKLOAD_SCHEDULE: gpipe (every forward, then every backward), 1f1b (the
 * default), or interleaved (1F1B over 2 virtual stages a rank, the last
 * rank's first feeding the first rank's second). A forward on virtual stage
 * g (chunk * ranks + rank) receives its input from g - 1, makes 3
 * activations of 2 MiB from it and a weight, and sends a message marked
 * with g on to g + 1; its backward receives a gradient marked by g + 1,
 * reads the activations in reverse and frees them, and sends its own mark
 * back. A send waits to go out with the next receive, in one group, as
 * pipeline schedules pair them; the step's last goes alone. Every message's
 * mark is checked once a step; prints a checksum of every value read back.
 */
enum { ST_M = 8, ST_L = 3, ST_MSG = 64u << 10 };

struct st_step {
	char kind;
	int mb, chunk;
};

/* The stage's steps: n of them into st. */
static int
stage_schedule(const char *how, int rank, int ranks, struct st_step *st)
{
	int v = strcmp(how, "interleaved") == 0 ? 2 : 1, n = 0, nf = 0, nb = 0;
	struct st_step f[ST_M * 2], b[ST_M * 2];

	if (strcmp(how, "gpipe") == 0) {
		for (int m = 0; m < ST_M; m++)
			st[n++] = (struct st_step){ 'F', m, 0 };
		for (int m = 0; m < ST_M; m++)
			st[n++] = (struct st_step){ 'B', m, 0 };
		return n;
	}
	if (strcmp(how, "1f1b") != 0 && v == 1)
		FAIL("WORKLOAD_SCHEDULE '%s': gpipe, 1f1b or interleaved", how);
	for (int g0 = 0; g0 < ST_M; g0 += ranks)
		for (int c = 0; c < v; c++)
			for (int m = g0; m < g0 + ranks && m < ST_M; m++)
				f[nf++] = (struct st_step){ 'F', m, c };
	for (int g0 = 0; g0 < ST_M; g0 += ranks)
		for (int c = v - 1; c >= 0; c--)
			for (int m = g0; m < g0 + ranks && m < ST_M; m++)
				b[nb++] = (struct st_step){ 'B', m, c };
	int warm = v == 1 ? ranks - rank - 1 : (ranks - rank - 1) * 2 + (v - 1) * ranks;
	warm = warm > nf ? nf : warm;
	int i = 0, j = 0;
	while (i < warm)
		st[n++] = f[i++];
	while (i < nf) {
		st[n++] = f[i++];
		st[n++] = b[j++];
	}
	while (j < nb)
		st[n++] = b[j++];
	return n;
}

/* The stage's NCCL: a send held back to go with the next receive. */
struct st_comm {
	ncclComm_t comm;
	CUstream s;
	CUdeviceptr pending;	/* 0: none */
	int pending_peer;
};

/* Issue the held send and the receive (recv 0: none) in one group. */
static void
stage_exchange(struct st_comm *c, CUdeviceptr recv, int from)
{
	if (c->pending == 0 && recv == 0)
		return;
	if (nc.GroupStart() != ncclSuccess ||
	    (c->pending != 0 && nc.Send((void *)c->pending, ST_MSG / 4, ncclUint32, c->pending_peer,
	    c->comm, c->s) != ncclSuccess) ||
	    (recv != 0 && nc.Recv((void *)recv, ST_MSG / 4, ncclUint32, from, c->comm, c->s) !=
	    ncclSuccess) || nc.GroupEnd() != ncclSuccess)
		FAIL("the stage's send and receive");
	c->pending = 0;
}

static int
scenario_stage(int iters)
{
	const char *id = getenv("WORKLOAD_NCCL_ID"), *how = getenv("WORKLOAD_SCHEDULE");
	int rank = getenv("WORKLOAD_RANK") ? atoi(getenv("WORKLOAD_RANK")) : -1;
	int ranks = getenv("WORKLOAD_RANKS") ? atoi(getenv("WORKLOAD_RANKS")) : 0;
	struct st_step st[ST_M * 4];
	struct st_comm c = { 0 };
	const size_t asz = 2u << 20;
	CUdeviceptr w, res, act[ST_M][2][ST_L], x[ST_M][2], y[ST_M][2], g[ST_M][2];
	uint64_t sum = 0xcbf29ce484222325ULL;

	if (id == NULL || rank < 0 || ranks < 2 || rank >= ranks)
		FAIL("stage: WORKLOAD_NCCL_ID, WORKLOAD_RANK and WORKLOAD_RANKS (2 or more) are needed");
	nccl_bind();
	int n = stage_schedule(how ? how : "1f1b", rank, ranks, st);
	int v = how != NULL && strcmp(how, "interleaved") == 0 ? 2 : 1, last_g = v * ranks - 1;
	ncclUniqueId uid;
	memset(&uid, 0, sizeof uid);
	snprintf(uid.internal, sizeof uid.internal, "fakenccl-shm-%s", id);
	if (nc.CommInitRank(&c.comm, ranks, uid, rank) != ncclSuccess)
		FAIL("ncclCommInitRank");
	CK(cu.StreamCreate(&c.s, 0));
	CK(cu.MemAlloc(&w, 1u << 20));
	CK(cu.MemAlloc(&res, ST_M * 2 * (2 + ST_L) * 4));
	fill_bytes(w, 0x3f800000u, 1u << 20, c.s);
	for (int it = 0; it < iters; it++) {
		for (int k = 0; k < n; k++) {
			int mb = st[k].mb, ch = st[k].chunk, gs = ch * ranks + rank;
			uint32_t mark = (uint32_t)(it * 10000 + mb * 100 + gs);
			CUdeviceptr r0 = res + (CUdeviceptr)((mb * 2 + ch) * (2 + ST_L)) * 4;
			if (st[k].kind == 'F') {
				CK(cu.MemAllocAsync(&x[mb][ch], ST_MSG, c.s));
				if (gs == 0) {
					stage_exchange(&c, 0, 0);
					fill_bytes(x[mb][ch], (uint32_t)(it * 10000 + mb * 100 + 99), ST_MSG, c.s);
				} else {
					stage_exchange(&c, x[mb][ch], (rank + ranks - 1) % ranks);
				}
				launch_copy(r0, x[mb][ch], 4, c.s);	/* the mark received */
				for (int l = 0; l < ST_L; l++) {
					CK(cu.MemAllocAsync(&act[mb][ch][l], asz, c.s));
					launch_copy(act[mb][ch][l], w, 4096, c.s);
					launch_copy(act[mb][ch][l] + 4096, x[mb][ch], ST_MSG, c.s);
					fill_bytes(act[mb][ch][l] + 4096 + ST_MSG, mark * 4 + (uint32_t)l,
					    asz - 4096 - ST_MSG, c.s);
					launch_sleep(200, c.s);
				}
				CK(cu.MemFreeAsync(x[mb][ch], c.s));
				CK(cu.MemAllocAsync(&y[mb][ch], ST_MSG, c.s));
				launch_copy(y[mb][ch], act[mb][ch][ST_L - 1] + 4096, ST_MSG, c.s);
				launch_fill(y[mb][ch], mark, 1, c.s);
				if (gs != last_g) {
					c.pending = y[mb][ch];
					c.pending_peer = (rank + 1) % ranks;
				}
				continue;
			}
			CK(cu.MemAllocAsync(&g[mb][ch], ST_MSG, c.s));
			if (gs == last_g) {
				stage_exchange(&c, 0, 0);
				fill_bytes(g[mb][ch], (uint32_t)(it * 10000 + mb * 100 + 98), ST_MSG, c.s);
			} else {
				stage_exchange(&c, g[mb][ch], (rank + 1) % ranks);
			}
			launch_copy(r0 + 4, g[mb][ch], 4, c.s);	/* the gradient's mark */
			for (int l = ST_L - 1; l >= 0; l--) {
				launch_sleep(400, c.s);
				launch_copy(r0 + 8 + (CUdeviceptr)l * 4, act[mb][ch][l] + asz - 4, 4, c.s);
				CK(cu.MemFreeAsync(act[mb][ch][l], c.s));
			}
			CK(cu.MemFreeAsync(y[mb][ch], c.s));
			launch_fill(g[mb][ch], mark, 1, c.s);
			if (gs != 0) {
				c.pending = g[mb][ch];
				c.pending_peer = (rank + ranks - 1) % ranks;
			}
		}
		stage_exchange(&c, 0, 0);
		uint32_t got[ST_M * 2 * (2 + ST_L)];
		CK(cu.MemcpyDtoHAsync(got, res, sizeof got, c.s));
		CK(cu.StreamSynchronize(c.s));
		for (int mb = 0; mb < ST_M; mb++)
			for (int ch = 0; ch < v; ch++) {
				int gs = ch * ranks + rank;
				const uint32_t *r0 = got + (mb * 2 + ch) * (2 + ST_L);
				uint32_t base = (uint32_t)(it * 10000 + mb * 100);
				if (r0[0] != base + (gs == 0 ? 99 : (uint32_t)gs - 1) ||
				    r0[1] != base + (gs == last_g ? 98 : (uint32_t)gs + 1))
					FAIL("step %d micro-batch %d stage %d: marks %u and %u", it, mb, gs,
					    r0[0], r0[1]);
				for (int l = 0; l < ST_L; l++)
					if (r0[2 + l] != (base + (uint32_t)gs) * 4 + (uint32_t)l)
						FAIL("step %d micro-batch %d stage %d layer %d: %u", it, mb, gs,
						    l, r0[2 + l]);
				for (int k = 0; k < 2 + ST_L; k++)
					sum = (sum ^ r0[k]) * 0x100000001b3ULL;
			}
		/* the gradients, freed once their sends have gone out */
		for (int k = 0; k < n; k++)
			if (st[k].kind == 'B')
				CK(cu.MemFreeAsync(g[st[k].mb][st[k].chunk], c.s));
	}
	if (nc.CommDestroy(c.comm) != ncclSuccess)
		FAIL("ncclCommDestroy");
	printf("checksum %016llx\n", (unsigned long long)sum);
	print_driver_stats();
	return 0;
}
#endif

int
main(int argc, char **argv)
{
	const char *how = "procaddress";
	int a = 1;

	if (a < argc && strncmp(argv[a], "--via=", 6) == 0)
		how = argv[a++] + 6;
	const char *what = a < argc ? argv[a++] : "basic";
	int arg = a < argc ? atoi(argv[a]) : 0;
	resolve(how);
	setup();
	int r;
	if (strcmp(what, "basic") == 0)
		r = scenario_basic();
	else if (strcmp(what, "loop") == 0)
		r = scenario_loop(arg > 0 ? arg : 20);
	else if (strcmp(what, "threads") == 0)
		r = scenario_threads(arg > 0 ? arg : 8);
	else if (strcmp(what, "fork") == 0)
		r = scenario_fork(0);
	else if (strcmp(what, "fork-exit") == 0)
		r = scenario_fork(1);
	else if (strcmp(what, "churn") == 0)
		r = scenario_churn(arg > 0 ? arg : 8);
	else if (strcmp(what, "vmm") == 0)
		r = scenario_vmm(arg > 0 ? arg : 1);
	else if (strcmp(what, "query") == 0)
		r = scenario_query();
	else if (strcmp(what, "pool") == 0)
		r = scenario_pool(arg > 0 ? arg : 30);
	else if (strcmp(what, "capture-async") == 0)
		r = scenario_capture_async();
	else if (strcmp(what, "capture") == 0)
		r = scenario_capture();
	else if (strcmp(what, "capture-limit") == 0)
		r = scenario_capture_limit();
	else if (strcmp(what, "capture-unjoined") == 0)
		r = scenario_capture_unjoined();
	else if (strcmp(what, "unresolved") == 0)
		r = scenario_unresolved();
	else if (strcmp(what, "offload") == 0)
		r = scenario_offload(arg > 0 ? arg : 400);
	else if (strcmp(what, "shared-stream") == 0)
		r = scenario_shared_stream();
	else if (strcmp(what, "overflow-stream") == 0)
		r = scenario_overflow_stream();
	else if (strcmp(what, "offload-threads") == 0)
		r = scenario_offload_threads(arg > 0 ? arg : 4);
	else if (strcmp(what, "writesets") == 0)
		r = scenario_writesets(arg > 0 ? arg : 10);
	else if (strcmp(what, "recompute") == 0)
		r = scenario_recompute(arg > 0 ? arg : 10);
	else if (strcmp(what, "plan") == 0)
		r = scenario_plan(arg > 0 ? arg : 30);
	else if (strcmp(what, "ahead") == 0)
		r = scenario_ahead(arg > 0 ? arg : 20);
	else if (strcmp(what, "train") == 0)
		r = scenario_train(arg > 0 ? arg : 20);
	else if (strcmp(what, "toobig") == 0)
		r = scenario_toobig();
	else if (strcmp(what, "sizes") == 0)
		r = scenario_sizes();
	else if (strcmp(what, "reclaim") == 0)
		r = scenario_reclaim(arg > 0 ? arg : 12);
	else if (strcmp(what, "queues") == 0)
		r = scenario_queues();
	else if (strcmp(what, "frees") == 0)
		r = scenario_frees();
	else if (strcmp(what, "cancelfree") == 0)
		r = scenario_cancelfree();
#ifndef WORKLOAD_LINKED
	else if (strcmp(what, "nccl") == 0)
		r = scenario_nccl(arg);
	else if (strcmp(what, "pipeline") == 0)
		r = scenario_pipeline(arg);
	else if (strcmp(what, "stage") == 0)
		r = scenario_stage(arg);
#endif
	else
		FAIL("unknown scenario %s", what);
	if (r == 0)
		printf("ok\n");
	return r;
}
