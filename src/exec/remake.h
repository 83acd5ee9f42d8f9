/*
 * remake.h: carrying out the plan's recomputes (EBB_RECOMPUTE): a buffer
 * dropped after a use and remade, before its next use, by launching its
 * producers again.
 *
 * A recomputed gap of buffer X (struct remake_gap) names the use of X before
 * it (drop_at), the operation the chain goes before (r) and the chain's
 * launches and inputs (positions and profile buffers of the recorded
 * iteration). Only gaps whose replay was verified bit for bit (verify.h)
 * are planned, and the planner keeps every use of X and of its inputs on
 * the chain's stream (policy/recompute.h).
 *
 * In each iteration the plan runs:
 * - each chain launch's arguments are taken as the job passes them
 *   (lrec_args): a replay launches what this iteration launched;
 * - after the operation at drop_at, X's contents are dropped
 *   (mover_plan_drop) when every chain launch of this iteration was taken,
 *   its pointer words name X and the inputs where the recording's did, and
 *   X and every input are found; otherwise X stays, and nothing is lost;
 * - X is remade whenever it must be resident again (the mover calls
 *   remake.c's fill): at the use r when r is X's next use, else right after
 *   operation r - 1 by the plan; the chain runs on its stream with those
 *   arguments, after its inputs are made resident, and later uses wait for
 *   an event recorded after it.
 *
 * Correctness does not rest on the iteration following the plan. While X is
 * dropped its inputs must hold what they held at the chain's launch, which
 * the plan guarantees only for the learned iteration: so before any
 * operation that uses an input other than as the recorded iteration read it
 * at that position (another access, another stream), before an input is
 * freed, before a capture begins, and when the plan stops (a departure),
 * every dropped buffer that reads it (or every one) is remade first, while
 * its inputs still hold what they held. An iteration that ends with a
 * buffer still dropped remakes it too.
 *
 * Called with ebb_state_lock held.
 */
#ifndef EBB_REMAKE_H
#define EBB_REMAKE_H

#include <stddef.h>
#include <stdint.h>

#include "cuda_compat.h"

struct ebb_buf;
struct ebb_launch;
struct ebb_stream;
struct lrec_set;
struct xbuf;

/* One recomputed gap of a plan. */
struct remake_gap {
	uint32_t x;		/* the buffer, by its index in the plan's names */
	uint32_t drop_at;	/* its use before the gap: dropped after it */
	uint32_t r;		/* the chain goes right before this operation */
	uint32_t next_use;	/* its use after the gap (r <= next_use) */
	uint32_t chain_first, nchain;	/* positions chain[chain_first ..] */
	uint32_t in_first, nin;		/* inputs inputs[in_first ..] */
	uint32_t sc_first, nsc;		/* the other buffers the chain writes,
					 * scratch[sc_first ..]: a remake writes them
					 * into scratch of its own, of sc_bytes, each at
					 * its scratch_off */
	uint64_t sc_bytes;
	uint64_t size;		/* its bytes (its range's, as the profile has them) */
};

/*
 * What a plan recomputes, built by the planner's side (exec_plan.c) and
 * owned by the plan (struct xplan's rc). bufs names every buffer of the
 * recorded profile across iterations (xbuf), by index; gaps are by drop_at.
 * reads: the (position << 32 | buffer) pairs at which the recorded
 * iteration read a buffer that is some gap's input, sorted; pos_st: the
 * stream of each position in the recording.
 */
struct remake_plan {
	struct lrec_set *ls;		/* the recording's launch records (owned) */
	struct xbuf *bufs;		/* names, by profile index */
	uint32_t nbufs;
	struct remake_gap *gap;		/* by drop_at */
	uint32_t ngap;
	uint32_t *chain;		/* chain positions */
	uint32_t *inputs;		/* input profile indices */
	uint32_t ninputs;
	uint32_t *scratch;		/* profile indices of buffers written into scratch */
	uint64_t *scratch_off;		/* where each lies in its remake's scratch */
	uint64_t *reads;
	uint32_t nreads;
	struct ebb_stream **pos_st;	/* by position */
	uint32_t nops;
	uint64_t bytes;			/* the gaps' sizes summed */
};

/* Free p and what it holds (NULL: nothing). */
void remake_plan_free(struct remake_plan *p);

/* The buffer a plan's name stands for in the running iteration, or NULL. */
typedef struct ebb_buf *(*remake_resolve_fn)(const struct xbuf *xb);

/* Set up (exec_init, with EBB_RECOMPUTE): the mover's remake function.
 * resolve names buffers in the running iteration. */
void remake_init(remake_resolve_fn resolve);

/* A plan starts running (p NULL: one without recomputes), or the running one
 * stops: every dropped buffer is remade first (remake_stop). Returns 0,
 * or -1 when out of memory (nothing is recomputed; said). */
int remake_start(const struct remake_plan *p);

/* The running plan stops or changes: every dropped buffer is remade, on
 * operation seq (the one about to be issued, or the next). */
void remake_stop(uint64_t seq);

/* An iteration of the running plan starts with operation seq: what is still
 * dropped is remade, and the arguments taken are forgotten. */
void remake_boundary(uint64_t seq);

/*
 * Operation seq at position pos of the running iteration, on stream st,
 * using bufs, is about to have its buffers made resident and be issued (l:
 * the launch it is, NULL: another operation): a chain launch's arguments
 * are taken; a dropped buffer whose input it uses other than as recorded is
 * remade first. Returns CUDA_SUCCESS, or a remake's error (the operation
 * fails with it).
 */
CUresult remake_before(uint32_t pos, uint64_t seq, struct ebb_stream *st,
    const struct ebb_launch *l, struct ebb_buf *const *bufs, size_t n);

/* Operation seq at position pos was issued: the drops after it, and the
 * plan's remakes before the next operation. */
void remake_after(uint32_t pos, uint64_t seq);

/* The job frees b (before operation seq): a dropped buffer that reads it is
 * remade first; b itself, dropped, is forgotten. */
void remake_free(struct ebb_buf *b, uint64_t seq);

/* A capture is about to begin (before operation seq): every dropped buffer
 * is remade, since nothing is dropped while one runs. */
void remake_capture(uint64_t seq);

struct remake_stats {
	uint64_t drops;		/* buffers dropped by the plan */
	uint64_t remakes;	/* remade by their chains */
	uint64_t early;		/* of them, before their point: an input used other
				 * than as recorded, freed, a capture, the plan's end */
	uint64_t kept;		/* drops the plan wanted but that were not made: a
				 * chain's arguments not taken, or other than recorded,
				 * buffers not found, the mover unable */
	uint64_t kept_busy;	/* of them: the buffer not found, of another range,
				 * dropped already, its chain's stream or scratch
				 * missing */
	uint64_t kept_args;	/* a chain launch's arguments not taken in this
				 * iteration, or naming other buffers */
	uint64_t kept_inputs;	/* an input not found */
	uint64_t kept_mover;	/* the mover could not drop it (not resident,
				 * pinned, a capture, a copy of it in flight) */
	uint64_t failed;	/* remakes whose launches failed */
};
void remake_stats(struct remake_stats *out);

#endif
