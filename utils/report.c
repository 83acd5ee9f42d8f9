/*
 * report.c: check a trace with the shared reader and summarise it.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "phase.h"
#include "plancmd_int.h"
#include "report.h"
#include "trace_read.h"

/* Live bytes by buffer id, to find the peak of the trace. */
struct live {
	uint64_t *id, *size;
	size_t n, cap;
	uint64_t bytes, peak;
};

static int
live_add(struct live *l, uint64_t id, uint64_t size)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 1024;
		uint64_t *a = realloc(l->id, cap * sizeof *a);
		if (a == NULL)
			return -1;
		l->id = a;
		uint64_t *b = realloc(l->size, cap * sizeof *b);
		if (b == NULL)
			return -1;
		l->size = b;
		l->cap = cap;
	}
	l->id[l->n] = id;
	l->size[l->n] = size;
	l->n++;
	l->bytes += size;
	if (l->bytes > l->peak)
		l->peak = l->bytes;
	return 0;
}

static void
live_remove(struct live *l, uint64_t id)
{
	/* Recent buffers are freed first: search from the end. */
	for (size_t i = l->n; i-- > 0;)
		if (l->id[i] == id) {
			l->bytes -= l->size[i];
			l->id[i] = l->id[l->n - 1];
			l->size[i] = l->size[l->n - 1];
			l->n--;
			return;
		}
}

int
ebb_report(const char *path, FILE *out, FILE *err)
{
	struct ebb_trace_reader rd;

	if (ebb_trace_reader_open(&rd, path) < 0) {
		fprintf(err, "ebb report: cannot open %s: %s\n", path, strerror(errno));
		return 2;
	}
	uint64_t records = 0;
	uint64_t count[128] = { 0 };
	uint64_t unresolved = 0, nobuf = 0, refs = 0, lost = 0, resumed = 0, lowered = 0, raised = 0;
	const struct ebb_trace_rec *r = &rd.rec;
	struct live live = { 0 };
	struct phase_cut cut = { 0 };
	uint64_t markers = 0, cuts = 0;
	char why[EBB_TRACE_ERRLEN];
	int rc;

	while ((rc = ebb_trace_next(&rd, why, sizeof why)) > 0) {
		records++;
		count[(unsigned char)r->type & 127]++;
		uint64_t id, size, n;
		if (strchr("LCMNRY", r->type) != NULL) {
			int send, marker = planphase_marker(r, &send);
			markers += marker;
			cuts += markers > 0 && phase_cut_next(&cut, marker, send) > 0;
		}
		switch (r->type) {
		case 'A':
			if (ebb_trace_u64(r, 1, &id) == 0 && ebb_trace_u64(r, 3, &size) == 0)
				live_add(&live, id, size);
			break;
		case 'F':
			if (ebb_trace_u64(r, 1, &id) == 0)
				live_remove(&live, id);
			lost += strcmp(r->field[3], "lost") == 0;
			break;
		case 'Q':
			/* the plan ran on after a detour, or was made lower, or
			 * higher again (ebb(7)) */
			if (r->nfields >= 3) {
				resumed += strcmp(r->field[1], "plan-resumed") == 0;
				lowered += strcmp(r->field[1], "plan-target-lowered-bytes") == 0;
				raised += strcmp(r->field[1], "plan-target-raised-bytes") == 0;
			}
			break;
		case 'L':
			if (strcmp(r->field[4], "?") == 0)
				unresolved++;
			else if (ebb_trace_u64(r, 4, &n) == 0) {
				refs += n;
				if (n == 0)
					nobuf++;
			}
			break;
		default:
			break;
		}
	}
	if (rc < 0) {
		fprintf(err, "ebb report: %s\n", why);
		rc = 1;
	} else {
		fprintf(out, "trace: %s\n", path);
		fprintf(out, "version: %d\n", rd.version);
		fprintf(out, "records: %llu\n", (unsigned long long)records);
		fprintf(out, "kernels: %llu\n", (unsigned long long)count['K']);
		fprintf(out, "launches: %llu\n", (unsigned long long)count['L']);
		fprintf(out, "launches-unresolved: %llu\n", (unsigned long long)unresolved);
		fprintf(out, "launches-without-buffer: %llu\n", (unsigned long long)nobuf);
		fprintf(out, "buffer-references: %llu\n", (unsigned long long)refs);
		fprintf(out, "copies: %llu\n", (unsigned long long)count['C']);
		fprintf(out, "memsets: %llu\n", (unsigned long long)count['M']);
		fprintf(out, "nccl-calls: %llu\n", (unsigned long long)count['N']);
		fprintf(out, "stage-markers: %llu\n", (unsigned long long)markers);
		fprintf(out, "stage-phases: %llu\n", (unsigned long long)cuts);
		fprintf(out, "graph-launches: %llu\n", (unsigned long long)count['R']);
		fprintf(out, "allocations: %llu\n", (unsigned long long)count['A']);
		fprintf(out, "frees: %llu\n", (unsigned long long)(count['F'] - lost));
		fprintf(out, "frees-lost: %llu\n", (unsigned long long)lost);
		fprintf(out, "peak-bytes: %llu\n", (unsigned long long)live.peak);
		fprintf(out, "gpu-timed: %llu\n", (unsigned long long)count['G']);
		fprintf(out, "syncs: %llu\n", (unsigned long long)count['Y']);
		fprintf(out, "iterations: %llu\n", (unsigned long long)count['I']);
		fprintf(out, "departures: %llu\n", (unsigned long long)count['D']);
		fprintf(out, "plans-resumed: %llu\n", (unsigned long long)resumed);
		fprintf(out, "plans-lowered: %llu\n", (unsigned long long)lowered);
		fprintf(out, "plans-raised: %llu\n", (unsigned long long)raised);
		fprintf(out, "failures: %llu\n", (unsigned long long)count['X']);
	}
	ebb_trace_reader_close(&rd);
	free(live.id);
	free(live.size);
	return rc;
}
