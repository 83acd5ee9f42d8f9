/*
 * iter.c: finding and following the period of the job's operations.
 */
#include <stdlib.h>
#include <string.h>

#include "iter.h"

int
iter_init(struct iter_finder *f, size_t max_tokens, unsigned min_reps)
{
	memset(f, 0, sizeof *f);
	if (max_tokens < 16)
		max_tokens = 16;
	f->max_tokens = max_tokens;
	f->min_reps = min_reps < 2 ? 2 : min_reps;
	f->tok = malloc(max_tokens * sizeof *f->tok);
	f->sync = malloc(max_tokens);
	f->live = malloc(max_tokens * sizeof *f->live);
	f->z = malloc(max_tokens * sizeof *f->z);
	if (f->tok == NULL || f->sync == NULL || f->live == NULL || f->z == NULL) {
		iter_fini(f);
		return -1;
	}
	f->next_check = 64;
	return 0;
}

void
iter_fini(struct iter_finder *f)
{
	free(f->tok);
	free(f->sync);
	free(f->live);
	f->live = NULL;
	free(f->z);
	free(f->ring);
	memset(f, 0, sizeof *f);
}

/*
 * Z-function of the reversed sequence: z[p] is the length of the longest
 * common suffix of t[0..n) and t[0..n-p), so the suffix of length p + z[p]
 * repeats with period p.
 */
static void
zrev(const uint32_t *t, size_t n, int32_t *z)
{
#define R(i) t[n - 1 - (i)]
	size_t l = 0, r = 0;

	if (n == 0)
		return;
	z[0] = (int32_t)n;
	for (size_t i = 1; i < n; i++) {
		size_t k = 0;
		if (i < r) {
			k = (size_t)z[i - l];
			if (k > r - i)
				k = r - i;
		}
		while (i + k < n && R(k) == R(i + k))
			k++;
		z[i] = (int32_t)k;
		if (i + k > r) {
			l = i;
			r = i + k;
		}
	}
#undef R
}

void
iter_periodic_suffixes(const uint32_t *t, size_t n, int32_t *z, size_t *len)
{
	zrev(t, n, z);
	for (size_t p = 1; p < n; p++)
		len[p] = p + (size_t)z[p];
	if (n > 0)
		len[0] = 0;
}

/* Whether memory held comes back to the same amount every p tokens of the last reps periods. */
static int
memory_periodic(const struct iter_finder *f, size_t p)
{
	for (size_t k = 1; k < f->min_reps; k++)
		if (f->live[f->n - 1 - k * p] != f->live[f->n - 1])
			return 0;
	return 1;
}

/* The same, over the repetitions the history holds so far. */
static int
memory_periodic_so_far(const struct iter_finder *f, size_t p)
{
	for (size_t k = 1; k < f->min_reps && k * p < f->n; k++)
		if (f->live[f->n - 1 - k * p] != f->live[f->n - 1])
			return 0;
	return 1;
}

/* Look for the period in the history, of at most max tokens (0: any); on
 * success switch to following. */
static int
check(struct iter_finder *f, size_t max)
{
	size_t n = f->n;

	zrev(f->tok, n, f->z);
	/* the newest synchronisation of the history, if any */
	size_t newest_sync = (size_t)-1;
	for (size_t i = n; i-- > 0;)
		if (f->sync[i] == ITER_SYNC) {
			newest_sync = i;
			break;
		}
	/* the token at which a period seen in part would be found, if it goes on */
	size_t due = (size_t)-1;
	for (size_t p = 1; p < n && (max == 0 || p <= max); p++) {
		size_t len = p + (size_t)f->z[p];
		/* a job that synchronises does so once an iteration at least: a
		 * period without one is a part of the iteration (a micro-batch),
		 * unless it has repeated ITER_NOSYNC_REPS times since the job's
		 * last sync (JAX waits for a step's result without a sync ebb
		 * sees) and no such period has ended at a sync before */
		int nosync = newest_sync != (size_t)-1 && newest_sync < n - p;
		if (nosync && (f->nosync_refuted || len < (size_t)ITER_NOSYNC_REPS * p))
			continue;
		if (len < (size_t)f->min_reps * p || 2 * len < n) {
			/* a quarter of a repetition past the first, and so far
			 * periodic in memory too: found in d more tokens if it holds
			 * (so that it is found at once, not up to n / 8 later, and the
			 * next iteration start is not missed) */
			if (len < ((size_t)f->min_reps - 1) * p + p / 4 || p < 4 ||
			    !memory_periodic_so_far(f, p))
				continue;
			size_t want = (size_t)f->min_reps * p;
			size_t d = len < want ? want - len : 0;
			if (n > 2 * len && n - 2 * len > d)
				d = n - 2 * len;	/* (each token adds to both) */
			if (n + d < due)
				due = n + d;
			continue;
		}
		if (!memory_periodic(f, p))
			continue;
		/* Found: choose the phase. */
		size_t start = n - len;		/* first token of the periodic suffix */
		/* the synchronisation at which the job holds least (the last of
		 * those): there an optimizer step has freed the gradients, not a
		 * micro-batch's input copy in between */
		size_t last_sync = (size_t)-1;
		for (size_t i = n - p; i < n; i++)
			if (f->sync[i] && (last_sync == (size_t)-1 || f->live[i] <= f->live[last_sync]))
				last_sync = i;
		size_t first = start;
		if (last_sync != (size_t)-1) {
			size_t cand = last_sync + 1;	/* may equal n */
			while (cand >= start + p)
				cand -= p;
			if (cand < start)
				cand += p;
			first = cand;
		}
		uint32_t *ring = malloc(p * sizeof *ring);
		if (ring == NULL)
			return 0;
		memcpy(ring, f->tok + first, p * sizeof *ring);
		free(f->ring);
		f->ring = ring;
		f->period = p;
		f->pos = (n - first) % p;
		f->found_first = f->dropped + first;
		f->found_complete = (n - first) / p;
		f->found_total = f->total;
		f->synced = newest_sync != (size_t)-1 && !nosync;	/* within the period */
		f->nosync_accepted = nosync;
		f->nosync_departed = 0;
		return 1;
	}
	f->due = due;
	return 0;
}

/* Drop the older half of the full history. */
static void
forget_half(struct iter_finder *f)
{
	size_t keep = f->n / 2;

	memmove(f->tok, f->tok + (f->n - keep), keep * sizeof *f->tok);
	memmove(f->sync, f->sync + (f->n - keep), keep);
	memmove(f->live, f->live + (f->n - keep), keep * sizeof *f->live);
	f->dropped += f->n - keep;
	f->n = keep;
	f->next_check = keep;
}

/* Append to the history, dropping its older half when full. */
static inline void
remember(struct iter_finder *f, uint32_t token, int sync, uint64_t live)
{
	if (f->n == f->max_tokens) {
		if (f->period != 0)
			return;	/* following: the ring is enough */
		forget_half(f);
	}
	f->tok[f->n] = token;
	f->sync[f->n] = (uint8_t)(sync >= ITER_SYNC ? ITER_SYNC : sync > 0 ? ITER_SYNC_OP : 0);
	f->live[f->n] = live;
	f->n++;
}

/* In a detour, token is the next of the job's: whether it ends a whole
 * iteration of the one departed from, matched in a row from its start. */
static int
back_again(struct iter_finder *f, uint32_t token)
{
	if (token == f->ring[f->detour_match])
		f->detour_match++;
	else
		f->detour_match = token == f->ring[0];
	return f->detour_match == f->detour_period;
}

/* iter_push for every token but the one a followed iteration expects: a
 * departure from it, or a step of the search. Kept apart so that the
 * expected token, nearly every token of a job that repeats its iteration,
 * takes the short path. */
static __attribute__((noinline)) enum iter_event
push_other(struct iter_finder *f, uint32_t token, int sync, uint64_t live)
{
	if (f->period != 0) {
		/* a departure. A period without a sync that a sync follows was a
		 * part of the iteration (a micro-batch) after all */
		f->nosync_departed = f->nosync_accepted;
		f->detour = f->detour_ok && f->synced;
		f->detour_period = f->period;
		f->detour_match = token == f->ring[0];
		f->period = 0;
		f->nosync_accepted = 0;
		f->search_began = f->total - 1;
		remember(f, token, sync, live);
		f->next_check = f->n + 1;
		return ITER_DEPARTED;
	}
	if (f->gave_up) {
		remember(f, token, sync, live);
		return ITER_NONE;
	}
	if (f->nosync_departed && sync >= ITER_SYNC)
		f->nosync_refuted = 1;
	remember(f, token, sync, live);
	/* in a detour, a period of its own up to ITER_DETOUR_SPAN times the one
	 * departed from is the iteration (the whole step after a micro-batch
	 * taken for it); one longer, a job's run of iterations with a step of
	 * its own every so many, is not followed: the one departed from is */
	size_t max = 0;
	if (f->detour && f->total - f->search_began > ITER_DETOUR_SPAN * f->detour_period)
		f->detour = 0;	/* not back: the job changed */
	if (f->detour) {
		max = ITER_DETOUR_SPAN * f->detour_period;
		if (back_again(f, token)) {
			f->detour = 0;
			if (check(f, max))
				return ITER_FOUND;
			f->period = f->detour_period;
			f->pos = 0;
			return ITER_RESUMED;
		}
	}
	if (f->n < f->next_check)
		return ITER_NONE;
	if (check(f, max)) {
		f->detour = 0;
		return ITER_FOUND;
	}
	if (f->total - f->search_began >= f->max_tokens) {
		f->gave_up = 1;
		f->detour = 0;
		return ITER_GAVE_UP;
	}
	size_t step = f->n / 8;
	f->next_check = f->n + (step < 64 ? 64 : step);
	if (f->due < f->next_check)
		f->next_check = f->due;
	return ITER_NONE;
}

enum iter_event
iter_push(struct iter_finder *f, uint32_t token, int sync, uint64_t live)
{
	f->total++;
	if (f->period == 0 || token != f->ring[f->pos])
		return push_other(f, token, sync, live);
	remember(f, token, sync, live);
	enum iter_event e = f->pos == 0 ? ITER_START : ITER_NONE;
	if (++f->pos == f->period)
		f->pos = 0;
	return e;
}
