/*
 * replay.h: the gaps of a buffer that kernel replay can bridge, found in an
 * access profile (plan.h).
 *
 * Recompute by replay frees a buffer X after a use and, before its next
 * use, launches again the operations that produced it, in their order,
 * instead of copying it to host memory and back. This module says, from the
 * profile alone, which gaps of which buffers allow that, with which chain of
 * operations, and where the chain may be launched; the planner chooses
 * among keeping, moving and recomputing.
 *
 * Candidates: buffers allocated within the iteration (alloc != PROF_NONE),
 * movable, of at least min_bytes. Gap k of X lies between its uses use[k]
 * and use[k+1]; gaps never wrap.
 *
 * The chain of gap k: every use of X at or before use[k] that writes it
 * (PROF_ACC_WRITE), in order. A written buffer's reads cannot be told from
 * its writes, so X's first use must be a write, which starts from X's fresh
 * memory; the later ones read what the earlier ones wrote (in place). There
 * is no candidate when (each gap is counted for the first that applies, in
 * this order, which is that of struct replay_refused's fields):
 *  - a use of X at or before use[k] is PROF_ACC_UNKNOWN (it may have written
 *    X unseen);
 *  - an operation that may write buffers it does not reference (prof.wild: it
 *    reads a table of pointers, or was not measured) lies after X's first use
 *    and at or before use[k]: it may have changed X unseen;
 *  - X is not written before the gap, or its first use is not a write;
 *  - the chain has more than max_chain operations;
 *  - a chain operation cannot be launched again (prof.replay), is a copy of
 *    the job's between host and device (prof.xfer: its host memory is not in
 *    the profile), or may write what it does not reference (prof.wild);
 *  - a chain operation uses another buffer as PROF_ACC_UNKNOWN;
 *  - a chain operation writes buffers other than X (a workspace, a second
 *    output) of more than max_scratch bytes in all. Up to that, the replay
 *    writes them into scratch of its own instead (the candidate's scratch,
 *    their bytes summed over the chain): the job's copies are left as they
 *    are, and what the chain makes of X may depend on what they hold only
 *    as it does on zeros: a replay zeroes them first, and the verification
 *    replay proves what the chain makes so;
 *  - the window below is empty: an input is written, or freed, before
 *    use[k] + 1.
 *
 * Inputs: every other buffer B a chain operation c reads (PROF_ACC_READ;
 * what c writes goes to scratch) must hold at the replay what it held at c. So B exists
 * from c (alloc at or before c) through the operation before the replay,
 * and no operation after c and before the replay writes it (a use of B
 * there that is PROF_ACC_WRITE or PROF_ACC_UNKNOWN is a write). B may be
 * written later in the iteration; that bounds the window.
 *
 * Window: the chain is launched right before operation r, after operation
 * r - 1 is issued, with r_lo <= r <= r_hi: r_lo = use[k] + 1 and r_hi is
 * the least of use[k+1], of each input's first write after the chain
 * operation that reads it, of the first operation after that one that may
 * write what it does not reference (prof.wild), and of each input's free + 1 (B exists at the
 * operations alloc..free inclusive). r_hi < r_lo: no candidate. With the
 * replay at r, X is away over the operations use[k] + 1 .. r - 1; the
 * replay is a use of every input at r (the planner must have them on the
 * device there) and costs the chain's durations on the device.
 *
 * Widening (unless no_extend): where a chain operation reads an input Y
 * that the job frees before X's next use (a temporary: an fp32 output cast
 * to bf16 for a matmul), Y cuts the window short. The chain then takes Y's
 * producers too (every write of Y before that read, Y's first use a write,
 * every use of Y up to the read measured, no wild operation between), and
 * again for the inputs they read that are freed early, up to
 * REPLAY_MAX_EXTENDED operations in position order. Y is then written into
 * scratch like any other buffer the chain writes (within max_scratch), the
 * inputs are what the widened chain reads and does not write, and the
 * window is theirs. The candidate replaces the gap's own where its window
 * goes further (struct replay_set's extended counts them).
 *
 * Why the chain is short (max_chain, REPLAY_MAX_CHAIN unless set): each
 * launch replayed costs the host its launch latency and the device its
 * time, and a buffer made by many operations is where moving it wins.
 *
 * Each gap considered (of a candidate buffer, wrapping gaps aside) is either
 * a candidate or refused for one reason (struct replay_refused).
 *
 * Cost: linear in the operations and in the uses of every buffer; a
 * buffer's chain is stored once, its candidates name prefixes of it.
 *
 * Pure C: no CUDA, no I/O, no globals, no threads, no clocks.
 */
#ifndef EBB_REPLAY_H
#define EBB_REPLAY_H

#include <stdint.h>

#include "plan.h"

/* The default of replay_params' max_chain. */
#define REPLAY_MAX_CHAIN 4

/* The default of replay_params' max_scratch: a cuBLAS workspace (32 MiB on
 * Hopper) and a second output of a few MiB (attention's log-sum-exp). */
#define REPLAY_MAX_SCRATCH ((uint64_t)64 << 20)

/* The most operations of a chain widened by its freed inputs' producers. */
#define REPLAY_MAX_EXTENDED 16

struct replay_params {
	int no_extend;		/* no chain is widened by its freed inputs' producers */
	uint32_t max_chain;	/* operations a chain has at most (0: REPLAY_MAX_CHAIN) */
	uint64_t min_bytes;	/* smallest buffer worth recomputing */
	uint64_t max_scratch;	/* bytes of other buffers a chain may write, into
				 * scratch (0: REPLAY_MAX_SCRATCH) */
	int no_scratch;		/* a chain may write no other buffer */
};

/* One gap a replay can bridge. */
struct replay_cand {
	uint32_t buf;		/* index in the profile */
	uint32_t gap;		/* k: between the buffer's use[k] and use[k+1] */
	uint32_t r_lo, r_hi;	/* the replay goes right before an operation of these */
	uint32_t nchain;	/* operations of the chain */
	uint32_t chain_first;	/* the first's index in the set's ops; a buffer's
				 * candidates share its chain's entries */
	double cost_s;		/* the chain's durations */
	uint64_t bytes;		/* the buffer's size */
	uint64_t scratch;	/* bytes of the other buffers its chain writes, which
				 * a replay writes into scratch (replay_scratch) */
};

/* Why gaps were refused (replay.h above), in the order they are tested. */
struct replay_refused {
	uint64_t unknown;	/* a use of X at or before use[k] is not measured */
	uint64_t wild;		/* an operation that may write what it does not
				 * reference (prof.wild) lies after X's first use, at
				 * or before use[k] */
	uint64_t no_writer;	/* X is not written before the gap */
	uint64_t first_read;	/* X is written, but its first use reads it */
	uint64_t too_long;	/* the chain has more than max_chain operations */
	uint64_t not_replayable;	/* a chain operation cannot be launched again */
	uint64_t unknown_other;	/* a chain operation's use of another buffer is not
				 * measured */
	uint64_t writes_other;	/* a chain operation writes another buffer */
	uint64_t overwritten;	/* an input is written before use[k] + 1 */
	uint64_t freed;		/* an input is freed before use[k] + 1 */
};

struct replay_set {
	struct replay_cand *c;	/* by buffer, then gap */
	uint32_t n, cap;
	uint32_t *ops;		/* the chains' operations (replay_chain) */
	uint32_t nops_used, ops_cap;
	uint64_t considered;	/* gaps looked at: n plus every refusal */
	uint64_t extended;	/* of the candidates, those whose chain was widened */
	struct replay_refused refused;
};

/*
 * The buffers of a launch of the probed iteration (got, n sizes) against
 * the recorded launch at its position (rec, m sizes): the launches are the
 * same but for words that fell inside buffers by chance in one of them (an
 * unfilled field of a structure passed by value holds what the stack held).
 * at[j], for each of rec's: the index in got of the same buffer, or
 * REPLAY_UNMATCHED. As many on both sides are matched pair by pair, a pair
 * of other sizes being such a word in each; fewer or more are matched where
 * the smaller side's sizes are a subsequence of the larger's in one way
 * only (matched from the left and from the right, the same). Returns how
 * many of rec's are matched, or -1 when the launches do not match. The
 * library's probe and `ebb plan --replay` match with it, launches of at
 * most REPLAY_MATCH_MAX buffers.
 */
#define REPLAY_MATCH_MAX 256
#define REPLAY_UNMATCHED UINT32_MAX
int replay_match_launch(const uint64_t *rec, size_t m, const uint64_t *got, size_t n,
    uint32_t *at);

/* Find every gap of p a replay can bridge, into out (emptied first). Returns
 * 0, or -1 when out of memory (out is then empty). Free with
 * replay_set_fini. */
int replay_find(const struct prof *p, const struct replay_params *rp, struct replay_set *out);

/* Free what a set holds, and empty it. */
void replay_set_fini(struct replay_set *s);

/* The buffers that have a candidate in s, and the sum of their sizes (each
 * buffer counted once, however many of its gaps are candidates). */
void replay_totals(const struct replay_set *s, uint64_t *buffers, uint64_t *bytes);

/* The operations of a candidate's chain, in launch order (c->nchain). */
static inline const uint32_t *
replay_chain(const struct replay_set *s, const struct replay_cand *c)
{
	return s->ops + c->chain_first;
}

/* Where each buffer lies in a replay's scratch: at this alignment. */
#define REPLAY_SCRATCH_ALIGN 256

/*
 * The other buffers candidate c's chain writes (replay.h above: the replay
 * writes them into scratch), each once, by profile index, increasing, into
 * out (room for max), where each lies in the scratch into off (room for
 * max; NULL: not wanted), one after the other at REPLAY_SCRATCH_ALIGN, and
 * the scratch's bytes into *bytes. Returns how many, or more than max when
 * out had no room for them all (off and *bytes are then of those it had).
 */
uint32_t replay_scratch(const struct prof *p, const struct replay_set *rs,
    const struct replay_cand *c, uint32_t *out, uint64_t *off, uint32_t max, uint64_t *bytes);

#endif
