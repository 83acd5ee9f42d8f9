/*
 * lrec.h: launch records. For each launch of a recorded iteration, what it
 * takes to launch it again exactly: the function, grid, block, dynamic
 * shared memory, stream, cuLaunchKernelEx's attributes and a copy of the
 * parameter bytes, laid out as the kernel's argument buffer (each parameter
 * at its offset from kparam.h's layout, or the `extra` list's packed buffer
 * as it was).
 *
 * A recording keeps its records in one arena (struct lrec_set): an index by
 * position in the iteration and the records themselves, in chunks that
 * never move, so a record stays valid until lrec_set_fini. The arena holds
 * at most its bound of bytes (EBB_LAUNCH_RECORD_BYTES); the launches past
 * it are marked not recorded. A launch whose arguments cannot be copied in
 * full (its layout unknown, a parameter missing, an `extra` list without a
 * buffer or its size) or that a stream capture takes into a graph is
 * recorded and marked not replayable.
 *
 * Not thread-safe: the executor records under ebb_state_lock, and a set
 * taken out for planning is only read.
 */
#ifndef EBB_LREC_H
#define EBB_LREC_H

#include <stddef.h>
#include <stdint.h>

#include "cuda_compat.h"
#include "kparam.h"
#include "launch.h"

struct ebb_stream;

enum lrec_state {
	LREC_REPLAYABLE = 0,	/* complete: lrec_launch can launch it again */
	LREC_UNREPLAYABLE,	/* recorded, its arguments not known in full */
	LREC_UNRECORDED		/* past the bound: nothing else is kept of it */
};

/* A parameter word that held a buffer's address (lrec_relocate): what to
 * write there for the buffer of another iteration. */
struct lrec_reloc {
	uint32_t off;		/* the word's byte offset in the parameter bytes */
	uint32_t buf;		/* the buffer, as the caller names it */
	uint64_t delta;		/* the word less the buffer's address then */
};

/* What lrec_relocate's naming callback answers for a word that names no
 * buffer, and for one inside a buffer it has no name for (the record then
 * cannot be relocated). */
#define LREC_NO_BUF UINT32_MAX
#define LREC_UNNAMED (UINT32_MAX - 1)

/* One launch, as it can be launched again. */
struct lrec {
	uintptr_t func;			/* CUfunction or CUkernel, as the launch passed it */
	CUstream stream;		/* as the caller passed it (0 with per_thread: the
					 * launching thread's default stream, which the
					 * tracker names for any other thread) */
	struct ebb_stream *tracker;	/* ebb's tracker of that stream (streams.h); NULL: none */
	const struct ebb_kinfo *k;	/* the kernel's layout; NULL: none known */
	const CUlaunchAttribute *attrs;	/* copies of cuLaunchKernelEx's attributes */
	const unsigned char *params;	/* the parameter bytes, nbytes of them */
	const struct lrec_reloc *relocs;	/* the words that held buffers' addresses */
	uint32_t nrelocs;		/* at relocs; see lrec_relocate */
	uint8_t relocated;		/* lrec_relocate has named them all */
	uint32_t nattrs;		/* attributes at attrs */
	uint32_t nbytes;		/* bytes at params */
	uint32_t grid[3], block[3];	/* dimensions, x y z */
	uint32_t shmem;			/* dynamic shared memory bytes */
	uint8_t entry;			/* enum ebb_launch_entry */
	uint8_t per_thread;		/* came through a _ptsz entry (stream 0 is the thread's) */
	uint8_t packed;			/* the arguments came packed in `extra` */
	uint8_t state;			/* enum lrec_state */
};

/* What a set holds, for the summary. */
struct lrec_stats {
	uint64_t records;	/* launches recorded, replayable or not */
	uint64_t unreplayable;	/* of them, those marked not replayable */
	uint64_t unrecorded;	/* launches past the bound */
	uint64_t param_bytes;	/* parameter bytes copied */
	uint64_t bytes;		/* memory the set holds: its index, its chunks */
};

struct lrec_chunk;

/* The launch records of one recording. */
struct lrec_set {
	const struct lrec **at;		/* the record of each position; NULL: no launch there */
	uint32_t n;			/* positions */
	struct lrec_chunk *chunks;	/* the records' memory, newest chunk first */
	uint64_t bound;			/* bytes the set may hold */
	struct lrec_stats st;
};

/*
 * Set s up for an iteration of n positions, holding at most bound bytes.
 * Returns 0, or -1 when its index does not fit in bound, -2 when there is no
 * memory for it: every launch added is then counted as not recorded (s is
 * still usable).
 */
int lrec_set_init(struct lrec_set *s, uint32_t n, uint64_t bound);

/*
 * Record the launch l at position pos (k: its kernel's layout, NULL when
 * none is known; stream and per_thread as the call named it; tracker: ebb's
 * tracker of it; captured: a stream capture takes it into a graph).
 * Returns the record's state (enum lrec_state).
 */
int lrec_add(struct lrec_set *s, uint32_t pos, const struct ebb_launch *l,
    const struct ebb_kinfo *k, CUstream stream, int per_thread, struct ebb_stream *tracker,
    int captured);

/* The record of position pos, or NULL when no launch is recorded there
 * (none was made, or the index could not be made). A launch past the bound
 * has a record of state LREC_UNRECORDED and nothing else. */
const struct lrec *lrec_at(const struct lrec_set *s, uint32_t pos);

/*
 * Name the buffers the record of position pos references: each 8-byte word
 * of its parameters that kparam.h reads as a possible pointer is given to
 * name(word, &delta, ctx), which returns the caller's name of the buffer
 * holding that address (and the word less the buffer's start in delta),
 * LREC_NO_BUF, or LREC_UNNAMED. Returns 0 (the record is marked relocated),
 * or -1 when there is no replayable record there, a word is LREC_UNNAMED,
 * or the bound leaves no room (then lrec_params cannot remake its
 * parameters).
 */
int lrec_relocate(struct lrec_set *s, uint32_t pos,
    uint32_t (*name)(uint64_t word, uint64_t *delta, void *ctx), void *ctx);

/* What lrec_params's addr answers to leave a word as it is. */
#define LREC_KEEP UINT64_MAX

/*
 * The parameter bytes of r for buffers that live elsewhere now: from (NULL:
 * r's own bytes; else another iteration's arguments at r's position, as
 * lrec_args gives them) into out (r->nbytes), with each word that held a
 * buffer's address given addr(buf, ctx) + its delta, or left where addr
 * answers LREC_KEEP. Returns 0, or -1 when r is not relocated or addr
 * answers 0 for one of its buffers.
 */
int lrec_params(const struct lrec *r, const unsigned char *from, unsigned char *out,
    uint64_t (*addr)(uint32_t buf, void *ctx), void *ctx);

/*
 * The arguments of l, a launch of another iteration at r's position, laid
 * out as r's parameter bytes into out (r->nbytes): the same launch but for
 * its values. Returns 0, or -1 when l is not r's launch there (another
 * function, geometry, shared memory, attribute count or way of passing
 * arguments, or its arguments are not all there).
 */
int lrec_args(const struct lrec *r, const struct ebb_launch *l, unsigned char *out);

/* Free what s holds; s is then empty, as zeroed. */
void lrec_set_fini(struct lrec_set *s);

/*
 * This iteration's arguments of some positions' launches, each taken at its
 * launch (lrec_args), so that they can be launched again later in the same
 * iteration with what the job passed this time.
 */
struct lrec_argset {
	uint32_t *idx;		/* by position: index into off and got, or UINT32_MAX */
	size_t *off;		/* where each one's bytes are in buf */
	uint8_t *got;		/* taken in this iteration */
	unsigned char *buf;
	uint32_t npos;		/* positions idx covers (the set's) */
	uint32_t m;		/* positions taken */
};

/* Set a up for the positions pos[0..n) of s's records (in any order,
 * repeated or not). Returns 0, or -1 when there is no memory (a is then as
 * zeroed). */
int lrec_argset_init(struct lrec_argset *a, const struct lrec_set *s, const uint32_t *pos,
    size_t n);

/* Launch l at position pos: take its arguments where pos is one of a's.
 * Returns 1 when taken, 0 when pos is not one of a's, -1 when l is not the
 * recorded launch there (lrec_args; pos then has no arguments taken). */
int lrec_argset_take(struct lrec_argset *a, const struct lrec_set *s, uint32_t pos,
    const struct ebb_launch *l);

/* The arguments taken at pos in this iteration (laid out as its record's
 * parameter bytes), or NULL when none were. */
const unsigned char *lrec_argset_get(const struct lrec_argset *a, uint32_t pos);

/* A new iteration: nothing taken. */
void lrec_argset_clear(struct lrec_argset *a);

/* Free what a holds; a is then as zeroed. */
void lrec_argset_fini(struct lrec_argset *a);

/*
 * Launch r again through the driver's own functions (ebb_real), as it was
 * launched: the same entry point, function, geometry, shared memory, stream
 * and attributes, with the parameter bytes params (r->params, or a copy of
 * them with some values changed; r->nbytes of them). Returns the driver's
 * result, or CUDA_ERROR_INVALID_VALUE when r is not replayable, or
 * CUDA_ERROR_OUT_OF_MEMORY.
 */
CUresult lrec_launch(const struct lrec *r, const unsigned char *params);

#endif
