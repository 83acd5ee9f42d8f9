/*
 * conf.c: the EBB_ variable table and its strict parser.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "conf.h"
#include "log.h"

static const char *const mode_names[] = { "off", "observe", "offload", NULL };

#define F(field) offsetof(struct ebb_conf, field), sizeof(((struct ebb_conf *)0)->field)

const struct ebb_conf_var ebb_conf_vars[] = {
	{ "EBB_MODE", EBB_CONF_ENUM, F(mode), 0, 0, mode_names, "observe",
	  "What ebb does: off (pass every call through), observe (record and trace, move nothing) or offload (keep the job under EBB_LIMIT by moving buffers to host memory and back).", 0, 0 },
	{ "EBB_LIMIT", EBB_CONF_SIZE, F(limit), 0, UINT64_MAX, NULL, "0",
	  "Device memory the job may hold in offload mode beyond the context at start, the driver's own later memory included (0: what the device has); past it ebb moves buffers to the host.", 0, 0 },
	{ "EBB_MIN_OFFLOAD_BYTES", EBB_CONF_SIZE, F(min_offload_bytes), 1, UINT64_MAX, NULL, "2M",
	  "Smallest buffer that may move in offload mode (raised to the device's 2 MiB granularity if lower); smaller ones never move.", 0, 0 },
	{ "EBB_HOST_LIMIT", EBB_CONF_SIZE, F(host_limit), 0, UINT64_MAX, NULL, "0",
	  "Pinned host memory ebb may use for offloaded buffers (0: as much as the system lets it pin).", 0, 0 },
	{ "EBB_TRACE", EBB_CONF_STRING, F(trace), 0, 0, NULL, "",
	  "Write the trace (ebb-trace(5)) to this file; %p is replaced by the process id. Empty: no trace.", 0, 0 },
	{ "EBB_STATUS_DIR", EBB_CONF_STRING, F(status_dir), 0, 0, NULL, "",
	  "A directory where each process in offload mode that did not hold EBB_LIMIT writes one file at exit, saying why; ebb run sets it, and exits with status 3 when one did while the job exited 0. Empty: none.", 0, 0 },
	{ "EBB_TRACE_BUFFER", EBB_CONF_SIZE, F(trace_buffer), 4096, 1ULL << 30, NULL, "1M",
	  "Bytes of trace buffered in memory before they are written out.", 0, 0 },
	{ "EBB_VERBOSE", EBB_CONF_UINT, F(verbose), 0, 3, NULL, "0",
	  "Messages on stderr: 0 warnings only, 1 also the exit summary and choices made, 2 state changes, 3 debugging detail.", 0, 0 },
	{ "EBB_STRICT", EBB_CONF_BOOL, F(strict), 0, 1, NULL, "0",
	  "Stop the process at start (exit status 2) when an EBB_ variable is malformed or unknown.", 0, 0 },
	{ "EBB_LEARN_ITERS", EBB_CONF_UINT, F(learn_iters), 1, 1000, NULL, "3",
	  "Iterations ebb times with CUPTI before it pauses it (it records again at a departure); those already whole when the iteration is found count.", 0, 0 },
	{ "EBB_LEARN_LAUNCHES", EBB_CONF_UINT, F(learn_launches), 1000, 100000000, NULL, "500000",
	  "Operations (launches, copies, memsets, NCCL calls, synchronisations) after which ebb stops looking for the iteration, and for which CUPTI stays paused after learning before it is finalised.", 0, 0 },
	{ "EBB_ITER_KERNEL", EBB_CONF_STRING, F(iter_kernel), 0, 0, NULL, "",
	  "An iteration starts at each launch of a kernel whose name contains this text (instead of finding the period).", 0, 0 },
	{ "EBB_CUPTI", EBB_CONF_BOOL, F(cupti), 0, 1, NULL, "1",
	  "Time the launches of the learning iterations on the GPU with CUPTI.", 0, 0 },
	{ "EBB_CUPTI_HOLD", EBB_CONF_UINT, F(cupti_hold), 0, 1000000, NULL, "16",
	  "Whole iterations the plan runs without a departure after which ebb finalises CUPTI, paused since learning (paused, it still slows every launch); 0: only EBB_LEARN_LAUNCHES ends the pause.", 0, 0 },
	{ "EBB_CUPTI_LIB", EBB_CONF_STRING, F(cupti_lib), 0, 0, NULL, "",
	  "Path of libcupti to load (default: one already loaded, then the CUDA toolkit's, then the one beside libcudart).", 0, 0 },
	{ "EBB_SITE_DEPTH", EBB_CONF_UINT, F(site_depth), 0, 32, NULL, "8",
	  "Stack frames hashed into the call-site fingerprint of allocations made while learning (0: none).", 0, 0 },
	{ "EBB_SELF_TIME", EBB_CONF_BOOL, F(self_time), 0, 1, NULL, "0",
	  "Time ebb's own host work in each operation, allocation, free and synchronisation (two clock reads each) and report it at exit.", 0, 0 },
	{ "EBB_PLAN", EBB_CONF_BOOL, F(plan), 0, 1, NULL, "1",
	  "In offload mode, learn when each buffer is used in the iteration and move buffers ahead of their use by a plan (0: only when over EBB_LIMIT, least recently used first).", 0, 0 },
	{ "EBB_PLAN_WAITS", EBB_CONF_BOOL, F(plan_waits), 0, 1, NULL, "1",
	  "Under the plan's bound, also try its stalls as waits where the floor wants them, and keep the faster plan (0: the greedy search's stalls only).", 0, 0 },
	{ "EBB_PLAN_PHASES", EBB_CONF_BOOL, F(plan_phases), 0, 1, NULL, "1",
	  "Take one decision for a buffer and the buffers made at its place in the micro-batches alike, checked together (0: a decision each).", 0, 0 },
	{ "EBB_PLAN_SECONDS", EBB_CONF_REAL, F(plan_seconds), 0, 0, NULL, "60",
	  "Seconds the planner may search for a plan (0: no limit); past them it keeps the plan it has, and the reactive mover does what that leaves over EBB_LIMIT.", 0, 86400 },
	{ "EBB_TARGET", EBB_CONF_REAL, F(target), 0, 0, NULL, "0",
	  "Peak device memory the plan aims for, as a fraction of the peak learned (0: EBB_LIMIT alone; with both, the lower).", 0, 1 },
	{ "EBB_PLAN_MARGIN", EBB_CONF_REAL, F(plan_margin), 0, 0, NULL, "0.015625",
	  "Fraction of EBB_LIMIT a plan keeps free (default 1/64): what ebb holds runs ahead of what the device uses, by the allocations the host has made for work not yet run and by memory the job freed that the device has not yet passed.", 0, 0.5 },
	{ "EBB_D2H_GBPS", EBB_CONF_REAL, F(d2h_gbps), 0, 0, NULL, "0",
	  "Device-to-host copy bandwidth the planner assumes, in GB/s (0: measured when offloading starts).", 0, 100000 },
	{ "EBB_H2D_GBPS", EBB_CONF_REAL, F(h2d_gbps), 0, 0, NULL, "0",
	  "Host-to-device copy bandwidth the planner assumes, in GB/s (0: measured when offloading starts).", 0, 100000 },
	{ "EBB_LAUNCH_RECORD_BYTES", EBB_CONF_SIZE, F(launch_record_bytes), 0, 1ULL << 40, NULL, "256M",
	  "Memory for the launch records of a recorded iteration in offload mode (what it takes to launch each again: function, geometry, stream, attributes, parameter bytes); the launches past it are not recorded (0: none is).", 0, 0 },
	{ "EBB_RECOMPUTE", EBB_CONF_BOOL, F(recompute), 0, 1, NULL, "0",
	  "In offload mode with a plan, learn which buffers could be remade by launching their producers again: the iteration after the recorded one is probed (every buffer a launch references is hashed on the device before and after it), each candidate is replayed once into scratch memory and compared, and then the plan is made again with the verified gaps: a buffer whose producers are cheaper to launch again than its bytes are to move is dropped after a use and remade before the next (reported at exit).", 0, 0 },
	{ "EBB_ARENA", EBB_CONF_BOOL, F(arena), 0, 1, NULL, "1",
	  "In offload mode, once a plan runs, the big buffers it neither moves nor drops (of 64 MiB at most) share 64 MiB chunks of device memory instead of each holding memory of its own size, so that memory freed in one size serves another without the driver's calls to release and map it (0: each has its own). It is turned off where its chunks pin the room a buffer needs, or where what they hold beyond their buffers would lower the plan under its bound.", 0, 0 },
	{ "EBB_REUSE_SLACK", EBB_CONF_REAL, F(reuse_slack), 0, 0, NULL, "0",
	  "In offload mode, a big buffer the job frees serves a later allocation up to this share smaller than itself, with its memory and mapping as they are (0: one of its own size only): fewer of the driver's calls to release memory and map new, for the bytes the larger block holds unused.", 0, 1 },
	{ "EBB_CAPTURE_JOIN", EBB_CONF_BOOL, F(capture_join), 0, 1, NULL, "0",
	  "In offload mode, at the end of a stream capture, make the capturing stream wait for every other stream in that capture, so that work on a side stream the job never joined back (as PyTorch's cudaMallocAsync backend leaves in a backward on two streams) does not fail the capture; ebb run sets it where it chooses that backend.", 0, 0 },
	{ NULL, 0, 0, 0, 0, 0, NULL, NULL, NULL, 0, 0 }
};

#undef F

const struct ebb_conf_var *
ebb_conf_find(const char *name)
{
	for (const struct ebb_conf_var *v = ebb_conf_vars; v->name; v++)
		if (strcmp(v->name, name) == 0)
			return v;
	return NULL;
}

const char *
ebb_conf_mode_name(int mode)
{
	if (mode < 0 || (size_t)mode >= sizeof mode_names / sizeof mode_names[0] - 1)
		return "?";
	return mode_names[mode];
}

/* strtoull that accepts only digits (no sign, no blanks) and reports overflow. */
static int
parse_digits(const char *text, uint64_t *out, char **end)
{
	if (!isdigit((unsigned char)text[0]))
		return -1;
	errno = 0;
	unsigned long long v = strtoull(text, end, 10);
	if (errno == ERANGE)
		return -1;
	*out = v;
	return 0;
}

int
ebb_conf_parse_uint(const char *text, uint64_t *out)
{
	char *end;
	uint64_t v;

	if (parse_digits(text, &v, &end) < 0 || *end != '\0')
		return -1;
	*out = v;
	return 0;
}

int
ebb_conf_parse_size(const char *text, uint64_t *out)
{
	char *end;
	uint64_t v;
	unsigned shift = 0;

	if (parse_digits(text, &v, &end) < 0)
		return -1;
	switch (*end) {
	case '\0': break;
	case 'k': case 'K': shift = 10; break;
	case 'm': case 'M': shift = 20; break;
	case 'g': case 'G': shift = 30; break;
	case 't': case 'T': shift = 40; break;
	default: return -1;
	}
	if (shift != 0 && end[1] != '\0')
		return -1;
	if (shift != 0 && v > (UINT64_MAX >> shift))
		return -1;
	*out = v << shift;
	return 0;
}

int
ebb_conf_parse_bool(const char *text, int *out)
{
	static const char *const yes[] = { "1", "yes", "true", "on", NULL };
	static const char *const no[] = { "0", "no", "false", "off", NULL };

	for (int i = 0; yes[i]; i++)
		if (strcasecmp(text, yes[i]) == 0) {
			*out = 1;
			return 0;
		}
	for (int i = 0; no[i]; i++)
		if (strcasecmp(text, no[i]) == 0) {
			*out = 0;
			return 0;
		}
	return -1;
}

int
ebb_conf_parse_real(const char *text, double *out)
{
	const char *c = text;
	int digits = 0, dots = 0;

	/* plain decimal only: no sign, exponent, hexadecimal, inf or nan */
	for (; *c; c++) {
		if (isdigit((unsigned char)*c))
			digits++;
		else if (*c == '.' && dots++ == 0)
			continue;
		else
			return -1;
	}
	if (digits == 0)
		return -1;
	*out = strtod(text, NULL);
	return 0;
}

/* Store text into the field of v; returns 0, or -1 and a description in *want. */
static int
set_value(struct ebb_conf *conf, const struct ebb_conf_var *v, const char *text,
    char *want, size_t wantlen)
{
	char *field = (char *)conf + v->offset;
	uint64_t u;
	int b;

	switch (v->type) {
	case EBB_CONF_BOOL:
		if (ebb_conf_parse_bool(text, &b) < 0) {
			snprintf(want, wantlen, "expected 0 or 1 (or yes/no, true/false, on/off)");
			return -1;
		}
		*(int *)(void *)field = b;
		return 0;
	case EBB_CONF_UINT:
		if (ebb_conf_parse_uint(text, &u) < 0 || u < v->min || u > v->max) {
			snprintf(want, wantlen, "expected a whole number from %llu to %llu",
			    (unsigned long long)v->min, (unsigned long long)v->max);
			return -1;
		}
		*(uint64_t *)(void *)field = u;
		return 0;
	case EBB_CONF_SIZE:
		if (ebb_conf_parse_size(text, &u) < 0 || u < v->min || u > v->max) {
			snprintf(want, wantlen,
			    "expected a size in bytes with an optional K, M, G or T suffix, from %llu to %llu bytes",
			    (unsigned long long)v->min, (unsigned long long)v->max);
			return -1;
		}
		*(uint64_t *)(void *)field = u;
		return 0;
	case EBB_CONF_STRING:
		if (strlen(text) >= v->size) {
			snprintf(want, wantlen, "expected at most %zu characters", v->size - 1);
			return -1;
		}
		memcpy(field, text, strlen(text) + 1);
		return 0;
	case EBB_CONF_REAL: {
		double d;
		if (ebb_conf_parse_real(text, &d) < 0 || d < v->rmin || d > v->rmax) {
			snprintf(want, wantlen, "expected a decimal number from %g to %g", v->rmin, v->rmax);
			return -1;
		}
		*(double *)(void *)field = d;
		return 0;
	}
	case EBB_CONF_ENUM:
		for (int i = 0; v->choices[i]; i++)
			if (strcmp(text, v->choices[i]) == 0) {
				*(int *)(void *)field = i;
				return 0;
			}
		{
			size_t n = (size_t)snprintf(want, wantlen, "expected one of:");
			for (int i = 0; v->choices[i] && n < wantlen; i++)
				n += (size_t)snprintf(want + n, wantlen - n, " %s", v->choices[i]);
		}
		return -1;
	}
	return -1;
}

int
ebb_conf_check_value(const char *name, const char *text, char *want, size_t wantlen)
{
	const struct ebb_conf_var *v = ebb_conf_find(name);
	struct ebb_conf scratch;

	if (v == NULL) {
		snprintf(want, wantlen, "%s is not an ebb variable", name);
		return -1;
	}
	return set_value(&scratch, v, text, want, wantlen);
}

int
ebb_conf_load(struct ebb_conf *conf, ebb_conf_lookup_fn lookup, void *ctx)
{
	char want[256];
	int bad = 0;

	memset(conf, 0, sizeof *conf);
	for (const struct ebb_conf_var *v = ebb_conf_vars; v->name; v++)
		if (set_value(conf, v, v->def, want, sizeof want) < 0)
			ebb_log(EBB_LOG_ERROR, "internal: default of %s does not parse", v->name);
	if (lookup == NULL)
		return 0;
	for (const struct ebb_conf_var *v = ebb_conf_vars; v->name; v++) {
		const char *text = lookup(v->name, ctx);
		if (text == NULL)
			continue;
		if (set_value(conf, v, text, want, sizeof want) < 0) {
			ebb_log(EBB_LOG_WARN, "%s='%s' is not valid: %s; using the default '%s'",
			    v->name, text, want, v->def);
			bad++;
		}
	}
	return bad;
}

int
ebb_conf_check_unknown(char *const *env)
{
	int n = 0;

	for (; env && *env; env++) {
		const char *e = *env;
		if (strncmp(e, "EBB_", 4) != 0)
			continue;
		const char *eq = strchr(e, '=');
		size_t len = eq ? (size_t)(eq - e) : strlen(e);
		char name[128];
		if (len >= sizeof name)
			len = sizeof name - 1;
		memcpy(name, e, len);
		name[len] = '\0';
		if (ebb_conf_find(name) == NULL) {
			ebb_log(EBB_LOG_WARN, "%s is not an ebb variable and is ignored (ebb(7) lists them)", name);
			n++;
		}
	}
	return n;
}
