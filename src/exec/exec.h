/*
 * exec.h: learning the access profile of the iteration, planning, and
 * carrying the plan out (EBB_MODE=offload with EBB_PLAN=1).
 *
 * States, in order:
 *   WAIT       the iteration finder has not found the iteration yet
 *   ARMED      found: the next iteration is recorded from its start
 *   RECORDING  every movable buffer alive at the start, every allocation,
 *              use and free of the iteration, and each operation's time
 *   RECORDED   the GPU times are delivered (a CUPTI flush), then
 *              plan_make (planrun.c) plans
 *   READY      planned; the plan starts at the next iteration's start
 *   RUNNING    after each operation, the plan's offloads and restores for
 *              that position in the iteration are issued
 * When the job departs from what was learned (the finder sees another
 * operation, or an allocation of the iteration has another size than the
 * one recorded) the plan stops, the mover's fault path keeps the job
 * correct, and the next iteration is recorded again. After
 * EXEC_MAX_DEPARTURES departures ebb stops planning and says so.
 *
 * Operations are named by the engine's sequence numbers; position i of an
 * iteration that starts at s0 is operation s0 + i. The engine calls every
 * function with its mutex held, except exec_gpu_time and exec_plan_now.
 */
#ifndef EBB_EXEC_H
#define EBB_EXEC_H

#include <pthread.h>
#include <stdint.h>

#include "buftab.h"
#include "streams.h"

struct ebb_conf;

#define EXEC_MAX_DEPARTURES 5

void exec_init(const struct ebb_conf *conf, struct buftab *tab);

/* Whether the engine plans at all (offload mode, EBB_PLAN). */
int exec_enabled(void);

/* The finder found the iteration (period operations). */
void exec_found(uint64_t period);

/* The iteration of period operations starts with operation next_seq. */
void exec_boundary(uint64_t next_seq, uint64_t period);

/* The engine allocated b (served by the mover) before operation next_seq. */
void exec_alloc(struct ebb_buf *b, uint64_t next_seq);

/* The job freed b after operation last_seq. */
void exec_free(struct ebb_buf *b, uint64_t last_seq);

/* Operation seq (token: its identity for the finder) used bufs; xfer: the
 * copy engine it uses, when it is a copy between host and device (PROF_XFER_*);
 * sync: the host waits until the device has done it (a synchronisation, a
 * synchronous copy). */
void exec_op(uint64_t seq, uint32_t token, struct ebb_buf *const *bufs, size_t n,
    unsigned xfer, int sync);

/* Operation seq was handed to the driver on stream st (NULL: a
 * synchronisation): issue what the plan does after it. May release the
 * engine mutex while the host waits for an offload to land. Returns 1 when
 * it moved buffers (or tried to), else 0. */
int exec_after_op(uint64_t seq, struct ebb_stream *st);

/* The finder saw an operation other than the learned one at seq. */
void exec_departed(uint64_t seq, const char *why);

/* Whether the engine may stop learning (and detach CUPTI): planning is
 * off, or the plan has run two whole iterations without departing. */
int exec_learned(void);

/* Whether a recorded iteration waits for its plan; when it does, the
 * caller flushes CUPTI (which delivers the iteration's GPU times) and
 * calls exec_plan_now without the engine mutex, on any thread. */
int exec_plan_due(void);

/* GPU times of operation seq (CUPTI clock, ns). Takes its own lock. */
void exec_gpu_time(uint64_t seq, uint64_t start, uint64_t end);

/* Plan the recorded iteration. Called without the engine mutex; lock is
 * it. The job may go on meanwhile: a departure drops the plan being made,
 * and calls on other threads wait for this one. */
void exec_plan_now(pthread_mutex_t *lock);

/* In the child of a fork (the engine mutex held): no plan is being made. */
void exec_atfork_child(void);

struct exec_stats {
	uint64_t plans;		/* plans made */
	uint64_t departures;
	uint64_t iterations_run;	/* iterations started under a plan */
	uint64_t actions_missed;	/* a planned buffer was not there */
	uint64_t planned_peak;	/* bytes, of the last plan */
	uint64_t predicted_step_ns;
};

void exec_stats(struct exec_stats *out);

#endif
