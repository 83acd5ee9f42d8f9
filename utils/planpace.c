/*
 * planpace.c: the job's host pace over the iteration ebb plan plans: the
 * library's, from the trace's E records of a recording it planned, or the
 * issue times' (plancmd_int.h).
 */
#include "config.h"

#include <stdlib.h>

#include "plan.h"
#include "plancmd_int.h"

/* The E records of operations s0 to s0 + n, the last run of them that has
 * each in order; NULL where none has. */
static const struct plancmd_pace *
run_of(const struct plancmd_scan *sc, uint64_t s0, uint32_t n)
{
	for (size_t j = sc->npace; j-- > 0;) {
		if (sc->pace[j].seq != s0 || sc->npace - j < (size_t)n + 1)
			continue;
		uint32_t k = 1;
		while (k <= n && sc->pace[j + k].seq == s0 + k)
			k++;
		if (k > n)
			return &sc->pace[j];
	}
	return NULL;
}

/* Whether v holds x. */
static int
holds(const uint64_t *v, size_t n, uint64_t x)
{
	for (size_t i = 0; i < n; i++)
		if (v[i] == x)
			return 1;
	return 0;
}

/* The E records of the iteration of n operations from s0, where the
 * library planned it: its own, or, where a plan-recording note names it,
 * those of the pace iteration the library took for it (the iteration after
 * it, or after its probe), which a plan-pace-from note names. NULL where
 * there are none. */
static const struct plancmd_pace *
recording_pace(const struct plancmd_scan *sc, uint64_t s0, uint32_t n)
{
	for (uint64_t k = 1; k <= 2 && holds(sc->recorded, sc->nrecorded, s0); k++) {
		const struct plancmd_pace *pe;
		if (holds(sc->pace_from, sc->npace_from, s0 + k * n) &&
		    (pe = run_of(sc, s0 + k * n, n)) != NULL)
			return pe;
	}
	return run_of(sc, s0, n);
}

/*
 * The host's side of the iteration's profile, n operations from s0: the
 * job's pace. Where the trace has the library's E records of the iteration
 * (a recording it planned), from them, as the library had it: ebb's own
 * time and the driver's queue left out, a synchronisation's wait replayed.
 * Else from the issue times alone (an observe trace: ebb's own time in them
 * is small). With the host's times as durations, the pace is not in the
 * profile (as in the library); the E records' is still summed, for the
 * report. Returns 0, or -1 when out of memory (said). (plancmd_int.h)
 */
int
planpace_profile(struct plancmd_src *s, const struct plancmd_scan *sc, struct plancmd_build *b,
    uint64_t s0, uint32_t n)
{
	const struct plancmd_pace *pe = recording_pace(sc, s0, n);

	if (pe == NULL) {
		if (!b->host && prof_host_pace(&b->r.p, b->issue, NULL, NULL, b->sync, NULL) < 0) {
			fprintf(s->err, "ebb plan: out of memory\n");
			return -1;
		}
		return 0;
	}
	uint64_t *issue = malloc(((size_t)n + 1) * sizeof *issue);
	uint64_t *ebb = malloc(((size_t)n + 1) * sizeof *ebb);
	uint64_t *call = malloc(((size_t)n + 1) * sizeof *call);
	uint8_t *sync = malloc((size_t)n + 1);
	struct prof q = { 0 };
	struct prof *p = b->host ? &q : &b->r.p;
	int rc = -1;

	if (issue == NULL || ebb == NULL || call == NULL || sync == NULL ||
	    (b->host && prof_init(&q, n) < 0))
		goto out;
	for (uint32_t i = 0; i <= n; i++) {
		issue[i] = pe[i].issue;
		ebb[i] = pe[i].ebb;
		call[i] = pe[i].call;
		sync[i] = pe[i].sync;
	}
	if (prof_host_pace(p, issue, ebb, call, sync, &b->pace_queued_s) < 0)
		goto out;
	b->pace_s = 0;
	for (uint32_t i = 0; i < n; i++)
		b->pace_s += p->host[i];
	b->pace_ebb_s = (double)(ebb[n] - ebb[0]) / 1e9;
	b->pace_e = 1;
	rc = 0;
out:
	if (b->host)
		prof_fini(&q);
	free(issue);
	free(ebb);
	free(call);
	free(sync);
	if (rc < 0)
		fprintf(s->err, "ebb plan: out of memory\n");
	return rc;
}
