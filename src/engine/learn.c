/*
 * learn.c: learning the job's iteration, and what CUPTI does meanwhile.
 *
 * Each operation's token goes to the iteration finder (or, under
 * EBB_ITER_KERNEL, each launch of the named kernel marks an iteration);
 * learn_step writes the I and D records, tells the executor where
 * iterations start and whether the job departed from the one learned, and
 * decides what CUPTI should do: attached at the first operation, paused
 * when learning ends, recording again at a departure, finalised when
 * nothing more is to be timed. learn_cupti_act carries the decision out
 * without engine_lock, and learn_plan_now starts the planner's thread.
 */
#include "config.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>

#include "conf.h"
#include "ebb.h"
#include "engine_int.h"
#include "exec.h"
#include "iter.h"
#include "kparam.h"
#include "log.h"
#include "mover.h"
#include "real.h"
#include "trace.h"
#include "tracer.h"

/* Held while CUPTI is attached, paused, resumed or detached: the lock
 * order is in engine_int.h. */
pthread_mutex_t cupti_lock = PTHREAD_MUTEX_INITIALIZER;

/* ---- CUPTI ---- */

/* GPU times from CUPTI (its callback): to the executor, and straight into
 * the trace. */
static void
gpu_times(uint64_t seq, uint64_t start, uint64_t end, void *ctx)
{
	struct ebb_line l;

	(void)ctx;
	exec_gpu_time(seq, start, end);
	if (!ebb_trace_on())
		return;
	ebb_line_begin(&l, 'G');
	ebb_line_u64(&l, seq);
	ebb_line_u64(&l, start);
	ebb_line_u64(&l, end);
	ebb_line_end(&l);
}

/* Attach CUPTI; called without engine_lock (CUPTI may call back). When it
 * cannot be attached, cupti_wanted is cleared. */
void
learn_cupti_start(void)
{
	ebb_inside = 1;
	int r = ebb_cupti_attach(engine.conf->cupti_lib, gpu_times, NULL);
	ebb_inside = 0;
	if (r < 0) {
		pthread_mutex_lock(&engine_lock);
		engine.cupti_wanted = 0;
		pthread_mutex_unlock(&engine_lock);
		return;
	}
	ebb_trace_note("cupti", ebb_cupti_path());
	ebb_trace_note_u64("cupti-clock", ebb_cupti_timestamp());
}

/* Detach CUPTI, noting why and what it timed in the trace; the caller
 * holds cupti_lock and not engine_lock (the flush calls gpu_times). */
void
learn_cupti_stop(const char *why)
{
	ebb_inside = 1;
	uint64_t n = ebb_cupti_detach();
	ebb_inside = 0;
	uint64_t direct, nested, stamped, others;
	ebb_cupti_match_stats(&direct, &nested, &stamped, &others);
	ebb_trace_note("cupti-detached", why);
	ebb_trace_note_u64("cupti-timed", n);
	ebb_trace_note_u64("cupti-timed-direct", direct);
	ebb_trace_note_u64("cupti-timed-nested", nested);
	ebb_trace_note_u64("cupti-timed-stamped", stamped);
	ebb_trace_note_u64("cupti-activities-of-others", others);
}

/* Pause CUPTI when learning ends; called without engine_lock. */
static void
cupti_pause(void)
{
	ebb_inside = 1;
	uint64_t n = ebb_cupti_pause();
	ebb_inside = 0;
	ebb_trace_note("cupti-paused", "learned");
	ebb_trace_note_u64("cupti-timed", n);
}

/* Record again at a departure after learning; called without engine_lock. */
static void
cupti_resume(void)
{
	ebb_inside = 1;
	int r = ebb_cupti_resume();
	ebb_inside = 0;
	if (r == 0)
		ebb_trace_note("cupti-resumed", "departure");
}

/* ---- learning ---- */

/* An iteration starts at operation seq (period: the period known, 0 if
 * none): count it, sample the device's memory in offload mode, and write
 * an I record. Caller holds engine_lock. */
static void
trace_iteration(uint64_t seq, uint64_t period)
{
	struct ebb_line l;

	engine.iter_count++;
	engine.last_iter_seq = seq;
	engine.stats.iterations = engine.iter_count;
	if (engine.conf->mode == EBB_MODE_OFFLOAD)
		mover_sample_device();
	if (!ebb_trace_on())
		return;
	ebb_line_begin(&l, 'I');
	ebb_line_u64(&l, ebb_now_ns());
	ebb_line_u64(&l, engine.iter_count);
	ebb_line_u64(&l, seq);
	ebb_line_u64(&l, period);
	ebb_line_end(&l);
}

/* Learning just ended: remember how many handles the mover had made, so the
 * summary can tell the steady state's own, and say what CUPTI does now
 * (CUPTI_*, engine_int.h): in offload mode it is paused, to record again
 * at a departure (the iteration is planned again, with GPU times); in
 * observe mode nothing more is timed, and it is finalised, since even
 * paused it slows every launch, which a launch-bound job feels. Caller
 * holds engine_lock. */
static int
learned(uint64_t seq)
{
	struct mover_stats ms;

	mover_stats(&ms);
	engine.created_at_learned = ms.handles_created;
	ebb_trace_note_u64("learned", seq);
	if (engine.conf->mode != EBB_MODE_OFFLOAD) {
		atomic_store(&engine.cupti_goal, CUPTI_GOAL_OFF);
		return CUPTI_DETACH;
	}
	engine.cupti_hold_until = seq + engine.conf->learn_launches;
	atomic_store(&engine.cupti_goal, CUPTI_GOAL_PAUSED);
	return CUPTI_PAUSE;
}

/*
 * Whether the period found is the iteration, as far as CUPTI is concerned.
 * One without an explicit synchronisation, where the job synchronises at
 * all, is a part of the iteration (a micro-batch, found before the first
 * optimizer step), and the job will depart from it: CUPTI stays for the
 * whole iteration's plan, unless EBB_LEARN_LAUNCHES operations pass
 * without a departure (a job that never synchronises), or the finder took
 * it for the iteration after ITER_NOSYNC_REPS repetitions (JAX).
 */
static int
period_confirmed(void)
{
	return engine.finder.synced || engine.finder.nosync_accepted ||
	    engine.finder.total - engine.finder.found_total >= engine.conf->learn_launches;
}

/*
 * Feed the finder with the operation seq's token. Returns what CUPTI
 * should do now (CUPTI_*: it is attached once, at the first operation;
 * paused when learning ends; recording again at a departure, so that the
 * iteration learned again, say the whole one after a micro-batch taken for
 * it, is planned with GPU times; finalised once EBB_LEARN_LAUNCHES
 * operations have passed after learning without one). Caller holds
 * engine_lock.
 */
int
learn_step(uint64_t seq, uint32_t token, int sync, const struct ebb_kinfo *k)
{
	int cupti_action = CUPTI_KEEP;

	if (engine.cupti_hold_until != 0 && seq >= engine.cupti_hold_until &&
	    engine.learn == LEARN_DONE) {
		engine.cupti_hold_until = 0;
		atomic_store(&engine.cupti_goal, CUPTI_GOAL_OFF);
		return CUPTI_DETACH;
	}
	if (engine.conf->iter_kernel[0] != '\0') {
		if (k == NULL || !k->iter_mark)
			return 0;
		uint64_t period = engine.mark_period_start ? seq - engine.mark_period_start : 0;
		engine.mark_period_start = seq;
		engine.stats.period = period;
		trace_iteration(seq, period);
		if (period > 0) {
			exec_found(period);
			exec_boundary(seq + 1, period);
		}
		if (engine.learn != LEARN_DONE && engine.iter_count > engine.conf->learn_iters &&
		    exec_learned()) {
			engine.learn = LEARN_DONE;
			cupti_action = learned(seq);
		}
		return cupti_action;
	}
	if (!engine.finder_ok || engine.learn == LEARN_GAVE_UP)
		return 0;
	enum iter_event e = iter_push(&engine.finder, token, sync, engine.tab.bytes);
	switch (e) {
	case ITER_NONE:
		break;
	case ITER_FOUND: {
		uint64_t p = iter_period(&engine.finder);
		engine.stats.period = p;
		/* Token i (from 0) is operation i + 1. */
		for (uint64_t i = 0; i <= engine.finder.found_complete; i++) {
			uint64_t s = engine.finder.found_first + 1 + i * p;
			if (s <= seq && s > engine.last_iter_seq)
				trace_iteration(s, p);
		}
		engine.iters_timed = engine.finder.found_complete;
		engine.learn = LEARN_FOUND;
		exec_found(p);
		ebb_log(EBB_LOG_INFO, "iteration found: %llu operations", (unsigned long long)p);
		break;
	}
	case ITER_START:
		trace_iteration(seq, iter_period(&engine.finder));
		engine.iters_timed++;
		break;
	case ITER_DEPARTED: {
		struct ebb_line l;
		if (ebb_trace_on()) {
			ebb_line_begin(&l, 'D');
			ebb_line_u64(&l, ebb_now_ns());
			ebb_line_u64(&l, seq);
			ebb_line_u64(&l, engine.stats.period);
			ebb_line_hex(&l, token);
			ebb_line_end(&l);
		}
		ebb_log(EBB_LOG_INFO, "operation %llu departs from the learned iteration; learning again",
		    (unsigned long long)seq);
		engine.stats.period = 0;
		engine.learn = LEARN_SEARCH;
		exec_departed(seq, "another operation than the learned iteration's");
		if (atomic_load(&engine.cupti_goal) == CUPTI_GOAL_PAUSED) {
			atomic_store(&engine.cupti_goal, CUPTI_GOAL_RECORD);
			cupti_action = CUPTI_RESUME;
		}
		break;
	}
	case ITER_GAVE_UP:
		ebb_log(EBB_LOG_WARN, "no repeating iteration found in %llu operations "
		    "(EBB_LEARN_LAUNCHES); set EBB_ITER_KERNEL to the name of the kernel that starts "
		    "an iteration", (unsigned long long)engine.conf->learn_launches);
		engine.learn = LEARN_GAVE_UP;
		atomic_store(&engine.cupti_goal, CUPTI_GOAL_OFF);
		cupti_action = CUPTI_DETACH;
		break;
	}
	/* the next token starts an iteration */
	if (engine.finder.period != 0 && engine.finder.pos == 0)
		exec_boundary(seq + 1, engine.finder.period);
	if (engine.learn == LEARN_FOUND && engine.iters_timed >= engine.conf->learn_iters &&
	    period_confirmed() && exec_learned()) {
		engine.learn = LEARN_DONE;
		cupti_action = learned(seq);
	}
	return cupti_action;
}

/* After a learn_step that changed cupti_goal, with engine_lock released:
 * make CUPTI what the goal now is (paused, recording or finalised), and put
 * the learning iterations' records on disk. */
void
learn_cupti_act(int action)
{
	if (action == CUPTI_KEEP)
		return;
	pthread_mutex_lock(&cupti_lock);
	switch (atomic_load(&engine.cupti_goal)) {
	case CUPTI_GOAL_PAUSED:
		if (ebb_cupti_attached())
			cupti_pause();
		break;
	case CUPTI_GOAL_RECORD:
		if (ebb_cupti_paused())
			cupti_resume();
		break;
	default:
		if (ebb_cupti_attached() || ebb_cupti_paused())
			learn_cupti_stop(engine.learn == LEARN_GAVE_UP ? "gave-up" : "learned");
		break;
	}
	pthread_mutex_unlock(&cupti_lock);
	if (action != CUPTI_RESUME)
		ebb_trace_flush();
}

/* ---- planning ---- */

/* The thread a plan is made on (learn_plan_now). */
static void *
planner_main(void *arg)
{
	(void)arg;
	ebb_inside = 1;		/* nothing this thread calls is the job's */
	exec_plan_now(&engine_lock);
	return NULL;
}

/* Plan the recorded iteration, with CUPTI's times for it (CUPTI stays
 * attached until the plan has run two whole iterations: a plan that departs
 * at once, say of a micro-batch taken for the iteration, is learned again
 * with GPU times). Called without engine_lock. */
void
learn_plan_now(void)
{
	if (ebb_cupti_attached()) {
		/* every activity of the recorded iteration has finished (once a plan) */
		ebb_inside = 1;
		ebb_real.cuCtxSynchronize();
		ebb_cupti_flush();
		ebb_inside = 0;
	}
	/*
	 * The plan is made on a thread of its own: planning a large iteration
	 * takes seconds of CPU, which the job's thread would otherwise wait
	 * out. The job goes on under the mover meanwhile; the plan starts at
	 * the first iteration start after it is made. Signals stay with the
	 * job's threads.
	 */
	pthread_attr_t a;
	pthread_t t;
	sigset_t all, old;
	int r = pthread_attr_init(&a);
	if (r == 0) {
		pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		r = pthread_create(&t, &a, planner_main, NULL);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		pthread_attr_destroy(&a);
	}
	if (r != 0)
		exec_plan_now(&engine_lock);	/* no thread: plan here */
}
