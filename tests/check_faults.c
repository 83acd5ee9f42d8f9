/*
 * check_faults.c: the mover under driver failures and memory pressure, on
 * the fake driver (FAKECUDA_FAIL): every result right, nothing released
 * that queued work may still use, and each failure said.
 */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "integ.h"
#include "testutil.h"

/* The random offload scenario under a limit that moves buffers all the
 * time, with slow kernels and copies, and extra environment. */
static void
run_offload(const char *extra1, const char *extra2, struct run_result *r, const char *trace)
{
	char *argv[] = { workload_path(0), "offload", "200", NULL };
	const char *env[] = { "EBB_MODE=offload", "EBB_LIMIT=24M", "WORKLOAD_SEED=7",
		"FAKECUDA_KERNEL_DELAY_US=100", "FAKECUDA_COPY_DELAY_US=300", extra1, extra2, NULL };

	run_ebb(argv, env, trace, r);
}

/*
 * ebb's own cuEventSynchronize fails (every call from the 40th on): the
 * workers must not take that for the copy's end. They ask cuEventQuery
 * until the copy is done, and release the memory then.
 */
START_TEST(event_sync_fails)
{
	const char *path = tmp_file("evsync");
	struct run_result r;
	struct trace t;

	run_offload("FAKECUDA_FAIL=cuEventSynchronize:40", NULL, &r, path);
	expect_ok(&r);
	trace_load(path, &t);
	ck_assert_uint_gt(summary(&t, "offloads"), 20);
	ck_assert_uint_eq(summary(&t, "copies-abandoned"), 0);
	trace_free(&t);
	run_free(&r);
	remove(path);
}
END_TEST

/*
 * Neither waiting for an event nor asking about it works for a while (a
 * broken context would answer so for good): what those copies may still
 * use is kept, not released or reused, the job's results stay right, and
 * it is said once.
 */
START_TEST(event_completion_unknown)
{
	const char *path = tmp_file("evunknown");
	struct run_result r;
	struct trace t;

	run_offload("FAKECUDA_FAIL=cuEventSynchronize:40,cuEventQuery:200:6=CUDA_ERROR_LAUNCH_FAILED",
	    "EBB_LIMIT=48M", &r, path);
	expect_ok(&r);
	ck_assert_int_eq(count_substr(r.err, "the memory it may still use is kept"), 1);
	trace_load(path, &t);
	ck_assert_uint_gt(summary(&t, "copies-abandoned"), 0);
	trace_free(&t);
	run_free(&r);
	remove(path);
}
END_TEST

/*
 * cuMemUnmap fails a few times: what stays mapped is never pooled or
 * mapped over (which the driver refuses, failing a later call of the
 * job's): the buffer stays resident, or, freed, is reused as it is; and the
 * first failure is said.
 */
START_TEST(unmap_fails)
{
	const char *path = tmp_file("unmap");
	struct run_result r;
	struct trace t;

	run_offload("FAKECUDA_FAIL=cuMemUnmap:5:2", NULL, &r, path);
	expect_ok(&r);
	ck_assert_int_eq(count_substr(r.err, "cuMemUnmap of "), 1);
	trace_load(path, &t);
	ck_assert_uint_ge(summary(&t, "unmaps-failed"), 1);
	ck_assert_uint_gt(summary(&t, "offloads"), 20);
	trace_free(&t);
	run_free(&r);
	remove(path);
}
END_TEST

/*
 * Eight threads churn 1 MiB buffers with cuMemAlloc and cuMemFree under a
 * 128 MiB limit, 16 MiB alive at a time: the memory they free is used
 * again once the device has passed the free, and no allocation fails.
 */
START_TEST(small_buffers_churn)
{
	const char *path = tmp_file("churn");
	char *argv[] = { workload_path(0), "churn", "8", NULL };
	const char *env[] = { "EBB_MODE=offload", "EBB_LIMIT=128M", "FAKECUDA_KERNEL_DELAY_US=50",
		NULL };
	struct run_result r;
	struct trace t;

	run_ebb(argv, env, path, &r);
	expect_ok(&r);
	trace_load(path, &t);
	ck_assert_uint_eq(summary(&t, "refusals"), 0);
	ck_assert_uint_le(summary(&t, "held-peak-bytes"), 128ULL << 20);
	trace_free(&t);
	run_free(&r);
	remove(path);
}
END_TEST

/*
 * What ebb cannot set up is said at the default verbosity, naming the
 * call: cuCtxGetDevice failing, and cuDeviceTotalMem failing where no
 * EBB_LIMIT says what to hold (a limit of 0 refused every allocation).
 * The job runs on the driver's memory, right.
 */
START_TEST(setup_failures_said)
{
	static const char *const fail[] = { "FAKECUDA_FAIL=cuCtxGetDevice:1",
		"FAKECUDA_FAIL=cuDeviceTotalMem:1" };
	static const char *const said[] = { "cuCtxGetDevice failed (error", "cuDeviceTotalMem failed (error" };
	for (int i = 0; i < 2; i++) {
		char *argv[] = { workload_path(0), "offload", "40", NULL };
		const char *env[] = { "EBB_MODE=offload", "EBB_VERBOSE=0", fail[i], NULL };
		struct run_result r;
		run_ebb(argv, env, NULL, &r);
		expect_ok(&r);
		ck_assert_msg(count_substr(r.err, said[i]) == 1, "%s not said once: %s", said[i], r.err);
		run_free(&r);
	}
	/* with EBB_LIMIT, the device's size is not needed */
	char *argv[] = { workload_path(0), "offload", "40", NULL };
	const char *env[] = { "EBB_MODE=offload", "EBB_LIMIT=24M", "EBB_VERBOSE=0",
		"FAKECUDA_FAIL=cuDeviceTotalMem:1", NULL };
	struct run_result r;
	run_ebb(argv, env, NULL, &r);
	expect_ok(&r);
	ck_assert_str_eq(r.err, "");
	run_free(&r);
}
END_TEST

/* An allocation ebb must refuse is said at the default verbosity. */
START_TEST(refusal_said)
{
	char *argv[] = { workload_path(0), "toobig", NULL };
	const char *env[] = { "EBB_MODE=offload", "EBB_LIMIT=8M", "EBB_VERBOSE=0", NULL };
	struct run_result r;

	run_ebb(argv, env, NULL, &r);
	expect_ok(&r);
	ck_assert_int_eq(count_substr(r.err, "out of memory for "), 1);
	run_free(&r);
}
END_TEST

/*
 * Under ebb run, a job that exits 0 though EBB_LIMIT was not held makes ebb
 * run exit 3, saying why: the mover could not start (cuCtxGetDevice
 * failed), or the driver's allocations took the job over the limit (a
 * mapping of the job's own under 6M). A job that held it exits 0 as it did.
 */
START_TEST(run_says_when_the_limit_was_not_held)
{
	static const struct {
		const char *scenario, *arg, *limit, *fail, *want;
		int status;
	} cases[] = {
		{ "offload", "40", "24M", "FAKECUDA_FAIL=cuCtxGetDevice:1", "cuCtxGetDevice failed", 3 },
		{ "vmm", "1", "6M", NULL, "over EBB_LIMIT=6291456", 3 },
		{ "vmm", "1", "16M", NULL, NULL, 0 },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char *argv[] = { (char *)build_path("utils/ebb"), "run", "--limit",
			(char *)cases[i].limit, "--", workload_path(0), (char *)cases[i].scenario,
			(char *)cases[i].arg, NULL };
		const char *env[] = { "EBB_VERBOSE=0", cases[i].fail, NULL };
		struct run_result r;
		run_ebb(argv, env, NULL, &r);
		ck_assert_msg(r.status == cases[i].status && strstr(r.out, "ok") != NULL,
		    "case %zu: status %d\n%s\n%s", i, r.status, r.out, r.err);
		if (cases[i].want != NULL) {
			ck_assert_int_eq(count_substr(r.err, "ebb run: EBB_LIMIT was not held in process "), 1);
			ck_assert_ptr_nonnull(strstr(r.err, cases[i].want));
		} else {
			ck_assert_ptr_null(strstr(r.err, "not held"));
		}
		run_free(&r);
	}
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("faults");
	TCase *tc = tcase_create("fake driver");

	tcase_set_timeout(tc, 120);
	add_test(tc, event_sync_fails);
	add_test(tc, event_completion_unknown);
	add_test(tc, unmap_fails);
	add_test(tc, small_buffers_churn);
	add_test(tc, setup_failures_said);
	add_test(tc, refusal_said);
	add_test(tc, run_says_when_the_limit_was_not_held);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
