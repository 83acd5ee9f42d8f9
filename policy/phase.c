/*
 * phase.c: the pipeline phases of one iteration (phase.h).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "phase.h"

/* phase_cut_next (phase.h) */
int
phase_cut_next(struct phase_cut *c, int marker, int send)
{
	int starts = !c->started;

	c->started = 1;
	if (marker) {
		if (!c->in_run) {	/* a run begins: a phase with it, unless it proves sends only */
			c->in_run = 1;
			c->run_len = 1;
			c->run_sends_only = send;
			return starts || !send;
		}
		c->run_len++;
		/* in a run: a receive after sends only starts the phase at the
		 * run's first operation */
		if (c->run_sends_only && !send) {
			c->run_sends_only = 0;
			return (int)c->run_len;
		}
		return starts;
	}
	/* the first operation after a run of sends alone starts the next phase */
	int after_sends = c->in_run && c->run_sends_only;
	c->in_run = 0;
	return starts || after_sends;
}

/* phase_cut_record (phase.h) */
void
phase_cut_record(uint32_t *start, uint32_t *n, uint32_t cap, uint32_t op, int back)
{
	if (back <= 0)
		return;
	uint32_t at = op - (uint32_t)(back - 1);
	while (*n > 0 && start[*n - 1] >= at)
		(*n)--;
	if (*n < cap)
		start[(*n)++] = at;
}

/* phase_marker (phase.h) */
int
phase_marker(int rank, int nranks, int peer)
{
	if (rank < 0 || nranks < 1 || peer < 0 || peer >= nranks)
		return 0;
	if (nranks == 1)	/* a pipeline of one stage: its own beside it */
		return 1;
	return peer != rank &&
	    (peer == (rank + 1) % nranks || peer == (rank + nranks - 1) % nranks);
}

/* The phase of operation op: the last start at or before it. */
static uint32_t
phase_of(const uint32_t *start, uint32_t n, uint32_t op)
{
	uint32_t lo = 0, hi = n;

	while (hi - lo > 1) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (start[mid] <= op)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

/* A forward's bytes used by a backward (the pairing's tally). */
struct tally {
	uint32_t b, f;
	uint64_t bytes;
};

static int
cmp_tally(const void *x, const void *y)
{
	const struct tally *a = x, *b = y;

	if (a->b != b->b)
		return a->b < b->b ? -1 : 1;
	return a->f < b->f ? -1 : a->f > b->f;
}

/* The bytes each phase makes that outlive it, and frees that it did not make. */
static void
made_and_freed(const struct prof *p, const uint32_t *start, uint32_t n, struct phase *ph)
{
	for (uint32_t k = 0; k < p->nbufs; k++) {
		const struct prof_buf *b = &p->buf[k];
		uint32_t pa = b->alloc == PROF_NONE ? UINT32_MAX : phase_of(start, n, b->alloc);
		uint32_t pf = b->free == PROF_NONE ? UINT32_MAX : phase_of(start, n, b->free);
		if (pa != UINT32_MAX && pa != pf)
			ph[pa].made += b->size;
		if (pf != UINT32_MAX && pa != pf)
			ph[pf].freed += b->size;
	}
}

/* Each backward's forward: the forward whose buffers it uses weigh the most.
 * Returns 0, or -1 when out of memory. */
static int
pair(const struct prof *p, const uint32_t *start, struct phase_set *s)
{
	size_t nt = 0, cap = 0;
	struct tally *t = NULL;

	for (uint32_t k = 0; k < p->nbufs; k++) {
		const struct prof_buf *b = &p->buf[k];
		if (b->alloc == PROF_NONE)
			continue;
		uint32_t f = phase_of(start, s->n, b->alloc), last = UINT32_MAX;
		if (s->ph[f].kind != PHASE_FORWARD)
			continue;
		for (uint32_t u = 0; u < b->nuse; u++) {
			uint32_t bp = phase_of(start, s->n, b->use[u]);
			if (bp == last || s->ph[bp].kind != PHASE_BACKWARD)
				continue;
			last = bp;	/* uses increase: one tally a buffer and backward */
			if (nt == cap) {
				cap = cap ? cap * 2 : 256;
				struct tally *nt_ = realloc(t, cap * sizeof *t);
				if (nt_ == NULL) {
					free(t);
					return -1;
				}
				t = nt_;
			}
			t[nt++] = (struct tally){ bp, f, b->size };
		}
	}
	if (nt > 1)
		qsort(t, nt, sizeof *t, cmp_tally);
	for (size_t i = 0; i < nt;) {
		size_t j = i;
		uint64_t sum = 0;
		while (j < nt && t[j].b == t[i].b && t[j].f == t[i].f)
			sum += t[j++].bytes;
		struct phase *bw = &s->ph[t[i].b];
		if (sum > bw->paired) {
			bw->paired = sum;
			bw->forward = (int32_t)t[i].f;
		}
		i = j;
	}
	free(t);
	return 0;
}

/* The bytes alive at each operation (a buffer from its allocation to its
 * free, both included), into live[0 .. nops), and after each (less those
 * freed at it), into after[0 .. nops). */
static void
live_bytes(const struct prof *p, int64_t *live, int64_t *after)
{
	uint32_t n = p->nops;

	memset(live, 0, n * sizeof *live);
	memset(after, 0, n * sizeof *after);
	for (uint32_t k = 0; k < p->nbufs; k++) {
		const struct prof_buf *b = &p->buf[k];
		uint32_t a = b->alloc == PROF_NONE ? 0 : b->alloc;
		uint32_t f = b->free == PROF_NONE ? n - 1 : b->free;
		if (a > f || a >= n)
			continue;
		live[a] += (int64_t)b->size;
		after[a] += (int64_t)b->size;
		if (f + 1 < n)
			live[f + 1] -= (int64_t)b->size;
		if (b->free != PROF_NONE)
			after[f] -= (int64_t)b->size;
	}
	for (uint32_t i = 1; i < n; i++) {
		live[i] += live[i - 1];
		after[i] += after[i - 1];
	}
}

/*
 * The cut within a phase [a, b] that no marker shows: where the bytes alive
 * rise and then fall by thr or more each, after the highest operation (a
 * forward followed at once by its backward, as on the last stage); where
 * the bytes alive after each operation fall and then rise so, after the
 * lowest (a backward followed by a forward, as on the first stage: its last
 * frees are done there, and the forward's first allocation is the next
 * operation's). Returns the first operation of the second part, or 0 for
 * none.
 */
static uint32_t
inner_cut(const int64_t *live, const int64_t *after, uint32_t a, uint32_t b, int64_t thr)
{
	uint32_t hi = a, lo = a;

	for (uint32_t i = a; i <= b; i++) {
		hi = live[i] > live[hi] ? i : hi;
		lo = after[i] < after[lo] ? i : lo;
	}
	if (hi < b && live[hi] - live[a] >= thr && live[hi] - live[b] >= thr)
		return hi + 1;
	if (lo < b && live[a] - after[lo] >= thr && after[b] - after[lo] >= thr)
		return lo + 1;
	return 0;
}

/*
 * The starts of the phases of an iteration that no marker cuts: after each
 * turn of the bytes alive by thr or more. A peak is the highest operation
 * (bytes alive at it) of a rise, confirmed once the bytes after an
 * operation are thr under it; a trough the lowest (bytes after it) of a
 * fall, confirmed once the bytes alive are thr over it. A turn at the
 * iteration's first operation cuts nothing. Writes the starts into s (room
 * for nops), s[0] = 0; returns their count.
 */
static uint32_t
turns(const int64_t *live, const int64_t *after, uint32_t nops, int64_t thr, uint32_t *s)
{
	uint32_t m = 0, hi = 0, lo = 0;
	int rising = 1;

	s[m++] = 0;
	for (uint32_t i = 0; i < nops; i++) {
		if (rising) {
			hi = live[i] > live[hi] ? i : hi;
			if (live[hi] - after[i] >= thr) {	/* a peak at hi */
				if (hi + 1 > s[m - 1] + 1 && hi + 1 < nops)
					s[m++] = hi + 1;
				rising = 0;
				lo = i;
			}
		} else {
			lo = after[i] < after[lo] ? i : lo;
			if (live[i] - after[lo] >= thr) {	/* a trough at lo */
				if (lo + 1 > s[m - 1] + 1 && lo + 1 < nops)
					s[m++] = lo + 1;
				rising = 1;
				hi = i;
			}
		}
	}
	return m;
}

/*
 * The starts of the phases: those given, and each inner cut (inner_cut)
 * with a threshold of PHASE_TURN_SHARE of the largest swing of the bytes
 * alive within a phase. With none given but the first (no markers), the
 * turns of the bytes alive (turns) by PHASE_TURN_SHARE of the iteration's
 * swing. Returns the count into *out (malloc'd), or -1.
 */
static int64_t
refine(const struct prof *p, const uint32_t *start, uint32_t n, uint32_t **out)
{
	int64_t *live = malloc(p->nops * sizeof *live), *after = malloc(p->nops * sizeof *after);
	size_t room = n == 1 ? (size_t)p->nops : 2 * (size_t)n;
	uint32_t *s = malloc((room ? room : 1) * sizeof *s);
	int64_t swing = 0, m = 0;

	if (live == NULL || after == NULL || s == NULL) {
		free(live);
		free(after);
		free(s);
		return -1;
	}
	live_bytes(p, live, after);
	for (uint32_t i = 0; i < n; i++) {
		uint32_t a = start[i], b = i + 1 < n ? start[i + 1] - 1 : p->nops - 1;
		int64_t hi = live[a], lo = live[a];
		for (uint32_t k = a; k <= b; k++) {
			hi = live[k] > hi ? live[k] : hi;
			lo = live[k] < lo ? live[k] : lo;
		}
		swing = hi - lo > swing ? hi - lo : swing;
	}
	if (n == 1) {
		int64_t thr = (int64_t)(PHASE_TURN_SHARE * (double)swing);
		m = thr > 0 ? turns(live, after, p->nops, thr, s) : (s[0] = 0, 1);
		free(live);
		free(after);
		*out = s;
		return m;
	}
	int64_t thr = (int64_t)(PHASE_TURN_SHARE * (double)swing);
	for (uint32_t i = 0; i < n; i++) {
		uint32_t a = start[i], b = i + 1 < n ? start[i + 1] - 1 : p->nops - 1;
		s[m++] = a;
		uint32_t c = thr > 0 ? inner_cut(live, after, a, b, thr) : 0;
		if (c != 0)
			s[m++] = c;
	}
	free(live);
	free(after);
	*out = s;
	return m;
}

/* The phases starting at start[0 .. n) into out: their bounds, what each
 * makes and frees, kinds and pairs (phase.h). Returns 0, or -1 when out of
 * memory (out empty). */
static int
classify(const struct prof *p, const uint32_t *start, uint32_t n, struct phase_set *out)
{
	memset(out, 0, sizeof *out);
	out->ph = calloc(n, sizeof *out->ph);
	if (out->ph == NULL)
		return -1;
	out->n = n;
	for (uint32_t i = 0; i < n; i++) {
		out->ph[i].first = start[i];
		out->ph[i].last = i + 1 < n ? start[i + 1] - 1 : p->nops - 1;
		out->ph[i].forward = -1;
		out->ph[i].alike = -1;
	}
	made_and_freed(p, start, n, out->ph);
	uint64_t biggest = 0;
	for (uint32_t i = 0; i < n; i++) {
		uint64_t m = out->ph[i].made > out->ph[i].freed ? out->ph[i].made : out->ph[i].freed;
		biggest = m > biggest ? m : biggest;
	}
	for (uint32_t i = 0; i < n; i++) {
		struct phase *ph = &out->ph[i];
		uint64_t m = ph->made > ph->freed ? ph->made : ph->freed;
		if (m == 0 || (double)m < PHASE_MIN_SHARE * (double)biggest || ph->made == ph->freed)
			ph->kind = PHASE_OTHER;
		else
			ph->kind = ph->made > ph->freed ? PHASE_FORWARD : PHASE_BACKWARD;
		out->nforward += ph->kind == PHASE_FORWARD;
		out->nbackward += ph->kind == PHASE_BACKWARD;
	}
	if (pair(p, start, out) < 0) {
		phase_fini(out);
		return -1;
	}
	/* a phase that frees without using any forward's buffers (the frees at a
	 * step's end of what backwards made) is no backward; one that makes
	 * buffers no backward pairs with is no forward */
	for (uint32_t i = 0; i < n; i++)
		if (out->ph[i].kind == PHASE_BACKWARD && out->ph[i].forward < 0) {
			out->ph[i].kind = PHASE_OTHER;
			out->nbackward--;
		}
	for (uint32_t i = 0; i < n; i++) {
		int paired = 0;
		for (uint32_t k = 0; k < n && !paired; k++)
			paired = out->ph[k].kind == PHASE_BACKWARD && out->ph[k].forward == (int32_t)i;
		if (out->ph[i].kind == PHASE_FORWARD && !paired) {
			out->ph[i].kind = PHASE_OTHER;
			out->nforward--;
		}
	}
	return 0;
}

/* phase_split (phase.h) */
int
phase_split(const struct prof *p, const uint32_t *given, uint32_t ngiven, struct phase_set *out)
{
	memset(out, 0, sizeof *out);
	if (ngiven == 0 || given[0] != 0 || p->nops == 0)
		return -1;
	for (uint32_t i = 1; i < ngiven; i++)
		if (given[i] <= given[i - 1] || given[i] >= p->nops)
			return -1;
	uint32_t *start;
	int64_t nstart = refine(p, given, ngiven, &start);
	if (nstart < 0)
		return -1;
	uint32_t n = nstart > PHASE_MAX ? PHASE_MAX : (uint32_t)nstart;
	if (classify(p, start, n, out) < 0) {
		free(start);
		return -1;
	}
	/* a backward that follows a backward of the same forward is the same
	 * micro-batch's (a turn within it: the loss's large temporaries at its
	 * start): one phase, classified again */
	uint32_t m = 1;
	for (uint32_t i = 1; i < n; i++) {
		const struct phase *a = &out->ph[i - 1], *b = &out->ph[i];
		if (!(a->kind == PHASE_BACKWARD && b->kind == PHASE_BACKWARD &&
		    a->forward == b->forward))
			start[m++] = start[i];
	}
	int rc = 0;
	if (m < n) {
		phase_fini(out);
		rc = classify(p, start, m, out);
	}
	free(start);
	return rc;
}

/* ---- phases that repeat (phase_siblings) ---- */

/* Whether c is b made shift operations later: alike throughout its life. */
static int
alike(const struct prof_buf *b, const struct prof_buf *c, uint32_t shift)
{
	if (c->size != b->size || prof_span(c) != prof_span(b) || !c->movable != !b->movable ||
	    c->nuse != b->nuse || c->alloc != b->alloc + shift)
		return 0;
	if ((b->free == PROF_NONE) != (c->free == PROF_NONE) ||
	    (b->free != PROF_NONE && c->free != b->free + shift))
		return 0;
	for (uint32_t u = 0; u < b->nuse; u++)
		if (c->use[u] != b->use[u] + shift)
			return 0;
	return 1;
}

/* The next phase of s after phase i of i's kind, or PROF_NONE. */
static uint32_t
later(const struct phase_set *s, uint32_t i)
{
	for (uint32_t j = i + 1; j < s->n; j++)
		if (s->ph[j].kind == s->ph[i].kind)
			return j;
	return PROF_NONE;
}

/* A buffer made in the iteration, by where it is made. */
struct made_at {
	uint32_t alloc, buf;
};

static int
cmp_made_at(const void *x, const void *y)
{
	const struct made_at *a = x, *b = y;

	if (a->alloc != b->alloc)
		return a->alloc < b->alloc ? -1 : 1;
	return a->buf < b->buf ? -1 : a->buf > b->buf;
}

/* Link m[e]'s buffer to the first buffer, not yet linked to, that is it
 * made shift operations later (alike; m[0 .. nm) by where each is made).
 * Returns 1 when linked, else 0. */
static int
link_shifted(const struct prof *p, const struct made_at *m, uint32_t nm, uint32_t e,
    uint32_t shift, uint32_t *next, uint32_t *prev, uint32_t *sh)
{
	uint32_t k = m[e].buf, at = m[e].alloc + shift, lo = e + 1, hi = nm;

	if (shift == 0 || at < m[e].alloc)
		return 0;
	while (lo < hi) {	/* the first made at or after at */
		uint32_t mid = lo + (hi - lo) / 2;
		if (m[mid].alloc < at)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (uint32_t f = lo; f < nm && m[f].alloc == at; f++) {
		uint32_t c = m[f].buf;
		if (prev[c] == PROF_NONE && alike(&p->buf[k], &p->buf[c], shift)) {
			next[k] = c;
			prev[c] = k;
			sh[k] = shift;
			return 1;
		}
	}
	return 0;
}

/* phase_siblings (phase.h) */
int64_t
phase_siblings(const struct prof *p, struct phase_set *s, uint32_t *next,
    uint32_t *prev, uint32_t *shift)
{
	uint32_t nb = p->nbufs, nm = 0, last = 0;
	int64_t links = 0;

	for (uint32_t k = 0; k < nb; k++) {
		next[k] = prev[k] = PROF_NONE;
		shift[k] = 0;
	}
	for (uint32_t i = 0; i < s->n; i++)
		s->ph[i].alike = -1;
	if (s->n < 2 || nb == 0)
		return 0;
	struct made_at *m = malloc(nb * sizeof *m);
	if (m == NULL)
		return -1;
	for (uint32_t k = 0; k < nb; k++)
		if (p->buf[k].alloc != PROF_NONE && p->buf[k].alloc < p->nops)
			m[nm++] = (struct made_at){ p->buf[k].alloc, k };
	qsort(m, nm, sizeof *m, cmp_made_at);
	/* each buffer to the one made at its place in the next phase of its
	 * phase's kind: shifted as the two phases' starts are, or their ends
	 * (the turns that cut them fall a few operations apart in micro-batches
	 * that differ at their edges), or as the last buffer linked was; in the
	 * order they are made, so that of buffers alike made at one operation,
	 * the first takes the first (and the phases are walked in order) */
	for (uint32_t e = 0, i = 0, j = later(s, 0); e < nm; e++) {
		while (i + 1 < s->n && s->ph[i + 1].first <= m[e].alloc)
			j = later(s, ++i);
		if (j == PROF_NONE)
			continue;
		const uint32_t shifts[3] = { s->ph[j].first - s->ph[i].first,
			s->ph[j].last - s->ph[i].last, last };
		for (int t = 0; t < 3; t++)
			if ((t == 0 || shifts[t] != shifts[0]) && (t < 2 || shifts[t] != shifts[1]) &&
			    link_shifted(p, m, nm, e, shifts[t], next, prev, shift)) {
				last = shifts[t];
				s->ph[i].alike = (int32_t)j;
				links++;
				break;
			}
	}
	free(m);
	return links;
}

/* phase_fini (phase.h) */
void
phase_fini(struct phase_set *s)
{
	free(s->ph);
	memset(s, 0, sizeof *s);
}
