/*
 * verify.h: proving a replay by doing it once (EBB_RECOMPUTE).
 *
 * The gaps replay_find (policy/replay.h) names are candidates by the write
 * sets alone. In the first iteration a plan runs, each one whose chain runs
 * on one stream, which is also the stream of the operation at the end of
 * its window (r_hi, or the operation an input is freed after right before
 * it, where the plan would replay it: rc_replay_at), is replayed there
 * once, right before that operation:
 * the chain's launches are launched again on that stream, with the
 * arguments this iteration gave them but the buffer's address replaced by a
 * scratch buffer of ebb's own, poisoned first (and the other buffers the
 * chain writes by scratch zeroed first, as a remake zeroes it), and the
 * scratch is hashed
 * beside the buffer itself, which the job still holds there (the buffer and the chain's inputs are made resident
 * first, and count as used by that operation, so nothing moves them while
 * the replay runs). Equal digests prove, for that iteration, that the chain
 * remakes the buffer bit for bit from its inputs as they are there: it is
 * deterministic, writes every byte, and no input changed unseen. Nothing the
 * job sees changes: a chain writes only its buffer (by the write sets, and
 * no launch that may write what it does not reference is in one), which the
 * replay replaces by the scratch.
 *
 * The digests are read once the device has passed the last replay, at a
 * later iteration start. The scratch, as large as the largest candidate, is
 * served by the mover at the first replay, within EBB_LIMIT as an
 * allocation of the job's is (it makes room), and pinned; it goes back once
 * the last replay's stream has passed it. Where there is no room for it,
 * nothing is verified (said).
 *
 * Called with ebb_state_lock held.
 */
#ifndef EBB_VERIFY_H
#define EBB_VERIFY_H

#include <stdint.h>

#include "cuda_compat.h"

struct ebb_buf;
struct ebb_launch;
struct ebb_stream;
struct lrec_set;
struct prof;
struct replay_set;

struct xbuf;

/* The buffer xb (exec_int.h: a profile's buffer, named across iterations)
 * is in the running iteration, or NULL (the caller's). */
typedef struct ebb_buf *(*verify_resolve_fn)(const struct xbuf *xb, void *ctx);

/* The counts of the last plan's verification. */
struct verify_stats {
	uint64_t candidates;	/* gaps given to verify_prepare */
	uint64_t tried;		/* replayed once */
	uint64_t verified;	/* of them, the buffer remade bit for bit */
	uint64_t failed;	/* of them, another buffer */
	uint64_t skipped;	/* not tried, the sum of these: */
	uint64_t skipped_unfit;		/* writing more other buffers than a job holds */
	uint64_t skipped_passed;	/* its point not reached (or passed unseen) in
					 * the iteration of the replays */
	uint64_t skipped_stream;	/* its launches on several streams, or not on
					 * that of the operation at its point; a record
					 * not replayable as it is */
	uint64_t skipped_buffers;	/* a buffer not found there, or of another size */
	uint64_t skipped_resident;	/* its buffers not made resident there */
	uint64_t skipped_launch;	/* its arguments not taken, or a launch refused */
	uint64_t skipped_memory;	/* no room for the replays' scratch */
};

/*
 * Verify the candidates rs of profile p in the next iteration a plan runs:
 * ls is the recording's launch records, which must outlive the verification
 * (verify_results, verify_drop); bufs[i] names buffer i of p across
 * iterations. Returns 0, or -1 when out of memory (nothing is verified).
 */
int verify_prepare(const struct prof *p, const struct replay_set *rs,
    const struct lrec_set *ls, const struct xbuf *bufs);

/* Once the last verification's digests are read: for each candidate of rs
 * (by index), 1 when it was tried and remade its buffer bit for bit; *n
 * their count. NULL (and *n 0) before then, or after verify_forget. */
const uint8_t *verify_results(uint32_t *n);

/* Drop the verification and its results. */
void verify_forget(void);

/* An iteration of the running plan starts: the first after verify_prepare
 * replays; a later one reads the digests once the device has done them. */
void verify_boundary(void);

/*
 * The operation at position pos of the running iteration, seq, on stream st
 * (its tracker), is about to be handed to the driver; l: the launch it is
 * (NULL: another operation). A chain's launch has its arguments taken (a
 * replay launches what this iteration launched, scalars and all); then the
 * candidates whose point it is are replayed before it, on its stream (one
 * whose buffers cannot be made resident is skipped; the operation is not
 * failed for it).
 */
void verify_before(uint32_t pos, uint64_t seq, struct ebb_stream *st,
    const struct ebb_launch *l, verify_resolve_fn resolve, void *ctx);

/* Stop: the plan stopped (the digests of replays issued are dropped). */
void verify_drop(void);

void verify_stats(struct verify_stats *out);

#endif
