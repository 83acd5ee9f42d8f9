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
print_phases(FILE *out, const struct phase_set *ps, uint64_t markers, uint64_t s0, uint64_t links,
    int shared)
{
	if (markers > 0)
		fprintf(out, "\npipeline phases: %u from %llu stage markers: ", ps->n,
		    (unsigned long long)markers);
	else
		fprintf(out, "\nmicro-batch phases: %u from the turns of memory (no NCCL send or "
		    "receive to a stage beside this rank): ", ps->n);
	fprintf(out, "%u forward, %u backward, %u other\n", ps->nforward, ps->nbackward,
	    ps->n - ps->nforward - ps->nbackward);
	uint32_t alike = 0;
	for (uint32_t i = 0; i < ps->n; i++)
		alike += ps->ph[i].alike >= 0;
	fprintf(out, "phases alike: %u with a later one alike, %llu buffers linked to their "
	    "siblings there (%s)\n", alike, (unsigned long long)links, shared ?
	    "the plan takes one decision for each chain" : "--no-phases: the plan decides each gap alone");
	if (ps->n > PLANPHASE_LISTED) {
		fprintf(out, "(more than %d: not listed)\n", PLANPHASE_LISTED);
		return;
	}
	fprintf(out, "%6s  %21s  %8s  %10s  %10s  %6s  %s\n", "phase", "operations", "kind",
	    "made MiB", "freed MiB", "alike", "uses the buffers of");
	for (uint32_t i = 0; i < ps->n; i++) {
		const struct phase *ph = &ps->ph[i];
		char ops[32], of[64] = "";
		snprintf(ops, sizeof ops, "%llu-%llu", (unsigned long long)(s0 + ph->first),
		    (unsigned long long)(s0 + ph->last));
		if (ph->kind == PHASE_BACKWARD)
			snprintf(of, sizeof of, "phase %d (%.2f MiB)", ph->forward,
			    (double)ph->paired / MIB);
		char like[16] = "";
		if (ph->alike >= 0)
			snprintf(like, sizeof like, "%d", ph->alike);
		fprintf(out, "%6u  %21s  %8s  %10.2f  %10.2f  %6s  %s\n", i, ops, kind_name(ph->kind),
		    (double)ph->made / MIB, (double)ph->freed / MIB, like, of);
	}
}

/* planphase_cuts (plancmd_int.h) */
int
planphase_cuts(struct plancmd *g)
{
	struct plancmd_src *s = &g->s;
	struct prof *p = &g->b.r.p;
	uint32_t n = p->nops, nstart = 0;
	uint32_t *start = malloc((n ? n : 1) * sizeof *start);
	struct phase_cut cut = { 0 };
	char why[EBB_TRACE_ERRLEN];
	uint64_t seq;
	int rc;

	g->markers = 0;
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
		g->markers += marker;
		phase_cut_record(start, &nstart, n, (uint32_t)(seq - g->s0),
		    phase_cut_next(&cut, marker, send));
	}
	if (rc < 0) {
		fprintf(s->err, "ebb plan: %s\n", why);
		free(start);
		return -1;
	}
	/* with markers, where they cut it (without, the memory's turns alone) */
	for (uint32_t i = 0; g->markers > 0 && i < nstart; i++)
		if (prof_cut(p, start[i]) < 0) {
			fprintf(s->err, "ebb plan: out of memory\n");
			free(start);
			return -1;
		}
	free(start);
	return 0;
}

/* planphase_print (plancmd_int.h) */
int
planphase_print(struct plancmd *g, int shared, FILE *out)
{
	const struct prof *p = &g->b.r.p;
	const uint32_t zero = 0;
	uint32_t nb = p->nbufs ? p->nbufs : 1;
	uint32_t *next = malloc(nb * sizeof *next), *prev = malloc(nb * sizeof *prev);
	uint32_t *shift = malloc(nb * sizeof *shift);
	struct phase_set ps;
	int64_t links = -1;

	const uint32_t *cut = p->cut != NULL ? p->cut : &zero;
	if (next != NULL && prev != NULL && shift != NULL &&
	    phase_split(p, cut, p->cut != NULL ? p->ncut : 1, &ps) == 0) {
		links = phase_siblings(p, &ps, next, prev, shift);
		if (links < 0)
			phase_fini(&ps);
	}
	free(next);
	free(prev);
	free(shift);
	if (links < 0) {
		fprintf(g->s.err, "ebb plan: %s: out of memory, or the iteration's operations are not "
		    "all in the trace\n", g->s.path);
		return -1;
	}
	print_phases(out, &ps, g->markers, g->s0, (uint64_t)links, shared);
	phase_fini(&ps);
	return 0;
}
