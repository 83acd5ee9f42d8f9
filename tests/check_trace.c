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

/*
 * The writer of each record type (generated from EBB_TRACE_RECORDS) writes
 * its fields in the format's order and forms: decimal, signed, 0x-hex and
 * words with blanks turned into _; a list record is begun, then its list
 * appended. Every line is read back as a record of its type.
 */
START_TEST(each_record_has_its_writer)
{
	static const char *const want[] = {
		"K 7 3 ok void_f(int)",
		"A 1 2 0x7f0000001000 4096 0x1 pool 0xfedcba9876543210",
		"F 3 2 0x2 async",
		"L 4 5 0x1 7 2 1 2",
		"C 5 6 0x55 4096 1 d2h 1 2",
		"M 6 7 0x0 64 0 0",
		"N 7 8 0x1 allreduce -1 1024 0 2 1 3",
		"L 8 9 0x1 0 ?",
		"R 9 10 0x1 0xabc",
		"G 10 100 200",
		"Y 11 11 stream 0x55",
		"P 12 0x55 begin",
		"I 13 1 11 40",
		"D 14 12 40 0x2000001",
		"X 12 -2",
		"O 15 12 2 4096 limit",
		"B 16 12 2 4096 fault",
		"U 17 0 2 4096 released",
		"W 18 12 4096 350",
		"J 19 0 0 8192 host-memory",
		"H 20 12 1500 room",
		"Q 21 key -",
		"Z 22 launches 18446744073709551615",
	};
	const char *path = tmp_file("writers");
	struct ebb_line l;

	ck_assert_int_eq(ebb_trace_begin_launch(1, 2, 3, 4, &l), 0);	/* no trace yet */
	ck_assert_int_eq(ebb_trace_open(path, 4096, "observe"), 0);
	ebb_trace_write_kernel(7, 3, "ok", "void f(int)");
	ebb_trace_write_alloc(1, 2, 0x7f0000001000, 4096, 1, "pool", 0xfedcba9876543210);
	ebb_trace_write_free(3, 2, 2, "async");
	ck_assert_int_eq(ebb_trace_begin_launch(4, 5, 1, 7, &l), 1);
	ebb_line_u64(&l, 2);
	ebb_line_u64(&l, 1);
	ebb_line_u64(&l, 2);
	ebb_line_end(&l);
	ck_assert(ebb_trace_begin_copy(5, 6, 0x55, 4096, 1, "d2h", &l));
	ebb_line_u64(&l, 1);
	ebb_line_u64(&l, 2);
	ebb_line_end(&l);
	ck_assert(ebb_trace_begin_memset(6, 7, 0, 64, 0, &l));
	ebb_line_u64(&l, 0);
	ebb_line_end(&l);
	ck_assert(ebb_trace_begin_nccl(7, 8, 1, "allreduce", -1, 1024, 0, 2, &l));
	ebb_line_u64(&l, 1);
	ebb_line_u64(&l, 3);
	ebb_line_end(&l);
	ck_assert(ebb_trace_begin_launch(8, 9, 1, 0, &l));
	ebb_line_str(&l, "?");
	ebb_line_end(&l);
	ebb_trace_write_graph(9, 10, 1, 0xabc);
	ebb_trace_write_gputime(10, 100, 200);
	ebb_trace_write_sync(11, 11, "stream", 0x55);
	ebb_trace_write_capture(12, 0x55, "begin");
	ebb_trace_write_iteration(13, 1, 11, 40);
	ebb_trace_write_departure(14, 12, 40, 0x2000001);
	ebb_trace_write_failure(12, -2);
	ebb_trace_write_offload(15, 12, 2, 4096, "limit");
	ebb_trace_write_restore(16, 12, 2, 4096, "fault");
	ebb_trace_write_release(17, 0, 2, 4096, "released");
	ebb_trace_write_stall(18, 12, 4096, 350);
	ebb_trace_write_refusal(19, 0, 0, 8192, "host-memory");
	ebb_trace_write_hostwait(20, 12, 1500, "room");
	ebb_trace_write_note(21, "key", "-");
	ebb_trace_write_summary(22, "launches", UINT64_MAX);
	ebb_trace_close();
	ebb_trace_write_failure(1, 1);	/* after the close: nothing, and no harm */

	char *text = read_file(path);
	ck_assert_ptr_nonnull(text);
	char *save = NULL, *line = strtok_r(text, "\n", &save);
	ck_assert_int_eq(ebb_trace_header(line), EBB_TRACE_VERSION);
	struct ebb_trace_rec r = { 0 };
	char err[256];
	size_t n = 0, nwant = sizeof want / sizeof want[0];
	while ((line = strtok_r(NULL, "\n", &save)) != NULL) {
		ck_assert_uint_lt(n, nwant);
		ck_assert_str_eq(line, want[n]);
		ck_assert_msg(ebb_trace_split(line, &r, err, sizeof err) == 0, "%s: %s", want[n], err);
		n++;
	}
	ck_assert_uint_eq(n, nwant);
	ebb_trace_rec_free(&r);
	free(text);
	remove(path);
}
END_TEST

/* Each record type's line in ebb-trace(5) (".D1 Li L Ar fields") gives the
 * fields of EBB_TRACE_RECORDS, and the page has one for each type. */
START_TEST(man_page_lists_the_fields)
{
	static const char types[] = {
#define X(letter, name, ...) letter,
		EBB_TRACE_RECORDS(X)
#undef X
		'\0'
	};
	size_t ntypes = sizeof types - 1;
	int seen[sizeof types] = { 0 };
	char *page = read_file(src_path("man/ebb-trace.5"));
	ck_assert_ptr_nonnull(page);

	for (char *p = page; (p = strstr(p, "\n.D1 Li ")) != NULL; p++) {
		char type = p[strlen("\n.D1 Li ")];
		const char *ar = p + strlen("\n.D1 Li X");
		ck_assert_msg(strncmp(ar, " Ar ", 4) == 0, "ebb-trace(5): a .D1 line without Ar");
		ar += 4;
		size_t len = strcspn(ar, "\n");
		const char *spec = ebb_trace_spec(type);
		ck_assert_msg(spec != NULL, "ebb-trace(5) has record type %c, the format not", type);
		ck_assert_msg(strlen(spec) == len && strncmp(ar, spec, len) == 0,
		    "ebb-trace(5) gives %c records '%.*s', the format '%s'", type, (int)len, ar, spec);
		seen[strchr(types, type) - types]++;
	}
	for (size_t i = 0; i < ntypes; i++)
		ck_assert_msg(seen[i] == 1, "ebb-trace(5) gives %c records %d times", types[i], seen[i]);
	free(page);
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

	add_test(tc, threads_write_whole_lines);
	add_test(tc, reader_rejects_malformed_records);
	add_test(tc, each_record_has_its_writer);
	add_test(tc, man_page_lists_the_fields);
	add_test(tc, pid_in_path);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
