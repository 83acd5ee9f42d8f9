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
 *
 * --replay is tested on a trace of the fake driver's workload writesets,
 * against the library's own answer (its Z records), and on hand-written
 * traces with V records (vbody and rcbody below), the latter for the plan
 * with recompute.
 */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "integ.h"
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
	const char *all[16] = { "plan", path };
	int n = 2;

	for (int i = 0; args[i]; i++) {
		ck_assert_int_lt(n, 14);
		all[n++] = args[i];
	}
	all[n] = NULL;
	ebb_cmd(r, all);
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
	ck_assert_ptr_nonnull(strstr(r.err, "--move-cost '25000' is not two or four numbers"));
	run_free(&r);
	static const char *const three[] = { "-t", "1G", "--move-cost", "1,2,3", NULL };
	plan(&r, write_trace("", ""), three);
	ck_assert_int_eq(r.status, 2);
	ck_assert_ptr_nonnull(strstr(r.err, "--move-cost '1,2,3' is not two or four numbers"));
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

/* E records of iteration 2 (operations 7 to 13), issued 20 ms apart, ebb
 * taking ebb_ms of each gap, into buf. */
static const char *
pace_records(char *buf, size_t size, unsigned ebb_ms)
{
	size_t n = 0;

	for (unsigned i = 0; i <= 6; i++)
		n += (size_t)snprintf(buf + n, size - n, "E %u %u %u 0 0\n", 7 + i,
		    1000000000u + i * 20000000u, i * ebb_ms * 1000000u);
	ck_assert_uint_lt(n, size);
	return buf;
}

/* The library's E records give the iteration's host pace, ebb's own time
 * left out: issued 20 ms apart against 10 ms of GPU time an operation, the
 * device waits 10 ms at each of the 5 operations after the first; with 19
 * ms of each gap ebb's, the job's own 1 ms keeps the device busy. Without E
 * records the pace is the issue times' (100 ns apart here: no wait). */
START_TEST(pace_from_the_library_records)
{
	static const char *const args[] = { "-t", "1G", NULL };
	char extra[512];
	struct run_result r;

	plan(&r, write_trace("", pace_records(extra, sizeof extra, 0)), args);
	ck_assert_msg(r.status == 0, "status %d: %s", r.status, r.err);
	ck_assert_msg(strstr(r.out, "host pace: 120000000 ns an iteration, the job's own, as the "
	    "library planned with it (the trace's E records: ebb's 0 ns and the driver's queue 0 "
	    "ns left out)\n") != NULL, "%s", r.out);
	ck_assert_msg(strstr(r.out, "host: the job's pace from the library's recording (E records); "
	    "with nothing moved the device waits 0.050000 s an iteration") != NULL, "%s", r.out);
	run_free(&r);

	plan(&r, write_trace("", pace_records(extra, sizeof extra, 19)), args);
	ck_assert_msg(r.status == 0, "status %d: %s", r.status, r.err);
	ck_assert_msg(strstr(r.out, "host pace: 6000000 ns an iteration, the job's own, as the "
	    "library planned with it (the trace's E records: ebb's 114000000 ns and the driver's "
	    "queue 0 ns left out)\n") != NULL, "%s", r.out);
	ck_assert_ptr_nonnull(strstr(r.out, "with nothing moved the device waits 0.000000 s"));
	run_free(&r);

	/* a run of them that misses an operation is not used */
	char *cut = strstr(pace_records(extra, sizeof extra, 19), "E 10 ");
	memmove(cut, strchr(cut, '\n') + 1, strlen(strchr(cut, '\n') + 1) + 1);
	plan(&r, write_trace("", extra), args);
	ck_assert_msg(r.status == 0, "status %d: %s", r.status, r.err);
	ck_assert_ptr_null(strstr(r.out, "host pace:"));
	ck_assert_ptr_nonnull(strstr(r.out, "host: the job's pace from the trace's issue times; "
	    "with nothing moved the device waits 0.000000 s"));
	run_free(&r);
}
END_TEST

/* On a trace of the library's, ebb plan of the recording it planned has the
 * library's pace: the plan-host-pace-ns note, to the nanosecond, from one E
 * record for each of its operations and the next. */
START_TEST(pace_of_the_recording_is_the_library_s)
{
	const char *path = tmp_file("planpace");
	static const char *const recorded[] = { "--iteration", "recorded", NULL };
	char *argv[] = { workload_path(0), "plan", "12", NULL };
	const char *env[] = { "EBB_MODE=offload", "EBB_LIMIT=64M", NULL };
	struct run_result w, r;
	struct trace t;

	run_ebb(argv, env, path, &w);
	expect_ok(&w);
	trace_load(path, &t);
	char *text = read_file(path);
	const char *note = strstr(text, " plan-host-pace-ns ");
	const char *rec = strstr(text, " plan-recording ");
	ck_assert_ptr_nonnull(note);
	ck_assert_ptr_nonnull(rec);
	unsigned long long pace = strtoull(note + strlen(" plan-host-pace-ns "), NULL, 10);
	unsigned long long s0 = strtoull(rec + strlen(" plan-recording "), NULL, 10);
	/* the E records of the first plan: its recording's operations and the next */
	char first[32];
	snprintf(first, sizeof first, "\nE %llu ", s0);
	ck_assert_msg(strstr(text, first) != NULL, "no E record of operation %llu", s0);
	ck_assert_uint_ge(count_type(&t, 'E'), 2);

	plan(&r, path, recorded);
	ck_assert_msg(r.status == 0, "status %d: %s", r.status, r.err);
	char want[64];
	snprintf(want, sizeof want, "host pace: %llu ns an iteration", pace);
	ck_assert_msg(strstr(r.out, want) != NULL, "want '%s' in:\n%s", want, r.out);
	run_free(&r);
	run_free(&w);
	trace_free(&t);
	free(text);
	remove(path);
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
 * a trace of a format version before EBB_TRACE_VERSION_MIN (version 1's C
 * records have no dir) is refused, and one of EBB_TRACE_VERSION_MIN (without
 * E records) is read. */
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

	char want[96];
	plan(&r, write_body(EBB_TRACE_VERSION_MIN - 1, body, "", ""), args);
	ck_assert_int_ne(r.status, 0);
	snprintf(want, sizeof want, "trace format version %d; this ebb reads versions %d to %d",
	    EBB_TRACE_VERSION_MIN - 1, EBB_TRACE_VERSION_MIN, EBB_TRACE_VERSION);
	ck_assert_msg(strstr(r.err, want) != NULL, "%s", r.err);
	run_free(&r);
	plan(&r, write_body(EBB_TRACE_VERSION_MIN, body, "", ""), args);
	ck_assert_msg(r.status == 0, "status %d: %s", r.status, r.err);
	run_free(&r);
}
END_TEST

START_TEST(usage_errors)
{
	static const char *const bad_target[] = { "--target", "lots", NULL };
	static const char *const bad_fraction[] = { "-f", "1.5", NULL };
	static const char *const bad_gbps[] = { "--d2h", "-3", NULL };
	static const char *const no_waits_alone[] = { "--no-waits", NULL };
	static const char *const bad_iter[] = { "--iteration", "0", NULL };
	static const char *const recorded[] = { "--iteration", "recorded", NULL };
	static const char *const absent[] = { "--iteration", "99", NULL };
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
	plan(&r, path, bad_iter);
	ck_assert_int_eq(r.status, 2);
	ck_assert_ptr_nonnull(strstr(r.err, "--iteration '0' is not an iteration's number"));
	run_free(&r);
	/* a trace without a plan: no recording to plan; no iteration 99 */
	plan(&r, path, recorded);
	ck_assert_int_eq(r.status, 1);
	ck_assert_ptr_nonnull(strstr(r.err, "--iteration recorded: the trace has no plan-recording "
	    "note"));
	run_free(&r);
	plan(&r, path, absent);
	ck_assert_int_eq(r.status, 1);
	ck_assert_ptr_nonnull(strstr(r.err, "--iteration 99: no such iteration"));
	run_free(&r);
	plan(&r, "/nonexistent/trace", bad_fraction + 2);
	ck_assert_int_eq(r.status, 2);
	ck_assert_ptr_nonnull(strstr(r.err, "cannot open /nonexistent/trace"));
	run_free(&r);
}
END_TEST

/* The number after "key" in out (the test fails when there is none). */
static unsigned long long
count_after(const char *out, const char *key)
{
	const char *p = strstr(out, key);
	unsigned long long v = 0;

	ck_assert_msg(p != NULL, "no '%s' in:\n%s", key, out);
	ck_assert_int_eq(sscanf(p + strlen(key), "%llu", &v), 1);
	return v;
}

/* One line of --replay's candidates. */
struct cand_row {
	unsigned long long bid, gap_after, gap_before, lo, hi;
	double mib, ms;
	unsigned chain;
	char ops[64];
};

/* Candidate row i (from 0) of out; returns 0, or -1 when there is none. */
static int
cand_row(const char *out, int i, struct cand_row *w)
{
	const char *p = strstr(out, "chain's operations\n");

	if (p == NULL)
		return -1;
	for (int k = 0; k <= i; k++) {
		p = strchr(p, '\n');
		if (p == NULL || p[1] == '\0' || p[1] == '\n')
			return -1;
		p++;
	}
	return sscanf(p, "%llu %lf %llu-%llu %llu-%llu %u %lf %63s", &w->bid, &w->mib,
	    &w->gap_after, &w->gap_before, &w->lo, &w->hi, &w->chain, &w->ms, w->ops) == 9 ? 0 : -1;
}

/* The refusals --replay prints, by the Z records' key suffixes. */
static const char *const refusals[] = {
	"unknown", "no-writer", "first-read", "too-long", "not-replayable", "unknown-other",
	"writes-other", "overwritten", "freed"
};

/* The count of refusal reason in out's "refused:" line. */
static unsigned long long
refused(const char *out, const char *reason)
{
	char key[64];
	const char *line = strstr(out, "\nrefused: ");

	ck_assert_msg(line != NULL, "no refusals in:\n%s", out);
	snprintf(key, sizeof key, " %s ", reason);
	return count_after(line, key);
}

/*
 * A parameter word that falls inside a buffer by chance in every other
 * iteration (workload writesets, WORKLOAD_SEEDPTR=0 and 1, as
 * check_integration.c's write_sets_chance_pointer runs it): the probed
 * launch has one buffer fewer than the recorded one, or one more. ebb plan
 * --replay matches them as the library does: every V record's launch is
 * matched to the planned iteration, and the launches that may write what
 * they do not reference are the library's. Where the planned iteration (the
 * last) has the recorded one's parity (17 iterations), so are the launches
 * that can be launched again and the candidates; where it has the other
 * (16), its rand_state lacks the recorded one's chance buffer, whose access
 * is unknown, and can be launched again there (one more than the library's),
 * or has one the recorded one lacks, whose access is unknown (one fewer).
 */
START_TEST(replay_matches_the_library_by_chance)
{
	const char *path = tmp_file("planseed");
	static const char *const args[] = { "--replay", NULL };
	static const char *const recorded[] = { "--replay", "--iteration", "recorded", NULL };
	/* 16 and 17 iterations: the last, which ebb plan plans, of the other
	 * parity than the library's recording (the 7th) and of the same */
	char *argv[] = { workload_path(0), "writesets", "16", NULL };

	for (int k = 0; k < 4; k++) {
		const char *env[] = { "EBB_MODE=offload", "EBB_LIMIT=64M", "EBB_RECOMPUTE=1",
			k % 2 == 0 ? "WORKLOAD_SEEDPTR=0" : "WORKLOAD_SEEDPTR=1", NULL };
		argv[2] = k < 2 ? "16" : "17";
		struct run_result w, r;
		struct trace t;
		run_ebb(argv, env, path, &w);
		expect_ok(&w);
		trace_load(path, &t);
		plan(&r, path, args);
		ck_assert_msg(r.status == 0, "status %d: %s", r.status, r.err);
		const char *ws = strstr(r.out, "write sets: iteration ");
		ck_assert_ptr_nonnull(ws);
		unsigned long long it, from, measured, matched, again, wild;
		ck_assert_int_eq(sscanf(ws, "write sets: iteration %llu, from operation %llu: %llu "
		    "launches measured, %llu of them matched to the planned iteration, %llu can be "
		    "launched again, %llu may write", &it, &from, &measured, &matched, &again, &wild), 6);
		ck_assert_uint_eq(measured, count_type(&t, 'V'));
		ck_assert_msg(matched == measured, "k %d: %llu of %llu matched:\n%s", k, matched,
		    measured, r.out);
		ck_assert_uint_eq(wild, summary(&t, "wild-launches"));
		/* (16 iterations: the planned rand_state lacks the recorded one's
		 * chance buffer, or has one of its own: one more, or one fewer) */
		ck_assert_uint_eq(again + (k == 1), summary(&t, "replayable-launches") + (k == 0));
		if (k >= 2)
			ck_assert_uint_eq(count_after(r.out, "\ncandidates: "), summary(&t, "replay-gaps"));
		run_free(&r);
		/* planning the library's recording: its numbers, whatever the parity */
		plan(&r, path, recorded);
		ck_assert_msg(r.status == 0, "status %d: %s", r.status, r.err);
		ck_assert_ptr_nonnull(strstr(r.out, "iteration: 7, "));
		ws = strstr(r.out, "write sets: iteration ");
		ck_assert_ptr_nonnull(ws);
		ck_assert_int_eq(sscanf(ws, "write sets: iteration %llu, from operation %llu: %llu "
		    "launches measured, %llu of them matched to the planned iteration, %llu can be "
		    "launched again, %llu may write", &it, &from, &measured, &matched, &again, &wild), 6);
		ck_assert_uint_eq(matched, measured);
		ck_assert_uint_eq(wild, summary(&t, "wild-launches"));
		ck_assert_uint_eq(again, summary(&t, "replayable-launches"));
		ck_assert_uint_eq(count_after(r.out, "\ncandidates: "), summary(&t, "replay-gaps"));
		trace_free(&t);
		run_free(&w);
		run_free(&r);
	}
	remove(path);
}
END_TEST

/*
 * The workload's write-set scenario under the library with EBB_RECOMPUTE=1
 * (as tests/check_integration.c's write_sets_measured runs it): ebb plan
 * --replay applies the V records of the probed iteration (the 8th) to the
 * iteration it plans (the 10th) and finds what the library found on the
 * recorded one (the 7th): 6 gaps, 6 candidates of 4 buffers (x, y, o and
 * z, 2 MiB each; rand_state writes its state too, into scratch on a replay,
 * which the library's verification then refuses); gather
 * references a table from a slab, so 6 of the 7 launches measured can be
 * launched again. Every number equals the library's Z record.
 */
START_TEST(replay_matches_the_library)
{
	const char *path = tmp_file("planws");
	char *argv[] = { workload_path(0), "writesets", "16", NULL };
	const char *env[] = { "EBB_MODE=offload", "EBB_LIMIT=64M", "EBB_RECOMPUTE=1", NULL };
	static const char *const args[] = { "--replay", NULL };
	struct run_result w, r;
	struct trace t;
	char key[64];

	run_ebb(argv, env, path, &w);
	expect_ok(&w);
	trace_load(path, &t);
	ck_assert_uint_eq(summary(&t, "plans"), 1);
	ck_assert_uint_eq(count_type(&t, 'V'), 7);
	plan(&r, path, args);
	ck_assert_msg(r.status == 0, "status %d: %s", r.status, r.err);
	ck_assert_ptr_nonnull(strstr(r.out, "iteration: 16, from operation 167, 11 operations\n"));
	ck_assert_ptr_nonnull(strstr(r.out, "write sets: iteration 8, from operation 79: "));
	ck_assert_uint_eq(count_after(r.out, "from operation 79: "), summary(&t, "write-set-launches"));
	ck_assert_uint_eq(count_after(r.out, "launches measured, "), 7);
	ck_assert_uint_eq(count_after(r.out, "planned iteration, "), summary(&t, "replayable-launches"));
	ck_assert_uint_eq(count_after(r.out, "planned iteration, "), 6);
	ck_assert_uint_eq(count_after(r.out, "launched again, "), summary(&t, "wild-launches"));
	ck_assert_uint_eq(count_after(r.out, "launched again, "), 1);
	ck_assert_uint_eq(count_after(r.out, "gaps considered: "), summary(&t, "replay-gaps-considered"));
	ck_assert_uint_eq(count_after(r.out, "gaps considered: "), 6);
	ck_assert_uint_eq(count_after(r.out, "\ncandidates: "), summary(&t, "replay-gaps"));
	ck_assert_uint_eq(count_after(r.out, "\ncandidates: "), 6);
	ck_assert_uint_eq(count_after(r.out, ", of "), summary(&t, "replay-buffers"));
	ck_assert_uint_eq(count_after(r.out, ", of "), 4);
	ck_assert_uint_eq(summary(&t, "replay-bytes"), 8u << 20);
	ck_assert_ptr_nonnull(strstr(r.out, "of 4 buffers (8.00 MiB)\n"));
	for (size_t i = 0; i < sizeof refusals / sizeof *refusals; i++) {
		snprintf(key, sizeof key, "replay-refused-%s", refusals[i]);
		ck_assert_uint_eq(refused(r.out, refusals[i]), summary(&t, key));
	}
	ck_assert_uint_eq(refused(r.out, "writes-other"), 0);
	/* the candidates, the most bytes times window first: x's and y's second
	 * gaps (window 2; y's chain is its fill and axpy), x's first gap and o's
	 * gap from struct_ptrs to its copy to the host, which the gather, a
	 * launch that may write what it does not reference, cuts to 1, then y's
	 * first gap and z's, from rand_state (window 0) */
	struct cand_row c;
	unsigned chains = 0;
	for (int i = 0; i < 6; i++) {
		ck_assert_int_eq(cand_row(r.out, i, &c), 0);
		ck_assert_double_eq_tol(c.mib, 2.0, 1e-9);
		ck_assert_uint_eq(c.lo, c.gap_after + 1);
		ck_assert_uint_le(c.hi, c.gap_before);
		ck_assert_uint_eq(c.hi - c.lo, i < 2 ? 2 : i < 4 ? 1 : 0);
		chains += c.chain;
	}
	ck_assert_uint_eq(chains, 7);
	ck_assert_int_eq(cand_row(r.out, 6, &c), -1);
	ck_assert_int_eq(cand_row(r.out, 5, &c), 0);
	ck_assert_str_eq(c.ops, "170");
	ck_assert_int_eq(cand_row(r.out, 1, &c), 0);
	ck_assert_str_eq(c.ops, "168,169");
	ck_assert_int_eq(cand_row(r.out, 3, &c), 0);
	ck_assert_uint_eq(c.gap_after, 172);
	ck_assert_uint_eq(c.gap_before, 176);
	ck_assert_uint_eq(c.hi, 174);	/* the gather's position */
	ck_assert_str_eq(c.ops, "172");
	/* the plan with recompute for the last target, beside the moves alone */
	ck_assert_ptr_nonnull(strstr(r.out, "\nrecompute for 0.01 GiB, beside the moves alone "
	    "(offline every candidate counts as verified; a run recomputes only those its replays "
	    "verified):\nrecompute alone: "));
	ck_assert_ptr_nonnull(strstr(r.out, "\n    moves alone  "));
	ck_assert_ptr_nonnull(strstr(r.out, "passed over: 0 not verified, "));
	trace_free(&t);
	run_free(&w);
	run_free(&r);
	remove(path);
}
END_TEST

/*
 * A hand-written offload trace of three iterations of 4 launches (seq 1, 5,
 * 9; the third is planned) over a weight w (buffer 1, 4 MiB), a bias
 * (buffer 2, 4 KiB, allocated as KIND) and two activations x and y (4 MiB)
 * each iteration: a writes x from w, b writes y from x and the bias, c reads
 * x, d reads y. The V records are those of iteration 1, whose x is XSIZE.
 */
static const char vbody_fmt[] =
	"K 1 1 ok kernel\n"
	"A 10 1 0x7f0000000000 4194304 0x1 async 0x0\n"
	"A 11 2 0x7f0000400000 4096 0x1 %s 0x0\n"
	"A 20 3 0x7f0000800000 %s 0x1 async 0x0\n"
	"A 21 4 0x7f0000c00000 4194304 0x1 async 0x0\n"
	"L 100 1 0x1 1 2 3 1\n"
	"L 200 2 0x1 1 3 4 3 2\n"
	"L 300 3 0x1 1 1 3\n"
	"L 400 4 0x1 1 1 4\n"
	"F 410 3 0x1 async\n"
	"F 411 4 0x1 async\n"
	"A 420 5 0x7f0000800000 4194304 0x1 async 0x0\n"
	"A 421 6 0x7f0000c00000 4194304 0x1 async 0x0\n"
	"L 500 5 0x1 1 2 5 1\n"
	"L 600 6 0x1 1 3 6 5 2\n"
	"L 700 7 0x1 1 1 5\n"
	"L 800 8 0x1 1 1 6\n"
	"F 810 5 0x1 async\n"
	"F 811 6 0x1 async\n"
	"A 820 7 0x7f0000800000 4194304 0x1 async 0x0\n"
	"A 821 8 0x7f0000c00000 4194304 0x1 async 0x0\n"
	"L 900 9 0x1 1 2 7 1\n"
	"L 1000 10 0x1 1 3 8 7 2\n"
	"L 1100 11 0x1 1 1 7\n"
	"L 1200 12 0x1 1 1 8\n"
	"F 1210 7 0x1 async\n"
	"F 1211 8 0x1 async\n"
	"I 1300 1 1 4\n"
	"I 1301 2 5 4\n"
	"I 1302 3 9 4\n"
	"V 1400 1 2 2 1\n"
	"V 1400 2 3 2 1 1\n"
	"V 1400 3 1 1\n"
	"V 1400 4 1 1\n";

/* The hand-written trace with its bias allocated as kind and iteration 1's
 * x of xsize bytes, then extra. */
static const char *
write_vtrace_kind(const char *kind, const char *xsize, const char *extra)
{
	char text[sizeof vbody_fmt + 64];

	snprintf(text, sizeof text, vbody_fmt, kind, xsize);
	return write_body(EBB_TRACE_VERSION, text, "", extra);
}

/* The same with the bias pitched: the driver's, in none of the library's
 * profiles. */
static const char *
write_vtrace(const char *xsize, const char *extra)
{
	return write_vtrace_kind("pitch", xsize, extra);
}

/*
 * Iteration 1's accesses, position by position, are those of iteration 3's
 * buffers: x's two gaps (after a and b) can be bridged by launching a again
 * (it reads w, which nothing writes); y's gap cannot, b referencing the
 * bias, a pitched allocation that the driver serves and that is in none of
 * the library's profiles. Where
 * iteration 1's x has another size, it is not the planned x (a word that
 * fell inside another buffer by chance, as the library matches launches of
 * as many buffers): every launch is matched, x's accesses are unknown, and
 * its gaps are refused as unmeasured; the one launch that does not
 * reference x can be launched again.
 */
START_TEST(replay_matches_positions_and_shapes)
{
	static const char *const args[] = { "--replay", NULL };
	struct run_result r;
	struct cand_row c;

	plan(&r, write_vtrace("4194304", ""), args);
	ck_assert_msg(r.status == 0, "status %d: %s", r.status, r.err);
	ck_assert_ptr_nonnull(strstr(r.out, "iteration: 3, from operation 9, 4 operations\n"));
	ck_assert_ptr_nonnull(strstr(r.out, "write sets: iteration 1, from operation 1: 4 launches "
	    "measured, 4 of them matched to the planned iteration, 3 can be launched again, 0 may "
	    "write what they do not reference\n"));
	ck_assert_uint_eq(count_after(r.out, "gaps considered: "), 3);
	ck_assert_ptr_nonnull(strstr(r.out, "\ncandidates: 2, of 1 buffers (4.00 MiB)\n"));
	ck_assert_uint_eq(refused(r.out, "not-replayable"), 1);
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(cand_row(r.out, i, &c), 0);
		ck_assert_uint_eq(c.bid, 7);
		ck_assert_uint_eq(c.gap_after, 9 + (unsigned)i);
		ck_assert_uint_eq(c.gap_before, 10 + (unsigned)i);
		ck_assert_uint_eq(c.lo, 10 + (unsigned)i);
		ck_assert_uint_eq(c.hi, 10 + (unsigned)i);
		ck_assert_uint_eq(c.chain, 1);
		ck_assert_str_eq(c.ops, "9");
	}
	ck_assert_int_eq(cand_row(r.out, 2, &c), -1);
	run_free(&r);

	plan(&r, write_vtrace("3145728", ""), args);
	ck_assert_msg(r.status == 0, "status %d: %s", r.status, r.err);
	ck_assert_msg(strstr(r.out, "4 launches measured, 4 of them matched to the planned "
	    "iteration, 1 can be launched again, 0 may write what they do not reference\n") != NULL,
	    "%s", r.out);
	ck_assert_uint_eq(count_after(r.out, "gaps considered: "), 3);
	ck_assert_uint_eq(count_after(r.out, "\ncandidates: "), 0);
	ck_assert_uint_eq(refused(r.out, "unknown"), 2);
	ck_assert_uint_eq(refused(r.out, "not-replayable"), 1);
	ck_assert_ptr_nonnull(strstr(r.out, "(none)\n"));
	ck_assert_ptr_nonnull(strstr(r.out, "\nno gap can be recomputed: the plan is the moves "
	    "alone\n"));
	run_free(&r);
}
END_TEST

/*
 * The bias allocated asynchronously, from one of ebb's slabs, which the
 * library's profile names (with no bytes of its own): b can be launched
 * again, and y's gap is a candidate too.
 */
START_TEST(replay_names_a_slab_buffer)
{
	static const char *const args[] = { "--replay", NULL };
	struct run_result r;

	plan(&r, write_vtrace_kind("async", "4194304", ""), args);
	ck_assert_msg(r.status == 0, "status %d: %s", r.status, r.err);
	ck_assert_msg(strstr(r.out, "4 launches measured, 4 of them matched to the planned "
	    "iteration, 4 can be launched again, 0 may write what they do not reference\n") != NULL,
	    "%s", r.out);
	ck_assert_ptr_nonnull(strstr(r.out, "\ncandidates: 3, of 2 buffers (8.00 MiB)\n"));
	ck_assert_uint_eq(refused(r.out, "not-replayable"), 0);
	run_free(&r);
}
END_TEST

/*
 * A hand-written trace for the plan with recompute: three iterations of 6
 * launches (seq 1, 7, 13; the third is planned), each 10 ms on the GPU. A
 * weight w (buffer 1, 1 GiB) lives throughout; each iteration a writes x
 * from w, b reads w, c writes h, d reads h, f reads w and e reads x (x and
 * h: 1 GiB each, freed after their last use). The peak, 3 GiB, is at c and
 * d, over x's gap from a to e. The V records are iteration 1's.
 */
static const char rcbody[] =
	"K 1 1 ok kernel\n"
	"A 10 1 0x7f0000000000 1073741824 0x1 async 0x0\n"
	"A 20 2 0x7f0040000000 1073741824 0x1 async 0x0\n"
	"L 30 1 0x1 1 2 2 1\n"
	"L 40 2 0x1 2 1 1\n"
	"A 50 3 0x7f0080000000 1073741824 0x1 async 0x0\n"
	"L 60 3 0x1 3 1 3\n"
	"L 70 4 0x1 4 1 3\n"
	"F 80 3 0x1 async\n"
	"L 90 5 0x1 2 1 1\n"
	"L 100 6 0x1 5 1 2\n"
	"F 110 2 0x1 async\n"
	"A 120 4 0x7f0040000000 1073741824 0x1 async 0x0\n"
	"L 130 7 0x1 1 2 4 1\n"
	"L 140 8 0x1 2 1 1\n"
	"A 150 5 0x7f0080000000 1073741824 0x1 async 0x0\n"
	"L 160 9 0x1 3 1 5\n"
	"L 170 10 0x1 4 1 5\n"
	"F 180 5 0x1 async\n"
	"L 190 11 0x1 2 1 1\n"
	"L 200 12 0x1 5 1 4\n"
	"F 210 4 0x1 async\n"
	"A 220 6 0x7f0040000000 1073741824 0x1 async 0x0\n"
	"L 230 13 0x1 1 2 6 1\n"
	"L 240 14 0x1 2 1 1\n"
	"A 250 7 0x7f0080000000 1073741824 0x1 async 0x0\n"
	"L 260 15 0x1 3 1 7\n"
	"L 270 16 0x1 4 1 7\n"
	"F 280 7 0x1 async\n"
	"L 290 17 0x1 2 1 1\n"
	"L 300 18 0x1 5 1 6\n"
	"F 310 6 0x1 async\n"
	"I 1300 1 1 6\n"
	"I 1301 2 7 6\n"
	"I 1302 3 13 6\n"
	"V 1400 1 2 2 1\n"
	"V 1400 2 1 1\n"
	"V 1400 3 1 2\n"
	"V 1400 4 1 1\n"
	"V 1400 5 1 1\n"
	"V 1400 6 1 1\n"
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
	"G 13 120000000 130000000\n"
	"G 14 130000000 140000000\n"
	"G 15 140000000 150000000\n"
	"G 16 150000000 160000000\n"
	"G 17 160000000 170000000\n"
	"G 18 170000000 180000000\n"
	"Q 1500 cupti-detached exit\n";

/* One row of the comparison of the plan with recompute and the moves alone. */
struct rc_row {
	double peak;
	char met[8];
	unsigned moves, recomputed;
	double mib, replay, step, stall;
};

/* The row of out that starts with what (padded), into w; returns 0, or -1
 * when there is none. */
static int
rc_row(const char *out, const char *what, struct rc_row *w)
{
	char key[64];

	snprintf(key, sizeof key, "\n%15s  ", what);
	const char *p = strstr(out, key);
	if (p == NULL)
		return -1;
	return sscanf(p + strlen(key), "%lf %7s %u %u %lf %lf %lf %lf", &w->peak, w->met,
	    &w->moves, &w->recomputed, &w->mib, &w->replay, &w->step, &w->stall) == 8 ? 0 : -1;
}

/*
 * At 2 GiB on a link of 1 GB/s nothing can move in time, and recomputing x
 * (launching a again right before e) holds the target for one more 10 ms
 * launch; --moves lists that gap. At 1000 GB/s x moves in time (off during
 * b, back during f) and the moves alone stay the better plan.
 */
START_TEST(replay_plans_recompute)
{
	static const char *const slow[] = { "--replay", "--moves", "--target", "2G", "--d2h", "1",
		"--h2d", "1", NULL };
	static const char *const fast[] = { "--replay", "--target", "2G", "--d2h", "1000",
		"--h2d", "1000", NULL };
	const char *path = write_body(EBB_TRACE_VERSION, rcbody, "", "");
	struct run_result r;
	struct rc_row w;

	plan(&r, path, slow);
	ck_assert_msg(r.status == 0, "status %d: %s", r.status, r.err);
	ck_assert_ptr_nonnull(strstr(r.out, "\ncandidates: 2, of 2 buffers (2048.00 MiB)\n"));
	ck_assert_ptr_nonnull(strstr(r.out, "\nrecompute for 2.00 GiB, beside the moves alone"));
	ck_assert_ptr_nonnull(strstr(r.out, "\nrecompute alone: 2.00 GiB with 1 gaps; passed over: "
	    "0 not verified, 0 used on another stream than their chain's, 0 in conflict with the picks"));
	ck_assert_int_eq(rc_row(r.out, "moves alone", &w), 0);
	ck_assert_double_eq_tol(w.peak, 3.0, 1e-9);
	ck_assert_str_eq(w.met, "no");
	ck_assert_uint_eq(w.recomputed, 0);
	ck_assert_int_eq(rc_row(r.out, "with recompute", &w), 0);
	ck_assert_double_eq_tol(w.peak, 2.0, 1e-9);
	ck_assert_str_eq(w.met, "yes");
	ck_assert_uint_eq(w.moves, 0);
	ck_assert_uint_eq(w.recomputed, 1);
	ck_assert_double_eq_tol(w.mib, 1024.0, 1e-9);
	ck_assert_double_eq_tol(w.replay, 0.01, 1e-9);
	ck_assert_double_eq_tol(w.step, 0.07, 1e-9);
	const char *picks = strstr(r.out, "\ngaps recomputed, the chain launched again right before "
	    "the operation of \"replay at\":\n");
	ck_assert_ptr_nonnull(picks);
	unsigned long long bid, after, before, at;
	unsigned chain;
	double mib, ms;
	const char *row = strchr(strchr(picks + 1, '\n') + 1, '\n') + 1;
	ck_assert_int_eq(sscanf(row, "%llu %lf %llu-%llu %llu %u %lf", &bid, &mib, &after, &before,
	    &at, &chain, &ms), 7);
	ck_assert_uint_eq(bid, 6);
	ck_assert_uint_eq(after, 13);
	ck_assert_uint_eq(before, 18);
	ck_assert_uint_eq(at, 18);
	ck_assert_uint_eq(chain, 1);
	ck_assert_double_eq_tol(ms, 10.0, 1e-9);
	run_free(&r);

	plan(&r, path, fast);
	ck_assert_msg(r.status == 0, "status %d: %s", r.status, r.err);
	ck_assert_int_eq(rc_row(r.out, "moves alone", &w), 0);
	ck_assert_str_eq(w.met, "yes");
	ck_assert_int_eq(rc_row(r.out, "with recompute", &w), -1);
	ck_assert_ptr_nonnull(strstr(r.out, "\nno plan with recompute does better than the moves "
	    "alone\n"));
	ck_assert_ptr_null(strstr(r.out, "gaps recomputed"));
	run_free(&r);
	remove(path);
}
END_TEST

/*
 * A trace without V records says it has no write sets and how to get them,
 * and plans as without --replay (status 0). V records whose launches lie
 * in no iteration match nothing; a V record's access other than 1 or 2 is
 * malformed.
 */
START_TEST(replay_without_write_sets)
{
	static const char *const args[] = { "--replay", NULL };
	struct run_result r;

	plan(&r, write_trace("", ""), args);
	ck_assert_msg(r.status == 0, "status %d: %s", r.status, r.err);
	ck_assert_ptr_nonnull(strstr(r.out, "the trace has no write sets (V records): run the job "
	    "in offload mode with EBB_RECOMPUTE=1"));
	ck_assert_ptr_nonnull(strstr(r.out, "target GiB"));
	ck_assert_ptr_null(strstr(r.out, "gaps considered"));
	run_free(&r);

	static const char *const none[] = { NULL };
	plan(&r, write_trace("", ""), none);
	ck_assert_int_eq(r.status, 0);
	ck_assert_ptr_null(strstr(r.out, "recompute by replay"));
	run_free(&r);

	plan(&r, write_trace("", "V 1600 40 1 2\n"), args);
	ck_assert_msg(r.status == 0, "status %d: %s", r.status, r.err);
	ck_assert_ptr_nonnull(strstr(r.out, "the write sets (V records) are of no iteration (I "
	    "record), not of one of 6 operations as the planned one: nothing is matched\n"));
	run_free(&r);

	plan(&r, write_vtrace("4194304", "V 1600 12 1 3\n"), args);
	ck_assert_int_eq(r.status, 1);
	ck_assert_ptr_nonnull(strstr(r.err, "access record's access '3' is not 0 (not measured), "
	    "1 (read) or 2 (written), with 4 added or not"));
	ck_assert_str_eq(r.out, "");
	run_free(&r);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("ebb_plan");
	TCase *tc = tcase_create("ebb_plan");

	add_test(tc, fast_link_meets_one_gib_with_one_move);
	add_test(tc, moves_cost_the_host_time);
	add_test(tc, slow_link_moves_nothing_and_the_bound_is_the_peak);
	add_test(tc, default_fractions_and_assumed_bandwidth);
	add_test(tc, bandwidth_from_the_trace_notes);
	add_test(tc, without_gpu_times_the_host_times_are_used);
	add_test(tc, no_iteration_records);
	add_test(tc, pace_from_the_library_records);
	add_test(tc, pace_of_the_recording_is_the_library_s);
	add_test(tc, malformed_lines_are_named);
	add_test(tc, usage_errors);
	add_test(tc, job_copies_are_read);
	add_test(tc, allow_stall_plans_under_the_bound);
	add_test(tc, replay_matches_the_library);
	add_test(tc, replay_matches_the_library_by_chance);
	add_test(tc, replay_matches_positions_and_shapes);
	add_test(tc, replay_names_a_slab_buffer);
	add_test(tc, replay_without_write_sets);
	add_test(tc, replay_plans_recompute);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
