/*
 * check_ebb_plan.c: `ebb plan` on small hand-written traces whose answer is
 * known.
 *
 * The trace: three iteration starts of 6 operations (seq 1, 7, 13), the
 * third cut short, so iteration 2 (seq 7 to 12) is the one planned. Each
 * operation runs 10 ms on the GPU. Buffer 1 (1 GiB) lives throughout and
 * is used by the first and last operation of each iteration; an
 * activation of 1 GiB (buffers 2 and 3) is allocated after the second
 * operation, used by the third and fourth, and freed. The peak is 2 GiB.
 * With a fast link, buffer 1 is offloaded after operation 7 and back before
 * operation 12: the peak falls to 1 GiB. On a slow link nothing can move.
 * G and I records come last, as the library writes them.
 */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "trace_format.h"

static const char body[] =
	"K 1 1 ok kernel\n"
	"A 100 1 0x7f0000000000 1073741824 0x1 async 0x0\n"
	"L 200 1 0x1 1 1 1\n"
	"L 300 2 0x1 1 0\n"
	"A 310 2 0x7f0040000000 1073741824 0x1 async 0x0\n"
	"L 400 3 0x1 1 1 2\n"
	"L 500 4 0x1 1 1 2\n"
	"F 510 2 0x1 async\n"
	"L 600 5 0x1 1 0\n"
	"L 700 6 0x1 1 1 1\n"
	"L 800 7 0x1 1 1 1\n"
	"L 900 8 0x1 1 0\n"
	"A 910 3 0x7f0040000000 1073741824 0x1 async 0x0\n"
	"L 1000 9 0x1 1 1 3\n"
	"L 1100 10 0x1 1 1 3\n"
	"F 1110 3 0x1 async\n"
	"L 1200 11 0x1 1 0\n"
	"L 1300 12 0x1 1 1 1\n"
	"L 1400 13 0x1 1 1 1\n"
	"I 1410 1 1 6\n"
	"I 1420 2 7 6\n"
	"I 1430 3 13 6\n"
	"G 1 0 10000000\n"
	"G 2 10000000 20000000\n"
	"G 3 20000000 30000000\n"
	"G 4 30000000 40000000\n"
	"G 5 40000000 50000000\n"
	"G 6 50000000 60000000\n"
	"G 7 60000000 70000000\n"
	"G 8 70000000 80000000\n"
	"G 9 80000000 90000000\n"
	"G 10 90000000 100000000\n"
	"G 11 100000000 110000000\n"
	"G 12 110000000 120000000\n"
	"Q 1500 cupti-detached exit\n";

/*
 * Write a trace: the header as src/common/trace.c writes it, then body without
 * the lines whose type letter is in drop, then extra. Returns its path.
 */
static const char *
write_body(int version, const char *text, const char *drop, const char *extra)
{
	const char *path = tmp_file("plan");
	FILE *f = fopen(path, "w");

	ck_assert_ptr_nonnull(f);
	fprintf(f, "%s %d ebb=%s pid=%d mode=observe epoch=%lld.%09ld\n", EBB_TRACE_MAGIC,
	    version, PACKAGE_VERSION, 4711, 1795952310LL, 511351266L);
	for (const char *p = text; *p;) {
		const char *nl = strchr(p, '\n');
		size_t len = (size_t)(nl - p) + 1;
		if (strchr(drop, *p) == NULL)
			fwrite(p, 1, len, f);
		p += len;
	}
	fputs(extra, f);
	ck_assert_int_eq(fclose(f), 0);
	return path;
}

static const char *
write_trace(const char *drop, const char *extra)
{
	return write_body(EBB_TRACE_VERSION, body, drop, extra);
}

/* Run ebb plan on path with up to 12 more arguments (NULL-terminated). */
static void
plan(struct run_result *r, const char *path, const char *const *args)
{
	char *argv[16] = { (char *)build_path("utils/ebb"), "plan", (char *)path };
	int n = 3;

	for (int i = 0; args[i]; i++) {
		ck_assert_int_lt(n, 15);
		argv[n++] = (char *)args[i];
	}
	argv[n] = NULL;
	run_prog(argv, NULL, r);
}

/* One line of the table. */
struct row {
	double target, peak;
	char met[8];
	unsigned moves;
	double to_host, back, step, stall, host, ratio;
	double least;		/* the least stall of any plan (the floor's) */
};

/* Row i (from 0) of the table in out; returns 0, or -1 when there is none. */
static int
table_row(const char *out, int i, struct row *w)
{
	const char *p = strstr(out, "target GiB");

	if (p == NULL)
		return -1;
	for (int k = 0; k <= i; k++) {
		p = strchr(p, '\n');
		if (p == NULL || p[1] == '\0' || p[1] == '\n')
			return -1;
		p++;
	}
	return sscanf(p, "%lf %lf %7s %u %lf %lf %lf %lf %lf %lf %lf", &w->target, &w->peak, w->met,
	    &w->moves, &w->to_host, &w->back, &w->step, &w->stall, &w->host,
	    &w->ratio, &w->least) == 11 ? 0 : -1;
}

/* The number after "key: " in out, in GiB. */
static double
gib_after(const char *out, const char *key)
{
	const char *p = strstr(out, key);
	double v = -1;

	ck_assert_msg(p != NULL, "no '%s' in:\n%s", key, out);
	ck_assert_int_eq(sscanf(p + strlen(key), "%lf", &v), 1);
	return v;
}

START_TEST(fast_link_meets_one_gib_with_one_move)
{
	static const char *const args[] = { "--target", "1G", "--d2h", "1000", "--h2d", "1000",
		"--moves", NULL };
	struct run_result r;
	struct row w;

	plan(&r, write_trace("", ""), args);
	ck_assert_msg(r.status == 0, "status %d: %s", r.status, r.err);
	ck_assert_ptr_nonnull(strstr(r.out, "iteration: 2, from operation 7, 6 operations\n"));
	ck_assert_ptr_nonnull(strstr(r.out, "time source: cupti"));
	ck_assert_ptr_nonnull(strstr(r.out, "gpu time per iteration: 0.060000 s\n"));
	ck_assert_ptr_nonnull(strstr(r.out, "buffers: 2, movable: 2"));
	ck_assert_double_eq_tol(gib_after(r.out, "learned peak: "), 2.0, 1e-9);
	ck_assert_double_eq_tol(gib_after(r.out, "bound: "), 1.0, 1e-9);
	/* the planner reaches the floor */
	ck_assert_double_eq_tol(gib_after(r.out, "floor: "), 1.0, 1e-9);
	ck_assert_ptr_null(strstr(r.out, "assumed"));
	ck_assert_int_eq(table_row(r.out, 0, &w), 0);
	ck_assert_double_eq_tol(w.target, 1.0, 1e-9);
	ck_assert_double_eq_tol(w.peak, 1.0, 1e-9);
	ck_assert_str_eq(w.met, "yes");
	ck_assert_uint_eq(w.moves, 1);
	ck_assert_double_eq_tol(w.to_host, 1.0, 1e-9);
	ck_assert_double_eq_tol(w.back, 1.0, 1e-9);
	ck_assert_double_eq_tol(w.stall, 0, 1e-9);
	/* the host issues each operation 100 ns after the last: far ahead */
	ck_assert_ptr_nonnull(strstr(r.out, "with nothing moved the device waits 0.000000 s"));
	ck_assert_ptr_nonnull(strstr(r.out, "0 us to the host, 0 us back (not in the trace"));
	ck_assert_double_eq_tol(w.host, 0, 1e-9);
	ck_assert_double_eq_tol(w.ratio, 1.0, 1e-9);
	ck_assert_int_eq(table_row(r.out, 1, &w), -1);
	/* the move: buffer 1, out after operation 7, back after 10 for 12 */
	const char *m = strstr(r.out, "moves at target 1.00 GiB:\n");
	ck_assert_ptr_nonnull(m);
	m = strchr(strchr(m, '\n') + 1, '\n') + 1;
	unsigned long long bid, after, at, use;
	char key[32], wrap[8];
	double mib;
	ck_assert_int_eq(sscanf(m, "%llu %31s %lf %llu %llu %llu %7s", &bid, key, &mib, &after,
	    &at, &use, wrap), 7);
	ck_assert_uint_eq(bid, 1);
	ck_assert_str_eq(key, "1");
	ck_assert_double_eq_tol(mib, 1024, 1e-9);
	ck_assert_uint_eq(after, 7);
	ck_assert_uint_eq(at, 10);
	ck_assert_uint_eq(use, 12);
	ck_assert_str_eq(wrap, "no");
	run_free(&r);
}
END_TEST

/*
 * The same plan, with each move costing the host 25 ms: the offload after
 * operation 7 holds the host until the device has been idle for 15 ms; the
 * restore after 10 is issued while the host is still ahead.
 */
START_TEST(moves_cost_the_host_time)
{
	static const char *const args[] = { "-t", "1G", "--d2h", "1000", "--h2d", "1000",
		"--move-cost", "25000,25000", NULL };
	struct run_result r;
	struct row w;

	plan(&r, write_trace("", ""), args);
	ck_assert_msg(r.status == 0, "status %d: %s", r.status, r.err);
	ck_assert_ptr_nonnull(strstr(r.out, "25000 us to the host, 25000 us back (given)"));
	ck_assert_int_eq(table_row(r.out, 0, &w), 0);
	ck_assert_uint_eq(w.moves, 1);
	ck_assert_double_eq_tol(w.host, 0.015, 1e-6);
	ck_assert_double_eq_tol(w.step, 0.075, 1e-6);
	ck_assert_double_eq_tol(w.ratio, 1.25, 1e-4);
	run_free(&r);

	static const char *const bad[] = { "-t", "1G", "--move-cost", "25000", NULL };
	plan(&r, write_trace("", ""), bad);
	ck_assert_int_eq(r.status, 2);
	ck_assert_ptr_nonnull(strstr(r.err, "--move-cost '25000' is not two numbers"));
	run_free(&r);
}
END_TEST

START_TEST(slow_link_moves_nothing_and_the_bound_is_the_peak)
{
	static const char *const args[] = { "-t", "1G", "--d2h", "0.01", "--h2d", "0.01", NULL };
	struct run_result r;
	struct row w;

	plan(&r, write_trace("", ""), args);
	ck_assert_msg(r.status == 0, "status %d: %s", r.status, r.err);
	ck_assert_double_eq_tol(gib_after(r.out, "learned peak: "), 2.0, 1e-9);
	ck_assert_double_eq_tol(gib_after(r.out, "bound: "), 2.0, 1e-9);
	/* nothing can move, with a stall of 5% or without */
	ck_assert_double_eq_tol(gib_after(r.out, "floor: "), 2.0, 1e-9);
	ck_assert_double_eq_tol(gib_after(r.out, "GiB with no stall (at operation 9), "), 2.0, 1e-9);
	ck_assert_int_eq(table_row(r.out, 0, &w), 0);
	ck_assert_double_eq_tol(w.peak, 2.0, 1e-9);
	ck_assert_str_eq(w.met, "no");
	ck_assert_uint_eq(w.moves, 0);
	ck_assert_double_eq_tol(w.step, 0.06, 1e-9);
	run_free(&r);
}
END_TEST

/*
 * At 30 GB/s a GiB takes 36 ms each way, and buffer 1's gap (from operation
 * 7 to 12) is 50 ms, its peak (operations 9 and 10) 10 ms after its last
 * use: the 1 GiB target is missed without stalls, met with them (the device
 * waits for the copy at the peak, and for the copy back at its use); the
 * 2 GiB one needs no move, and gets no stall with --allow-stall.
 */
START_TEST(allow_stall_plans_under_the_bound)
{
	static const char *const args[] = { "-t", "2G", "-t", "1G", "--d2h", "30", "--h2d", "30",
		NULL };
	static const char *const stall_args[] = { "-t", "2G", "-t", "1G", "--d2h", "30", "--h2d",
		"30", "--allow-stall", NULL };
	struct run_result r;
	struct row w;

	plan(&r, write_trace("", ""), args);
	ck_assert_msg(r.status == 0, "status %d: %s", r.status, r.err);
	ck_assert_int_eq(table_row(r.out, 1, &w), 0);
	ck_assert_str_eq(w.met, "no");
	ck_assert_double_eq_tol(w.stall, 0, 1e-9);
	run_free(&r);

	plan(&r, write_trace("", ""), stall_args);
	ck_assert_msg(r.status == 0, "status %d: %s", r.status, r.err);
	ck_assert_int_eq(table_row(r.out, 0, &w), 0);
	ck_assert_str_eq(w.met, "yes");
	ck_assert_uint_eq(w.moves, 0);
	ck_assert_double_eq_tol(w.stall, 0, 1e-9);
	ck_assert_double_eq_tol(w.least, 0, 1e-9);
	ck_assert_int_eq(table_row(r.out, 1, &w), 0);
	ck_assert_str_eq(w.met, "yes");
	ck_assert_double_eq_tol(w.peak, 1.0, 1e-9);
	ck_assert(w.stall > 0);
	ck_assert_double_eq_tol(w.step, 0.06 + w.stall, 1e-6);
	/* no plan does it with less stall than the floor's, and this one has
	 * at least that: the copy to the host needs 26 ms more than the 10 ms
	 * from the use to the peak */
	ck_assert(w.least > 0.02 && w.least <= w.stall + 1e-6);
	run_free(&r);
}
END_TEST

START_TEST(default_fractions_and_assumed_bandwidth)
{
	static const char *const args[] = { NULL };
	struct run_result r;
	struct row w;

	plan(&r, write_trace("", ""), args);
	ck_assert_msg(r.status == 0, "status %d: %s", r.status, r.err);
	/* 50 GB/s: a GiB takes 21 ms each way, more than the gap of 40 ms allows */
	ck_assert_ptr_nonnull(strstr(r.out, "50.00 GB/s (assumed)"));
	ck_assert_ptr_nonnull(strstr(r.out, "--d2h GBPS --h2d GBPS"));
	static const double f[] = { 0.9, 0.8, 0.7, 0.6, 0.5, 0.4 };
	for (int i = 0; i < 6; i++) {
		ck_assert_int_eq(table_row(r.out, i, &w), 0);
		ck_assert_double_eq_tol(w.target, 2.0 * f[i], 0.006);
		ck_assert_str_eq(w.met, "no");
	}
	ck_assert_int_eq(table_row(r.out, 6, &w), -1);
	run_free(&r);
}
END_TEST

START_TEST(bandwidth_from_the_trace_notes)
{
	static const char *const args[] = { "-f", "0.5", "--h2d", "2000", NULL };
	struct run_result r;
	struct row w;

	plan(&r, write_trace("", "Q 1600 d2h-gbps 1000\nQ 1601 h2d-gbps 0.01\n"), args);
	ck_assert_msg(r.status == 0, "status %d: %s", r.status, r.err);
	ck_assert_ptr_nonnull(strstr(r.out, "d2h 1000.00 GB/s (from the trace)"));
	ck_assert_ptr_nonnull(strstr(r.out, "h2d 2000.00 GB/s (given)"));
	ck_assert_ptr_null(strstr(r.out, "assumed"));
	ck_assert_int_eq(table_row(r.out, 0, &w), 0);
	ck_assert_str_eq(w.met, "yes");
	run_free(&r);
}
END_TEST

START_TEST(without_gpu_times_the_host_times_are_used)
{
	static const char *const args[] = { "-t", "1G", NULL };
	struct run_result r;

	plan(&r, write_trace("G", ""), args);
	ck_assert_msg(r.status == 0, "status %d: %s", r.status, r.err);
	ck_assert_ptr_nonnull(strstr(r.out, "iteration: 2, from operation 7, 6 operations\n"));
	ck_assert_ptr_nonnull(strstr(r.out, "time source: host"));
	/* from the call of operation 7 (800 ns) to that of operation 13 (1400 ns) */
	ck_assert_ptr_nonnull(strstr(r.out, "host time per iteration: 0.000001 s\n"));
	run_free(&r);
}
END_TEST

START_TEST(no_iteration_records)
{
	static const char *const args[] = { NULL };
	struct run_result r;

	plan(&r, write_trace("I", ""), args);
	ck_assert_int_eq(r.status, 1);
	ck_assert_str_eq(r.out, "");
	ck_assert_ptr_nonnull(strstr(r.err, "no I records"));
	ck_assert_ptr_nonnull(strstr(r.err, "EBB_MODE=observe"));
	ck_assert_ptr_nonnull(strstr(r.err, "EBB_TRACE"));
	run_free(&r);
}
END_TEST

START_TEST(malformed_lines_are_named)
{
	static const char *const args[] = { NULL };
	struct run_result r;
	char want[512];

	/* the extra line comes after the header and the body */
	int line = 2;
	for (const char *p = body; *p; p++)
		line += *p == '\n';

	const char *path = write_trace("", "L 1700 14 0x1 1 2 1\n");
	plan(&r, path, args);
	ck_assert_int_eq(r.status, 1);
	snprintf(want, sizeof want, "ebb plan: %s:%d: launch record's list count does not match "
	    "its length\n", path, line);
	ck_assert_str_eq(r.err, want);
	ck_assert_str_eq(r.out, "");
	run_free(&r);

	path = write_trace("", "A 1700 4 0x7f0080000000 lots 0x1 async 0x0\n");
	plan(&r, path, args);
	ck_assert_int_eq(r.status, 1);
	snprintf(want, sizeof want, "ebb plan: %s:%d: alloc record's size 'lots' is not a "
	    "number\n", path, line);
	ck_assert_str_eq(r.err, want);
	run_free(&r);

	path = write_trace("", "L 1700 12 0x1 1 0\n");
	plan(&r, path, args);
	ck_assert_int_eq(r.status, 1);
	snprintf(want, sizeof want, "%s:%d: operation 12 after operation 13", path, line);
	ck_assert_ptr_nonnull(strstr(r.err, want));
	run_free(&r);

	path = write_trace("", "C 1700 14 0x1 4 0 sideways 0\n");
	plan(&r, path, args);
	ck_assert_int_eq(r.status, 1);
	snprintf(want, sizeof want, "ebb plan: %s:%d: copy direction 'sideways': d2h, h2d or "
	    "other\n", path, line);
	ck_assert_str_eq(r.err, want);
	run_free(&r);
}
END_TEST

/* The job's own copies between host and device (C records' dir) are read;
 * a trace of format version 1, whose C records have no dir, is refused. */
START_TEST(job_copies_are_read)
{
	static const char *const args[] = { "--target", "1G", NULL };
	char text[sizeof body + 64];
	struct run_result r;
	const char *l8 = "L 900 8 0x1 1 0\n", *l11 = "L 1200 11 0x1 1 0\n";
	const char *p8 = strstr(body, l8), *p11 = strstr(body, l11);

	ck_assert(p8 != NULL && p11 != NULL && p8 < p11);
	snprintf(text, sizeof text, "%.*sC 900 8 0x1 4 0 d2h 0\n%.*sC 1200 11 0x1 4 0 h2d 0\n%s",
	    (int)(p8 - body), body, (int)(p11 - p8 - strlen(l8)), p8 + strlen(l8),
	    p11 + strlen(l11));
	plan(&r, write_body(EBB_TRACE_VERSION, text, "", ""), args);
	ck_assert_msg(r.status == 0, "status %d: %s", r.status, r.err);
	ck_assert_ptr_nonnull(strstr(r.out, "job's copies: 1 to the host, 1 to the device"));
	run_free(&r);

	plan(&r, write_trace("", ""), args);
	ck_assert_ptr_nonnull(strstr(r.out, "job's copies: 0 to the host, 0 to the device"));
	run_free(&r);

	plan(&r, write_body(1, body, "", ""), args);
	ck_assert_int_ne(r.status, 0);
	ck_assert_ptr_nonnull(strstr(r.err, "trace format version 1; this ebb reads version 2"));
	run_free(&r);
}
END_TEST

START_TEST(usage_errors)
{
	static const char *const bad_target[] = { "--target", "lots", NULL };
	static const char *const bad_fraction[] = { "-f", "1.5", NULL };
	static const char *const bad_gbps[] = { "--d2h", "-3", NULL };
	static const char *const no_waits_alone[] = { "--no-waits", NULL };
	struct run_result r;
	const char *path = write_trace("", "");

	plan(&r, path, bad_target);
	ck_assert_int_eq(r.status, 2);
	ck_assert_ptr_nonnull(strstr(r.err, "--target 'lots' is not a size"));
	run_free(&r);
	plan(&r, path, bad_fraction);
	ck_assert_int_eq(r.status, 2);
	run_free(&r);
	plan(&r, path, bad_gbps);
	ck_assert_int_eq(r.status, 2);
	run_free(&r);
	plan(&r, path, no_waits_alone);
	ck_assert_int_eq(r.status, 2);
	ck_assert_ptr_nonnull(strstr(r.err, "--no-waits is about stalls"));
	run_free(&r);
	plan(&r, "/nonexistent/trace", bad_fraction + 2);
	ck_assert_int_eq(r.status, 2);
	ck_assert_ptr_nonnull(strstr(r.err, "cannot open /nonexistent/trace"));
	run_free(&r);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("ebb_plan");
	TCase *tc = tcase_create("ebb_plan");

	tcase_add_test(tc, fast_link_meets_one_gib_with_one_move);
	tcase_add_test(tc, moves_cost_the_host_time);
	tcase_add_test(tc, slow_link_moves_nothing_and_the_bound_is_the_peak);
	tcase_add_test(tc, default_fractions_and_assumed_bandwidth);
	tcase_add_test(tc, bandwidth_from_the_trace_notes);
	tcase_add_test(tc, without_gpu_times_the_host_times_are_used);
	tcase_add_test(tc, no_iteration_records);
	tcase_add_test(tc, malformed_lines_are_named);
	tcase_add_test(tc, usage_errors);
	tcase_add_test(tc, job_copies_are_read);
	tcase_add_test(tc, allow_stall_plans_under_the_bound);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
