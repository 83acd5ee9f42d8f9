/*
 * exec_int.h: what the executor's files share: its state (struct exec, one
 * instance, exec), the recorded iteration, and the plan as it runs. exec.c
 * records and runs; exec_plan.c plans. Guarded by ebb_state_lock, but for
 * the GPU times (their own lock) and what the planner's thread holds alone.
 */
#ifndef EBB_EXEC_INT_H
#define EBB_EXEC_INT_H

#include <pthread.h>
#include <stdint.h>

#include "buftab.h"
#include "exec.h"
#include "idmap.h"
#include "lrec.h"
#include "mover.h"
#include "phase.h"
#include "record.h"

struct ebb_conf;

/* A buffer the plan moves: a persistent one by id and address, one the
 * iteration allocates by its ordinal. */
struct xbuf {
	uint64_t id, addr;
	uint32_t ord;		/* among the allocations of its class in the iteration */
	uint8_t persistent;
	uint8_t small;		/* a slab's (record.h): ord is among the small ones */
};

struct xact {
	uint32_t buf;
	uint32_t gate;		/* prefetch: position the device must pass first; PROF_NONE: none */
	uint8_t prefetch;
	uint8_t after_op;	/* offload: not before the operation at its position is done
				 * (a copy of the job's to the host it must not delay) */
};

struct xplan {
	uint64_t period;
	struct xbuf *buf;
	uint32_t nbuf;
	uint32_t *first;	/* actions of position i: act[first[i] .. first[i+1]) */
	uint8_t *gate_mark;	/* a marker is wanted after position i (a gate) */
	struct xact *act;
	uint64_t *ord_size;	/* size of each movable-class allocation of the iteration */
	uint32_t nord;
	uint8_t *ord_kept;	/* each of them neither moved nor dropped (exec_run_start;
				 * NULL: none is known to be) */
	struct ebb_buf **slot;	/* this iteration's buffer of each ordinal */
	uint64_t *slot_id;
	/* the small buffers the iteration allocates (record.h), apart */
	uint64_t *small_size;	/* the bytes of each */
	uint32_t nsmall;
	struct ebb_buf **small_slot;	/* this iteration's buffer of each ordinal */
	uint64_t *small_slot_id;
	struct remake_plan *rc;	/* its recomputes (remake.h); NULL: none */
	struct xplan *retired_next;
};

/* A recorded iteration: the one being recorded (cur), or one taken out for
 * planning with the mover's state the plan depends on. */
struct exec_recorded {
	struct rec r;			/* the recording */
	uint64_t *addr;			/* address of each buffer alive at its start */
	uint32_t naddr;
	uint32_t *tok;			/* each operation's token */
	uint64_t *host, *self;		/* host issue times, ebb's host time by then */
	uint64_t *call;			/* the driver's time in each operation's call */
	uint8_t *sync;			/* the host waited for the device there */
	uint64_t pace_s0;		/* host, self, call and sync are of the iteration
					 * from this operation (exec_pace_begin); 0: the
					 * recording's own */
	struct ebb_stream **st;		/* each operation's stream (NULL: none) */
	double *gpu;			/* GPU times from CUPTI, by position (taken out only) */
	uint64_t ngpu;
	uint64_t fixed, limit;		/* the mover's fixed bytes, what ebb may hold (taken out
					 * only) */
	struct mover_costs costs;	/* what a move has cost the host so far */
	struct lrec_set launches;	/* each launch's record, by position */
	/* the pipeline stage markers (exec_stage): the phases they cut, fed each
	 * operation, their starts by position, and how many markers */
	struct phase_cut cut;
	uint32_t *start, nstart;
	uint64_t markers;
};

/* The host's side of an iteration after the recording (exec_pace_begin). */
struct exec_pace {
	int on;				/* operations s0 .. s0 + n go into it */
	int same;			/* each so far was the recording's at its position */
	uint64_t s0;
	uint32_t n;
	uint64_t *host, *self, *call;	/* as struct exec_recorded's */
	uint8_t *sync;
};

/* mean GPU time of each token, from the timed recordings */
struct tokdur {
	uint32_t n;
	double sum;
};

/* The executor's state, guarded by ebb_state_lock but for the GPU times. */
struct exec {
	const struct ebb_conf *conf;	/* the configuration (exec_init) */
	struct buftab *tab;		/* the engine's buffer table */
	struct exec_stats xs;		/* what exec_stats reports */
	/* the recording */
	int recording;			/* open: operations, allocations and frees go into it */
	int ended;			/* ended, not yet taken: frees after its last operation
					 * still go into it */
	struct exec_recorded cur;	/* the recording */
	uint32_t cur_addr_cap;		/* room in cur.addr */
	struct exec_pace pace;		/* its pace iteration */
	/* GPU times, arriving on whichever thread flushes CUPTI: times_lock */
	pthread_mutex_t times_lock;
	uint64_t times_s0, times_n;	/* the operations they are for: times_s0 on, times_n */
	double *times;
	/* the planner's alone (one plan at a time) */
	struct tokdur *toks;		/* mean GPU time of each token */
	uint32_t ntoks, captoks;
	struct idmap tokidx;		/* token -> index in toks */
	/* the plan */
	struct xplan *ready, *running;	/* installed, and running */
	uint64_t lowered;		/* the target is lower by this much than EBB_LIMIT less
					 * EBB_PLAN_MARGIN (exec_plan_lower) */
	uint64_t lowered_period;	/* for iterations of this many operations (the
					 * running plan's when it was lowered) */
	struct xplan *parked;		/* stopped at a departure that may be a detour
					 * (exec_run_park) */
	uint64_t run_gen;		/* plans started and stopped: a walk of the running
					 * plan's actions that waited sees whether it is still
					 * the run it began in */
	struct xplan *retired;		/* stopped plans, freed at exit (exec_after_op may
					 * still walk one) */
	uint64_t run_s0;		/* the running plan's iteration started with this operation */
	uint32_t run_ord;		/* allocations of that iteration so far */
	uint32_t run_small;		/* of small buffers, apart */
	uint64_t run_done;		/* whole iterations the running plan has run */
	struct exec_made *kept;		/* the plan whose candidates are being verified, kept
					 * for the plan with recomputes (exec_replan_take) */
	struct mover_cost_mark run_mark;	/* the moves when the running plan started:
						 * the plan with recomputes is costed by the
						 * moves the running one made */
};

extern struct exec exec;

/* Free a plan's structure (NULL: nothing). */
void exec_xplan_free(struct xplan *x);

/* A plan that stops: exec_after_op may still be walking it while it waits
 * with the mutex released, so it is freed only at exit. */
void exec_retire(struct xplan *x);

/* Free a recording taken out (NULL: nothing). */
void exec_recorded_free(struct exec_recorded *r);

#endif
