/*
 * bench/copymap.c: do copies into device memory mapped just before them run
 * slower than copies into memory mapped long before?
 *
 * ebb maps a buffer's memory again (cuMemMap and cuMemSetAccess of a pooled
 * handle) just before each copy back, and unmaps it after each copy to the
 * host. bench/copyrate.py copies into memory mapped once. This program times
 * the same copies both ways, with the driver API as ebb calls it:
 *
 *   once      the buffer stays mapped; copy to the device, N times
 *   remap     map and set access, copy to the device, wait, unmap; N times
 *   cycle     map, copy to the device, copy to the host, wait, unmap; the
 *             whole round trip of a move, each copy timed on its own
 *
 * Each copy is timed on the device with events around it alone; the map
 * calls' host time is printed beside. All three cases run twice, in turn.
 * One JSON object a line (the median, slowest and fastest copy's rate).
 *
 * build: gcc -O2 -std=c11 -I/usr/local/cuda/include bench/copymap.c \
 *            -o copymap -L/usr/local/cuda/lib64/stubs -lcuda
 * usage: copymap [SIZE_MIB [N]]     (default 256 MiB, 20 copies)
 */
#define _POSIX_C_SOURCE 200809L
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CK(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { \
	const char *s_ = NULL; cuGetErrorName(r_, &s_); \
	fprintf(stderr, "copymap: %s failed: %s\n", #x, s_ ? s_ : "?"); exit(1); } } while (0)

static double
now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int
cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static void
report(const char *kase, const char *dir, size_t size, double *ms, int n, double map_us)
{
	qsort(ms, (size_t)n, sizeof *ms, cmp);
	double gb = (double)size / 1e9;
	printf("{\"case\": \"%s\", \"dir\": \"%s\", \"size_mib\": %zu, \"n\": %d, "
	    "\"gbps_median\": %.2f, \"gbps_min\": %.2f, \"gbps_max\": %.2f, \"map_us_median\": %.1f}\n",
	    kase, dir, size >> 20, n, gb / (ms[n / 2] / 1e3), gb / (ms[n - 1] / 1e3),
	    gb / (ms[0] / 1e3), map_us);
	fflush(stdout);
}

int
main(int argc, char **argv)
{
	long mib = argc > 1 ? atol(argv[1]) : 256;
	int n = argc > 2 ? atoi(argv[2]) : 20;
	size_t size = mib > 0 ? (size_t)mib << 20 : 0;
	if (size == 0 || n <= 0) {
		fprintf(stderr, "usage: copymap [SIZE_MIB [N]]  (both above 0)\n");
		return 2;
	}
	CUdevice dev;
	CUcontext ctx;
	CK(cuInit(0));
	CK(cuDeviceGet(&dev, 0));
	CK(cuDevicePrimaryCtxRetain(&ctx, dev));
	CK(cuCtxSetCurrent(ctx));

	CUmemAllocationProp p;
	memset(&p, 0, sizeof p);
	p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	p.location.id = dev;
	size_t gran = 0;
	CK(cuMemGetAllocationGranularity(&gran, &p, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
	size = (size + gran - 1) / gran * gran;
	CUmemAccessDesc acc;
	memset(&acc, 0, sizeof acc);
	acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	acc.location.id = dev;
	acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;

	CUmemGenericAllocationHandle h;
	CUdeviceptr va;
	CK(cuMemCreate(&h, size, &p, 0));
	CK(cuMemAddressReserve(&va, size, 0, 0, 0));
	void *host;
	CK(cuMemHostAlloc(&host, size, 0));
	memset(host, 1, size);
	CUstream s;
	CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CUevent a, b, c;
	CK(cuEventCreate(&a, CU_EVENT_DEFAULT));
	CK(cuEventCreate(&b, CU_EVENT_DEFAULT));
	CK(cuEventCreate(&c, CU_EVENT_DEFAULT));
	double *ms = calloc((size_t)n, sizeof *ms), *ms2 = calloc((size_t)n, sizeof *ms2);
	double *mus = calloc((size_t)n, sizeof *mus);
	float f;
	if (ms == NULL || ms2 == NULL || mus == NULL) {
		fprintf(stderr, "copymap: out of memory\n");
		return 1;
	}

	static const char *const name[3] = { "once", "remap", "cycle" };
	for (int round = 0; round < 2; round++) {
		for (int kase = 0; kase < 3; kase++) {
			/* once: mapped before the loop; remap: mapped just before each
			 * copy, unmapped after; cycle: a move's round trip, as ebb
			 * makes it (map, copy back, copy to the host, unmap) */
			if (kase == 0) {
				CK(cuMemMap(va, size, 0, h, 0));
				CK(cuMemSetAccess(va, size, &acc, 1));
			}
			for (int i = 0; i < n; i++) {
				mus[i] = 0;
				if (kase > 0) {
					double t0 = now_us();
					CK(cuMemMap(va, size, 0, h, 0));
					CK(cuMemSetAccess(va, size, &acc, 1));
					mus[i] = now_us() - t0;
				}
				CK(cuEventRecord(a, s));
				CK(cuMemcpyHtoDAsync(va, host, size, s));
				CK(cuEventRecord(b, s));
				if (kase == 2) {
					CK(cuMemcpyDtoHAsync(host, va, size, s));
					CK(cuEventRecord(c, s));
				}
				CK(cuStreamSynchronize(s));
				CK(cuEventElapsedTime(&f, a, b));
				ms[i] = f;
				if (kase == 2) {
					CK(cuEventElapsedTime(&f, b, c));
					ms2[i] = f;
				}
				if (kase > 0)
					CK(cuMemUnmap(va, size));
			}
			if (kase == 0)
				CK(cuMemUnmap(va, size));
			qsort(mus, (size_t)n, sizeof *mus, cmp);
			report(name[kase], "h2d", size, ms, n, mus[n / 2]);
			if (kase == 2)
				report(name[kase], "d2h", size, ms2, n, mus[n / 2]);
		}
	}
	return 0;
}
