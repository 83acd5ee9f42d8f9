/*
 * summary.c: the engine's statistics and the exit summary: Z records in the
 * trace, exit lines at EBB_VERBOSE>=1, and a note for ebb run where
 * EBB_LIMIT was not held.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "conf.h"
#include "engine.h"
#include "engine_int.h"
#include "exec.h"
#include "log.h"
#include "mover.h"
#include "phase.h"
#include "trace.h"
#include "vmm.h"

/* The engine's counters, with the buffers live now (engine.h). */
void
ebb_engine_stats(struct ebb_engine_stats *out)
{
	pthread_mutex_lock(&ebb_state_lock);
	*out = engine.stats;
	out->buffers_live = engine.tab.count;
	out->bytes_live = engine.tab.bytes;
	pthread_mutex_unlock(&ebb_state_lock);
}

/* Count an NCCL call, and note the pipeline stage its send or receive to
 * a rank beside the caller's marks (the headline names it). Under
 * ebb_state_lock. */
void
summary_nccl(const struct ebb_op *op)
{
	engine.stats.nccl_calls++;
	if ((op->nccl_op == EBB_NCCL_SEND || op->nccl_op == EBB_NCCL_RECV) &&
	    phase_marker(op->nccl_rank, op->nccl_nranks, op->nccl_peer)) {
		engine.stats.stage_rank = op->nccl_rank;
		engine.stats.stage_nranks = op->nccl_nranks;
		exec_stage(op->seq, op->nccl_op == EBB_NCCL_SEND);
	}
}

/* Human-readable bytes for the summary. */
static const char *
human(uint64_t b, char *buf, size_t len)
{
	if (b >= (1ULL << 30))
		snprintf(buf, len, "%.1f GiB", (double)b / (double)(1ULL << 30));
	else if (b >= (1ULL << 20))
		snprintf(buf, len, "%.1f MiB", (double)b / (double)(1ULL << 20));
	else
		snprintf(buf, len, "%llu bytes", (unsigned long long)b);
	return buf;
}

/* Write the Z record of one summary key. */
static void
summary_record(const char *key, uint64_t v)
{
	ebb_trace_write_summary(ebb_now_ns(), key, v);
}

/*
 * Tell ebb run (EBB_STATUS_DIR) that EBB_LIMIT was not held here: one file
 * named by the process id, holding the reason; ebb run then exits with a
 * status of its own where the job's was 0.
 */
static void
report_unheld(const char *why)
{
	char path[EBB_CONF_PATH_MAX + 32];

	if (engine.conf->status_dir[0] == '\0')
		return;
	snprintf(path, sizeof path, "%s/%d", engine.conf->status_dir, (int)getpid());
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		ebb_log(EBB_LOG_WARN, "cannot write %s (EBB_STATUS_DIR): %s", path, strerror(errno));
		return;
	}
	size_t n = strlen(why);
	if (write(fd, why, n) != (ssize_t)n || write(fd, "\n", 1) != 1)
		ebb_log(EBB_LOG_WARN, "cannot write %s (EBB_STATUS_DIR): %s", path, strerror(errno));
	close(fd);
}

static const char *const vmm_names[VMM_NCALLS] = {
	[VMM_CREATE] = "create", [VMM_RELEASE] = "release",
	[VMM_RESERVE] = "reserve", [VMM_MAP] = "map", [VMM_UNMAP] = "unmap",
};

static const char *const self_names[SELF_KINDS] = {
	[SELF_OP] = "op", [SELF_ALLOC] = "alloc", [SELF_FREE] = "free", [SELF_SYNC] = "sync",
	[SELF_QUERY] = "query",
};

/* EBB_SELF_TIME's sums of kind, while learning (after 0) or after it:
 * host ns and calls. */
static void
self_sums(int after, enum self_kind kind, uint64_t *ns, uint64_t *calls)
{
	*ns = __atomic_load_n(&engine.self.ns[after][kind], __ATOMIC_RELAXED);
	*calls = __atomic_load_n(&engine.self.calls[after][kind], __ATOMIC_RELAXED);
}

/* One exit line of EBB_SELF_TIME's sums, while learning or after it. */
static void
self_line(int after)
{
	uint64_t ns[SELF_KINDS], calls[SELF_KINDS], all = 0;

	for (int k = 0; k < SELF_KINDS; k++) {
		self_sums(after, k, &ns[k], &calls[k]);
		all += ns[k];
	}
#define PER(k) (calls[k] ? (double)ns[k] / (double)calls[k] : 0.0)
	ebb_log(EBB_LOG_NOTE, "host time in ebb (EBB_SELF_TIME) %s: %.3f s; %llu operations, "
	    "%.0f ns each; %llu allocations, %.0f ns each; %llu frees, %.0f ns each; %llu "
	    "synchronisations, %.0f ns each; %llu pointer queries, %.0f ns each",
	    after ? "after learning" : "while learning",
	    (double)all / 1e9, (unsigned long long)calls[SELF_OP], PER(SELF_OP),
	    (unsigned long long)calls[SELF_ALLOC], PER(SELF_ALLOC),
	    (unsigned long long)calls[SELF_FREE], PER(SELF_FREE),
	    (unsigned long long)calls[SELF_SYNC], PER(SELF_SYNC),
	    (unsigned long long)calls[SELF_QUERY], PER(SELF_QUERY));
#undef PER
}

/* The counters now, for the plan's iterations (struct run_snap). */
static void
run_snap(struct run_snap *r)
{
	for (int k = 0; k < SELF_KINDS; k++)
		self_sums(1, k, &r->self_ns[k], &r->self_calls[k]);
	r->lock_wait_ns = engine.lock_wait_ns;
	r->lock_waits = engine.lock_waits;
	mover_stats(&r->ms);
	vmm_stats(&r->vs);
	r->ns = ebb_now_ns();
}

void
summary_run_mark(uint64_t iters)
{
	if (iters == 0) {
		run_snap(&engine.run_base);
		engine.run_iters = 0;
	} else {
		run_snap(&engine.run_last);
		engine.run_iters = iters;
	}
}

/* The Z records run-*: the counters' growth over the whole iterations of
 * the plan that ran last. */
static void
run_records(void)
{
	const struct run_snap *a = &engine.run_base, *b = &engine.run_last;
	char key[48];

	if (engine.run_iters == 0)
		return;
	summary_record("run-iterations", engine.run_iters);
#define RUN(name, field) summary_record("run-" name, b->field - a->field)
	RUN("lock-wait-ns", lock_wait_ns);
	RUN("lock-waits", lock_waits);
	RUN("offloads", ms.offloads);
	RUN("restores", ms.restores);
	RUN("drops", ms.drops);
	RUN("remakes", ms.remakes);
	RUN("host-remake-ns", ms.remake_ns);
	RUN("unmap-ns", ms.unmap_ns);
	RUN("unmaps", ms.unmaps_timed);
	RUN("host-wait-room-ns", ms.wait_room_ns);
	RUN("host-wait-gate-ns", ms.wait_gate_ns);
	RUN("host-wait-landing-ns", ms.wait_landing_ns);
	RUN("host-wait-drop-ns", ms.wait_drop_ns);
	RUN("handles-created", ms.handles_created);
#undef RUN
	for (int k = 0; engine.conf->self_time && k < SELF_KINDS; k++) {
		snprintf(key, sizeof key, "run-self-%s-calls", self_names[k]);
		summary_record(key, b->self_calls[k] - a->self_calls[k]);
		snprintf(key, sizeof key, "run-self-%s-ns", self_names[k]);
		summary_record(key, b->self_ns[k] - a->self_ns[k]);
	}
	for (int c = 0; c < VMM_NCALLS; c++) {
		snprintf(key, sizeof key, "run-vmm-%s-calls", vmm_names[c]);
		summary_record(key, b->vs.calls[c] - a->vs.calls[c]);
		snprintf(key, sizeof key, "run-vmm-%s-ns", vmm_names[c]);
		summary_record(key, b->vs.ns[c] - a->vs.ns[c]);
	}
}

/* EBB_SELF_TIME: ebb's own host time by kind of call, while learning and
 * after, and its setup's (self-* Z records). */
static void
self_records(void)
{
	for (int a = 0; a < 2; a++)
		for (int k = 0; k < SELF_KINDS; k++) {
			uint64_t ns, calls;
			char key[48];
			const char *when = a ? "after" : "learning";
			self_sums(a, k, &ns, &calls);
			snprintf(key, sizeof key, "self-%s-%s-calls", when, self_names[k]);
			summary_record(key, calls);
			snprintf(key, sizeof key, "self-%s-%s-ns", when, self_names[k]);
			summary_record(key, ns);
		}
	summary_record("self-setup-ns", __atomic_load_n(&engine.self.setup_ns, __ATOMIC_RELAXED));
}

/* Write the summary's Z records: the engine's counters, and in offload
 * mode the mover's, the plan's and the VMM calls'. The caller checks that
 * the trace is on. */
void
summary_records(const struct engine_totals *t)
{
	const struct ebb_engine_stats *st = &t->st;
	const struct mover_stats *ms = &t->ms;
	const struct exec_stats *xs = &t->xs;
	const struct vmm_stats *vs = &t->vs;

	summary_record("launches", st->launches);
	summary_record("launches-unresolved", st->launches_unresolved);
	summary_record("launches-without-buffer", st->launches_nobuf);
	summary_record("copies", st->copies);
	summary_record("memsets", st->memsets);
	summary_record("nccl-calls", st->nccl_calls);
	summary_record("graph-launches", st->graph_launches);
	summary_record("capture-joins", st->capture_joins);
	summary_record("allocations", st->allocs);
	summary_record("frees", st->frees);
	summary_record("frees-untracked", st->frees_untracked);
	summary_record("peak-bytes", st->bytes_peak);
	summary_record("iterations", st->iterations);
	summary_record("period", st->period);
	if (engine.conf->self_time)
		self_records();
	if (engine.conf->mode == EBB_MODE_OFFLOAD) {
		summary_record("offloads", ms->offloads);
		summary_record("restores", ms->restores);
		summary_record("restores-cancelled", ms->cancels);
		summary_record("bytes-to-host", ms->bytes_d2h);
		summary_record("bytes-to-device", ms->bytes_h2d);
		summary_record("stall-ns", ms->stall_ns);
		summary_record("refusals", ms->refusals);
		summary_record("copies-abandoned", ms->copies_abandoned);
		summary_record("unmaps-failed", ms->unmaps_failed);
		summary_record("over-limit-allocations", ms->over_limit);
		summary_record("driver-served-peak-bytes", ms->driver_served_peak);
		summary_record("held-peak-bytes", ms->held_peak);
		summary_record("device-beyond-held-bytes", ms->beyond_held);
		summary_record("device-process-peak-bytes", ms->process_peak);
		summary_record("limit-over-samples", ms->over_samples);
		summary_record("limit-over-movable", ms->over_movable);
		summary_record("allocations-past-driver-share", ms->past_driver_share);
		summary_record("host-pinned-bytes", ms->host_pinned);
		summary_record("handles-created", ms->handles_created);
		summary_record("handles-created-after-learning",
		    engine.learned ? ms->handles_created - engine.created_at_learned : 0);
		struct mover_arena_stats as;
		mover_arena_stats(&as);
		summary_record("arena-allocations", as.allocs);
		summary_record("arena-peak-bytes", as.bytes_peak);
		summary_record("arena-chunks-mapped", as.chunks_mapped);
		summary_record("arena-chunks-released", as.chunks_released);
		summary_record("arena-off", (uint64_t)as.off);
		summary_record("arena-over-limit-allocations", ms->arena_over);
		summary_record("arena-over-limit-bytes", ms->arena_over_bytes);
		summary_record("planned-evictions", ms->planned_evictions);
		summary_record("arena-excess-bytes", ms->arena_excess);
		summary_record("plans", xs->plans);
		summary_record("plan-iterations", xs->iterations_run);
		summary_record("plan-departures", t->dep.n);
		summary_record("plan-resumes", t->dep.resumes);
		summary_record("plan-lowerings", t->dep.lowerings);
		summary_record("plan-raisings", t->dep.raisings);
		summary_record("plan-actions-missed", xs->actions_missed);
		summary_record("launch-records", xs->launch_records);
		summary_record("launch-records-unreplayable", xs->launch_records_unreplayable);
		summary_record("launch-records-unrecorded", xs->launch_records_unrecorded);
		summary_record("launch-record-param-bytes", xs->launch_record_param_bytes);
		summary_record("launch-record-bytes", xs->launch_record_bytes);
		summary_record("write-set-launches", xs->write_set_launches);
		summary_record("write-set-unmeasured", xs->write_set_unmeasured);
		summary_record("write-set-refs", xs->write_set_refs);
		summary_record("write-set-written", xs->write_set_written);
		summary_record("probe-hashes", xs->probe_hashes);
		summary_record("probe-bytes", xs->probe_bytes);
		summary_record("replayable-launches", xs->replayable_launches);
		summary_record("write-set-pointer-refs", xs->write_set_pointers);
		summary_record("write-set-chance-refs", xs->write_set_chance);
		summary_record("write-set-loose", xs->write_set_loose);
		summary_record("wild-launches", xs->wild_launches);
		summary_record("replay-gaps-considered", xs->replay_considered);
		summary_record("replay-gaps", xs->replay_gaps);
		summary_record("replay-gaps-widened", xs->replay_extended);
		summary_record("replay-buffers", xs->replay_buffers);
		summary_record("replay-bytes", xs->replay_bytes);
		const struct replay_refused *rf = &xs->replay_refused;
		summary_record("replay-refused-unknown", rf->unknown);
		summary_record("replay-refused-wild", rf->wild);
		summary_record("replay-refused-no-writer", rf->no_writer);
		summary_record("replay-refused-first-read", rf->first_read);
		summary_record("replay-refused-too-long", rf->too_long);
		summary_record("replay-refused-not-replayable", rf->not_replayable);
		summary_record("replay-refused-unknown-other", rf->unknown_other);
		summary_record("replay-refused-writes-other", rf->writes_other);
		summary_record("replay-refused-overwritten", rf->overwritten);
		summary_record("replay-refused-freed", rf->freed);
		summary_record("replay-tried", xs->replay_tried);
		summary_record("replay-verified", xs->replay_verified);
		summary_record("replay-failed", xs->replay_failed);
		summary_record("replay-skipped", xs->replay_skipped);
		summary_record("replay-skipped-unfit", xs->replay_skipped_unfit);
		summary_record("replay-skipped-passed", xs->replay_skipped_passed);
		summary_record("replay-skipped-stream", xs->replay_skipped_stream);
		summary_record("replay-skipped-buffers", xs->replay_skipped_buffers);
		summary_record("replay-skipped-resident", xs->replay_skipped_resident);
		summary_record("replay-skipped-launch", xs->replay_skipped_launch);
		summary_record("replay-skipped-memory", xs->replay_skipped_memory);
		summary_record("recompute-gaps", xs->recompute_gaps);
		summary_record("recompute-bytes", xs->recompute_bytes);
		summary_record("recompute-ns", xs->recompute_ns);
		summary_record("recompute-drops", xs->recompute_drops);
		summary_record("recompute-remakes", xs->recompute_remakes);
		summary_record("recompute-drop-waits", ms->drop_waits);
		summary_record("recompute-drops-undone", ms->drops_undone);
		summary_record("recompute-early", xs->recompute_early);
		summary_record("recompute-nested", ms->remakes_nested);
		summary_record("recompute-kept", xs->recompute_kept);
		summary_record("recompute-kept-busy", xs->recompute_kept_busy);
		summary_record("recompute-kept-args", xs->recompute_kept_args);
		summary_record("recompute-kept-inputs", xs->recompute_kept_inputs);
		summary_record("recompute-kept-mover", xs->recompute_kept_mover);
		summary_record("recompute-failed", xs->recompute_failed);
		summary_record("planned-offloads", ms->planned_offloads);
		summary_record("prefetches", ms->prefetches);
		summary_record("prefetches-skipped", ms->prefetches_skipped);
		summary_record("prefetches-early", ms->prefetches_early);
		summary_record("host-wait-room-ns", ms->wait_room_ns);
		summary_record("host-wait-gate-ns", ms->wait_gate_ns);
		summary_record("host-wait-landing-ns", ms->wait_landing_ns);
		summary_record("host-wait-drop-ns", ms->wait_drop_ns);
		summary_record("host-remake-ns", ms->remake_ns);
		for (int c = 0; c < VMM_NCALLS; c++) {
			char key[32];
			snprintf(key, sizeof key, "vmm-%s-calls", vmm_names[c]);
			summary_record(key, vs->calls[c]);
			snprintf(key, sizeof key, "vmm-%s-ns", vmm_names[c]);
			summary_record(key, vs->ns[c]);
		}
		run_records();
	}
	summary_record("lock-wait-ns", engine.lock_wait_ns);
	summary_record("lock-waits", engine.lock_waits);
}

/* EBB_LIMIT was not held in this process, for why: say it, and tell ebb
 * run. */
void
summary_unheld(const char *why)
{
	ebb_log(EBB_LOG_ERROR, "EBB_LIMIT was not held in this process: %s", why);
	report_unheld(why);
}

/* A plan whose iterations measure this many times the iteration predicted
 * with nothing moved is said at exit at every verbosity (slow_warning). */
#define SUMMARY_SLOW 1.25

/*
 * Where the plan's iterations took SUMMARY_SLOW times or more the time the
 * same iteration is predicted to take with nothing moved (meas seconds
 * against the last plan's unmoved_step_ns), say so at every verbosity, with
 * what holds the limit and what would cost less: a job held under its
 * limit but several times slower is not to pass in silence. moved: buffers
 * moved or dropped over those iterations; where none were, neither the
 * link nor the moves are the cause, and the warning says what is.
 */
static void
slow_warning(const struct exec_stats *xs, double meas, uint64_t moved)
{
	char lim[32], bound[32];
	double unmoved = (double)xs->unmoved_step_ns / 1e9;

	if (unmoved <= 0 || meas < SUMMARY_SLOW * unmoved)
		return;
	human(engine.conf->limit, lim, sizeof lim);
	human(xs->bound_bytes, bound, sizeof bound);
	if (moved == 0) {
		ebb_log(EBB_LOG_WARN, "under EBB_LIMIT=%s the job's iterations took %.3f s, %.2f "
		    "times the %.3f s predicted, though the plan moved nothing: the time is ebb's "
		    "own in the job's calls (offload mode serves every allocation; EBB_SELF_TIME=1 "
		    "measures it), or the job's iterations differ from the one recorded", lim, meas,
		    meas / unmoved, unmoved);
		return;
	}
	int link = xs->bound_bytes > engine.conf->limit;
	ebb_log(EBB_LOG_WARN, "under EBB_LIMIT=%s the job's iterations took %.3f s, %.2f times "
	    "the %.3f s predicted with nothing moved: %s %s; a higher EBB_LIMIT costs less "
	    "(ebb plan TRACE --svg draws the step time against the peak)%s", lim, meas,
	    meas / unmoved, unmoved, link ?
	    "the copies cannot move what the limit needs in time, and the device waits for them "
	    "below the plan's lowest peak without stalls," : "the moves, recomputes and their "
	    "driver calls cost the host and the device that time, above the plan's lowest peak "
	    "without stalls,", bound, link && !engine.conf->recompute ? ", and so may "
	    "EBB_RECOMPUTE=1, which remakes buffers by launching their producers again, away "
	    "from the link" : "");
}

/*
 * The exit summary's first line, the one to read first: what was held and
 * moved, and the step time measured under the plan against its prediction
 * (the host's time per iteration over the whole iterations the plan ran).
 */
static void
headline(const struct engine_totals *t)
{
	const struct ebb_engine_stats *st = &t->st;
	const struct mover_stats *ms = &t->ms;
	const struct exec_stats *xs = &t->xs;
	char a[32], b[32], c[32], lim[64] = "", stage[48] = "";

	if (st->stage_nranks > 0)	/* each stage's line says which it is */
		snprintf(stage, sizeof stage, " (pipeline stage %d of %d)", st->stage_rank,
		    st->stage_nranks);

	if (engine.conf->mode != EBB_MODE_OFFLOAD) {
		ebb_log(EBB_LOG_NOTE, "summary%s: %s mode, %llu launches, peak %s tracked; %s", stage,
		    engine.conf->mode == EBB_MODE_OBSERVE ? "observe" : "off",
		    (unsigned long long)st->launches, human(st->bytes_peak, a, sizeof a),
		    st->period > 0 ? "an iteration found" : st->period_last > 0 ?
		    "an iteration found, departed from at the end" : "no iteration found");
		return;
	}
	if (engine.conf->limit > 0)
		snprintf(lim, sizeof lim, " (EBB_LIMIT %s)", human(engine.conf->limit, c, sizeof c));
	char step[160] = "no plan ran";
	if (engine.run_iters > 0 && xs->predicted_step_ns > 0) {
		double meas = (double)(engine.run_last.ns - engine.run_base.ns) / 1e9 /
		    (double)engine.run_iters, pred = (double)xs->predicted_step_ns / 1e9;
		double off = meas > 0 ? (pred / meas - 1) * 100 : 0.0;
		snprintf(step, sizeof step, "an iteration %.3f s measured (the plan's last %llu), "
		    "%.3f s predicted (%.1f%% %s)", meas, (unsigned long long)engine.run_iters, pred,
		    off < 0 ? -off : off, off < 0 ? "under" : "over");
	}
	ebb_log(EBB_LOG_NOTE, "summary%s: peak held %s%s; %s to the host and %s back, %llu buffers "
	    "remade by recompute; stalls %.3f s over %llu restores; %s", stage,
	    human(ms->held_peak, c, sizeof c), lim, human(ms->bytes_d2h, a, sizeof a),
	    human(ms->bytes_h2d, b, sizeof b), (unsigned long long)xs->recompute_remakes,
	    (double)ms->stall_ns / 1e9, (unsigned long long)ms->stalls_measured, step);
	if (engine.run_iters > 0)
		slow_warning(xs, (double)(engine.run_last.ns - engine.run_base.ns) / 1e9 /
		    (double)engine.run_iters, engine.run_last.ms.offloads - engine.run_base.ms.offloads +
		    engine.run_last.ms.drops - engine.run_base.ms.drops);
}

/* The exit's line of the arena, where it served buffers. */
static void
arena_line(void)
{
	struct mover_arena_stats as;
	char peak_s[32], off[64] = "";

	mover_arena_stats(&as);
	if (as.allocs == 0)
		return;
	if (as.off)
		snprintf(off, sizeof off, "; turned off (%s)", as.off_why);
	ebb_log(EBB_LOG_NOTE, "arena: %llu buffers the plan keeps served from shared chunks (at "
	    "most %s at once); %llu chunks mapped, %llu released for room%s",
	    (unsigned long long)as.allocs, human(as.bytes_peak, peak_s, sizeof peak_s),
	    (unsigned long long)as.chunks_mapped, (unsigned long long)as.chunks_released, off);
}

/* Write the summary's exit lines: the headline, the engine's counters, and
 * in offload mode the mover's and the plan's. */
void
summary_lines(const struct engine_totals *t)
{
	const struct ebb_engine_stats *st = &t->st;
	const struct mover_stats *ms = &t->ms;
	const struct exec_stats *xs = &t->xs;
	char peak[32];

	headline(t);
	ebb_log(EBB_LOG_NOTE, "%llu launches (%llu unresolved, %llu without a tracked buffer), "
	    "%llu copies, %llu memsets, %llu NCCL calls; %llu buffers allocated, %llu live, "
	    "peak %s tracked; %llu iterations of %llu operations%s",
	    (unsigned long long)st->launches, (unsigned long long)st->launches_unresolved,
	    (unsigned long long)st->launches_nobuf, (unsigned long long)st->copies,
	    (unsigned long long)st->memsets, (unsigned long long)st->nccl_calls,
	    (unsigned long long)st->allocs, (unsigned long long)st->buffers_live,
	    human(st->bytes_peak, peak, sizeof peak), (unsigned long long)st->iterations,
	    (unsigned long long)(st->period ? st->period : st->period_last),
	    st->period == 0 && st->period_last > 0 ? " (the last learned: the job departed from "
	    "it, and no iteration was found again)" : "");
	if (engine.conf->self_time) {
		self_line(0);
		self_line(1);
		ebb_log(EBB_LOG_NOTE, "host time in ebb (EBB_SELF_TIME): the mover's setup %.3f s, "
		    "apart", (double)__atomic_load_n(&engine.self.setup_ns, __ATOMIC_RELAXED) / 1e9);
	}
	if (engine.conf->mode == EBB_MODE_OFFLOAD) {
		char d2h_s[32], h2d_s[32], held_s[32], host_s[32];
		ebb_log(EBB_LOG_NOTE, "offload: %llu buffers to the host (%s), %llu back (%s; %llu "
		    "cancelled), stalls %.3f s over %llu restores, %llu refusals; peak held %s, %s "
		    "pinned on the host (in %.3f s); %llu handles created, %llu of them after learning",
		    (unsigned long long)ms->offloads,
		    human(ms->bytes_d2h, d2h_s, sizeof d2h_s), (unsigned long long)ms->restores,
		    human(ms->bytes_h2d, h2d_s, sizeof h2d_s), (unsigned long long)ms->cancels,
		    (double)ms->stall_ns / 1e9, (unsigned long long)ms->stalls_measured,
		    (unsigned long long)ms->refusals, human(ms->held_peak, held_s, sizeof held_s),
		    human(ms->host_pinned, host_s, sizeof host_s), (double)ms->host_pin_ns / 1e9,
		    (unsigned long long)ms->handles_created,
		    (unsigned long long)(engine.learned ?
		    ms->handles_created - engine.created_at_learned : 0));
		arena_line();
		if (engine.plan_on || xs->plans > 0)
			ebb_log(EBB_LOG_NOTE, "plan: %llu made, %llu iterations run by it, %llu departures "
			    "(%llu of them detours it ran on after); %llu offloads and %llu restores ahead "
			    "of use by the plan (%llu restores skipped for want of room), %llu restores on "
			    "use; predicted peak %s, %.3f s an iteration; "
			    "the host waited %.3f s for room, %.3f s for the device to near a restore, %.3f s "
			    "for offloads to land",
			    (unsigned long long)xs->plans, (unsigned long long)xs->iterations_run,
			    (unsigned long long)t->dep.n, (unsigned long long)t->dep.resumes,
			    (unsigned long long)ms->planned_offloads,
			    (unsigned long long)ms->prefetches, (unsigned long long)ms->prefetches_skipped,
			    (unsigned long long)(ms->restores - ms->prefetches),
			    human(xs->planned_peak, held_s, sizeof held_s),
			    (double)xs->predicted_step_ns / 1e9,
			    (double)ms->wait_room_ns / 1e9, (double)ms->wait_gate_ns / 1e9,
			    (double)ms->wait_landing_ns / 1e9);
		if (engine.plan_on || xs->launch_records + xs->launch_records_unrecorded > 0)
			ebb_log(EBB_LOG_NOTE, "launch records of the last iteration recorded: %llu "
			    "(%llu not replayable), %llu launches not recorded past "
			    "EBB_LAUNCH_RECORD_BYTES; %s held, %s of them parameters",
			    (unsigned long long)xs->launch_records,
			    (unsigned long long)xs->launch_records_unreplayable,
			    (unsigned long long)xs->launch_records_unrecorded,
			    human(xs->launch_record_bytes, held_s, sizeof held_s),
			    human(xs->launch_record_param_bytes, host_s, sizeof host_s));
		if (engine.conf->recompute)
			ebb_log(EBB_LOG_NOTE, "write sets (EBB_RECOMPUTE): %llu launches measured, %llu "
			    "not; %llu buffer references, %llu written, %llu to tables of pointers; "
			    "%llu launches can be launched again, %llu may write what they do not "
			    "reference; %llu hashes of %s",
			    (unsigned long long)xs->write_set_launches,
			    (unsigned long long)xs->write_set_unmeasured,
			    (unsigned long long)xs->write_set_refs,
			    (unsigned long long)xs->write_set_written,
			    (unsigned long long)xs->write_set_pointers,
			    (unsigned long long)xs->replayable_launches,
			    (unsigned long long)xs->wild_launches,
			    (unsigned long long)xs->probe_hashes,
			    human(xs->probe_bytes, host_s, sizeof host_s));
		if (engine.conf->recompute)
			ebb_log(EBB_LOG_NOTE, "recompute candidates (EBB_RECOMPUTE): %llu of %llu gaps "
			    "between uses could be bridged by launching their buffer's producers again "
			    "(%llu of them with a freed input's producers too), of %llu buffers (%s); "
			    "refused: %llu unmeasured, %llu not written first, "
			    "%llu chains too long, %llu not replayable, %llu writing more than 64 MiB of "
			    "other buffers, %llu inputs changed or freed",
			    (unsigned long long)xs->replay_gaps,
			    (unsigned long long)xs->replay_considered,
			    (unsigned long long)xs->replay_extended,
			    (unsigned long long)xs->replay_buffers,
			    human(xs->replay_bytes, held_s, sizeof held_s),
			    (unsigned long long)(xs->replay_refused.unknown + xs->replay_refused.wild +
			    xs->replay_refused.unknown_other),
			    (unsigned long long)(xs->replay_refused.no_writer +
			    xs->replay_refused.first_read),
			    (unsigned long long)xs->replay_refused.too_long,
			    (unsigned long long)xs->replay_refused.not_replayable,
			    (unsigned long long)xs->replay_refused.writes_other,
			    (unsigned long long)(xs->replay_refused.overwritten +
			    xs->replay_refused.freed));
		if (engine.conf->recompute)
			ebb_log(EBB_LOG_NOTE, "recompute candidates replayed once (EBB_RECOMPUTE): %llu, "
			    "%llu remade their buffer bit for bit, %llu did not; %llu not tried (%llu: "
			    "writing too many other buffers, %llu: their point not reached, %llu: "
			    "another stream, %llu: a buffer not found, %llu: not made resident, %llu: "
			    "a launch refused, %llu: no room for the scratch)",
			    (unsigned long long)xs->replay_tried,
			    (unsigned long long)xs->replay_verified,
			    (unsigned long long)xs->replay_failed,
			    (unsigned long long)xs->replay_skipped,
			    (unsigned long long)xs->replay_skipped_unfit,
			    (unsigned long long)xs->replay_skipped_passed,
			    (unsigned long long)xs->replay_skipped_stream,
			    (unsigned long long)xs->replay_skipped_buffers,
			    (unsigned long long)xs->replay_skipped_resident,
			    (unsigned long long)xs->replay_skipped_launch,
			    (unsigned long long)xs->replay_skipped_memory);
		if (engine.conf->recompute && xs->recompute_gaps > 0)
			ebb_log(EBB_LOG_NOTE, "recompute (EBB_RECOMPUTE): the plan recomputes %llu gaps "
			    "(%s); %llu buffers dropped (%llu of them needed again before their memory was "
			    "released: the host waited %.3f s for that) and %llu remade by their "
			    "producers in %.3f s of the host's (%llu before "
			    "their point: the job used an input otherwise, or the plan stopped; %llu as "
			    "the input of another's remake), %llu "
			    "drops not made (%llu: the buffer away or busy, %llu: a producer's "
			    "arguments, %llu: an input, %llu: the mover), %llu remakes failed",
			    (unsigned long long)xs->recompute_gaps,
			    human(xs->recompute_bytes, held_s, sizeof held_s),
			    (unsigned long long)xs->recompute_drops,
			    (unsigned long long)ms->drop_waits, (double)ms->wait_drop_ns / 1e9,
			    (unsigned long long)xs->recompute_remakes, (double)ms->remake_ns / 1e9,
			    (unsigned long long)xs->recompute_early,
			    (unsigned long long)ms->remakes_nested,
			    (unsigned long long)xs->recompute_kept,
			    (unsigned long long)xs->recompute_kept_busy,
			    (unsigned long long)xs->recompute_kept_args,
			    (unsigned long long)xs->recompute_kept_inputs,
			    (unsigned long long)xs->recompute_kept_mover,
			    (unsigned long long)xs->recompute_failed);
	}
}
