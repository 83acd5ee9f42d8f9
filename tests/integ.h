/*
 * integ.h: helpers of the integration tests: programs run under libebb.so
 * on the fake driver (tests/fakecuda), and their traces loaded for checks.
 */
#ifndef EBB_TEST_INTEG_H
#define EBB_TEST_INTEG_H

#include <stddef.h>
#include <stdint.h>

#include "testutil.h"

/* One trace record: its type letter and fields (after the letter). */
struct rec {
	char type;
	size_t n;
	char **f;
};

/* A whole trace, every record checked by the reader (trace_load). */
struct trace {
	struct rec *r;
	size_t n;
	char *text;
};

/* Load and check the trace at path (the test fails on a malformed one). */
void trace_load(const char *path, struct trace *t);
void trace_free(struct trace *t);

/* Field i of r as a number (decimal, or hex with 0x). */
uint64_t num(const struct rec *r, size_t i);

/* Records of a type. */
size_t count_type(const struct trace *t, char type);

/* Kernel id of the K record named name, or 0. */
uint64_t kernel_id(const struct trace *t, const char *name);

/* The value of the Z record key, or UINT64_MAX. */
uint64_t summary(const struct trace *t, const char *key);

/* Buffer list of the k-th launch of kernel kid, as "1,2,3" (as written), "?" if unresolved. */
const char *launch_bufs(const struct trace *t, uint64_t kid, int k);

/* tests/progs/workload, or workload-linked (bound to the driver's ELF names). */
char *workload_path(int linked);

/*
 * Run argv with libebb.so preloaded on the fake driver (EBB_CUPTI=0,
 * EBB_VERBOSE=1, EBB_TRACE=trace or none); env adds to or overrides those.
 */
void run_ebb(char *const argv[], const char *const *env, const char *trace, struct run_result *r);

/* The workload exited 0 and printed "ok" (else the test fails, showing its output). */
void expect_ok(const struct run_result *r);

/* Run the ebb command (utils/ebb of the build) with args (NULL-terminated,
 * at most 14) into r. */
void ebb_cmd(struct run_result *r, const char *const *args);

/* The number after key (\"name: \") in out, an ebb command's output; fails
 * the test when out has no key. */
uint64_t value_of(const char *out, const char *key);

/* The workload's line of the fake driver's statistics: cuMemFree calls and peak bytes. */
void driver_line(const char *out, unsigned long long *frees, unsigned long long *peak);

#endif
