/*
 * planphase.c: the pipeline stage markers of a trace (N records of sends
 * and receives to the stages beside the caller's rank) and the phases of
 * the planned iteration (policy/phase.h), for `ebb report` and `ebb plan`
 * (plancmd_int.h).
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "phase.h"
#include "plancmd_int.h"

#define MIB (1024.0 * 1024.0)

/* A signed decimal field of r into *v; -1 when it is not one. */
static int
field_int(const struct ebb_trace_rec *r, size_t i, long *v)
{
	char *end;

	if (i >= r->nfields)
		return -1;
	errno = 0;
	*v = strtol(r->field[i], &end, 10);
	return errno != 0 || end == r->field[i] || *end != '\0' ? -1 : 0;
}

/* planphase_marker (plancmd_int.h) */
int
planphase_marker(const struct ebb_trace_rec *r, int *send)
{
	long peer, rank, nranks;

	*send = 0;
	if (r->type != 'N' || r->nfields < 8)
		return 0;
	int s = strcmp(r->field[3], "send") == 0;
	if (!s && strcmp(r->field[3], "recv") != 0)
		return 0;
	if (field_int(r, 4, &peer) < 0 || field_int(r, 6, &rank) < 0 ||
	    field_int(r, 7, &nranks) < 0 || nranks > 1 << 20)
		return 0;
	*send = s;
	return phase_marker((int)rank, (int)nranks, (int)peer);
}

/* The kind of a phase, as printed. */
static const char *
kind_name(enum phase_kind k)
{
	return k == PHASE_FORWARD ? "forward" : k == PHASE_BACKWARD ? "backward" : "other";
}

/* Print the phases of ps, of the iteration from operation s0. */
static void
print_phases(FILE *out, const struct phase_set *ps, uint64_t markers, uint64_t s0)
{
	if (markers > 0)
		fprintf(out, "\npipeline phases: %u from %llu stage markers: ", ps->n,
		    (unsigned long long)markers);
	else
		fprintf(out, "\nmicro-batch phases: %u from the turns of memory (no NCCL send or "
		    "receive to a stage beside this rank): ", ps->n);
	fprintf(out, "%u forward, %u backward, %u other\n", ps->nforward, ps->nbackward,
	    ps->n - ps->nforward - ps->nbackward);
	if (ps->n > PLANPHASE_LISTED) {
		fprintf(out, "(more than %d: not listed)\n", PLANPHASE_LISTED);
		return;
	}
	fprintf(out, "%6s  %21s  %8s  %10s  %10s  %s\n", "phase", "operations", "kind", "made MiB",
	    "freed MiB", "uses the buffers of");
	for (uint32_t i = 0; i < ps->n; i++) {
		const struct phase *ph = &ps->ph[i];
		char ops[32], of[64] = "";
		snprintf(ops, sizeof ops, "%llu-%llu", (unsigned long long)(s0 + ph->first),
		    (unsigned long long)(s0 + ph->last));
		if (ph->kind == PHASE_BACKWARD)
			snprintf(of, sizeof of, "phase %d (%.2f MiB)", ph->forward,
			    (double)ph->paired / MIB);
		fprintf(out, "%6u  %21s  %8s  %10.2f  %10.2f  %s\n", i, ops, kind_name(ph->kind),
		    (double)ph->made / MIB, (double)ph->freed / MIB, of);
	}
}

/* planphase_print (plancmd_int.h) */
int
planphase_print(struct plancmd *g, FILE *out)
{
	struct plancmd_src *s = &g->s;
	uint32_t n = g->b.r.p.nops, nstart = 0;
	uint32_t *start = malloc((n ? n : 1) * sizeof *start);
	struct phase_cut cut = { 0 };
	char why[EBB_TRACE_ERRLEN];
	uint64_t markers = 0, seq;
	int rc;

	if (start == NULL) {
		fprintf(s->err, "ebb plan: out of memory\n");
		return -1;
	}
	if (ebb_trace_rewind(&s->rd) < 0) {
		fprintf(s->err, "ebb plan: %s: cannot read it again: %s\n", s->path, strerror(errno));
		free(start);
		return -1;
	}
	while ((rc = ebb_trace_next(&s->rd, why, sizeof why)) > 0) {
		const struct ebb_trace_rec *r = &s->rd.rec;
		if (strchr("LCMNRY", r->type) == NULL || ebb_trace_u64(r, 1, &seq) < 0 ||
		    seq < g->s0)
			continue;
		if (seq >= g->s0 + n)
			break;
		int send, marker = planphase_marker(r, &send);
		markers += marker;
		phase_cut_record(start, &nstart, n, (uint32_t)(seq - g->s0),
		    phase_cut_next(&cut, marker, send));
	}
	if (rc < 0) {
		fprintf(s->err, "ebb plan: %s\n", why);
		free(start);
		return -1;
	}
	struct phase_set ps;
	if (nstart == 0 || start[0] != 0 || phase_split(&g->b.r.p, start, nstart, &ps) < 0) {
		fprintf(s->err, "ebb plan: %s: out of memory, or the iteration's operations are not "
		    "all in the trace\n", s->path);
		free(start);
		return -1;
	}
	print_phases(out, &ps, markers, g->s0);
	phase_fini(&ps);
	free(start);
	return 0;
}
