/*
 * check_conf.c: the EBB_ variable table and its strict parser.
 */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf.h"
#include "log.h"
#include "testutil.h"

/* A lookup over a NULL-terminated list of "NAME=value". */
static const char *
list_lookup(const char *name, void *ctx)
{
	const char *const *kv = ctx;
	size_t n = strlen(name);

	for (; *kv; kv++)
		if (strncmp(*kv, name, n) == 0 && (*kv)[n] == '=')
			return *kv + n + 1;
	return NULL;
}

START_TEST(sizes)
{
	uint64_t v;

	ck_assert_int_eq(ebb_conf_parse_size("0", &v), 0);
	ck_assert_uint_eq(v, 0);
	ck_assert_int_eq(ebb_conf_parse_size("64G", &v), 0);
	ck_assert_uint_eq(v, 64ULL << 30);
	ck_assert_int_eq(ebb_conf_parse_size("2m", &v), 0);
	ck_assert_uint_eq(v, 2ULL << 20);
	ck_assert_int_eq(ebb_conf_parse_size("3K", &v), 0);
	ck_assert_uint_eq(v, 3072);
	ck_assert_int_eq(ebb_conf_parse_size("1T", &v), 0);
	ck_assert_uint_eq(v, 1ULL << 40);
	ck_assert_int_eq(ebb_conf_parse_size("18446744073709551615", &v), 0);
	ck_assert_uint_eq(v, UINT64_MAX);
	/* malformed */
	const char *bad[] = { "", "G", "-1", "+1", " 1", "1 ", "1GB", "1.5G", "1GiB", "0x10",
		"18446744073709551616", "17179869184G", "abc", "1Q", NULL };
	for (int i = 0; bad[i]; i++)
		ck_assert_msg(ebb_conf_parse_size(bad[i], &v) < 0, "'%s' parsed", bad[i]);
}
END_TEST

START_TEST(uints_and_bools)
{
	uint64_t v;
	int b;

	ck_assert_int_eq(ebb_conf_parse_uint("42", &v), 0);
	ck_assert_uint_eq(v, 42);
	ck_assert_int_lt(ebb_conf_parse_uint("42K", &v), 0);
	ck_assert_int_lt(ebb_conf_parse_uint("", &v), 0);
	ck_assert_int_lt(ebb_conf_parse_uint("4 2", &v), 0);
	const char *yes[] = { "1", "yes", "TRUE", "On", NULL };
	const char *no[] = { "0", "no", "false", "OFF", NULL };
	for (int i = 0; yes[i]; i++) {
		ck_assert_int_eq(ebb_conf_parse_bool(yes[i], &b), 0);
		ck_assert_int_eq(b, 1);
	}
	for (int i = 0; no[i]; i++) {
		ck_assert_int_eq(ebb_conf_parse_bool(no[i], &b), 0);
		ck_assert_int_eq(b, 0);
	}
	ck_assert_int_lt(ebb_conf_parse_bool("2", &b), 0);
	ck_assert_int_lt(ebb_conf_parse_bool("y", &b), 0);
}
END_TEST

START_TEST(defaults)
{
	struct ebb_conf c;
	const char *none[] = { NULL };

	ck_assert_int_eq(ebb_conf_load(&c, list_lookup, none), 0);
	for (const struct ebb_conf_var *v = ebb_conf_vars; v->name; v++) {
		ck_assert_msg(strncmp(v->name, "EBB_", 4) == 0, "%s lacks the EBB_ prefix", v->name);
		ck_assert_msg(v->doc && strlen(v->doc) > 10, "%s has no documentation", v->name);
		ck_assert_ptr_eq(ebb_conf_find(v->name), v);
	}
	ck_assert_int_eq(c.mode, EBB_MODE_OBSERVE);
	ck_assert_uint_eq(c.learn_iters, 3);
	ck_assert_str_eq(c.trace, "");
	ck_assert_int_eq(c.cupti, 1);
	ck_assert_ptr_null(ebb_conf_find("EBB_NOPE"));
}
END_TEST

START_TEST(values)
{
	struct ebb_conf c;
	const char *kv[] = { "EBB_MODE=off", "EBB_TRACE=/tmp/x.%p", "EBB_LEARN_ITERS=7",
		"EBB_TRACE_BUFFER=64K", "EBB_CUPTI=no", "EBB_ITER_KERNEL=adamw", NULL };

	ck_assert_int_eq(ebb_conf_load(&c, list_lookup, kv), 0);
	ck_assert_int_eq(c.mode, EBB_MODE_OFF);
	ck_assert_str_eq(c.trace, "/tmp/x.%p");
	ck_assert_uint_eq(c.learn_iters, 7);
	ck_assert_uint_eq(c.trace_buffer, 64 * 1024);
	ck_assert_int_eq(c.cupti, 0);
	ck_assert_str_eq(c.iter_kernel, "adamw");
}
END_TEST

struct load_args {
	const char *const *kv;
	int bad;
	struct ebb_conf c;
};

static void
do_load(void *p)
{
	struct load_args *a = p;
	a->bad = ebb_conf_load(&a->c, list_lookup, (void *)a->kv);
}

START_TEST(bad_values_named_once)
{
	const char *kv[] = { "EBB_LEARN_ITERS=abc", "EBB_MODE=fast", "EBB_VERBOSE=9",
		"EBB_TRACE_BUFFER=12Q", "EBB_CUPTI=maybe", NULL };
	struct load_args a = { kv, 0, { 0 } };
	char *err = capture_stderr(do_load, &a);

	ck_assert_int_eq(a.bad, 5);
	/* each named once, with its value, and the default kept */
	ck_assert_int_eq(count_substr(err, "EBB_LEARN_ITERS='abc'"), 1);
	ck_assert_int_eq(count_substr(err, "EBB_MODE='fast'"), 1);
	ck_assert_int_eq(count_substr(err, "EBB_VERBOSE='9'"), 1);
	ck_assert_int_eq(count_substr(err, "EBB_TRACE_BUFFER='12Q'"), 1);
	ck_assert_int_eq(count_substr(err, "EBB_CUPTI='maybe'"), 1);
	ck_assert_int_eq(count_substr(err, "\n"), 5);
	ck_assert_ptr_nonnull(strstr(err, "expected one of: off observe"));
	ck_assert_ptr_nonnull(strstr(err, "from 1 to 1000"));
	ck_assert_uint_eq(a.c.learn_iters, 3);
	ck_assert_int_eq(a.c.mode, EBB_MODE_OBSERVE);
	ck_assert_uint_eq(a.c.verbose, 0);
	free(err);
}
END_TEST

START_TEST(range_limits)
{
	struct ebb_conf c;
	const char *lo[] = { "EBB_LEARN_ITERS=0", NULL };
	const char *hi[] = { "EBB_LEARN_ITERS=1001", NULL };
	const char *ok[] = { "EBB_LEARN_ITERS=1000", NULL };

	ebb_log_set_level(EBB_LOG_ERROR - 1);	/* quiet */
	ck_assert_int_eq(ebb_conf_load(&c, list_lookup, lo), 1);
	ck_assert_int_eq(ebb_conf_load(&c, list_lookup, hi), 1);
	ck_assert_int_eq(ebb_conf_load(&c, list_lookup, ok), 0);
	ck_assert_uint_eq(c.learn_iters, 1000);
	ebb_log_set_level(EBB_LOG_WARN);
}
END_TEST

static void
do_unknown(void *p)
{
	*(int *)p = ebb_conf_check_unknown((char *const[]){ "PATH=/bin", "EBB_LIMT=64G",
	    "EBB_MODE=observe", "EBBX=1", NULL });
}

START_TEST(unknown_variables)
{
	int n = 0;
	char *err = capture_stderr(do_unknown, &n);

	ck_assert_int_eq(n, 1);
	ck_assert_ptr_nonnull(strstr(err, "EBB_LIMT is not an ebb variable"));
	free(err);
}
END_TEST

START_TEST(string_too_long)
{
	char big[2000];
	memset(big, 'x', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	char kv0[2100];
	snprintf(kv0, sizeof kv0, "EBB_TRACE=%s", big);
	const char *kv[] = { kv0, NULL };
	struct ebb_conf c;

	ebb_log_set_level(EBB_LOG_ERROR - 1);
	ck_assert_int_eq(ebb_conf_load(&c, list_lookup, kv), 1);
	ck_assert_str_eq(c.trace, "");
	ebb_log_set_level(EBB_LOG_WARN);
}
END_TEST

/* man/ebb.7 documents exactly the variables of the table. */
START_TEST(manpage_documents_every_variable)
{
	char *man = read_file(src_path("man/ebb.7"));

	ck_assert_msg(man != NULL, "man/ebb.7 is missing");
	for (const struct ebb_conf_var *v = ebb_conf_vars; v->name; v++) {
		char want[128];
		snprintf(want, sizeof want, ".It Ev %s", v->name);
		ck_assert_msg(strstr(man, want) != NULL, "man/ebb.7 does not document %s", v->name);
	}
	for (const char *p = man; (p = strstr(p, ".It Ev EBB_")) != NULL; p += 6) {
		char name[128];
		size_t n = strcspn(p + 7, " \n");
		ck_assert_uint_lt(n, sizeof name);
		memcpy(name, p + 7, n);
		name[n] = '\0';
		ck_assert_msg(ebb_conf_find(name) != NULL, "man/ebb.7 documents %s, which is not a "
		    "variable of the table", name);
	}
	free(man);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("conf");
	TCase *tc = tcase_create("conf");

	add_test(tc, sizes);
	add_test(tc, uints_and_bools);
	add_test(tc, defaults);
	add_test(tc, values);
	add_test(tc, bad_values_named_once);
	add_test(tc, range_limits);
	add_test(tc, unknown_variables);
	add_test(tc, string_too_long);
	add_test(tc, manpage_documents_every_variable);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
