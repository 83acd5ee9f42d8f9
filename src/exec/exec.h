/*
 * exec.h: the executor: recording an iteration, making its plan, and
 * carrying the plan out (EBB_MODE=offload with EBB_PLAN=1).
 *
 * The executor takes orders; the lifecycle's owner (src/engine/life.c)
 * decides when to record, plan, start, stop and learn again:
 *   exec_record_begin .. exec_record_end  record one iteration: every
 *              movable buffer alive at its start, every allocation, use and
 *              free in it, and each operation's host and GPU time
 *   exec_record_take, exec_plan_make, exec_plan_install  plan it: the
 *              recording leaves under the state lock, the plan is made
 *              without it, and is installed under it again
 *   exec_run_start .. exec_run_stop  run it: after each operation, the
 *              plan's offloads and restores for that position are issued
 * Allocations of another size than the recording's, or an iteration of
 * another length, are reported to the owner as departures; the mover's
 * fault path keeps the job correct whatever the executor does.
 *
 * Operations are named by the engine's sequence numbers; position i of an
 * iteration that starts at s0 is operation s0 + i. Every function is
 * called with ebb_state_lock held (locks.h), except exec_gpu_time (any
 * thread, its own lock) and exec_plan_make (no lock, one call at a time).
 */
#ifndef EBB_EXEC_H
#define EBB_EXEC_H

#include <stddef.h>
#include <stdint.h>

#include "buftab.h"
#include "replay.h"
#include "streams.h"

struct ebb_conf;
struct ebb_kinfo;
struct ebb_launch;
struct lrec;

/* A recorded iteration taken out for planning (exec_record_take). */
struct exec_recorded;

/* A plan made of it, or why none was (exec_plan_make). */
struct exec_made;

void exec_init(const struct ebb_conf *conf, struct buftab *tab);

/* ---- recording ---- */

/* Record the iteration of period operations that starts with operation
 * s0. Returns 0, or -1 when it cannot be recorded (said: ebb does not
 * plan). */
int exec_record_begin(uint64_t s0, uint64_t period);

/* The recorded iteration ended: its last operation was issued (self_ns as
 * exec_op's). */
void exec_record_end(uint64_t self_ns);

/* Forget the recording, open or ended (a departure), and its pace
 * iteration. */
void exec_record_drop(void);

/* Take the job's host pace from the iteration of the recording's length
 * that starts with operation s0 (the recording has ended; CUPTI is paused
 * for it, so that the cost its records add inside the driver's calls is not
 * counted as the job's): each operation's issue, ebb's time and the
 * driver's call, as the recording takes them. Returns 0, or -1 when there
 * is no ended recording of that length or no memory (the recording's own
 * pace stays). */
int exec_pace_begin(uint64_t s0, uint64_t period);

/* The pace iteration ended (self_ns as exec_op's): where its operations
 * were the recording's, position by position, its host times replace the
 * recording's. */
void exec_pace_end(uint64_t self_ns);

/* The engine allocated b (served by the mover) before operation next_seq:
 * recorded, or matched to the running plan's allocation of that ordinal.
 * Returns 0, or -1 with why filled when the allocation departs from the
 * plan's. */
int exec_alloc(struct ebb_buf *b, uint64_t next_seq, char *why, size_t len);

/* The job freed b after operation last_seq. */
void exec_free(struct ebb_buf *b, uint64_t last_seq);

/* Operation seq (token: its identity for the finder) used bufs; xfer: the
 * copy engine it uses, when it is a copy between host and device (PROF_XFER_*);
 * sync: the host waits until the device has done it (a synchronisation, a
 * synchronous copy); st: its stream (NULL: none); self_ns: the host time in
 * ebb's part of the job's calls so far while recording (the engine's sum),
 * which the job's host pace leaves out. */
void exec_op(uint64_t seq, uint32_t token, struct ebb_buf *const *bufs, size_t n,
    unsigned xfer, int sync, struct ebb_stream *st, uint64_t self_ns);

/* Operation seq, given next to exec_op, is a pipeline stage marker (an NCCL
 * send, or receive if not send, to a stage beside this rank: phase.h): while
 * recording, the phases it cuts go into the profile the plan is made of. */
void exec_stage(uint64_t seq, int send);

/* The driver's call of operation seq took call_ns (while recording, or
 * taking the pace). */
void exec_op_called(uint64_t seq, uint64_t call_ns);

/* Operation seq, a synchronisation, was called at called (ebb_now_ns) and
 * waited in the driver until now (while recording, or taking the pace): it counts as issued at
 * the call, and the wait as its call's time, so that the wait falls in its
 * own gap, which the job's host pace leaves out (prof_host_pace), not in the
 * gap of the operation before it. */
void exec_sync_called(uint64_t seq, uint64_t called);

/* Operation seq is the launch l (k: its kernel's layout, NULL when none is
 * known; stream and per_thread as the call named it, tracker ebb's tracker
 * of it; captured: a stream capture takes it into a graph): while an
 * iteration is recorded, its launch record (lrec.h) is made. */
void exec_launch(uint64_t seq, const struct ebb_launch *l, const struct ebb_kinfo *k,
    CUstream stream, int per_thread, struct ebb_stream *tracker, int captured);

/* GPU times of operation seq (CUPTI clock, ns). Any thread; takes its own
 * lock. */
void exec_gpu_time(uint64_t seq, uint64_t start, uint64_t end);

/* ---- planning ---- */

/* Take the ended recording out, with the mover's state the plan depends
 * on (its fixed bytes, EBB_LIMIT, what a move costs the host). Returns it,
 * or NULL when there is none or no memory (the recording is dropped). */
struct exec_recorded *exec_record_take(void);

/* The launch record of position i of the recorded iteration r (lrec.h), or
 * NULL when no launch is recorded there. A launch past
 * EBB_LAUNCH_RECORD_BYTES has a record of state LREC_UNRECORDED. */
const struct lrec *exec_recorded_launch(const struct exec_recorded *r, uint64_t i);

/* Plan r, which it frees. Called without ebb_state_lock, one call at a
 * time (the per-token times are the planner's). Returns the result (NULL:
 * no memory), a plan or why there is none. */
struct exec_made *exec_plan_make(struct exec_recorded *r);

/* Install m's plan to start at the next iteration's start, and say what it
 * does and costs (trace notes, log lines). Returns 0, or -1 when m holds
 * no plan (said, with why). */
int exec_plan_install(struct exec_made *m);

/* Free m (after exec_plan_install, or instead of it); one the executor
 * kept for its recompute plan stays (exec_kept_drop frees it). */
void exec_made_free(struct exec_made *m);

/*
 * The plan with recomputes (EBB_RECOMPUTE), made once the first plan's
 * candidates are verified. exec_replan_pending: a plan is kept for it
 * (its candidates are being verified). exec_replan_due: the verification
 * is done and a plan was kept for it (the lifecycle owner then has it made).
 * exec_replan_take: that plan (NULL: none), with each candidate's result
 * in *ok (malloc'd; the caller frees it); the executor forgets both.
 * exec_replan_make (without ebb_state_lock): the plan with the verified
 * gaps recomputed where that is better than moving alone (NULL: out of
 * memory; it takes m). exec_replan_install: it becomes the ready plan, which
 * exec_run_start starts at the next iteration (0), or there is none better
 * (-1, said). exec_remade_free frees it, and m with it. exec_kept_drop: the
 * kept plan and the verification are dropped (the plan stops).
 */
struct exec_remade;
int exec_replan_pending(void);
int exec_replan_due(void);
struct exec_made *exec_replan_take(uint8_t **ok);
struct exec_remade *exec_replan_make(struct exec_made *m, const uint8_t *ok);
int exec_replan_install(struct exec_remade *r);
void exec_remade_free(struct exec_remade *r);
void exec_kept_drop(void);

/* ---- running ---- */

/* Start the installed plan with the iteration that starts at next_seq. */
void exec_run_start(uint64_t next_seq);

/* An iteration of period operations starts with operation next_seq while
 * the plan runs. Returns 0, or -1 with why filled when its length is not
 * the plan's. */
int exec_run_boundary(uint64_t next_seq, uint64_t period, char *why, size_t len);

/*
 * The plans made from now on aim bytes lower than before: what ebb held
 * beyond the running plan's peak, the arena's chunks beyond their buffers,
 * made the mover evict what the plan keeps. Returns the total lowering,
 * which holds for iterations of the running plan's length.
 */
uint64_t exec_plan_lower(uint64_t bytes);

/* The plans made from now on aim at the target again, without the
 * lowerings (the arena that made them is off, or the iteration they were
 * measured in is no longer the one planned; exec_record_begin does that):
 * noted as plan-target-raised-bytes where there were any. Returns what they
 * were. */
uint64_t exec_plan_unlower(void);

/* Stop the running plan and drop an installed one (and a parked one). */
void exec_run_stop(uint64_t seq);

/*
 * The job departed from the running plan's iteration at operation seq, and
 * may come back to it (a detour, iter.h): stop the plan as exec_run_stop
 * does, but keep it parked. exec_run_unpark: the job is back; the parked
 * plan is installed, to start at the next iteration (0), or there is none
 * (-1).
 */
void exec_run_park(uint64_t seq);
int exec_run_unpark(void);

/* Operation seq (l: the launch it is, NULL: another operation) is about to
 * be handed to the driver on stream st while the plan runs: the recompute
 * candidates to verify there are replayed before it (verify.h). */
void exec_before_op(uint64_t seq, struct ebb_stream *st, const struct ebb_launch *l);

/* Operation seq on stream st, using bufs, is about to have its buffers made
 * resident (l: the launch it is, NULL: another operation), while the plan
 * runs: what its recomputes take of it, and remakes it needs first
 * (remake.h). Returns CUDA_SUCCESS, or the error the operation fails
 * with. */
CUresult exec_check_op(uint64_t seq, struct ebb_stream *st, const struct ebb_launch *l,
    struct ebb_buf *const *bufs, size_t n);

/* A stream capture is about to begin, before operation seq: nothing the plan
 * dropped stays dropped (remake.h). */
void exec_capture(uint64_t seq);

/* Whole iterations the running plan has run (0: none runs). */
uint64_t exec_run_iterations(void);

/* Operation seq was handed to the driver on stream st (NULL: a
 * synchronisation): issue what the running plan does after it. May
 * release ebb_state_lock while the host waits for an offload to land.
 * Returns 1 when it moved buffers (or tried to), else 0. */
int exec_after_op(uint64_t seq, struct ebb_stream *st);

struct exec_stats {
	uint64_t plans;		/* plans made */
	uint64_t recordings;	/* iterations recorded for a plan */
	uint64_t iterations_run;	/* iterations started under a plan */
	uint64_t actions_missed;	/* a planned buffer was not there */
	uint64_t planned_peak;	/* bytes, of the last plan */
	uint64_t predicted_step_ns;
	uint64_t unmoved_step_ns;	/* the last plan's iteration predicted with nothing
					 * moved (the job's own pace and GPU times) */
	uint64_t target_bytes;	/* the last plan's target */
	uint64_t bound_bytes;	/* the last plan's lowest peak without stalls */
	/* the launch records of the last iteration recorded (lrec.h) */
	uint64_t launch_records;	/* launches recorded, replayable or not */
	uint64_t launch_records_unreplayable;	/* of them, not replayable */
	uint64_t launch_records_unrecorded;	/* launches past EBB_LAUNCH_RECORD_BYTES */
	uint64_t launch_record_param_bytes;	/* parameter bytes they copied */
	uint64_t launch_record_bytes;	/* memory they held */
	/* EBB_RECOMPUTE: the write sets of the last iteration probed (probe.h) */
	uint64_t write_set_launches;	/* launches measured */
	uint64_t write_set_unmeasured;	/* launches that could not be */
	uint64_t write_set_refs;	/* buffer references measured */
	uint64_t write_set_written;	/* of them, written by their launch */
	uint64_t probe_hashes;		/* hash kernels the probe launched */
	uint64_t probe_bytes;		/* bytes they hashed */
	uint64_t replayable_launches;	/* launches that can be launched again */
	uint64_t write_set_pointers;	/* references to buffers holding pointers */
	uint64_t write_set_chance;	/* references of measured launches the recorded
					 * ones did not have, left unchanged */
	uint64_t write_set_loose;	/* launches hashed for pointers only */
	uint64_t wild_launches;		/* launches that may write what they do not
					 * reference (not measured, or reading pointers) */
	/* EBB_RECOMPUTE: the gaps of the last plan's iteration that a replay of
	 * their buffer's producers could bridge (replay.h) */
	uint64_t replay_considered;	/* gaps looked at */
	uint64_t replay_gaps;		/* of them, candidates */
	uint64_t replay_extended;	/* of those, with a chain widened by the
					 * producers of freed inputs */
	uint64_t replay_buffers;	/* buffers with a candidate gap */
	uint64_t replay_bytes;		/* their bytes */
	struct replay_refused replay_refused;	/* why the other gaps are not */
	/* of the candidates, replayed once in the first planned iteration */
	uint64_t replay_tried, replay_verified, replay_failed, replay_skipped;
	/* of those skipped, by why (struct verify_stats) */
	uint64_t replay_skipped_unfit, replay_skipped_passed, replay_skipped_stream,
	    replay_skipped_buffers, replay_skipped_resident, replay_skipped_launch,
	    replay_skipped_memory;
	/* EBB_RECOMPUTE: the plan with recomputes (remake.h) */
	uint64_t recompute_gaps;	/* gaps it recomputes */
	uint64_t recompute_bytes;	/* their bytes */
	uint64_t recompute_ns;		/* its replays' GPU time an iteration, predicted */
	uint64_t recompute_kept_busy, recompute_kept_args, recompute_kept_inputs,
	    recompute_kept_mover;
	uint64_t recompute_drops, recompute_remakes, recompute_early, recompute_kept,
	    recompute_failed;		/* what it did (struct remake_stats) */
};

void exec_stats(struct exec_stats *out);

#endif
