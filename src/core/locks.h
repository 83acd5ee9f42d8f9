/*
 * locks.h: every thread ebb runs code on, every lock it takes, and the
 * order they are taken in; and the state lock, which the layers above
 * core share.
 *
 * Threads:
 *  - The job's threads. Every hooked driver, runtime or NCCL call runs the
 *    engine on the calling thread (src/hooks -> src/engine), which takes
 *    ebb_state_lock for the event and lets it go before the driver runs
 *    the call.
 *  - The mover's three workers (src/mover/mover_copy.c), one for copies
 *    to the host, one for copies back (and remakes), one for drops: each
 *    waits, without the lock, for its oldest item's event, then retires it
 *    under ebb_state_lock (unmaps the device memory an offload or a drop
 *    freed, wakes those waiting for room). Started with the mover, stopped
 *    at exit.
 *  - The planner (src/engine/life.c): a detached thread per recorded
 *    iteration, which takes the recording under ebb_state_lock, plans
 *    without it, and installs the plan under it; and one for the plan with
 *    recomputes (EBB_RECOMPUTE), the same way, once the candidates are
 *    verified.
 *  - The waits search (src/common/planrun.c): a thread beside the
 *    planner's greedy search, working on the planner's inputs alone; it
 *    takes no lock of ebb's and is cancelled through an atomic flag. The
 *    levels of the plan with recomputes (plan_make_recompute): a thread
 *    each, the same way, each with its own waits search.
 *  - CUPTI's buffer thread (cupti/tracer.c): hands completed activity
 *    buffers to ebb, which keeps their records under the tracer's
 *    rec_lock; their times reach the executor (exec_gpu_time) and the
 *    trace when the records are matched, on whichever thread flushes.
 *  - A forked child has none of these threads: ebb does nothing there
 *    (the fork handlers in src/engine/engine.c).
 *
 * Locks, in the order they are taken (a thread holding one takes only
 * locks further down the list):
 *  1. planning (life.c): one plan is made at a time; the planner holds it
 *     while it takes and releases ebb_state_lock.
 *  2. cupti_lock (life.c): CUPTI attached, paused, resumed or detached.
 *     Never taken with ebb_state_lock held: the two are held together
 *     only by the fork handlers, which take cupti_lock first. A CUPTI
 *     flush under it delivers GPU times, which take the locks of 4.
 *  3. ebb_state_lock (below): the engine's state, the buffer table and its
 *     buffer structs, the kernel cache, the streams' trackers, the mover
 *     and the executor. The mover's conditions (work queued, room freed)
 *     are waited on with it; code that waits for the device lets it go
 *     first.
 *  4. Leaf locks, taken with ebb_state_lock held or not, each around a
 *     few lines that take no other lock: the trace's (src/common/trace.c),
 *     the executor's times_lock (src/exec/exec.c), the tracer's rec_lock
 *     (cupti/tracer.c) and the NCCL registrations' reg_lock
 *     (src/hooks/nccl.c).
 */
#ifndef EBB_LOCKS_H
#define EBB_LOCKS_H

#include <pthread.h>

/* The state lock (3. above), defined in buftab.c. */
extern pthread_mutex_t ebb_state_lock;

#endif
