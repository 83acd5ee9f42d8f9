/*
 * check_lrec.c: launch records (src/exec/lrec.c) on the fake driver, linked
 * directly: each kind of launch is recorded as its hook describes it, made,
 * and made again from its record into a fresh output buffer, whose bytes
 * must be the original output's; the record's geometry, stream and
 * attributes must be the call's. Also: what is not replayable, the bound,
 * and records that stay put while the arena grows.
 */
#include "config.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "interpose.h"
#include "kparam.h"
#include "launch.h"
#include "lrec.h"
#include "testutil.h"

#include "fakecuda.h"	/* after cuda_compat.h: the driver's versioned names (_v2) */

/* lrec.c and kparam.c call the driver through this table: the fake's. */
struct ebb_real_table ebb_real;

#define N 1024		/* elements of each buffer */

/* The fake's kernels, as the tests launch them. */
static CUkernel k_fill, k_axpy;		/* from a library: CUkernel handles */
static CUfunction f_copy, f_pair;	/* from a module: CUfunction handles */
static struct kparam_cache cache;
static CUstream stream;

#define CK(call) ck_assert_int_eq((call), CUDA_SUCCESS)

static void
setup(void)
{
	CUdevice dev;
	CUcontext ctx;
	CUmodule mod;
	CUlibrary lib;

	memset(&ebb_real, 0, sizeof ebb_real);
	ebb_real.cuKernelGetParamInfo = cuKernelGetParamInfo;
	ebb_real.cuFuncGetParamInfo = cuFuncGetParamInfo;
	ebb_real.cuKernelGetName = cuKernelGetName;
	ebb_real.cuFuncGetName = cuFuncGetName;
	ebb_real.cuLaunchKernel = cuLaunchKernel;
	ebb_real.cuLaunchKernel_ptsz = cuLaunchKernel_ptsz;
	ebb_real.cuLaunchKernelEx = cuLaunchKernelEx;
	ebb_real.cuLaunchKernelEx_ptsz = cuLaunchKernelEx_ptsz;
	ebb_real.cuLaunchCooperativeKernel = cuLaunchCooperativeKernel;
	ebb_real.cuLaunchCooperativeKernel_ptsz = cuLaunchCooperativeKernel_ptsz;
	CK(cuInit(0));
	CK(cuDeviceGet(&dev, 0));
	CK(cuDevicePrimaryCtxRetain(&ctx, dev));
	CK(cuCtxSetCurrent(ctx));
	CK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
	CK(cuModuleLoadData(&mod, FAKECUDA_MODULE_IMAGE));
	CK(cuModuleGetFunction(&f_copy, mod, "copy_bytes"));
	CK(cuModuleGetFunction(&f_pair, mod, "struct_ptrs"));
	CK(cuLibraryLoadData(&lib, FAKECUDA_MODULE_IMAGE, NULL, NULL, 0, NULL, NULL, 0));
	CK(cuLibraryGetKernel(&k_fill, lib, "fill_u32"));
	CK(cuLibraryGetKernel(&k_axpy, lib, "axpy_f32"));
	kparam_init(&cache);
}

static void
teardown(void)
{
	kparam_fini(&cache);
}

/* The layout of handle, as the engine caches it. */
static const struct ebb_kinfo *
layout(const void *handle)
{
	const struct ebb_kinfo *k = kparam_get(&cache, (uintptr_t)handle);
	if (k == NULL)
		k = kparam_add(&cache, (uintptr_t)handle);
	ck_assert_ptr_nonnull(k);
	ck_assert_int_eq(k->layout_known, 1);
	return k;
}

/* A device buffer of N words, each word v (0: zeros). */
static CUdeviceptr
buffer(uint32_t v)
{
	CUdeviceptr p;
	uint32_t h[N];

	CK(cuMemAlloc_v2(&p, sizeof h));
	for (int i = 0; i < N; i++)
		h[i] = v;
	CK(cuMemcpyHtoD_v2(p, h, sizeof h));
	return p;
}

/* A buffer of N floats 0, 1, 2, ... times scale. */
static CUdeviceptr
floats(float scale)
{
	CUdeviceptr p;
	float h[N];

	CK(cuMemAlloc_v2(&p, sizeof h));
	for (int i = 0; i < N; i++)
		h[i] = (float)i * scale;
	CK(cuMemcpyHtoD_v2(p, h, sizeof h));
	return p;
}

/* Whether buffers a and b hold the same N words, after the stream's work. */
static void
same_bytes(CUdeviceptr a, CUdeviceptr b, const char *what)
{
	uint32_t ha[N], hb[N];

	CK(cuStreamSynchronize(stream));
	CK(cuCtxSynchronize());
	CK(cuMemcpyDtoH_v2(ha, a, sizeof ha));
	CK(cuMemcpyDtoH_v2(hb, b, sizeof hb));
	ck_assert_msg(memcmp(ha, hb, sizeof ha) == 0, "%s: the launch again from its record wrote "
	    "other bytes than the original (word 0: %#x, not %#x)", what, hb[0], ha[0]);
}

/*
 * The record's parameter bytes with the pointer at offset off replaced by
 * out (a fresh output buffer), launched again; its bytes must be those of
 * the original output orig.
 */
static void
again_into(const struct lrec *r, uint32_t off, CUdeviceptr orig, CUdeviceptr out,
    const char *what)
{
	unsigned char bytes[256];

	ck_assert_uint_eq(r->state, LREC_REPLAYABLE);
	ck_assert_uint_le(r->nbytes, sizeof bytes);
	ck_assert_uint_le(off + 8, r->nbytes);
	memcpy(bytes, r->params, r->nbytes);
	memcpy(bytes + off, &out, 8);
	CK(lrec_launch(r, bytes));
	same_bytes(orig, out, what);
}

/* The fields every record has, against the launch it records. */
static void
same_launch(const struct lrec *r, const struct ebb_launch *l, CUstream s, int per_thread)
{
	ck_assert_uint_eq(r->func, (uintptr_t)l->func);
	ck_assert_ptr_eq(r->stream, s);
	ck_assert_uint_eq(r->per_thread, per_thread);
	ck_assert_uint_eq(r->entry, l->entry);
	ck_assert_mem_eq(r->grid, l->grid, sizeof r->grid);
	ck_assert_mem_eq(r->block, l->block, sizeof r->block);
	ck_assert_uint_eq(r->shmem, l->shmem);
	ck_assert_uint_eq(r->nattrs, l->nattrs);
	if (l->nattrs > 0) {
		ck_assert_ptr_ne(r->attrs, l->attrs);	/* a copy, not the caller's */
		ck_assert_mem_eq(r->attrs, l->attrs, l->nattrs * sizeof *l->attrs);
	}
}

/*
 * Each entry point and each way of passing arguments, recorded, made, its
 * caller's argument memory overwritten (as the caller's stack is after the
 * call), and made again from the record into a fresh output: the same bytes.
 */
START_TEST(launch_again_from_record)
{
	struct lrec_set set;
	ck_assert_int_eq(lrec_set_init(&set, 8, 1 << 20), 0);

	/* 0: fill_u32, a CUkernel with kernelParams, cuLaunchKernel */
	CUdeviceptr fill_out = buffer(0), fill_again = buffer(0);
	struct fakecuda_fill_u32_params fp = { (uint32_t *)fill_out, 0xabcd1234u, N };
	void *fargs[] = { &fp.dst, &fp.value, &fp.n };
	struct ebb_launch fl = { .func = (CUfunction)k_fill, .params = fargs, .grid = { 4, 2, 1 },
		.block = { 64, 2, 1 }, .shmem = 0, .entry = EBB_LAUNCH_PLAIN };
	ck_assert_int_eq(lrec_add(&set, 0, &fl, layout(k_fill), stream, 0, NULL, 0),
	    LREC_REPLAYABLE);
	CK(cuLaunchKernel(fl.func, 4, 2, 1, 64, 2, 1, 0, stream, fargs, NULL));

	/* 2: copy_bytes, a CUfunction with its arguments packed in `extra`,
	 * cuLaunchKernel_ptsz on the per-thread default stream */
	CUdeviceptr src = buffer(0x5a5a0001u), copy_out = buffer(0), copy_again = buffer(0);
	struct fakecuda_copy_bytes_params cp = { (void *)copy_out, (const void *)src, 4 * N };
	size_t csize = sizeof cp;
	void *extra[] = { CU_LAUNCH_PARAM_BUFFER_POINTER, &cp, CU_LAUNCH_PARAM_BUFFER_SIZE, &csize,
		CU_LAUNCH_PARAM_END };
	struct ebb_launch cl = { .func = f_copy, .extra = extra, .grid = { 1, 1, 1 },
		.block = { 128, 1, 1 }, .shmem = 64, .entry = EBB_LAUNCH_PLAIN };
	ck_assert_int_eq(lrec_add(&set, 2, &cl, layout(f_copy), NULL, 1, NULL, 0),
	    LREC_REPLAYABLE);
	CK(cuLaunchKernel_ptsz(f_copy, 1, 1, 1, 128, 1, 1, 64, NULL, NULL, extra));

	/* 3: axpy_f32 through cuLaunchKernelEx, with two attributes */
	CUdeviceptr x = floats(0.5f), y = buffer(0), y_again = buffer(0);
	struct fakecuda_axpy_f32_params ap = { (float *)y, (const float *)x, 3.0f, N };
	void *aargs[] = { &ap.y, &ap.x, &ap.a, &ap.n };
	CUlaunchAttribute attrs[2] = {
		{ .id = CU_LAUNCH_ATTRIBUTE_PRIORITY, .value.priority = 2 },
		{ .id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE, .value.cooperative = 0 },
	};
	CUlaunchConfig cfg = { 3, 1, 2, 32, 4, 1, 256, stream, attrs, 2 };
	struct ebb_launch al = { .func = (CUfunction)k_axpy, .params = aargs, .attrs = attrs,
		.nattrs = 2, .grid = { 3, 1, 2 }, .block = { 32, 4, 1 }, .shmem = 256,
		.entry = EBB_LAUNCH_EX };
	ck_assert_int_eq(lrec_add(&set, 3, &al, layout(k_axpy), stream, 0, NULL, 0),
	    LREC_REPLAYABLE);
	CK(cuLaunchKernelEx(&cfg, al.func, aargs, NULL));

	/* 5: struct_ptrs, a struct of two pointers by value, cooperatively */
	CUdeviceptr a = floats(1.0f), b = floats(2.0f), sum = buffer(0), sum_again = buffer(0);
	struct fakecuda_struct_ptrs_params pp = { { (float *)a, (const float *)b, N },
		(float *)sum };
	void *pargs[] = { &pp.p, &pp.out };
	struct ebb_launch pl = { .func = f_pair, .params = pargs, .grid = { 2, 2, 2 },
		.block = { 8, 8, 8 }, .shmem = 0, .entry = EBB_LAUNCH_COOP };
	ck_assert_int_eq(lrec_add(&set, 5, &pl, layout(f_pair), stream, 0, NULL, 0),
	    LREC_REPLAYABLE);
	CK(cuLaunchCooperativeKernel(f_pair, 2, 2, 2, 8, 8, 8, 0, stream, pargs));
	CK(cuStreamSynchronize(stream));
	CK(cuCtxSynchronize());

	/* the caller's argument memory is gone after the call */
	memset(&fp, 0xee, sizeof fp);
	memset(&cp, 0xee, sizeof cp);
	memset(&ap, 0xee, sizeof ap);
	memset(&pp, 0xee, sizeof pp);
	memset(attrs, 0, sizeof attrs);
	memset(&cfg, 0, sizeof cfg);

	const struct lrec *r = lrec_at(&set, 0);
	ck_assert_ptr_nonnull(r);
	ck_assert_uint_eq(r->nbytes, 24);	/* dst 0-7, value 8-11, n 16-23 */
	ck_assert_uint_eq(r->packed, 0);
	again_into(r, 0, fill_out, fill_again, "fill_u32");

	ck_assert_ptr_null(lrec_at(&set, 1));	/* no launch there */
	r = lrec_at(&set, 2);
	ck_assert_ptr_nonnull(r);
	ck_assert_uint_eq(r->nbytes, sizeof cp);
	ck_assert_uint_eq(r->packed, 1);
	again_into(r, 0, copy_out, copy_again, "copy_bytes (packed)");

	r = lrec_at(&set, 3);
	ck_assert_ptr_nonnull(r);
	ck_assert_uint_eq(r->nbytes, 32);	/* y, x, a, n */
	ck_assert_int_eq(r->attrs[0].id, CU_LAUNCH_ATTRIBUTE_PRIORITY);
	ck_assert_int_eq(r->attrs[0].value.priority, 2);
	ck_assert_int_eq(r->attrs[1].id, CU_LAUNCH_ATTRIBUTE_COOPERATIVE);
	again_into(r, 0, y, y_again, "axpy_f32 (cuLaunchKernelEx)");

	r = lrec_at(&set, 5);
	ck_assert_ptr_nonnull(r);
	ck_assert_uint_eq(r->nbytes, 32);	/* the pair 0-23, out 24-31 */
	again_into(r, 24, sum, sum_again, "struct_ptrs (cooperative)");

	/* as the caller passed them, but for what the memset above overwrote */
	CUlaunchAttribute want[2] = {
		{ .id = CU_LAUNCH_ATTRIBUTE_PRIORITY, .value.priority = 2 },
		{ .id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE, .value.cooperative = 0 },
	};
	al.attrs = want;
	same_launch(lrec_at(&set, 0), &fl, stream, 0);
	same_launch(lrec_at(&set, 2), &cl, NULL, 1);
	same_launch(lrec_at(&set, 3), &al, stream, 0);
	same_launch(lrec_at(&set, 5), &pl, stream, 0);

	/* and in place, with the record's own bytes: the output written again */
	CUdeviceptr zero = buffer(0);
	CK(cuMemcpyDtoD_v2(fill_out, zero, 4 * N));
	CK(lrec_launch(lrec_at(&set, 0), NULL));
	same_bytes(fill_again, fill_out, "fill_u32 in place");

	ck_assert_uint_eq(set.st.records, 4);
	ck_assert_uint_eq(set.st.unreplayable, 0);
	ck_assert_uint_eq(set.st.unrecorded, 0);
	ck_assert_uint_eq(set.st.param_bytes, 24 + sizeof cp + 32 + 32);
	lrec_set_fini(&set);
}
END_TEST

/* Buffers lrec_relocate names: each of N words; one not named at all. */
static CUdeviceptr named[4];
static CUdeviceptr unnamed_buf;

/* lrec_relocate's callback over named[]: the index of the buffer holding
 * word, LREC_UNNAMED inside unnamed_buf, else LREC_NO_BUF. */
static uint32_t
name_of(uint64_t word, uint64_t *delta, void *ctx)
{
	(void)ctx;
	for (uint32_t i = 0; i < 4; i++)
		if (word >= named[i] && word < named[i] + 4 * N) {
			*delta = word - named[i];
			return i;
		}
	return word >= unnamed_buf && word < unnamed_buf + 4 * N ? LREC_UNNAMED : LREC_NO_BUF;
}

/* Where the buffers of lrec_params live now (another iteration's). */
static CUdeviceptr moved[4];

static uint64_t
moved_to(uint32_t buf, void *ctx)
{
	(void)ctx;
	return buf < 4 ? moved[buf] : 0;
}

/*
 * A record's words that held buffers' addresses are named (and no other:
 * struct_ptrs's count, copy_bytes's byte count); its parameters remade for
 * buffers elsewhere launch it on those: struct_ptrs from the pair's new
 * buffers into the new output gives what a launch on them gives, and a
 * pointer into the middle of a buffer keeps its offset. A word inside a
 * buffer without a name leaves the record not relocated.
 */
START_TEST(relocated_to_other_buffers)
{
	struct lrec_set set;
	ck_assert_int_eq(lrec_set_init(&set, 4, 1 << 20), 0);
	named[0] = floats(1.0f);
	named[1] = floats(2.0f);
	named[2] = buffer(0);
	named[3] = buffer(0x11u);
	unnamed_buf = buffer(0);

	/* 0: struct_ptrs over named 0, 1 into 2 */
	struct fakecuda_struct_ptrs_params pp = { { (float *)named[0], (const float *)named[1], N },
		(float *)named[2] };
	void *pargs[] = { &pp.p, &pp.out };
	struct ebb_launch pl = { .func = f_pair, .params = pargs, .grid = { 1, 1, 1 },
		.block = { 32, 1, 1 }, .entry = EBB_LAUNCH_PLAIN };
	ck_assert_int_eq(lrec_add(&set, 0, &pl, layout(f_pair), stream, 0, NULL, 0),
	    LREC_REPLAYABLE);
	ck_assert_int_eq(lrec_relocate(&set, 0, name_of, NULL), 0);
	const struct lrec *r = lrec_at(&set, 0);
	ck_assert_uint_eq(r->relocated, 1);
	ck_assert_uint_eq(r->nrelocs, 3);
	ck_assert_uint_eq(r->relocs[0].off, 0);
	ck_assert_uint_eq(r->relocs[0].buf, 0);
	ck_assert_uint_eq(r->relocs[1].off, 8);
	ck_assert_uint_eq(r->relocs[1].buf, 1);
	ck_assert_uint_eq(r->relocs[2].off, 24);
	ck_assert_uint_eq(r->relocs[2].buf, 2);

	/* 1: copy_bytes packed, from 16 bytes into named 3 to named 2 */
	struct fakecuda_copy_bytes_params cp = { (void *)named[2], (const void *)(named[3] + 16),
		4 * N - 16 };
	size_t csize = sizeof cp;
	void *extra[] = { CU_LAUNCH_PARAM_BUFFER_POINTER, &cp, CU_LAUNCH_PARAM_BUFFER_SIZE, &csize,
		CU_LAUNCH_PARAM_END };
	struct ebb_launch cl = { .func = f_copy, .extra = extra, .grid = { 1, 1, 1 },
		.block = { 128, 1, 1 }, .entry = EBB_LAUNCH_PLAIN };
	ck_assert_int_eq(lrec_add(&set, 1, &cl, layout(f_copy), stream, 0, NULL, 0),
	    LREC_REPLAYABLE);
	ck_assert_int_eq(lrec_relocate(&set, 1, name_of, NULL), 0);
	r = lrec_at(&set, 1);
	ck_assert_uint_eq(r->nrelocs, 2);
	ck_assert_uint_eq(r->relocs[1].buf, 3);
	ck_assert_uint_eq(r->relocs[1].delta, 16);

	/* the pair's buffers of another iteration, other values */
	moved[0] = floats(3.0f);
	moved[1] = floats(5.0f);
	moved[2] = buffer(0);
	moved[3] = buffer(0x22u);
	CUdeviceptr want = buffer(0);
	struct fakecuda_struct_ptrs_params dp = { { (float *)moved[0], (const float *)moved[1], N },
		(float *)want };
	void *dargs[] = { &dp.p, &dp.out };
	CK(cuLaunchKernel(f_pair, 1, 1, 1, 32, 1, 1, 0, stream, dargs, NULL));
	unsigned char bytes[256];
	ck_assert_int_eq(lrec_params(lrec_at(&set, 0), NULL, bytes, moved_to, NULL), 0);
	CK(lrec_launch(lrec_at(&set, 0), bytes));
	same_bytes(want, moved[2], "struct_ptrs relocated");
	/* copy_bytes relocated: moved 3 from its word 4 on lands in moved 2 */
	ck_assert_int_eq(lrec_params(lrec_at(&set, 1), NULL, bytes, moved_to, NULL), 0);
	uint64_t n;
	memcpy(&n, bytes + 16, 8);
	ck_assert_uint_eq(n, 4 * N - 16);	/* not a buffer: as recorded */
	CK(lrec_launch(lrec_at(&set, 1), bytes));
	CK(cuStreamSynchronize(stream));
	uint32_t h[N];
	CK(cuMemcpyDtoH_v2(h, moved[2], sizeof h));
	ck_assert_uint_eq(h[0], 0x22u);

	/* a buffer with no name in the arguments: not relocated, no parameters */
	pp.out = (float *)unnamed_buf;
	ck_assert_int_eq(lrec_add(&set, 2, &pl, layout(f_pair), stream, 0, NULL, 0),
	    LREC_REPLAYABLE);
	ck_assert_int_eq(lrec_relocate(&set, 2, name_of, NULL), -1);
	ck_assert_uint_eq(lrec_at(&set, 2)->relocated, 0);
	ck_assert_int_eq(lrec_params(lrec_at(&set, 2), NULL, bytes, moved_to, NULL), -1);
	/* where no buffer lives now: no parameters */
	moved[1] = 0;
	ck_assert_int_eq(lrec_params(lrec_at(&set, 0), NULL, bytes, moved_to, NULL), -1);
	ck_assert_int_eq(lrec_relocate(&set, 3, name_of, NULL), -1);	/* no launch there */
	lrec_set_fini(&set);
}
END_TEST

/* What cannot be launched again is recorded and marked so, and
 * lrec_launch refuses it. */
START_TEST(unreplayable_marked)
{
	struct lrec_set set;
	uint64_t v = 7;
	void *args[] = { &v, NULL, &v };
	size_t size = 24;
	void *no_size[] = { CU_LAUNCH_PARAM_BUFFER_POINTER, &v, CU_LAUNCH_PARAM_END };
	void *no_buf[] = { CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END };
	struct ebb_kinfo unknown = { .handle = 0x77, .layout_known = 0, .name = (char *)"?" };
	struct ebb_kinfo none = { .handle = 0x78, .layout_known = 1, .nparams = 0, .name = (char *)"none" };
	struct ebb_launch l = { .func = (CUfunction)k_fill, .grid = { 1, 1, 1 },
		.block = { 1, 1, 1 } };

	ck_assert_int_eq(lrec_set_init(&set, 8, 1 << 20), 0);
	l.params = args;
	ck_assert_int_eq(lrec_add(&set, 0, &l, &unknown, stream, 0, NULL, 0), LREC_UNREPLAYABLE);
	ck_assert_int_eq(lrec_add(&set, 1, &l, NULL, stream, 0, NULL, 0), LREC_UNREPLAYABLE);
	/* a parameter pointer missing */
	ck_assert_int_eq(lrec_add(&set, 2, &l, layout(k_fill), stream, 0, NULL, 0),
	    LREC_UNREPLAYABLE);
	l.params = NULL;
	l.extra = no_size;
	ck_assert_int_eq(lrec_add(&set, 3, &l, layout(k_fill), stream, 0, NULL, 0),
	    LREC_UNREPLAYABLE);
	l.extra = no_buf;
	ck_assert_int_eq(lrec_add(&set, 4, &l, layout(k_fill), stream, 0, NULL, 0),
	    LREC_UNREPLAYABLE);
	/* no arguments for a kernel that takes some; none for one that takes none */
	l.extra = NULL;
	ck_assert_int_eq(lrec_add(&set, 5, &l, layout(k_fill), stream, 0, NULL, 0),
	    LREC_UNREPLAYABLE);
	ck_assert_int_eq(lrec_add(&set, 6, &l, &none, stream, 0, NULL, 0), LREC_REPLAYABLE);
	/* complete, but taken into a graph by a stream capture */
	v = 0;
	void *full[] = { &v, &v, &v };
	l.params = full;
	ck_assert_int_eq(lrec_add(&set, 7, &l, layout(k_fill), stream, 0, NULL, 1),
	    LREC_UNREPLAYABLE);
	for (uint32_t i = 0; i < 8; i++) {
		const struct lrec *r = lrec_at(&set, i);
		ck_assert_ptr_nonnull(r);
		ck_assert_uint_eq(r->grid[0], 1);
		if (i != 6)
			ck_assert_int_eq(lrec_launch(r, NULL), CUDA_ERROR_INVALID_VALUE);
		if (i < 6)
			ck_assert_uint_eq(r->nbytes, 0);
	}
	ck_assert_uint_eq(lrec_at(&set, 7)->nbytes, 24);	/* its bytes are kept */
	ck_assert_uint_eq(set.st.records, 8);
	ck_assert_uint_eq(set.st.unreplayable, 7);
	lrec_set_fini(&set);
}
END_TEST

/*
 * The bound holds: records fit until it is reached, the launches after it
 * are marked not recorded, and the memory held stays within it; an index
 * larger than the bound records nothing.
 */
START_TEST(bound_marks_unrecorded)
{
	struct lrec_set set;
	uint64_t v = 0;
	void *args[] = { &v, &v, &v };
	struct ebb_launch l = { .func = (CUfunction)k_fill, .params = args, .grid = { 1, 1, 1 },
		.block = { 1, 1, 1 } };
	const uint64_t bound = 2048;
	const uint32_t n = 100;

	ck_assert_int_eq(lrec_set_init(&set, n, bound), 0);
	uint32_t first_unrecorded = n;
	for (uint32_t i = 0; i < n; i += 2) {
		int st = lrec_add(&set, i, &l, layout(k_fill), stream, 0, NULL, 0);
		if (st == LREC_UNRECORDED && first_unrecorded == n)
			first_unrecorded = i;
		ck_assert_int_eq(st, i < first_unrecorded ? LREC_REPLAYABLE : LREC_UNRECORDED);
	}
	ck_assert_uint_gt(first_unrecorded, 0);
	ck_assert_uint_lt(first_unrecorded, n);
	ck_assert_uint_le(set.st.bytes, bound);
	ck_assert_uint_eq(set.st.records + set.st.unrecorded, n / 2);
	ck_assert_uint_eq(set.st.records, first_unrecorded / 2);
	ck_assert_uint_eq(set.st.param_bytes, 24 * set.st.records);
	ck_assert_int_eq(lrec_at(&set, n - 2)->state, LREC_UNRECORDED);
	ck_assert_int_eq(lrec_launch(lrec_at(&set, n - 2), NULL), CUDA_ERROR_INVALID_VALUE);
	ck_assert_ptr_null(lrec_at(&set, n - 1));
	ck_assert_ptr_null(lrec_at(&set, n));
	lrec_set_fini(&set);

	/* the index alone is over the bound: nothing is recorded */
	ck_assert_int_eq(lrec_set_init(&set, n, 8 * n - 1), -1);
	ck_assert_int_eq(lrec_add(&set, 0, &l, layout(k_fill), stream, 0, NULL, 0),
	    LREC_UNRECORDED);
	ck_assert_ptr_null(lrec_at(&set, 0));
	ck_assert_uint_eq(set.st.unrecorded, 1);
	ck_assert_uint_eq(set.st.bytes, 0);
	lrec_set_fini(&set);
	ck_assert_int_eq(lrec_set_init(&set, n, 0), -1);
	lrec_set_fini(&set);
}
END_TEST

/* Records stay where they are while the arena grows by chunks. */
START_TEST(records_stay_put)
{
	enum { M = 20000 };
	struct lrec_set set;
	static uint64_t vals[M];
	static const struct lrec *first[M];
	void *args[3];
	struct ebb_launch l = { .func = (CUfunction)k_fill, .params = args, .grid = { 1, 1, 1 },
		.block = { 1, 1, 1 } };

	ck_assert_int_eq(lrec_set_init(&set, M, 256u << 20), 0);
	for (uint32_t i = 0; i < M; i++) {
		vals[i] = i * 3 + 1;
		args[0] = args[1] = args[2] = &vals[i];
		l.grid[0] = i + 1;
		ck_assert_int_eq(lrec_add(&set, i, &l, layout(k_fill), stream, 0, NULL, 0),
		    LREC_REPLAYABLE);
		first[i] = lrec_at(&set, i);
	}
	for (uint32_t i = 0; i < M; i++) {
		const struct lrec *r = lrec_at(&set, i);
		uint64_t w;
		ck_assert_ptr_eq(r, first[i]);
		ck_assert_uint_eq(r->grid[0], i + 1);
		memcpy(&w, r->params + 16, 8);
		ck_assert_uint_eq(w, i * 3 + 1);
	}
	/* more than one chunk, and not much more memory than the records */
	ck_assert_uint_gt(set.st.bytes, 2 * (64u << 10));
	ck_assert_uint_lt(set.st.bytes, 8 * (uint64_t)M + 4 * (uint64_t)M * 128);
	lrec_set_fini(&set);
}
END_TEST

/*
 * An argument set takes each of its positions' arguments at their launch
 * (the same launch, other values), answers NULL for a launch that is not
 * the recorded one, for positions not its own and after a clear.
 */
START_TEST(argset_takes_this_iterations_arguments)
{
	struct lrec_set set;
	struct lrec_argset a;
	uint64_t v = 7, w = 9;
	void *args[] = { &v, &v, &v };
	struct ebb_launch l = { .func = (CUfunction)k_fill, .params = args, .grid = { 1, 1, 1 },
		.block = { 1, 1, 1 } };
	const uint32_t pos[] = { 3, 1, 3 };

	ck_assert_int_eq(lrec_set_init(&set, 6, 1 << 20), 0);
	for (uint32_t i = 0; i < 6; i++)
		ck_assert_int_eq(lrec_add(&set, i, &l, layout(k_fill), stream, 0, NULL, 0),
		    LREC_REPLAYABLE);
	ck_assert_int_eq(lrec_argset_init(&a, &set, pos, 3), 0);
	ck_assert_uint_eq(a.m, 2);
	ck_assert_ptr_null(lrec_argset_get(&a, 3));
	args[1] = &w;
	ck_assert_int_eq(lrec_argset_take(&a, &set, 3, &l), 1);
	ck_assert_int_eq(lrec_argset_take(&a, &set, 2, &l), 0);
	const unsigned char *got = lrec_argset_get(&a, 3);
	ck_assert_ptr_nonnull(got);
	uint64_t word;
	memcpy(&word, got + 8, 8);
	ck_assert_uint_eq(word, 9);
	memcpy(&word, got, 8);
	ck_assert_uint_eq(word, 7);
	ck_assert_ptr_null(lrec_argset_get(&a, 1));
	ck_assert_ptr_null(lrec_argset_get(&a, 2));
	ck_assert_ptr_null(lrec_argset_get(&a, 6));
	/* another geometry is another launch: nothing taken there */
	l.grid[0] = 2;
	ck_assert_int_eq(lrec_argset_take(&a, &set, 1, &l), -1);
	ck_assert_ptr_null(lrec_argset_get(&a, 1));
	ck_assert_int_eq(lrec_argset_take(&a, &set, 3, NULL), -1);
	ck_assert_ptr_null(lrec_argset_get(&a, 3));
	l.grid[0] = 1;
	ck_assert_int_eq(lrec_argset_take(&a, &set, 1, &l), 1);
	lrec_argset_clear(&a);
	ck_assert_ptr_null(lrec_argset_get(&a, 1));
	lrec_argset_fini(&a);
	ck_assert_ptr_null(lrec_argset_get(&a, 1));
	ck_assert_int_eq(lrec_argset_take(&a, &set, 1, &l), 0);
	lrec_set_fini(&set);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("lrec");
	TCase *tc = tcase_create("launch records");

	tcase_add_checked_fixture(tc, setup, teardown);
	add_test(tc, launch_again_from_record);
	add_test(tc, relocated_to_other_buffers);
	add_test(tc, unreplayable_marked);
	add_test(tc, bound_marks_unrecorded);
	add_test(tc, records_stay_put);
	add_test(tc, argset_takes_this_iterations_arguments);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
