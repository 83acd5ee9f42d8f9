/*
 * vmmchunk.c: what it costs the host to back one buffer's reserved range
 * with physical memory in chunks of one size, against one handle of the
 * buffer's own size, and what creating and releasing handles costs. For each
 * chunk size: the buffer's range is mapped chunk by chunk (cuMemMap), made
 * accessible by one cuMemSetAccess over the whole range and unmapped by one
 * cuMemUnmap over it, R times; the handles are created once. Also: how much
 * a thread waiting in cuEventSynchronize (spinning, and with
 * CU_EVENT_BLOCKING_SYNC) slows launches of another thread. One JSON object
 * a line.
 *
 *   vmmchunk [BUFFER_MIB [REPEATS]]   (defaults 176 and 100)
 * Build: cc -O2 -I$CUDA_HOME/include bench/vmmchunk.c -o vmmchunk -lcuda -lpthread
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <cuda.h>

#define CK(call) do { CUresult r_ = (call); if (r_ != CUDA_SUCCESS) { \
	fprintf(stderr, "vmmchunk: %s failed: %d\n", #call, (int)r_); exit(1); } } while (0)

static const char ptx[] =
    ".version 7.0\n.target sm_70\n.address_size 64\n"
    ".visible .entry nop(.param .u64 p) { ret; }\n"
    ".visible .entry spin(.param .u64 n) {\n"
    " .reg .u64 %t<4>;\n .reg .pred %p;\n ld.param.u64 %t0, [n];\n mov.u64 %t1, %clock64;\n"
    "L: mov.u64 %t2, %clock64;\n sub.u64 %t3, %t2, %t1;\n setp.lt.u64 %p, %t3, %t0;\n"
    " @%p bra L;\n ret; }\n";

static CUcontext ctx;
static CUdevice dev;
static CUfunction nop, spin;
static volatile int stop;

static uint64_t
now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void
chunks(size_t bytes, size_t chunk, int reps)
{
	CUmemAllocationProp p = { 0 };
	p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	p.location.id = dev;
	CUmemAccessDesc a = { { CU_MEM_LOCATION_TYPE_DEVICE, dev }, CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
	size_t n = (bytes + chunk - 1) / chunk;
	CUmemGenericAllocationHandle *h = calloc(n, sizeof *h);
	CUdeviceptr va;
	uint64_t tc = 0, tm = 0, ta = 0, tu = 0, tr = 0;

	CK(cuMemAddressReserve(&va, n * chunk, 0, 0, 0));
	for (int r = 0; r < reps; r++) {
		uint64_t t0 = now_ns();
		if (r == 0 || r == reps - 1)
			for (size_t i = 0; i < n; i++)
				CK(cuMemCreate(&h[i], chunk, &p, 0));
		uint64_t t1 = now_ns();
		for (size_t i = 0; i < n; i++)
			CK(cuMemMap(va + i * chunk, chunk, 0, h[i], 0));
		uint64_t t2 = now_ns();
		CK(cuMemSetAccess(va, n * chunk, &a, 1));
		uint64_t t3 = now_ns();
		CK(cuMemUnmap(va, n * chunk));
		uint64_t t4 = now_ns();
		if (r == 0 || r == reps - 2)
			for (size_t i = 0; i < n; i++)
				CK(cuMemRelease(h[i]));
		uint64_t t5 = now_ns();
		if (r == 0 || r == reps - 1)
			tc += t1 - t0;
		if (r == 0 || r == reps - 2)
			tr += t5 - t4;
		if (r > 0) {
			tm += t2 - t1;
			ta += t3 - t2;
			tu += t4 - t3;
		}
		if (r == 0)
			for (size_t i = 0; i < n; i++)
				CK(cuMemCreate(&h[i], chunk, &p, 0));
	}
	for (size_t i = 0; i < n; i++)
		CK(cuMemRelease(h[i]));
	CK(cuMemAddressFree(va, n * chunk));
	free(h);
	printf("{\"workload\": \"vmmchunk\", \"buffer_mib\": %zu, \"chunk_mib\": %zu, \"chunks\": %zu, "
	    "\"create_us\": %.1f, \"map_us\": %.1f, \"access_us\": %.1f, \"unmap_us\": %.1f, "
	    "\"release_us\": %.1f}\n", bytes >> 20, chunk >> 20, n, tc / 2e3, tm / 1e3 / (reps - 1),
	    ta / 1e3 / (reps - 1), tu / 1e3 / (reps - 1), tr / 2e3);
	fflush(stdout);
}

struct waiter { unsigned flags; };

/* Waits in cuEventSynchronize on events after long kernels, until stop. */
static void *
waiter_main(void *arg)
{
	struct waiter *w = arg;
	CUstream s;
	CUevent e;
	uint64_t n = 200000;	/* clocks: about 0.1 ms */
	void *params[] = { &n };

	CK(cuCtxSetCurrent(ctx));
	CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CK(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING | w->flags));
	while (!stop) {
		CK(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, s, params, NULL));
		CK(cuEventRecord(e, s));
		CK(cuEventSynchronize(e));
	}
	CK(cuEventDestroy(e));
	CK(cuStreamDestroy(s));
	return NULL;
}

static double
launches(int n)
{
	CUstream s;
	CUdeviceptr d = 0;
	void *params[] = { &d };

	CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	uint64_t t0 = now_ns();
	for (int i = 0; i < n; i++) {
		CK(cuLaunchKernel(nop, 1, 1, 1, 32, 1, 1, 0, s, params, NULL));
		if ((i & 255) == 255)
			CK(cuStreamSynchronize(s));
	}
	CK(cuStreamSynchronize(s));
	double ns = (double)(now_ns() - t0) / n;
	CK(cuStreamDestroy(s));
	return ns;
}

int
main(int argc, char **argv)
{
	CUmodule mod;
	size_t mib = argc > 1 ? (size_t)atoi(argv[1]) : 176;
	int reps = argc > 2 ? atoi(argv[2]) : 100;
	static const size_t sizes[] = { 2, 8, 16, 32, 64 };

	CK(cuInit(0));
	CK(cuDeviceGet(&dev, 0));
	CK(cuDevicePrimaryCtxRetain(&ctx, dev));
	CK(cuCtxSetCurrent(ctx));
	CK(cuModuleLoadData(&mod, ptx));
	CK(cuModuleGetFunction(&nop, mod, "nop"));
	CK(cuModuleGetFunction(&spin, mod, "spin"));
	chunks(mib << 20, mib << 20, reps);
	for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
		chunks(mib << 20, sizes[i] << 20, reps);
	chunks(mib << 20, mib << 20, reps);

	double alone = (launches(20000), launches(20000)), with[2];
	for (int k = 0; k < 2; k++) {
		struct waiter w = { k ? CU_EVENT_BLOCKING_SYNC : 0 };
		pthread_t t;
		stop = 0;
		pthread_create(&t, NULL, waiter_main, &w);
		with[k] = launches(20000);
		stop = 1;
		pthread_join(t, NULL);
	}
	printf("{\"workload\": \"eventwait\", \"launch_ns_alone\": %.0f, \"launch_ns_beside_spin_wait\": "
	    "%.0f, \"launch_ns_beside_blocking_wait\": %.0f}\n", alone, with[0], with[1]);
	return 0;
}
