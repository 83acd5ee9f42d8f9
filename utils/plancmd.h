/*
 * plancmd.h: `ebb plan TRACE`: what the planner would do at given targets.
 */
#ifndef EBB_PLANCMD_H
#define EBB_PLANCMD_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* One target: bytes, or (bytes 0) a fraction of the learned peak. */
struct ebb_plan_target {
	uint64_t bytes;
	double fraction;
};

#define PLAN_ITER_RECORDED UINT64_MAX

/* A point a user passes for comparison in --svg (--mark LABEL=SIZE,RATIO). */
struct ebb_plan_mark {
	char label[64];
	uint64_t bytes;		/* its peak */
	double ratio;		/* its step time over the job's without ebb */
};

struct ebb_plan_opts {
	const struct ebb_plan_target *target;
	size_t ntarget;		/* 0: the fractions 0.9 down to 0.4 */
	double d2h_gbps, h2d_gbps;	/* 0: from the trace's notes, else assumed */
	uint64_t min_bytes;	/* smallest buffer that moves */
	int allow_stall;
	int no_waits;		/* with allow_stall: the greedy search's stalls only */
	int phases;		/* decisions shared by the micro-batches alike
				 * (EBB_PLAN_PHASES; on unless --no-phases) */
	double time_limit_s;	/* each target's search at most (0: no limit) */
	int moves;		/* list the moves of the last target */
	int replay;		/* say what recompute by replay could bridge, from the
				 * trace's write sets (V records) */
	int move_given;		/* move_us given: else the trace's plan-host-* notes, else 0 */
	double move_us[4];	/* the host's microseconds for an offload, a restore, a
				 * drop and a remake's mapping */
	const char *svg;	/* --svg: predicted peak against step time, or NULL */
	const char *memory_svg;	/* --memory-svg: memory over the iteration, or NULL */
	const struct ebb_plan_mark *mark;
	size_t nmark;
	uint64_t iteration;	/* plan this iteration (its I record's number; 0: choose;
				 * PLAN_ITER_RECORDED: the one the library recorded for
				 * its first plan, as the plan-recording note says) */
};

/*
 * Learn the profile of one iteration of the observe-mode trace at path and
 * print, on out, the planner's answer at each target. Returns 0; 1 when the
 * trace is malformed or holds no usable iteration (said on err, naming the
 * file and line where there is one); 2 when the file cannot be read.
 */
int ebb_plan(const char *path, const struct ebb_plan_opts *o, FILE *out, FILE *err);

#endif
