/*
 * engine_int.h: what the files of the engine share (engine.h is its API).
 *
 * engine.c   the hooks' events (operations, allocations, frees, syncs,
 *            captures, NCCL registrations), resolving an operation's
 *            buffers, initialisation, shutdown and the fork handlers
 * learn.c    learning: the iteration finder's steps, the iteration records,
 *            what CUPTI does (attached, paused, recording, finalised) and
 *            the planner thread
 * pool.c     the memory pool whose allocations ebb serves
 * summary.c  the statistics and the exit summary: Z records and exit lines
 *
 * Locks, in the order they are taken:
 *  1. exec.c's planning mutex: held while a plan is made (exec_plan_now,
 *     on the planner thread or the job's), which takes engine_lock under it.
 *  2. cupti_lock: CUPTI's state. Never taken with engine_lock held; the
 *     two are held together only by the fork handlers, which take
 *     cupti_lock first. CUPTI's flush under it calls gpu_times (learn.c),
 *     which takes exec.c's times_lock and the trace's lock.
 *  3. engine_lock: the engine mutex, guarding struct engine (but for its
 *     atomics), the buffer table, the kernel cache, the mover and the
 *     executor. The mover's copy workers and the planner thread take it
 *     too, and the mover waits on its conditions with it.
 *  4. the trace's lock (trace.c) and exec.c's times_lock, taken with
 *     engine_lock held or not.
 */
#ifndef EBB_ENGINE_INT_H
#define EBB_ENGINE_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "buftab.h"
#include "engine.h"
#include "exec.h"
#include "iter.h"
#include "kparam.h"
#include "mover.h"
#include "vmm.h"

struct ebb_conf;

/* Where learning is. */
enum learn_state {
	LEARN_SEARCH,	/* looking for the iteration, CUPTI attached */
	LEARN_FOUND,	/* iteration known, timing the first ones */
	LEARN_DONE,	/* learned; following the iteration */
	LEARN_GAVE_UP	/* no iteration found */
};

/* What learning wants of CUPTI (cupti_wanted: whether it is attached at
 * all), decided under engine_lock; learn_cupti_act makes CUPTI so under
 * cupti_lock, so that decisions taken by several threads in a row end in
 * the last one's whatever order their calls run in. */
enum { CUPTI_GOAL_RECORD, CUPTI_GOAL_PAUSED, CUPTI_GOAL_OFF };

/* What CUPTI should do after an operation (learn_step, learn_cupti_act);
 * below zero, no more timing now. */
enum {
	CUPTI_KEEP = 0,
	CUPTI_RESUME = 1,	/* departed after learning: record again */
	CUPTI_PAUSE = -1,	/* learned: stop recording, held for a departure */
	CUPTI_DETACH = -2	/* gave up, learned in observe mode, or held EBB_LEARN_LAUNCHES
				 * operations in vain */
};

/* The engine's state (defined in engine.c), guarded by engine_lock except
 * where a field says otherwise. */
struct engine {
	const struct ebb_conf *conf;	/* the configuration (ebb_engine_init); NULL before */
	struct buftab tab;		/* the buffers the job has allocated */
	struct kparam_cache kcache;	/* each launched kernel's parameter layout */
	struct iter_finder finder;	/* finds the iteration in the operations' tokens */
	int finder_ok;			/* the finder is set up (no EBB_ITER_KERNEL) */
	enum learn_state learn;		/* where learning is; site_now reads it unlocked */
	uint64_t seq_counter;		/* seq of the last operation (and sync) numbered */
	uint64_t alloc_counter;		/* id of the last buffer tabled */
	uint64_t iter_count;		/* I records written */
	uint64_t last_iter_seq;		/* seq of the last I record */
	uint64_t iters_timed;		/* whole iterations seen since the period was found */
	uint64_t mark_period_start;	/* EBB_ITER_KERNEL: seq of the last mark */
	int capturing;			/* streams in capture now */
	struct ebb_engine_stats stats;	/* the counters ebb_engine_stats reports */
	struct ebb_buf *free_bufs;	/* recycled ebb_buf structs, through free_next */
	int cupti_wanted;		/* EBB_CUPTI and not given up */
	atomic_int cupti_goal;		/* CUPTI_GOAL_*: set under engine_lock, read under
					 * cupti_lock */
	uint64_t cupti_hold_until;	/* CUPTI paused since learning ended: finalised at
					 * this operation if no departure comes first */
	uint64_t created_at_learned;	/* handles the mover had created when learning ended */
	int shut_down;			/* shut down, or a forked child: ebb does no more */
};
extern struct engine engine;

/* The engine mutex (engine.c); the lock order is above. */
extern pthread_mutex_t engine_lock;

/* Held while CUPTI is attached, paused, resumed or detached (learn.c); the
 * lock order is above. */
extern pthread_mutex_t cupti_lock;

/* ---- learn.c ---- */

/*
 * Feed the finder with the operation seq's token (sync: ITER_SYNC,
 * ITER_SYNC_OP, ITER_NOSYNC; k: the kernel launched, or NULL). Returns what
 * CUPTI should do now (CUPTI_*). Caller holds engine_lock.
 */
int learn_step(uint64_t seq, uint32_t token, int sync, const struct ebb_kinfo *k);

/* After a learn_step that returned action, with engine_lock released: make
 * CUPTI what cupti_goal now is, and put the learning's records on disk. */
void learn_cupti_act(int action);

/* Attach CUPTI, at the job's first operation; called without engine_lock.
 * When that fails cupti_wanted is cleared. */
void learn_cupti_start(void);

/* Detach CUPTI, writing why and what it timed to the trace. Caller holds
 * cupti_lock and not engine_lock. */
void learn_cupti_stop(const char *why);

/* Plan the recorded iteration on a thread of its own (here when no thread
 * can be made). Called without engine_lock. */
void learn_plan_now(void);

/* ---- summary.c ---- */

/* What the exit summary reports, gathered by ebb_engine_shutdown. */
struct engine_totals {
	struct ebb_engine_stats st;	/* the engine's counters */
	struct mover_stats ms;		/* the mover's */
	struct exec_stats xs;		/* the plan executor's */
	struct vmm_stats vs;		/* the driver's VMM calls, counted and timed */
};

/* Write the summary's Z records to the trace (caller checks it is on). */
void summary_records(const struct engine_totals *t);

/* Say that EBB_LIMIT was not held here, for why: an error line, and a file
 * for ebb run in EBB_STATUS_DIR. */
void summary_unheld(const char *why);

/* Write the summary's exit lines (EBB_VERBOSE>=1). */
void summary_lines(const struct engine_totals *t);

#endif
