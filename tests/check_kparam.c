/*
 * check_kparam.c: kernel parameter layouts and the scan of a launch's
 * arguments, with the driver's query functions stubbed.
 */
#include "config.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "interpose.h"
#include "kparam.h"
#include "testutil.h"

/* kparam.c reads the driver through this table; the tests fill it. */
struct ebb_real_table ebb_real;

/* Two fake kernels: a CUkernel handle with (ptr, int, struct{ptr,ptr,u64}) and
 * a CUfunction handle with (ptr, ptr). */
#define K_HANDLE ((uintptr_t)0x1000)
#define F_HANDLE ((uintptr_t)0x2000)
static int kernel_calls, func_calls;

static CUresult
stub_kernel_param(CUkernel k, size_t i, size_t *off, size_t *size)
{
	static const size_t offs[] = { 0, 8, 16 }, sizes[] = { 8, 4, 24 };
	kernel_calls++;
	if ((uintptr_t)k != K_HANDLE)
		return CUDA_ERROR_INVALID_HANDLE;
	if (i >= 3)
		return CUDA_ERROR_INVALID_VALUE;
	*off = offs[i];
	*size = sizes[i];
	return CUDA_SUCCESS;
}

static CUresult
stub_func_param(CUfunction f, size_t i, size_t *off, size_t *size)
{
	func_calls++;
	if ((uintptr_t)f != F_HANDLE)
		return CUDA_ERROR_INVALID_HANDLE;
	if (i >= 2)
		return CUDA_ERROR_INVALID_VALUE;
	*off = 8 * i;
	*size = 8;
	return CUDA_SUCCESS;
}

static CUresult
stub_kernel_name(const char **name, CUkernel k)
{
	if ((uintptr_t)k != K_HANDLE)
		return CUDA_ERROR_INVALID_HANDLE;
	*name = "kern";
	return CUDA_SUCCESS;
}

static CUresult
stub_func_name(const char **name, CUfunction f)
{
	if ((uintptr_t)f != F_HANDLE)
		return CUDA_ERROR_INVALID_HANDLE;
	*name = "func";
	return CUDA_SUCCESS;
}

static void
setup(void)
{
	memset(&ebb_real, 0, sizeof ebb_real);
	ebb_real.cuKernelGetParamInfo = stub_kernel_param;
	ebb_real.cuFuncGetParamInfo = stub_func_param;
	ebb_real.cuKernelGetName = stub_kernel_name;
	ebb_real.cuFuncGetName = stub_func_name;
	kernel_calls = func_calls = 0;
}

struct words {
	uint64_t w[64];
	int n;
};

static void
collect(uint64_t w, void *ctx)
{
	struct words *s = ctx;
	s->w[s->n++] = w;
}

START_TEST(layouts_cached_per_handle)
{
	struct kparam_cache c;

	setup();
	kparam_init(&c);
	ck_assert_ptr_null(kparam_get(&c, K_HANDLE));
	struct ebb_kinfo *k = kparam_add(&c, K_HANDLE);
	ck_assert_ptr_nonnull(k);
	ck_assert_int_eq(k->layout_known, 1);
	ck_assert_uint_eq(k->nparams, 3);
	ck_assert_uint_eq(k->size[2], 24);
	ck_assert_str_eq(k->name, "kern");
	ck_assert_uint_eq(k->id, 1);
	struct ebb_kinfo *f = kparam_add(&c, F_HANDLE);
	ck_assert_uint_eq(f->nparams, 2);
	ck_assert_str_eq(f->name, "func");
	ck_assert_uint_eq(f->id, 2);
	ck_assert_ptr_eq(kparam_get(&c, K_HANDLE), k);
	ck_assert_ptr_eq(kparam_get(&c, F_HANDLE), f);
	/* many kernels: the table grows and keeps every entry */
	for (uintptr_t h = 0x10000; h < 0x10000 + 3000 * 16; h += 16)
		ck_assert_ptr_nonnull(kparam_add(&c, h));
	ck_assert_ptr_eq(kparam_get(&c, K_HANDLE), k);
	struct ebb_kinfo *u = kparam_get(&c, 0x10000 + 16 * 77);
	ck_assert_ptr_nonnull(u);
	ck_assert_int_eq(u->layout_known, 0);	/* neither query accepts it */
	ck_assert_str_eq(u->name, "?");
	kparam_fini(&c);
}
END_TEST

START_TEST(scan_params_and_structs)
{
	struct kparam_cache c;

	setup();
	kparam_init(&c);
	struct ebb_kinfo *k = kparam_add(&c, K_HANDLE);
	uint64_t p0 = 0x7000;
	int p1 = 5;
	struct { uint64_t a, b, n; } p2 = { 0x8000, 0x9000, 77 };
	void *params[] = { &p0, &p1, &p2 };
	struct words s = { .n = 0 };

	ck_assert_int_eq(kparam_scan(k, params, NULL, 0, UINT64_MAX, collect, &s), 0);
	/* the pointer, then every word of the struct; the int is too small to be one */
	ck_assert_int_eq(s.n, 4);
	ck_assert_uint_eq(s.w[0], 0x7000);
	ck_assert_uint_eq(s.w[1], 0x8000);
	ck_assert_uint_eq(s.w[2], 0x9000);
	ck_assert_uint_eq(s.w[3], 77);
	kparam_fini(&c);
}
END_TEST

START_TEST(scan_extra_buffer)
{
	struct kparam_cache c;

	setup();
	kparam_init(&c);
	struct ebb_kinfo *f = kparam_add(&c, F_HANDLE);
	uint64_t blob[3] = { 0xa000, 0xb000, 0xc000 };
	size_t size = 20;	/* the last word is incomplete */
	void *extra[] = { CU_LAUNCH_PARAM_BUFFER_POINTER, blob, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
		CU_LAUNCH_PARAM_END };
	struct words s = { .n = 0 };

	ck_assert_int_eq(kparam_scan(f, NULL, extra, 0, UINT64_MAX, collect, &s), 0);
	ck_assert_int_eq(s.n, 2);
	ck_assert_uint_eq(s.w[1], 0xb000);
	/* no buffer pointer: unreadable */
	void *bad[] = { CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END };
	ck_assert_int_eq(kparam_scan(f, NULL, bad, 0, UINT64_MAX, collect, &s), -1);
	kparam_fini(&c);
}
END_TEST

/* Only the words in [lo, hi) reach the callback, in their order; an empty
 * range (an empty table's: lo above hi) lets none through. */
START_TEST(scan_skips_words_out_of_range)
{
	struct kparam_cache c;

	setup();
	kparam_init(&c);
	struct ebb_kinfo *k = kparam_add(&c, K_HANDLE);
	uint64_t p0 = 0x7000;
	int p1 = 5;
	struct { uint64_t a, b, n; } p2 = { 0x8000, 0x9000, 0x8fff };
	void *params[] = { &p0, &p1, &p2 };
	struct words s = { .n = 0 };

	ck_assert_int_eq(kparam_scan(k, params, NULL, 0x7800, 0x9000, collect, &s), 0);
	ck_assert_int_eq(s.n, 2);
	ck_assert_uint_eq(s.w[0], 0x8000);
	ck_assert_uint_eq(s.w[1], 0x8fff);
	s.n = 0;
	ck_assert_int_eq(kparam_scan(k, params, NULL, 0x7000, 0x7001, collect, &s), 0);
	ck_assert_int_eq(s.n, 1);
	ck_assert_uint_eq(s.w[0], 0x7000);
	s.n = 0;
	ck_assert_int_eq(kparam_scan(k, params, NULL, UINT64_MAX, 0, collect, &s), 0);
	ck_assert_int_eq(s.n, 0);
	/* the packed buffer alike */
	uint64_t blob[3] = { 0, 0xb000, 0xc000 };
	size_t size = sizeof blob;
	void *extra[] = { CU_LAUNCH_PARAM_BUFFER_POINTER, blob, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
		CU_LAUNCH_PARAM_END };
	struct ebb_kinfo *f = kparam_add(&c, F_HANDLE);
	ck_assert_int_eq(kparam_scan(f, NULL, extra, 0xb000, 0xc000, collect, &s), 0);
	ck_assert_int_eq(s.n, 1);
	ck_assert_uint_eq(s.w[0], 0xb000);
	kparam_fini(&c);
}
END_TEST

START_TEST(unknown_layout_is_unreadable)
{
	struct kparam_cache c;
	uint64_t x = 1;
	void *params[] = { &x };
	struct words s = { .n = 0 };

	setup();
	ebb_real.cuKernelGetParamInfo = NULL;
	ebb_real.cuFuncGetParamInfo = NULL;
	kparam_init(&c);
	struct ebb_kinfo *k = kparam_add(&c, K_HANDLE);
	ck_assert_int_eq(k->layout_known, 0);
	ck_assert_int_eq(kparam_scan(k, params, NULL, 0, UINT64_MAX, collect, &s), -1);
	ck_assert_int_eq(kparam_scan(k, NULL, NULL, 0, UINT64_MAX, collect, &s), 0);	/* no arguments */
	kparam_fini(&c);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("kparam");
	TCase *tc = tcase_create("kparam");

	add_test(tc, layouts_cached_per_handle);
	add_test(tc, scan_params_and_structs);
	add_test(tc, scan_extra_buffer);
	add_test(tc, scan_skips_words_out_of_range);
	add_test(tc, unknown_layout_is_unreadable);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
