/*
 * integ.c: running programs under libebb.so on the fake driver, and reading
 * their traces (integ.h).
 */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "integ.h"
#include "testutil.h"
#include "trace_format.h"
#include "trace_read.h"

void
trace_load(const char *path, struct trace *t)
{
	t->text = read_file(path);
	ck_assert_msg(t->text != NULL, "no trace at %s", path);
	char *save = NULL, *line = strtok_r(t->text, "\n", &save);
	ck_assert_msg(line && ebb_trace_header(line) == EBB_TRACE_VERSION, "bad trace header in %s", path);
	t->r = NULL;
	t->n = 0;
	struct ebb_trace_rec rec = { 0 };
	char err[256];
	size_t lineno = 1;
	while ((line = strtok_r(NULL, "\n", &save)) != NULL) {
		lineno++;
		ck_assert_msg(ebb_trace_split(line, &rec, err, sizeof err) == 0, "%s:%zu: %s", path,
		    lineno, err);
		t->r = realloc(t->r, (t->n + 1) * sizeof *t->r);
		struct rec *r = &t->r[t->n++];
		r->type = rec.type;
		r->n = rec.nfields;
		r->f = malloc((rec.nfields + 1) * sizeof *r->f);
		memcpy(r->f, rec.field, rec.nfields * sizeof *r->f);
	}
	ebb_trace_rec_free(&rec);
}

void
trace_free(struct trace *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->r[i].f);
	free(t->r);
	free(t->text);
}

uint64_t
num(const struct rec *r, size_t i)
{
	ck_assert_uint_lt(i, r->n);
	const char *s = r->f[i];
	return strtoull(s, NULL, s[0] == '0' && s[1] == 'x' ? 16 : 10);
}

size_t
count_type(const struct trace *t, char type)
{
	size_t n = 0;
	for (size_t i = 0; i < t->n; i++)
		n += t->r[i].type == type;
	return n;
}

/* Kernel id of the K record named name, or 0. */
uint64_t
kernel_id(const struct trace *t, const char *name)
{
	for (size_t i = 0; i < t->n; i++)
		if (t->r[i].type == 'K' && strcmp(t->r[i].f[3], name) == 0)
			return num(&t->r[i], 0);
	return 0;
}

/* The value of the Z record key, or UINT64_MAX. */
uint64_t
summary(const struct trace *t, const char *key)
{
	for (size_t i = 0; i < t->n; i++)
		if (t->r[i].type == 'Z' && strcmp(t->r[i].f[1], key) == 0)
			return num(&t->r[i], 2);
	return UINT64_MAX;
}

/* Buffer list of the k-th launch of kernel kid, as "1,2,3" (sorted as written). */
const char *
launch_bufs(const struct trace *t, uint64_t kid, int k)
{
	static char out[256];
	for (size_t i = 0; i < t->n; i++) {
		const struct rec *r = &t->r[i];
		if (r->type != 'L' || num(r, 3) != kid || k-- > 0)
			continue;
		out[0] = '\0';
		if (strcmp(r->f[4], "?") == 0)
			return "?";
		for (size_t j = 5; j < r->n; j++) {
			strcat(out, r->f[j]);
			if (j + 1 < r->n)
				strcat(out, ",");
		}
		return out;
	}
	return NULL;
}

char *
workload_path(int linked)
{
	return (char *)build_path(linked ? "tests/progs/workload-linked" : "tests/progs/workload");
}

/* Whether env (NULL-terminated, or NULL) sets the variable of "NAME=". */
static int
sets(const char *const *env, const char *name_eq)
{
	for (int i = 0; env && env[i]; i++)
		if (strncmp(env[i], name_eq, strlen(name_eq)) == 0)
			return 1;
	return 0;
}

/* Run the workload with libebb preloaded; env adds to the defaults
 * (EBB_CUPTI=0 and EBB_VERBOSE=1 unless env sets them). */
void
run_ebb(char *const argv[], const char *const *env, const char *trace, struct run_result *r)
{
	static char preload[4200], libpath[4200], tracevar[4200];
	char *e[32];
	int n = 0;

	snprintf(preload, sizeof preload, "LD_PRELOAD=%s", getenv("EBBTEST_LIBEBB"));
	snprintf(libpath, sizeof libpath, "LD_LIBRARY_PATH=%s", getenv("EBBTEST_FAKECUDA"));
	snprintf(tracevar, sizeof tracevar, "EBB_TRACE=%s", trace ? trace : "");
	e[n++] = preload;
	e[n++] = libpath;
	e[n++] = tracevar;
	if (!sets(env, "EBB_CUPTI="))
		e[n++] = "EBB_CUPTI=0";
	if (!sets(env, "EBB_VERBOSE="))
		e[n++] = "EBB_VERBOSE=1";
	for (int i = 0; env && env[i] && n < 31; i++)
		e[n++] = (char *)env[i];
	e[n] = NULL;
	run_prog(argv, e, r);
}

void
ebb_cmd(struct run_result *r, const char *const *args)
{
	char *argv[16] = { (char *)build_path("utils/ebb") };
	int n = 1;

	for (int i = 0; args[i]; i++) {
		ck_assert_int_lt(n, 15);
		argv[n++] = (char *)args[i];
	}
	argv[n] = NULL;
	run_prog(argv, NULL, r);
}

void
expect_ok(const struct run_result *r)
{
	ck_assert_msg(r->status == 0 && strstr(r->out, "ok") != NULL,
	    "workload failed (status %d)\nstdout:\n%s\nstderr:\n%s", r->status, r->out, r->err);
}

/* The fake driver's statistics line of the workload's output: cuMemFree calls and peak bytes. */
void
driver_line(const char *out, unsigned long long *frees, unsigned long long *peak)
{
	const char *d = strstr(out, "driver: cuMemFree ");
	ck_assert_msg(d != NULL, "no driver statistics in: %s", out);
	ck_assert_int_eq(sscanf(d, "driver: cuMemFree %llu", frees), 1);
	const char *p = strstr(d, "peak ");
	ck_assert_ptr_nonnull(p);
	ck_assert_int_eq(sscanf(p, "peak %llu", peak), 1);
}

/* value_of (integ.h) */
uint64_t
value_of(const char *out, const char *key)
{
	const char *p = strstr(out, key);

	ck_assert_msg(p != NULL, "no '%s' in:\n%s", key, out);
	return strtoull(p + strlen(key), NULL, 10);
}
