/*
 * plancmd_int.h: what the files of `ebb plan` share (plancmd.h is its API).
 *
 * plancmd.c    reading the trace, choosing the iteration, building its
 *              profile, and the command's flow (ebb_plan)
 * planprint.c  printing what was learned, the floor, the plan at each
 *              target and the moves of the last one
 * planlive.c   the buffers alive at a point of the trace (id -> size), and
 *              the bytes they hold on the device and the host (planheld)
 * planreplay.c the trace's write sets applied to the profile, and the gaps
 *              a recompute by replay could bridge (--replay)
 * planpace.c   the job's host pace: the library's (E records) or the issue
 *              times'
 */
#ifndef EBB_PLANCMD_INT_H
#define EBB_PLANCMD_INT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "plan.h"
#include "plancmd.h"
#include "planrun.h"
#include "record.h"
#include "trace_read.h"

/* The bandwidth each way, in GB/s, when neither the user nor the trace gives one. */
#define PLANCMD_ASSUMED_GBPS 50.0

/* The trace being read, and where its errors are reported. */
struct plancmd_src {
	const char *path;
	FILE *err;
	struct ebb_trace_reader rd;	/* the file, its line and its record */
};

/* An I record. */
struct plancmd_mark {
	uint64_t iter, seq, period, line;
};

/* A G record. */
struct plancmd_gtime {
	uint64_t seq, start, end;
};

/* A V record: the accesses of one launch of the probed iteration. */
struct plancmd_access {
	uint64_t seq;		/* the launch */
	size_t first, n;	/* its accesses: acc[first .. first + n), PROF_ACC_* */
};

/* An E record: the library's account of one operation of a recording it planned. */
struct plancmd_pace {
	uint64_t seq, issue, ebb, call;
	uint8_t sync;
};

/* What the first pass keeps. */
struct plancmd_scan {
	struct plancmd_mark *mark;
	size_t nmark, cmark;
	struct plancmd_gtime *g;
	size_t ng, cg;
	uint64_t *launch;	/* seqs of L records, increasing */
	size_t nlaunch, claunch;
	uint64_t *dep;		/* seqs of D records */
	size_t ndep, cdep;
	uint64_t last_seq;	/* the last operation of the trace */
	double gbps[2];		/* d2h, h2d from Q notes; 0: none */
	double move_ns[4];	/* the host's cost of an offload, a restore, a drop, a
				 * remake's mapping, from the last plan-host-offload-ns,
				 * -restore-ns, -drop-ns, -remake-ns notes; -1: none */
	int offload;		/* the trace has offload mode's moves (O or B records) */
	uint64_t *recorded;	/* the plan-recording and plan-pace-from notes' */
	uint64_t *pace_from;	/* operations, in the trace's order */
	size_t nrecorded, crecorded, npace_from, cpace_from;
	struct plancmd_access *v;	/* V records, in the trace's order */
	size_t nv, cv;
	struct plancmd_pace *pace;	/* E records, in the trace's order */
	size_t npace, cpace;
	uint8_t *acc;		/* their accesses */
	size_t nacc, cacc;
};

/* The iteration chosen. */
struct plancmd_choice {
	const struct plancmd_mark *m;
	const struct plancmd_mark *last;	/* the last whole iteration, timed or not */
	int cupti;		/* 0: host times */
	uint64_t nlaunch, ntimed;	/* its launches, and those with a G record */
};

/* The profile being built, and the buffer id of each of its buffers. */
struct plancmd_build {
	struct rec r;
	uint64_t *bid;
	size_t cbid;
	uint64_t min_bytes;
	int host;		/* time operations by the host's calls */
	uint64_t *issue;	/* when the host issued each operation, and the end
				 * (period + 1; 0: not in the trace) */
	uint8_t *sync;		/* the host waited for the device there */
	/* the job's host pace as the library had it, from the E records of
	 * the iteration (pace_e: they cover it; else the issue times alone) */
	int pace_e;
	double pace_s, pace_ebb_s, pace_queued_s;	/* its sum, ebb's time and the
							 * queue's waits left out */
};

/* One row of the targets' table: what the plan for one target predicts. */
struct plancmd_row {
	double target, peak;	/* bytes */
	double ratio;		/* its step time over the iteration's with nothing moved */
	int met;
};

/* A buffer named at a predicted peak (plansvg_peak_names). */
struct plancmd_named {
	uint64_t bid;		/* its A record's id */
	uint64_t size;
};

/* Buffers named at the predicted peak in --memory-svg. */
#define PLANCMD_NAMED 5

/* One run of ebb plan: the trace, the iteration learned from it, the
 * planner's inputs and the last plan made. */
struct plancmd {
	struct plancmd_src s;		/* the trace */
	struct plancmd_scan sc;		/* its first pass */
	struct plancmd_choice ch;	/* the iteration chosen */
	struct plancmd_build b;		/* that iteration's profile */
	uint64_t s0;			/* the iteration's first operation */
	uint64_t peak;			/* its learned peak */
	uint64_t markers;		/* the stage markers in it (planphase_cuts) */
	double gbps[2];			/* the bandwidths planned with: d2h, h2d */
	const char *from[2];		/* where each comes from */
	int assumed;			/* bit k: gbps[k] is PLANCMD_ASSUMED_GBPS */
	struct plan_params pp;		/* the planner's parameters, but for the target */
	uint64_t bound;			/* the lowest peak with no restore late */
	struct plan_floor *fl;		/* the floor under every plan; NULL: none made */
	struct plan pl;			/* the last plan made */
	struct plancmd_row *rows;	/* the targets' table, for --svg */
	size_t nrows;
	double rows_before_s;		/* the iteration's time with nothing moved */
	/* with --replay, the plan with recompute at the last target, for the
	 * pictures (rc: NULL where none was made or no picture is asked for) */
	struct plan_rc *rc;
	int rc_made;
	double rc_peak, rc_ratio, rc_target;
};

/* One buffer a launch lists (plancmd_launches). */
struct plancmd_ref {
	uint64_t bid;
	uint64_t size;		/* its A record's; 0 when known is 0 */
	uint8_t known;		/* an A record of it came before the launch */
	uint8_t own;		/* in offload mode ebb served it (an allocation of kind
				 * sync, async or pool: a range of its own, or a slab's
				 * at EBB_SLAB_MAX_BYTES or less), which the library's
				 * profile names */
};

/* What plancmd_launches gives each launch: its seq and the n buffers it
 * lists, in order. Returns 0 to go on, or -1 to stop with an error (said). */
typedef int plancmd_launch_fn(void *arg, uint64_t seq, const struct plancmd_ref *ref, size_t n);

/*
 * Read the trace again from its start and give fn each launch (L record)
 * from operation lo up to hi (exclusive) whose buffers are known (not '?');
 * where stream is not NULL, also the stream handle of each operation of
 * those, stream[seq - lo] (left as it is for one that names none: a
 * synchronisation, or one not in the trace). Returns 0, or -1 when reading
 * fails, memory runs out (said on s->err) or fn returns -1.
 */
int plancmd_launches(struct plancmd_src *s, uint64_t lo, uint64_t hi, plancmd_launch_fn *fn,
    void *arg, uint64_t *stream);

/* ---- planlive.c ---- */

/* Buffers alive at a point of the trace: id -> size and the caller's tag,
 * open addressing. Empty when zeroed. */
struct planlive {
	uint64_t *id, *size;
	uint8_t *used;
	uint8_t *tag;
	size_t cap, n;
};

/* Set id's size and tag in l, adding it if new. Returns 0, or -1 when out of
 * memory (l unchanged). */
int planlive_put(struct planlive *l, uint64_t id, uint64_t size, uint8_t tag);

/* id's slot in l (its size and tag there), or SIZE_MAX when it is not there. */
size_t planlive_find(const struct planlive *l, uint64_t id);

/* Remove id, if l has it. */
void planlive_del(struct planlive *l, uint64_t id);

/* Free l's slots and leave it empty. */
void planlive_free(struct planlive *l);

/*
 * The bytes of ebb's buffers on the device and, offloaded, on the host, as
 * a trace's records have them: an A record puts a buffer on the device, a
 * U record takes it off (to the host, or nowhere after a drop's O record),
 * a B record other than a cancel brings it back, an F record ends it. The
 * measured curve of --memory-svg and the counters of ebb timeline. Empty
 * when zeroed.
 */
struct planheld {
	struct planlive buf;	/* buffer -> size, tag PLANHELD_* */
	struct planlive drop;	/* buffers whose drop (O record) awaits its U */
	uint64_t device, host;	/* bytes */
};

/* Where a buffer's bytes are (struct planheld's tags). */
enum { PLANHELD_HOST, PLANHELD_DEVICE, PLANHELD_DROPPED };

/* Apply record r (A, F, O, U and B records; others change nothing).
 * Returns 1 when device or host changed, 0 when not, -1 when out of memory
 * or a field of r is not a number. */
int planheld_record(struct planheld *h, const struct ebb_trace_rec *r);

/* Free what h holds and leave it empty. */
void planheld_free(struct planheld *h);

/* ---- planreplay.c ---- */

/*
 * With --replay: the trace's write sets (V records) into g's profile, the
 * gaps replay_find says a replay could bridge, and their summary on out;
 * then the plan with recompute for target (plan_make_recompute) beside the
 * moves alone (g->pl, planned for target), and with o->moves the gaps it
 * recomputes. A trace without V records is said to have none. Returns 0,
 * or -1 when the trace cannot be read again or memory runs out (said on
 * g->s.err).
 */
int planreplay(struct plancmd *g, const struct ebb_plan_opts *o, uint64_t target, FILE *out);

/* ---- planprint.c ---- */

/* What ebb plan learned: the iteration, its times, buffers and peak, the
 * bandwidths, the host's side and the bound. */
void planprint_learned(const struct plancmd *g, const struct ebb_plan_opts *o, FILE *out);

/*
 * Where the iteration has times, make the floor under any plan (g->fl) and
 * print it with no stall and with stalls of 5% of the iteration. Returns 0,
 * or -1 when out of memory (not said: the caller says it).
 */
int planprint_floor(struct plancmd *g, FILE *out);

/*
 * Plan for each target (those of o, else the fractions 0.9 down to 0.4 of
 * the peak) and print one row each, what the rows' marks mean, and what
 * holds the memory at the last plan's peak. The last plan stays in g->pl,
 * its target in *last. Returns 0, or -1 when out of memory (not said: the
 * caller says it).
 */
int planprint_targets(struct plancmd *g, const struct ebb_plan_opts *o, FILE *out,
    uint64_t *last);

/* The moves of plan pl, made for target on b's iteration (whose first
 * operation is s0), by buffer id and by the profile's key, and where a
 * waited plan's stalls are. */
void planprint_moves(FILE *out, const struct plancmd_build *b, const struct plan *pl, uint64_t s0,
    uint64_t target);

/* ---- planphase.c ---- */

/* Phases listed one a line at most; more are summed up. */
#define PLANPHASE_LISTED 64

/* Whether trace record r is a pipeline stage marker: an N record of a send
 * or receive to the stage beside the caller's rank (phase_marker); *send
 * is set for a send. */
int planphase_marker(const struct ebb_trace_rec *r, int *send);

/* The phase starts g's stage markers give its iteration, into its profile
 * (prof_cut), as the library records them, and g->markers. Returns 0, or
 * -1 (said on g->s.err). */
int planphase_cuts(struct plancmd *g);

/* The pipeline phases of g's iteration (policy/phase.h), from its stage
 * markers (planphase_cuts) and the memory's turns, and which are alike,
 * printed on out; shared: whether the plan takes one decision for a chain
 * of siblings (ebb plan without --no-phases). Returns 0, or -1 (said on
 * g->s.err). */
int planphase_print(struct plancmd *g, int shared, FILE *out);

/* The host's side of the profile b builds of n operations from s0: the
 * job's pace, from the E records of sc where they cover the iteration, else
 * from b's issue times (planpace.c). Returns 0, or -1 when out of memory
 * (said on s's err). */
int planpace_profile(struct plancmd_src *s, const struct plancmd_scan *sc,
    struct plancmd_build *b, uint64_t s0, uint32_t n);

/* ---- plansvg.c ---- */

/* The memory p holds at each operation (out[0 .. p->nops)) under plan pl
 * (NULL: nothing moved), fixed bytes included; its highest value is pl's
 * peak. Returns 0, or -1 when out of memory. */
int plansvg_curve(const struct prof *p, const struct plan *pl, double *out);

/* The largest buffers of p on the device at operation op under pl (at most
 * PLANCMD_NAMED, largest first, *n of them): their ids in g's trace, through
 * orig (p's buffer -> g's profile's; NULL: p is g's profile). */
void plansvg_peak_names(const struct plancmd *g, const struct prof *p, const struct plan *pl,
    const uint32_t *orig, uint32_t op, struct plancmd_named *out, size_t *n);

/* --svg: the targets' rows (and the plan with recompute, and o's marks) as
 * predicted peak against step time, to o->svg. Returns 0, or -1 (said). */
int plansvg_targets(const struct plancmd *g, const struct ebb_plan_opts *o);

/* --memory-svg: the memory over the iteration with nothing moved, with the
 * plan for target (and with recompute), and as the trace's last whole
 * iteration measured it, to o->memory_svg. Returns 0, or -1 (said). */
int plansvg_memory(struct plancmd *g, const struct ebb_plan_opts *o, uint64_t target);

#endif
