/*
 * check_pipeline.c: pipeline stage markers and phases (ebb-trace(5)'s N
 * records, policy/phase.c) on the fake driver and NCCL.
 *
 * One rank: the workload's pipeline stage, whose phases each open with a
 * send and a receive to itself (a pipeline of one stage), in 1F1B and
 * GPipe order, 4 micro-batches of 6 activations of 4 MiB a step. ebb
 * report and ebb timeline count every send and receive as a marker; ebb
 * plan finds 4 forward and 4 backward phases, each backward paired with
 * its micro-batch's forward (1F1B: the one just before it; GPipe: in
 * reverse); and under a limit 40% below the job's peak the stage computes
 * what it computes without ebb.
 *
 * Processes: the workload's stage, 4 of them, a pipeline whose NCCL
 * communicator meets in shared memory (tests/fakecuda/README.md), in GPipe,
 * 1F1B and interleaved (2 virtual stages a rank) order: phases found on
 * every rank, results those without ebb, every stage under one limit 40%
 * below stage 0's peak.
 */
#include "config.h"

#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "integ.h"
#include "testutil.h"

/* The phase row i of ebb plan's table: its kind and the phase it pairs with
 * (-1: none), and the MiB of that phase's buffers it uses (0: none). */
static void
phase_row_mib(const char *out, int i, char kind[16], int *pair, double *mib)
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
	const char *paren = *pair >= 0 ? strchr(of, '(') : NULL;
	*mib = paren != NULL && paren < eol ? strtod(paren + 1, NULL) : 0;
}

static void
phase_row(const char *out, int i, char kind[16], int *pair)
{
	double mib;

	phase_row_mib(out, i, kind, pair, &mib);
}

/* The last trace note key of t (the last plan's), a number (the test
 * fails without one). */
static uint64_t
note_u64(const struct trace *t, const char *key)
{
	for (size_t i = t->n; i-- > 0;)
		if (t->r[i].type == 'Q' && t->r[i].n >= 3 && strcmp(t->r[i].f[1], key) == 0)
			return strtoull(t->r[i].f[2], NULL, 10);
	ck_abort_msg("no %s note", key);
	return 0;
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
	    "backward, 1 other\n") != NULL, "%s", r.out);
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
/* Gradient accumulation on one rank, with no NCCL: ebb plan cuts the
 * iteration at the turns of memory, a forward and a backward for each of
 * the workload's 4 micro-batches, each backward paired with its forward. */
START_TEST(accumulation)
{
	char *argv[] = { workload_path(0), "plan", "8", NULL };
	const char *env[] = { "WORKLOAD_ACCUM=4", "WORKLOAD_TEMPS=1", "WORKLOAD_LAYER_US=100",
		NULL };
	const char *path = tmp_file("accum");
	const char *rep[] = { "report", path, NULL };
	const char *plan[] = { "plan", path, "-f", "0.6", NULL };
	struct run_result w, r;
	char kind[16];
	int pair;

	run_ebb(argv, env, path, &w);
	expect_ok(&w);
	ebb_cmd(&r, rep);
	ck_assert_msg(r.status == 0, "%s", r.err);
	ck_assert_uint_eq(value_of(r.out, "stage-markers: "), 0);
	ck_assert_uint_eq(value_of(r.out, "stage-phases: "), 0);
	run_free(&r);
	ebb_cmd(&r, plan);
	ck_assert_msg(r.status == 0, "%s", r.err);
	ck_assert_msg(strstr(r.out, "micro-batch phases: 8 from the turns of memory (no NCCL send "
	    "or receive to a stage beside this rank): 4 forward, 4 backward, 0 other\n") != NULL,
	    "%s", r.out);
	ck_assert_msg(strstr(r.out, "siblings there (the plan takes one decision for each chain)\n")
	    != NULL, "%s", r.out);
	for (int m = 0; m < 4; m++) {
		phase_row(r.out, 2 * m, kind, &pair);
		ck_assert_str_eq(kind, "forward");
		phase_row(r.out, 2 * m + 1, kind, &pair);
		ck_assert_str_eq(kind, "backward");
		ck_assert_int_eq(pair, 2 * m);
	}
	run_free(&r);
	const char *alone[] = { "plan", path, "-f", "0.6", "--no-phases", NULL };
	ebb_cmd(&r, alone);
	ck_assert_msg(r.status == 0, "%s", r.err);
	ck_assert_msg(strstr(r.out, "siblings there (--no-phases: the plan decides each gap "
	    "alone)\n") != NULL, "%s", r.out);
	run_free(&r);
	run_free(&w);
	remove(path);
}
END_TEST

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
	/* the plan's phases are the markers': a send and a receive at each
	 * of the 8 phases' starts of the 4 micro-batches */
	ck_assert_uint_eq(note_u64(&t, "plan-stage-markers"), 4 * 2 * 2);
	trace_free(&t);
	ebb_cmd(&r, rep);
	ck_assert_uint_eq(value_of(r.out, "stage-markers: "), 6 * 8 * 2);
	run_free(&r);
	run_free(&w);
	run_free(&a);
	remove(path);
}
END_TEST

/*
 * Gradient accumulation planned through its micro-batches alike (ebb(7)'s
 * Micro-batches alike): the workload's 4 micro-batches an iteration under a
 * limit 40% below its peak, with EBB_PLAN_PHASES unset (on), on and off. All compute
 * what the job computes without ebb and hold the limit; with it on, the
 * whole iteration's plan (the last: the first may be a micro-batch's, taken
 * for the iteration until the step is seen) chose gaps together with their
 * siblings (plan-moves-shared), with it off none, and no stage marker cut
 * the phases.
 */
START_TEST(accumulation_planned_alike)
{
	char *argv[] = { workload_path(0), "plan", "12", NULL };
	const char *path = tmp_file("accum-alike");
	const char *rep[] = { "report", path, NULL };
	const char *off[] = { "EBB_MODE=off", "WORKLOAD_ACCUM=4", "WORKLOAD_TEMPS=1",
		"WORKLOAD_LAYER_US=100", NULL };
	const char *observe[] = { "EBB_MODE=observe", "WORKLOAD_ACCUM=4", "WORKLOAD_TEMPS=1",
		"WORKLOAD_LAYER_US=100", NULL };
	char limit[64];
	const char *env[] = { "WORKLOAD_ACCUM=4", "WORKLOAD_TEMPS=1", "WORKLOAD_LAYER_US=100",
		"EBB_MODE=offload", limit, NULL, NULL };
	struct run_result a, w, r;

	run_ebb(argv, observe, path, &w);
	expect_ok(&w);
	run_free(&w);
	ebb_cmd(&r, rep);
	unsigned long long peak = value_of(r.out, "peak-bytes: ");
	run_free(&r);
	run_ebb(argv, off, NULL, &a);
	expect_ok(&a);
	const char *want = strstr(a.out, "checksum ");
	ck_assert_ptr_nonnull(want);
	snprintf(limit, sizeof limit, "EBB_LIMIT=%llu", peak * 6 / 10);
	/* the default (on), then on and off by the variable */
	const char *setting[] = { NULL, "EBB_PLAN_PHASES=1", "EBB_PLAN_PHASES=0" };
	for (int k = 0; k < 3; k++) {
		int on = k < 2;
		env[5] = setting[k];
		run_ebb(argv, env, path, &w);
		expect_ok(&w);
		const char *got = strstr(w.out, "checksum ");
		ck_assert_ptr_nonnull(got);
		ck_assert_int_eq(strncmp(got, want, 25), 0);
		struct trace t;
		trace_load(path, &t);
		ck_assert_uint_le(summary(&t, "held-peak-bytes"), peak * 6 / 10);
		ck_assert_uint_gt(note_u64(&t, "plan-moves"), 0);
		ck_assert_uint_eq(note_u64(&t, "plan-stage-markers"), 0);
		if (on)
			ck_assert_uint_gt(note_u64(&t, "plan-moves-shared"), 0);
		else
			ck_assert_uint_eq(note_u64(&t, "plan-moves-shared"), 0);
		trace_free(&t);
		run_free(&w);
	}
	run_free(&a);
	remove(path);
}
END_TEST

/* ---- a pipeline of processes ---- */

#define RANKS 4

/* The workload's stage r of a pipeline of RANKS processes, started with
 * the fake driver and libebb.so preloaded, its output in out. Returns its
 * process id. */
static pid_t
start_stage(int r, const char *schedule, const char *id, const char *mode, const char *limit,
    const char *trace, const char *out)
{
	char v[8][4200];
	char *argv[] = { workload_path(0), "stage", "6", NULL };
	char *env[16];
	int n = 0;
	/* the sanitizers' options that make check sets (./dev.sh asan), which
	 * a stage needs to start with libebb.so built with them */
	static const char *const keep[] = { "ASAN_OPTIONS", "LSAN_OPTIONS", "UBSAN_OPTIONS" };
	char kept[3][4200];

	snprintf(v[0], sizeof v[0], "LD_PRELOAD=%s", getenv("EBBTEST_LIBEBB"));
	snprintf(v[1], sizeof v[1], "LD_LIBRARY_PATH=%s", getenv("EBBTEST_FAKECUDA"));
	snprintf(v[2], sizeof v[2], "EBB_TRACE=%s", trace != NULL ? trace : "");
	snprintf(v[3], sizeof v[3], "EBB_MODE=%s", mode);
	snprintf(v[4], sizeof v[4], "WORKLOAD_RANK=%d", r);
	snprintf(v[5], sizeof v[5], "WORKLOAD_SCHEDULE=%s", schedule);
	snprintf(v[6], sizeof v[6], "WORKLOAD_NCCL_ID=%s", id);
	snprintf(v[7], sizeof v[7], "EBB_LIMIT=%s", limit != NULL ? limit : "");
	for (int i = 0; i < (limit != NULL ? 8 : 7); i++)
		env[n++] = v[i];
	env[n++] = "WORKLOAD_RANKS=4";
	env[n++] = "EBB_CUPTI=0";
	env[n++] = "EBB_VERBOSE=1";
	for (int i = 0; i < 3; i++)
		if (getenv(keep[i]) != NULL) {
			snprintf(kept[i], sizeof kept[i], "%s=%s", keep[i], getenv(keep[i]));
			env[n++] = kept[i];
		}
	env[n] = NULL;
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
			_exit(126);
		execve(argv[0], argv, env);
		_exit(127);
	}
	return pid;
}

/* Run the RANKS stages at once under mode (and limit), each rank's trace
 * at trace[r] (NULL: none) and output into out[r] (malloc'd). */
static void
run_pipeline(const char *schedule, const char *mode, const char *limit,
    const char *const trace[RANKS], char *out[RANKS])
{
	char id[64], path[RANKS][4096];
	pid_t pid[RANKS];

	snprintf(id, sizeof id, "ebbtest-%ld-%s-%s", (long)getpid(), schedule, mode);
	for (int r = 0; r < RANKS; r++) {
		snprintf(path[r], sizeof path[r], "%s", tmp_file("stageout"));
		pid[r] = start_stage(r, schedule, id, mode, limit, trace ? trace[r] : NULL, path[r]);
	}
	for (int r = 0; r < RANKS; r++) {
		int status;
		ck_assert_int_eq(waitpid(pid[r], &status, 0), pid[r]);
		out[r] = read_file(path[r]);
		ck_assert_ptr_nonnull(out[r]);
		ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0 &&
		    strstr(out[r], "checksum ") != NULL, "%s stage %d (%s): status %d:\n%s", schedule,
		    r, mode, status, out[r]);
		remove(path[r]);
	}
}

/* The checksum line of a stage's output (its 16 hex digits). */
static void
checksum(const char *out, char sum[17])
{
	const char *p = strstr(out, "checksum ");

	ck_assert_ptr_nonnull(p);
	snprintf(sum, 17, "%s", p + 9);
}

/*
 * The stages of one schedule, 8 micro-batches on v virtual stages a rank:
 * without ebb, in observe mode and under one EBB_LIMIT 40% below stage 0's
 * peak in observe mode. Each rank computes what it computes without ebb;
 * in observe mode ebb plan finds 8 v forward and 8 v backward phases on
 * every rank, each backward using one forward's 3 activations of 2 MiB
 * (6 MiB; the last stage's also the 64 KiB output it keeps), no forward
 * taken twice; under the limit every stage holds it and its exit summary
 * names it, and the stages that hold more move more (below).
 */
static void
check_processes(const char *schedule, int v)
{
	const char *trace[RANKS];
	char *off[RANKS], *obs[RANKS], *lim[RANKS];
	char want[RANKS][17], got[17], limit[32], line[96];
	uint64_t moved[RANKS];

	for (int r = 0; r < RANKS; r++) {
		char *t = strdup(tmp_file("stagetrace"));
		ck_assert_ptr_nonnull(t);
		trace[r] = t;
	}
	run_pipeline(schedule, "off", NULL, NULL, off);
	run_pipeline(schedule, "observe", NULL, trace, obs);
	unsigned long long peak0 = 0;
	for (int r = 0; r < RANKS; r++) {
		checksum(off[r], want[r]);
		checksum(obs[r], got);
		ck_assert_str_eq(got, want[r]);
		struct run_result rr;
		const char *rep[] = { "report", trace[r], NULL };
		const char *plan[] = { "plan", trace[r], "-f", "0.6", NULL };
		ebb_cmd(&rr, rep);
		/* a send and a receive a micro-batch's forward and backward on each
		 * virtual stage, but none before the first and after the last */
		ck_assert_uint_eq(value_of(rr.out, "stage-markers: "), 6ULL * 8 * (r == 0 ||
		    r == RANKS - 1 ? 2 + 4 * (v - 1) : 4 * v));
		if (r == 0)
			peak0 = value_of(rr.out, "peak-bytes: ");
		run_free(&rr);
		ebb_cmd(&rr, plan);
		ck_assert_msg(rr.status == 0, "%s", rr.err);
		snprintf(line, sizeof line, " stage markers: %d forward, %d backward, ", 8 * v, 8 * v);
		ck_assert_msg(strstr(rr.out, line) != NULL, "%s stage %d:\n%s", schedule, r, rr.out);
		int taken[64] = { 0 }, nb = 0;
		for (int i = 0; i < 8 * v * 2 + 1; i++) {
			char kind[16];
			int pair;
			const char *rows = strstr(rr.out, "uses the buffers of\n");
			int nrows = 0;
			for (const char *q = rows; q != NULL && (q = strchr(q, '\n')) != NULL &&
			    q[1] != '\0' && strncmp(q + 1, "floor", 5) != 0 && q[1] != '\n'; q++)
				nrows++;
			if (i >= nrows)
				break;
			double mib;
			phase_row_mib(rr.out, i, kind, &pair, &mib);
			if (strcmp(kind, "backward") != 0)
				continue;
			nb++;
			/* all 3 activations of its forward (the last stage's also the
			 * output it keeps) */
			ck_assert_msg(mib >= 6.0 && mib < 6.1, "%s stage %d phase %d: %.2f MiB",
			    schedule, r, i, mib);
			ck_assert_int_ge(pair, 0);
			ck_assert_int_lt(pair, 64);
			ck_assert_int_eq(taken[pair]++, 0);
		}
		ck_assert_int_eq(nb, 8 * v);
		run_free(&rr);
	}
	snprintf(limit, sizeof limit, "%llu", peak0 * 6 / 10);
	run_pipeline(schedule, "offload", limit, trace, lim);
	for (int r = 0; r < RANKS; r++) {
		checksum(lim[r], got);
		ck_assert_str_eq(got, want[r]);
		struct trace t;
		trace_load(trace[r], &t);
		ck_assert_uint_le(summary(&t, "held-peak-bytes"), peak0 * 6 / 10);
		moved[r] = summary(&t, "planned-offloads");
		trace_free(&t);
		snprintf(line, sizeof line, "summary (pipeline stage %d of %d): ", r, RANKS);
		ck_assert_msg(strstr(lim[r], line) != NULL, "no '%s' in:\n%s", line, lim[r]);
	}
	/* GPipe's stages hold alike, and each moves; in 1F1B orders the first
	 * holds the most micro-batches and the last the fewest, so it moves more
	 * than the last (which the plan's times, from the host here, leave the
	 * order of the middle ones to) */
	ck_assert_uint_gt(moved[0], 0);
	for (int r = 1; r < RANKS; r++)
		if (strcmp(schedule, "gpipe") == 0)
			ck_assert_uint_gt(moved[r], 0);
	if (strcmp(schedule, "gpipe") != 0)
		ck_assert_uint_gt(moved[0], moved[RANKS - 1]);
	for (int r = 0; r < RANKS; r++) {
		free(off[r]);
		free(obs[r]);
		free(lim[r]);
		remove(trace[r]);
		free((char *)trace[r]);
	}
}

START_TEST(processes_gpipe)
{
	check_processes("gpipe", 1);
}
END_TEST

START_TEST(processes_1f1b)
{
	check_processes("1f1b", 1);
}
END_TEST

START_TEST(processes_interleaved)
{
	check_processes("interleaved", 2);
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
	add_test(tc, accumulation_planned_alike);
	add_test(tc, accumulation);
	suite_add_tcase(s, tc);
	TCase *tp = tcase_create("processes");
	tcase_set_timeout(tp, 300);
	add_test(tp, processes_gpipe);
	add_test(tp, processes_1f1b);
	add_test(tp, processes_interleaved);
	suite_add_tcase(s, tp);
	return run_suite(s);
}
