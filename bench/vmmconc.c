/*
 * vmmconc.c: whether the driver's virtual memory calls hold up kernel
 * launches issued by another thread. One thread launches an empty kernel
 * N times; another maps, grants access to and unmaps one physical handle of
 * SIZE bytes at a reserved range, in a loop. Each is timed alone, then both
 * at once, and the result is one JSON object: the host ns a launch takes
 * alone and beside the mappings, and the ns of each VMM call alone and
 * beside the launches.
 *
 *   vmmconc [N [SIZE_MIB]]   (defaults 20000 and 176)
 * Build: cc -O2 -I$CUDA_HOME/include bench/vmmconc.c -o vmmconc -lcuda -lpthread
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <cuda.h>

#define CK(call) do { CUresult r_ = (call); if (r_ != CUDA_SUCCESS) { \
	fprintf(stderr, "vmmconc: %s failed: %d\n", #call, (int)r_); exit(1); } } while (0)

static const char ptx[] =
    ".version 7.0\n.target sm_70\n.address_size 64\n"
    ".visible .entry nop(.param .u64 p) { ret; }\n";

static CUcontext ctx;
static CUfunction fn;
static CUdevice dev;
static size_t size;
static int nlaunch;
static volatile int stop;

static uint64_t
now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* The launching thread: ns a launch, over nlaunch launches. */
static void *
launcher(void *arg)
{
	double *out = arg;
	CUstream s;
	CUdeviceptr d = 0;
	void *params[] = { &d };

	CK(cuCtxSetCurrent(ctx));
	CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	uint64_t t0 = now_ns();
	for (int i = 0; i < nlaunch; i++) {
		CK(cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, s, params, NULL));
		if ((i & 255) == 255)
			CK(cuStreamSynchronize(s));
	}
	CK(cuStreamSynchronize(s));
	*out = (double)(now_ns() - t0) / nlaunch;
	CK(cuStreamDestroy(s));
	return NULL;
}

struct vmm_out {
	double map_ns, access_ns, unmap_ns;
	long cycles;
};

/* The mapping thread: map, set access, unmap, until stop (or 200 cycles when
 * alone). */
static void *
mapper(void *arg)
{
	struct vmm_out *o = arg;
	CUmemAllocationProp p = { 0 };
	CUmemGenericAllocationHandle h;
	CUdeviceptr va;
	uint64_t tm = 0, ta = 0, tu = 0;
	long n = 0;

	CK(cuCtxSetCurrent(ctx));
	p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	p.location.id = dev;
	CUmemAccessDesc a = { { CU_MEM_LOCATION_TYPE_DEVICE, dev }, CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
	CK(cuMemCreate(&h, size, &p, 0));
	CK(cuMemAddressReserve(&va, size, 0, 0, 0));
	while (o->cycles < 0 ? !stop : n < o->cycles) {
		uint64_t t0 = now_ns();
		CK(cuMemMap(va, size, 0, h, 0));
		uint64_t t1 = now_ns();
		CK(cuMemSetAccess(va, size, &a, 1));
		uint64_t t2 = now_ns();
		CK(cuMemUnmap(va, size));
		uint64_t t3 = now_ns();
		tm += t1 - t0;
		ta += t2 - t1;
		tu += t3 - t2;
		n++;
	}
	CK(cuMemAddressFree(va, size));
	CK(cuMemRelease(h));
	o->map_ns = (double)tm / (double)n;
	o->access_ns = (double)ta / (double)n;
	o->unmap_ns = (double)tu / (double)n;
	o->cycles = n;
	return NULL;
}

int
main(int argc, char **argv)
{
	CUmodule mod;
	pthread_t tl, tm;
	double alone, beside;
	struct vmm_out va = { .cycles = 200 }, vb = { .cycles = -1 };

	nlaunch = argc > 1 ? atoi(argv[1]) : 20000;
	size = (size_t)(argc > 2 ? atoi(argv[2]) : 176) << 20;
	CK(cuInit(0));
	CK(cuDeviceGet(&dev, 0));
	CK(cuDevicePrimaryCtxRetain(&ctx, dev));
	CK(cuCtxSetCurrent(ctx));
	CK(cuModuleLoadData(&mod, ptx));
	CK(cuModuleGetFunction(&fn, mod, "nop"));

	launcher(&alone);	/* warm */
	launcher(&alone);
	mapper(&va);
	pthread_create(&tm, NULL, mapper, &vb);
	pthread_create(&tl, NULL, launcher, &beside);
	pthread_join(tl, NULL);
	stop = 1;
	pthread_join(tm, NULL);
	printf("{\"workload\": \"vmmconc\", \"launches\": %d, \"size_mib\": %zu, "
	    "\"launch_ns_alone\": %.0f, \"launch_ns_beside_vmm\": %.0f, "
	    "\"map_ns_alone\": %.0f, \"access_ns_alone\": %.0f, \"unmap_ns_alone\": %.0f, "
	    "\"map_ns_beside\": %.0f, \"access_ns_beside\": %.0f, \"unmap_ns_beside\": %.0f, "
	    "\"vmm_cycles_beside\": %ld}\n", nlaunch, size >> 20, alone, beside,
	    va.map_ns, va.access_ns, va.unmap_ns, vb.map_ns, vb.access_ns, vb.unmap_ns, vb.cycles);
	return 0;
}
