/*
 * record.h: building the access profile of one iteration (plan.h) from
 * events, as the engine sees them live or as utils/ebb reads them from a
 * trace.
 *
 * Operations are named by their sequence number: operation i of the
 * profile is sequence number s0 + i. Buffers are named by their allocation
 * id. A buffer alive when the iteration starts keeps its id as its key in
 * the profile (a weight, optimizer state: the same buffer every
 * iteration); one allocated during it is keyed by its allocation ordinal
 * within the iteration (REC_KEY_ORDINAL set), which names the buffer the
 * same code allocates in every later iteration. A buffer that crosses only
 * one of the iteration's two ends has no name that holds across iterations:
 * it is recorded for its memory but marked not movable.
 *
 * A small buffer (one a slab holds, whose memory is counted in fixed) is in
 * the profile too, of size 0, not movable, with its bytes as its span: its
 * uses prove a replay's inputs unchanged, and a replay that writes it takes
 * its bytes in scratch. One allocated during the iteration is keyed by its
 * ordinal among the small ones (REC_KEY_SMALL set too).
 *
 * Pure C: no CUDA, no I/O, no globals.
 */
#ifndef EBB_RECORD_H
#define EBB_RECORD_H

#include <stdint.h>

#include "idmap.h"
#include "plan.h"

#define REC_KEY_ORDINAL ((uint64_t)1 << 63)
#define REC_KEY_SMALL ((uint64_t)1 << 62)

struct rec {
	struct prof p;
	uint64_t s0;
	uint32_t nalloc;	/* allocations seen since the start */
	uint32_t nsmall;	/* of small buffers, kept apart */
	struct idmap ids;	/* allocation id -> profile index */
	uint32_t timed;		/* operations given a time */
	int oom;		/* an event was lost for want of memory */
};

/* Start recording nops operations from sequence number s0. Returns 0 or -1. */
int rec_begin(struct rec *r, uint64_t s0, uint32_t nops);
void rec_fini(struct rec *r);

/* A buffer alive when the iteration starts. */
void rec_live(struct rec *r, uint64_t id, uint64_t size, int movable);

/* A buffer allocated before operation next_seq. */
void rec_alloc(struct rec *r, uint64_t id, uint64_t size, int movable, uint64_t next_seq);

/* A small buffer of bytes alive when the iteration starts, and one
 * allocated before operation next_seq (record.h above). */
void rec_live_small(struct rec *r, uint64_t id, uint64_t bytes);
void rec_alloc_small(struct rec *r, uint64_t id, uint64_t bytes, uint64_t next_seq);

/* A buffer freed after operation last_seq. */
void rec_free(struct rec *r, uint64_t id, uint64_t last_seq);

/* Operation seq used buffer id. */
void rec_use(struct rec *r, uint64_t seq, uint64_t id);

/*
 * Operation seq, a launch, accessed buffer id, one of its references, as acc
 * (PROF_ACC_READ or PROF_ACC_WRITE, measured; PROF_ACC_UNKNOWN: not). A
 * launch can be launched again only where this holds for each of its
 * references: a buffer outside the profile has no uses there to prove it
 * unchanged. Returns 0 when the access is measured and set on id's use at
 * seq; 1 when it is not measured, id is not in the profile or has no use at
 * seq (nothing set); -1 when out of memory (nothing set: the access is
 * lost, not the event, so r->oom stays as it was).
 */
int rec_access(struct rec *r, uint64_t seq, uint64_t id, unsigned acc);

/* Operation seq is a copy of the job's between host and device (PROF_XFER_*). */
void rec_xfer(struct rec *r, uint64_t seq, unsigned dir);

/* Operation seq kept the device busy for seconds. */
void rec_time(struct rec *r, uint64_t seq, double seconds);

/* The iteration is over: mark what cannot be named across iterations. */
void rec_end(struct rec *r);

#endif
