/*
 * check_diag.c: the pictures: `ebb timeline` (Chrome trace-event JSON) and
 * `ebb plan --svg / --memory-svg` (SVG), each read back with a strict
 * parser (docparse.h) and checked against the format's rules and against
 * what the trace holds.
 *
 * The hand-written trace, in offload mode: three iteration starts of 6
 * operations (seq 1, 7, 13; the third cut short, so iteration 2 is the one
 * planned and the last whole one), each operation 10 ms on the GPU.
 * Buffer 1 (1 GiB) lives throughout, used by each iteration's first and
 * last operations; an activation of 1 GiB (buffers 2, then 3) lives from
 * after the second operation to after the fourth. In iteration 2 the plan
 * offloads buffer 1 after operation 7 (released at t 950) and restores it
 * after operation 10 (t 1150); operation 12 stalls 40 ns for it and the
 * host waits 20 ns at the gate. The CUPTI clock reads 10^9 at t 60.
 *
 * Then the same on a trace of the workload under libebb.so on the fake
 * driver.
 */
#include "config.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "docparse.h"
#include "integ.h"
#include "testutil.h"
#include "trace_format.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

static const char body[] =
	"K 1 1 ok _ZN2at6native6kernelIfEEvv\n"
	"Q 50 cupti /x/libcupti.so\n"
	"Q 60 cupti-clock 1000000000\n"
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
	"O 810 7 1 1073741824 plan\n"
	"L 900 8 0x1 1 0\n"
	"A 910 3 0x7f0040000000 1073741824 0x1 async 0x0\n"
	"U 950 0 1 1073741824 released\n"
	"L 1000 9 0x1 1 1 3\n"
	"L 1100 10 0x1 1 1 3\n"
	"F 1110 3 0x1 async\n"
	"B 1150 11 1 1073741824 prefetch\n"
	"L 1200 11 0x1 1 0\n"
	"W 1290 12 1073741824 40\n"
	"H 1295 12 20 gate\n"
	"L 1300 12 0x1 1 1 1\n"
	"Y 1350 13 stream 0x1\n"
	"L 1400 14 0x1 1 1 1\n"
	"I 1410 1 1 6\n"
	"I 1420 2 7 6\n"
	"I 1430 3 13 6\n";

/* The trace: header, body, a G record of 10 ms for operations 1 to 12, then
 * extra. Returns its path. */
static const char *
write_trace(const char *extra)
{
	const char *path = tmp_file("diag");
	FILE *f = fopen(path, "w");

	ck_assert_ptr_nonnull(f);
	fprintf(f, "%s %d ebb=%s pid=4711 mode=offload epoch=1795952310.511351266\n%s",
	    EBB_TRACE_MAGIC, EBB_TRACE_VERSION, PACKAGE_VERSION, body);
	for (int k = 1; k <= 12; k++)
		fprintf(f, "G %d %llu %llu\n", k, 1000000000ULL + (k - 1) * 10000000ULL,
		    1000000000ULL + k * 10000000ULL);
	fprintf(f, "Q 1500 cupti-detached exit\n%s", extra);
	ck_assert_int_eq(fclose(f), 0);
	return path;
}

/* The file at path parsed as JSON into *v; fails the test where it is not
 * JSON. */
static void
load_json(const char *path, struct jv *v)
{
	char err[256];
	char *text = read_file(path);

	ck_assert_msg(text != NULL, "%s not written", path);
	ck_assert_msg(json_parse(text, v, err, sizeof err) == 0, "%s is not JSON: %s", path, err);
	free(text);
}

/* Field key of event e as a number; fails the test where it is missing. */
static double
num_of(const struct jv *e, const char *key)
{
	const struct jv *v = json_get(e, key);

	ck_assert_msg(v != NULL && v->type == J_NUM, "an event without a number '%s'", key);
	return v->num;
}

static const char *
str_of(const struct jv *e, const char *key)
{
	const struct jv *v = json_get(e, key);

	ck_assert_msg(v != NULL && v->type == J_STR, "an event without a string '%s'", key);
	return v->str;
}

/*
 * The trace-event format's rules for what ebb writes: an object whose
 * traceEvents is an array of objects, each with a phase of X, i, C or M,
 * numeric pid and tid, and a name; X and i and C with a time, X with a
 * duration of 0 or more, i with a scope of t, p or g, C with arguments
 * that are all numbers, M naming a process or a thread in args.name.
 * Returns the events.
 */
static const struct jv *
check_rules(const struct jv *doc)
{
	const struct jv *ev = json_get(doc, "traceEvents");

	ck_assert_int_eq(doc->type, J_OBJ);
	ck_assert_msg(ev != NULL && ev->type == J_ARR, "no traceEvents array");
	for (size_t i = 0; i < ev->n; i++) {
		const struct jv *e = &ev->item[i];
		ck_assert_int_eq(e->type, J_OBJ);
		const char *ph = str_of(e, "ph");
		ck_assert_msg(strlen(ph) == 1 && strchr("XiCM", ph[0]) != NULL, "phase '%s'", ph);
		num_of(e, "pid");
		num_of(e, "tid");
		str_of(e, "name");
		const struct jv *args = json_get(e, "args");
		if (ph[0] == 'M') {
			const char *name = str_of(e, "name");
			ck_assert_msg(strcmp(name, "process_name") == 0 ||
			    strcmp(name, "thread_name") == 0, "metadata '%s'", name);
			ck_assert_ptr_nonnull(args);
			str_of(args, "name");
			continue;
		}
		ck_assert(num_of(e, "ts") >= 0);
		if (ph[0] == 'X')
			ck_assert(num_of(e, "dur") >= 0);
		if (ph[0] == 'i') {
			const char *s = str_of(e, "s");
			ck_assert_msg(strcmp(s, "t") == 0 || strcmp(s, "p") == 0 ||
			    strcmp(s, "g") == 0, "instant scope '%s'", s);
		}
		if (ph[0] == 'C') {
			ck_assert_msg(args != NULL && args->type == J_OBJ && args->n > 0,
			    "a counter without values");
			for (size_t k = 0; k < args->n; k++)
				ck_assert_int_eq(args->item[k].type, J_NUM);
		}
	}
	return ev;
}

/* The first event of phase ph named name (the prefix name where prefix),
 * or NULL; *count is how many there are. */
static const struct jv *
find_event(const struct jv *ev, char ph, const char *name, int prefix, size_t *count)
{
	const struct jv *first = NULL;

	*count = 0;
	for (size_t i = 0; i < ev->n; i++) {
		const char *p = str_of(&ev->item[i], "ph"), *n = str_of(&ev->item[i], "name");
		if (p[0] != ph || (prefix ? strncmp(n, name, strlen(name)) : strcmp(n, name)) != 0)
			continue;
		if (first == NULL)
			first = &ev->item[i];
		(*count)++;
	}
	return first;
}

/* The values of counter name, in order, into v (at most max); returns how many. */
static size_t
counter_values(const struct jv *ev, const char *name, const char *key, double *v, size_t max,
    double *first_ts)
{
	size_t n = 0;

	for (size_t i = 0; i < ev->n; i++) {
		const struct jv *e = &ev->item[i];
		if (str_of(e, "ph")[0] != 'C' || strcmp(str_of(e, "name"), name) != 0)
			continue;
		if (n == 0 && first_ts != NULL)
			*first_ts = num_of(e, "ts");
		if (n < max)
			v[n] = num_of(json_get(e, "args"), key);
		n++;
	}
	return n;
}

#define HELD "device memory held (GiB)"
#define HOST "host memory of offloaded buffers (GiB)"

START_TEST(timeline_of_an_offload_trace)
{
	const char *trace = write_trace(""), *out = tmp_file("diagjson");
	const char *args[] = { "timeline", trace, "-o", out, NULL };
	struct run_result r;
	struct jv doc;
	size_t n;

	ebb_cmd(&r, args);
	ck_assert_msg(r.status == 0, "status %d: %s", r.status, r.err);
	ck_assert_ptr_nonnull(strstr(r.err, " events of "));
	load_json(out, &doc);
	const struct jv *ev = check_rules(&doc), *e;
	/* the device: a kernel slice per G record, at the trace's clock */
	e = find_event(ev, 'X', "at::native::kernel", 0, &n);
	ck_assert_uint_eq(n, 12);
	ck_assert_int_eq((int)num_of(e, "pid"), 1);
	ck_assert_double_eq_tol(num_of(e, "ts"), 0.060, 1e-9);
	ck_assert_double_eq_tol(num_of(e, "dur"), 10000.0, 1e-9);
	int stream_tid = (int)num_of(e, "tid");
	int named = 0;
	for (size_t i = 0; i < ev->n; i++)
		named += strcmp(str_of(&ev->item[i], "ph"), "M") == 0 &&
		    (int)num_of(&ev->item[i], "tid") == stream_tid &&
		    (int)num_of(&ev->item[i], "pid") == 1 &&
		    strcmp(str_of(json_get(&ev->item[i], "args"), "name"), "stream 0x1") == 0;
	ck_assert_int_eq(named, 1);
	/* the host: each launch, the synchronisation to the next call, the wait */
	find_event(ev, 'i', "launch at::native::kernel", 0, &n);
	ck_assert_uint_eq(n, 13);
	e = find_event(ev, 'X', "sync stream", 0, &n);
	ck_assert_uint_eq(n, 1);
	ck_assert_double_eq_tol(num_of(e, "ts"), 1.350, 1e-9);
	ck_assert_double_eq_tol(num_of(e, "dur"), 0.050, 1e-9);
	e = find_event(ev, 'X', "wait: gate", 0, &n);
	ck_assert_uint_eq(n, 1);
	ck_assert_double_eq_tol(num_of(e, "ts"), 1.275, 1e-9);
	ck_assert_double_eq_tol(num_of(e, "dur"), 0.020, 1e-9);
	/* ebb: the offload from its queueing to its release, the restore, the stall */
	e = find_event(ev, 'X', "offload 1", 0, &n);
	ck_assert_uint_eq(n, 1);
	ck_assert_int_eq((int)num_of(e, "pid"), 3);
	ck_assert_double_eq_tol(num_of(e, "ts"), 0.810, 1e-9);
	ck_assert_double_eq_tol(num_of(e, "dur"), 0.140, 1e-9);
	e = find_event(ev, 'i', "restore 1", 0, &n);
	ck_assert_uint_eq(n, 1);
	ck_assert_double_eq_tol(num_of(e, "ts"), 1.150, 1e-9);
	e = find_event(ev, 'X', "stall for seq 12", 0, &n);
	ck_assert_uint_eq(n, 1);
	ck_assert_double_eq_tol(num_of(e, "ts"), 1.250, 1e-9);
	ck_assert_double_eq_tol(num_of(e, "dur"), 0.040, 1e-9);
	/* the iteration starts, across all tracks, at their first operation's time */
	e = find_event(ev, 'i', "iteration ", 1, &n);
	ck_assert_uint_eq(n, 3);
	ck_assert_str_eq(str_of(e, "s"), "g");
	e = find_event(ev, 'i', "iteration 2", 0, &n);
	ck_assert_double_eq_tol(num_of(e, "ts"), 0.800, 1e-9);
	/* the counters: 0 at the start, then each change */
	static const double held[] = { 0, 1, 2, 1, 2, 1, 0, 1 };
	static const double host[] = { 0, 0, 0, 0, 0, 1, 1, 0 };
	double v[16];
	ck_assert_uint_eq(counter_values(ev, HELD, "held", v, 16, NULL), 8);
	for (int i = 0; i < 8; i++)
		ck_assert_double_eq_tol(v[i], held[i], 1e-4);
	ck_assert_uint_eq(counter_values(ev, HOST, "offloaded", v, 16, NULL), 8);
	for (int i = 0; i < 8; i++)
		ck_assert_double_eq_tol(v[i], host[i], 1e-4);
	json_free(&doc);
	run_free(&r);
	remove(trace);
	remove(out);
}
END_TEST

/* --iteration and --window keep what falls in them; the counters start
 * where the window does, with what is held there. */
START_TEST(timeline_window)
{
	const char *trace = write_trace(""), *out = tmp_file("diagjson");
	const char *iter[] = { "timeline", trace, "-o", out, "--iteration", "2", NULL };
	const char *win[] = { "timeline", trace, "-o", out, "--window", "0,0.0005", NULL };
	struct run_result r;
	struct jv doc;
	double v[16], ts = -1;
	size_t n;

	ebb_cmd(&r, iter);
	ck_assert_msg(r.status == 0, "status %d: %s", r.status, r.err);
	load_json(out, &doc);
	const struct jv *ev = check_rules(&doc);
	for (size_t i = 0; i < ev->n; i++) {
		const struct jv *e = &ev->item[i];
		if (str_of(e, "ph")[0] == 'M' || num_of(e, "pid") == 1)
			continue;	/* names; the GPU's times, 10 ms an operation */
		ck_assert_msg(num_of(e, "ts") >= 0.8 && num_of(e, "ts") < 1.4, "%s at %g",
		    str_of(e, "name"), num_of(e, "ts"));
	}
	find_event(ev, 'i', "launch at::native::kernel", 0, &n);
	ck_assert_uint_eq(n, 6);
	/* the device's slices of operations 7 to 12, 10 ms each from 60 ms on */
	const struct jv *e = find_event(ev, 'X', "at::native::kernel", 0, &n);
	ck_assert_uint_eq(n, 6);
	ck_assert_double_eq_tol(num_of(e, "ts"), 60000.060, 1e-6);
	ck_assert_uint_eq(counter_values(ev, HELD, "held", v, 16, &ts), 5);
	ck_assert_double_eq_tol(ts, 0.8, 1e-9);
	ck_assert_double_eq_tol(v[0], 1, 1e-4);
	json_free(&doc);
	run_free(&r);
	ebb_cmd(&r, win);
	ck_assert_msg(r.status == 0, "status %d: %s", r.status, r.err);
	load_json(out, &doc);
	ev = check_rules(&doc);
	find_event(ev, 'i', "launch at::native::kernel", 0, &n);
	ck_assert_uint_eq(n, 3);	/* t 200, 300 and 400 */
	json_free(&doc);
	run_free(&r);
	remove(trace);
	remove(out);
}
END_TEST

/* Errors name what is wrong and end with the statuses ebb(1) gives. */
START_TEST(timeline_errors)
{
	const char *trace = write_trace(""), *out = tmp_file("diagjson");
	const char *bad = write_trace("A 1600 4 0x7f0080000000 lots 0x1 async 0x0\n");
	const char *noiter[] = { "timeline", trace, "-o", out, "--iteration", "9", NULL };
	const char *nodir[] = { "timeline", trace, "-o", "/nonexistent/dir/x.json", NULL };
	const char *malformed[] = { "timeline", bad, "-o", out, NULL };
	const char *noout[] = { "timeline", trace, NULL };
	const char *badwin[] = { "timeline", trace, "-o", out, "--window", "5,2", NULL };
	struct run_result r;

	ebb_cmd(&r, noiter);
	ck_assert_int_eq(r.status, 1);
	ck_assert_ptr_nonnull(strstr(r.err, "has no iteration 9"));
	run_free(&r);
	ebb_cmd(&r, nodir);
	ck_assert_int_eq(r.status, 2);
	ck_assert_ptr_nonnull(strstr(r.err, "cannot write /nonexistent/dir/x.json"));
	run_free(&r);
	ebb_cmd(&r, malformed);
	ck_assert_int_eq(r.status, 1);
	ck_assert_msg(strstr(r.err, "is not a number") != NULL && strstr(r.err, bad) != NULL,
	    "%s", r.err);
	run_free(&r);
	ebb_cmd(&r, noout);
	ck_assert_int_eq(r.status, 2);
	ck_assert_ptr_nonnull(strstr(r.err, "usage: ebb timeline"));
	run_free(&r);
	ebb_cmd(&r, badwin);
	ck_assert_int_eq(r.status, 2);
	ck_assert_ptr_nonnull(strstr(r.err, "--window '5,2'"));
	run_free(&r);
	remove(trace);
	remove(bad);
	remove(out);
}
END_TEST

/* The file at path parsed as XML with an svg root; fails the test where it
 * is not. */
static void
load_svg(const char *path, struct xel *root)
{
	char err[256];
	char *text = read_file(path);

	ck_assert_msg(text != NULL, "%s not written", path);
	ck_assert_msg(xml_parse(text, root, err, sizeof err) == 0, "%s is not XML: %s", path, err);
	ck_assert_str_eq(root->name, "svg");
	ck_assert_str_eq(xml_attr(root, "xmlns"), "http://www.w3.org/2000/svg");
	free(text);
}

/* The title of element e (its first child named title), or "". */
static const char *
title_of(const struct xel *e)
{
	for (size_t i = 0; e != NULL && i < e->nchild; i++)
		if (strcmp(e->child[i].name, "title") == 0)
			return e->child[i].text;
	return "";
}

/* The points of a polyline: how many. */
static size_t
points_of(const struct xel *e)
{
	const char *p = xml_attr(e, "points");
	size_t n = 0;

	for (; p != NULL && *p; p++)
		n += *p == ',';
	return n;
}

/*
 * --svg: the plan at 1 GiB (met with one move, the step time unchanged),
 * the job with nothing moved at 2 GiB, and the user's mark; --memory-svg:
 * the memory over iteration 2 with nothing moved (2 GiB at operation 2),
 * as measured (2 GiB at operation 1: buffer 3 allocated before buffer 1's
 * memory was released), under the plan (1 GiB) and the target, with
 * buffer 1 named at the plan's peak.
 */
START_TEST(plan_pictures)
{
	const char *trace = write_trace(""), *svg = tmp_file("diagsvg");
	const char *mem = tmp_file("diagmem");
	const char *args[] = { "plan", trace, "-t", "1G", "--d2h", "1000", "--h2d", "1000",
		"--svg", svg, "--mark", "ckpt=1.5G,1.27", "--memory-svg", mem, NULL };
	struct run_result r;
	struct xel root;
	const struct xel *e;

	ebb_cmd(&r, args);
	ck_assert_msg(r.status == 0, "status %d: %s", r.status, r.err);
	load_svg(svg, &root);
	e = xml_by_id(&root, "moves");
	ck_assert_ptr_nonnull(e);
	ck_assert_uint_eq(e->nchild, 2);	/* a circle and its tag */
	ck_assert_str_eq(title_of(&e->child[0]), "1.0G (1, 1)");
	ck_assert_str_eq(title_of(&xml_by_id(&root, "baseline")->child[0]), "without moves (1, 2)");
	ck_assert_str_eq(title_of(&xml_by_id(&root, "marks")->child[0]), "ckpt (1.27, 1.5)");
	ck_assert_ptr_null(xml_by_id(&root, "recompute"));
	ck_assert(xml_has_text(&root, "peak device memory, GiB"));
	xml_free(&root);
	load_svg(mem, &root);
	static const char *const series[][2] = {
		{ "unmoved", "nothing moved: peak 2.00 GiB at 2" },
		{ "measured", "measured, iteration 2: peak 2.00 GiB at 1" },
		{ "predicted", "plan, moves: peak 1.00 GiB at 0" },
		{ "target", "target 1.00 GiB" },
	};
	for (size_t i = 0; i < 4; i++) {
		e = xml_by_id(&root, series[i][0]);
		ck_assert_msg(e != NULL, "no %s series", series[i][0]);
		ck_assert_str_eq(e->name, "polyline");
		ck_assert_str_eq(title_of(e), series[i][1]);
	}
	/* steps of 1, 2, 1, 1, 1, 1 GiB: a point where the value changes, and the last */
	ck_assert_uint_eq(points_of(xml_by_id(&root, "measured")), 7);
	ck_assert(xml_has_text(&root, "buffer 1 (its A record's id): 1024.0 MiB"));
	xml_free(&root);
	run_free(&r);
	remove(trace);
	remove(svg);
	remove(mem);
}
END_TEST

/* --mark without --svg, and a mark that is not LABEL=SIZE,RATIO. */
START_TEST(plan_picture_errors)
{
	const char *trace = write_trace("");
	const char *nosvg[] = { "plan", trace, "--mark", "a=1G,1.2", NULL };
	const char *badmark[] = { "plan", trace, "--svg", "/dev/null", "--mark", "a=1G", NULL };
	const char *nodir[] = { "plan", trace, "-t", "1G", "--svg", "/nonexistent/d/x.svg", NULL };
	struct run_result r;

	ebb_cmd(&r, nosvg);
	ck_assert_int_eq(r.status, 2);
	ck_assert_ptr_nonnull(strstr(r.err, "give it with --svg FILE"));
	run_free(&r);
	ebb_cmd(&r, badmark);
	ck_assert_int_eq(r.status, 2);
	ck_assert_ptr_nonnull(strstr(r.err, "--mark 'a=1G' is not LABEL=SIZE,RATIO"));
	run_free(&r);
	ebb_cmd(&r, nodir);
	ck_assert_int_eq(r.status, 1);
	ck_assert_ptr_nonnull(strstr(r.err, "cannot write /nonexistent/d/x.svg"));
	run_free(&r);
	remove(trace);
}
END_TEST

/*
 * A trace of the workload under libebb.so on the fake driver (offload at a
 * limit, with recompute: check_integration's pairs of recomputed buffers).
 * At EBB_VERBOSE=1 the learning stages are said once each, in order, and
 * the exit summary's headline comes first. The timeline follows the rules,
 * has every iteration start, and its device memory never exceeds the peak
 * ebb held (the Z record, which counts whole granules). The memory picture
 * draws the plan with recompute too, at the peak ebb plan prints for it.
 */
START_TEST(pictures_of_a_run)
{
	const char *path = tmp_file("diagrun"), *out = tmp_file("diagjson");
	const char *mem = tmp_file("diagmem");
	char *argv[] = { workload_path(0), "recompute", "16", NULL };
	const char *env[] = { "WORKLOAD_PAIRS=1", "WORKLOAD_LEAD_US=200000",
		"FAKECUDA_LAUNCH_QUEUE_DELAY_US=1500", "EBB_MODE=offload", "EBB_LIMIT=96M",
		"EBB_TARGET=0.4", "EBB_RECOMPUTE=1", "EBB_D2H_GBPS=0.05", "EBB_H2D_GBPS=0.05", NULL };
	const char *tl[] = { "timeline", path, "-o", out, NULL };
	const char *pl[] = { "plan", path, "--replay", "--d2h", "0.05", "--h2d", "0.05",
		"--memory-svg", mem, NULL };
	struct run_result w, r;
	struct trace t;
	struct jv doc;
	struct xel root;
	double v[8192];
	size_t n;

	run_ebb(argv, env, path, &w);
	expect_ok(&w);
	trace_load(path, &t);
	/* at EBB_VERBOSE=1: each learning stage once, in order, then the
	 * summary's headline before the other exit lines, as the Z records count */
	static const char *const stages[] = { "iteration found: ", "recording the iteration from ",
		"plan: ", "plan running from operation ", "summary: peak held ", " launches (" };
	const char *at = w.err;
	for (size_t i = 0; i < sizeof stages / sizeof *stages; i++) {
		const char *p = strstr(at, stages[i]);
		ck_assert_msg(p != NULL, "no '%s' after the stages before it in:\n%s", stages[i], w.err);
		if (i != 2 && i != 5)
			ck_assert_int_eq(count_substr(w.err, stages[i]), 1);
		at = p;
	}
	char want[160];
	snprintf(want, sizeof want, "back, %llu buffers remade by recompute; ",
	    (unsigned long long)summary(&t, "recompute-remakes"));
	ck_assert_msg(strstr(w.err, want) != NULL, "no '%s' in:\n%s", want, w.err);
	snprintf(want, sizeof want, " s measured (the plan's last %llu), ",
	    (unsigned long long)summary(&t, "run-iterations"));
	ck_assert_msg(strstr(w.err, want) != NULL, "no '%s' in:\n%s", want, w.err);
	ebb_cmd(&r, tl);
	ck_assert_msg(r.status == 0, "status %d: %s", r.status, r.err);
	load_json(out, &doc);
	const struct jv *ev = check_rules(&doc);
	find_event(ev, 'i', "iteration ", 1, &n);
	ck_assert_uint_eq(n, count_type(&t, 'I'));
	find_event(ev, 'i', "remake ", 1, &n);
	ck_assert_uint_gt(n, 0);
	size_t nc = counter_values(ev, HELD, "held", v, 8192, NULL);
	ck_assert_uint_gt(nc, 1);
	ck_assert_uint_le(nc, 8192);
	double most = 0;
	for (size_t i = 0; i < nc; i++)
		most = fmax(most, v[i]);
	ck_assert(most > 0);
	ck_assert_msg(most * GIB <= (double)summary(&t, "held-peak-bytes") + 1, "held %g GiB", most);
	json_free(&doc);
	run_free(&r);
	ebb_cmd(&r, pl);
	ck_assert_msg(r.status == 0, "status %d: %s", r.status, r.err);
	const char *row = strstr(r.out, "\n with recompute ");
	ck_assert_ptr_nonnull(row);
	double peak = strtod(row + strlen("\n with recompute "), NULL);
	snprintf(want, sizeof want, "plan, with recompute: peak %.2f GiB at ", peak);
	load_svg(mem, &root);
	ck_assert_ptr_nonnull(xml_by_id(&root, "measured"));
	const struct xel *e = xml_by_id(&root, "predicted-recompute");
	ck_assert_ptr_nonnull(e);
	ck_assert_msg(strncmp(title_of(e), want, strlen(want)) == 0, "'%s', the table's %.2f",
	    title_of(e), peak);
	xml_free(&root);
	run_free(&r);
	trace_free(&t);
	run_free(&w);
	remove(path);
	remove(out);
	remove(mem);
}
END_TEST

/*
 * A job that departs from its iteration at its end (the workload's last
 * steps differ) and finds none again: the exit lines name the period it
 * followed, and say so, where the Z record's period (at exit) is 0.
 */
START_TEST(summary_after_a_last_departure)
{
	const char *path = tmp_file("diaglast");
	char *argv[] = { workload_path(0), "plan", "12", NULL };
	const char *env[] = { "EBB_MODE=observe", NULL };
	struct run_result w;
	struct trace t;
	char want[160];

	run_ebb(argv, env, path, &w);
	expect_ok(&w);
	trace_load(path, &t);
	ck_assert_uint_eq(summary(&t, "period"), 0);
	const struct rec *d = NULL;
	for (size_t i = 0; i < t.n; i++)
		if (t.r[i].type == 'D')
			d = &t.r[i];
	ck_assert_ptr_nonnull(d);
	ck_assert_uint_gt(num(d, 2), 0);
	snprintf(want, sizeof want, "iterations of %llu operations (the last learned: the job "
	    "departed from it", (unsigned long long)num(d, 2));
	ck_assert_msg(strstr(w.err, want) != NULL, "no '%s' in:\n%s", want, w.err);
	ck_assert_ptr_nonnull(strstr(w.err, "an iteration found, departed from at the end"));
	trace_free(&t);
	run_free(&w);
	remove(path);
}
END_TEST

/*
 * A plan whose iterations run far slower than the job's own is said at the
 * default verbosity: the fake's copies slow down at the workload's 8th
 * iteration (WORKLOAD_SLOW_LINK_AT), once the iteration has been recorded
 * and planned with fast ones, so the device waits for every restore (three
 * times the job's own iteration and more, even with the machine loaded).
 * Its absence is not asked of a run on the fake driver: without CUPTI its
 * iterations are timed by the host, and under load a run whose moves cost
 * nothing on a GPU can measure twice its recording.
 */
START_TEST(summary_warns_of_a_slow_plan)
{
	char *argv[] = { workload_path(0), "plan", "16", NULL };
	const char *slow[] = { "EBB_MODE=offload", "EBB_LIMIT=24M", "EBB_VERBOSE=0",
		"WORKLOAD_SLOW_LINK_AT=8", "WORKLOAD_SLOW_LINK_US=100000", NULL };
	static const char warn[] = "the job's iterations took ";
	struct run_result w;

	run_ebb(argv, slow, NULL, &w);
	expect_ok(&w);
	const char *p = strstr(w.err, warn);
	ck_assert_msg(p != NULL, "no '%s' in:\n%s", warn, w.err);
	p = strstr(p, " s, ");
	ck_assert_ptr_nonnull(p);
	ck_assert_msg(strtod(p + 4, NULL) >= 1.25, "%s", w.err);
	ck_assert_ptr_nonnull(strstr(w.err, "under EBB_LIMIT=24.0 MiB "));
	run_free(&w);
}
END_TEST

/*
 * The same with copies assumed at 0.05 GB/s, so that the plan is made under
 * its lowest peak without stalls: the warning blames the link, and where
 * EBB_RECOMPUTE is off, it names it as a way to cost less; with it on, it
 * does not.
 */
START_TEST(summary_warns_of_the_link)
{
	char *argv[] = { workload_path(0), "plan", "16", NULL };
	const char *env[] = { "EBB_MODE=offload", "EBB_LIMIT=24M", "EBB_VERBOSE=0",
		"EBB_D2H_GBPS=0.05", "EBB_H2D_GBPS=0.05", "WORKLOAD_SLOW_LINK_AT=8",
		"WORKLOAD_SLOW_LINK_US=100000", NULL, NULL };
	static const char hint[] = "and so may EBB_RECOMPUTE=1, which remakes buffers by "
	    "launching their producers again, away from the link";

	for (int on = 0; on <= 1; on++) {
		struct run_result w;

		env[7] = on ? "EBB_RECOMPUTE=1" : "EBB_RECOMPUTE=0";
		run_ebb(argv, env, NULL, &w);
		expect_ok(&w);
		const char *p = strstr(w.err, "the job's iterations took ");
		ck_assert_msg(p != NULL, "no warning in:\n%s", w.err);
		ck_assert_msg(strstr(p, "the copies cannot move what the limit needs in time") != NULL,
		    "%s", w.err);
		ck_assert_msg((strstr(p, hint) != NULL) == !on, "%s", w.err);
		run_free(&w);
	}
}
END_TEST

/* A plan that moves nothing (EBB_LIMIT far above the job) over iterations
 * that slowed by themselves (the workload's host works 30 ms more a layer
 * from its 8th iteration, WORKLOAD_SLOW_HOST_AT): the warning says the plan
 * moved nothing, and blames neither the link nor the moves. */
START_TEST(summary_warns_of_a_slow_plan_that_moves_nothing)
{
	char *argv[] = { workload_path(0), "plan", "16", NULL };
	const char *env[] = { "EBB_MODE=offload", "EBB_LIMIT=4G", "EBB_VERBOSE=0",
		"WORKLOAD_SLOW_HOST_AT=8", "WORKLOAD_SLOW_HOST_US=30000", NULL };
	struct run_result w;

	run_ebb(argv, env, NULL, &w);
	expect_ok(&w);
	const char *p = strstr(w.err, "the job's iterations took ");
	ck_assert_msg(p != NULL, "no warning in:\n%s", w.err);
	ck_assert_msg(strstr(p, "though the plan moved nothing: the time is ebb's own in the job's "
	    "calls") != NULL, "%s", w.err);
	ck_assert_msg(strstr(w.err, "the moves, recomputes") == NULL, "%s", w.err);
	ck_assert_msg(strstr(w.err, "the copies cannot move") == NULL, "%s", w.err);
	run_free(&w);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("diag");
	TCase *tc = tcase_create("pictures");

	tcase_set_timeout(tc, 120);
	add_test(tc, timeline_of_an_offload_trace);
	add_test(tc, timeline_window);
	add_test(tc, timeline_errors);
	add_test(tc, plan_pictures);
	add_test(tc, plan_picture_errors);
	add_test(tc, pictures_of_a_run);
	add_test(tc, summary_after_a_last_departure);
	add_test(tc, summary_warns_of_a_slow_plan);
	add_test(tc, summary_warns_of_the_link);
	add_test(tc, summary_warns_of_a_slow_plan_that_moves_nothing);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
