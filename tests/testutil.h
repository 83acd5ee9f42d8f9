/*
 * testutil.h: helpers shared by ebb's Check tests.
 */
#ifndef EBB_TESTUTIL_H
#define EBB_TESTUTIL_H

#include <check.h>
#include <stddef.h>

/* Result of running a program. */
struct run_result {
	int status;	/* exit status, or 128 + signal */
	char *out;	/* everything on stdout (NUL-terminated, malloc'd) */
	char *err;	/* everything on stderr */
};

/*
 * Run argv with the current environment plus env (NULL-terminated
 * "NAME=value" strings; "NAME=" with nothing after unsets NAME), capturing
 * stdout and stderr. Aborts the test on failure to start.
 */
void run_prog(char *const argv[], char *const env[], struct run_result *r);
void run_free(struct run_result *r);

/* Path under the build tree ($EBBTEST_TOP_BUILDDIR) or source tree. */
const char *build_path(const char *rel);
const char *src_path(const char *rel);

/* A fresh temporary file name (the file is created empty). */
const char *tmp_file(const char *tag);

/* Contents of a file (malloc'd, NUL-terminated), or NULL. */
char *read_file(const char *path);

/* Times needle occurs in hay. */
int count_substr(const char *hay, const char *needle);

/* Call fn(stderr_text) with what f() writes on stderr (fd 2) while it runs. */
char *capture_stderr(void (*f)(void *), void *arg);

/* Run every test of s; returns the exit status for main (0 if all passed). */
int run_suite(Suite *s);

/*
 * Whether the test named name runs: every test, or where EBBTEST_ONLY is
 * set, the tests its comma-separated names list (to run one test again and
 * again). add_test adds a test to a case under that rule.
 */
int test_selected(const char *name);
#define add_test(tc, tf)                                                       \
	do {                                                                   \
		if (test_selected((tf)->name))                                 \
			tcase_add_test(tc, tf);                                \
	} while (0)

#endif
