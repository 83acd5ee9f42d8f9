/*
 * check_integration.c: libebb.so preloaded into real programs that drive
 * the fake CUDA driver (tests/fakecuda), checked through the trace.
 */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "integ.h"
#include "testutil.h"

/* The basic scenario's trace, through one way of reaching the driver. */
static void
check_basic(const char *via, int linked)
{
	const char *path = tmp_file("basic");
	char viaarg[64];
	snprintf(viaarg, sizeof viaarg, "--via=%s", via);
	char *argv[] = { workload_path(linked), linked ? "basic" : viaarg, linked ? NULL : "basic",
		NULL };
	struct run_result r;
	struct trace t;

	run_ebb(argv, NULL, path, &r);
	expect_ok(&r);
	trace_load(path, &t);
	/* every allocation and free seen */
	ck_assert_uint_eq(count_type(&t, 'A'), 6);
	ck_assert_uint_eq(count_type(&t, 'F'), 6);
	uint64_t fill = kernel_id(&t, "fill_u32"), copy = kernel_id(&t, "copy_bytes"),
	    pair = kernel_id(&t, "struct_ptrs"), axpy = kernel_id(&t, "axpy_f32"),
	    sleep = kernel_id(&t, "sleep_us");
	ck_assert(fill && copy && pair && axpy && sleep);
	/* kernelParams, an interior pointer, the packed extra buffer, pointers
	 * inside a struct passed by value, cuLaunchKernelEx, no pointer at all */
	ck_assert_str_eq(launch_bufs(&t, fill, 0), "1");
	ck_assert_str_eq(launch_bufs(&t, fill, 1), "1");
	ck_assert_str_eq(launch_bufs(&t, copy, 0), "3,1");
	ck_assert_str_eq(launch_bufs(&t, pair, 0), "4,5,6");
	ck_assert_str_eq(launch_bufs(&t, axpy, 0), "6,4");
	ck_assert_str_eq(launch_bufs(&t, sleep, 0), "");
	ck_assert_uint_eq(summary(&t, "launches"), 6);
	ck_assert_uint_eq(summary(&t, "launches-unresolved"), 0);
	ck_assert_uint_eq(summary(&t, "launches-without-buffer"), 1);
	/* copies and memsets name their buffers */
	ck_assert_uint_eq(count_type(&t, 'C'), 4);
	ck_assert_uint_eq(count_type(&t, 'M'), 2);
	ck_assert_uint_eq(summary(&t, "peak-bytes"), 3 * (1 << 20) + 3 * 4096);
	/* the exit summary on stderr */
	ck_assert_msg(strstr(r.err, "6 launches (0 unresolved, 1 without a tracked buffer)") != NULL,
	    "summary missing: %s", r.err);
	trace_free(&t);
	run_free(&r);
	remove(path);
}

START_TEST(basic_via_procaddress_v2) { check_basic("procaddress", 0); }
END_TEST
START_TEST(basic_via_procaddress_v1) { check_basic("procaddress-v1", 0); }
END_TEST
START_TEST(basic_via_procaddress_ptsz) { check_basic("procaddress-ptsz", 0); }
END_TEST
START_TEST(basic_via_dlsym) { check_basic("dlsym", 0); }
END_TEST
START_TEST(basic_via_elf_symbols) { check_basic("linked", 1); }
END_TEST

/* Per-thread default stream: operations on stream 0 through _ptsz entries are on 0x2. */
START_TEST(ptsz_streams)
{
	const char *path = tmp_file("ptsz");
	char *argv[] = { workload_path(0), "--via=procaddress-ptsz", "basic", NULL };
	struct run_result r;
	struct trace t;
	size_t per_thread = 0, legacy = 0;

	run_ebb(argv, NULL, path, &r);
	expect_ok(&r);
	trace_load(path, &t);
	for (size_t i = 0; i < t.n; i++)
		if (t.r[i].type == 'L') {
			per_thread += strcmp(t.r[i].f[2], "0x2") == 0;
			legacy += strcmp(t.r[i].f[2], "0x1") == 0;
		}
	ck_assert_uint_eq(per_thread, 6);
	ck_assert_uint_eq(legacy, 0);
	trace_free(&t);
	run_free(&r);
}
END_TEST

/* Nothing recorded, nothing changed, with ebb preloaded but off. */
START_TEST(mode_off_passes_through)
{
	const char *path = tmp_file("off");
	char *argv[] = { workload_path(0), "basic", NULL };
	const char *env[] = { "EBB_MODE=off", NULL };
	struct run_result r;

	run_ebb(argv, env, path, &r);
	expect_ok(&r);
	char *text = read_file(path);
	ck_assert_str_eq(text, "");
	ck_assert_ptr_null(strstr(r.err, "launches"));
	free(text);
	run_free(&r);
}
END_TEST

/* The loop's iteration is found, starting after the sync. */
START_TEST(iterations_found)
{
	const char *path = tmp_file("loop");
	char *argv[] = { workload_path(0), "loop", "30", NULL };
	struct run_result r;
	struct trace t;

	run_ebb(argv, NULL, path, &r);
	expect_ok(&r);
	trace_load(path, &t);
	/* 5 launches, 1 copy and 1 sync an iteration */
	ck_assert_uint_eq(summary(&t, "period"), 7);
	uint64_t iters = count_type(&t, 'I');
	ck_assert_uint_ge(iters, 25);
	ck_assert_uint_eq(count_type(&t, 'D'), 0);
	/* each iteration after the first starts with the launch after the sync */
	int first = 1;
	for (size_t i = 0; i < t.n; i++) {
		if (t.r[i].type != 'I' || first) {
			first &= t.r[i].type != 'I';
			continue;
		}
		uint64_t seq = num(&t.r[i], 2);
		for (size_t j = 0; j < t.n; j++)
			if (t.r[j].type == 'Y' && num(&t.r[j], 1) == seq - 1)
				goto next;
		ck_abort_msg("iteration at seq %llu does not follow a sync", (unsigned long long)seq);
next:		;
	}
	trace_free(&t);
	run_free(&r);
}
END_TEST

START_TEST(iteration_kernel_marks)
{
	const char *path = tmp_file("mark");
	char *argv[] = { workload_path(0), "loop", "10", NULL };
	const char *env[] = { "EBB_ITER_KERNEL=axpy", NULL };
	struct run_result r;
	struct trace t;

	run_ebb(argv, env, path, &r);
	expect_ok(&r);
	trace_load(path, &t);
	ck_assert_uint_eq(count_type(&t, 'I'), 10);
	ck_assert_uint_eq(summary(&t, "period"), 7);
	trace_free(&t);
	run_free(&r);
}
END_TEST

/* Many threads, each with its own stream, allocating and launching at once. */
START_TEST(threads)
{
	const char *path = tmp_file("threads");
	char *argv[] = { workload_path(0), "threads", "8", NULL };
	struct run_result r;
	struct trace t;

	run_ebb(argv, NULL, path, &r);
	expect_ok(&r);
	trace_load(path, &t);
	ck_assert_uint_eq(count_type(&t, 'L'), 8 * 50 * 2);
	ck_assert_uint_eq(count_type(&t, 'A'), 8 * 50 * 2);
	ck_assert_uint_eq(count_type(&t, 'F'), 8 * 50 * 2);
	ck_assert_uint_eq(summary(&t, "launches-unresolved"), 0);
	ck_assert_uint_eq(summary(&t, "launches-without-buffer"), 0);
	/* sequence numbers are unique */
	size_t nops = 0;
	uint64_t *seqs = malloc(t.n * sizeof *seqs);
	for (size_t i = 0; i < t.n; i++)
		if (strchr("LCMY", t.r[i].type))
			seqs[nops++] = num(&t.r[i], 1);
	for (size_t i = 0; i < nops; i++)
		for (size_t j = i + 1; j < nops; j++)
			ck_assert_uint_ne(seqs[i], seqs[j]);
	free(seqs);
	trace_free(&t);
	run_free(&r);
}
END_TEST

/* A child forked after ebb started writes nothing; the parent's trace is whole. */
START_TEST(fork_child)
{
	const char *path = tmp_file("fork");
	char *argv[] = { workload_path(0), "fork", NULL };
	struct run_result r;
	struct trace t;

	run_ebb(argv, NULL, path, &r);
	expect_ok(&r);
	trace_load(path, &t);
	ck_assert_uint_eq(count_type(&t, 'L'), 2 * (1 + 3 * 5));
	ck_assert_uint_eq(count_type(&t, 'Z'), 16);
	uint64_t last = 0;
	for (size_t i = 0; i < t.n; i++)
		if (t.r[i].type == 'L') {
			ck_assert_uint_gt(num(&t.r[i], 1), last);
			last = num(&t.r[i], 1);
		}
	trace_free(&t);
	run_free(&r);
}
END_TEST

/*
 * Beside another preloaded library that wraps dlopen and finds the next
 * dlopen with dlsym(RTLD_NEXT), in either order: dlsym(RTLD_NEXT) answers
 * what glibc would (never by opening objects, which would call that
 * wrapper again, and it dlsym again), and the job runs under ebb.
 */
START_TEST(dlsym_next_beside_a_dlopen_wrapper)
{
	static char both[2][8500];
	const char *wrap = build_path("tests/progs/.libs/libwrapdlopen.so");
	snprintf(both[0], sizeof both[0], "LD_PRELOAD=%s:%s", getenv("EBBTEST_LIBEBB"), wrap);
	snprintf(both[1], sizeof both[1], "LD_PRELOAD=%s:%s", wrap, getenv("EBBTEST_LIBEBB"));
	for (int order = 0; order < 2; order++) {
		const char *path = tmp_file("wrapdlopen");
		char *argv[] = { workload_path(0), "--via=dlsym", "basic", NULL };
		const char *env[] = { both[order], NULL };
		struct run_result r;
		struct trace t;
		run_ebb(argv, env, path, &r);
		expect_ok(&r);
		ck_assert_msg(strstr(r.err, "wrapdlopen: ") != NULL && strstr(r.err, "wrapdlopen: 0 calls") ==
		    NULL, "the dlopen wrapper was not in the path: %s", r.err);
		trace_load(path, &t);
		ck_assert_uint_eq(summary(&t, "launches"), 6);
		ck_assert_uint_eq(summary(&t, "launches-unresolved"), 0);
		trace_free(&t);
		run_free(&r);
		remove(path);
	}
}
END_TEST

/*
 * In offload mode, a child that ends with exit() (a Python worker does) runs
 * the atexit handler it inherited: it must not stop the parent's workers,
 * write a summary or touch the trace; the parent's run is whole.
 */
START_TEST(fork_child_exits_in_offload)
{
	const char *path = tmp_file("forkexit");
	char *argv[] = { workload_path(0), "fork-exit", NULL };
	const char *env[] = { "EBB_MODE=offload", "EBB_LIMIT=32M", NULL };
	struct run_result r;
	struct trace t;

	run_ebb(argv, env, path, &r);
	expect_ok(&r);
	ck_assert_msg(count_substr(r.err, " launches (") == 1, "not one summary: %s", r.err);
	trace_load(path, &t);
	ck_assert_uint_eq(count_type(&t, 'L'), 2 * (1 + 3 * 5));
	trace_free(&t);
	run_free(&r);
	remove(path);
}
END_TEST

/*
 * Memory the job maps itself (cuMemMap, as XLA makes every buffer) is a
 * buffer from its map to its unmap, and the launches that use it name it;
 * in offload mode it counts against the limit and never moves.
 */
START_TEST(vmm_mappings_seen)
{
	const char *path = tmp_file("vmm");
	char *argv[] = { workload_path(0), "vmm", NULL };
	struct run_result r;
	struct trace t;

	run_ebb(argv, NULL, path, &r);
	expect_ok(&r);
	trace_load(path, &t);
	size_t maps = 0, unmaps = 0;
	for (size_t i = 0; i < t.n; i++) {
		if (t.r[i].type == 'A' && strcmp(t.r[i].f[5], "map") == 0) {
			maps++;
			ck_assert_uint_eq(num(&t.r[i], 3), 4u << 20);
		}
		unmaps += t.r[i].type == 'F' && strcmp(t.r[i].f[3], "unmap") == 0;
	}
	ck_assert_uint_eq(maps, 2);
	ck_assert_uint_eq(unmaps, 2);
	/* the copies read the mapped buffers (ids 2 and 3) into buffer 1 */
	uint64_t copy = kernel_id(&t, "copy_bytes");
	ck_assert_str_eq(launch_bufs(&t, copy, 0), "1,2");
	ck_assert_str_eq(launch_bufs(&t, copy, 1), "1,3");
	ck_assert_uint_eq(summary(&t, "launches-without-buffer"), 0);
	trace_free(&t);
	run_free(&r);
	const char *env[] = { "EBB_MODE=offload", "EBB_LIMIT=16M", NULL };
	run_ebb(argv, env, path, &r);
	expect_ok(&r);
	ck_assert_ptr_null(strstr(r.err, "over EBB_LIMIT"));
	run_free(&r);
	/* under 6M, the mapping takes the job over the limit: said once, counted */
	const char *tight[] = { "EBB_MODE=offload", "EBB_LIMIT=6M", NULL };
	run_ebb(argv, tight, path, &r);
	expect_ok(&r);
	ck_assert_int_eq(count_substr(r.err, "over EBB_LIMIT=6291456; ebb cannot move them"), 1);
	ck_assert_int_eq(count_substr(r.err, "EBB_LIMIT was not held in this process: allocations "
	    "the driver served (up to 4194304 bytes at once) took the job to "), 1);
	trace_load(path, &t);
	ck_assert_uint_eq(summary(&t, "over-limit-allocations"), 2);
	ck_assert_uint_eq(summary(&t, "driver-served-peak-bytes"), 4u << 20);
	trace_free(&t);
	run_free(&r);
	/* with two mappings at once, the driver's own allocations alone are over
	 * the limit: no plan could hold it, and ebb says so */
	char *two[] = { workload_path(0), "vmm", "2", NULL };
	run_ebb(two, tight, path, &r);
	expect_ok(&r);
	ck_assert_int_eq(count_substr(r.err, "EBB_LIMIT was not held in this process: "
	    "EBB_LIMIT=6291456 is below what the driver's own allocations for the job (made during "
	    "stream captures, or not served by ebb) held at once, 8388608 bytes"), 1);
	trace_load(path, &t);
	ck_assert_uint_eq(summary(&t, "driver-served-peak-bytes"), 8u << 20);
	trace_free(&t);
	run_free(&r);
	remove(path);
}
END_TEST

/*
 * Stream-ordered allocations from the device's default pool (XLA's
 * cuda_async allocator): seen in observe mode; in offload mode ebb serves
 * them, and under a limit of six of them moves them, every result right.
 */
START_TEST(default_pool_served)
{
	const char *path = tmp_file("pool");
	char *argv[] = { workload_path(0), "pool", "30", NULL };
	struct run_result r;
	struct trace t;
	unsigned long long frees, peak;

	run_ebb(argv, NULL, path, &r);
	expect_ok(&r);
	trace_load(path, &t);
	ck_assert_uint_eq(summary(&t, "allocations"), 6 + 3 * 30);
	trace_free(&t);
	run_free(&r);
	const char *env[] = { "EBB_MODE=offload", "EBB_LIMIT=24M", "FAKECUDA_KERNEL_DELAY_US=100",
		NULL };
	run_ebb(argv, env, path, &r);
	expect_ok(&r);
	driver_line(r.out, &frees, &peak);
	ck_assert_uint_le(peak, 24ULL << 20);
	trace_load(path, &t);
	ck_assert_uint_gt(summary(&t, "offloads"), 5);
	ck_assert_uint_eq(summary(&t, "refusals"), 0);
	ck_assert_uint_le(summary(&t, "held-peak-bytes"), 24ULL << 20);
	trace_free(&t);
	run_free(&r);
	remove(path);
}
END_TEST

/*
 * A launcher asks for the device pointer and the range of buffers that are
 * on the host (Triton's and inductor's do, before every launch): the
 * driver answers only for mapped memory, so ebb maps them again first.
 */
START_TEST(pointer_query_of_offloaded_buffer)
{
	const char *path = tmp_file("query");
	char *argv[] = { workload_path(0), "query", NULL };
	const char *env[] = { "EBB_MODE=offload", "EBB_LIMIT=12M", NULL };
	struct run_result r;
	struct trace t;

	run_ebb(argv, env, path, &r);
	expect_ok(&r);
	trace_load(path, &t);
	size_t queried = 0;
	for (size_t i = 0; i < t.n; i++)
		queried += t.r[i].type == 'B' && strcmp(t.r[i].f[4], "query") == 0;
	ck_assert_uint_eq(queried, 2);
	trace_free(&t);
	run_free(&r);
	remove(path);
}
END_TEST

START_TEST(graph_capture)
{
	const char *path = tmp_file("capture");
	char *argv[] = { workload_path(0), "capture", NULL };
	struct run_result r;
	struct trace t;

	run_ebb(argv, NULL, path, &r);
	expect_ok(&r);
	trace_load(path, &t);
	ck_assert_uint_eq(count_type(&t, 'P'), 2);
	ck_assert_uint_eq(count_type(&t, 'R'), 1);
	trace_free(&t);
	run_free(&r);
}
END_TEST

/*
 * Run a capture scenario in observe mode and in offload mode under
 * EBB_LIMIT=limit MiB: every value right in both, the limit held (the fake
 * driver's peak, ebb's own count, nothing said over it or unheld), buffers
 * offloaded for room. t gets the offload run's trace (trace_free it).
 */
static void
capture_within(const char *scenario, unsigned limit, const char *path, struct trace *t)
{
	char *argv[] = { workload_path(0), (char *)scenario, NULL };
	char env_limit[32];
	const char *env[] = { "EBB_MODE=offload", env_limit, NULL };
	struct run_result r;
	unsigned long long frees, peak;

	snprintf(env_limit, sizeof env_limit, "EBB_LIMIT=%uM", limit);
	run_ebb(argv, NULL, path, &r);
	expect_ok(&r);
	run_free(&r);
	run_ebb(argv, env, path, &r);
	expect_ok(&r);
	ck_assert_ptr_null(strstr(r.err, "over EBB_LIMIT"));
	ck_assert_ptr_null(strstr(r.err, "not held"));
	driver_line(r.out, &frees, &peak);
	ck_assert_uint_le(peak, (unsigned long long)limit << 20);
	run_free(&r);
	trace_load(path, t);
	ck_assert_uint_eq(summary(t, "over-limit-allocations"), 0);
	ck_assert_uint_gt(summary(t, "offloads"), 0);
	ck_assert_uint_le(summary(t, "held-peak-bytes"), (unsigned long long)limit << 20);
	ck_assert_uint_le(summary(t, "device-process-peak-bytes"), (unsigned long long)limit << 20);
}

/*
 * A graph's memory allocated while capturing (relaxed mode, as PyTorch's
 * graph pools are) under a limit the capture does not fit in: ebb serves it
 * within the limit, moving buffers the capture does not use, and the
 * capture stays valid; in observe mode the same runs untouched.
 */
START_TEST(graph_capture_limit)
{
	const char *path = tmp_file("capture-limit");
	struct trace t;

	capture_within("capture-limit", 32, path, &t);
	ck_assert_uint_eq(count_type(&t, 'P'), 2);
	ck_assert_uint_eq(summary(&t, "refusals"), 0);
	trace_free(&t);
	remove(path);
}
END_TEST

/*
 * A graph's memory nodes (cuMemAllocAsync on the capturing stream, as
 * PyTorch's cudaMallocAsync backend allocates while capturing) are the
 * driver's to serve, within the limit all the same: ebb makes room for each
 * first, moving buffers the capture does not use yet, and counts them on
 * after the graph frees them (the driver keeps a graph's memory). A buffer
 * so moved that the capture then uses comes back with the host waiting for
 * it, not the capture (which the driver refuses: its error 905 reached the
 * job before), and the capture, global mode though it is, stays valid.
 * Without ebb the job peaks at 52M; under 40M, 24M of it the graph's;
 * under 32M it runs on past the limit and says so.
 */
START_TEST(graph_memory_nodes_within_the_limit)
{
	const char *path = tmp_file("capture-async");
	char *argv[] = { workload_path(0), "capture-async", NULL };
	struct run_result r;
	struct trace t;
	unsigned long long frees, peak;

	char libpath[4200];
	snprintf(libpath, sizeof libpath, "LD_LIBRARY_PATH=%s", getenv("EBBTEST_FAKECUDA"));
	char *const plain[] = { libpath, "LD_PRELOAD=", NULL };
	run_prog(argv, plain, &r);	/* without ebb */
	expect_ok(&r);
	driver_line(r.out, &frees, &peak);
	ck_assert_uint_eq(peak, 52ULL << 20);
	run_free(&r);
	capture_within("capture-async", 40, path, &t);
	ck_assert_uint_eq(summary(&t, "driver-served-peak-bytes"), 24ULL << 20);
	trace_free(&t);
	/* under 32M, what the graph uses (its 24M and two buffers of 4M) leaves
	 * no room to bring the others back: they come back past the limit, as
	 * the job needs them, and the exit says the limit was not held (before,
	 * the job got out of memory) */
	const char *tight[] = { "EBB_MODE=offload", "EBB_LIMIT=32M", NULL };
	run_ebb(argv, tight, path, &r);
	expect_ok(&r);
	ck_assert_int_eq(count_substr(r.err, "EBB_LIMIT was not held in this process: the device "
	    "memory the process used reached 37748736 bytes, over EBB_LIMIT=33554432"), 1);
	trace_load(path, &t);
	ck_assert_uint_ge(summary(&t, "allocations-past-driver-share"), 1);
	ck_assert_uint_eq(summary(&t, "refusals"), 0);
	trace_free(&t);
	run_free(&r);
	remove(path);
}
END_TEST

/*
 * The driver commits a graph's memory pool as it first launches the graph
 * (FAKECUDA_GRAPH_POOL_BYTES here): ebb samples the device after every
 * graph launch, so that the pool counts against EBB_LIMIT from then on, and
 * where it takes the process over the limit the exit says so (it said
 * nothing before: no allocation came after the launch to sample at). Under
 * 8M, nothing ebb holds can move (the graph's buffers, small ones in a
 * slab): the exit adds that no mover holds the limit, and the trace proves
 * it (limit-over-samples, none of them with enough to move). With a spare
 * buffer of 4M the graph does not use, under 14M, evicting it would have
 * held the limit: the exit says the limit was not held, not that it cannot
 * be.
 */
START_TEST(graph_pool_counted)
{
	const char *path = tmp_file("graph-pool");
	char *argv[] = { workload_path(0), "capture", NULL };
	const char *over[] = { "EBB_MODE=offload", "EBB_LIMIT=8M", "FAKECUDA_GRAPH_POOL_BYTES=8M",
		NULL };
	const char *within[] = { "EBB_MODE=offload", "EBB_LIMIT=16M",
		"FAKECUDA_GRAPH_POOL_BYTES=8M", NULL };
	struct run_result r;
	struct trace t;

	const char *spare[] = { "EBB_MODE=offload", "EBB_LIMIT=14M",
		"FAKECUDA_GRAPH_POOL_BYTES=8M", "WORKLOAD_CAPTURE_SPARE_MB=4", NULL };

	run_ebb(argv, over, path, &r);
	expect_ok(&r);
	ck_assert_int_eq(count_substr(r.err, "EBB_LIMIT was not held in this process: the device "
	    "memory the process used reached 12582912 bytes, over EBB_LIMIT=8388608"), 1);
	ck_assert_int_eq(count_substr(r.err, "so no mover holds this limit"), 1);
	trace_load(path, &t);
	ck_assert_uint_eq(summary(&t, "device-beyond-held-bytes"), 8ULL << 20);
	ck_assert_uint_ge(summary(&t, "limit-over-samples"), 1);
	ck_assert_uint_eq(summary(&t, "limit-over-movable"), 0);
	trace_free(&t);
	run_free(&r);
	run_ebb(argv, spare, path, &r);
	expect_ok(&r);
	ck_assert_int_eq(count_substr(r.err, "EBB_LIMIT was not held in this process"), 1);
	ck_assert_ptr_null(strstr(r.err, "no mover holds"));
	trace_load(path, &t);
	ck_assert_uint_eq(summary(&t, "limit-over-movable"), 1);
	trace_free(&t);
	run_free(&r);
	run_ebb(argv, within, path, &r);
	expect_ok(&r);
	ck_assert_ptr_null(strstr(r.err, "not held"));
	trace_load(path, &t);
	ck_assert_uint_eq(summary(&t, "device-process-peak-bytes"), 12ULL << 20);
	trace_free(&t);
	run_free(&r);
	remove(path);
}
END_TEST

/*
 * When nothing more can move (what the capture uses stays) and the
 * driver's own memory for the process leaves ebb too little, an allocation
 * that fits under EBB_LIMIT itself is served, not failed: ebb still holds
 * no more than EBB_LIMIT, and says that the driver's memory takes the
 * process over it, and at exit that EBB_LIMIT was not held.
 */
START_TEST(capture_past_driver_share)
{
	const char *path = tmp_file("capture-share");
	char *argv[] = { workload_path(0), "capture-limit", NULL };
	const char *env[] = { "EBB_MODE=offload", "EBB_LIMIT=26M", "FAKECUDA_LAZY_LOAD_BYTES=4M",
		NULL };
	struct run_result r;
	struct trace t;

	run_ebb(argv, env, path, &r);
	expect_ok(&r);
	ck_assert_int_eq(count_substr(r.err, "the driver's memory takes the process over it"), 1);
	/* and at exit that the process went over EBB_LIMIT (its device memory
	 * sampled at 32M: ebb's 24M and the driver's 8M) */
	ck_assert_int_eq(count_substr(r.err, "EBB_LIMIT was not held in this process: the device "
	    "memory the process used reached 33554432 bytes, over EBB_LIMIT=27262976"), 1);
	trace_load(path, &t);
	ck_assert_uint_eq(summary(&t, "device-process-peak-bytes"), 32ULL << 20);
	ck_assert_uint_ge(summary(&t, "allocations-past-driver-share"), 1);
	ck_assert_uint_eq(summary(&t, "refusals"), 0);
	ck_assert_uint_le(summary(&t, "held-peak-bytes"), 26ULL << 20);
	trace_free(&t);
	run_free(&r);
	remove(path);
}
END_TEST

/*
 * A host ahead of the device, allocating and freeing as it goes: in offload
 * mode, with nothing to move, ebb's own event calls stay within one query
 * and one record per operation (a question about a freed buffer is answered
 * from markers, not by a query per pending free).
 */
START_TEST(event_calls_bounded)
{
	const char *path = tmp_file("ahead");
	char *argv[] = { workload_path(0), "ahead", "10", NULL };
	const char *env[] = { "EBB_MODE=offload", "EBB_LIMIT=1G", NULL };
	struct run_result r;
	struct trace t;
	unsigned long long queries = 0, records = 0;

	run_ebb(argv, env, path, &r);
	expect_ok(&r);
	const char *d = strstr(r.out, "cuEventQuery ");
	ck_assert_ptr_nonnull(d);
	ck_assert_int_eq(sscanf(d, "cuEventQuery %llu, cuEventRecord %llu", &queries, &records), 2);
	trace_load(path, &t);
	uint64_t ops = summary(&t, "launches") + summary(&t, "copies") + summary(&t, "allocations") +
	    summary(&t, "frees");
	ck_assert_uint_gt(ops, 0);
	ck_assert_uint_le(queries, ops);
	ck_assert_uint_le(records, ops);
	trace_free(&t);
	run_free(&r);
	remove(path);
}
END_TEST

START_TEST(nccl_calls)
{
	const char *path = tmp_file("nccl");
	char *argv[] = { workload_path(0), "nccl", NULL };
	struct run_result r;
	struct trace t;
	int send = 0, recv = 0, allreduce = 0;

	run_ebb(argv, NULL, path, &r);
	expect_ok(&r);
	trace_load(path, &t);
	for (size_t i = 0; i < t.n; i++) {
		const struct rec *x = &t.r[i];
		if (x->type != 'N')
			continue;
		/* the caller's rank and the communicator's size, as NCCL says */
		ck_assert_str_eq(x->f[7], "2");
		if (strcmp(x->f[3], "send") == 0) {
			send++;
			ck_assert_str_eq(x->f[4], "1");
			ck_assert_str_eq(x->f[5], "1024");
			ck_assert_str_eq(x->f[6], "0");
			ck_assert_str_eq(x->f[9], "1");
		} else if (strcmp(x->f[3], "recv") == 0) {
			recv++;
			ck_assert_str_eq(x->f[4], "0");
			ck_assert_str_eq(x->f[6], "1");
			ck_assert_str_eq(x->f[9], "2");
		} else if (strcmp(x->f[3], "allreduce") == 0) {
			allreduce++;
			ck_assert_str_eq(x->f[4], "-1");
			ck_assert_str_eq(x->f[8], "1");
		}
	}
	ck_assert_int_eq(send, 1);
	ck_assert_int_eq(recv, 1);
	ck_assert_int_eq(allreduce, 2);
	trace_free(&t);
	run_free(&r);
}
END_TEST

/*
 * Communicators destroyed and made again (the allocator may give the new
 * ones the old ones' addresses, in the other order): each send and receive
 * is recorded with the rank of the communicator it was called on, as NCCL
 * says now, not as it said of an earlier one at that address.
 */
START_TEST(nccl_comm_made_again)
{
	const char *path = tmp_file("ncclagain");
	char *argv[] = { workload_path(0), "nccl", "3", NULL };
	struct run_result r;
	struct trace t;
	int send = 0, recv = 0;

	run_ebb(argv, NULL, path, &r);
	expect_ok(&r);
	trace_load(path, &t);
	for (size_t i = 0; i < t.n; i++) {
		const struct rec *x = &t.r[i];
		if (x->type != 'N')
			continue;
		if (strcmp(x->f[3], "send") == 0) {
			send++;
			ck_assert_msg(strcmp(x->f[6], "0") == 0, "send %d recorded at rank %s", send,
			    x->f[6]);
		} else if (strcmp(x->f[3], "recv") == 0) {
			recv++;
			ck_assert_msg(strcmp(x->f[6], "1") == 0, "receive %d recorded at rank %s", recv,
			    x->f[6]);
		}
	}
	ck_assert_int_eq(send, 3);
	ck_assert_int_eq(recv, 3);
	trace_free(&t);
	run_free(&r);
	remove(path);
}
END_TEST

/* The workload's checksum line (stdout), or "" when there is none. */
static const char *
checksum_of(const char *out)
{
	/* a ring of them: an assertion compares two calls' results */
	static char ring[4][64];
	static unsigned next;
	char *sum = ring[next++ % 4];
	const char *c = strstr(out, "checksum ");
	sum[0] = '\0';
	if (c != NULL)
		sscanf(c, "checksum %63s", sum);
	return sum;
}

/* EBB_CUPTI_LIB=the fake CUPTI of tests/fakecuda (no activities), into buf. */
static const char *
fake_cupti(char *buf, size_t size)
{
	snprintf(buf, size, "EBB_CUPTI_LIB=%s/libcupti.so.13", getenv("EBBTEST_FAKECUDA"));
	return buf;
}

/* The fake CUPTI's exit line in err: what ebb did with it. */
struct fakecupti {
	unsigned long attached, finalised, pushes, pops, flushes, idle, kernels;
	int enabled;
};

static void
fakecupti_said(const char *err, struct fakecupti *f)
{
	const char *p = strstr(err, "fakecupti: ");

	ck_assert_msg(p != NULL, "no fakecupti line in:\n%s", err);
	ck_assert_int_eq(sscanf(p, "fakecupti: attached %lu, finalised %lu, enabled %d, pushes %lu, "
	    "pops %lu, flushes %lu, pushes idle %lu, kernels %lu", &f->attached, &f->finalised,
	    &f->enabled, &f->pushes, &f->pops, &f->flushes, &f->idle, &f->kernels), 8);
}

/* CUPTI attached once and finalised once, each pushed id popped, none
 * pushed while paused: what the fake CUPTI says in err. */
static void
expect_cupti_once(const char *err)
{
	struct fakecupti f;

	fakecupti_said(err, &f);
	ck_assert_uint_eq(f.attached, 1);
	ck_assert_uint_eq(f.finalised, 1);
	ck_assert_uint_gt(f.pushes, 0);
	ck_assert_uint_eq(f.pops, f.pushes);
	ck_assert_uint_eq(f.idle, 0);
}

/* The value of the first Q note key, or NULL. */
static const char *
note_value(const struct trace *t, const char *key)
{
	for (size_t i = 0; i < t->n; i++)
		if (t->r[i].type == 'Q' && t->r[i].n >= 3 && strcmp(t->r[i].f[1], key) == 0)
			return t->r[i].f[2];
	return NULL;
}

/* How many notes key of t have value (NULL: any). */
static size_t
notes_with(const struct trace *t, const char *key, const char *value)
{
	size_t n = 0;

	for (size_t i = 0; i < t->n; i++)
		n += t->r[i].type == 'Q' && t->r[i].n >= 3 && strcmp(t->r[i].f[1], key) == 0 &&
		    (value == NULL || strcmp(t->r[i].f[2], value) == 0);
	return n;
}

/*
 * A capture that leaves a side stream's work unjoined, as PyTorch's
 * cudaMallocAsync backend does in a backward on two streams: the driver
 * fails its end, without ebb, in observe mode and in offload mode alone
 * (what the job does stays the job's). With EBB_CAPTURE_JOIN=1 in offload
 * mode (ebb run sets it where it chooses that backend) the side stream is
 * joined at the end, once, said in the trace and the summary, and the
 * graph's replays give both copies; an end tried on a side stream (which
 * fails) joins nothing. ebb run sets it for a job whose PyTorch backend it
 * chooses, and not where the job chose one.
 */
START_TEST(capture_joined_at_its_end)
{
	const char *path = tmp_file("capture-unjoined");
	char *argv[] = { workload_path(0), "capture-unjoined", NULL };
	const char *observe[] = { "EBB_MODE=observe", "EBB_CAPTURE_JOIN=1", NULL };
	const char *alone[] = { "EBB_MODE=offload", "EBB_LIMIT=64M", NULL };
	const char *join[] = { "EBB_MODE=offload", "EBB_LIMIT=64M", "EBB_CAPTURE_JOIN=1", NULL };
	struct run_result r;
	struct trace t;

	char libpath[4200];
	snprintf(libpath, sizeof libpath, "LD_LIBRARY_PATH=%s", getenv("EBBTEST_FAKECUDA"));
	char *const plain[] = { libpath, "LD_PRELOAD=", NULL };
	run_prog(argv, plain, &r);	/* without ebb */
	ck_assert_msg(r.status == 3 && strstr(r.out, "unjoined") != NULL, "%s", r.err);
	run_free(&r);
	run_ebb(argv, observe, NULL, &r);
	ck_assert_msg(r.status == 3 && strstr(r.out, "unjoined") != NULL, "%s", r.err);
	run_free(&r);
	run_ebb(argv, alone, NULL, &r);
	ck_assert_msg(r.status == 3 && strstr(r.out, "unjoined") != NULL, "%s", r.err);
	run_free(&r);
	run_ebb(argv, join, path, &r);
	expect_ok(&r);
	ck_assert_ptr_null(strstr(r.out, "unjoined"));
	trace_load(path, &t);
	ck_assert_uint_eq(summary(&t, "capture-joins"), 1);
	ck_assert_uint_eq(notes_with(&t, "capture-joined", "1"), 1);
	trace_free(&t);
	run_free(&r);
	/* a capture the job joins itself, with an end tried on its side stream
	 * first (which fails and ends nothing): that end joins nothing, the end
	 * on the capturing stream joins the side stream once more, and every
	 * value of the replays is right */
	char *limit_argv[] = { workload_path(0), "capture-limit", NULL };
	const char *join32[] = { "EBB_MODE=offload", "EBB_LIMIT=32M", "EBB_CAPTURE_JOIN=1", NULL };
	run_ebb(limit_argv, join32, path, &r);
	expect_ok(&r);
	trace_load(path, &t);
	ck_assert_uint_eq(summary(&t, "capture-joins"), 1);
	trace_free(&t);
	run_free(&r);
	remove(path);

	/* ebb run: the variable where it chooses PyTorch's backend, and only there */
	const char *run_args[] = { "run", "--limit", "64M", "--", "/usr/bin/env", NULL };
	ebb_cmd(&r, run_args);
	ck_assert_int_eq(r.status, 0);
	ck_assert_ptr_nonnull(strstr(r.out, "EBB_CAPTURE_JOIN=1"));
	run_free(&r);
	const char *mode_args[] = { "run", "--mode", "observe", "--", "/usr/bin/env", NULL };
	ebb_cmd(&r, mode_args);
	ck_assert_int_eq(r.status, 0);
	ck_assert_ptr_null(strstr(r.out, "EBB_CAPTURE_JOIN="));
	run_free(&r);
}
END_TEST

/*
 * CUPTI's lifecycle on the fake CUPTI: in observe mode it is attached at
 * the first operation and finalised when learning ends; in offload mode it
 * is paused for the iteration after a recording it timed (the pace
 * iteration) and records again after it, is paused when learning ends
 * (a recording then is timed by what was learned), records again
 * at a departure (the workload's sizes change at its 10th iteration), and
 * is finalised by the end. An external
 * correlation id is pushed around each operation only while CUPTI records,
 * and popped as often. The fake's kernel records are matched to the
 * launches through their external ids: a G record for each (cupti-timed),
 * ebb plan times the iteration with them, and so does the library's plan
 * (plan-times). Results are those without ebb. A CUPTI another profiler
 * holds (FAKECUPTI_REFUSE) is said once, and the job runs on.
 */
START_TEST(cupti_lifecycle)
{
	const char *path = tmp_file("cuptilife");
	char lib[4200];
	char *argv[] = { workload_path(0), "plan", "16", NULL };
	const char *off[] = { "EBB_MODE=off", "WORKLOAD_CHANGE_AT=10", NULL };
	const char *obs[] = { "EBB_MODE=observe", "EBB_CUPTI=1", fake_cupti(lib, sizeof lib),
		"WORKLOAD_CHANGE_AT=10", NULL };
	const char *offl[] = { "EBB_MODE=offload", "EBB_LIMIT=64M", "EBB_CUPTI=1", lib,
		"WORKLOAD_CHANGE_AT=10", NULL };
	const char *refused[] = { "EBB_MODE=offload", "EBB_LIMIT=64M", "EBB_CUPTI=1", lib,
		"FAKECUPTI_REFUSE=1", NULL };
	struct run_result r0, r;
	struct trace t;

	run_ebb(argv, off, NULL, &r0);
	expect_ok(&r0);

	run_ebb(argv, obs, path, &r);
	expect_ok(&r);
	ck_assert_str_eq(checksum_of(r.out), checksum_of(r0.out));
	trace_load(path, &t);
	ck_assert_ptr_nonnull(note_value(&t, "cupti"));
	ck_assert_ptr_null(note_value(&t, "cupti-paused"));
	ck_assert_pstr_eq(note_value(&t, "cupti-detached"), "learned");
	expect_cupti_once(r.err);
	ck_assert_uint_gt(count_type(&t, 'G'), 0);
	ck_assert_uint_eq(count_type(&t, 'G'), strtoull(note_value(&t, "cupti-timed"), NULL, 10));
	ck_assert_pstr_eq(note_value(&t, "cupti-timed-direct"), note_value(&t, "cupti-timed"));
	const char *const args[] = { "plan", path, NULL };
	struct run_result p;
	ebb_cmd(&p, args);
	ck_assert_msg(p.status == 0 && strstr(p.out, "time source: cupti") != NULL, "%s%s", p.out,
	    p.err);
	run_free(&p);
	trace_free(&t);
	run_free(&r);

	run_ebb(argv, offl, path, &r);
	expect_ok(&r);
	ck_assert_str_eq(checksum_of(r.out), checksum_of(r0.out));
	trace_load(path, &t);
	ck_assert_pstr_eq(note_value(&t, "cupti-paused"), "pace");
	ck_assert_pstr_eq(note_value(&t, "cupti-resumed"), "pace");
	ck_assert_uint_ge(notes_with(&t, "cupti-paused", "learned"), 1);
	ck_assert_uint_ge(notes_with(&t, "cupti-resumed", "departure"), 1);
	ck_assert_ptr_nonnull(note_value(&t, "cupti-detached"));
	ck_assert_pstr_eq(note_value(&t, "plan-times"), "cupti");
	expect_cupti_once(r.err);
	trace_free(&t);
	run_free(&r);

	run_ebb(argv, refused, path, &r);
	expect_ok(&r);
	ck_assert_int_eq(count_substr(r.err, "is not available to ebb"), 1);
	trace_load(path, &t);
	ck_assert_ptr_null(note_value(&t, "cupti"));
	trace_free(&t);
	run_free(&r);
	run_free(&r0);
	remove(path);
}
END_TEST

/*
 * The pause after learning ends in offload mode once the plan has run
 * EBB_CUPTI_HOLD whole iterations (16 by default), and after
 * EBB_LEARN_LAUNCHES operations (1000 here, the least), whichever comes
 * first: CUPTI is finalised ("held"), the operation at which that happens
 * still goes to the iteration finder, and the plan runs on to the job's end
 * with no departure but the job's own last one. (Before, the operation at
 * the end of EBB_LEARN_LAUNCHES was never fed to the finder: a departure,
 * then four more, and ebb stopped planning.)
 */
START_TEST(cupti_hold_ends_without_a_departure)
{
	const char *path = tmp_file("cuptihold");
	char lib[4200];
	char *argv[] = { workload_path(0), "plan", "40", NULL };
	const char *by_iters[] = { "EBB_MODE=offload", "EBB_LIMIT=64M", "EBB_CUPTI=1",
		fake_cupti(lib, sizeof lib), NULL };
	const char *by_ops[] = { "EBB_MODE=offload", "EBB_LIMIT=64M", "EBB_CUPTI=1", lib,
		"EBB_CUPTI_HOLD=0", "EBB_LEARN_LAUNCHES=1000", NULL };
	const char *const *envs[] = { by_iters, by_ops };

	for (int k = 0; k < 2; k++) {
		struct run_result r;
		struct trace t;

		run_ebb(argv, envs[k], path, &r);
		expect_ok(&r);
		trace_load(path, &t);
		ck_assert_uint_eq(notes_with(&t, "cupti-paused", "learned"), 1);
		ck_assert_msg(note_value(&t, "cupti-detached") != NULL &&
		    strcmp(note_value(&t, "cupti-detached"), "held") == 0, "k %d: %s", k, r.err);
		ck_assert_msg(summary(&t, "plan-departures") <= 1, "k %d: %llu departures:\n%s", k,
		    (unsigned long long)summary(&t, "plan-departures"), r.err);
		ck_assert_uint_ge(summary(&t, "plan-iterations"), 30);
		expect_cupti_once(r.err);
		trace_free(&t);
		run_free(&r);
	}
	remove(path);
}
END_TEST

/*
 * Run the plan workload of 80 iterations, changed at its 30th by knob
 * (after the plan's 16 iterations of EBB_CUPTI_HOLD), with the fake CUPTI:
 * the results are those without ebb, CUPTI's pause ends ("held"), and a
 * plan is made after it with the kernels' learned GPU times. Returns that
 * plan's plan-times-untimed note.
 */
static uint64_t
learned_after_the_hold(const char *knob)
{
	const char *path = tmp_file("cuptilearned");
	char lib[4200];
	char *argv[] = { workload_path(0), "plan", "80", NULL };
	const char *off[] = { "EBB_MODE=off", knob, NULL };
	const char *env[] = { "EBB_MODE=offload", "EBB_LIMIT=64M", "EBB_CUPTI=1",
		fake_cupti(lib, sizeof lib), knob, NULL };
	struct run_result r0, r;
	struct trace t;
	int held = 0;
	const char *untimed = NULL;

	run_ebb(argv, off, NULL, &r0);
	expect_ok(&r0);
	run_ebb(argv, env, path, &r);
	expect_ok(&r);
	ck_assert_str_eq(checksum_of(r.out), checksum_of(r0.out));
	trace_load(path, &t);
	for (size_t i = 0; i < t.n; i++) {
		const struct rec *x = &t.r[i];
		if (x->type != 'Q' || x->n < 3)
			continue;
		if (strcmp(x->f[1], "cupti-detached") == 0 && strcmp(x->f[2], "held") == 0)
			held = 1;
		if (held && strcmp(x->f[1], "plan-times") == 0)
			ck_assert_msg(strcmp(x->f[2], "learned") == 0, "%s: a plan with %s times after "
			    "the hold", knob, x->f[2]);
		if (held && strcmp(x->f[1], "plan-times-untimed") == 0 && untimed == NULL)
			untimed = x->f[2];
	}
	ck_assert_msg(held && untimed != NULL, "%s: held %d, a plan with learned times after it "
	    "%d:\n%s", knob, held, untimed != NULL, r.err);
	uint64_t n = strtoull(untimed, NULL, 10);
	expect_cupti_once(r.err);
	trace_free(&t);
	run_free(&r);
	run_free(&r0);
	remove(path);
	return n;
}

/*
 * A departure after the pause has ended: the iteration is learned again
 * without CUPTI, and its plan is timed with the GPU times its kernels had
 * (plan-times learned), not by the host. Where the job changed only its
 * sizes (WORKLOAD_CHANGE_AT), the kernels are those timed; where it
 * launches a kernel it never had (WORKLOAD_NEW_KERNEL_AT), the operations
 * without a time are more, and the plan's plan-times-untimed note says so.
 */
START_TEST(plan_after_the_hold_has_learned_times)
{
	uint64_t same = learned_after_the_hold("WORKLOAD_CHANGE_AT=30");
	uint64_t added = learned_after_the_hold("WORKLOAD_NEW_KERNEL_AT=30");

	ck_assert_msg(added > same, "untimed: %llu with a new kernel, %llu without",
	    (unsigned long long)added, (unsigned long long)same);
}
END_TEST

/* The driver will not give the layout: the launch is counted and marked "?". */
START_TEST(unresolved_launch)
{
	const char *path = tmp_file("unres");
	char *argv[] = { workload_path(0), "unresolved", NULL };
	const char *env[] = { "FAKECUDA_FAIL=cuKernelGetParamInfo:1,cuFuncGetParamInfo:1", NULL };
	struct run_result r;
	struct trace t;

	run_ebb(argv, env, path, &r);
	expect_ok(&r);
	trace_load(path, &t);
	ck_assert_str_eq(launch_bufs(&t, kernel_id(&t, "fill_u32"), 0), "?");
	ck_assert_uint_eq(summary(&t, "launches-unresolved"), 1);
	ck_assert_ptr_nonnull(strstr(r.err, "1 launches (1 unresolved"));
	trace_free(&t);
	run_free(&r);
}
END_TEST

/* A malformed value: one line naming it, and the job runs on. */
START_TEST(bad_value_one_line)
{
	char *argv[] = { workload_path(0), "basic", NULL };
	const char *env[] = { "EBB_LEARN_ITERS=three", "EBB_VERBOSE=", NULL };
	struct run_result r;

	run_ebb(argv, env, NULL, &r);
	expect_ok(&r);
	ck_assert_int_eq(count_substr(r.err, "EBB_LEARN_ITERS='three'"), 1);
	ck_assert_int_eq(count_substr(r.err, "\n"), 1);
	run_free(&r);
}
END_TEST

START_TEST(strict_stops)
{
	char *argv[] = { workload_path(0), "basic", NULL };
	const char *env[] = { "EBB_STRICT=1", "EBB_TRACE_BUFFER=lots", NULL };
	struct run_result r;

	run_ebb(argv, env, NULL, &r);
	ck_assert_int_eq(r.status, 2);
	ck_assert_ptr_nonnull(strstr(r.err, "EBB_TRACE_BUFFER='lots'"));
	ck_assert_ptr_nonnull(strstr(r.err, "stopping"));
	ck_assert_ptr_null(strstr(r.out, "ok"));
	run_free(&r);
}
END_TEST

START_TEST(cupti_missing_said_once)
{
	char *argv[] = { workload_path(0), "loop", "5", NULL };
	const char *env[] = { "EBB_CUPTI=1", "EBB_CUPTI_LIB=/nonexistent/libcupti.so.13",
		"EBB_VERBOSE=0", NULL };
	struct run_result r;

	run_ebb(argv, env, NULL, &r);
	expect_ok(&r);
	ck_assert_int_eq(count_substr(r.err, "EBB_CUPTI_LIB=/nonexistent/libcupti.so.13"), 1);
	ck_assert_int_eq(count_substr(r.err, "\n"), 1);
	run_free(&r);
}
END_TEST

/* ---- the mover (EBB_MODE=offload) ---- */

/*
 * Random buffers, streams and operations under a limit that holds a few
 * buffers at a time, with slow kernels and copies: every value survives,
 * nothing is touched after it was unmapped (the fake driver faults), the
 * device never holds more than the limit, the driver's cuMemFree is never
 * called, and the trace has the moves.
 */
static void
check_offload(const char *seed, const char *scenario, const char *arg)
{
	const char *path = tmp_file("offload");
	char seedvar[64];
	snprintf(seedvar, sizeof seedvar, "WORKLOAD_SEED=%s", seed);
	char *argv[] = { workload_path(0), (char *)scenario, (char *)arg, NULL };
	const char *env[] = { "EBB_MODE=offload", "EBB_LIMIT=24M", seedvar,
		"FAKECUDA_KERNEL_DELAY_US=150", "FAKECUDA_COPY_DELAY_US=50", NULL };
	struct run_result r;
	struct trace t;
	unsigned long long frees, peak;

	run_ebb(argv, env, path, &r);
	expect_ok(&r);
	driver_line(r.out, &frees, &peak);
	ck_assert_uint_eq(frees, 0);
	ck_assert_uint_le(peak, 24ULL << 20);
	trace_load(path, &t);
	ck_assert_uint_gt(summary(&t, "offloads"), 20);
	ck_assert_uint_gt(summary(&t, "restores"), 20);
	ck_assert_uint_eq(summary(&t, "offloads"), count_type(&t, 'O'));
	ck_assert_uint_eq(summary(&t, "refusals"), 0);
	ck_assert_uint_le(summary(&t, "held-peak-bytes"), 24ULL << 20);
	ck_assert_uint_gt(summary(&t, "bytes-to-host"), 0);
	ck_assert_ptr_nonnull(strstr(r.err, "offload: "));
	trace_free(&t);
	run_free(&r);
	remove(path);
}

START_TEST(offload_data_survives_1) { check_offload("1", "offload", "300"); }
END_TEST
START_TEST(offload_data_survives_2) { check_offload("2", "offload", "300"); }
END_TEST
START_TEST(offload_data_survives_3) { check_offload("3", "offload", "300"); }
END_TEST

/*
 * Records of type whose field `what` (index) is value, in the steady state
 * of the plan: from the second iteration run by it (the first moves what
 * the fault path left in other places) to its departure, if any.
 */
static size_t
count_under_plan(const struct trace *t, char type, size_t what, const char *value)
{
	size_t n = 0;
	int started = 0, iters = 0;
	uint64_t departed = UINT64_MAX;	/* the operation that departed (its records come first) */
	for (size_t i = 0; i < t->n; i++) {
		const struct rec *r = &t->r[i];
		if (r->type == 'Q' && strcmp(r->f[1], "plan-departed") == 0 && departed == UINT64_MAX)
			departed = strtoull(r->f[2] + strlen("seq="), NULL, 10);
	}
	for (size_t i = 0; i < t->n; i++) {
		const struct rec *r = &t->r[i];
		if (r->type == 'Q' && strcmp(r->f[1], "plan-started") == 0)
			started = 1;
		else if (started && r->type == 'I')
			iters++;
		else if (iters >= 2 && r->type == type && r->n > what && num(r, 1) < departed &&
		    strcmp(r->f[what], value) == 0)
			n++;
	}
	return n;
}

/*
 * Records of a type whose field what is value from the start of the plan
 * that ran last (the I record after its plan-started note, which is written
 * as the iteration before ends) to the end of the trace, and in *iters the
 * iterations there: for a job that ends with a whole iteration, what the Z
 * records run-* count.
 */
static size_t
count_in_run(const struct trace *t, char type, size_t what, const char *value, uint64_t *iters)
{
	size_t start = t->n, n = 0;
	int noted = 0;

	*iters = 0;
	for (size_t i = 0; i < t->n; i++) {
		const struct rec *r = &t->r[i];
		if (r->type == 'Q' && strcmp(r->f[1], "plan-started") == 0) {
			noted = 1;
			start = t->n;
			*iters = 0;
		} else if (r->type == 'I' && noted) {
			if (start == t->n)
				start = i;
			++*iters;
		}
	}
	for (size_t i = start; i < t->n; i++)
		n += t->r[i].type == type && t->r[i].n > what && strcmp(t->r[i].f[what], value) == 0;
	return n;
}

/* Records of a type whose field what is value. */
static size_t
count_type_field(const struct trace *t, char type, size_t what, const char *value)
{
	size_t n = 0;
	for (size_t i = 0; i < t->n; i++)
		n += t->r[i].type == type && t->r[i].n > what && strcmp(t->r[i].f[what], value) == 0;
	return n;
}

/* The plan's offloads issued after a copy of the job's (C record), not
 * after a use: held back so as not to queue ahead of that copy. */
static size_t
offloads_after_copies(const struct trace *t)
{
	size_t n = 0;
	uint64_t copy = 0;	/* the last C record's operation */
	for (size_t i = 0; i < t->n; i++) {
		const struct rec *r = &t->r[i];
		if (r->type == 'C')
			copy = num(r, 1);
		else if (r->type == 'O' && r->n > 4 && strcmp(r->f[4], "plan") == 0 &&
		    num(r, 1) == copy)
			n++;
	}
	return n;
}


/* Run the plan scenario for iters iterations under EBB_LIMIT=56M with env
 * added (up to two variables, separated by a space), expect its data right,
 * and load its trace (path, to remove). */
static void
run_plan(const char *iters, const char *extra, const char *path, struct run_result *r,
    struct trace *t)
{
	char *argv[] = { workload_path(0), "plan", (char *)iters, NULL };
	char one[256] = "", *two = NULL;
	if (extra != NULL) {
		ck_assert_uint_lt(strlen(extra), sizeof one);
		strcpy(one, extra);
		if ((two = strchr(one, ' ')) != NULL)
			*two++ = '\0';
	}
	const char *env[] = { "EBB_MODE=offload", "EBB_LIMIT=56M", extra ? one : NULL, two, NULL };

	run_ebb(argv, env, path, r);
	expect_ok(r);
	trace_load(path, t);
}

/* The job's host pace (plan-host-pace-ns) of the planner's loop with 300 us
 * of the host's own work a layer, under limit (with slow mappings), and
 * ebb's time left out of it (plan-host-ebb-ns). */
static uint64_t
host_pace(const char *limit, uint64_t *ebb_ns)
{
	const char *path = tmp_file("pace");
	char *argv[] = { workload_path(0), "plan", "10", NULL };
	char lim[64];
	snprintf(lim, sizeof lim, "EBB_LIMIT=%s", limit);
	const char *env[] = { "EBB_MODE=offload", lim, "WORKLOAD_HOST_US=300",
		"WORKLOAD_LAYER_US=50", "FAKECUDA_VMM_DELAY_US=3000", NULL };
	struct run_result r;
	struct trace t;

	run_ebb(argv, env, path, &r);
	expect_ok(&r);
	trace_load(path, &t);
	uint64_t pace = strtoull(note_value(&t, "plan-host-pace-ns"), NULL, 10);
	*ebb_ns = strtoull(note_value(&t, "plan-host-ebb-ns"), NULL, 10);
	trace_free(&t);
	run_free(&r);
	remove(path);
	return pace;
}

/*
 * The host's pace of the recorded iteration is the job's own: recorded
 * under a limit, where ebb restores buffers on use and waits for room in
 * the job's calls (slowly: mapping takes 3 ms), it stays near the pace
 * recorded without pressure, though ebb's time is many times the job's:
 * less than a quarter of ebb's time shows in it.
 * What a call of ebb's does before the operation's issue falls in the gap
 * before it; counted in the next gap instead, the clamp at zero there
 * keeps it in the pace (three times the job's own here).
 */
START_TEST(host_pace_leaves_ebb_out)
{
	uint64_t ebb_free, ebb_limit;
	uint64_t free_pace = host_pace("4G", &ebb_free);
	uint64_t limit_pace = host_pace("56M", &ebb_limit);

	/* 24 layers of 300 us of the host's work: the pace holds them, to within
	 * what ebb's time taken out of the gaps next to them may take of them
	 * (its clock reads bracket its own work; 0.01% short was seen) */
	ck_assert_uint_gt(free_pace, 24 * 300 * 1000ULL * 95 / 100);
	ck_assert_uint_gt(ebb_limit, 2 * free_pace);
	/* what ebb's time adds to the pace: under a quarter of it (with ebb's
	 * time counted in the next gap, about half of it; the rest is the
	 * machine's noise, large on two loaded CPUs) */
	ck_assert_msg(limit_pace < free_pace + ebb_limit / 4, "pace %llu ns under the limit (ebb's "
	    "%llu), %llu without", (unsigned long long)limit_pace, (unsigned long long)ebb_limit,
	    (unsigned long long)free_pace);
}
END_TEST

/*
 * A synchronisation's wait is not the job's host time: the planner's loop
 * issues an iteration of 29 ms of the device's work in well under a
 * millisecond, then copies its results to the host and waits for the
 * stream. The wait counts from the call (the Y record's time), so the pace
 * recorded is the issuing alone; counted in the gap of the copy before the
 * sync, it made the pace the device's whole iteration, and any move the
 * plan adds a cost to the step.
 */
START_TEST(host_pace_leaves_the_wait_out)
{
	const char *path = tmp_file("wait");
	char *argv[] = { workload_path(0), "plan", "10", NULL };
	const char *env[] = { "EBB_MODE=offload", "EBB_LIMIT=4G", NULL };
	struct run_result r;
	struct trace t;

	run_ebb(argv, env, path, &r);
	expect_ok(&r);
	trace_load(path, &t);
	ck_assert_ptr_nonnull(note_value(&t, "plan-host-pace-ns"));
	ck_assert_ptr_nonnull(note_value(&t, "plan-step-before-ns"));
	uint64_t pace = strtoull(note_value(&t, "plan-host-pace-ns"), NULL, 10);
	uint64_t step = strtoull(note_value(&t, "plan-step-before-ns"), NULL, 10);
	/* the device's 28.8 ms of kernels, as the host's times see them */
	ck_assert_uint_gt(step, 2 * 24 * 400 * 1000ULL);
	ck_assert_msg(pace < step / 8, "pace %llu ns, the device's iteration %llu",
	    (unsigned long long)pace, (unsigned long long)step);
	/* the Y record carries the call's time: the wait runs from it to the
	 * next record of the thread */
	int found = 0;
	for (size_t i = 0; i < t.n && !found; i++) {
		const struct rec *y = &t.r[i];
		if (y->type != 'Y' || strcmp(y->f[2], "stream") != 0)
			continue;
		size_t j = i + 1;
		while (j < t.n && strchr("LCM", t.r[j].type) == NULL)
			j++;
		found = j < t.n && num(&t.r[j], 0) > num(y, 0) + 10 * 1000 * 1000ULL;
	}
	ck_assert_msg(found, "no stream sync followed by an operation 10 ms after its call");
	trace_free(&t);
	run_free(&r);
	remove(path);
}
END_TEST

/*
 * CUPTI's records cost the driver's calls while it records (the fake's
 * FAKECUPTI_API_US: 1 ms of the host's time in each launch here): that is
 * CUPTI's, not the job's, pace. The plan's pace is taken from the iteration
 * after the recording, with CUPTI paused for it: the 24 layers of 300 us of
 * the host's own work show in it, and less than a quarter of what CUPTI
 * cost the recorded iteration (before, all of it: the pace was the
 * recording's). The plan is still timed by CUPTI (the recording's kernel
 * records are all in before the pause), and ebb plan of the recording has
 * the library's pace, from the E records of the pace iteration, which the
 * plan-pace-from note names.
 */
START_TEST(host_pace_leaves_cupti_out)
{
	const char *path = tmp_file("cuptipace");
	char lib[4200];
	char *argv[] = { workload_path(0), "plan", "10", NULL };
	const char *env[] = { "EBB_MODE=offload", "EBB_LIMIT=4G", "EBB_CUPTI=1",
		fake_cupti(lib, sizeof lib), "FAKECUPTI_API_US=1000", "WORKLOAD_HOST_US=300",
		"WORKLOAD_LAYER_US=50", NULL };
	struct run_result r;
	struct trace t;

	run_ebb(argv, env, path, &r);
	expect_ok(&r);
	expect_cupti_once(r.err);
	trace_load(path, &t);
	ck_assert_pstr_eq(note_value(&t, "plan-times"), "cupti");
	ck_assert_pstr_eq(note_value(&t, "cupti-paused"), "pace");
	ck_assert_ptr_nonnull(note_value(&t, "plan-pace-from"));
	ck_assert_ptr_nonnull(note_value(&t, "plan-host-pace-ns"));
	uint64_t rec0 = strtoull(note_value(&t, "plan-recording"), NULL, 10);
	uint64_t from = strtoull(note_value(&t, "plan-pace-from"), NULL, 10);
	uint64_t pace = strtoull(note_value(&t, "plan-host-pace-ns"), NULL, 10);
	/* the iteration right after the recording */
	uint64_t period = 0;
	for (size_t i = 0; i < t.n && period == 0; i++)
		if (t.r[i].type == 'I' && num(&t.r[i], 2) == rec0)
			period = num(&t.r[i], 3);
	ck_assert_uint_gt(period, 0);
	ck_assert_uint_eq(from, rec0 + period);
	/* what CUPTI cost the recorded iteration: its launches, 1 ms each */
	uint64_t launches = 0;
	for (size_t i = 0; i < t.n; i++)
		launches += t.r[i].type == 'L' && num(&t.r[i], 1) >= rec0 &&
		    num(&t.r[i], 1) < rec0 + period;
	ck_assert_uint_gt(launches, 20);
	uint64_t own = 24 * 300 * 1000ULL, cupti = launches * 1000 * 1000ULL;
	ck_assert_msg(pace > own * 95 / 100 && pace < own + cupti / 4, "pace %llu ns: the job's "
	    "own %llu, CUPTI's in the recording %llu", (unsigned long long)pace,
	    (unsigned long long)own, (unsigned long long)cupti);

	const char *const args[] = { "plan", path, "--iteration", "recorded", NULL };
	struct run_result p;
	char want[64];
	ebb_cmd(&p, args);
	snprintf(want, sizeof want, "host pace: %llu ns an iteration", (unsigned long long)pace);
	ck_assert_msg(p.status == 0 && strstr(p.out, want) != NULL, "want '%s' in:\n%s%s", want,
	    p.out, p.err);
	run_free(&p);
	trace_free(&t);
	run_free(&r);
	remove(path);
}
END_TEST

/*
 * The planner's loop (weights, optimizer state used once an iteration,
 * activations kept from the forward pass to the backward, a sync an
 * iteration) under a limit it cannot fit without moving: the plan is made
 * from the learned iteration and then does every move itself: offloads
 * after last uses and restores ahead of use, none on use, no eviction; the
 * values survive and the device never holds more than the limit.
 */
START_TEST(plan_moves_ahead_of_use)
{
	const char *path = tmp_file("plan");
	struct run_result r;
	struct trace t;
	unsigned long long frees, peak;

	run_plan("30", NULL, path, &r, &t);
	driver_line(r.out, &frees, &peak);
	ck_assert_uint_le(peak, 56ULL << 20);
	ck_assert_uint_eq(summary(&t, "plans"), 1);
	ck_assert_uint_ge(summary(&t, "plan-iterations"), 20);
	ck_assert_uint_gt(summary(&t, "prefetches"), 20);
	ck_assert_uint_gt(summary(&t, "planned-offloads"), 20);
	ck_assert_uint_eq(summary(&t, "prefetches-skipped"), 0);
	/* where there was room, a restore did not wait for the device to near
	 * it (how often there is room depends on the timing: from none to a
	 * third of them in this run) */
	ck_assert_uint_le(summary(&t, "prefetches-early"), summary(&t, "prefetches"));
	/* every wait of the host has its H record */
	uint64_t room = 0, gate = 0, landing = 0;
	for (size_t i = 0; i < t.n; i++) {
		const struct rec *h = &t.r[i];
		if (h->type != 'H')
			continue;
		uint64_t ns = num(h, 2);
		if (strcmp(h->f[3], "room") == 0 || strcmp(h->f[3], "frees") == 0)
			room += ns;
		else if (strcmp(h->f[3], "gate") == 0)
			gate += ns;
		else if (strcmp(h->f[3], "landing") == 0)
			landing += ns;
		else
			ck_abort_msg("H record of kind %s", h->f[3]);
	}
	ck_assert_uint_eq(room, summary(&t, "host-wait-room-ns"));
	/* the driver's virtual memory calls are counted and timed */
	ck_assert_uint_ge(summary(&t, "vmm-create-calls"), summary(&t, "handles-created"));
	ck_assert_uint_ge(summary(&t, "vmm-map-calls"), summary(&t, "restores"));
	ck_assert_uint_ge(summary(&t, "vmm-unmap-calls") + summary(&t, "restores-cancelled"),
	    summary(&t, "offloads"));
	ck_assert_uint_gt(summary(&t, "vmm-map-ns"), 0);
	ck_assert_uint_gt(summary(&t, "vmm-unmap-ns"), 0);
	ck_assert_uint_eq(gate, summary(&t, "host-wait-gate-ns"));
	ck_assert_uint_eq(landing, summary(&t, "host-wait-landing-ns"));
	ck_assert_uint_gt(room + gate, 0);
	ck_assert_uint_eq(summary(&t, "plan-actions-missed"), 0);
	ck_assert_str_eq(note_value(&t, "plan-times"), "host");
	/* with the host's times the host's side is left out of the prediction,
	 * which is the durations and the stalls; the costs of moves so far are
	 * noted all the same */
	ck_assert_uint_eq(strtoull(note_value(&t, "plan-host-idle-ns"), NULL, 10), 0);
	long long step = strtoll(note_value(&t, "plan-step-ns"), NULL, 10);
	long long parts = strtoll(note_value(&t, "plan-step-before-ns"), NULL, 10) +
	    strtoll(note_value(&t, "plan-stall-ns"), NULL, 10);
	ck_assert_msg(llabs(step - parts) <= 2, "plan-step-ns %lld, its parts %lld", step, parts);
	ck_assert_uint_gt(strtoull(note_value(&t, "plan-host-restore-ns"), NULL, 10), 0);
	/* before any drop, a drop costs an offload's time; a remake's mapping
	 * a mapping's mean, measured from the job's allocations */
	ck_assert_str_eq(note_value(&t, "plan-host-drop-ns"), note_value(&t, "plan-host-offload-ns"));
	uint64_t remake_ns = strtoull(note_value(&t, "plan-host-remake-ns"), NULL, 10);
	ck_assert_uint_gt(remake_ns, 0);
	ck_assert_uint_le(remake_ns, summary(&t, "vmm-map-ns") / summary(&t, "vmm-map-calls") * 4);
	/* the rates ebb's own copies got before the plan: each a median of some */
	const char *rate_notes[] = { "d2h-gbps-copies", "h2d-gbps-copies" };
	for (int d = 0; d < 2; d++) {
		double gbps = 0;
		unsigned copies = 0;
		ck_assert_int_eq(sscanf(note_value(&t, rate_notes[d]), "%lf/%u", &gbps, &copies), 2);
		ck_assert_msg(gbps > 0 && copies > 0 && copies <= 256, "%s: %s", rate_notes[d],
		    note_value(&t, rate_notes[d]));
	}
	ck_assert_uint_le(strtoull(note_value(&t, "plan-peak-bytes"), NULL, 10), 56ULL << 20);
	/* the search ran at least the simulation with nothing moved and one a
	 * move; making the plan took some time, less than the whole run */
	ck_assert_uint_gt(strtoull(note_value(&t, "plan-simulations"), NULL, 10),
	    strtoull(note_value(&t, "plan-moves"), NULL, 10));
	ck_assert_uint_gt(strtoull(note_value(&t, "plan-made-ns"), NULL, 10), 0);
	ck_assert_uint_lt(strtoull(note_value(&t, "plan-made-ns"), NULL, 10), 60ULL * 1000000000);
	/* in the plan's steady state nothing is restored on use and nothing
	 * evicted (until the final check of the optimizer state departs) */
	size_t faults = count_under_plan(&t, 'B', 4, "fault");
	size_t evictions = count_under_plan(&t, 'O', 4, "limit");
	ck_assert_msg(faults == 0 && evictions == 0, "%zu restores on use, %zu evictions under "
	    "the plan", faults, evictions);
	ck_assert_uint_gt(count_under_plan(&t, 'B', 4, "prefetch"), 20);
	ck_assert_uint_gt(count_under_plan(&t, 'O', 4, "plan"), 20);
	/* an offload the plan defers past the job's copy to the host (the
	 * optimizer state's, where the plan predicts it still copying then:
	 * that depends on the host-timed durations, check_plan.c has the rule)
	 * is issued after that copy in every planned iteration but the last,
	 * whose final check departs */
	uint64_t deferred = strtoull(note_value(&t, "plan-offloads-deferred"), NULL, 10);
	uint64_t planned = summary(&t, "plan-iterations");
	ck_assert_uint_ge(offloads_after_copies(&t), deferred * (planned - 1));
	ck_assert_uint_le(offloads_after_copies(&t), deferred * planned);
	ck_assert_uint_ge(count_type_field(&t, 'C', 5, "d2h"), 30);	/* one an iteration */
	ck_assert_ptr_nonnull(strstr(r.err, "plan: 1 made"));
	trace_free(&t);
	run_free(&r);
	remove(path);
}
END_TEST

/*
 * Device memory the driver takes for the process beyond ebb's buffers (here
 * each function's code, loaded at its first launch as CUDA's lazy loading
 * does) counts against EBB_LIMIT: the device holds no more than the limit
 * and what the driver took since ebb last looked (ebb samples as what it
 * holds grows and at each iteration start: here at most two functions'
 * 2M, when the workers' offloads land late on a loaded machine), ebb says
 * how much of it was the driver's, and the plan still runs. Without the
 * count the device held 64M.
 */
START_TEST(limit_counts_driver_memory)
{
	const char *path = tmp_file("lazy");
	struct run_result r;
	struct trace t;
	unsigned long long frees, peak;

	run_plan("30", "FAKECUDA_LAZY_LOAD_BYTES=2M", path, &r, &t);
	driver_line(r.out, &frees, &peak);
	ck_assert_uint_le(peak, (56ULL + 4) << 20);
	ck_assert_uint_ge(summary(&t, "device-beyond-held-bytes"), 4ULL << 20);
	ck_assert_int_eq(count_substr(r.err, "EBB_LIMIT=58720256 counts them"), 1);
	ck_assert_uint_eq(summary(&t, "plans"), 1);
	ck_assert_uint_ge(summary(&t, "plan-iterations"), 20);
	trace_free(&t);
	run_free(&r);
	remove(path);
}
END_TEST

/* Under the plan's bound (the lowest peak without stalls, 28 MiB here):
 * the plan meets its target with stalls, as waits where the floor wants
 * them or as the greedy search's, whichever is faster (with
 * EBB_PLAN_WAITS=0, the greedy search's); in steady state nothing is
 * restored on use or evicted. */
static void
below_bound(const char *env)
{
	const char *path = tmp_file("plan");
	struct run_result r;
	struct trace t;
	unsigned long long frees, peak;

	run_plan("30", env, path, &r, &t);
	driver_line(r.out, &frees, &peak);
	ck_assert_uint_le(peak, 24ULL << 20);
	uint64_t target = strtoull(note_value(&t, "plan-target-bytes"), NULL, 10);
	ck_assert_uint_gt(strtoull(note_value(&t, "plan-bound-bytes"), NULL, 10), target);
	ck_assert_uint_le(strtoull(note_value(&t, "plan-peak-bytes"), NULL, 10), target);
	ck_assert_uint_gt(strtoull(note_value(&t, "plan-stall-ns"), NULL, 10), 0);
	size_t faults = count_under_plan(&t, 'B', 4, "fault");
	size_t evictions = count_under_plan(&t, 'O', 4, "limit");
	ck_assert_msg(faults == 0 && evictions == 0, "%zu restores on use, %zu evictions under "
	    "the plan", faults, evictions);
	/* which plan is faster depends on the run's times; without waits, none */
	if (strstr(env, "EBB_PLAN_WAITS=0") != NULL)
		ck_assert_str_eq(note_value(&t, "plan-waited"), "0");
	else
		ck_assert_ptr_nonnull(note_value(&t, "plan-waited"));
	/* each wait a note of its own, position and time, adding up (one plan) */
	unsigned long long nw = 0, ns = 0, pos, x;
	for (size_t i = 0; i < t.n; i++)
		if (t.r[i].type == 'Q' && strcmp(t.r[i].f[1], "plan-wait") == 0) {
			ck_assert_int_eq(sscanf(t.r[i].f[2], "%llu:%llu", &pos, &x), 2);
			ck_assert_uint_lt(pos, strtoull(note_value(&t, "plan-operations"), NULL, 10));
			ck_assert_uint_gt(x, 0);
			nw++;
			ns += x;
		}
	ck_assert_uint_eq(nw, strtoull(note_value(&t, "plan-waits"), NULL, 10));
	unsigned long long all = strtoull(note_value(&t, "plan-waits-ns"), NULL, 10);
	ck_assert_msg(ns <= all + nw && all <= ns + nw, "plan-wait notes add up to %llu ns, "
	    "plan-waits-ns is %llu", ns, all);
	trace_free(&t);
	run_free(&r);
	remove(path);
}

/* EBB_PLAN_MARGIN: the plan aims that fraction of EBB_LIMIT under it (1/64
 * by default), and the limit holds either way. */
START_TEST(plan_margin)
{
	static const struct { const char *env; uint64_t target; } runs[] = {
		{ "EBB_LIMIT=32M", (32ULL << 20) - (32ULL << 20) / 64 },
		{ "EBB_LIMIT=32M EBB_PLAN_MARGIN=0.25", 24ULL << 20 },
		{ "EBB_LIMIT=32M EBB_PLAN_MARGIN=0", 32ULL << 20 },
	};
	for (size_t k = 0; k < sizeof runs / sizeof runs[0]; k++) {
		const char *path = tmp_file("plan");
		struct run_result r;
		struct trace t;
		unsigned long long frees, peak;

		run_plan("30", runs[k].env, path, &r, &t);
		driver_line(r.out, &frees, &peak);
		ck_assert_uint_le(peak, 32ULL << 20);
		ck_assert_uint_eq(strtoull(note_value(&t, "plan-target-bytes"), NULL, 10),
		    runs[k].target);
		ck_assert_uint_le(strtoull(note_value(&t, "plan-peak-bytes"), NULL, 10),
		    runs[k].target);
		trace_free(&t);
		run_free(&r);
		remove(path);
	}
}
END_TEST

START_TEST(plan_below_its_bound_waits)
{
	below_bound("EBB_LIMIT=24M");
	below_bound("EBB_LIMIT=24M EBB_PLAN_WAITS=0");
}
END_TEST

/* A search out of time (EBB_PLAN_SECONDS of a nanosecond, under the bound):
 * the plan it had runs, short of its target, a warning and the trace say so,
 * and the reactive mover keeps the job within the limit, its values intact. */
START_TEST(plan_out_of_time)
{
	const char *path = tmp_file("plan");
	struct run_result r;
	struct trace t;
	unsigned long long frees, peak;

	run_plan("30", "EBB_LIMIT=24M EBB_PLAN_SECONDS=0.000000001", path, &r, &t);
	driver_line(r.out, &frees, &peak);
	ck_assert_uint_le(peak, 24ULL << 20);
	ck_assert_str_eq(note_value(&t, "plan-time-capped"), "1");
	uint64_t target = strtoull(note_value(&t, "plan-target-bytes"), NULL, 10);
	ck_assert_uint_gt(strtoull(note_value(&t, "plan-peak-bytes"), NULL, 10), target);
	ck_assert_msg(strstr(r.err, "reached EBB_PLAN_SECONDS") != NULL, "no warning: %s", r.err);
	trace_free(&t);
	run_free(&r);
	remove(path);
}
END_TEST

/*
 * Gradient accumulation: eight micro-batches an iteration and no sync before
 * the first optimizer step, so the micro-batch is taken for the iteration,
 * planned, and departed from at that step. Learning (CUPTI's timing, where
 * there is CUPTI) goes on until the whole iteration is found and its plan
 * has run: the learned note comes after the whole iteration's first start,
 * and the plan that runs last is the whole iteration's. Values survive.
 */
START_TEST(plan_accumulation_learns_the_whole_iteration)
{
	const char *path = tmp_file("plan");
	struct run_result r;
	struct trace t;
	unsigned long long frees, peak;

	run_plan("10", "WORKLOAD_ACCUM=8 WORKLOAD_LAYER_US=100", path, &r, &t);
	driver_line(r.out, &frees, &peak);
	ck_assert_uint_le(peak, 56ULL << 20);
	uint64_t mb = 0, whole = 0, whole_seq = 0, planned = 0;
	for (size_t i = 0; i < t.n; i++) {
		const struct rec *x = &t.r[i];
		if (x->type == 'I' && mb == 0) {
			mb = num(x, 3);
		} else if (x->type == 'I' && whole == 0 && num(x, 3) > mb) {
			whole = num(x, 3);
			whole_seq = num(x, 2);
		} else if (x->type == 'Q' && strcmp(x->f[1], "plan-operations") == 0) {
			planned = num(x, 2);
		}
	}
	ck_assert_uint_gt(mb, 0);
	ck_assert_uint_gt(whole, 8 * mb);	/* eight micro-batches and the step */
	ck_assert_uint_ge(summary(&t, "plan-departures"), 1);
	ck_assert_uint_ge(summary(&t, "plans"), 2);
	ck_assert_uint_eq(planned, whole);
	const char *learned = note_value(&t, "learned");
	ck_assert_ptr_nonnull(learned);
	ck_assert_uint_ge(strtoull(learned, NULL, 10), whole_seq);
	trace_free(&t);
	run_free(&r);
	remove(path);
}
END_TEST

/* The activations change size: the plan stops where the allocation differs,
 * the iteration is learned again and a second plan runs; values survive. */
START_TEST(plan_departs_and_relearns)
{
	const char *path = tmp_file("plan");
	struct run_result r;
	struct trace t;
	unsigned long long frees, peak;

	run_plan("40", "WORKLOAD_CHANGE_AT=15", path, &r, &t);
	driver_line(r.out, &frees, &peak);
	ck_assert_uint_le(peak, 56ULL << 20);
	const char *why = note_value(&t, "plan-departed");
	ck_assert_ptr_nonnull(why);
	ck_assert_ptr_nonnull(strstr(why, "bytes"));
	ck_assert_uint_ge(summary(&t, "plans"), 2);
	ck_assert_uint_ge(summary(&t, "plan-departures"), 1);
	ck_assert_uint_gt(summary(&t, "prefetches"), 20);
	trace_free(&t);
	run_free(&r);
	remove(path);
}
END_TEST

/*
 * EBB_SELF_TIME: every operation, allocation, free and synchronisation is
 * timed once, while learning or after it, in observe and in offload mode;
 * without it there are no self- records.
 */
static uint64_t
self_calls(const struct trace *t, const char *kind)
{
	char a[48], b[48];

	snprintf(a, sizeof a, "self-learning-%s-calls", kind);
	snprintf(b, sizeof b, "self-after-%s-calls", kind);
	ck_assert_uint_ne(summary(t, a), UINT64_MAX);
	ck_assert_uint_ne(summary(t, b), UINT64_MAX);
	return summary(t, a) + summary(t, b);
}

START_TEST(self_time_counts_every_call)
{
	const char *path = tmp_file("self-time");
	char *argv[] = { workload_path(0), "loop", "30", NULL };
	const char *observe[] = { "EBB_SELF_TIME=1", NULL };
	const char *offload[] = { "EBB_SELF_TIME=1", "EBB_MODE=offload", "EBB_LIMIT=1G", NULL };
	const char *const *envs[] = { observe, offload };
	struct run_result r;
	struct trace t;

	for (int i = 0; i < 2; i++) {
		run_ebb(argv, envs[i], path, &r);
		expect_ok(&r);
		ck_assert_int_eq(count_substr(r.err, "host time in ebb (EBB_SELF_TIME) while learning"), 1);
		ck_assert_int_eq(count_substr(r.err, "host time in ebb (EBB_SELF_TIME) after learning"), 1);
		trace_load(path, &t);
		uint64_t ops = summary(&t, "launches") + summary(&t, "copies") + summary(&t, "memsets") +
		    summary(&t, "nccl-calls") + summary(&t, "graph-launches");
		ck_assert_uint_eq(self_calls(&t, "op"), ops);
		ck_assert_uint_eq(self_calls(&t, "alloc"), summary(&t, "allocations"));
		ck_assert_uint_eq(self_calls(&t, "free"), summary(&t, "frees") +
		    summary(&t, "frees-untracked"));
		ck_assert_uint_eq(self_calls(&t, "sync"), count_type(&t, 'Y'));
		ck_assert_uint_gt(summary(&t, "self-learning-op-calls"), 0);
		/* observe mode learns the loop within its 30 iterations: operations
		 * come after it too (offload mode waits for the planner's thread) */
		if (i == 0) {
			ck_assert_uint_gt(summary(&t, "self-after-op-calls"), 0);
			ck_assert_uint_gt(summary(&t, "self-after-op-ns"), 0);
		}
		ck_assert_uint_ne(summary(&t, "self-setup-ns"), UINT64_MAX);
		trace_free(&t);
		run_free(&r);
	}
	run_ebb(argv, NULL, path, &r);
	expect_ok(&r);
	ck_assert_int_eq(count_substr(r.err, "EBB_SELF_TIME"), 0);
	trace_load(path, &t);
	ck_assert_uint_eq(summary(&t, "self-after-op-calls"), UINT64_MAX);
	trace_free(&t);
	run_free(&r);
	remove(path);
}
END_TEST

/* The plan scenario's launches an iteration: a forward pass of 12 layers
 * (copy_bytes packed in `extra`, fill_u32, sleep_us), a backward pass of 12
 * (sleep_us, copy_bytes) and 2 axpy_f32 through cuLaunchKernelEx; and their
 * parameter bytes: 24, 24, 4; 4, 24; 32 (fakecuda.h's layouts). */
#define PLAN_LAUNCHES (12 * 3 + 12 * 2 + 2)
#define PLAN_PARAM_BYTES (12 * (24 + 24 + 4) + 12 * (4 + 24) + 2 * 32)

/* Launches of the trace whose seq is in the iteration recorded for the plan
 * (from its plan-recording note, plan-operations of them). */
static uint64_t
recorded_launches(const struct trace *t)
{
	uint64_t s0 = strtoull(note_value(t, "plan-recording"), NULL, 10);
	uint64_t n = strtoull(note_value(t, "plan-operations"), NULL, 10), launches = 0;
	for (size_t i = 0; i < t->n; i++)
		launches += t->r[i].type == 'L' && num(&t->r[i], 1) >= s0 && num(&t->r[i], 1) < s0 + n;
	return launches;
}

/*
 * Every launch of the iteration recorded for the plan has a launch record
 * (the Z records count them and their parameter bytes), each complete, with
 * the geometry, shared memory, attributes and parameter bytes its hook saw
 * (EBB_VERBOSE=3 writes each one): the copies' packed `extra` buffers, the
 * fills' and sleeps' parameters by kparam's layout, the axpy launches'
 * grid, block, shared memory and attribute from their CUlaunchConfig.
 */
START_TEST(launch_records_of_the_iteration)
{
	const char *path = tmp_file("lrec");
	struct run_result r;
	struct trace t;

	run_plan("8", "EBB_VERBOSE=3", path, &r, &t);
	ck_assert_uint_eq(summary(&t, "plans"), 1);
	ck_assert_uint_eq(recorded_launches(&t), PLAN_LAUNCHES);
	ck_assert_uint_eq(summary(&t, "launch-records"), PLAN_LAUNCHES);
	ck_assert_uint_eq(summary(&t, "launch-records-unreplayable"), 0);
	ck_assert_uint_eq(summary(&t, "launch-records-unrecorded"), 0);
	ck_assert_uint_eq(summary(&t, "launch-record-param-bytes"), PLAN_PARAM_BYTES);
	/* each record holds its own fields beside the bytes, within the default bound */
	ck_assert_uint_ge(summary(&t, "launch-record-bytes"), PLAN_PARAM_BYTES + 64 * PLAN_LAUNCHES);
	ck_assert_uint_le(summary(&t, "launch-record-bytes"), 1u << 20);
	ck_assert_int_eq(count_substr(r.err, "]: launch record "), PLAN_LAUNCHES);
	ck_assert_int_eq(count_substr(r.err, " grid 1x1x1 block 128x1x1 shared 0 stream "), 36);
	ck_assert_int_eq(count_substr(r.err, ", 0 attributes, 24 parameter bytes packed (replayable)"),
	    24);
	ck_assert_int_eq(count_substr(r.err, ", 0 attributes, 24 parameter bytes (replayable)"), 12);
	ck_assert_int_eq(count_substr(r.err, " grid 1x1x1 block 1x1x1 shared 0 stream "), 24);
	ck_assert_int_eq(count_substr(r.err, ", 0 attributes, 4 parameter bytes (replayable)"), 24);
	ck_assert_int_eq(count_substr(r.err, " grid 2x3x4 block 32x2x1 shared 16 stream "), 2);
	ck_assert_int_eq(count_substr(r.err, ", 1 attributes, 32 parameter bytes (replayable)"), 2);
	ck_assert_ptr_nonnull(strstr(r.err, "launch records of the last iteration recorded: 62 (0 not "
	    "replayable), 0 launches not recorded past EBB_LAUNCH_RECORD_BYTES"));
	trace_free(&t);
	run_free(&r);
	remove(path);
}
END_TEST

/*
 * The accesses (V records) of every measured launch of kernel `name`, as
 * "a,b,..." when all its launches agree, "mixed" when they do not, NULL
 * when none was measured.
 */
static const char *
accesses_of(const struct trace *t, const char *name)
{
	static char out[256];
	uint64_t kid = kernel_id(t, name);
	int seen = 0;

	for (size_t i = 0; i < t->n; i++) {
		const struct rec *v = &t->r[i];
		if (v->type != 'V')
			continue;
		const struct rec *l = NULL;
		for (size_t j = 0; j < t->n && l == NULL; j++)
			if (t->r[j].type == 'L' && num(&t->r[j], 1) == num(v, 1))
				l = &t->r[j];
		ck_assert_ptr_nonnull(l);
		ck_assert_uint_eq(num(v, 2), num(l, 4));	/* one access a buffer */
		if (num(l, 3) != kid)
			continue;
		char one[256] = "";
		for (size_t j = 3; j < v->n; j++) {
			strcat(one, v->f[j]);
			if (j + 1 < v->n)
				strcat(one, ",");
		}
		if (seen && strcmp(one, out) != 0)
			return "mixed";
		strcpy(out, one);
		seen = 1;
	}
	return seen ? out : NULL;
}

/*
 * Run argv under ebb with env into the trace at path (r, t: loaded), and
 * beside it without a limit (observe mode, alone_env): both exit ok, with
 * the same checksum.
 */
static void
run_beside_alone(char *const argv[], const char *const *alone_env, const char *const *env,
    const char *path, struct run_result *r, struct trace *t)
{
	struct run_result alone;

	run_ebb(argv, alone_env, NULL, &alone);
	expect_ok(&alone);
	run_ebb(argv, env, path, r);
	expect_ok(r);
	trace_load(path, t);
	ck_assert_str_ne(checksum_of(alone.out), "");
	ck_assert_str_eq(checksum_of(r->out), checksum_of(alone.out));
	run_free(&alone);
}

/*
 * The same question about a buffer the plan is offloading (WORKLOAD_QUERY=1:
 * after each layer's launches, the device pointer of the layer before's
 * activation), the fake's answer slowed (FAKECUDA_QUERY_DELAY_US) so that
 * the copy lands and the worker would unmap the buffer while the driver
 * looks the address up: the question cancels the offload as a use does, so
 * every answer is the pointer's own and the job computes what it does
 * without the limit.
 */
START_TEST(pointer_query_while_offloading)
{
	const char *path = tmp_file("queryinflight");
	char *argv[] = { workload_path(0), "plan", "30", NULL };
	const char *alone_env[] = { "WORKLOAD_QUERY=1", NULL };
	const char *env[] = { "WORKLOAD_QUERY=1", "FAKECUDA_QUERY_DELAY_US=3000", "EBB_MODE=offload",
		"EBB_LIMIT=56M", NULL };
	struct run_result r;
	struct trace t;

	run_beside_alone(argv, alone_env, env, path, &r, &t);
	ck_assert_uint_gt(summary(&t, "run-iterations"), 0);
	ck_assert_uint_gt(summary(&t, "planned-offloads"), 0);
	ck_assert_uint_gt(summary(&t, "restores-cancelled"), 0);
	trace_free(&t);
	run_free(&r);
	remove(path);
}
END_TEST

/* Run the write-set scenario for 16 iterations in offload mode under a
 * limit it fits in, with recompute (EBB_RECOMPUTE=0 or 1) and env added
 * (NULL: none). */
static void
run_writesets(const char *recompute, const char *extra, const char *path, struct run_result *r,
    struct trace *t)
{
	char *argv[] = { workload_path(0), "writesets", "16", NULL };
	const char *env[] = { "EBB_MODE=offload", "EBB_LIMIT=64M", "EBB_VERBOSE=1", recompute,
		extra, NULL };

	run_ebb(argv, env, path, r);
	expect_ok(r);
	trace_load(path, t);
}

/* run_writesets with EBB_RECOMPUTE=1 and extra (a workload variable, NULL:
 * none), after the workload alone with extra: the job computes what it
 * computes without ebb. */
static void
run_writesets_same(const char *extra, const char *path, struct run_result *r, struct trace *t)
{
	char *argv[] = { workload_path(0), "writesets", "16", NULL };
	const char *env[] = { extra, NULL };
	struct run_result alone;

	run_ebb(argv, env, NULL, &alone);
	expect_ok(&alone);
	run_writesets("EBB_RECOMPUTE=1", extra, path, r, t);
	ck_assert_str_eq(checksum_of(r->out), checksum_of(alone.out));
	run_free(&alone);
}

/*
 * EBB_RECOMPUTE=1 probes the iteration after the recorded one: every
 * launch's buffers hashed before and after it, on the device, tell which it
 * wrote (workload writesets): each kernel's V records give exactly the
 * buffers it changes, rand_state's state and square_sum's scratch
 * included. gather writes through a table of pointers that it references,
 * into buffers it does not: the probe sees the table read, and that it
 * holds pointers, so gather may write what it does not reference. Every
 * launch but gather can be launched again. The job computes what it
 * computes without ebb.
 *
 * The gaps a replay could bridge, from the write sets alone: x's two (its
 * fill), y's two (its fill, then axpy in place, from x), o's one (struct_ptrs
 * from x and y, before gather), and z's, rand_state writing its state too
 * (into scratch on a replay). Each is replayed once in the plan's first
 * iteration, into a scratch buffer, and remakes its buffer bit for bit,
 * but z: its replay reads the state from the scratch, zeroed, not the
 * state the job's launch read, so what it makes differs, and the gap is
 * refused (a random-number kernel whose state is not an unchanged input).
 */
START_TEST(write_sets_measured)
{
	const char *path = tmp_file("wsets");
	char *argv[] = { workload_path(0), "writesets", "16", NULL };
	struct run_result alone, r;
	struct trace t;

	run_ebb(argv, NULL, NULL, &alone);
	expect_ok(&alone);
	run_writesets("EBB_RECOMPUTE=1", NULL, path, &r, &t);
	ck_assert_str_ne(checksum_of(alone.out), "");
	ck_assert_str_eq(checksum_of(r.out), checksum_of(alone.out));
	ck_assert_uint_eq(summary(&t, "plans"), 1);
	ck_assert_uint_eq(summary(&t, "write-set-launches"), 7);
	ck_assert_uint_eq(summary(&t, "write-set-unmeasured"), 0);
	ck_assert_uint_eq(summary(&t, "write-set-refs"), 13);
	ck_assert_uint_eq(summary(&t, "write-set-written"), 8);
	ck_assert_uint_eq(summary(&t, "probe-hashes"), 26);
	ck_assert_uint_eq(summary(&t, "replayable-launches"), 6);
	ck_assert_uint_eq(summary(&t, "write-set-pointer-refs"), 1);
	ck_assert_uint_eq(summary(&t, "wild-launches"), 1);
	ck_assert_uint_eq(count_type(&t, 'V'), 7);
	ck_assert_str_eq(accesses_of(&t, "fill_u32"), "2");
	ck_assert_str_eq(accesses_of(&t, "axpy_f32"), "2,1");
	ck_assert_str_eq(accesses_of(&t, "rand_state_f32"), "2,2");
	ck_assert_str_eq(accesses_of(&t, "square_sum_f32"), "2,1,2");
	ck_assert_str_eq(accesses_of(&t, "struct_ptrs"), "1,1,2");
	ck_assert_str_eq(accesses_of(&t, "gather_ptrs"), "5");	/* read, a table of pointers */
	ck_assert_uint_eq(summary(&t, "replay-gaps-considered"), 6);
	ck_assert_uint_eq(summary(&t, "replay-gaps"), 6);
	ck_assert_uint_eq(summary(&t, "replay-buffers"), 4);
	ck_assert_uint_eq(summary(&t, "replay-bytes"), 8u << 20);
	ck_assert_uint_eq(summary(&t, "replay-refused-writes-other"), 0);
	ck_assert_ptr_nonnull(strstr(r.err, "recompute candidates (EBB_RECOMPUTE): 6 of 6 gaps "));
	ck_assert_uint_eq(summary(&t, "replay-tried"), 6);
	ck_assert_uint_eq(summary(&t, "replay-verified"), 5);
	ck_assert_uint_eq(summary(&t, "replay-failed"), 1);
	ck_assert_uint_eq(summary(&t, "replay-skipped"), 0);
	ck_assert_ptr_nonnull(strstr(r.err, "write sets (EBB_RECOMPUTE): 7 launches measured, 0 "
	    "not; 13 buffer references, 8 written, 1 to tables of pointers; 6 launches can be "
	    "launched again, 1 may write what they do not reference; 26 hashes of 52.0 MiB"));
	trace_free(&t);
	run_free(&alone);
	run_free(&r);
	remove(path);
}
END_TEST

/*
 * A kernel whose output depends on nothing it is given (stamp, which
 * writes a count of its launches, as a kernel reading a clock or racing
 * atomics would) is a candidate by its write sets: its replay, compared
 * with what it wrote, refuses it; the others stay verified, and the job
 * computes what it computes without ebb. Under a limit that the replay's
 * scratch takes the job to, other buffers move to make room for it: what
 * ebb holds stays within EBB_LIMIT.
 */
START_TEST(replay_verify_refuses)
{
	const char *path = tmp_file("wsetstamp");
	char *argv[] = { workload_path(0), "writesets", "16", NULL };
	const char *env[] = { "WORKLOAD_STAMP=1", NULL };
	struct run_result alone, r;
	struct trace t;

	run_ebb(argv, env, NULL, &alone);
	expect_ok(&alone);
	run_writesets("EBB_RECOMPUTE=1", "WORKLOAD_STAMP=1", path, &r, &t);
	ck_assert_str_eq(checksum_of(r.out), checksum_of(alone.out));
	/* (and rand_state's z, refused as in write_sets_measured) */
	ck_assert_uint_eq(summary(&t, "replay-gaps"), 7);
	ck_assert_uint_eq(summary(&t, "replay-tried"), 7);
	ck_assert_uint_eq(summary(&t, "replay-verified"), 5);
	ck_assert_uint_eq(summary(&t, "replay-failed"), 2);
	ck_assert_ptr_nonnull(strstr(r.err, "recompute candidates replayed once (EBB_RECOMPUTE): "
	    "7, 5 remade their buffer bit for bit, 2 did not; 0 not tried"));
	trace_free(&t);
	run_free(&r);
	const char *tight[] = { "EBB_MODE=offload", "EBB_LIMIT=20M", "EBB_VERBOSE=1",
		"EBB_RECOMPUTE=1", "WORKLOAD_STAMP=1", NULL };
	run_ebb(argv, tight, path, &r);
	expect_ok(&r);
	trace_load(path, &t);
	ck_assert_str_eq(checksum_of(r.out), checksum_of(alone.out));
	ck_assert_uint_eq(summary(&t, "replay-tried"), 7);
	ck_assert_uint_eq(summary(&t, "replay-verified"), 5);
	ck_assert_uint_le(summary(&t, "held-peak-bytes"), 20u << 20);
	ck_assert_uint_gt(summary(&t, "offloads"), 0);
	trace_free(&t);
	run_free(&alone);
	run_free(&r);
	remove(path);
}
END_TEST

/* The rand_state launches of the writesets scenario in t: how many buffers
 * the recorded one (*nrec) and the probed one (*nprobed) list; returns the
 * probed one's seq. rand_state is the iteration's fourth operation (of 11),
 * and the probed iteration follows the recorded one. */
static uint64_t
rand_state_refs(const struct trace *t, size_t *nrec, size_t *nprobed)
{
	const char *rec = note_value(t, "plan-recording");
	ck_assert_ptr_nonnull(rec);
	uint64_t s0 = strtoull(rec, NULL, 10), period = 11;
	uint64_t recorded = s0 + 3, probed = s0 + period + 3;

	*nrec = *nprobed = 0;
	for (size_t i = 0; i < t->n; i++) {
		const struct rec *l = &t->r[i];
		if (l->type == 'L' && l->n > 4 && num(l, 1) == recorded)
			*nrec = (size_t)num(l, 4);
		else if (l->type == 'L' && l->n > 4 && num(l, 1) == probed)
			*nprobed = (size_t)num(l, 4);
	}
	return probed;
}

/* The V record of operation seq, or NULL. */
static const struct rec *
access_of(const struct trace *t, uint64_t seq)
{
	for (size_t i = 0; i < t->n; i++)
		if (t->r[i].type == 'V' && t->r[i].n >= 2 && num(&t->r[i], 1) == seq)
			return &t->r[i];
	return NULL;
}

/*
 * A parameter word that falls inside a buffer by chance in one iteration and
 * not in the next (WORKLOAD_SEEDPTR: rand_state's seed, an address inside a
 * buffer of its own size, in every other iteration): where the recorded
 * launch has the extra reference and the probed one does not, the probed
 * launch is measured on the buffers it has and the extra one is not (a V
 * record with 0 for it, and the launch is not one to replay); the other way
 * round it is measured on the recorded launch's buffers, the extra one
 * hashed too and found unchanged (a chance reference). Both compute what
 * they compute without ebb.
 */
START_TEST(write_sets_chance_pointer)
{
	const char *path = tmp_file("wsetseed");

	for (int k = 0; k < 2; k++) {
		const char *parity = k == 0 ? "WORKLOAD_SEEDPTR=0" : "WORKLOAD_SEEDPTR=1";
		struct run_result r;
		struct trace t;
		run_writesets_same(parity, path, &r, &t);
		size_t nrec, nprobed;
		const struct rec *v = access_of(&t, rand_state_refs(&t, &nrec, &nprobed));
		if (nrec == 3 && nprobed == 2) {
			ck_assert_ptr_nonnull(v);
			ck_assert_uint_eq(v->n, 6);	/* t, seq, the count, three accesses */
			ck_assert_str_eq(v->f[2], "3");
			ck_assert_str_eq(v->f[3], "2");	/* z, written */
			ck_assert_str_eq(v->f[4], "2");	/* its state, written */
			ck_assert_str_eq(v->f[5], "0");	/* the chance one: not measured */
		} else {
			ck_assert_uint_eq(nrec, 2);
			ck_assert_uint_eq(nprobed, 3);
			ck_assert_ptr_nonnull(v);
			ck_assert_uint_eq(v->n, 5);	/* the recorded launch's two */
			ck_assert_str_eq(v->f[2], "2");
			ck_assert_str_eq(v->f[3], "2");
			ck_assert_str_eq(v->f[4], "2");
			ck_assert_uint_eq(summary(&t, "write-set-chance-refs"), 1);
		}
		trace_free(&t);
		run_free(&r);
	}
	remove(path);
}
END_TEST

/*
 * The chance word points into a buffer in every iteration, into one of
 * another size in every other (WORKLOAD_SEEDPTR=1, WORKLOAD_SEEDPTR2=1): the
 * probed rand_state has as many buffers as the recorded one, the third of
 * another size. It is measured on the first two (z and its state, written),
 * the third not (0), and the probed launch's third is hashed and found
 * unchanged (a chance reference). The job computes what it computes
 * without ebb.
 */
START_TEST(write_sets_chance_pointer_elsewhere)
{
	const char *path = tmp_file("wsetseed2");
	char *argv[] = { workload_path(0), "writesets", "16", NULL };
	const char *env[] = { "WORKLOAD_SEEDPTR=1", "WORKLOAD_SEEDPTR2=1", NULL };
	struct run_result alone, r;
	struct trace t;

	run_ebb(argv, env, NULL, &alone);
	expect_ok(&alone);
	const char *both[] = { "EBB_MODE=offload", "EBB_LIMIT=64M", "EBB_VERBOSE=1",
		"EBB_RECOMPUTE=1", "WORKLOAD_SEEDPTR=1", "WORKLOAD_SEEDPTR2=1", NULL };
	run_ebb(argv, both, path, &r);
	expect_ok(&r);
	trace_load(path, &t);
	ck_assert_str_eq(checksum_of(r.out), checksum_of(alone.out));
	size_t nrec, nprobed;
	const struct rec *v = access_of(&t, rand_state_refs(&t, &nrec, &nprobed));
	ck_assert_uint_eq(nrec, 3);
	ck_assert_uint_eq(nprobed, 3);
	ck_assert_ptr_nonnull(v);
	ck_assert_uint_eq(v->n, 6);
	ck_assert_str_eq(v->f[3], "2");
	ck_assert_str_eq(v->f[4], "2");
	ck_assert_str_eq(v->f[5], "0");
	ck_assert_uint_eq(summary(&t, "write-set-chance-refs"), 1);
	ck_assert_uint_eq(summary(&t, "write-set-unmeasured"), 0);
	trace_free(&t);
	run_free(&alone);
	run_free(&r);
	remove(path);
}
END_TEST

/*
 * An optional output given in every other iteration (WORKLOAD_AUXPTR:
 * fill_opt writes aux where it is passed): where the probed launch has it
 * and the recorded one does not, the extra buffer is hashed and found
 * written, so the launch's accesses are unknown (a V record of 0 for f) but
 * it holds no pointers: it writes nothing it does not reference, and is not
 * wild; the other way round it is measured on f, aux not (0).
 * Both compute what they compute without ebb.
 */
START_TEST(write_sets_optional_output)
{
	const char *path = tmp_file("wsetsaux");

	for (int k = 0; k < 2; k++) {
		const char *parity = k == 0 ? "WORKLOAD_AUXPTR=0" : "WORKLOAD_AUXPTR=1";
		struct run_result r;
		struct trace t;
		run_writesets_same(parity, path, &r, &t);
		const char *rec = note_value(&t, "plan-recording");
		ck_assert_ptr_nonnull(rec);
		uint64_t s0 = strtoull(rec, NULL, 10), kid = kernel_id(&t, "fill_opt_u32");
		const struct rec *lr = NULL, *lp = NULL;	/* recorded, probed */
		for (size_t i = 0; i < t.n && lp == NULL; i++)
			if (t.r[i].type == 'L' && t.r[i].n > 4 && num(&t.r[i], 3) == kid &&
			    num(&t.r[i], 1) >= s0) {
				if (lr == NULL)
					lr = &t.r[i];
				else
					lp = &t.r[i];
			}
		ck_assert_ptr_nonnull(lp);
		const struct rec *v = access_of(&t, num(lp, 1));
		if (num(lr, 4) == 1) {
			ck_assert_uint_eq(num(lp, 4), 2);
			ck_assert_ptr_nonnull(v);
			ck_assert_uint_eq(v->n, 4);
			ck_assert_str_eq(v->f[3], "0");	/* f: its access unknown */
			ck_assert_uint_eq(summary(&t, "wild-launches"), 1);	/* gather */
			ck_assert_uint_eq(summary(&t, "write-set-loose"), 1);
			ck_assert_uint_eq(summary(&t, "write-set-unmeasured"), 1);
			ck_assert_uint_eq(summary(&t, "write-set-chance-refs"), 0);
		} else {
			ck_assert_uint_eq(num(lr, 4), 2);
			ck_assert_uint_eq(num(lp, 4), 1);
			ck_assert_ptr_nonnull(v);
			ck_assert_uint_eq(v->n, 5);
			ck_assert_str_eq(v->f[3], "2");	/* f, written */
			ck_assert_str_eq(v->f[4], "0");	/* aux: not measured */
		}
		trace_free(&t);
		run_free(&r);
	}
	remove(path);
}
END_TEST

/*
 * Data is not a table of pointers because its words lie between tracked
 * buffers (workload writesets, WORKLOAD_FARDATA=1): with the job's own
 * mapping at 32 TiB (or 256 GiB) and the driver's allocations far above it,
 * copy reads words of 64 TiB and more, inside the span of every tracked
 * buffer but in no buffer's region. It is measured as a plain read and
 * write, may be launched again, and does not count as writing what it does
 * not reference; gather's table still does.
 */
START_TEST(write_sets_data_between_buffers)
{
	const char *path = tmp_file("wsetsfar");
	struct run_result r;
	struct trace t;

	run_writesets_same("WORKLOAD_FARDATA=1", path, &r, &t);
	ck_assert_uint_eq(summary(&t, "write-set-launches"), 9);
	ck_assert_uint_eq(summary(&t, "write-set-unmeasured"), 0);
	ck_assert_str_eq(accesses_of(&t, "copy_bytes"), "2,1");
	ck_assert_str_eq(accesses_of(&t, "gather_ptrs"), "5");
	ck_assert_uint_eq(summary(&t, "write-set-pointer-refs"), 1);
	ck_assert_uint_eq(summary(&t, "wild-launches"), 1);
	ck_assert_uint_eq(summary(&t, "replayable-launches"), 8);
	trace_free(&t);
	run_free(&r);
	remove(path);
}
END_TEST

/* Run the recompute scenario for 16 iterations in offload mode under a limit
 * below what it holds at once, with a link so slow (EBB_D2H_GBPS,
 * EBB_H2D_GBPS) that moving its activations stalls far longer than
 * launching their producers again, and env added (NULL: none). */
static void
run_recompute(const char *extra, const char *path, struct run_result *r, struct trace *t)
{
	char *argv[] = { workload_path(0), "recompute", "16", NULL };
	const char *env[] = { "EBB_MODE=offload", "EBB_LIMIT=32M", "EBB_VERBOSE=2",
		"EBB_RECOMPUTE=1", "EBB_D2H_GBPS=0.05", "EBB_H2D_GBPS=0.05", extra, NULL };

	run_ebb(argv, env, path, r);
	expect_ok(r);
	trace_load(path, t);
}

/*
 * Recompute by replay (workload recompute: activations made by fill and
 * axpy from the one below, read again in the backward): once the
 * candidates are verified, the plan is made again with them, and it
 * recomputes gaps instead of moving them over a slow link. The buffers it
 * drops are remade by their producers (O records of kind drop, B of kind
 * remake), none before its point; the job computes what it computes
 * without ebb, and ebb holds no more than EBB_LIMIT.
 */
START_TEST(recompute_runs)
{
	const char *path = tmp_file("recompute");
	char *argv[] = { workload_path(0), "recompute", "16", NULL };
	struct run_result alone, r;
	struct trace t;

	run_ebb(argv, NULL, NULL, &alone);
	expect_ok(&alone);
	run_recompute(NULL, path, &r, &t);
	ck_assert_str_ne(checksum_of(alone.out), "");
	ck_assert_str_eq(checksum_of(r.out), checksum_of(alone.out));
	ck_assert_uint_gt(summary(&t, "replay-verified"), 0);
	ck_assert_uint_gt(summary(&t, "recompute-gaps"), 0);
	ck_assert_uint_gt(summary(&t, "recompute-drops"), 0);
	/* a drop whose buffer is used again before its memory is released is
	 * kept, not remade (the cancel, which timing decides) */
	ck_assert_uint_gt(summary(&t, "recompute-remakes"), 0);
	ck_assert_uint_le(summary(&t, "recompute-remakes"), summary(&t, "recompute-drops"));
	ck_assert_uint_gt(summary(&t, "host-remake-ns"), 0);
	ck_assert_uint_eq(summary(&t, "recompute-early"), 0);
	ck_assert_uint_eq(summary(&t, "recompute-failed"), 0);
	ck_assert_uint_eq(count_type_field(&t, 'O', 4, "drop"), summary(&t, "recompute-drops"));
	ck_assert_uint_eq(count_type_field(&t, 'B', 4, "remake"), summary(&t, "recompute-remakes"));
	/* every drop not made has its reason */
	ck_assert_uint_eq(summary(&t, "recompute-kept"), summary(&t, "recompute-kept-busy") +
	    summary(&t, "recompute-kept-args") + summary(&t, "recompute-kept-inputs") +
	    summary(&t, "recompute-kept-mover"));
	ck_assert_ptr_nonnull(note_value(&t, "plan-recompute-started"));
	ck_assert_uint_le(summary(&t, "held-peak-bytes"), 32u << 20);
	ck_assert_ptr_nonnull(strstr(r.err, "plan: recomputes "));
	trace_free(&t);
	run_free(&r);
	/* without EBB_RECOMPUTE, nothing is dropped */
	const char *off[] = { "EBB_MODE=offload", "EBB_LIMIT=32M", "EBB_D2H_GBPS=0.05",
		"EBB_H2D_GBPS=0.05", NULL };
	run_ebb(argv, off, path, &r);
	expect_ok(&r);
	trace_load(path, &t);
	ck_assert_str_eq(checksum_of(r.out), checksum_of(alone.out));
	ck_assert_uint_eq(count_type_field(&t, 'O', 4, "drop"), 0);
	trace_free(&t);
	run_free(&alone);
	run_free(&r);
	remove(path);
}
END_TEST

/* The sum of field what (a number) over the records of a type whose field
 * kind is value. */
static uint64_t
sum_type_field(const struct trace *t, char type, size_t what, size_t kind, const char *value)
{
	uint64_t sum = 0;
	for (size_t i = 0; i < t->n; i++)
		if (t->r[i].type == type && t->r[i].n > what && t->r[i].n > kind &&
		    strcmp(t->r[i].f[kind], value) == 0)
			sum += num(&t->r[i], what);
	return sum;
}

/*
 * The host far ahead of the device (each iteration's forward begins with a
 * 200 ms kernel; each launch takes the host 1.5 ms, so that the recorded
 * gaps are long), with room under EBB_LIMIT for everything and a plan for
 * 0.7 of the peak: buffers the plan dropped are needed again before the
 * device passed their last use. The host waits for each drop to release
 * its memory (H records of kind drop, their sum host-wait-drop-ns) and
 * every drop is remade, none kept: the memory the plan counts as free is.
 */
START_TEST(recompute_host_ahead)
{
	const char *path = tmp_file("recomputeahead");
	char *argv[] = { workload_path(0), "recompute", "12", NULL };
	const char *env[] = { "WORKLOAD_LEAD_US=200000", "FAKECUDA_LAUNCH_QUEUE_DELAY_US=1500",
		"EBB_MODE=offload", "EBB_LIMIT=64M", "EBB_TARGET=0.7", "EBB_RECOMPUTE=1",
		"EBB_D2H_GBPS=0.05", "EBB_H2D_GBPS=0.05", NULL };
	struct run_result r;
	struct trace t;

	run_beside_alone(argv, NULL, env, path, &r, &t);
	ck_assert_uint_gt(summary(&t, "recompute-drops"), 0);
	ck_assert_uint_gt(summary(&t, "recompute-drop-waits"), 0);
	ck_assert_uint_eq(summary(&t, "recompute-drops-undone"), 0);
	ck_assert_uint_eq(summary(&t, "recompute-remakes"), summary(&t, "recompute-drops"));
	ck_assert_uint_eq(summary(&t, "recompute-failed"), 0);
	ck_assert_uint_gt(count_type_field(&t, 'H', 3, "drop"), 0);
	ck_assert_uint_eq(sum_type_field(&t, 'H', 2, 3, "drop"), summary(&t, "host-wait-drop-ns"));
	trace_free(&t);
	run_free(&r);
	remove(path);
}
END_TEST

/*
 * The plan with recomputes is costed by the moves of the plan that runs
 * before it: every call of the driver's virtual memory since that plan
 * started (2 ms each here), on every thread, is charged to its moves, half
 * at each end of a move's cycle. A cycle maps its memory at least once
 * and unmaps it at least once, so each end costs at least a call's time
 * less the moves whose unmapping is still to come; the recording's costs
 * count a mapping alone for a remake.
 */
START_TEST(recompute_costed_by_the_running_plan)
{
	const char *path = tmp_file("recomputecost");
	char *argv[] = { workload_path(0), "recompute", "24", NULL };
	const char *env[] = { "EBB_MODE=offload", "EBB_LIMIT=32M", "EBB_RECOMPUTE=1",
		"FAKECUDA_VMM_DELAY_US=2000", NULL };
	struct run_result r;
	struct trace t;

	run_beside_alone(argv, NULL, env, path, &r, &t);
	const char *kinds[] = { "offload", "restore", "drop", "remake" };
	uint64_t ns[4];
	for (int k = 0; k < 4; k++) {
		char key[64];
		snprintf(key, sizeof key, "plan-recompute-host-%s-ns", kinds[k]);
		const char *v = note_value(&t, key);
		ck_assert_msg(v != NULL, "no %s note", key);
		ns[k] = strtoull(v, NULL, 10);
		ck_assert_msg(ns[k] >= 1000 * 1000ULL, "%s: %llu ns", key, (unsigned long long)ns[k]);
	}
	for (int k = 0; k < 3; k++)
		ck_assert_uint_ge(ns[k], ns[3]);	/* each at least the calls' half */
	trace_free(&t);
	run_free(&r);
	remove(path);
}
END_TEST

/*
 * Activations made through a workspace the job keeps (WORKLOAD_WORKSPACE=1:
 * scaled_ws writes the workspace, then its output from it, as a GEMM
 * does): each producer writes another buffer, so its candidates replay it
 * into scratch. They are verified with that scratch zeroed, the plan
 * recomputes some, and every drop is remade. The job's workspace is never
 * written by a replay: its last word, in the checksum each iteration, is
 * what the job left there. which: the WORKLOAD_WORKSPACE setting.
 */
static void
workspace_case(const char *which)
{
	const char *path = tmp_file("recomputews");
	char *argv[] = { workload_path(0), "recompute", "12", NULL };
	const char *alone_env[] = { which, NULL };
	const char *env[] = { which, "WORKLOAD_LEAD_US=200000",
		"FAKECUDA_LAUNCH_QUEUE_DELAY_US=1500", "EBB_MODE=offload", "EBB_LIMIT=64M",
		"EBB_TARGET=0.7", "EBB_RECOMPUTE=1", "EBB_D2H_GBPS=0.05", "EBB_H2D_GBPS=0.05", NULL };
	struct run_result r;
	struct trace t;

	run_beside_alone(argv, alone_env, env, path, &r, &t);
	ck_assert_uint_eq(summary(&t, "replay-refused-writes-other"), 0);
	ck_assert_uint_gt(summary(&t, "replay-verified"), 0);
	ck_assert_uint_eq(summary(&t, "replay-failed"), 0);
	ck_assert_uint_gt(summary(&t, "recompute-gaps"), 0);
	ck_assert_uint_gt(summary(&t, "recompute-drops"), 0);
	ck_assert_uint_eq(summary(&t, "recompute-remakes"), summary(&t, "recompute-drops"));
	ck_assert_uint_eq(summary(&t, "recompute-failed"), 0);
	trace_free(&t);
	run_free(&r);
	remove(path);
}

START_TEST(recompute_workspace)
{
	workspace_case("WORKLOAD_WORKSPACE=1");
}
END_TEST

/*
 * The same through a workspace whose first word the producer counts on at
 * zero and leaves so (WORKLOAD_WORKSPACE=2: flagged_ws, as cuBLAS's
 * cooperating GEMM kernels keep flags in theirs): the scratch the replays
 * write it into is zeroed before each, so every candidate is verified (with
 * the scratch poisoned, none was) and every drop is remade to what the job
 * computes without ebb.
 */
START_TEST(recompute_workspace_flags)
{
	workspace_case("WORKLOAD_WORKSPACE=2");
}
END_TEST

/*
 * Activations whose producers read a small buffer from ebb's slabs
 * (WORKLOAD_SMALL=1: a 4 KiB bias the layer allocates, added into its
 * activation): the recording names the bias (with no bytes of its own), so
 * those producers can be launched again; the plan recomputes gaps of the
 * activations, every drop is remade from the bias as it was, and the job
 * computes what it does without ebb.
 */
START_TEST(recompute_reads_a_small_buffer)
{
	const char *path = tmp_file("recomputesmall");
	char *argv[] = { workload_path(0), "recompute", "16", NULL };
	const char *alone_env[] = { "WORKLOAD_SMALL=1", NULL };
	struct run_result alone, r;
	struct trace t;

	run_ebb(argv, alone_env, NULL, &alone);
	expect_ok(&alone);
	run_recompute("WORKLOAD_SMALL=1", path, &r, &t);
	ck_assert_str_ne(checksum_of(alone.out), "");
	ck_assert_str_eq(checksum_of(r.out), checksum_of(alone.out));
	ck_assert_uint_gt(summary(&t, "replay-verified"), 0);
	ck_assert_uint_gt(summary(&t, "recompute-gaps"), 0);
	ck_assert_uint_gt(summary(&t, "recompute-remakes"), 0);
	ck_assert_uint_eq(summary(&t, "recompute-failed"), 0);
	ck_assert_uint_le(summary(&t, "held-peak-bytes"), 32u << 20);
	trace_free(&t);
	run_free(&r);
	run_free(&alone);
	remove(path);
}
END_TEST

/* The recompute scenario with WORKLOAD_PAIRS=1 and extra and extra2 (NULL:
 * none) under the host-ahead set-up, a plan for 0.4 of the peak: the
 * checksum without ebb and under it must be the same. */
static void
run_pairs2(const char *extra, const char *extra2, const char *path, struct run_result *r,
    struct trace *t)
{
	char *argv[] = { workload_path(0), "recompute", "16", NULL };
	const char *alone_env[] = { "WORKLOAD_PAIRS=1", extra, extra2, NULL };
	const char *env[] = { "WORKLOAD_PAIRS=1", "WORKLOAD_LEAD_US=200000",
		"FAKECUDA_LAUNCH_QUEUE_DELAY_US=1500", "EBB_MODE=offload", "EBB_LIMIT=96M",
		"EBB_TARGET=0.4", "EBB_RECOMPUTE=1", "EBB_D2H_GBPS=0.05", "EBB_H2D_GBPS=0.05", extra,
		extra2, NULL };

	run_beside_alone(argv, alone_env, env, path, r, t);
}

/* run_pairs2 with one extra variable. */
static void
run_pairs(const char *extra, const char *path, struct run_result *r, struct trace *t)
{
	run_pairs2(extra, NULL, path, r, t);
}

/*
 * Recompute from a recomputed input (WORKLOAD_PAIRS=1: v is made from u,
 * u from the layer's activation, and the backward reads v, then u): the
 * plan recomputes u and v both, u's replay hoisted to v's
 * (plan-recompute-hoisted), and v's remake, which goes first (dropped after
 * u), remakes u inside it (recompute-nested). Every drop is remade, none fails, and
 * the job computes what it does without ebb; so too when the job departs
 * while such pairs are dropped (WORKLOAD_DEPART=12), which remakes them
 * all, readers first. Which pairs the plan hoists follows the host's
 * times (the fake driver has no CUPTI): a run under load may nest none, so
 * the nesting is asked of up to three runs, and everything else of each.
 */
START_TEST(recompute_from_a_recomputed_input)
{
	const char *path = tmp_file("recomputepairs");
	struct run_result r;
	struct trace t;

	for (int tries = 1;; tries++) {
		run_pairs(NULL, path, &r, &t);
		if ((strtoull(note_value(&t, "plan-recompute-hoisted"), NULL, 10) > 0 &&
		    summary(&t, "recompute-nested") > 0) || tries == 3)
			break;
		ck_assert_uint_eq(summary(&t, "recompute-failed"), 0);
		trace_free(&t);
		run_free(&r);
	}
	ck_assert_uint_gt(strtoull(note_value(&t, "plan-recompute-hoisted"), NULL, 10), 0);
	ck_assert_uint_gt(summary(&t, "recompute-nested"), 0);
	/* the planned iterations' counters (run-*) are theirs, and only theirs */
	uint64_t iters;
	size_t drops = count_in_run(&t, 'O', 4, "drop", &iters);
	ck_assert_uint_gt(iters, 0);
	ck_assert_uint_eq(summary(&t, "run-iterations"), iters);
	ck_assert_uint_gt(drops, 0);
	ck_assert_uint_eq(summary(&t, "run-drops"), drops);
	ck_assert_uint_le(summary(&t, "run-drops"), summary(&t, "recompute-drops"));
	ck_assert_uint_eq(summary(&t, "run-remakes"), count_in_run(&t, 'B', 4, "remake", &iters));
	ck_assert_uint_eq(summary(&t, "run-offloads"), count_in_run(&t, 'O', 4, "plan", &iters) +
	    count_in_run(&t, 'O', 4, "limit", &iters));
	ck_assert_uint_gt(summary(&t, "recompute-drops"), 0);
	ck_assert_uint_eq(summary(&t, "recompute-remakes"), summary(&t, "recompute-drops"));
	ck_assert_uint_eq(summary(&t, "recompute-failed"), 0);
	ck_assert_uint_le(summary(&t, "held-peak-bytes"), 96u << 20);
	trace_free(&t);
	run_free(&r);
	for (int tries = 1;; tries++) {
		run_pairs("WORKLOAD_DEPART=12", path, &r, &t);
		ck_assert_uint_gt(summary(&t, "plan-departures"), 0);
		ck_assert_uint_eq(summary(&t, "recompute-failed"), 0);
		if (summary(&t, "recompute-nested") > 0 || tries == 3)
			break;
		trace_free(&t);
		run_free(&r);
	}
	ck_assert_uint_gt(summary(&t, "recompute-nested"), 0);
	trace_free(&t);
	run_free(&r);
	remove(path);
}
END_TEST

/*
 * The workers release memory without holding ebb's state: with each
 * cuMemUnmap and cuMemSetAccess taking 3 ms (FAKECUDA_VMM_DELAY_US), the
 * job's thread, ahead of the device and issuing while the drop worker
 * unmaps, waits to enter ebb for a small part of the unmaps' time (it
 * waited for most of it when the worker unmapped with the lock held).
 */
START_TEST(release_without_the_lock)
{
	const char *path = tmp_file("releaseunlocked");
	struct run_result r;
	struct trace t;

	run_pairs("FAKECUDA_VMM_DELAY_US=3000", path, &r, &t);
	ck_assert_uint_gt(summary(&t, "run-unmaps"), 0);
	ck_assert_uint_ge(summary(&t, "run-unmap-ns"), summary(&t, "run-unmaps") * 3000000);
	ck_assert_uint_lt(summary(&t, "run-lock-wait-ns"), summary(&t, "run-unmap-ns") / 10);
	ck_assert_uint_eq(summary(&t, "recompute-failed"), 0);
	trace_free(&t);
	run_free(&r);
	remove(path);
}
END_TEST

/*
 * A buffer freed while its remake is still queued on the device (each
 * kernel takes 3 ms, the host ahead): the free does not wait for it (the
 * freed block waits, behind a fence), so the planned iterations' frees take
 * the host little time (they took it 7 ms each when the free waited), and
 * the results are those without ebb.
 */
START_TEST(free_of_a_remade_buffer_does_not_wait)
{
	const char *path = tmp_file("freefence");
	struct run_result r;
	struct trace t;

	run_pairs2("FAKECUDA_KERNEL_DELAY_US=3000", "EBB_SELF_TIME=1", path, &r, &t);
	ck_assert_uint_gt(summary(&t, "run-remakes"), 0);
	ck_assert_uint_gt(summary(&t, "run-self-free-calls"), 0);
	ck_assert_uint_lt(summary(&t, "run-self-free-ns") / summary(&t, "run-self-free-calls"),
	    500000);
	ck_assert_uint_eq(summary(&t, "recompute-failed"), 0);
	trace_free(&t);
	run_free(&r);
	remove(path);
}
END_TEST

/*
 * The job departs while buffers are dropped: in iteration 12 extra
 * launches change, in the middle of the forward, activations 1 and 2, from
 * which activations 2 and 3 are remade. Whichever of those is dropped is
 * remade before those launches run, from its input as it was (the
 * departure stops the plan, which remakes everything first), so the job
 * computes what it computes without ebb.
 */
START_TEST(recompute_departure)
{
	const char *path = tmp_file("recomputedep");
	char *argv[] = { workload_path(0), "recompute", "16", NULL };
	const char *env[] = { "WORKLOAD_DEPART=12", NULL };
	struct run_result alone, plain, r;
	struct trace t;

	run_ebb(argv, NULL, NULL, &plain);
	run_ebb(argv, env, NULL, &alone);
	expect_ok(&alone);
	ck_assert_str_ne(checksum_of(alone.out), checksum_of(plain.out));
	run_recompute("WORKLOAD_DEPART=12", path, &r, &t);
	ck_assert_str_eq(checksum_of(r.out), checksum_of(alone.out));
	ck_assert_uint_gt(summary(&t, "recompute-drops"), 0);
	ck_assert_uint_gt(summary(&t, "recompute-early"), 0);
	ck_assert_uint_eq(summary(&t, "recompute-failed"), 0);
	ck_assert_uint_ge(count_type_field(&t, 'Q', 1, "plan-departed"), 1);
	trace_free(&t);
	run_free(&plain);
	run_free(&alone);
	run_free(&r);
	remove(path);
}
END_TEST

/*
 * A driver that cannot load ebb's hash kernel: said once, no write sets,
 * and the plan is made and runs as without EBB_RECOMPUTE. Without
 * EBB_RECOMPUTE nothing is probed.
 */
START_TEST(write_sets_refused)
{
	const char *path = tmp_file("wsetsno");
	struct run_result r;
	struct trace t;

	/* the workload loads the fake's module first; the second load is ebb's */
	run_writesets("EBB_RECOMPUTE=1", "FAKECUDA_FAIL=cuModuleLoadData:2", path, &r, &t);
	ck_assert_int_eq(count_substr(r.err, "cannot load ebb's hash kernel (cuModuleLoadData: "
	    "error 999;"), 1);
	ck_assert_uint_eq(summary(&t, "plans"), 1);
	ck_assert_uint_eq(summary(&t, "write-set-launches"), 0);
	ck_assert_uint_eq(summary(&t, "probe-hashes"), 0);
	ck_assert_uint_eq(count_type(&t, 'V'), 0);
	trace_free(&t);
	run_free(&r);
	run_writesets("EBB_RECOMPUTE=0", NULL, path, &r, &t);
	ck_assert_uint_eq(summary(&t, "plans"), 1);
	ck_assert_uint_eq(summary(&t, "probe-hashes"), 0);
	ck_assert_ptr_null(strstr(r.err, "write sets (EBB_RECOMPUTE)"));
	trace_free(&t);
	run_free(&r);
	remove(path);
}
END_TEST

/*
 * EBB_LAUNCH_RECORD_BYTES bounds the launch records: past it the launches
 * are counted as not recorded, which is said once, and the plan is made
 * and runs all the same. A bound below the records' index records none,
 * and 0 records none without a word.
 */
START_TEST(launch_records_bounded)
{
	static const struct {
		const char *env;
		int some;	/* some launches fit */
		const char *said;	/* said once; NULL: nothing */
	} cases[] = {
		{ "EBB_LAUNCH_RECORD_BYTES=2K", 1,
		  "launch records: EBB_LAUNCH_RECORD_BYTES=2048 is reached at position " },
		{ "EBB_LAUNCH_RECORD_BYTES=100", 0,
		  "launch records: EBB_LAUNCH_RECORD_BYTES=100 is reached at position 0 of the "
		  "recorded iteration's " },
		{ "EBB_LAUNCH_RECORD_BYTES=0", 0, NULL },
	};
	for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
		const char *path = tmp_file("lrecbound");
		struct run_result r;
		struct trace t;

		run_plan("8", cases[c].env, path, &r, &t);
		ck_assert_uint_eq(summary(&t, "plans"), 1);
		uint64_t recorded = summary(&t, "launch-records");
		uint64_t unrecorded = summary(&t, "launch-records-unrecorded");
		ck_assert_msg(cases[c].some ? recorded > 0 && unrecorded > 0 : recorded == 0,
		    "%s: %llu recorded, %llu not", cases[c].env, (unsigned long long)recorded,
		    (unsigned long long)unrecorded);
		ck_assert_uint_eq(recorded + unrecorded, PLAN_LAUNCHES);
		ck_assert_uint_le(summary(&t, "launch-record-bytes"), cases[c].some ? 2048 : 0);
		ck_assert_int_eq(count_substr(r.err, "launch records: EBB_LAUNCH_RECORD_BYTES="),
		    cases[c].said ? 1 : 0);
		if (cases[c].said != NULL)
			ck_assert_int_eq(count_substr(r.err, cases[c].said), 1);
		trace_free(&t);
		run_free(&r);
		remove(path);
	}
}
END_TEST

/* EBB_PLAN=0: the mover alone, least recently used first; no plan. */
START_TEST(plan_off)
{
	const char *path = tmp_file("plan");
	struct run_result r;
	struct trace t;

	run_plan("12", "EBB_PLAN=0", path, &r, &t);
	ck_assert_uint_eq(summary(&t, "plans"), 0);
	ck_assert_uint_eq(summary(&t, "prefetches"), 0);
	ck_assert_uint_gt(summary(&t, "offloads"), 0);
	trace_free(&t);
	run_free(&r);
	remove(path);
}
END_TEST

START_TEST(offload_threads)
{
	char *argv[] = { workload_path(0), "offload-threads", "4", NULL };
	const char *env[] = { "EBB_MODE=offload", "EBB_LIMIT=64M", "FAKECUDA_KERNEL_DELAY_US=50",
		NULL };
	struct run_result r;
	unsigned long long frees, peak;

	run_ebb(argv, env, NULL, &r);
	expect_ok(&r);
	driver_line(r.out, &frees, &peak);
	ck_assert_uint_eq(frees, 0);
	ck_assert_uint_le(peak, 64ULL << 20);
	run_free(&r);
}
END_TEST

/* The workload's scenario what in offload mode under EBB_LIMIT=limit, with
 * each launch queued by the fake 300 ms after ebb has seen it: it passes. */
static void
run_late_launches(const char *what, const char *limit)
{
	char *argv[] = { workload_path(0), (char *)what, NULL };
	const char *env[] = { "EBB_MODE=offload", limit, "FAKECUDA_LAUNCH_QUEUE_DELAY_US=300000",
		NULL };
	struct run_result r;

	run_ebb(argv, env, NULL, &r);
	expect_ok(&r);
	run_free(&r);
}

/* Two threads on one stream: a buffer whose use is on its way to the driver
 * stays where it is while later operations of the stream reach the driver
 * first; had it moved, the launch would fault on its unmapped memory. */
START_TEST(shared_stream)
{
	run_late_launches("shared-stream", "EBB_LIMIT=12M");
}
END_TEST

/*
 * The same for a use that the buffer's streams no longer name (it was used
 * on four more streams since): the buffer stays while that use is on its way
 * to the driver.
 */
START_TEST(overflow_stream)
{
	run_late_launches("overflow-stream", "EBB_LIMIT=14M");
}
END_TEST

/* A buffer larger than the limit: the driver's out-of-memory error, no crash. */
START_TEST(offload_larger_than_limit)
{
	char *argv[] = { workload_path(0), "toobig", NULL };
	const char *env[] = { "EBB_MODE=offload", "EBB_LIMIT=16M", NULL };
	struct run_result r;

	run_ebb(argv, env, NULL, &r);
	expect_ok(&r);
	ck_assert_ptr_nonnull(strstr(r.out, "out of memory, as expected"));
	ck_assert_ptr_nonnull(strstr(r.err, "larger than EBB_LIMIT"));
	run_free(&r);
}
END_TEST

/* Pinned memory runs out: one message, buffers stay, the next allocation
 * over the limit gets the driver's out-of-memory error; no crash. */
START_TEST(offload_host_exhausted)
{
	char *argv[] = { workload_path(0), "offload", "100", NULL };
	const char *env[] = { "EBB_MODE=offload", "EBB_LIMIT=20M", "EBB_HOST_LIMIT=8M",
		"EBB_VERBOSE=0", NULL };
	struct run_result r;

	run_ebb(argv, env, NULL, &r);
	ck_assert_int_eq(r.status, 1);	/* the workload's own failure, not a signal */
	ck_assert_int_eq(count_substr(r.err, "no pinned host memory"), 1);
	ck_assert_ptr_nonnull(strstr(r.err, "failed: 2"));	/* CUDA_ERROR_OUT_OF_MEMORY */
	run_free(&r);
}
END_TEST

/* cuMemCreate fails: one message, new buffers come from the driver, all is right. */
START_TEST(offload_create_fails)
{
	char *argv[] = { workload_path(0), "offload", "100", NULL };
	const char *env[] = { "EBB_MODE=offload", "FAKECUDA_FAIL=cuMemCreate:3=CUDA_ERROR_UNKNOWN",
		"EBB_VERBOSE=0", NULL };
	struct run_result r;

	run_ebb(argv, env, NULL, &r);
	expect_ok(&r);
	ck_assert_int_eq(count_substr(r.err, "cuMemCreate failed"), 1);
	ck_assert_int_eq(count_substr(r.err, "\n"), 1);
	run_free(&r);
}
END_TEST

/* Memory freed in one size makes room for a restore of another: the restore
 * releases it rather than sending a buffer of its own size to the host to
 * take that buffer's memory (only the first eviction is made). */
START_TEST(offload_room_of_another_size)
{
	char *argv[] = { workload_path(0), "sizes", NULL };
	const char *env[] = { "EBB_MODE=offload", "EBB_LIMIT=12M", "EBB_VERBOSE=1",
		"FAKECUDA_COPY_DELAY_US=20000", NULL };
	struct run_result r;

	run_ebb(argv, env, NULL, &r);
	expect_ok(&r);
	ck_assert_msg(strstr(r.err, "offload: 1 buffers to the host (4.0 MiB), 1 back") != NULL,
	    "%s", r.err);
	run_free(&r);
}
END_TEST

/* Room is made from the memory idle longest: under a limit that holds two
 * of the three sizes a job goes through, a 6 MiB buffer gets the room of the
 * 2 MiB one freed at the iteration's start, not the 4 MiB one the job frees
 * and allocates again in turn. Three handles an iteration (2, 4 and 6 MiB
 * once each); releasing the newest idle memory first made 4.5. */
START_TEST(offload_reclaims_the_longest_idle)
{
	char *argv[] = { workload_path(0), "reclaim", "12", NULL };
	const char *env[] = { "EBB_MODE=offload", "EBB_LIMIT=10M", NULL };
	struct run_result r;

	run_ebb(argv, env, NULL, &r);
	expect_ok(&r);
	const char *at = strstr(r.out, "after warm-up ");
	ck_assert_msg(at != NULL, "%s", r.out);
	long after = strtol(at + strlen("after warm-up "), NULL, 10);
	ck_assert_msg(after <= 3 * 10, "%ld handles created in 10 iterations after warm-up", after);
	run_free(&r);
}
END_TEST

/*
 * A job with a step of its own every 20 iterations (one launch more, as a
 * job that logs every 20 steps has): each departs from the planned
 * iteration, and the job is back in it the iteration after. The plan is
 * parked at each departure and runs again once a whole iteration has
 * matched (a detour, policy/iter.h): one plan made, every departure but the
 * one at the job's end resumed, planning never given up (before: learned
 * again at each departure, and given up at the fifth), EBB_LIMIT held, and
 * the job computes what it does without ebb.
 */
START_TEST(plan_resumes_after_a_detour)
{
	const char *path = tmp_file("detour");
	char *argv[] = { workload_path(0), "plan", "100", NULL };
	const char *alone_env[] = { "WORKLOAD_DETOUR_EVERY=20", NULL };
	const char *env[] = { "WORKLOAD_DETOUR_EVERY=20", "EBB_MODE=offload", "EBB_LIMIT=56M",
		"EBB_VERBOSE=1", NULL };
	struct run_result r;
	struct trace t;

	run_beside_alone(argv, alone_env, env, path, &r, &t);
	uint64_t departed = summary(&t, "plan-departures"), resumed = summary(&t, "plan-resumes");
	ck_assert_uint_eq(summary(&t, "plans"), 1);
	ck_assert_uint_ge(resumed, 4);	/* iterations 19, 39, 59, 79 (and 99) */
	ck_assert_uint_ge(resumed + 1, departed);
	ck_assert_uint_ge(summary(&t, "plan-iterations"), 80);
	ck_assert_uint_le(summary(&t, "held-peak-bytes"), 56ULL << 20);
	ck_assert_ptr_null(strstr(r.err, "stops planning"));
	ck_assert_uint_eq(notes_with(&t, "plan-resumed", NULL), resumed);
	struct run_result rep;
	const char *args[] = { "report", path, NULL };
	ebb_cmd(&rep, args);
	ck_assert_uint_eq(value_of(rep.out, "plans-resumed: "), resumed);
	run_free(&rep);
	trace_free(&t);
	run_free(&r);
	remove(path);
}
END_TEST

/*
 * What the rule of the lifecycle (life.c, lower_due) expects of trace t:
 * while a plan runs, at each iteration start from its third whole
 * iteration's end on, a lowering where a buffer was evicted for room in the
 * iteration that ended and in the one before it (not the plan's first), the
 * arena's chunks holding more than their buffers (plan-eviction-excess
 * notes), twice at most; but where the
 * running plan's target (plan-target-bytes) less that excess would be under
 * its bound (plan-bound-bytes), after any number of lowerings, the arena is
 * turned off instead (*off set),
 * the plan made again without the lowerings where there were any (*raised
 * set), and nothing is lowered from then on. Returns how many lowerings.
 */
static uint64_t
lowerings_expected(const struct trace *t, int *off, int *raised)
{
	uint64_t expected = 0, excess = 0, target = 0, bound = 0;
	int running = 0, done = 0, evicted = 0;

	*off = *raised = 0;
	for (size_t i = 0; i < t->n && !*off; i++) {
		const struct rec *x = &t->r[i];
		const char *key = x->type == 'Q' && x->n >= 3 ? x->f[1] : "";
		/* an iteration start of the running plan: its I record, or, where
		 * the plan departs there to be made lower, the departure's note,
		 * which comes before it */
		int start = (x->type == 'I' && running) || (running &&
		    strcmp(key, "plan-departed") == 0 && strstr(x->f[2], ":kept_buffers_evicted_"));
		if (strcmp(key, "plan-target-bytes") == 0)
			target = strtoull(x->f[2], NULL, 10);
		else if (strcmp(key, "plan-bound-bytes") == 0)
			bound = strtoull(x->f[2], NULL, 10);
		if (strcmp(key, "plan-started") == 0) {
			running = 1;
			done = -1;	/* its own start's I record comes after it */
			excess = 0;
			evicted = 0;
		} else if (start) {
			evicted = ++done >= 2 && excess > 0 ? evicted + 1 : 0;
			if (evicted >= 2 && target < bound + excess) {
				*off = 1;
				*raised = expected > 0;
			} else if (evicted >= 2 && expected < 2) {
				expected++;
				running = 0;	/* it departs, and the next is recorded */
			}
			excess = 0;
		} else if (strcmp(key, "plan-eviction-excess") == 0 && running) {
			uint64_t v = strtoull(x->f[2], NULL, 10);
			excess = v > excess ? v : excess;
		}
		if (strcmp(key, "plan-departed") == 0)
			running = 0;
	}
	return expected;
}

/*
 * Each plan's target in t (plan-target-bytes) is the first's less the
 * lowering in force (plan-target-lowered-bytes, a running total), which a
 * raise takes back whole (plan-target-raised-bytes, of that total).
 * Returns how many targets; *most is the largest total lowered, *raised
 * how many raises.
 */
static size_t
targets_follow_lowerings(const struct trace *t, uint64_t *most, size_t *raised)
{
	uint64_t first = 0, lowered = 0;
	size_t targets = 0;

	*most = 0;
	*raised = 0;
	for (size_t i = 0; i < t->n; i++) {
		if (t->r[i].type != 'Q' || t->r[i].n < 3)
			continue;
		const char *key = t->r[i].f[1];
		uint64_t v = strtoull(t->r[i].f[2], NULL, 10);
		if (strcmp(key, "plan-target-lowered-bytes") == 0) {
			lowered = v;
			*most = v > *most ? v : *most;
		} else if (strcmp(key, "plan-target-raised-bytes") == 0) {
			ck_assert_uint_eq(v, lowered);
			lowered = 0;
			(*raised)++;
		} else if (strcmp(key, "plan-target-bytes") == 0) {
			if (targets++ == 0)
				first = v;
			ck_assert_uint_eq(v, first - lowered);
		}
	}
	return targets;
}

/* The planner's job whose arena chunks hold more than their buffers (the
 * test below): its environment, without and under ebb. */
#define ARENA_EXCESS_JOB "WORKLOAD_SCALE=4", "WORKLOAD_TEMPS=1", "WORKLOAD_SAVED_MIB=2"

/*
 * The arena's chunks hold more than the plan counts: each layer keeps a
 * 2 MiB buffer beside its temporary (WORKLOAD_SAVED_MIB), which pins a
 * chunk of 8 MiB the temporaries leave mostly free. Under 256M the mover
 * evicts buffers the plan keeps for room (plan-eviction-excess notes; how
 * often, and in which iterations, depends on how far the host runs ahead):
 * the plan is made again where the rule says (lowerings_expected), with a
 * target lower by what the chunks held beyond their buffers, the later
 * plans' targets say so, EBB_LIMIT is held, and the job computes what it
 * does without ebb. With EBB_PLAN_MARGIN=0 the plan aims at the limit
 * itself, so the evictions go on after the plan's first iteration and it
 * lowers in every run seen (once or twice, the first at the end of the
 * plan's third or fifth iteration; under ASan too, where the default margin
 * left the host too slow to evict); every run is checked against the rule,
 * and one of up to four must lower.
 */
START_TEST(plan_lowered_for_the_arena)
{
	const char *path = tmp_file("lowered");
	char *argv[] = { workload_path(0), "plan", "40", NULL };
	const char *alone_env[] = { ARENA_EXCESS_JOB, NULL };
	const char *env[] = { ARENA_EXCESS_JOB, "EBB_MODE=offload", "EBB_LIMIT=256M",
		"EBB_VERBOSE=1", "EBB_PLAN_MARGIN=0", NULL };
	struct run_result r;
	struct trace t;
	uint64_t lowerings;
	int off, raised;

	for (int attempt = 0;; attempt++) {
		run_beside_alone(argv, alone_env, env, path, &r, &t);
		ck_assert_uint_gt(summary(&t, "planned-evictions"), 0);
		lowerings = summary(&t, "plan-lowerings");
		ck_assert_uint_eq(lowerings, lowerings_expected(&t, &off, &raised));
		if (lowerings > 0 || attempt == 3)
			break;
		trace_free(&t);
		run_free(&r);
	}
	ck_assert_uint_gt(lowerings, 0);
	/* the link is seldom the limit here (bounds of 124 to 188 MiB against
	 * targets of 230 MiB and more), but where the rule turns the arena off,
	 * the trace says so */
	ck_assert_int_eq(note_value(&t, "arena-off") != NULL, off);
	ck_assert_uint_eq(summary(&t, "plan-raisings"), (uint64_t)raised);
	ck_assert_uint_eq(summary(&t, "plans"), 1 + lowerings + (uint64_t)raised);
	ck_assert_uint_le(summary(&t, "held-peak-bytes"), 256ULL << 20);
	ck_assert_int_eq(strstr(r.err, "bytes lower") != NULL, lowerings > 0);
	/* each later plan aims lower than the first by the total lowered so
	 * far, until a raise takes it back */
	uint64_t most;
	size_t raises;
	size_t targets = targets_follow_lowerings(&t, &most, &raises);
	ck_assert_uint_eq(targets, 1 + lowerings + (uint64_t)raised);
	ck_assert_int_eq(most > 0, lowerings > 0);
	struct run_result rep;
	const char *args[] = { "report", path, NULL };
	ebb_cmd(&rep, args);
	ck_assert_uint_eq(value_of(rep.out, "plans-lowered: "), lowerings);
	run_free(&rep);
	trace_free(&t);
	run_free(&r);
	remove(path);
}
END_TEST

/*
 * The job above with copies at 0.3 GB/s each way, aiming at EBB_LIMIT
 * itself (EBB_PLAN_MARGIN=0): the plan's target is under its lowest peak
 * without stalls, so lowering it by what the arena's chunks hold beyond
 * their buffers would add stalls. Where kept buffers are evicted with such
 * an excess in two iterations in a row, the arena is turned off instead
 * (the arena-off note, under_the_bound, and the exit's arena line says
 * so), nothing is lowered, EBB_LIMIT is held, and the job computes what it
 * does without ebb. (Where
 * a plan was lowered before, the lowering is taken back then,
 * plan-target-raised-bytes: not shown here, as no job of the fake driver
 * is lowered first above its bound and then evicts under it at will.)
 */
START_TEST(arena_off_under_the_bound)
{
	const char *path = tmp_file("underbound");
	char *argv[] = { workload_path(0), "plan", "24", NULL };
	const char *alone_env[] = { ARENA_EXCESS_JOB, NULL };
	const char *env[] = { ARENA_EXCESS_JOB,
		"EBB_MODE=offload", "EBB_LIMIT=256M", "EBB_VERBOSE=1", "EBB_D2H_GBPS=0.3",
		"EBB_H2D_GBPS=0.3", "EBB_PLAN_MARGIN=0", NULL };
	struct run_result r;
	struct trace t;
	int off = 0, raised = 0, under = 0;

	/* The bound comes from the iteration's measured times, which a loaded
	 * CPU stretches (the fake device is a thread): at 0.6 GB/s it fell
	 * under the target in runs beside eight others on two cores, at 0.3
	 * in one of six. Whether kept buffers are evicted with an excess in two
	 * iterations in a row that the rule counts (the plan's second on)
	 * depends on how far the host runs ahead; with no EBB_PLAN_MARGIN they
	 * are, in every run seen here, and less often with the default. An
	 * attempt counts where both hold; whatever the attempt, the rule's
	 * outcome must match its trace. */
	for (int attempt = 0;; attempt++) {
		run_beside_alone(argv, alone_env, env, path, &r, &t);
		under = strtoull(note_value(&t, "plan-bound-bytes"), NULL, 10) >
		    strtoull(note_value(&t, "plan-target-bytes"), NULL, 10);
		ck_assert_uint_eq(summary(&t, "plan-lowerings"),
		    lowerings_expected(&t, &off, &raised));
		ck_assert_int_eq(note_value(&t, "arena-off") != NULL, off);
		if ((under && off) || attempt == 3)
			break;
		trace_free(&t);
		run_free(&r);
	}
	ck_assert_msg(under, "the plan's bound was at or under its target in every attempt");
	ck_assert_uint_eq(summary(&t, "plan-lowerings"), 0);
	ck_assert_int_eq(off, 1);
	ck_assert_int_eq(raised, 0);	/* nothing was lowered to take back */
	ck_assert_uint_eq(summary(&t, "plan-raisings"), 0);
	ck_assert_ptr_null(note_value(&t, "plan-target-raised-bytes"));
	ck_assert_pstr_eq(note_value(&t, "arena-off"), "under_the_bound");
	ck_assert_uint_eq(summary(&t, "arena-off"), 1);
	ck_assert_ptr_nonnull(strstr(r.err, "arena: off from now on (under the bound)"));
	ck_assert_ptr_nonnull(strstr(r.err, "; turned off (under the bound)"));
	ck_assert_ptr_null(strstr(r.err, "bytes lower"));
	ck_assert_uint_le(summary(&t, "held-peak-bytes"), 256ULL << 20);
	trace_free(&t);
	run_free(&r);
	remove(path);
}
END_TEST

/*
 * A lowering holds for the iteration it was measured in. The lowering job
 * with an extra launch every 6 iterations (WORKLOAD_DETOUR_EVERY): its
 * plan of one iteration is lowered, then the 6 iterations are learned as
 * the iteration, and that recording's plan aims at the target again
 * (plan-target-raised-bytes, of what was lowered) before it is lowered for
 * itself. Every plan's target is the first's less the lowerings in force.
 */
START_TEST(lowering_of_its_iteration)
{
	const char *path = tmp_file("lowperiod");
	char *argv[] = { workload_path(0), "plan", "30", NULL };
	const char *alone_env[] = { ARENA_EXCESS_JOB, "WORKLOAD_DETOUR_EVERY=6", NULL };
	const char *env[] = { ARENA_EXCESS_JOB, "WORKLOAD_DETOUR_EVERY=6", "EBB_MODE=offload",
		"EBB_LIMIT=256M", "EBB_PLAN_MARGIN=0", NULL };
	struct run_result r;
	struct trace t;
	size_t raised = 0;

	/* whether the first iteration's plan is lowered before the longer one
	 * is learned depends on the timing: with EBB_PLAN_MARGIN=0 (the plan
	 * at the limit, so that its evictions go on) it was in every run seen
	 * here, under ASan too */
	for (int attempt = 0; attempt < 5 && raised == 0; attempt++) {
		run_beside_alone(argv, alone_env, env, path, &r, &t);
		ck_assert_uint_le(summary(&t, "held-peak-bytes"), 256ULL << 20);
		uint64_t most;
		targets_follow_lowerings(&t, &most, &raised);
		trace_free(&t);
		run_free(&r);
	}
	ck_assert_uint_gt(raised, 0);
	remove(path);
}
END_TEST

/*
 * A freed block serves an allocation up to EBB_REUSE_SLACK smaller than
 * itself. In the reclaim job (sizes 2, 4, 6, 4, 6, ... MiB under 10M, each
 * freed and passed before the next), the 6 MiB block serves the 4 MiB
 * buffers with 0.5, so no handle is made after warm-up (3 an iteration with
 * 0, the test above). The planner's job, with temporaries of 6 to 24 MiB
 * beside activations of 8 to 24 MiB under 320M, whose buffers so held in
 * larger memory move, computes what it does without ebb, under the limit.
 * (How many handles that saves there depends on the host's timing: 86
 * against 116 to 145 alone, the same under a loaded machine's.)
 */
START_TEST(offload_reuses_a_larger_freed_block)
{
	char *argv[] = { workload_path(0), "reclaim", "12", NULL };
	const char *env[] = { "EBB_MODE=offload", "EBB_LIMIT=10M", "EBB_REUSE_SLACK=0.5", NULL };
	struct run_result r;

	run_ebb(argv, env, NULL, &r);
	expect_ok(&r);
	const char *at = strstr(r.out, "after warm-up ");
	ck_assert_msg(at != NULL, "%s", r.out);
	ck_assert_int_eq(strtol(at + strlen("after warm-up "), NULL, 10), 0);
	run_free(&r);

	const char *path = tmp_file("slack");
	char *plan[] = { workload_path(0), "plan", "20", NULL };
	const char *alone_env[] = { "WORKLOAD_SCALE=4", "WORKLOAD_TEMPS=1", "WORKLOAD_TEMP_SCALE=3",
		NULL };
	const char *penv[] = { "WORKLOAD_SCALE=4", "WORKLOAD_TEMPS=1", "WORKLOAD_TEMP_SCALE=3",
		"EBB_MODE=offload", "EBB_LIMIT=320M", "EBB_REUSE_SLACK=0.5", NULL };
	struct trace t;
	run_beside_alone(plan, alone_env, penv, path, &r, &t);
	ck_assert_uint_gt(summary(&t, "plan-iterations"), 8);
	ck_assert_uint_gt(summary(&t, "offloads"), 0);
	ck_assert_uint_le(summary(&t, "held-peak-bytes"), 320ULL << 20);
	trace_free(&t);
	run_free(&r);
	remove(path);
}
END_TEST

/*
 * The buffers a running plan keeps resident come from the arena
 * (WORKLOAD_TEMPS=1: each layer's temporary, forward and backward, 2 to
 * 8 MiB, under a limit whose arena chunks are 8 MiB): every temporary of
 * every planned iteration is served from shared chunks, which are mapped
 * far less often than buffers are served, and the job computes what it does
 * without ebb. With EBB_ARENA=0 none is.
 */
START_TEST(arena_serves_what_the_plan_keeps)
{
	const char *path = tmp_file("arena");
	char *argv[] = { workload_path(0), "plan", "20", NULL };
	const char *alone_env[] = { "WORKLOAD_SCALE=4", "WORKLOAD_TEMPS=1", NULL };
	const char *env[] = { "WORKLOAD_SCALE=4", "WORKLOAD_TEMPS=1", "EBB_MODE=offload",
		"EBB_LIMIT=256M", NULL, NULL };
	struct run_result r;
	struct trace t;

	run_beside_alone(argv, alone_env, env, path, &r, &t);
	uint64_t iters = summary(&t, "run-iterations"), served = summary(&t, "arena-allocations");
	ck_assert_uint_gt(iters, 0);
	ck_assert_msg(served >= 24 * iters, "%llu buffers from the arena in %llu iterations",
	    (unsigned long long)served, (unsigned long long)iters);
	ck_assert_uint_lt(8 * summary(&t, "arena-chunks-mapped"), served);
	ck_assert_uint_le(summary(&t, "arena-peak-bytes"), 256u << 20);
	trace_free(&t);
	run_free(&r);
	env[4] = "EBB_ARENA=0";
	run_beside_alone(argv, alone_env, env, path, &r, &t);
	ck_assert_uint_eq(summary(&t, "arena-allocations"), 0);
	trace_free(&t);
	run_free(&r);
	remove(path);
}
END_TEST

/*
 * A live buffer in the arena pins its whole chunk. From iteration 12 on the
 * job also holds small buffers it did not hold while ebb learned it
 * (WORKLOAD_HOARD_MIB of 1 MiB, from the middle of the forward pass, while
 * that layer's temporary lives in the arena, to the end of the backward):
 * - 140 MiB: moving the plan's buffers makes the room: the arena stays on,
 *   and EBB_LIMIT is held;
 * - 200 MiB: nothing more can move, and only what the arena's chunks pin
 *   stands between the job and its memory: ebb holds the buffer over
 *   EBB_LIMIT, by no more than the arena holds, rather than fail the job
 *   (before, the allocation failed with out of memory and the job ended),
 *   turns the arena off (said, noted, in the summary), and says at exit that
 *   EBB_LIMIT was not held, and why.
 * Either way the job computes what it does without ebb.
 */
START_TEST(arena_off_when_room_falls_short)
{
	const char *path = tmp_file("arenashort");
	char *argv[] = { workload_path(0), "plan", "20", NULL };
	const char *alone_env[] = { "WORKLOAD_SCALE=4", "WORKLOAD_TEMPS=1", "WORKLOAD_HOARD_AT=12",
		"WORKLOAD_HOARD_MIB=140", NULL };
	const char *env[] = { "WORKLOAD_SCALE=4", "WORKLOAD_TEMPS=1", "WORKLOAD_HOARD_AT=12",
		"WORKLOAD_HOARD_MIB=140", "EBB_MODE=offload", "EBB_LIMIT=256M", NULL };
	struct run_result r;
	struct trace t;

	run_beside_alone(argv, alone_env, env, path, &r, &t);
	ck_assert_ptr_null(note_value(&t, "arena-off"));
	ck_assert_uint_eq(summary(&t, "arena-off"), 0);
	ck_assert_uint_gt(summary(&t, "arena-allocations"), 0);
	ck_assert_uint_eq(summary(&t, "arena-over-limit-allocations"), 0);
	ck_assert_uint_eq(summary(&t, "refusals"), 0);
	ck_assert_uint_le(summary(&t, "held-peak-bytes"), 256ULL << 20);
	ck_assert_int_eq(count_substr(r.err, "EBB_LIMIT was not held"), 0);
	trace_free(&t);
	run_free(&r);

	alone_env[3] = env[3] = "WORKLOAD_HOARD_MIB=200";
	run_beside_alone(argv, alone_env, env, path, &r, &t);
	uint64_t over = summary(&t, "arena-over-limit-bytes");
	ck_assert_uint_gt(summary(&t, "arena-over-limit-allocations"), 0);
	ck_assert_uint_gt(over, 0);
	ck_assert_uint_gt(summary(&t, "held-peak-bytes"), 256ULL << 20);
	ck_assert_uint_le(summary(&t, "held-peak-bytes"), (256ULL << 20) + over);
	ck_assert_uint_eq(summary(&t, "refusals"), 0);
	ck_assert_pstr_eq(note_value(&t, "arena-off"), "no_room");
	ck_assert_uint_eq(summary(&t, "arena-off"), 1);
	ck_assert_int_eq(count_substr(r.err, "arena: off from now on (no room)"), 1);
	ck_assert_int_eq(count_substr(r.err, "ebb holds the buffer over EBB_LIMIT"), 1);
	ck_assert_int_eq(count_substr(r.err, "EBB_LIMIT was not held in this process"), 1);
	trace_free(&t);
	run_free(&r);
	remove(path);
}
END_TEST

/* An offload's memory is released when its copy lands, not after restores
 * queued before it (each copy takes 300 ms: the allocation that sent d to
 * the host waits for d's copy alone, not also for b's behind a's). */
START_TEST(offload_lands_past_restores)
{
	const char *path = tmp_file("queues");
	char *argv[] = { workload_path(0), "queues", NULL };
	const char *env[] = { "EBB_MODE=offload", "EBB_LIMIT=16M",
		"FAKECUDA_COPY_DELAY_US=300000", NULL };
	struct run_result r;
	struct trace t;

	run_ebb(argv, env, path, &r);
	expect_ok(&r);
	trace_load(path, &t);
	/* buffers a, b, d, e, f, g, c are 1 to 7: the waits for c's room are the
	 * H records after d's offload (O, buffer 3) up to c's A record */
	uint64_t waited = 0;
	int after_d = 0, seen_c = 0;
	for (size_t i = 0; i < t.n && !seen_c; i++) {
		const struct rec *x = &t.r[i];
		if (x->type == 'O' && num(x, 2) == 3)
			after_d = 1;
		else if (x->type == 'H' && after_d)
			waited += num(x, 2);
		else if (x->type == 'A' && num(x, 1) == 7)
			seen_c = 1;
	}
	ck_assert(after_d && seen_c);
	ck_assert_msg(waited >= 250000000ULL && waited < 450000000ULL,
	    "waited %llu ns for d's copy", (unsigned long long)waited);
	trace_free(&t);
	remove(path);
	run_free(&r);
}
END_TEST

/* Room from the job's frees: the host waits for the device to pass the
 * oldest free's last use (a 100 ms kernel), marked when it was freed, not
 * for the newest's (300 ms more) or for all the work queued. */
START_TEST(offload_frees_oldest_first)
{
	char *argv[] = { workload_path(0), "frees", NULL };
	const char *env[] = { "EBB_MODE=offload", "EBB_LIMIT=16M", "EBB_MIN_OFFLOAD_BYTES=64M",
		NULL };
	struct run_result r;

	run_ebb(argv, env, NULL, &r);
	expect_ok(&r);
	const char *at = strstr(r.out, "allocation took ");
	ck_assert_msg(at != NULL, "%s", r.out);
	double ms = strtod(at + strlen("allocation took "), NULL);
	ck_assert_msg(ms >= 50 && ms < 250, "the allocation took %.0f ms", ms);
	run_free(&r);
}
END_TEST

/* A buffer freed while a cancelled copy of it to the host is still queued
 * (behind a 400 ms kernel, run 300 ms late): its memory stays mapped until
 * that copy has run, though the device passes the free long before and an
 * allocation then needs the room. Before, the copy read unmapped memory and
 * the fake driver aborted. */
START_TEST(offload_free_after_cancel)
{
	char *argv[] = { workload_path(0), "cancelfree", NULL };
	const char *env[] = { "EBB_MODE=offload", "EBB_LIMIT=12M", "EBB_PLAN=0",
		"EBB_D2H_GBPS=50", "EBB_H2D_GBPS=50", "FAKECUDA_COPY_DELAY_US=300000", NULL };
	const char *path = tmp_file("cancelfree");
	struct run_result r;
	struct trace t;

	run_ebb(argv, env, path, &r);
	expect_ok(&r);
	trace_load(path, &t);
	size_t cancels = 0, landings = 0;
	for (size_t i = 0; i < t.n; i++) {
		if (t.r[i].type == 'B' && strcmp(t.r[i].f[4], "cancel") == 0)
			cancels++;
		if (t.r[i].type == 'H' && strcmp(t.r[i].f[3], "landing") == 0)
			landings++;
	}
	ck_assert_msg(cancels == 1 && landings == 1, "%zu cancels, %zu waits at the free",
	    cancels, landings);
	trace_free(&t);
	run_free(&r);
	remove(path);
}
END_TEST

/* The other scenarios still run right with the mover serving their memory. */
START_TEST(offload_other_scenarios)
{
	const char *what[] = { "basic", "fork", "fork-exit", "capture", "nccl", "threads", NULL };
	for (int i = 0; what[i]; i++) {
		char *argv[] = { workload_path(0), (char *)what[i], NULL };
		const char *env[] = { "EBB_MODE=offload", "EBB_LIMIT=32M", NULL };
		struct run_result r;
		run_ebb(argv, env, NULL, &r);
		ck_assert_msg(r.status == 0 && strstr(r.out, "ok"), "%s under offload: status %d\n%s\n%s",
		    what[i], r.status, r.out, r.err);
		run_free(&r);
	}
}
END_TEST

/* ebb run --limit turns offloading on. */
START_TEST(ebb_run_limit)
{
	char *argv[] = { (char *)build_path("utils/ebb"), "run", "--limit", "24M", "--",
		workload_path(0), "offload", "60", NULL };
	const char *env[] = { "EBB_VERBOSE=1", NULL };
	struct run_result r;

	run_ebb(argv, env, NULL, &r);
	expect_ok(&r);
	ck_assert_ptr_nonnull(strstr(r.err, "EBB_LIMIT=25165824"));
	char *bad[] = { (char *)build_path("utils/ebb"), "run", "--limit", "lots", "--",
		workload_path(0), NULL };
	run_free(&r);
	run_ebb(bad, NULL, NULL, &r);
	ck_assert_int_eq(r.status, 2);
	ck_assert_ptr_nonnull(strstr(r.err, "--limit 'lots'"));
	run_free(&r);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("integration");
	TCase *tc = tcase_create("fake driver");

	tcase_set_timeout(tc, 120);
	add_test(tc, basic_via_procaddress_v2);
	add_test(tc, basic_via_procaddress_v1);
	add_test(tc, basic_via_procaddress_ptsz);
	add_test(tc, basic_via_dlsym);
	add_test(tc, basic_via_elf_symbols);
	add_test(tc, ptsz_streams);
	add_test(tc, mode_off_passes_through);
	add_test(tc, iterations_found);
	add_test(tc, self_time_counts_every_call);
	add_test(tc, iteration_kernel_marks);
	add_test(tc, threads);
	add_test(tc, fork_child);
	add_test(tc, dlsym_next_beside_a_dlopen_wrapper);
	add_test(tc, fork_child_exits_in_offload);
	add_test(tc, vmm_mappings_seen);
	add_test(tc, default_pool_served);
	add_test(tc, pointer_query_of_offloaded_buffer);
	add_test(tc, pointer_query_while_offloading);
	add_test(tc, graph_capture);
	add_test(tc, graph_capture_limit);
	add_test(tc, graph_memory_nodes_within_the_limit);
	add_test(tc, graph_pool_counted);
	add_test(tc, capture_past_driver_share);
	add_test(tc, capture_joined_at_its_end);
	add_test(tc, event_calls_bounded);
	add_test(tc, nccl_calls);
	add_test(tc, nccl_comm_made_again);
	add_test(tc, cupti_lifecycle);
	add_test(tc, cupti_hold_ends_without_a_departure);
	add_test(tc, plan_after_the_hold_has_learned_times);
	add_test(tc, unresolved_launch);
	add_test(tc, bad_value_one_line);
	add_test(tc, strict_stops);
	add_test(tc, cupti_missing_said_once);
	add_test(tc, offload_data_survives_1);
	add_test(tc, offload_data_survives_2);
	add_test(tc, offload_data_survives_3);
	add_test(tc, offload_threads);
	add_test(tc, shared_stream);
	add_test(tc, overflow_stream);
	add_test(tc, plan_moves_ahead_of_use);
	add_test(tc, limit_counts_driver_memory);
	add_test(tc, plan_below_its_bound_waits);
	add_test(tc, plan_margin);
	add_test(tc, plan_out_of_time);
	add_test(tc, plan_departs_and_relearns);
	add_test(tc, plan_accumulation_learns_the_whole_iteration);
	add_test(tc, launch_records_of_the_iteration);
	add_test(tc, launch_records_bounded);
	add_test(tc, write_sets_measured);
	add_test(tc, write_sets_refused);
	add_test(tc, replay_verify_refuses);
	add_test(tc, write_sets_chance_pointer);
	add_test(tc, write_sets_data_between_buffers);
	add_test(tc, write_sets_optional_output);
	add_test(tc, write_sets_chance_pointer_elsewhere);
	add_test(tc, recompute_runs);
	add_test(tc, recompute_departure);
	add_test(tc, recompute_host_ahead);
	add_test(tc, recompute_costed_by_the_running_plan);
	add_test(tc, recompute_workspace);
	add_test(tc, recompute_workspace_flags);
	add_test(tc, recompute_from_a_recomputed_input);
	add_test(tc, release_without_the_lock);
	add_test(tc, host_pace_leaves_ebb_out);
	add_test(tc, host_pace_leaves_cupti_out);
	add_test(tc, host_pace_leaves_the_wait_out);
	add_test(tc, free_of_a_remade_buffer_does_not_wait);
	add_test(tc, recompute_reads_a_small_buffer);
	add_test(tc, plan_off);
	add_test(tc, offload_larger_than_limit);
	add_test(tc, offload_host_exhausted);
	add_test(tc, offload_create_fails);
	add_test(tc, offload_room_of_another_size);
	add_test(tc, offload_reclaims_the_longest_idle);
	add_test(tc, offload_reuses_a_larger_freed_block);
	add_test(tc, plan_resumes_after_a_detour);
	add_test(tc, plan_lowered_for_the_arena);
	add_test(tc, arena_off_under_the_bound);
	add_test(tc, lowering_of_its_iteration);
	add_test(tc, arena_serves_what_the_plan_keeps);
	add_test(tc, arena_off_when_room_falls_short);
	add_test(tc, offload_lands_past_restores);
	add_test(tc, offload_frees_oldest_first);
	add_test(tc, offload_free_after_cancel);
	add_test(tc, offload_other_scenarios);
	add_test(tc, ebb_run_limit);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
