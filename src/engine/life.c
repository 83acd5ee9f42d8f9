/*
 * life.c: the lifecycle's owner: one state machine (enum life_state,
 * engine_int.h) that learns the job's iteration, has the executor record
 * it, plans it on a thread of its own, starts the plan, and learns again
 * when the job departs from it; and what CUPTI does meanwhile.
 *
 * With CUPTI recording, the iteration after the recording (and its probe)
 * is PACING: CUPTI is paused for it, and its host times are the job's pace
 * for the plan; CUPTI's records cost every driver call while it records
 * (several microseconds a launch on a GPU), which the recording's own host
 * times hold.
 *
 * Each operation's token goes to the iteration finder (or, under
 * EBB_ITER_KERNEL, each launch of the named kernel marks an iteration);
 * life_step writes the I and D records, moves the state on at iteration
 * starts and departures, gives the executor its orders, and decides what
 * CUPTI should do: attached at the first operation, paused when learning
 * ends, recording again at a departure, finalised when nothing more is to
 * be timed. life_cupti_act carries the decision out without
 * ebb_state_lock, and life_plan_now starts the planner's thread.
 *
 *   SEARCH --found--> ARMED --start--> RECORDING --start--> RECORDED
 *     ^   \--found, no planning--> TIMING     |   \            ^  |
 *     |         EBB_RECOMPUTE: start  PROBING <-/    \-> PACING   |
 *     |                                  \--start--/  -start/     |
 *     |                                          planner thread |
 *     |                RUNNING <--start-- READY <-- PLANNING <--/
 *     |                   |  \--departs from the plan--> ARMED
 *     \--the finder sees another operation (from any state)
 * A departure from a running plan may be a detour (iter.h): the plan is
 * parked, and where the job comes back to its iteration for a whole one
 * before the search finds another, it runs again from the next (RESUMED:
 * READY with the parked plan, CUPTI paused again), with nothing learned
 * again. A plan that cannot be made, a recording that cannot be taken, or
 * LIFE_MAX_DEPARTURES departures not so resumed turn planning off (TIMING:
 * the job runs under the mover alone). Learning ends (learned) once the
 * iteration has been timed EBB_LEARN_ITERS times and, where a plan is
 * made, it has run two whole iterations; GAVE_UP: no iteration was found.
 */
#include "config.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#include "conf.h"
#include "ebb.h"
#include "engine_int.h"
#include "exec.h"
#include "iter.h"
#include "kparam.h"
#include "locks.h"
#include "log.h"
#include "mover.h"
#include "probe.h"
#include "real.h"
#include "trace.h"
#include "tracer.h"

/* Held while CUPTI is attached, paused, resumed or detached (locks.h). */
pthread_mutex_t cupti_lock = PTHREAD_MUTEX_INITIALIZER;

/* Departures after which ebb stops planning. */
#define LIFE_MAX_DEPARTURES 5
/* Plans made again with a lower target at most (lower_due). */
#define LIFE_MAX_LOWERINGS 2
/* Consecutive iterations of the running plan, from its second, in which
 * kept buffers were evicted beside an arena excess, before lower_due acts. */
#define LIFE_EVICTED_ITERS 2

/* Held while a plan is made, one at a time (locks.h). */
static pthread_mutex_t planning = PTHREAD_MUTEX_INITIALIZER;

/* ---- CUPTI ---- */

/* GPU times from CUPTI (its callback): to the executor, and straight into
 * the trace. */
static void
gpu_times(uint64_t seq, uint64_t start, uint64_t end, void *ctx)
{
	(void)ctx;
	exec_gpu_time(seq, start, end);
	ebb_trace_write_gputime(seq, start, end);
}

/* Attach CUPTI; called without ebb_state_lock (CUPTI may call back). When it
 * cannot be attached, cupti_wanted is cleared. */
void
life_cupti_start(void)
{
	ebb_inside = 1;
	int r = ebb_cupti_attach(engine.conf->cupti_lib, gpu_times, NULL);
	ebb_inside = 0;
	if (r < 0) {
		pthread_mutex_lock(&ebb_state_lock);
		engine.cupti_wanted = 0;
		pthread_mutex_unlock(&ebb_state_lock);
		return;
	}
	ebb_trace_note("cupti", ebb_cupti_path());
	ebb_trace_note_u64("cupti-clock", ebb_cupti_timestamp());
}

/* Detach CUPTI, noting why and what it timed in the trace; the caller
 * holds cupti_lock and not ebb_state_lock (the flush calls gpu_times). */
void
life_cupti_stop(const char *why)
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

/* The cupti-paused and cupti-resumed notes' word for why (CUPTI_WHY_*). */
static const char *
cupti_why_word(int why)
{
	return why == CUPTI_WHY_PACE ? "pace" : why == CUPTI_WHY_DEPARTURE ? "departure" : "learned";
}

/* Pause CUPTI when learning ends, or for the pace iteration (why); called
 * without ebb_state_lock. For the pace, the device first finishes the
 * recorded iteration, so that every record of it is in before the records
 * stop. */
static void
cupti_pause(int why)
{
	ebb_inside = 1;
	if (why == CUPTI_WHY_PACE)
		ebb_real.cuCtxSynchronize();
	uint64_t n = ebb_cupti_pause();
	ebb_inside = 0;
	ebb_trace_note("cupti-paused", cupti_why_word(why));
	ebb_trace_note_u64("cupti-timed", n);
}

/* Record again at a departure after learning, or once the pace is taken
 * (why); called without ebb_state_lock. */
static void
cupti_resume(int why)
{
	ebb_inside = 1;
	int r = ebb_cupti_resume();
	ebb_inside = 0;
	if (r == 0)
		ebb_trace_note("cupti-resumed", cupti_why_word(why));
}

/* What CUPTI should be (CUPTI_GOAL_*), and why (CUPTI_WHY_*), for
 * life_cupti_act. Caller holds ebb_state_lock. */
static void
cupti_want(int goal, int why)
{
	atomic_store(&engine.cupti_why, why);
	atomic_store(&engine.cupti_goal, goal);
}

/* ---- learning ---- */

/* An iteration starts at operation seq (period: the period known, 0 if
 * none): count it, sample the device's memory in offload mode, and write
 * an I record. Caller holds ebb_state_lock. */
static void
trace_iteration(uint64_t seq, uint64_t period)
{
	engine.iter_count++;
	engine.last_iter_seq = seq;
	engine.stats.iterations = engine.iter_count;
	if (engine.conf->mode == EBB_MODE_OFFLOAD)
		mover_sample_device();
	if (ebb_trace_on())
		ebb_trace_write_iteration(ebb_now_ns(), engine.iter_count, seq, period);
}

/* Learning just ended: remember how many handles the mover had made, so the
 * summary can tell the steady state's own, and say what CUPTI does now
 * (CUPTI_*, engine_int.h): in offload mode it is paused, to record again
 * at a departure (the iteration is planned again, with GPU times); in
 * observe mode nothing more is timed, and it is finalised, since even
 * paused it slows every launch, which a launch-bound job feels. Caller
 * holds ebb_state_lock. */
static int
learned(uint64_t seq)
{
	struct mover_stats ms;

	__atomic_store_n(&engine.learned, 1, __ATOMIC_RELAXED);
	mover_stats(&ms);
	engine.created_at_learned = ms.handles_created;
	ebb_trace_note_u64("learned", seq);
	if (engine.conf->mode != EBB_MODE_OFFLOAD) {
		atomic_store(&engine.cupti_goal, CUPTI_GOAL_OFF);
		return CUPTI_DETACH;
	}
	engine.cupti_hold_until = seq + engine.conf->learn_launches;
	cupti_want(CUPTI_GOAL_PAUSED, CUPTI_WHY_LEARNED);
	return CUPTI_PAUSE;
}

/* Where the planning path leaves the state when planning stops for good:
 * TIMING once the iteration is found, else SEARCH. */
static enum life_state
without_planning(enum life_state next)
{
	engine.plan_on = 0;
	return next == LIFE_SEARCH ? LIFE_SEARCH : LIFE_TIMING;
}

/* The level of a learning stage's line: EBB_LOG_NOTE the first time the
 * process reaches stage (one line each at EBB_VERBOSE=1), EBB_LOG_INFO after
 * (when the job departs and ebb learns again). */
static int
stage_level(unsigned stage)
{
	int first = (engine.stages_said & stage) == 0;

	engine.stages_said |= stage;
	return first ? EBB_LOG_NOTE : EBB_LOG_INFO;
}

/* Set the state (site_now reads it without the lock). */
static void
life_set(enum life_state s)
{
	__atomic_store_n(&engine.life, s, __ATOMIC_RELAXED);
	int host = s == LIFE_RECORDING || s == LIFE_PACING;	/* host times taken */

	/* a departure from a running plan may be a detour the job comes back from */
	engine.finder.detour_ok = s == LIFE_RUNNING;
	__atomic_store_n(&engine.self.recording, host, __ATOMIC_RELAXED);
	__atomic_store_n(&engine.self.timing, engine.conf->self_time || host, __ATOMIC_RELAXED);
}

/*
 * The job departed from the plan or its recording at operation seq, for
 * why: stop the plan, drop the recording, count the departure, and go to
 * next (ARMED: record the next iteration; SEARCH: find the iteration
 * again). After LIFE_MAX_DEPARTURES ebb stops planning and says so. A plan
 * being made (PLANNING) is dropped when it is done. Caller holds
 * ebb_state_lock.
 */
static void
depart(uint64_t seq, const char *why, enum life_state next)
{
	static int said;
	char buf[256];

	snprintf(buf, sizeof buf, "seq=%llu:%s", (unsigned long long)seq, why);
	ebb_trace_note("plan-departed", buf);
	if (engine.life == LIFE_RUNNING && engine.finder.detour) {
		exec_run_park(seq);
		ebb_log(EBB_LOG_INFO, "operation %llu departs from the planned iteration (%s); the "
		    "plan stops, and runs again if the job comes back to the iteration, else the "
		    "iteration is learned again", (unsigned long long)seq, why);
	} else if (engine.life == LIFE_RUNNING || engine.life == LIFE_READY) {
		exec_run_stop(seq);
		ebb_log(EBB_LOG_INFO, "operation %llu departs from the planned iteration (%s); the "
		    "plan stops and the iteration is learned again", (unsigned long long)seq, why);
	}
	if (engine.life == LIFE_RECORDING || engine.life == LIFE_PROBING ||
	    engine.life == LIFE_PACING || engine.life == LIFE_RECORDED)
		exec_record_drop();
	engine.dep.n++;
	if (engine.dep.n - engine.dep.resumes - engine.dep.lowerings - engine.dep.raisings >=
	    LIFE_MAX_DEPARTURES) {
		if (!said)
			ebb_log(EBB_LOG_WARN, "the job departed from its learned iteration %llu times (last "
			    "at operation %llu: %s); ebb stops planning and moves buffers only when over "
			    "EBB_LIMIT", (unsigned long long)engine.dep.n, (unsigned long long)seq,
			    why);
		said = 1;
		life_set(without_planning(next));
		return;
	}
	life_set(next);
}

/* The finder (or EBB_ITER_KERNEL's marks) found the iteration: record it
 * where a plan is to be made, else time it. Caller holds ebb_state_lock. */
static void
found(void)
{
	if (engine.life == LIFE_SEARCH)
		life_set(engine.plan_on ? LIFE_ARMED : LIFE_TIMING);
}

/*
 * Operation seq ends a whole iteration of the one the job departed from
 * (a detour, iter.h), and the finder follows it again: the parked plan
 * runs from the next iteration start, learning is over again where it was
 * at the departure, and CUPTI, recording again since, is paused again. With
 * planning turned off at the departure (LIFE_MAX_DEPARTURES), or no parked
 * plan, the iteration is found anew. Returns what CUPTI should do. Caller
 * holds ebb_state_lock.
 */
static int
resumed(uint64_t seq)
{
	engine.stats.period = engine.stats.period_last = iter_period(&engine.finder);
	if (engine.life != LIFE_SEARCH || !engine.plan_on || exec_run_unpark() < 0) {
		exec_run_stop(seq);	/* a parked plan that will not run again */
		found();
		return CUPTI_KEEP;
	}
	engine.dep.resumes++;
	ebb_trace_note_u64("plan-resumed", seq);
	ebb_log(EBB_LOG_INFO, "operation %llu ends an iteration like the planned one: the plan "
	    "runs again from the next", (unsigned long long)seq);
	life_set(LIFE_READY);
	if (!engine.detour_learned)
		return CUPTI_KEEP;
	__atomic_store_n(&engine.learned, 1, __ATOMIC_RELAXED);
	if (atomic_load(&engine.cupti_goal) != CUPTI_GOAL_RECORD)
		return CUPTI_KEEP;
	cupti_want(CUPTI_GOAL_PAUSED, CUPTI_WHY_DEPARTURE);
	return CUPTI_PAUSE;
}

/*
 * The recording (and its probe) is done, and the iteration of period
 * operations from next_seq is next: where CUPTI records, it is the pace
 * iteration, with CUPTI paused (not under a stream capture, which the
 * device's synchronisation before the pause would end); else the recording
 * waits for its plan. Returns what CUPTI should do (CUPTI_*). Caller holds
 * ebb_state_lock.
 */
static int
recorded(uint64_t next_seq, uint64_t period)
{
	if (ebb_cupti_attached() && engine.capturing == 0 &&
	    exec_pace_begin(next_seq, period) == 0) {
		life_set(LIFE_PACING);
		cupti_want(CUPTI_GOAL_PAUSED, CUPTI_WHY_PACE);
		return CUPTI_PAUSE;
	}
	life_set(LIFE_RECORDED);
	return CUPTI_KEEP;
}

/*
 * Whether the running plan is to be made again with a lower target, at the
 * start of an iteration: in the one before and in the one before that (not
 * the plan's first, where the mover's buffers are still where the recording
 * left them), the mover evicted buffers the plan keeps for room, where the
 * arena's chunks held more than their buffers (units free between them, or
 * freed and not yet passed by the device), which the plan does not count.
 * (One such iteration alone is the plan settling: the zoo's jobs at 0.6
 * evict so in its first iteration and one to four buffers in its second,
 * then none where the arena stays on.) The target goes down by the most
 * they held beyond them in the last one (exec_plan_lower), and the next
 * iteration is recorded; at most LIFE_MAX_LOWERINGS times: returns 1, why saying so.
 * Where the target so lowered would be under the plan's bound (however
 * many lowerings there were), the arena is turned off instead; where
 * earlier lowerings are in the target, they go (exec_plan_unlower) and the
 * next iteration is recorded: returns 2, why saying so; else the plan
 * stays (0). Caller holds ebb_state_lock.
 */
static int
lower_due(char *why, size_t len)
{
	uint64_t excess = mover_take_excess();	/* since the last iteration start */
	struct mover_arena_stats as;
	struct exec_stats xs;

	mover_arena_stats(&as);
	if (exec_run_iterations() < 2 || excess == 0)
		engine.evicted_iters = 0;
	else
		engine.evicted_iters++;
	if (engine.evicted_iters < LIFE_EVICTED_ITERS || as.off)
		return 0;
	exec_stats(&xs);
	if (xs.target_bytes < xs.bound_bytes + excess) {
		/* lower would be under the plan's lowest peak without stalls,
		 * where every byte more that the plan moves costs the device a
		 * wait for the link: the arena goes instead, its chunks
		 * released as they empty, and with it what earlier lowerings
		 * took off the target (an earlier plan's, such as a
		 * micro-batch's taken for the iteration, whose bound was
		 * lower) */
		mover_arena_off("under the bound");
		uint64_t was = exec_plan_unlower();
		if (was == 0)
			return 0;
		snprintf(why, len, "the arena turned off under the plan's bound: planned %llu bytes "
		    "higher, without its lowerings", (unsigned long long)was);
		ebb_log(EBB_LOG_NOTE, "plan: %s", why);
		return 2;
	}
	if (engine.dep.lowerings >= LIFE_MAX_LOWERINGS)
		return 0;
	uint64_t total = exec_plan_lower(excess);
	snprintf(why, len, "kept buffers evicted where the arena held %llu bytes beyond its "
	    "buffers: planned %llu bytes lower", (unsigned long long)excess,
	    (unsigned long long)total);
	ebb_log(EBB_LOG_NOTE, "plan: %s", why);
	return 1;
}

/* The iteration of period operations starts with operation next_seq:
 * start or end the recording or the pace iteration, start the plan, or
 * follow the running one. Returns what CUPTI should do (CUPTI_*). Caller
 * holds ebb_state_lock. */
static int
boundary(uint64_t next_seq, uint64_t period)
{
	char why[192];
	int cupti = CUPTI_KEEP;

	switch (engine.life) {
	case LIFE_ARMED:
		if (exec_record_begin(next_seq, period) == 0)
			life_set(LIFE_RECORDING);
		else
			life_set(without_planning(LIFE_ARMED));
		break;
	case LIFE_RECORDING:
		exec_record_end(engine_recorded_so_far());
		/* its write sets: the next iteration is probed (no capture runs: the
		 * probe takes device memory and loads a module) */
		if (engine.conf->recompute && engine.capturing == 0 && probe_begin(next_seq, &engine.tab) == 0)
			life_set(LIFE_PROBING);
		else
			cupti = recorded(next_seq, period);
		break;
	case LIFE_PROBING:
		probe_end();
		cupti = recorded(next_seq, period);
		break;
	case LIFE_PACING:
		exec_pace_end(engine_recorded_so_far());
		life_set(LIFE_RECORDED);
		/* CUPTI records again, as it did before the pace (a departure since
		 * has asked for that already) */
		if (atomic_load(&engine.cupti_goal) == CUPTI_GOAL_PAUSED) {
			cupti_want(CUPTI_GOAL_RECORD, CUPTI_WHY_PACE);
			cupti = CUPTI_RESUME;
		}
		break;
	case LIFE_READY:
		life_set(LIFE_RUNNING);
		ebb_log(stage_level(STAGE_RUNNING), "plan running from operation %llu",
		    (unsigned long long)next_seq);
		/* fall through */
	case LIFE_RUNNING:
		/* the ready plan (the first, or the one with recomputes) starts */
		exec_run_start(next_seq);
		if (exec_run_boundary(next_seq, period, why, sizeof why) < 0) {
			depart(next_seq, why, LIFE_ARMED);
			break;
		}
		summary_run_mark(exec_run_iterations());
		int lower = lower_due(why, sizeof why);
		if (lower != 0) {
			if (lower == 1)
				engine.dep.lowerings++;
			else
				engine.dep.raisings++;
			depart(next_seq, why, LIFE_ARMED);
			break;
		}
		if (exec_replan_due())
			engine.replan_due = REPLAN_DUE;	/* its candidates are verified */
		break;
	default:
		break;
	}
	return cupti;
}

/* Whether planning lets learning end: there is none, or the plan has run
 * two whole iterations. (A micro-batch taken for the iteration runs one or
 * two before the optimizer step departs from it; CUPTI is still there for
 * the iteration learned then.) */
static int
plan_settled(void)
{
	return !engine.plan_on || engine.life == LIFE_SEARCH ||
	    (engine.life == LIFE_RUNNING && exec_run_iterations() >= 2);
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
 * ebb_state_lock.
 */
int
life_step(uint64_t seq, uint32_t token, int sync, const struct ebb_kinfo *k)
{
	int cupti_action = CUPTI_KEEP;

	/* the hold ends (EBB_LEARN_LAUNCHES operations since learning, or
	 * EBB_CUPTI_HOLD whole iterations of a plan with no plan to come after
	 * it): CUPTI is finalised, and the operation still goes to the finder
	 * below (one it missed would read as a departure) */
	if (engine.cupti_hold_until != 0 && engine.learned &&
	    (seq >= engine.cupti_hold_until || (engine.conf->cupti_hold > 0 &&
	    engine.life == LIFE_RUNNING && !exec_replan_pending() &&
	    __atomic_load_n(&engine.replan_due, __ATOMIC_RELAXED) == REPLAN_NONE &&
	    exec_run_iterations() >= engine.conf->cupti_hold))) {
		engine.cupti_hold_until = 0;
		atomic_store(&engine.cupti_goal, CUPTI_GOAL_OFF);
		cupti_action = CUPTI_DETACH;
	}
	if (engine.conf->iter_kernel[0] != '\0') {
		if (k == NULL || !k->iter_mark)
			return cupti_action;
		uint64_t period = engine.mark_period_start ? seq - engine.mark_period_start : 0;
		engine.mark_period_start = seq;
		engine.stats.period = period;
		trace_iteration(seq, period);
		if (period > 0) {
			engine.stats.period_last = period;
			found();
			int a = boundary(seq + 1, period);
			if (a != CUPTI_KEEP)
				cupti_action = a;
		}
		if (!engine.learned && engine.iter_count > engine.conf->learn_iters &&
		    plan_settled()) {
			cupti_action = learned(seq);
		}
		return cupti_action;
	}
	if (!engine.finder_ok || engine.life == LIFE_GAVE_UP)
		return cupti_action;
	enum iter_event e = iter_push(&engine.finder, token, sync, engine.tab.bytes);
	switch (e) {
	case ITER_NONE:
		break;
	case ITER_FOUND: {
		uint64_t p = iter_period(&engine.finder);
		engine.stats.period = engine.stats.period_last = p;
		/* Token i (from 0) is operation i + 1. */
		for (uint64_t i = 0; i <= engine.finder.found_complete; i++) {
			uint64_t s = engine.finder.found_first + 1 + i * p;
			if (s <= seq && s > engine.last_iter_seq)
				trace_iteration(s, p);
		}
		engine.iters_timed = engine.finder.found_complete;
		exec_run_stop(seq);	/* a plan parked at a departure (nothing else runs) */
		found();
		ebb_log(stage_level(STAGE_FOUND), "iteration found: %llu operations; recording it "
		    "next", (unsigned long long)p);
		break;
	}
	case ITER_START:
		trace_iteration(seq, iter_period(&engine.finder));
		engine.iters_timed++;
		break;
	case ITER_DEPARTED: {
		if (ebb_trace_on())
			ebb_trace_write_departure(ebb_now_ns(), seq, engine.stats.period, token);
		ebb_log(EBB_LOG_INFO, "operation %llu departs from the learned iteration; learning again",
		    (unsigned long long)seq);
		engine.stats.period = 0;
		engine.detour_learned = engine.learned;
		__atomic_store_n(&engine.learned, 0, __ATOMIC_RELAXED);
		if (engine.life >= LIFE_ARMED && engine.life <= LIFE_RUNNING)
			depart(seq, "another operation than the learned iteration's", LIFE_SEARCH);
		else if (engine.life != LIFE_GAVE_UP)
			life_set(LIFE_SEARCH);
		if (atomic_load(&engine.cupti_goal) == CUPTI_GOAL_PAUSED) {
			cupti_want(CUPTI_GOAL_RECORD, CUPTI_WHY_DEPARTURE);
			cupti_action = CUPTI_RESUME;
		}
		break;
	}
	case ITER_RESUMED:
		cupti_action = resumed(seq);
		break;
	case ITER_GAVE_UP:
		exec_run_stop(seq);
		ebb_log(EBB_LOG_WARN, "no repeating iteration found in %llu operations "
		    "(EBB_LEARN_LAUNCHES); set EBB_ITER_KERNEL to the name of the kernel that starts "
		    "an iteration", (unsigned long long)engine.conf->learn_launches);
		life_set(LIFE_GAVE_UP);
		atomic_store(&engine.cupti_goal, CUPTI_GOAL_OFF);
		cupti_action = CUPTI_DETACH;
		break;
	}
	/* the next token starts an iteration */
	if (engine.finder.period != 0 && engine.finder.pos == 0) {
		int a = boundary(seq + 1, engine.finder.period);
		if (a != CUPTI_KEEP)
			cupti_action = a;
	}
	if (!engine.learned && engine.life != LIFE_SEARCH && engine.life != LIFE_GAVE_UP &&
	    engine.iters_timed >= engine.conf->learn_iters && period_confirmed() &&
	    plan_settled()) {
		cupti_action = learned(seq);
	}
	return cupti_action;
}

/* After a life_step that changed cupti_goal, with ebb_state_lock released:
 * make CUPTI what the goal now is (paused, recording or finalised), and put
 * the learning iterations' records on disk. */
void
life_cupti_act(int action)
{
	if (action == CUPTI_KEEP)
		return;
	pthread_mutex_lock(&cupti_lock);
	switch (atomic_load(&engine.cupti_goal)) {
	case CUPTI_GOAL_PAUSED:
		if (ebb_cupti_attached())
			cupti_pause(atomic_load(&engine.cupti_why));
		break;
	case CUPTI_GOAL_RECORD:
		if (ebb_cupti_paused())
			cupti_resume(atomic_load(&engine.cupti_why));
		break;
	default:
		if (ebb_cupti_attached() || ebb_cupti_paused())
			life_cupti_stop(engine.life == LIFE_GAVE_UP ? "gave-up" :
			    ebb_cupti_paused() ? "held" : "learned");
		break;
	}
	pthread_mutex_unlock(&cupti_lock);
	if (action != CUPTI_RESUME)
		ebb_trace_flush();
}

/* ---- allocation ---- */

void
life_alloc(struct ebb_buf *b, uint64_t next_seq)
{
	char why[128];

	if (engine.life == LIFE_PROBING)
		probe_span(b);	/* its address is one a table of pointers may hold */
	if (exec_alloc(b, next_seq, why, sizeof why) < 0)
		depart(next_seq, why, LIFE_ARMED);
}

/* ---- planning ---- */

/* Make the plan of the recorded iteration: the recording leaves under
 * ebb_state_lock, the plan is made without it (the job goes on under the
 * mover meanwhile), and is installed under it unless the job departed
 * meanwhile. One at a time (planning). Called without ebb_state_lock. */
static void
plan_recorded(void)
{
	pthread_mutex_lock(&planning);
	pthread_mutex_lock(&ebb_state_lock);
	if (engine.life != LIFE_RECORDED) {
		pthread_mutex_unlock(&ebb_state_lock);
		pthread_mutex_unlock(&planning);
		return;
	}
	life_set(LIFE_PLANNING);
	struct exec_recorded *r = exec_record_take();
	pthread_mutex_unlock(&ebb_state_lock);

	struct exec_made *m = r != NULL ? exec_plan_make(r) : NULL;

	pthread_mutex_lock(&ebb_state_lock);
	if (engine.life == LIFE_PLANNING) {
		if (m == NULL)
			ebb_log(EBB_LOG_WARN, "ebb could not plan the iteration (out of memory); buffers "
			    "move only when over EBB_LIMIT");
		if (m != NULL && exec_plan_install(m) == 0)
			life_set(LIFE_READY);
		else
			life_set(without_planning(LIFE_TIMING));
	}
	pthread_mutex_unlock(&ebb_state_lock);
	exec_made_free(m);
	pthread_mutex_unlock(&planning);
}

/* Make the plan with recomputes once the running plan's candidates are
 * verified: made without ebb_state_lock while the first plan runs, and made
 * ready (it starts at the next iteration) unless the job departed
 * meanwhile. One at a time (planning). Called without ebb_state_lock. */
static void
replan(void)
{
	uint8_t *ok = NULL;

	pthread_mutex_lock(&planning);
	pthread_mutex_lock(&ebb_state_lock);
	struct exec_made *m = engine.replan_due == REPLAN_STARTED && engine.life == LIFE_RUNNING ?
	    exec_replan_take(&ok) : NULL;
	engine.replan_due = REPLAN_NONE;
	uint64_t departures = engine.dep.n;
	pthread_mutex_unlock(&ebb_state_lock);

	struct exec_remade *r = m != NULL ? exec_replan_make(m, ok) : NULL;
	if (m != NULL && r == NULL)
		exec_made_free(m);

	pthread_mutex_lock(&ebb_state_lock);
	if (r != NULL && engine.life == LIFE_RUNNING && engine.dep.n == departures)
		exec_replan_install(r);
	pthread_mutex_unlock(&ebb_state_lock);
	exec_remade_free(r);
	free(ok);
	pthread_mutex_unlock(&planning);
}

/* The thread a plan is made on (life_plan_now): the recorded iteration's, or
 * the one with recomputes. */
static void *
planner_main(void *arg)
{
	ebb_inside = 1;		/* nothing this thread calls is the job's */
	if (arg != NULL)
		replan();
	else
		plan_recorded();
	return NULL;
}

/* Plan the recorded iteration, with CUPTI's times for it (CUPTI stays
 * attached until the plan has run two whole iterations: a plan that departs
 * at once, say of a micro-batch taken for the iteration, is learned again
 * with GPU times). Called without ebb_state_lock. */
void
life_plan_now(void)
{
	static char replanning;	/* planner_main's argument for replan */
	int due = REPLAN_DUE;
	/* one thread for it, however many operations see it due */
	int again = __atomic_compare_exchange_n(&engine.replan_due, &due, REPLAN_STARTED, 0,
	    __ATOMIC_RELAXED, __ATOMIC_RELAXED);
	int cupti = !again && ebb_cupti_attached();
	if (cupti || (!again && probe_pending())) {
		/* every activity of the recorded iteration has finished (once a plan),
		 * and every hash of the probed one */
		ebb_inside = 1;
		ebb_real.cuCtxSynchronize();
		if (cupti)
			ebb_cupti_flush();
		ebb_inside = 0;
		probe_read();
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
		r = pthread_create(&t, &a, planner_main, again ? &replanning : NULL);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		pthread_attr_destroy(&a);
	}
	if (r != 0 && again)
		replan();	/* no thread: plan here */
	else if (r != 0)
		plan_recorded();
}

/* In the child of a fork (ebb_state_lock held): no plan is being made
 * there, since the planner's thread is not. */
void
life_atfork_child(void)
{
	pthread_mutex_init(&planning, NULL);
	engine.replan_due = REPLAN_NONE;	/* its thread, if any, is not here either */
	if (engine.life == LIFE_PLANNING)
		life_set(without_planning(LIFE_TIMING));
}
