/*
 * check_hardening.c: what ebb does with hostile or mistaken input: a trace
 * path that is not a regular file, `ebb run` options it cannot honour, and
 * traces `ebb report` and `ebb plan` cannot read.
 */
#include "config.h"

#include <check.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "integ.h"
#include "testutil.h"
#include "trace_format.h"

/* ---- the trace file (EBB_TRACE) ---- */

/* A fresh name for something the test makes itself (a link, a FIFO). */
static const char *
tmp_name(const char *tag)
{
	const char *p = tmp_file(tag);

	ck_assert_int_eq(unlink(p), 0);
	return p;
}

/*
 * Run the workload's basic scenario with libebb preloaded on the fake
 * driver and EBB_TRACE=trace, under timeout(1) so that a job blocked on
 * the trace file ends (status 124) instead of hanging the test.
 */
static void
run_traced(const char *trace, struct run_result *r)
{
	char *argv[] = { "/usr/bin/timeout", "20", workload_path(0), "--via=procaddress", "basic",
		NULL };
	const char *env[] = { "EBB_VERBOSE=0", NULL };

	run_ebb(argv, env, trace, r);
}

/* `ebb report` reads the trace at path without error, and counts its 6 allocations. */
static void
expect_report_of_basic(const char *path)
{
	struct run_result r;
	char *argv[] = { (char *)build_path("utils/ebb"), "report", (char *)path, NULL };

	run_prog(argv, NULL, &r);
	ck_assert_msg(r.status == 0, "ebb report: status %d: %s", r.status, r.err);
	ck_assert_ptr_nonnull(strstr(r.out, "allocations: 6\n"));
	run_free(&r);
}

/* stderr holds exactly one warning about path, naming EBB_TRACE and what. */
static void
expect_refusal(const struct run_result *r, const char *path, const char *what)
{
	char want[512];

	snprintf(want, sizeof want, "the trace file %s (EBB_TRACE) is %s", path, what);
	ck_assert_msg(count_substr(r->err, want) == 1, "no single warning '%s' in:\n%s", want,
	    r->err);
	ck_assert_msg(count_substr(r->err, "EBB_TRACE") == 1, "more than one warning:\n%s", r->err);
}

/* A symbolic link at the trace path is not followed: its target keeps its contents. */
START_TEST(trace_symlink_not_followed)
{
	static const char keep[] = "the file the link points to\n";
	const char *victim = tmp_file("victim"), *link = tmp_name("link");
	struct run_result r;
	struct stat st;
	FILE *f = fopen(victim, "w");

	ck_assert_ptr_nonnull(f);
	fputs(keep, f);
	ck_assert_int_eq(fclose(f), 0);
	ck_assert_int_eq(symlink(victim, link), 0);
	run_traced(link, &r);
	expect_ok(&r);
	expect_refusal(&r, link, "a symbolic link, which ebb does not follow");
	char *now = read_file(victim);
	ck_assert_str_eq(now, keep);
	ck_assert_int_eq(lstat(link, &st), 0);
	ck_assert(S_ISLNK(st.st_mode));
	free(now);
	run_free(&r);
	unlink(link);
	unlink(victim);
}
END_TEST

/* A FIFO at the trace path, with no reader and with one, neither blocks nor gets the trace. */
START_TEST(trace_fifo_refused)
{
	const char *fifo = tmp_name("fifo");
	struct run_result r;

	ck_assert_int_eq(mkfifo(fifo, 0600), 0);
	run_traced(fifo, &r);
	expect_ok(&r);
	expect_refusal(&r, fifo, "a FIFO");
	run_free(&r);

	/* With a reader, opening it succeeds; what it is must still be refused. */
	int rd = open(fifo, O_RDONLY | O_NONBLOCK);
	ck_assert_int_ge(rd, 0);
	run_traced(fifo, &r);
	expect_ok(&r);
	expect_refusal(&r, fifo, "a FIFO");
	char c;
	ck_assert_int_eq(read(rd, &c, 1), 0);	/* nothing was written to it */
	close(rd);
	run_free(&r);
	unlink(fifo);
}
END_TEST

/* A device at the trace path is refused. */
START_TEST(trace_device_refused)
{
	struct run_result r;

	run_traced("/dev/null", &r);
	expect_ok(&r);
	expect_refusal(&r, "/dev/null", "a character device");
	run_free(&r);
}
END_TEST

/* An existing regular file longer than the trace is cut to the trace alone. */
START_TEST(trace_regular_file_truncated)
{
	const char *path = tmp_file("old");
	struct run_result r;
	FILE *f = fopen(path, "w");

	ck_assert_ptr_nonnull(f);
	for (int i = 0; i < 100000; i++)
		fputs("old contents, not a trace record\n", f);
	ck_assert_int_eq(fclose(f), 0);
	run_traced(path, &r);
	expect_ok(&r);
	ck_assert_msg(strstr(r.err, "EBB_TRACE") == NULL, "unexpected warning:\n%s", r.err);
	run_free(&r);
	char *text = read_file(path);
	ck_assert_ptr_nonnull(text);
	ck_assert_msg(strncmp(text, EBB_TRACE_MAGIC " ", strlen(EBB_TRACE_MAGIC) + 1) == 0,
	    "no trace header: %.80s", text);
	ck_assert_ptr_null(strstr(text, "old contents"));
	free(text);
	expect_report_of_basic(path);
	unlink(path);
}
END_TEST

/* ---- ebb run ---- */

/* Run `ebb run ARGS... -- sh -c 'echo ran'` (args NULL-terminated). */
static void
ebb_run(const char *const *args, char *const env[], struct run_result *r)
{
	char *argv[24] = { (char *)build_path("utils/ebb"), "run" };
	int n = 2;

	for (int i = 0; args[i]; i++) {
		ck_assert_int_lt(n, 18);
		argv[n++] = (char *)args[i];
	}
	argv[n++] = "--";
	argv[n++] = "sh";
	argv[n++] = "-c";
	argv[n++] = "echo ran";
	argv[n] = NULL;
	run_prog(argv, env, r);
}

/* ebb run exits 2 with one line holding want, and the command does not run. */
static void
expect_usage_error(const char *const *args, const char *want)
{
	struct run_result r;

	ebb_run(args, NULL, &r);
	ck_assert_msg(r.status == 2, "status %d for %s %s\nstdout:\n%s\nstderr:\n%s", r.status,
	    args[0], args[1] ? args[1] : "", r.out, r.err);
	ck_assert_msg(strstr(r.err, want) != NULL, "'%s' not in:\n%s", want, r.err);
	ck_assert_msg(count_substr(r.err, "\n") == 1, "more than one line:\n%s", r.err);
	ck_assert_msg(strstr(r.out, "ran") == NULL, "the command ran");
	run_free(&r);
}

/* What the job's PyTorch and JAX allocators get from ebb run: chosen in
 * offload mode (--alloc auto), left alone in observe mode, as --alloc
 * says otherwise; an unknown --alloc stops ebb run. */
START_TEST(run_alloc_choice)
{
	static const struct {
		const char *args[6];
		const char *want;
	} cases[] = {
		{ { "--mode", "observe", NULL }, "[][]" },
		{ { "--limit", "1G", NULL }, "[backend:cudaMallocAsync][cuda_async]" },
		{ { "--mode", "observe", "--alloc", "ebb", NULL }, "[backend:cudaMallocAsync][cuda_async]" },
		{ { "--limit", "1G", "--alloc", "job", NULL }, "[][]" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char *argv[16] = { (char *)build_path("utils/ebb"), "run" };
		int n = 2;
		for (int k = 0; cases[i].args[k]; k++)
			argv[n++] = (char *)cases[i].args[k];
		argv[n++] = "--";
		argv[n++] = "sh";
		argv[n++] = "-c";
		argv[n++] = "echo \"[$PYTORCH_CUDA_ALLOC_CONF][$XLA_PYTHON_CLIENT_ALLOCATOR]\"";
		argv[n] = NULL;
		char *env[] = { "PYTORCH_CUDA_ALLOC_CONF=", "XLA_PYTHON_CLIENT_ALLOCATOR=", NULL };
		struct run_result r;
		run_prog(argv, env, &r);
		ck_assert_msg(r.status == 0 && strstr(r.out, cases[i].want) != NULL,
		    "case %zu: status %d, got %s, want %s\n%s", i, r.status, r.out, cases[i].want, r.err);
		run_free(&r);
	}
	static const char *const bad[] = { "--alloc", "tensor", NULL };
	expect_usage_error(bad, "--alloc 'tensor' is not valid");
}
END_TEST

START_TEST(run_refuses_unknown_mode)
{
	static const char *const typo[] = { "--mode", "offlaod", NULL };
	static const char *const empty[] = { "-m", "", NULL };

	expect_usage_error(typo, "ebb run: --mode 'offlaod' is not valid: expected one of: off "
	    "observe offload\n");
	expect_usage_error(empty, "ebb run: --mode '' is not valid");
}
END_TEST

START_TEST(run_refuses_bad_verbose)
{
	static const char *const high[] = { "--verbose", "4", NULL };
	static const char *const word[] = { "-v", "lots", NULL };
	static const char *const neg[] = { "-v", "-1", NULL };
	static const char *const trail[] = { "-v", "1x", NULL };

	expect_usage_error(high, "ebb run: --verbose '4' is not valid: expected a whole number "
	    "from 0 to 3\n");
	expect_usage_error(word, "--verbose 'lots' is not valid");
	expect_usage_error(neg, "--verbose '-1' is not valid");
	expect_usage_error(trail, "--verbose '1x' is not valid");
}
END_TEST

/* Write len bytes of data to a fresh file; returns its path. */
static const char *
write_bytes(const char *tag, const void *data, size_t len)
{
	const char *path = tmp_file(tag);
	FILE *f = fopen(path, "w");

	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(data, 1, len, f), len);
	ck_assert_int_eq(fclose(f), 0);
	return path;
}

/* path made absolute with links resolved, as ebb run names a library (static storage). */
static const char *
resolved(const char *path)
{
	static char out[PATH_MAX];

	ck_assert_ptr_nonnull(realpath(path, out));
	return out;
}

START_TEST(run_refuses_lib_not_a_shared_object)
{
	static const char text[] = "not a library\n";
	static const char magic_only[] = "\177ELF";
	char want[PATH_MAX + 128];
	const char *lib;

	lib = write_bytes("text", text, sizeof text - 1);
	snprintf(want, sizeof want, "ebb run: --lib '%s' is not an ELF shared object", resolved(lib));
	expect_usage_error((const char *const[]){ "--lib", lib, NULL }, want);
	unlink(lib);

	lib = write_bytes("short", magic_only, sizeof magic_only - 1);
	snprintf(want, sizeof want, "ebb run: --lib '%s' is not an ELF shared object", resolved(lib));
	expect_usage_error((const char *const[]){ "--lib", lib, NULL }, want);
	unlink(lib);

	/* an ELF executable (e_type ET_EXEC), not a shared object */
	static const unsigned char exec_header[20] = { 0x7f, 'E', 'L', 'F', 2, 1, 1, 0, 0, 0, 0,
		0, 0, 0, 0, 0, 2, 0, 0x3e, 0 };
	lib = write_bytes("exec", exec_header, sizeof exec_header);
	snprintf(want, sizeof want, "ebb run: --lib '%s' is not an ELF shared object", resolved(lib));
	expect_usage_error((const char *const[]){ "--lib", lib, NULL }, want);
	unlink(lib);

	/* a shared object (ET_DYN) for no machine (EM_NONE), of this word size */
	static const unsigned char none_header[20] = { 0x7f, 'E', 'L', 'F',
		sizeof(void *) == 8 ? 2 : 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0 };
	lib = write_bytes("none", none_header, sizeof none_header);
	snprintf(want, sizeof want, "ebb run: --lib '%s' is a shared object for another machine",
	    resolved(lib));
	expect_usage_error((const char *const[]){ "--lib", lib, NULL }, want);
	unlink(lib);

	expect_usage_error((const char *const[]){ "--lib", "/nonexistent/libebb.so", NULL },
	    "ebb run: --lib '/nonexistent/libebb.so': No such file or directory\n");
}
END_TEST

/* A copy of libebb.so under a directory whose name holds sep is refused. */
static void
check_separator_in_lib_path(const char *dirtag)
{
	char dir[512], lib[600], want[PATH_MAX + 128];
	const char *tmp = getenv("TMPDIR");
	struct run_result r;

	snprintf(dir, sizeof dir, "%s/ebbtest-%s-XXXXXX", tmp ? tmp : "/tmp", dirtag);
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(lib, sizeof lib, "%s/libebb.so", dir);
	char *cp[] = { "/usr/bin/cp", getenv("EBBTEST_LIBEBB"), lib, NULL };
	run_prog(cp, NULL, &r);
	ck_assert_int_eq(r.status, 0);
	run_free(&r);
	snprintf(want, sizeof want, "ebb run: --lib '%s': LD_PRELOAD cannot hold a path with",
	    resolved(lib));
	expect_usage_error((const char *const[]){ "--lib", lib, NULL }, want);
	unlink(lib);
	rmdir(dir);
}

START_TEST(run_refuses_lib_path_with_separators)
{
	check_separator_in_lib_path("colon:dir");
	check_separator_in_lib_path("blank dir");
}
END_TEST

/* Valid options still run the command, with ebb loaded into it. */
START_TEST(run_valid_options_run)
{
	static const char *const opts[] = { "--mode", "observe", "--verbose", "1", NULL };
	static char preload[4200];
	const char *const withlib[] = { "-m", "off", "-v", "0", "--lib", getenv("EBBTEST_LIBEBB"),
		NULL };
	static const char *const none[] = { NULL };
	char *badmode[] = { "EBB_MODE=offlaod", NULL };
	struct run_result r;

	ebb_run(opts, NULL, &r);
	ck_assert_msg(r.status == 0 && strcmp(r.out, "ran\n") == 0, "status %d: %s", r.status,
	    r.err);
	snprintf(preload, sizeof preload, "LD_PRELOAD=%s", getenv("EBBTEST_LIBEBB"));
	ck_assert_msg(strstr(r.err, preload) != NULL, "'%s' not in:\n%s", preload, r.err);
	run_free(&r);

	ebb_run(withlib, NULL, &r);
	ck_assert_msg(r.status == 0 && strcmp(r.out, "ran\n") == 0, "status %d: %s", r.status,
	    r.err);
	run_free(&r);

	/* The environment's variables follow the library's rules: named, then the default. */
	ebb_run(none, badmode, &r);
	ck_assert_msg(r.status == 0 && strcmp(r.out, "ran\n") == 0, "status %d: %s", r.status,
	    r.err);
	ck_assert_ptr_nonnull(strstr(r.err, "EBB_MODE='offlaod' is not valid"));
	run_free(&r);

	/* The workload under ebb run writes its trace: the library is loaded. */
	const char *trace = tmp_file("run");
	static char libpath[4200];
	snprintf(libpath, sizeof libpath, "LD_LIBRARY_PATH=%s", getenv("EBBTEST_FAKECUDA"));
	char *env[] = { libpath, "EBB_CUPTI=0", NULL };
	char *argv[] = { (char *)build_path("utils/ebb"), "run", "-m", "observe", "-t",
		(char *)trace, "--", (char *)build_path("tests/progs/workload"), "basic", NULL };
	run_prog(argv, env, &r);
	expect_ok(&r);
	run_free(&r);
	expect_report_of_basic(trace);
	unlink(trace);
}
END_TEST

/* ---- ebb report and ebb plan ---- */

/* A trace of format version v holding one note. */
static const char *
write_version(int v)
{
	const char *path = tmp_file("version");
	FILE *f = fopen(path, "w");

	ck_assert_ptr_nonnull(f);
	fprintf(f, "%s %d ebb=%s pid=4711 mode=observe epoch=1795952310.511351266\n"
	    "Q 1500 cupti-detached exit\n", EBB_TRACE_MAGIC, v, PACKAGE_VERSION);
	ck_assert_int_eq(fclose(f), 0);
	return path;
}

/* Run `ebb CMD path`; the status is nonzero and stderr is exactly want. */
static void
expect_trace_error(const char *cmd, const char *path, const char *want)
{
	char *argv[] = { (char *)build_path("utils/ebb"), (char *)cmd, (char *)path, NULL };
	struct run_result r;

	run_prog(argv, NULL, &r);
	ck_assert_msg(r.status == 1, "ebb %s %s: status %d\nstdout:\n%s\nstderr:\n%s", cmd, path,
	    r.status, r.out, r.err);
	ck_assert_str_eq(r.err, want);
	ck_assert_str_eq(r.out, "");
	run_free(&r);
}

START_TEST(report_refuses_other_versions)
{
	char want[512];

	static const int versions[] = { EBB_TRACE_VERSION_MIN - 1, EBB_TRACE_VERSION + 1 };

	for (int k = 0; k < 2; k++) {
		int v = versions[k];
		const char *path = write_version(v);
		snprintf(want, sizeof want, "ebb report: %s:1: trace format version %d; this ebb reads "
		    "versions %d to %d\n", path, v, EBB_TRACE_VERSION_MIN, EBB_TRACE_VERSION);
		expect_trace_error("report", path, want);
		snprintf(want, sizeof want, "ebb plan: %s:1: trace format version %d; this ebb reads "
		    "versions %d to %d\n", path, v, EBB_TRACE_VERSION_MIN, EBB_TRACE_VERSION);
		expect_trace_error("plan", path, want);
		unlink(path);
	}
}
END_TEST

START_TEST(report_names_read_errors)
{
	char dir[512], want[600];
	const char *tmp = getenv("TMPDIR");

	snprintf(dir, sizeof dir, "%s/ebbtest-dir-XXXXXX", tmp ? tmp : "/tmp");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(want, sizeof want, "ebb report: %s: Is a directory\n", dir);
	expect_trace_error("report", dir, want);
	snprintf(want, sizeof want, "ebb plan: %s: Is a directory\n", dir);
	expect_trace_error("plan", dir, want);
	rmdir(dir);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("hardening");
	TCase *tc = tcase_create("hardening");

	add_test(tc, trace_symlink_not_followed);
	add_test(tc, trace_fifo_refused);
	add_test(tc, trace_device_refused);
	add_test(tc, trace_regular_file_truncated);
	add_test(tc, run_refuses_unknown_mode);
	add_test(tc, run_refuses_bad_verbose);
	add_test(tc, run_refuses_lib_not_a_shared_object);
	add_test(tc, run_refuses_lib_path_with_separators);
	add_test(tc, run_valid_options_run);
	add_test(tc, run_alloc_choice);
	add_test(tc, report_refuses_other_versions);
	add_test(tc, report_names_read_errors);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
