/*
 * probe.h: learning which buffers each launch writes, by measurement on the
 * device (EBB_RECOMPUTE).
 *
 * The iteration after the recorded one is probed: around each of its
 * launches ebb hashes every buffer the launch references, on the launch's
 * own stream, once before it and once after it (hash.cu, carried as PTX).
 * A buffer whose digest changed was written; one whose digest did not was
 * only read, in that iteration. Writes are never missed, whatever else runs
 * on other streams meanwhile: another stream's write shows as a write of
 * this launch too, which only makes ebb more careful. Nothing the job sees
 * changes: the hashes read the buffers and write ebb's own memory.
 *
 * The probe's positions are the recording's (same period, same tokens): a
 * launch is measured only where it references as many buffers, of the same
 * sizes, as the recorded launch at that position; the digests are read once
 * the device has done the iteration (probe_read, after a synchronisation).
 *
 * Called with ebb_state_lock held, except probe_read (no lock: the probe has
 * ended and nothing else touches it).
 */
#ifndef EBB_PROBE_H
#define EBB_PROBE_H

#include <stddef.h>
#include <stdint.h>

#include "cuda_compat.h"

struct buftab;
struct ebb_buf;
struct ebb_stream;
struct lrec_set;
struct rec;

/* What a probe did, for the summary. */
struct probe_stats {
	uint64_t probes;	/* iterations probed */
	uint64_t launches;	/* launches measured in the last probe */
	uint64_t unmeasured;	/* launches of it not measured (another shape, capture,
				 * a hash that could not be launched) */
	uint64_t refs;		/* buffer references measured */
	uint64_t written;	/* of them, written by their launch */
	uint64_t pointers;	/* of them, buffers holding words that are device
				 * addresses of tracked buffers (tables of pointers) */
	uint64_t chance;	/* buffers measured launches referenced that the recorded
				 * launch did not, found unchanged */
	uint64_t loose;		/* launches hashed for pointers only: their buffers are
				 * not the recorded launch's, or they changed one that
				 * launch did not have (their accesses unknown) */
	uint64_t hashes;	/* hash kernels launched */
	uint64_t bytes;		/* bytes hashed */
};

/*
 * The shape of the recorded iteration: probe_shape_begin starts it for nops
 * positions (0, or -1 when out of memory), probe_shape_op gives the buffers
 * the operation at position pos references, in order (positions increase;
 * out of memory drops the shape), probe_shape_launch says it is a launch
 * (only launches are probed), probe_shape_drop forgets it.
 * probe_ref: the recording's buffer id of reference j of position pos
 * (0, or -1 when there is none).
 */
int probe_shape_begin(uint32_t nops);
void probe_shape_op(uint32_t pos, struct ebb_buf *const *bufs, size_t n);
void probe_shape_launch(uint32_t pos);
void probe_shape_drop(void);
int probe_ref(uint32_t pos, uint32_t j, uint64_t *id);

/*
 * Probe the iteration of the shape's positions that starts with operation
 * s0 (tab: the buffers, whose span bounds what counts as a pointer). Loads
 * the hash kernel into the current context on first use, and takes device
 * memory for the digests (64 bytes a reference, ebb's own, outside
 * EBB_LIMIT). Returns 0, or -1 when it cannot (said where it is the
 * driver's refusal: no write sets are learned, and nothing is recomputed).
 */
int probe_begin(uint64_t s0, struct buftab *tab);

/* Launch the hash of n bytes at p into the digest out (4 words, zeroed) on
 * stream h, with the kernel a probe loaded. Returns 0, or -1 when it is not
 * loaded or the launch fails. */
int probe_hash(CUdeviceptr p, uint64_t n, CUdeviceptr out, CUstream h);

/* Buffer b was allocated while probing: words inside the region it lies in
 * count as pointers (hashreg.h). */
void probe_span(const struct ebb_buf *b);

/* Whether a probe is on (between probe_begin and probe_end). */
int probe_on(void);

/*
 * Launch seq, on stream st (handle: what to pass the driver), references
 * bufs[0..n) and is about to be handed to the driver: hash them before it.
 * Returns 1 when the launch is measured (probe_after must follow), else 0.
 */
int probe_before(uint64_t seq, struct ebb_stream *st, CUstream handle,
    struct ebb_buf *const *bufs, size_t n);

/* Launch seq has been handed to the driver: hash its buffers after it. */
void probe_after(uint64_t seq, CUstream handle, struct ebb_buf *const *bufs, size_t n);

/* The probed iteration is over: no more hashes. */
void probe_end(void);

/* Forget the probe (a departure, or after its results were taken); the
 * shape stays until probe_shape_drop. */
void probe_drop(void);

/* Whether an ended probe waits for probe_read. */
int probe_pending(void);

/*
 * Read the digests back. The caller has synchronised the context since
 * probe_end, so every hash is done. Returns 0, or -1 when they cannot be
 * read (said; no write sets).
 */
int probe_read(void);

/*
 * What reference j of position pos did, from a read probe: PROF_ACC_READ,
 * PROF_ACC_WRITE, or PROF_ACC_UNKNOWN when not measured.
 */
unsigned probe_access(uint32_t pos, uint32_t j);

/* Whether the buffer of reference j of position pos, before or after its
 * launch, holds an 8-byte aligned word inside the regions of tracked
 * buffers (hashreg.h): a table of pointers, through which the launch may
 * write buffers it does not reference. 0 when not measured. */
int probe_pointers(uint32_t pos, uint32_t j);

void probe_stats(struct probe_stats *out);

/*
 * The read probe's write sets into the recording r (ls: its launch
 * records): how each measured launch accessed each buffer of r's profile it
 * references (rec_access), which launches can be launched again
 * (prof_replayable): a replayable record whose every reference was
 * measured, is in the profile (a buffer outside it, from a slab, has no uses
 * there to prove it unchanged) and holds no pointers; and which launches
 * may write buffers they do not reference (prof_wild): those not hashed,
 * and those that reference a table of pointers. A launch whose buffers are
 * not the recorded launch's is hashed for pointers only: its accesses are
 * unknown (it may have read and written each), and it is not wild unless
 * one of them held pointers. st gets the probe's
 * statistics. Returns how many launches can be launched again (0 when the
 * probe was not read); *wild: how many may write what they do not
 * reference.
 */
uint64_t probe_apply(struct rec *r, const struct lrec_set *ls, struct probe_stats *st,
    uint64_t *wild);

#endif
