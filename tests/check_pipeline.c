/*
 * check_pipeline.c: pipeline stage markers and phases (ebb-trace(5)'s N
 * records, policy/phase.c) on the fake driver and NCCL: the workload's
 * pipeline stage on one rank, whose phases each open with a send and a
 * receive to itself (a pipeline of one stage), in 1F1B and GPipe order, 4
 * micro-batches of 6 activations of 4 MiB a step.
 *
 * ebb report and ebb timeline count every send and receive as a marker;
 * ebb plan finds 4 forward and 4 backward phases, each backward paired
 * with its micro-batch's forward (1F1B: the one just before it; GPipe: in
 * reverse); and under a limit 40% below the job's peak the stage computes
 * what it computes without ebb.
 */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "integ.h"
#include "testutil.h"

/* The value after "key: " in out, as a number. */
static unsigned long long
value_of(const char *out, const char *key)
{
	const char *p = strstr(out, key);

	ck_assert_msg(p != NULL, "no '%s' in:\n%s", key, out);
	return strtoull(p + strlen(key), NULL, 10);
}

/* The phase row i of ebb plan's table: its kind and the phase it pairs with
 * (-1: none). */
static void
phase_row(const char *out, int i, char kind[16], int *pair)
{
	const char *p = strstr(out, "uses the buffers of\n");
	unsigned idx;
	char ops[32];

	ck_assert_ptr_nonnull(p);
	for (int k = 0; k <= i; k++) {
		p = strchr(p, '\n');
		ck_assert_ptr_nonnull(p);
		p++;
	}
	ck_assert_int_eq(sscanf(p, "%u %31s %15s", &idx, ops, kind), 3);
	ck_assert_uint_eq(idx, (unsigned)i);
	const char *of = strstr(p, "phase ");
	const char *eol = strchr(p, '\n');
	*pair = of != NULL && of < eol ? atoi(of + 6) : -1;
}

/* The workload's stage under ebb in observe mode, its trace at path. */
static void
run_stage(const char *schedule, const char *path, const char *const *more, struct run_result *r)
{
	char *argv[] = { workload_path(0), "pipeline", "6", NULL };
	char sched[64];
	const char *env[8] = { sched, NULL };
	int n = 1;

	snprintf(sched, sizeof sched, "WORKLOAD_SCHEDULE=%s", schedule);
	for (int i = 0; more != NULL && more[i] != NULL && n < 7; i++)
		env[n++] = more[i];
	env[n] = NULL;
	run_ebb(argv, env, path, r);
	expect_ok(r);
}

/* The markers and phases of one schedule; want[k]: the phase backward k+1
 * pairs with (phases 1 to 8 after the step's first operations). */
static void
check_phases(const char *schedule, const char *const kinds[8], const int want[8])
{
	const char *path = tmp_file("pipe");
	const char *rep[] = { "report", path, NULL };
	const char *plan[] = { "plan", path, "-f", "0.6", NULL };
	struct run_result w, r;
	char kind[16];
	int pair;

	run_stage(schedule, path, NULL, &w);
	ebb_cmd(&r, rep);
	ck_assert_msg(r.status == 0, "%s", r.err);
	ck_assert_uint_eq(value_of(r.out, "nccl-calls: "), 6 * 8 * 2);
	ck_assert_uint_eq(value_of(r.out, "stage-markers: "), 6 * 8 * 2);
	run_free(&r);
	const char *json = tmp_file("pipejson");
	const char *tl[] = { "timeline", path, "-o", json, NULL };
	ebb_cmd(&r, tl);
	ck_assert_msg(r.status == 0, "%s", r.err);
	char *text = read_file(json);
	ck_assert_ptr_nonnull(text);
	ck_assert_int_eq(count_substr(text, " (stage marker)\""), 6 * 8 * 2);
	free(text);
	remove(json);
	run_free(&r);
	ebb_cmd(&r, plan);
	ck_assert_msg(r.status == 0, "%s", r.err);
	ck_assert_msg(strstr(r.out, "pipeline phases: 9 from 16 stage markers: 4 forward, 4 "
	    "backward (0 of them paired with no forward), 1 other\n") != NULL, "%s", r.out);
	phase_row(r.out, 0, kind, &pair);
	ck_assert_str_eq(kind, "other");	/* the step's first fill, before any marker */
	for (int i = 1; i <= 8; i++) {
		phase_row(r.out, i, kind, &pair);
		ck_assert_msg(strcmp(kind, kinds[i - 1]) == 0, "%s phase %d: %s", schedule, i, kind);
		ck_assert_msg(pair == want[i - 1], "%s phase %d pairs with %d, not %d", schedule, i,
		    pair, want[i - 1]);
	}
	run_free(&r);
	run_free(&w);
	remove(path);
}

START_TEST(one_f_one_b)
{
	static const char *const kinds[8] = { "forward", "backward", "forward", "backward",
		"forward", "backward", "forward", "backward" };
	static const int want[8] = { -1, 1, -1, 3, -1, 5, -1, 7 };

	check_phases("1f1b", kinds, want);
}
END_TEST

START_TEST(gpipe)
{
	static const char *const kinds[8] = { "forward", "forward", "forward", "forward",
		"backward", "backward", "backward", "backward" };
	static const int want[8] = { -1, -1, -1, -1, 4, 3, 2, 1 };

	check_phases("gpipe", kinds, want);
}
END_TEST

/* GPipe holds every micro-batch's activations at once: under a limit 40%
 * below the peak ebb tracks without one, the stage computes the same, and
 * its trace has the same markers. */
START_TEST(gpipe_under_a_limit)
{
	const char *path = tmp_file("pipe");
	const char *rep[] = { "report", path, NULL };
	const char *off[] = { "EBB_MODE=off", NULL };
	struct run_result w, r, a;
	char limit[64];
	const char *more[] = { "EBB_MODE=offload", limit, NULL };

	run_stage("gpipe", path, NULL, &w);
	ebb_cmd(&r, rep);
	unsigned long long peak = value_of(r.out, "peak-bytes: ");
	run_free(&r);
	snprintf(limit, sizeof limit, "EBB_LIMIT=%llu", peak * 6 / 10);
	run_free(&w);
	run_stage("gpipe", path, more, &w);
	run_stage("gpipe", NULL, off, &a);	/* without ebb: every call passed through */
	const char *c1 = strstr(w.out, "checksum "), *c2 = strstr(a.out, "checksum ");
	ck_assert(c1 != NULL && c2 != NULL);
	ck_assert_int_eq(strncmp(c1, c2, 25), 0);
	struct trace t;
	trace_load(path, &t);
	ck_assert_uint_gt(summary(&t, "offloads"), 0);
	ck_assert_uint_le(summary(&t, "held-peak-bytes"), peak * 6 / 10);
	trace_free(&t);
	ebb_cmd(&r, rep);
	ck_assert_uint_eq(value_of(r.out, "stage-markers: "), 6 * 8 * 2);
	run_free(&r);
	run_free(&w);
	run_free(&a);
	remove(path);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("pipeline");
	TCase *tc = tcase_create("one rank");

	tcase_set_timeout(tc, 120);
	add_test(tc, one_f_one_b);
	add_test(tc, gpipe);
	add_test(tc, gpipe_under_a_limit);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
