/*
 * iter.h: the iteration finder.
 *
 * Fed the job's operations as tokens (a kernel's identity, a copy, a
 * synchronisation, ...), it finds the period of the sequence, the training
 * iteration, and then follows it, saying where each iteration starts and
 * when the job departs from it.
 *
 * Finding: with the tokens t[0..n), L(P) is the length of the longest suffix
 * that repeats with period P (one Z-function pass over the reversed sequence
 * gives every L(P) in O(n)). The period is the smallest P whose periodic
 * suffix holds at least min_reps whole repetitions and at least half of the
 * history, and over which the device memory the job holds comes back to the
 * same amount: a training iteration frees what it allocates, while the
 * patterns that repeat inside one (a transformer layer in the forward pass,
 * parameter initialisation) keep allocating or freeing. The half-history rule
 * keeps a pattern that repeats for a while inside a longer iteration (the
 * micro-batches of gradient accumulation) from being taken for the iteration
 * once an iteration has been seen whole. And once the history has an
 * explicit host synchronisation (a context, stream or event sync, not a
 * synchronous copy), a period must have one too: a job that waits for the
 * device does so at least once an iteration (loss.item()), so a period
 * without a wait is a micro-batch, and would not survive the optimizer step.
 * Unless it repeats ITER_NOSYNC_REPS times after the job's last sync: JAX
 * waits for a step's result in ways that are not a sync ebb sees, after a
 * start that synchronises; that exception ends once the job, having departed
 * from such a period, synchronises (it was a micro-batch after all).
 * The history is searched each time it grows by an eighth, and also at the
 * token where a period that fails only for want of repetitions (seen for a
 * quarter of a repetition past its first, and periodic in memory so far)
 * would have them: the iteration is found at the token that completes its
 * second repetition, not up to an eighth of the history later, which may be
 * past the next iteration start (an iteration lost to the recording).
 *
 * Phase: an iteration starts right after a host synchronisation of the
 * period (loss.item(), an optimizer step that reads a flag): of those, the
 * last at which the job holds the least memory, so that an iteration with
 * several (each micro-batch's input copied from pageable memory) starts
 * after the optimizer step, when the gradients are gone, and as few buffers
 * as can be live across its start. Where the periodic suffix starts if the
 * period has none.
 *
 * Detour: where the caller allows it (detour_ok: a plan follows the
 * iteration) and the learned period holds an explicit synchronisation (a
 * whole iteration, not a micro-batch), a departure keeps the learned
 * iteration while the search goes on: a job that goes back to it (one
 * iteration with a step of its own, a log line's copy and wait, an
 * evaluation, then the same iterations as before) is followed again once
 * its tokens have matched one whole iteration from its start, unless the
 * history by then holds a period of its own of up to ITER_DETOUR_SPAN
 * times the one departed from (the search finds one: the iteration is
 * learned again on it, as the whole step of gradient accumulation is after
 * a micro-batch taken for it). While the detour lasts, the search looks for
 * no longer period: a run of many iterations with a step of its own every
 * so many is not an iteration to plan whole. A detour that has not come
 * back within ITER_DETOUR_SPAN times the period is a change of the job: the
 * search goes on without it.
 *
 * Pure C: no CUDA, no I/O, no globals.
 */
#ifndef EBB_ITER_H
#define EBB_ITER_H

#include <stddef.h>
#include <stdint.h>

/* Repetitions after the job's last sync that make a period without one the
 * iteration (iter.h above): more than a micro-batch of gradient accumulation
 * has in one iteration, as a rule. */
#define ITER_NOSYNC_REPS 16

/* The longest period found in a detour, and the longest detour, in periods
 * of the iteration departed from (detour, above). */
#define ITER_DETOUR_SPAN 16

enum iter_event {
	ITER_NONE = 0,
	ITER_FOUND,	/* the period was found at this token (see iter_found_*) */
	ITER_START,	/* this token starts an iteration */
	ITER_DEPARTED,	/* this token differs from the learned iteration */
	ITER_RESUMED,	/* this token ends a whole iteration that matches the one
			 * departed from, from its start: it is followed again, and
			 * the next token starts an iteration (detour, above) */
	ITER_GAVE_UP	/* max_tokens were seen without a period */
};

struct iter_finder {
	/* settings */
	size_t max_tokens;
	unsigned min_reps;
	/* history */
	uint32_t *tok;
	uint8_t *sync;
	uint64_t *live;		/* bytes the job held at each token */
	size_t n;
	uint64_t dropped;	/* tokens shifted out of the front of the history */
	int32_t *z;		/* scratch for the Z-function */
	size_t next_check;
	size_t due;		/* where a period seen in part would be found (check) */
	int gave_up;
	/* following: the learned iteration */
	size_t period;		/* 0 while searching */
	uint32_t *ring;		/* tokens of one iteration, from its start */
	size_t pos;		/* position in ring of the next token */
	uint64_t found_first;	/* token index (since the beginning) of the first iteration start */
	uint64_t found_complete;	/* whole iterations seen when the period was found */
	uint64_t found_total;	/* tokens pushed when it was found */
	int synced;		/* the period holds an explicit synchronisation (one without,
				 * where the job synchronises at all, is a part of the
				 * iteration, such as a micro-batch found before the first
				 * optimizer step, and the job departs from it) */
	int nosync_accepted;	/* the period has none, in a job that synchronised before
				 * it, and repeated ITER_NOSYNC_REPS times (JAX) */
	int nosync_departed;	/* the job departed from such a period, and the search
				 * has found none since */
	int nosync_refuted;	/* a sync came after such a departure: periods without
				 * one are parts of the iteration from then on */
	int detour_ok;		/* set by the caller: a departure may be a detour */
	int detour;		/* departed from a followed iteration, whose ring is kept */
	size_t detour_period;	/* its period */
	size_t detour_match;	/* tokens matched of it, in a row from its start */
	uint64_t total;		/* tokens pushed since the beginning */
	uint64_t search_began;	/* value of total when the search (re)started */
};

/* Returns 0, or -1 when out of memory. min_reps is at least 2. */
int iter_init(struct iter_finder *f, size_t max_tokens, unsigned min_reps);
void iter_fini(struct iter_finder *f);

/* How the host waited for the device at a token. */
enum iter_sync {
	ITER_NOSYNC = 0,
	ITER_SYNC_OP = 1,	/* a synchronous operation (a copy to pageable memory) */
	ITER_SYNC = 2		/* an explicit synchronisation (context, stream, event) */
};

/*
 * Feed one token; sync (enum iter_sync) says whether and how the host waited
 * for the device there, live how many bytes of device memory the job held
 * when it was issued.
 */
enum iter_event iter_push(struct iter_finder *f, uint32_t token, int sync, uint64_t live);

/* The learned period in tokens, 0 if none. */
static inline size_t
iter_period(const struct iter_finder *f)
{
	return f->period;
}

/* For testing and offline use: L(P) for every P of t[0..n) into len[0..n). */
void iter_periodic_suffixes(const uint32_t *t, size_t n, int32_t *z, size_t *len);

#endif
