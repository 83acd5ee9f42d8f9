/*
 * vmmcost.c: the device memory the driver itself takes for virtual memory
 * mappings, by how the ranges are reserved. Maps N physical handles of one
 * granule each (a) into N separate cuMemAddressReserve ranges, (b) into one
 * range of N granules, (c) into N ranges carved from one reservation with
 * gaps between them, and prints cuMemGetInfo's used memory beyond the
 * handles themselves for each, as one JSON object.
 *
 *   vmmcost [N]   (default 400)
 * Build: cc -O2 -I$CUDA_HOME/include bench/vmmcost.c -o vmmcost -lcuda
 */
#include <stdio.h>
#include <stdlib.h>

#include <cuda.h>

#define CK(call) do { CUresult r_ = (call); if (r_ != CUDA_SUCCESS) { \
	fprintf(stderr, "vmmcost: %s failed: %d\n", #call, (int)r_); exit(1); } } while (0)

static size_t
used(void)
{
	size_t f, t;

	CK(cuMemGetInfo(&f, &t));
	return t - f;
}

int
main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 400;
	CUdevice dev;
	CUcontext ctx;
	size_t g;

	CK(cuInit(0));
	CK(cuDeviceGet(&dev, 0));
	CK(cuDevicePrimaryCtxRetain(&ctx, dev));
	CK(cuCtxSetCurrent(ctx));
	CUmemAllocationProp p = { 0 };
	p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	p.location.id = dev;
	CK(cuMemGetAllocationGranularity(&g, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
	CUmemAccessDesc a = { { CU_MEM_LOCATION_TYPE_DEVICE, dev }, CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
	CUmemGenericAllocationHandle *h = calloc((size_t)n, sizeof *h);
	CUdeviceptr *va = calloc((size_t)n, sizeof *va), big, gapped;
	size_t u0 = used();
	for (int i = 0; i < n; i++)
		CK(cuMemCreate(&h[i], g, &p, 0));
	size_t u1 = used();
	for (int i = 0; i < n; i++) {
		CK(cuMemAddressReserve(&va[i], g, 0, 0, 0));
		CK(cuMemMap(va[i], g, 0, h[i], 0));
		CK(cuMemSetAccess(va[i], g, &a, 1));
	}
	size_t u2 = used();
	for (int i = 0; i < n; i++) {
		CK(cuMemUnmap(va[i], g));
		CK(cuMemAddressFree(va[i], g));
	}
	size_t u3 = used();
	CK(cuMemAddressReserve(&big, g * (size_t)n, 0, 0, 0));
	for (int i = 0; i < n; i++)
		CK(cuMemMap(big + g * (size_t)i, g, 0, h[i], 0));
	CK(cuMemSetAccess(big, g * (size_t)n, &a, 1));
	size_t u4 = used();
	CK(cuMemUnmap(big, g * (size_t)n));
	CK(cuMemAddressFree(big, g * (size_t)n));
	size_t gap = 64 * g;
	CK(cuMemAddressReserve(&gapped, gap * (size_t)n, 0, 0, 0));
	for (int i = 0; i < n; i++) {
		CK(cuMemMap(gapped + gap * (size_t)i, g, 0, h[i], 0));
		CK(cuMemSetAccess(gapped + gap * (size_t)i, g, &a, 1));
	}
	size_t u5 = used();
	printf("{\"handles\": %d, \"granule\": %zu, \"handles_bytes\": %zu, "
	    "\"separate_ranges_extra\": %zd, \"after_unmap_extra\": %zd, "
	    "\"one_range_extra\": %zd, \"gapped_ranges_extra\": %zd}\n", n, g, u1 - u0,
	    (ssize_t)(u2 - u1), (ssize_t)(u3 - u1), (ssize_t)(u4 - u1), (ssize_t)(u5 - u1));
	return 0;
}
