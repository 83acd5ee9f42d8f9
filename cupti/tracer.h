/*
 * tracer.h: GPU start and end times of ebb's operations, from CUPTI.
 *
 * libcupti is loaded at run time (never linked). While attached, ebb pushes
 * its operation sequence number as a CUPTI external correlation id around
 * each launch, copy, memset and graph launch it forwards, and the tracer hands back, for
 * each, the GPU start and end from CUPTI's activity records. Detaching
 * flushes, disables and finalises CUPTI, so the job pays nothing afterwards
 * and a profiler (torch.profiler, Nsight) can attach.
 */
#ifndef EBB_TRACER_H
#define EBB_TRACER_H

#include <stdint.h>

#include "cuda_compat.h"

/* Receives one operation's GPU times (CUPTI timestamps, ns). Called from
 * CUPTI's buffer thread or from ebb_cupti_detach(), without ebb's locks. */
typedef void (*ebb_cupti_sink)(uint64_t seq, uint64_t start, uint64_t end, void *ctx);

/*
 * Load libcupti (lib_path if not empty; else one already loaded, the CUDA
 * toolkit's, or the one beside the job's libcudart) and start recording.
 * Returns 0, or -1 after saying once on stderr why (missing, or taken by
 * another tool); ebb then runs without GPU times. CUPTI is attached at most
 * once per process: after ebb has detached, a profiler may own it, and two
 * users of the activity API would take each other's buffers.
 */
int ebb_cupti_attach(const char *lib_path, ebb_cupti_sink sink, void *ctx);

/*
 * Activities on stream (of context ctx) are ebb's own (its copies to the
 * host and back, which a job's operation may issue from inside the
 * runtime call CUPTI ties them to): never delivered.
 */
void ebb_cupti_ignore_stream(CUcontext ctx, CUstream stream);

/* Whether CUPTI is attached now (cheap: read on every operation). */
int ebb_cupti_attached(void);

/* Bracket the driver call of operation seq. No-ops when detached. */
void ebb_cupti_push(uint64_t seq);
void ebb_cupti_pop(void);

/*
 * Flush every record, detach, then match the records to ebb's operations
 * and deliver their times to the sink (paused: only finalise). Returns
 * operations timed in all.
 */
uint64_t ebb_cupti_detach(void);

/*
 * Stop recording but keep CUPTI (its activities disabled, its buffer
 * callbacks registered: a profiler should not take CUPTI meanwhile),
 * delivering the times recorded so far; ebb_cupti_resume() records again,
 * ebb_cupti_detach() finalises. Returns operations timed in all.
 */
uint64_t ebb_cupti_pause(void);

/* Record again after ebb_cupti_pause. Returns 0, or -1 when not paused or
 * CUPTI refused (said on stderr). */
int ebb_cupti_resume(void);

/* Whether CUPTI is paused (cheap). */
int ebb_cupti_paused(void);

/*
 * Deliver the times of every operation whose activities CUPTI has recorded
 * so far, staying attached (records of operations still running when it
 * is called are dropped: call it when the device is idle). Returns
 * operations timed in all.
 */
uint64_t ebb_cupti_flush(void);

/* How the last detach matched CUPTI's activities (match.h). */
void ebb_cupti_match_stats(uint64_t *direct, uint64_t *nested, uint64_t *stamped,
    uint64_t *unmatched);

/* The CUPTI clock now (0 when not attached), to relate G records to ebb's clock. */
uint64_t ebb_cupti_timestamp(void);

/* Path of the libcupti in use, or "" */
const char *ebb_cupti_path(void);

#endif
