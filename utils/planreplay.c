/*
 * planreplay.c: `ebb plan --replay`: the write sets the library measured
 * (V records, EBB_RECOMPUTE=1) applied to the planned iteration's profile
 * as the library applies them to its recording (src/exec/probe.c,
 * probe_apply), and the gaps replay_find (policy/replay.h) says a replay
 * could bridge.
 *
 * The V records of one probe name launches of one iteration, the probed
 * one; their buffers are those of the launches of the iteration before it,
 * the one the library recorded. The profile is of the iteration ebb plan
 * chose: the same one, or another of the same period, matched position by
 * position. A position is measured where the recorded launch lists as many
 * buffers as the V record, and the probed and the planned launches' buffers
 * match them as the library matches launches (replay_match_launch: the same
 * sizes in order, or some more or fewer, or a pair of other sizes: words
 * that fell inside buffers by chance). Access j of the V record is that of
 * the planned launch's buffer matched to j; a planned buffer matched to none
 * has an unknown access. A launch can be launched again where every
 * reference is measured and its buffer is in the library's profile: one ebb
 * serves, a range of its own or a slab's (EBB_SLAB_MAX_BYTES), not the
 * driver's (a pitched or mapped allocation). ebb plan has no launch
 * records: a launch whose L record lists its buffers counts as having a
 * complete one.
 *
 * Then the plan with recompute (plan_make_recompute, src/common/planrun.h)
 * at the last target, beside the moves alone. A run recomputes only the
 * candidates its replays verified (EBB_RECOMPUTE); offline every candidate
 * counts as verified. The streams are the trace's: the operations' L, C, M,
 * N and R records name them.
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"
#include "plancmd_int.h"
#include "planrun.h"
#include "trace_format.h"
#include "record.h"
#include "replay.h"

#define MIB (1024.0 * 1024.0)
#define GIB (1024.0 * MIB)

/* Candidates listed, those with the most bytes times window first. */
#define TOP 20

/* The iterations whose launches a V record's position is matched in. */
enum { IT_PROBED, IT_RECORDED, IT_PLANNED, IT_N };

/* What is known of a V record's position (struct match's state): the
 * launch of iteration i is kept (1 << i), or one lacked an A record. */
enum { M_OTHER = 1 << IT_N };

/* The buffers of the launches kept for V records, in one iteration. */
struct side {
	struct plancmd_ref *ref;	/* launch k's: ref[first[k] .. + n[k]) */
	size_t *first;			/* by V record */
	uint32_t *n;
	size_t len, cap;
};

/* The last probe's V records, and the launches of the probed iteration, the
 * one the library recorded (the one before it: the V record's buffers are
 * that launch's) and the planned one at their positions (what
 * plancmd_launches gives on_launch). */
struct match {
	const struct plancmd_scan *sc;
	uint64_t from[IT_N];	/* each iteration's first operation */
	uint32_t nops;		/* the period of all */
	uint32_t *at;		/* position -> its V record in sc->v; UINT32_MAX: none */
	uint8_t *launch;	/* the planned iteration has a launch at the position */
	uint8_t *state;		/* M_* of each V record */
	struct side side[IT_N];
	uint64_t *handle;	/* the stream of each operation from lo (plancmd_launches) */
	uint64_t lo;
	uint64_t measured;	/* the probe's V records */
	uint64_t matched;	/* of them, those whose position is measured */
	uint64_t replayable;	/* launches that can be launched again */
	uint64_t wild;		/* launches that may write what they do not reference */
};

/* The iteration the last probe measured: the I record with the latest
 * start whose operations hold the last V record's launch; NULL when none. */
static const struct plancmd_mark *
probed_iteration(const struct plancmd_scan *sc)
{
	uint64_t q = sc->v[sc->nv - 1].seq;
	const struct plancmd_mark *best = NULL;

	for (size_t i = 0; i < sc->nmark; i++) {
		const struct plancmd_mark *m = &sc->mark[i];
		if (m->period > 0 && m->seq <= q && q - m->seq < m->period &&
		    (best == NULL || m->seq >= best->seq))
			best = m;
	}
	return best;
}

/* Keep the n buffers of the launch seq of the trace where it is at a V
 * record's position of iteration it. */
static void
keep_launch(struct match *m, uint64_t seq, int it, const struct plancmd_ref *ref, size_t n)
{
	uint64_t from = m->from[it];
	if (seq < from || seq - from >= m->nops || m->at[seq - from] == UINT32_MAX)
		return;
	uint32_t k = m->at[seq - from];
	struct side *sd = &m->side[it];
	if (n > REPLAY_MATCH_MAX) {
		m->state[k] |= M_OTHER;
		return;
	}
	if (sd->len + n > sd->cap) {
		size_t c = sd->cap ? sd->cap * 2 : 4096;
		while (c < sd->len + n)
			c *= 2;
		struct plancmd_ref *v = realloc(sd->ref, c * sizeof *v);
		if (v == NULL) {
			m->state[k] |= M_OTHER;	/* (out of memory: not measured) */
			return;
		}
		sd->ref = v;
		sd->cap = c;
	}
	sd->first[k] = sd->len;
	sd->n[k] = (uint32_t)n;
	for (size_t j = 0; j < n; j++) {
		if (!ref[j].known)
			m->state[k] |= M_OTHER;
		sd->ref[sd->len++] = ref[j];
	}
	m->state[k] |= 1u << it;
}

/* plancmd_launch_fn: a launch of the trace, kept where it is at a V record's
 * position of either iteration. Returns 0. */
static int
on_launch(void *arg, uint64_t seq, const struct plancmd_ref *ref, size_t n)
{
	struct match *m = arg;

	uint64_t s0 = m->from[IT_PLANNED];
	if (seq >= s0 && seq - s0 < m->nops)
		m->launch[seq - s0] = 1;
	for (int it = 0; it < IT_N; it++)
		keep_launch(m, seq, it, ref, n);
	return 0;
}

/* The sizes of iteration it's launch kept for V record k into out; returns
 * how many. */
static size_t
sizes(const struct match *m, int it, uint32_t k, uint64_t *out)
{
	const struct side *sd = &m->side[it];

	for (uint32_t j = 0; j < sd->n[k]; j++)
		out[j] = sd->ref[sd->first[k] + j].size;
	return sd->n[k];
}

/*
 * Whether V record k's position is measured: the three launches seen, the
 * recorded one's buffers as many as the V record's, the probed and the
 * planned one's matched to them as the library matches launches
 * (replay_match_launch). probed[j], planned[j]: the index of the V
 * record's buffer j in the probed and the planned launch, or
 * REPLAY_UNMATCHED.
 */
static int
same_shape(const struct match *m, uint32_t k, uint32_t *probed, uint32_t *planned)
{
	const struct plancmd_access *v = &m->sc->v[k];
	uint64_t rec[REPLAY_MATCH_MAX], got[REPLAY_MATCH_MAX];
	const unsigned all = (1u << IT_N) - 1;

	if (m->state[k] != all || v->n > REPLAY_MATCH_MAX || sizes(m, IT_RECORDED, k, rec) != v->n)
		return 0;
	size_t n = sizes(m, IT_PROBED, k, got);
	if (replay_match_launch(rec, v->n, got, n, probed) < 0)
		return 0;
	n = sizes(m, IT_PLANNED, k, got);
	return replay_match_launch(rec, v->n, got, n, planned) >= 0;
}

/* The measured positions' accesses into r (rec_access), the launches that
 * can be launched again (prof_replayable), and those that may write what
 * they do not reference (prof_wild: not hashed, or referencing a buffer
 * that held pointers, EBB_TRACE_ACC_POINTERS), as the library's probe_apply. Returns
 * 0, or -1 when out of memory. */
static int
apply(struct match *m, struct rec *r)
{
	uint64_t s0 = m->from[IT_PLANNED];

	for (uint32_t pos = 0; pos < m->nops; pos++) {
		uint32_t k = m->at[pos];
		uint32_t probed[REPLAY_MATCH_MAX], planned[REPLAY_MATCH_MAX];
		/* hashed: a V record; measured: its buffers matched to the planned
		 * launch's. A launch hashed but not matched (chance words naming
		 * other buffers) keeps unknown accesses and is wild only where a
		 * buffer held pointers, as in the library */
		int hashed = k != UINT32_MAX, pointers = 0;
		int measured = hashed && same_shape(m, k, probed, planned);
		if (hashed) {
			const struct plancmd_access *v = &m->sc->v[k];
			for (size_t j = 0; j < v->n; j++)
				pointers |= (m->sc->acc[v->first + j] & EBB_TRACE_ACC_POINTERS) != 0;
		}
		if (m->launch[pos] && (!hashed || pointers)) {
			if (prof_wild(&r->p, pos) < 0)
				return -1;
			m->wild++;
		}
		if (!measured)
			continue;
		const struct plancmd_access *v = &m->sc->v[k];
		const struct side *pl = &m->side[IT_PLANNED];
		const struct plancmd_ref *pref = pl->ref + pl->first[k];
		uint8_t named[REPLAY_MATCH_MAX] = { 0 };
		int all = !pointers;
		m->matched++;
		for (size_t j = 0; j < v->n; j++) {
			if (planned[j] == REPLAY_UNMATCHED)
				continue;	/* not a buffer of the planned launch */
			const struct plancmd_ref *b = &pref[planned[j]];
			named[planned[j]] = 1;
			/* (a buffer the probed launch did not have: not measured, as the
			 * library writes it) */
			unsigned acc = probed[j] == REPLAY_UNMATCHED ? PROF_ACC_UNKNOWN :
			    m->sc->acc[v->first + j] & ~(unsigned)EBB_TRACE_ACC_POINTERS;
			int rc = b->own ? rec_access(r, s0 + pos, b->bid, acc) : 1;
			if (rc < 0)
				return -1;
			all &= rc == 0;
		}
		/* the planned launch's buffers the recorded one did not have: unknown */
		for (uint32_t x = 0; x < pl->n[k]; x++) {
			if (named[x])
				continue;
			int rc = pref[x].own ? rec_access(r, s0 + pos, pref[x].bid, PROF_ACC_UNKNOWN) : 1;
			if (rc < 0)
				return -1;
			all &= rc == 0;
		}
		if (all && v->n > 0) {
			if (prof_replayable(&r->p, pos) < 0)
				return -1;
			m->replayable++;
		}
	}
	return 0;
}

/* Free what m holds. */
static void
match_free(struct match *m)
{
	free(m->at);
	free(m->launch);
	free(m->state);
	for (int it = 0; it < IT_N; it++) {
		free(m->side[it].ref);
		free(m->side[it].first);
		free(m->side[it].n);
	}
	free(m->handle);
}

/*
 * Match the last probe of iteration q to g's profile and apply it. Returns
 * 0, or -1 when the trace cannot be read again or memory runs out (said).
 */
static int
match_probe(struct plancmd *g, const struct plancmd_mark *q, struct match *m)
{
	const struct plancmd_scan *sc = &g->sc;

	m->sc = sc;
	m->nops = g->b.r.p.nops;
	m->from[IT_PROBED] = q->seq;
	/* (the library records an iteration, then probes the next) */
	m->from[IT_RECORDED] = q->seq >= m->nops ? q->seq - m->nops : q->seq;
	m->from[IT_PLANNED] = g->s0;
	m->at = malloc((m->nops ? m->nops : 1) * sizeof *m->at);
	m->launch = calloc(m->nops ? m->nops : 1, 1);
	m->state = calloc(sc->nv, 1);
	int sides = 1;
	for (int it = 0; it < IT_N; it++) {
		m->side[it].first = calloc(sc->nv ? sc->nv : 1, sizeof *m->side[it].first);
		m->side[it].n = calloc(sc->nv ? sc->nv : 1, sizeof *m->side[it].n);
		sides &= m->side[it].first != NULL && m->side[it].n != NULL;
	}
	if (m->at == NULL || m->launch == NULL || m->state == NULL || !sides) {
		fprintf(g->s.err, "ebb plan: %s: out of memory\n", g->s.path);
		return -1;
	}
	memset(m->at, 0xff, (m->nops ? m->nops : 1) * sizeof *m->at);
	for (size_t k = 0; k < sc->nv; k++) {
		uint64_t seq = sc->v[k].seq;
		uint64_t q0 = m->from[IT_PROBED];
		if (seq >= q0 && seq - q0 < m->nops) {
			m->at[seq - q0] = (uint32_t)k;	/* a later record of a position wins */
			m->measured++;
		}
	}
	uint64_t lo = UINT64_MAX, hi = 0;
	for (int it = 0; it < IT_N; it++) {
		lo = m->from[it] < lo ? m->from[it] : lo;
		hi = m->from[it] + m->nops > hi ? m->from[it] + m->nops : hi;
	}
	m->lo = lo;
	if ((m->handle = calloc(hi - lo ? hi - lo : 1, sizeof *m->handle)) == NULL) {
		fprintf(g->s.err, "ebb plan: %s: out of memory\n", g->s.path);
		return -1;
	}
	if (plancmd_launches(&g->s, lo, hi, on_launch, m, m->handle) < 0)
		return -1;
	if (apply(m, &g->b.r) < 0) {
		fprintf(g->s.err, "ebb plan: %s: out of memory\n", g->s.path);
		return -1;
	}
	return 0;
}

/* One candidate and what it is ranked by. */
struct ranked {
	double score;		/* bytes times (r_hi - r_lo) */
	uint32_t i;		/* its index in the set */
};

/* qsort order of candidates: the highest score first, then the set's order. */
static int
cmp_ranked(const void *a, const void *b)
{
	const struct ranked *x = a, *y = b;

	if (x->score != y->score)
		return x->score > y->score ? -1 : 1;
	return x->i < y->i ? -1 : x->i > y->i;
}

/* The TOP candidates of rs with the most bytes times window, on out.
 * Returns 0, or -1 when out of memory. */
static int
print_top(const struct plancmd *g, const struct replay_set *rs, FILE *out)
{
	const struct prof *p = &g->b.r.p;
	struct ranked *rk = malloc((rs->n ? rs->n : 1) * sizeof *rk);
	char gap[48], win[48];

	if (rk == NULL)
		return -1;
	for (uint32_t i = 0; i < rs->n; i++)
		rk[i] = (struct ranked){ (double)rs->c[i].bytes * (rs->c[i].r_hi - rs->c[i].r_lo), i };
	if (rs->n > 1)
		qsort(rk, rs->n, sizeof *rk, cmp_ranked);
	uint32_t n = rs->n < TOP ? rs->n : TOP;
	fprintf(out, "\ncandidates by bytes x window, the %u of %u with the most:\n", n, rs->n);
	fprintf(out, "%10s  %10s  %15s  %15s  %5s  %10s  %s\n", "bid", "MiB", "gap", "window",
	    "chain", "chain ms", "chain's operations");
	if (n == 0)
		fprintf(out, "(none)\n");
	for (uint32_t k = 0; k < n; k++) {
		const struct replay_cand *c = &rs->c[rk[k].i];
		const struct prof_buf *b = &p->buf[c->buf];
		snprintf(gap, sizeof gap, "%llu-%llu", (unsigned long long)(g->s0 + b->use[c->gap]),
		    (unsigned long long)(g->s0 + b->use[c->gap + 1]));
		snprintf(win, sizeof win, "%llu-%llu", (unsigned long long)(g->s0 + c->r_lo),
		    (unsigned long long)(g->s0 + c->r_hi));
		fprintf(out, "%10llu  %10.2f  %15s  %15s  %5u  %10.3f  ",
		    (unsigned long long)g->b.bid[c->buf], (double)c->bytes / MIB, gap, win, c->nchain,
		    c->cost_s * 1e3);
		const uint32_t *ops = replay_chain(rs, c);
		for (uint32_t j = 0; j < c->nchain; j++)
			fprintf(out, "%s%llu", j ? "," : "", (unsigned long long)(g->s0 + ops[j]));
		fputc('\n', out);
	}
	free(rk);
	return 0;
}

/* The summary of rs on out: what was measured and matched, the gaps, the
 * refusals and the top candidates. Returns 0, or -1 when out of memory. */
static int
print_summary(const struct plancmd *g, const struct plancmd_mark *q, const struct match *m,
    const struct replay_set *rs, FILE *out)
{
	const struct replay_refused *f = &rs->refused;
	uint64_t nb, bytes;

	replay_totals(rs, &nb, &bytes);
	fprintf(out, "write sets: iteration %llu, from operation %llu: %llu launches measured, "
	    "%llu of them matched to the planned iteration, %llu can be launched again, %llu may "
	    "write what they do not reference\n",
	    (unsigned long long)q->iter, (unsigned long long)q->seq,
	    (unsigned long long)m->measured, (unsigned long long)m->matched,
	    (unsigned long long)m->replayable, (unsigned long long)m->wild);
	if (g->b.r.p.replay == NULL)
		fprintf(out, "no launch can be launched again: no gap is considered\n");
	fprintf(out, "gaps considered: %llu\n", (unsigned long long)rs->considered);
	fprintf(out, "candidates: %u, of %llu buffers (%.2f MiB)\n", rs->n,
	    (unsigned long long)nb, (double)bytes / MIB);
	fprintf(out, "refused: unknown %llu, wild %llu, no-writer %llu, first-read %llu, too-long "
	    "%llu, not-replayable %llu, unknown-other %llu, writes-other %llu, overwritten %llu, "
	    "freed %llu\n", (unsigned long long)f->unknown, (unsigned long long)f->wild,
	    (unsigned long long)f->no_writer,
	    (unsigned long long)f->first_read, (unsigned long long)f->too_long,
	    (unsigned long long)f->not_replayable, (unsigned long long)f->unknown_other,
	    (unsigned long long)f->writes_other, (unsigned long long)f->overwritten,
	    (unsigned long long)f->freed);
	return print_top(g, rs, out);
}

/* The planned iteration's streams as small ids (the order each is first
 * seen in), from m's handles. Returns them (nops), or NULL when out of
 * memory. */
static uint32_t *
stream_ids(const struct match *m)
{
	uint32_t *id = malloc((m->nops ? m->nops : 1) * sizeof *id);
	uint64_t *seen = malloc((m->nops ? m->nops : 1) * sizeof *seen);
	uint32_t nseen = 0;

	if (id == NULL || seen == NULL) {
		free(id);
		free(seen);
		return NULL;
	}
	for (uint32_t pos = 0; pos < m->nops; pos++) {
		uint64_t h = m->handle[m->from[IT_PLANNED] - m->lo + pos];
		uint32_t k = 0;
		while (k < nseen && seen[k] != h)
			k++;
		if (k == nseen)
			seen[nseen++] = h;
		id[pos] = k;
	}
	free(seen);
	return id;
}

/* The gaps the plan with recompute recomputes, one line each, on out. */
static void
print_picks(const struct plancmd *g, const struct replay_set *rs, const struct plan_rc *rc,
    FILE *out)
{
	const struct prof *p = &g->b.r.p;
	char gap[48];

	fprintf(out, "\ngaps recomputed, the chain launched again right before the operation of "
	    "\"replay at\":\n");
	fprintf(out, "%10s  %10s  %15s  %10s  %5s  %10s\n", "bid", "MiB", "gap", "replay at",
	    "chain", "chain ms");
	for (uint32_t j = 0; j < rc->npick; j++) {
		const struct replay_cand *c = &rs->c[rc->pick[j].cand];
		const struct prof_buf *b = &p->buf[c->buf];
		snprintf(gap, sizeof gap, "%llu-%llu", (unsigned long long)(g->s0 + b->use[c->gap]),
		    (unsigned long long)(g->s0 + b->use[c->gap + 1]));
		fprintf(out, "%10llu  %10.2f  %15s  %10llu  %5u  %10.3f\n",
		    (unsigned long long)g->b.bid[c->buf], (double)c->bytes / MIB, gap,
		    (unsigned long long)(g->s0 + rc->pick[j].r), c->nchain, c->cost_s * 1e3);
	}
}

/* One row of the comparison: a plan, with npick gaps recomputed (bytes,
 * replay_s a step). */
static void
print_row(FILE *out, const char *what, const struct plan *pl, uint32_t npick, uint64_t bytes,
    double replay_s)
{
	fprintf(out, "%15s  %10.2f  %4s  %5u  %10u  %10.2f  %10.6f  %10.6f  %10.6f\n", what,
	    (double)pl->peak / GIB, pl->met ? "yes" : "no", pl->n, npick, (double)bytes / MIB,
	    replay_s, pl->step_s, pl->stall_s);
}

/*
 * The plan with recompute for target beside the moves alone (g->pl), and
 * with o->moves the gaps it recomputes, on out. Returns 0, or -1 when out of
 * memory (not said).
 */
static int
print_recompute(struct plancmd *g, const struct ebb_plan_opts *o, const struct match *m,
    const struct replay_set *rs, uint64_t target, FILE *out)
{
	const struct prof *p = &g->b.r.p;
	struct plan_params pp = g->pp;
	struct rc_pick *pk;
	struct rc_skipped sk;
	struct plan_rc rc;
	uint64_t alone;
	uint32_t n;

	fprintf(out, "\nrecompute for %.2f GiB, beside the moves alone (offline every candidate "
	    "counts as verified; a run recomputes only those its replays verified):\n",
	    (double)target / GIB);
	if (rs->n == 0) {
		fprintf(out, "no gap can be recomputed: the plan is the moves alone\n");
		return 0;
	}
	uint32_t *stream = stream_ids(m);
	if (stream == NULL)
		return -1;
	pp.target = target;
	/* what recompute alone reaches, and what it passes over */
	if (rc_choose(p, rs, NULL, stream, target, &pk, &n, &sk, &alone) < 0) {
		free(stream);
		return -1;
	}
	free(pk);
	fprintf(out, "recompute alone: %.2f GiB with %u gaps; passed over: %llu not verified, %llu "
	    "used on another stream than their chain's, %llu in conflict with the picks (an input "
	    "recomputed too would be away too briefly), %llu away for less than %.1f ms of the device's time\n",
	    (double)alone / GIB, n, (unsigned long long)sk.unusable, (unsigned long long)sk.streams,
	    (unsigned long long)sk.conflict, (unsigned long long)sk.brief, RC_MIN_AWAY_S * 1e3);
	int r = plan_make_recompute(p, rs, NULL, stream, &pp, &g->pl, &rc);
	free(stream);
	if (r < 0)
		return -1;
	fprintf(out, "%15s  %10s  %4s  %5s  %10s  %10s  %10s  %10s  %10s\n", "plan", "peak GiB",
	    "met", "moves", "recomputed", "MiB", "replay s", "step s", "stall s");
	print_row(out, "moves alone", &g->pl, 0, 0, 0);
	if (r == 0) {
		fprintf(out, "no plan with recompute does better than the moves alone\n");
		return 0;
	}
	print_row(out, "with recompute", &rc.pl, rc.npick, rc.bytes_recomputed, rc.recompute_s);
	if (o->moves)
		print_picks(g, rs, &rc, out);
	double before = g->pl.step_before_s + g->pl.host_idle_before_s;
	g->rc_made = 1;
	g->rc_peak = (double)rc.pl.peak;
	g->rc_ratio = before > 0 ? rc.pl.step_s / before : 1.0;
	g->rc_target = (double)target;
	if (o->memory_svg == NULL) {
		plan_rc_fini(&rc);
		return 0;
	}
	g->rc = malloc(sizeof *g->rc);	/* the picture's, freed with g */
	if (g->rc == NULL) {
		plan_rc_fini(&rc);
		fprintf(g->s.err, "ebb plan: out of memory\n");
		return -1;
	}
	*g->rc = rc;
	return 0;
}

/* planreplay (plancmd_int.h): the write sets into g's profile, what a
 * replay could bridge, and the plan with recompute for target. Returns 0,
 * or -1 (said). */
int
planreplay(struct plancmd *g, const struct ebb_plan_opts *o, uint64_t target, FILE *out)
{
	const struct plancmd_scan *sc = &g->sc;
	struct replay_params rp = { .min_bytes = o->min_bytes };
	struct match m = { 0 };
	struct replay_set rs = { 0 };
	int rc = -1;

	fprintf(out, "\nrecompute by replay (buffers of at least %.2f MiB; chain ms: the %s "
	    "times):\n", (double)o->min_bytes / MIB, g->b.host ? "host's" : "GPU's");
	if (sc->nv == 0) {
		fprintf(out, "the trace has no write sets (V records): run the job in offload mode "
		    "with EBB_RECOMPUTE=1 and EBB_TRACE set, then plan on that trace\n");
		return 0;
	}
	const struct plancmd_mark *q = probed_iteration(sc);
	if (q == NULL || q->period != g->b.r.p.nops) {
		fprintf(out, "the write sets (V records) are of %s, not of one of %u operations as "
		    "the planned one: nothing is matched\n", q == NULL ? "no iteration (I record)" :
		    "an iteration of another period", g->b.r.p.nops);
		return 0;
	}
	if (match_probe(g, q, &m) < 0)
		goto out;
	/* as the library: no gap is looked at when no launch can be launched again */
	if (g->b.r.p.replay != NULL && replay_find(&g->b.r.p, &rp, &rs) < 0) {
		fprintf(g->s.err, "ebb plan: %s: out of memory\n", g->s.path);
		goto out;
	}
	if (print_summary(g, q, &m, &rs, out) < 0 ||
	    print_recompute(g, o, &m, &rs, target, out) < 0) {
		fprintf(g->s.err, "ebb plan: %s: out of memory\n", g->s.path);
		goto out;
	}
	rc = 0;
out:
	replay_set_fini(&rs);
	match_free(&m);
	return rc;
}
