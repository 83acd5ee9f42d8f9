/*
 * check_exports.c: libebb.so exports exactly the entry points it interposes
 * (the names of syms.def, cuGetProcAddress and _v2, dlsym, and the NCCL
 * names), nothing else.
 */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static const char *const expected[] = {
#define EBB_HAND(elf, base, version, variant, params, args) #elf,
#define EBB_GEN(elf, base, version, variant, params, args, op) #elf,
#define EBB_NCCL(name, op, params, args, send, recv, count, type, peer) #name,
#include "syms.def"
	"cuGetProcAddress", "cuGetProcAddress_v2", "dlsym",
	"ncclCommRegister", "ncclCommDeregister", "ncclCommDestroy", "ncclCommAbort",
	NULL
};

static int
is_expected(const char *name)
{
	for (int i = 0; expected[i]; i++)
		if (strcmp(expected[i], name) == 0)
			return 1;
	return 0;
}

START_TEST(export_list)
{
	char cmd[4300];
	snprintf(cmd, sizeof cmd, "nm -D --defined-only '%s'", getenv("EBBTEST_LIBEBB"));
	FILE *p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	char line[512];
	int found = 0, total = 0;
	while (fgets(line, sizeof line, p)) {
		char addr[64], type[8], name[400];
		if (sscanf(line, "%63s %7s %399s", addr, type, name) != 3)
			continue;
		ck_assert_msg(is_expected(name), "libebb.so exports %s, which it does not interpose",
		    name);
		ck_assert_msg(strcmp(type, "T") == 0, "%s is exported as '%s', not a function", name,
		    type);
		found++;
	}
	ck_assert_int_eq(pclose(p), 0);
	for (int i = 0; expected[i]; i++)
		total++;
	ck_assert_int_eq(found, total);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("exports");
	TCase *tc = tcase_create("exports");

	add_test(tc, export_list);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
