/*
 * check_trace.c: the trace writer and reader, against each other.
 */
#include "config.h"

#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"
#include "trace.h"
#include "trace_format.h"
#include "trace_read.h"

#define THREADS 8
#define PER_THREAD 5000

/* Each thread writes launches whose buffer lists are long enough to overflow a line. */
static void *
writer(void *p)
{
	uint64_t id = (uint64_t)(uintptr_t)p;
	struct ebb_line l;

	for (uint64_t i = 0; i < PER_THREAD; i++) {
		ebb_line_begin(&l, 'L');
		ebb_line_u64(&l, i);
		ebb_line_u64(&l, id * PER_THREAD + i);
		ebb_line_hex(&l, 0x7f00deadbeefULL + id);
		ebb_line_u64(&l, id);
		uint64_t n = (i * 7) % 200;
		ebb_line_u64(&l, n);
		for (uint64_t k = 0; k < n; k++)
			ebb_line_u64(&l, 1000000000000ULL + k);
		ebb_line_end(&l);
	}
	return NULL;
}

START_TEST(threads_write_whole_lines)
{
	const char *path = tmp_file("trace");
	pthread_t t[THREADS];

	ck_assert_int_eq(ebb_trace_open(path, 4096, "observe"), 0);
	ck_assert(ebb_trace_on());
	for (uintptr_t i = 0; i < THREADS; i++)
		pthread_create(&t[i], NULL, writer, (void *)i);
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	struct ebb_line l;
	ebb_line_begin(&l, 'K');
	ebb_line_u64(&l, 1);
	ebb_line_u64(&l, 3);
	ebb_line_str(&l, "ok");
	ebb_line_str(&l, "void name with spaces(int)");
	ebb_line_end(&l);
	ebb_trace_close();
	ck_assert(!ebb_trace_on());

	FILE *f = fopen(path, "r");
	char *line = NULL;
	size_t cap = 0;
	ck_assert_int_gt(getline(&line, &cap, f), 0);
	ck_assert_int_eq(ebb_trace_header(line), EBB_TRACE_VERSION);
	ck_assert_ptr_nonnull(strstr(line, "mode=observe"));
	struct ebb_trace_rec r = { 0 };
	char err[256];
	uint64_t seen[THREADS] = { 0 }, launches = 0;
	int kernels = 0;
	while (getline(&line, &cap, f) > 0) {
		ck_assert_msg(ebb_trace_split(line, &r, err, sizeof err) == 0, "%s", err);
		if (r.type == 'K') {
			kernels++;
			ck_assert_str_eq(r.field[3], "void_name_with_spaces(int)");
			continue;
		}
		uint64_t i, id, n;
		ck_assert_int_eq(ebb_trace_u64(&r, 0, &i), 0);
		ck_assert_int_eq(ebb_trace_u64(&r, 3, &id), 0);
		ck_assert_int_eq(ebb_trace_u64(&r, 4, &n), 0);
		ck_assert_uint_lt(id, THREADS);
		ck_assert_uint_eq(i, seen[id]);	/* in order within a thread */
		ck_assert_uint_eq(n, (i * 7) % 200);
		seen[id]++;
		launches++;
	}
	ck_assert_uint_eq(launches, THREADS * PER_THREAD);
	ck_assert_int_eq(kernels, 1);
	ebb_trace_rec_free(&r);
	free(line);
	fclose(f);
	remove(path);
}
END_TEST

START_TEST(reader_rejects_malformed_records)
{
	const char *bad[] = {
		"W 1 2",			/* unknown type */
		"A 1 2 0x10 4096 0x1 sync",	/* a field short */
		"A 1 2 0x10 4096 0x1 sync 0x5 9",	/* a field too many */
		"L 1 2 0x1 3 2 7",		/* list shorter than its count */
		"L 1 2 0x1 3 ? 7",		/* unresolved launches list nothing */
		"L  1 2 0x1 3 0",		/* double space */
		"G 1 2 3 ",			/* trailing space */
		NULL
	};
	const char *good[] = {
		"A 1 2 0x10 4096 0x1 sync 0x5",
		"L 1 2 0x1 3 2 7 8",
		"L 1 2 0x1 3 ?",
		"L 1 2 0x1 3 0",
		"G 1 2 3",
		"Z 5 launches 10",
		NULL
	};
	struct ebb_trace_rec r = { 0 };
	char err[256], buf[256];

	for (int i = 0; bad[i]; i++) {
		snprintf(buf, sizeof buf, "%s", bad[i]);
		ck_assert_msg(ebb_trace_split(buf, &r, err, sizeof err) < 0, "accepted '%s'", bad[i]);
	}
	for (int i = 0; good[i]; i++) {
		snprintf(buf, sizeof buf, "%s\n", good[i]);
		ck_assert_msg(ebb_trace_split(buf, &r, err, sizeof err) == 0, "'%s': %s", good[i], err);
	}
	ck_assert_int_eq(ebb_trace_header("#ebb-trace 1 ebb=0.1.0 pid=3\n"), 1);
	ck_assert_int_eq(ebb_trace_header("#ebb-trace x\n"), -1);
	ck_assert_int_eq(ebb_trace_header("hello\n"), -1);
	ebb_trace_rec_free(&r);
}
END_TEST

START_TEST(pid_in_path)
{
	char pattern[256], want[256];
	snprintf(pattern, sizeof pattern, "%s.%%p", tmp_file("pid"));
	snprintf(want, sizeof want, "%.*s.%d", (int)strlen(pattern) - 3, pattern, (int)getpid());

	ck_assert_int_eq(ebb_trace_open(pattern, 4096, "observe"), 0);
	ebb_trace_close();
	ck_assert_int_eq(access(want, R_OK), 0);
	remove(want);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("trace");
	TCase *tc = tcase_create("trace");

	tcase_add_test(tc, threads_write_whole_lines);
	tcase_add_test(tc, reader_rejects_malformed_records);
	tcase_add_test(tc, pid_in_path);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
