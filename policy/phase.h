/*
 * phase.h: the pipeline phases of one iteration (pure: no CUDA, no I/O).
 *
 * In pipeline-parallel training a rank's NCCL sends and receives to the
 * stages beside it (rank - 1 and rank + 1, modulo the ranks where the
 * stages are interleaved) bound its micro-batches' phases: a receive from
 * the previous stage opens a forward, a send to the next closes it, a
 * receive from the next opens a backward, a send to the previous closes
 * it. Nothing here trusts that reading, which differs by schedule (GPipe,
 * 1F1B, interleaved virtual stages, zero-bubble splits) and is ambiguous
 * with two ranks; the markers only cut the iteration, and the phases are
 * learned from the buffers:
 *
 *  - Cuts. Each run of consecutive markers (one group: a send and a
 *    receive issued together) starts a phase at its first operation, but a
 *    run of sends alone closes the phase it ends, and the next starts after
 *    it. The first phase starts at the iteration's first operation. Where
 *    the bytes alive within a phase rise and then fall (or fall and then
 *    rise) by PHASE_TURN_SHARE of the largest swing within a phase or more
 *    each way, it is cut after its highest (lowest) operation: a forward
 *    and the backward that follows it with no marker between, as on the
 *    last stage (the first stage: a backward and the next forward). A
 *    stage's own communication buffers (the one a group's receive fills,
 *    the one its send sent, freed after it) turn by far less.
 *    An iteration without markers (gradient accumulation on one rank) is
 *    cut after every such turn of PHASE_TURN_SHARE of its swing or more:
 *    each micro-batch's forward, then its backward.
 *  - Kinds. A phase that makes more bytes of buffers that outlive it than
 *    it frees of buffers made before it is a forward; the other way round,
 *    a backward; one whose larger side is under PHASE_MIN_SHARE of the
 *    largest phase's is neither (an optimizer step, a loss).
 *  - Pairs. A backward uses the buffers of the forward it differentiates:
 *    its forward is the one whose buffers, made in it and used in the
 *    backward, weigh the most bytes. A phase that frees more than it makes
 *    but uses no forward's buffers (the frees at a step's end of what the
 *    backwards made) is neither; nor is one that makes more than it frees
 *    but no backward pairs with (what a step makes before its first
 *    micro-batch: its input, sent on by the first stage of a pipeline of
 *    one). Consecutive backwards of one forward are one backward (its
 *    memory turned within it, as a language model's logits and their
 *    gradient turn it at the loss), classified again.
 *
 * The same cuts come from any source of boundaries (struct phase_cut is
 * fed one operation at a time), so the model also serves gradient
 * accumulation on one rank, where there is no NCCL.
 */
#ifndef EBB_PHASE_H
#define EBB_PHASE_H

#include <stddef.h>
#include <stdint.h>

#include "plan.h"

/* A phase whose bytes made or freed are under this share of the largest
 * phase's is neither a forward nor a backward. */
#define PHASE_MIN_SHARE 0.05

/* Without markers, the turns of the bytes alive that cut phases are of at
 * least this share of the iteration's swing: a micro-batch's activations
 * rise and fall by most of it, the temporaries within a pass by far less. */
#define PHASE_TURN_SHARE 0.25

/* The phases one iteration holds at most (more are merged into the last). */
#define PHASE_MAX 4096

enum phase_kind { PHASE_OTHER, PHASE_FORWARD, PHASE_BACKWARD };

struct phase {
	uint32_t first, last;	/* its operations */
	enum phase_kind kind;
	int32_t forward;	/* a backward: its forward (an index of the set); else -1 */
	uint64_t made;		/* bytes of buffers made in it that outlive it */
	uint64_t freed;		/* bytes of buffers made before it, freed in it */
	uint64_t paired;	/* a backward: bytes of its forward's buffers it uses */
	int32_t alike;		/* the next phase of its kind, where a buffer of this
				 * phase is linked to one of that phase's (phase_siblings;
				 * -1: none, or not asked) */
};

struct phase_set {
	struct phase *ph;
	uint32_t n;
	uint32_t nforward, nbackward;
};

/*
 * The cutting of a stream of operations into phases, fed one operation at
 * a time (phase_cut_next). Zeroed, it is at the first operation.
 */
struct phase_cut {
	int in_run;		/* the last operation was a marker */
	int run_sends_only;	/* the run so far has sends only */
	unsigned run_len;	/* operations of the run so far */
	int started;		/* an operation has been fed */
};

/*
 * Feed the next operation: marker is nonzero for a send or receive to a
 * stage beside this one, send nonzero for a send. Returns 0 when no phase
 * starts here, else 1 + how many operations back the phase starts: 1 when
 * it starts at this operation (the first operation starts one), more at a
 * receive after sends in one run, whose phase starts at the run's first
 * operation (the buffer a receive fills is allocated before the group, so
 * that it counts at the group's first operation).
 */
int phase_cut_next(struct phase_cut *c, int marker, int send);

/*
 * Record what phase_cut_next said (back, for operation op, an index from
 * the iteration's first) in the starts start[0 .. *n), room for cap: a start
 * back - 1 operations before op, replacing any start after it. Nothing for
 * back 0 or without room.
 */
void phase_cut_record(uint32_t *start, uint32_t *n, uint32_t cap, uint32_t op, int back);

/* Whether a send or receive from rank to peer, of nranks, is to a stage
 * beside it (peer is rank - 1 or rank + 1, modulo nranks; with one rank,
 * the rank itself: a pipeline of one stage, as a single-GPU job has). */
int phase_marker(int rank, int nranks, int peer);

/*
 * The phases of profile p, cut at the operations given[0 .. n) (increasing,
 * given[0] is 0) and within them (the inner cuts above; more than PHASE_MAX
 * phases are merged into the last), into out (phase_fini frees it).
 * Returns 0, or -1 when out of memory or given is not so (out empty).
 */
int phase_split(const struct prof *p, const uint32_t *given, uint32_t n, struct phase_set *out);

void phase_fini(struct phase_set *s);

/*
 * Phases that repeat: the micro-batches of a steady state. A buffer made in
 * a phase is linked to the buffer made at its place in the next phase of
 * the same kind where the two are alike throughout their
 * lives: the same size, span and movability, and the second's making, uses
 * and free all the same number of operations after the first's. That
 * distance is the one between the two phases' starts, or their ends (the
 * memory's turns that cut phases fall a few operations apart where the
 * micro-batches differ at their edges: the first makes the gradients), or
 * the last link's. next[b] is that buffer (PROF_NONE: none), shift[b] the
 * distance, prev[b] the link the other way; a phase with a buffer so linked
 * has that next phase as its alike. The first micro-batch, the last one (an
 * optimizer step after it) and a schedule's warm-up differ from the steady
 * state only where their buffers do: those buffers stay unlinked. A planner
 * can then take one decision for a buffer and its siblings, the chain of
 * links through it (search.c). Arrays of p->nbufs. Returns the links made,
 * or -1 when out of memory (arrays all PROF_NONE).
 */
int64_t phase_siblings(const struct prof *p, struct phase_set *s, uint32_t *next,
    uint32_t *prev, uint32_t *shift);

#endif
