/*
 * vmmarena.c: what it costs the host to back a buffer's reserved range with
 * a part of one large physical handle (an arena, mapped at an offset)
 * instead of a handle of the buffer's own size, and whether parts of one
 * handle mapped at several addresses at once hold their own bytes.
 *
 * For each buffer size: R rounds of map at an offset, cuMemSetAccess and
 * cuMemUnmap of a part of an ARENA_MIB handle (offsets cycle through the
 * arena), against R rounds of create, map, access, unmap and release of a
 * handle of the buffer's size. Then a check: K parts of the arena mapped at
 * once at K addresses, each filled with its own byte by cuMemsetD8, read
 * back whole through cuMemcpyDtoH; and a two-part backing of one range (two
 * disjoint parts of the arena mapped side by side, one access and one unmap
 * call over the range). One JSON object a line; exit 1 when a check fails,
 * 2 when the driver refuses to map a part of a handle (then the arena lines
 * say so with the driver's error, and the own-handle lines still come).
 *
 *   vmmarena [ARENA_MIB [REPEATS]]   (defaults 8192 and 50)
 * Build: cc -O2 -I$CUDA_HOME/include bench/vmmarena.c -o vmmarena -lcuda
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda.h>

#define CK(call) do { CUresult r_ = (call); if (r_ != CUDA_SUCCESS) { \
	fprintf(stderr, "vmmarena: %s failed: %d\n", #call, (int)r_); exit(1); } } while (0)

#define MIB ((size_t)1 << 20)

static CUdevice dev;
static CUmemAllocationProp prop;
static CUmemAccessDesc acc;

static uint64_t
now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* Returns 0, or the driver's error where it refuses to map a part. */
static CUresult
parts(CUmemGenericAllocationHandle arena, size_t arena_bytes, size_t bytes, int reps)
{
	CUdeviceptr va;
	uint64_t tm = 0, ta = 0, tu = 0;
	size_t slots = arena_bytes / bytes;

	CK(cuMemAddressReserve(&va, bytes, 0, 0, 0));
	for (int r = 0; r < reps; r++) {
		size_t off = (size_t)(r % slots) * bytes;
		uint64_t t0 = now_ns();
		CUresult e = cuMemMap(va, bytes, off, arena, 0);
		if (e != CUDA_SUCCESS) {
			printf("{\"workload\": \"vmmarena\", \"backing\": \"arena-part\", "
			    "\"arena_mib\": %zu, \"buffer_mib\": %zu, \"offset_mib\": %zu, "
			    "\"map_error\": %d}\n", arena_bytes / MIB, bytes / MIB, off / MIB, (int)e);
			fflush(stdout);
			CK(cuMemAddressFree(va, bytes));
			return e;
		}
		uint64_t t1 = now_ns();
		CK(cuMemSetAccess(va, bytes, &acc, 1));
		uint64_t t2 = now_ns();
		CK(cuMemUnmap(va, bytes));
		uint64_t t3 = now_ns();
		tm += t1 - t0;
		ta += t2 - t1;
		tu += t3 - t2;
	}
	CK(cuMemAddressFree(va, bytes));
	printf("{\"workload\": \"vmmarena\", \"backing\": \"arena-part\", \"arena_mib\": %zu, "
	    "\"buffer_mib\": %zu, \"map_us\": %.1f, \"access_us\": %.1f, \"unmap_us\": %.1f}\n",
	    arena_bytes / MIB, bytes / MIB, tm / 1e3 / reps, ta / 1e3 / reps, tu / 1e3 / reps);
	fflush(stdout);
	return CUDA_SUCCESS;
}

static void
own(size_t bytes, int reps)
{
	CUdeviceptr va;
	CUmemGenericAllocationHandle h;
	uint64_t tc = 0, tm = 0, ta = 0, tu = 0, tr = 0;

	CK(cuMemAddressReserve(&va, bytes, 0, 0, 0));
	for (int r = 0; r < reps; r++) {
		uint64_t t0 = now_ns();
		CK(cuMemCreate(&h, bytes, &prop, 0));
		uint64_t t1 = now_ns();
		CK(cuMemMap(va, bytes, 0, h, 0));
		uint64_t t2 = now_ns();
		CK(cuMemSetAccess(va, bytes, &acc, 1));
		uint64_t t3 = now_ns();
		CK(cuMemUnmap(va, bytes));
		uint64_t t4 = now_ns();
		CK(cuMemRelease(h));
		uint64_t t5 = now_ns();
		tc += t1 - t0;
		tm += t2 - t1;
		ta += t3 - t2;
		tu += t4 - t3;
		tr += t5 - t4;
	}
	CK(cuMemAddressFree(va, bytes));
	printf("{\"workload\": \"vmmarena\", \"backing\": \"own-handle\", \"buffer_mib\": %zu, "
	    "\"create_us\": %.1f, \"map_us\": %.1f, \"access_us\": %.1f, \"unmap_us\": %.1f, "
	    "\"release_us\": %.1f}\n", bytes / MIB, tc / 1e3 / reps, tm / 1e3 / reps,
	    ta / 1e3 / reps, tu / 1e3 / reps, tr / 1e3 / reps);
	fflush(stdout);
}

/* Whether every byte of [va, va + bytes) is v. */
static int
holds(CUdeviceptr va, size_t bytes, unsigned char v, unsigned char *host)
{
	CK(cuMemcpyDtoH(host, va, bytes));
	for (size_t i = 0; i < bytes; i++)
		if (host[i] != v)
			return 0;
	return 1;
}

static int
check(CUmemGenericAllocationHandle arena, size_t arena_bytes)
{
	enum { K = 4 };
	size_t part = 64 * MIB;
	CUdeviceptr va[K], two;
	unsigned char *host = malloc(2 * part);
	int ok = 1;

	if (host == NULL || arena_bytes < (size_t)(2 * K) * part)
		return 0;
	for (int k = 0; k < K; k++) {
		CK(cuMemAddressReserve(&va[k], part, 0, 0, 0));
		CK(cuMemMap(va[k], part, (size_t)(2 * k + 1) * part, arena, 0));
		CK(cuMemSetAccess(va[k], part, &acc, 1));
		CK(cuMemsetD8(va[k], (unsigned char)(0x11 * (k + 1)), part));
	}
	CK(cuCtxSynchronize());
	for (int k = 0; k < K; k++)
		ok &= holds(va[k], part, (unsigned char)(0x11 * (k + 1)), host);
	/* one range backed by two parts that are not adjacent in the arena */
	CK(cuMemAddressReserve(&two, 2 * part, 0, 0, 0));
	CK(cuMemMap(two, part, 0, arena, 0));
	CK(cuMemMap(two + part, part, 6 * part, arena, 0));
	uint64_t t0 = now_ns();
	CK(cuMemSetAccess(two, 2 * part, &acc, 1));
	uint64_t t1 = now_ns();
	CK(cuMemsetD8(two, 0xa5, 2 * part));
	CK(cuCtxSynchronize());
	ok &= holds(two, 2 * part, 0xa5, host);
	for (int k = 0; k < K; k++)	/* the parts between are untouched */
		ok &= holds(va[k], part, (unsigned char)(0x11 * (k + 1)), host);
	uint64_t t2 = now_ns();
	CK(cuMemUnmap(two, 2 * part));
	uint64_t t3 = now_ns();
	CK(cuMemAddressFree(two, 2 * part));
	for (int k = 0; k < K; k++) {
		CK(cuMemUnmap(va[k], part));
		CK(cuMemAddressFree(va[k], part));
	}
	printf("{\"workload\": \"vmmarena\", \"check\": \"parts-hold-their-bytes\", \"ok\": %s, "
	    "\"two_part_access_us\": %.1f, \"two_part_unmap_us\": %.1f}\n", ok ? "true" : "false",
	    (t1 - t0) / 1e3, (t3 - t2) / 1e3);
	free(host);
	return ok;
}

int
main(int argc, char **argv)
{
	size_t arena_bytes = (argc > 1 ? strtoull(argv[1], NULL, 10) : 8192) * MIB;
	int reps = argc > 2 ? atoi(argv[2]) : 50;
	static const size_t sizes[] = { 2, 8, 22, 64, 128, 176, 256, 2000 };
	CUcontext ctx;
	CUmemGenericAllocationHandle arena;

	CK(cuInit(0));
	CK(cuDeviceGet(&dev, 0));
	CK(cuDevicePrimaryCtxRetain(&ctx, dev));
	CK(cuCtxSetCurrent(ctx));
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = dev;
	acc = (CUmemAccessDesc){ { CU_MEM_LOCATION_TYPE_DEVICE, dev },
		CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
	uint64_t t0 = now_ns();
	CK(cuMemCreate(&arena, arena_bytes, &prop, 0));
	printf("{\"workload\": \"vmmarena\", \"arena_mib\": %zu, \"arena_create_us\": %.1f}\n",
	    arena_bytes / MIB, (now_ns() - t0) / 1e3);
	int refused = 0;
	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
		size_t b = sizes[i] * MIB;
		if (b > arena_bytes)
			continue;
		refused |= parts(arena, arena_bytes, b, reps) != CUDA_SUCCESS;
		own(b, reps);
	}
	int ok = refused || check(arena, arena_bytes);
	CK(cuMemRelease(arena));
	return refused ? 2 : ok ? 0 : 1;
}
