/*
 * engine_int.h: what the files of the engine share (engine.h is its API).
 *
 * engine.c   the hooks' events (operations, allocations, frees, syncs,
 *            captures, NCCL registrations), resolving an operation's
 *            buffers, initialisation, shutdown and the fork handlers
 * life.c     the lifecycle's one state machine (enum life_state): the
 *            iteration finder's steps, the iteration records, the
 *            executor's orders (record, plan, run, stop), what CUPTI does
 *            (attached, paused, recording, finalised), the planner thread
 * pool.c     the memory pool whose allocations ebb serves
 * summary.c  the statistics and the exit summary: Z records and exit lines
 *
 * Every lock and thread, and the order locks are taken in: locks.h.
 */
#ifndef EBB_ENGINE_INT_H
#define EBB_ENGINE_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "buftab.h"
#include "engine.h"
#include "exec.h"
#include "iter.h"
#include "kparam.h"
#include "locks.h"
#include "mover.h"
#include "vmm.h"

struct ebb_conf;

/* Where the lifecycle is (life.c draws it). The planning states run from
 * LIFE_ARMED to LIFE_RUNNING, in this order. */
enum life_state {
	LIFE_SEARCH,	/* looking for the iteration */
	LIFE_TIMING,	/* found; no plan is made (observe mode, EBB_PLAN=0, planning
			 * given up): timing it, then following it */
	LIFE_ARMED,	/* found; the next iteration is recorded from its start */
	LIFE_RECORDING,	/* the executor records the iteration */
	LIFE_PROBING,	/* EBB_RECOMPUTE: the next one's launches are hashed before and
			 * after (probe.h), for their write sets */
	LIFE_PACING,	/* with CUPTI paused, the next one's host times are the job's
			 * pace (exec_pace_begin) */
	LIFE_RECORDED,	/* recorded; waits for the planner (after a CUPTI flush) */
	LIFE_PLANNING,	/* the planner thread makes the plan */
	LIFE_READY,	/* planned; the plan starts at the next iteration's start */
	LIFE_RUNNING,	/* the plan runs */
	LIFE_GAVE_UP	/* no iteration found: nothing more is learned */
};

/* What learning wants of CUPTI (cupti_wanted: whether it is attached at
 * all), decided under ebb_state_lock; life_cupti_act makes CUPTI so under
 * cupti_lock, so that decisions taken by several threads in a row end in
 * the last one's whatever order their calls run in. */
enum { CUPTI_GOAL_RECORD, CUPTI_GOAL_PAUSED, CUPTI_GOAL_OFF };

/* Why CUPTI is paused or records again (the cupti-paused and cupti-resumed
 * notes): set with cupti_goal. */
enum { CUPTI_WHY_LEARNED, CUPTI_WHY_DEPARTURE, CUPTI_WHY_PACE };

/* What CUPTI should do after an operation (life_step, life_cupti_act);
 * below zero, no more timing now. */
enum {
	CUPTI_KEEP = 0,
	CUPTI_RESUME = 1,	/* departed after learning, or the pace taken: record again */
	CUPTI_PAUSE = -1,	/* learned: stop recording, held for a departure; or for
				 * the pace iteration */
	CUPTI_DETACH = -2	/* gave up, learned in observe mode, or held EBB_LEARN_LAUNCHES
				 * operations in vain */
};

/* The engine's state (defined in engine.c), guarded by ebb_state_lock except
 * where a field says otherwise. */
/* Kinds of call whose host time EBB_SELF_TIME sums. */
enum self_kind {
	SELF_OP,	/* a launch, copy, memset, NCCL call or graph launch */
	SELF_ALLOC,
	SELF_FREE,
	SELF_SYNC,
	SELF_QUERY,	/* a pointer query (offload mode: maps its buffer if away) */
	SELF_KINDS
};

/* Where the plan with recomputes is (struct engine's replan_due). */
enum {
	REPLAN_NONE = 0,	/* not wanted */
	REPLAN_DUE,		/* the running plan's candidates are verified: make it */
	REPLAN_STARTED		/* its thread is started */
};

/* [0]: while learning (engine.learned is 0), [1]: after */
struct self_time {
	uint64_t ns[2][SELF_KINDS];	/* host time in ebb */
	uint64_t calls[2][SELF_KINDS];	/* calls timed */
	uint64_t setup_ns;		/* the mover's setup (its bandwidth calibration), once:
					 * reported apart, not in the allocation it came in */
	/* while an iteration is recorded (recording: set by life.c), the host
	 * time in ebb's part of every call, waits included, summed whether or
	 * not EBB_SELF_TIME is on: the plan's model of the job's host pace
	 * leaves it out (exec_op) */
	int recording;
	uint64_t recorded_ns;
	int timing;		/* EBB_SELF_TIME or recording: the calls are timed (one
				 * load on every call's path) */
};

/* The learning stages said once at EBB_VERBOSE=1 (struct engine's stages_said). */
#define STAGE_FOUND 1u		/* the iteration found */
#define STAGE_RUNNING 2u	/* the plan running */

/*
 * The counters at an iteration boundary under the running plan: the plan's
 * iterations are reported apart (Z records run-*), between the first
 * boundary of the plan that ran last and its last boundary, so that whole
 * planned iterations are counted and nothing before them.
 */
struct run_snap {
	uint64_t ns;		/* when it was taken (ebb_now_ns) */
	uint64_t self_ns[SELF_KINDS], self_calls[SELF_KINDS];	/* after learning */
	uint64_t lock_wait_ns, lock_waits;
	struct mover_stats ms;
	struct vmm_stats vs;
};

/* The departures from the plan or its recording, counted by kind. */
struct departures {
	uint64_t n;			/* all of them */
	uint64_t resumes;		/* detours the job came back from to the planned
					 * iteration (the plan ran on) */
	uint64_t lowerings;		/* the plan made again with a lower target (lower_due) */
	uint64_t raisings;		/* the plan made again without the lowerings, the arena
					 * turned off (lower_due) */
};

struct engine {
	const struct ebb_conf *conf;	/* the configuration (ebb_engine_init); NULL before */
	struct buftab tab;		/* the buffers the job has allocated */
	struct kparam_cache kcache;	/* each launched kernel's parameter layout */
	struct iter_finder finder;	/* finds the iteration in the operations' tokens */
	int finder_ok;			/* the finder is set up (no EBB_ITER_KERNEL) */
	enum life_state life;		/* where the lifecycle is; read unlocked by life_timing */
	int learned;			/* learning is over (CUPTI paused or finalised, no call
					 * sites taken) until the job departs; read unlocked
					 * by life_timing */
	int plan_on;			/* offload mode with EBB_PLAN, and planning not given up */
	struct departures dep;		/* from the plan or its recording */
	int detour_learned;		/* learned was set at the departure of a detour */
	unsigned evicted_iters;		/* iterations in a row of the running plan, from its
					 * second, that evicted kept buffers beside an arena
					 * excess (lower_due) */
	int replan_due;			/* REPLAN_*: the plan with recomputes; read unlocked by
					 * life_plan_due */
	uint64_t seq_counter;		/* seq of the last operation (and sync) numbered */
	uint64_t alloc_counter;		/* id of the last buffer tabled */
	uint64_t iter_count;		/* I records written */
	uint64_t last_iter_seq;		/* seq of the last I record */
	uint64_t iters_timed;		/* whole iterations seen since the period was found */
	uint64_t mark_period_start;	/* EBB_ITER_KERNEL: seq of the last mark */
	int capturing;			/* streams in capture now */
	struct ebb_engine_stats stats;	/* the counters ebb_engine_stats reports */
	int cupti_wanted;		/* EBB_CUPTI and not given up */
	atomic_int cupti_goal;		/* CUPTI_GOAL_*: set under ebb_state_lock, read under
					 * cupti_lock */
	atomic_int cupti_why;		/* CUPTI_WHY_*: with cupti_goal */
	uint64_t cupti_hold_until;	/* CUPTI paused since learning ended: finalised at
					 * this operation if no departure comes first */
	uint64_t created_at_learned;	/* handles the mover had created when learning ended */
	unsigned stages_said;		/* STAGE_* bits: the learning stages said at
					 * EBB_VERBOSE=1 (once each; again at 2) */
	int shut_down;			/* shut down, or a forked child: ebb does no more */
	struct self_time self;		/* EBB_SELF_TIME: ebb's own host time */
	uint64_t lock_wait_ns;		/* the job's threads waited for ebb_state_lock, */
	uint64_t lock_waits;		/* this many times (it was held by another) */
	struct run_snap run_base, run_last;	/* the running plan's first and last boundary */
	uint64_t run_iters;		/* whole iterations between them */
};
extern struct engine engine;

/*
 * EBB_SELF_TIME: the host time spent in ebb's part of each call (the real
 * driver call left out), summed by kind with relaxed atomics, as any thread
 * may add; and, while an iteration is recorded, into recorded_ns whatever
 * EBB_SELF_TIME says. self_begin returns 0 when neither counts; self_end
 * adds the time since t0 and, where counted, one call; self_end_less
 * leaves less ns out of it.
 */
static inline uint64_t
self_clock(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/*
 * ebb's host time in the job's calls while an iteration is recorded, up to
 * now: recorded_ns, the calls done, and the part of the one this thread is
 * in. exec_op takes it at an operation's issue, so that what the call did
 * before that (restores on use, waits for room) falls in the gap before
 * it, where it delayed the issue.
 */
uint64_t engine_recorded_so_far(void);

static inline uint64_t
self_begin(void)
{
	return __atomic_load_n(&engine.self.timing, __ATOMIC_RELAXED) ? self_clock() : 0;
}

static inline void
self_end_less(enum self_kind kind, uint64_t t0, int counted, uint64_t less)
{
	if (t0 == 0)
		return;
	uint64_t ns = self_clock() - t0;
	ns = ns > less ? ns - less : 0;
	if (__atomic_load_n(&engine.self.recording, __ATOMIC_RELAXED))
		__atomic_fetch_add(&engine.self.recorded_ns, ns, __ATOMIC_RELAXED);
	if (engine.conf == NULL || !engine.conf->self_time)
		return;
	int after = __atomic_load_n(&engine.learned, __ATOMIC_RELAXED) != 0;
	__atomic_fetch_add(&engine.self.ns[after][kind], ns, __ATOMIC_RELAXED);
	if (counted)
		__atomic_fetch_add(&engine.self.calls[after][kind], 1, __ATOMIC_RELAXED);
}

static inline void
self_end(enum self_kind kind, uint64_t t0, int counted)
{
	self_end_less(kind, t0, counted, 0);
}

/* Held while CUPTI is attached, paused, resumed or detached (life.c); the
 * lock order is in locks.h. */
extern pthread_mutex_t cupti_lock;

/* ---- life.c ---- */

/*
 * Feed the finder with the operation seq's token (sync: ITER_SYNC,
 * ITER_SYNC_OP, ITER_NOSYNC; k: the kernel launched, or NULL), and move the
 * lifecycle on. Returns what CUPTI should do now (CUPTI_*). Caller holds
 * ebb_state_lock.
 */
int life_step(uint64_t seq, uint32_t token, int sync, const struct ebb_kinfo *k);

/* The engine allocated b (served by the mover) before operation next_seq:
 * the executor records it or matches it to the plan (a mismatch is a
 * departure). Caller holds ebb_state_lock. */
void life_alloc(struct ebb_buf *b, uint64_t next_seq);

/* Whether a recorded iteration waits for its plan (the caller then calls
 * life_plan_now without ebb_state_lock). Caller holds ebb_state_lock.
 * Inline, as every operation asks, like life_timing. */
static inline int
life_plan_due(void)
{
	return engine.life == LIFE_RECORDED ||
	    __atomic_load_n(&engine.replan_due, __ATOMIC_RELAXED) == REPLAN_DUE;
}

/* Whether ebb is learning: operations are timed and call sites taken. Any
 * thread, without the lock. */
static inline int
life_timing(void)
{
	return !__atomic_load_n(&engine.learned, __ATOMIC_RELAXED) &&
	    __atomic_load_n(&engine.life, __ATOMIC_RELAXED) != LIFE_GAVE_UP;
}

/* After a life_step that returned action, with ebb_state_lock released:
 * make CUPTI what cupti_goal now is, and put the learning's records on disk. */
void life_cupti_act(int action);

/* Attach CUPTI, at the job's first operation; called without
 * ebb_state_lock. When that fails cupti_wanted is cleared. */
void life_cupti_start(void);

/* Detach CUPTI, writing why and what it timed to the trace. Caller holds
 * cupti_lock and not ebb_state_lock. */
void life_cupti_stop(const char *why);

/* Plan the recorded iteration on a thread of its own (here when no thread
 * can be made). Called without ebb_state_lock. */
void life_plan_now(void);

/* In the child of a fork (ebb_state_lock held): no plan is being made. */
void life_atfork_child(void);

/* ---- summary.c ---- */

/* What the exit summary reports, gathered by ebb_engine_shutdown. */
struct engine_totals {
	struct ebb_engine_stats st;	/* the engine's counters */
	struct mover_stats ms;		/* the mover's */
	struct exec_stats xs;		/* the plan executor's */
	struct departures dep;		/* from the plan or its recording */
	struct vmm_stats vs;		/* the driver's VMM calls, counted and timed */
};

/* Write the summary's Z records to the trace (caller checks it is on). */
void summary_records(const struct engine_totals *t);

/* Say that EBB_LIMIT was not held here, for why: an error line, and a file
 * for ebb run in EBB_STATUS_DIR. */
void summary_unheld(const char *why);

/* An iteration boundary under the running plan, after iters whole
 * iterations of it (0: its first boundary). */
void summary_run_mark(uint64_t iters);

/* Count an NCCL call op, noting the pipeline stage it marks (summary.c).
 * Under ebb_state_lock. */
void summary_nccl(const struct ebb_op *op);

/* Write the summary's exit lines (EBB_VERBOSE>=1). */
void summary_lines(const struct engine_totals *t);

#endif
