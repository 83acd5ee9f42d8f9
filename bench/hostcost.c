/*
 * hostcost.c: the host's time in one kernel launch and in one allocation
 * and free, through the CUDA driver as libcudart reaches it (dlopen
 * libcuda.so.1, every entry point through cuGetProcAddress_v2), so that it
 * measures a preloaded libebb.so on the path PyTorch's calls take.
 *
 *   hostcost [--launches N] [--allocs N] [--live N] [--struct]
 *
 * Prints one JSON object: the median over blocks of host nanoseconds per
 * cuLaunchKernel of an empty kernel with one pointer parameter (blocks of
 * 128 launches, the stream drained between blocks and not timed, so the
 * launch queue never fills), per cuMemAllocAsync + cuMemFreeAsync pair on
 * one stream at 64 KiB and at 8 MiB, and per cuMemAlloc + cuMemFree pair at
 * 8 MiB. --live N (default 0) allocates N buffers of 4 KiB first and has
 * the launches pass them in turn, 64 of them spread over the N, as a job's
 * launches pass its tensors (ebb looks each pointer up among all the live
 * buffers). --struct launches a kernel whose parameters are an int and a
 * 288-byte struct by value holding three of the buffers and the sizes and
 * strides of a 16-dimension view (36 8-byte words, three of them pointers),
 * as PyTorch's elementwise kernels pass a TensorIterator's pointers and
 * offset calculator; with --live the pointers are three of the 64 in turn,
 * else three 4 KiB buffers. Run it without ebb and under
 * `ebb run --mode observe` and `ebb run --limit SIZE`; the differences are
 * ebb's costs. On the fake driver of tests/fakecuda (no PTX) it launches
 * the fake's sleep_us kernel, with --live its copy_bytes kernel (two
 * pointers, no bytes), and with --struct its strided_add_f32 (n = 0).
 * Build: cc -O2 -I$CUDA_HOME/include bench/hostcost.c -o hostcost -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda.h>

#define FAIL(...) do { fprintf(stderr, "hostcost: " __VA_ARGS__); fprintf(stderr, "\n"); exit(1); } while (0)
#define CK(call) do { CUresult r_ = (call); if (r_ != CUDA_SUCCESS) FAIL("%s failed: %d", #call, (int)r_); } while (0)

#define BLOCK 128

static const char ptx[] =
    ".version 8.0\n"
    ".target sm_80\n"
    ".address_size 64\n"
    ".visible .entry noop(.param .u64 p)\n"
    "{\n"
    "	ret;\n"
    "}\n"
    ".visible .entry strided(.param .u32 n, .param .align 8 .b8 it[288])\n"
    "{\n"
    "	ret;\n"
    "}\n";

/* The struct argument of --struct's kernel: tests/fakecuda's struct
 * fakecuda_strided3, by layout. */
struct strided3 {
	CUdeviceptr data[3];
	int dims;
	unsigned sizes[16];
	unsigned strides[16][3];
};

static struct {
	CUresult (*Init)(unsigned);
	CUresult (*DeviceGet)(CUdevice *, int);
	CUresult (*PrimaryCtxRetain)(CUcontext *, CUdevice);
	CUresult (*CtxSetCurrent)(CUcontext);
	CUresult (*StreamCreate)(CUstream *, unsigned);
	CUresult (*StreamSynchronize)(CUstream);
	CUresult (*ModuleLoadData)(CUmodule *, const void *);
	CUresult (*ModuleLoad)(CUmodule *, const char *);
	CUresult (*ModuleGetFunction)(CUfunction *, CUmodule, const char *);
	CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
	    unsigned, unsigned, CUstream, void **, void **);
	CUresult (*MemAlloc)(CUdeviceptr *, size_t);
	CUresult (*MemFree)(CUdeviceptr);
	CUresult (*MemAllocAsync)(CUdeviceptr *, size_t, CUstream);
	CUresult (*MemFreeAsync)(CUdeviceptr, CUstream);
} cu;

static void
resolve(void)
{
	void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (lib == NULL)
		FAIL("dlopen libcuda.so.1: %s", dlerror());
	CUresult (*gpa)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *) =
	    (CUresult (*)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *))
	    dlsym(lib, "cuGetProcAddress_v2");
	if (gpa == NULL)
		FAIL("no cuGetProcAddress_v2");
	CUdriverProcAddressQueryResult st;
#define GET(field, name, ver) \
	if (gpa(name, (void **)&cu.field, ver, CU_GET_PROC_ADDRESS_DEFAULT, &st) != CUDA_SUCCESS || \
	    cu.field == NULL) FAIL("cuGetProcAddress_v2(%s)", name)
	GET(Init, "cuInit", 2000);
	GET(DeviceGet, "cuDeviceGet", 2000);
	GET(PrimaryCtxRetain, "cuDevicePrimaryCtxRetain", 7000);
	GET(CtxSetCurrent, "cuCtxSetCurrent", 4000);
	GET(StreamCreate, "cuStreamCreate", 2000);
	GET(StreamSynchronize, "cuStreamSynchronize", 2000);
	GET(ModuleLoadData, "cuModuleLoadData", 2000);
	GET(ModuleLoad, "cuModuleLoad", 2000);
	GET(ModuleGetFunction, "cuModuleGetFunction", 2000);
	GET(LaunchKernel, "cuLaunchKernel", 4000);
	GET(MemAlloc, "cuMemAlloc", 3020);
	GET(MemFree, "cuMemFree", 3020);
	GET(MemAllocAsync, "cuMemAllocAsync", 11020);
	GET(MemFreeAsync, "cuMemFreeAsync", 11020);
#undef GET
}

static double
now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double
median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof *v, cmp_double);
	return n > 0 ? v[n / 2] : 0;
}

int
main(int argc, char **argv)
{
	int launches = 20480, allocs = 10240, live = 0, big = 0;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--launches") == 0 && i + 1 < argc)
			launches = atoi(argv[++i]);
		else if (strcmp(argv[i], "--allocs") == 0 && i + 1 < argc)
			allocs = atoi(argv[++i]);
		else if (strcmp(argv[i], "--live") == 0 && i + 1 < argc)
			live = atoi(argv[++i]);
		else if (strcmp(argv[i], "--struct") == 0)
			big = 1;
		else
			FAIL("usage: hostcost [--launches N] [--allocs N] [--live N] [--struct]");
	}
	if (launches < BLOCK || allocs < BLOCK)
		FAIL("--launches and --allocs must be at least %d", BLOCK);
	if (live < 0 || live > 1000000)
		FAIL("--live must be 0 to 1000000");
	resolve();
	CUdevice dev;
	CUcontext ctx;
	CUstream s;
	CUmodule mod;
	CUfunction f;
	int fake = 0;
	CK(cu.Init(0));
	CK(cu.DeviceGet(&dev, 0));
	CK(cu.PrimaryCtxRetain(&ctx, dev));
	CK(cu.CtxSetCurrent(ctx));
	CK(cu.StreamCreate(&s, CU_STREAM_NON_BLOCKING));
	if (cu.ModuleLoadData(&mod, ptx) == CUDA_SUCCESS) {
		CK(cu.ModuleGetFunction(&f, mod, big ? "strided" : "noop"));
	} else {
		CK(cu.ModuleLoad(&mod, "fakecuda"));	/* tests/fakecuda: no PTX */
		CK(cu.ModuleGetFunction(&f, mod, big ? "strided_add_f32" :
		    live > 0 ? "copy_bytes" : "sleep_us"));
		fake = 1;
	}
	/* the live buffers, and the 64 the launches pass, spread over them */
	enum { WORKING = 64 };
	CUdeviceptr *bufs = live > 0 ? malloc((size_t)live * sizeof *bufs) : NULL;
	CUdeviceptr work[WORKING];
	if (live > 0 && bufs == NULL)
		FAIL("malloc");
	for (int i = 0; i < live; i++)
		CK(cu.MemAlloc(&bufs[i], 4096));
	for (int i = 0; live > 0 && i < WORKING; i++)
		work[i] = bufs[(size_t)i * (size_t)live / WORKING];
	CUdeviceptr dst = 0, src = 0;
	uint64_t zero_n = 0;
	void *args_copy[] = { &dst, &src, &zero_n };
	CUdeviceptr buf, buf0;
	CK(cu.MemAlloc(&buf0, (size_t)1 << 20));
	buf = buf0;
	unsigned zero = 0;
	void *args_noop[] = { &buf };
	void *args_fake[] = { &zero };
	/* --struct: a 2-dimension view of 16 x 64 floats; the other dimensions
	 * have size 1 and stride 0, as PyTorch's offset calculator fills them */
	int n_zero = 0;
	struct strided3 it = { { 0, 0, 0 }, 2, { 16, 64 }, { { 4, 4, 4 }, { 64, 256, 64 } } };
	for (int d = it.dims; d < 16; d++)
		it.sizes[d] = 1;
	void *args_struct[] = { &n_zero, &it };
	CUdeviceptr three[3];
	for (int i = 0; big && live == 0 && i < 3; i++)
		CK(cu.MemAlloc(&three[i], 4096));
	for (int i = 0; big && live == 0 && i < 3; i++)
		it.data[i] = three[i];
	void **args = big ? args_struct : live > 0 && fake ? args_copy : fake ? args_fake :
	    args_noop;
	int w = 0;	/* the next of work[] a launch passes */
#define NEXT_ARGS() do { \
		if (live > 0) { \
			dst = work[w]; src = work[(w + 1) % WORKING]; buf = dst; \
			it.data[0] = dst; it.data[1] = src; it.data[2] = work[(w + 2) % WORKING]; \
			w = (w + 1) % WORKING; \
		} \
	} while (0)

	int nb = launches / BLOCK;
	double *t = malloc((size_t)(nb > allocs / BLOCK ? nb : allocs / BLOCK + 1) * sizeof *t);
	if (t == NULL)
		FAIL("malloc");
	/* a warm-up block of each, untimed */
	for (int i = 0; i < BLOCK; i++) {
		NEXT_ARGS();
		CK(cu.LaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, args, NULL));
	}
	CK(cu.StreamSynchronize(s));
	for (int b = 0; b < nb; b++) {
		double t0 = now_ns();
		for (int i = 0; i < BLOCK; i++) {
			NEXT_ARGS();
			CK(cu.LaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, args, NULL));
		}
		t[b] = (now_ns() - t0) / BLOCK;
		CK(cu.StreamSynchronize(s));
	}
	double launch_ns = median(t, nb);

	double async_ns[2];
	const size_t sizes[2] = { (size_t)64 << 10, (size_t)8 << 20 };
	int na = allocs / BLOCK;
	for (int k = 0; k < 2; k++) {
		for (int b = -1; b < na; b++) {
			double t0 = now_ns();
			for (int i = 0; i < BLOCK; i++) {
				CUdeviceptr p;
				CK(cu.MemAllocAsync(&p, sizes[k], s));
				CK(cu.MemFreeAsync(p, s));
			}
			if (b >= 0)
				t[b] = (now_ns() - t0) / BLOCK;
			CK(cu.StreamSynchronize(s));
		}
		async_ns[k] = median(t, na);
	}
	int ns = na / 8 > 4 ? na / 8 : 4;
	for (int b = -1; b < ns; b++) {
		double t0 = now_ns();
		for (int i = 0; i < BLOCK; i++) {
			CUdeviceptr p;
			CK(cu.MemAlloc(&p, (size_t)8 << 20));
			CK(cu.MemFree(p));
		}
		if (b >= 0)
			t[b] = (now_ns() - t0) / BLOCK;
	}
	double sync_ns = median(t, ns);
	CK(cu.MemFree(buf0));
	for (int i = 0; big && live == 0 && i < 3; i++)
		CK(cu.MemFree(three[i]));
	for (int i = 0; i < live; i++)
		CK(cu.MemFree(bufs[i]));
	free(bufs);
	printf("{\"live\": %d, \"struct\": %d, \"launch_ns\": %.0f, \"alloc_free_async_64k_ns\": %.0f, \"alloc_free_async_8m_ns\": "
	    "%.0f, \"alloc_free_sync_8m_ns\": %.0f, \"launches\": %d, \"allocs\": %d, \"fake\": %d}\n",
	    live, big, launch_ns, async_ns[0], async_ns[1], sync_ns, nb * BLOCK, na * BLOCK, fake);
	return 0;
}
