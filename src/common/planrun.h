/*
 * planrun.h: the planner run against the clock. policy/ holds the two
 * searches (plan_greedy, plan_waits) and the rule between their plans;
 * here they run under pp->time_limit_s, the search for waits on a thread
 * of its own beside the greedy one. And the search that combines recompute
 * (policy/recompute.h) with moves, under the same limit.
 */
#ifndef EBB_PLANRUN_H
#define EBB_PLANRUN_H

#include <stdint.h>

#include "plan.h"
#include "recompute.h"
#include "replay.h"

/*
 * Plan for the profile: moves without stalls first; when those run out
 * short of the target and pp->allow_stall, more with stalls from there, the
 * greedy search's; and, unless pp->no_waits, also the stalls as waits where
 * plan_floor wants them, keeping the faster plan (out->waited: the waits).
 * The search for waits runs on a thread of its own beside the greedy one
 * (one after the other where no thread can be made: the same plan). Both
 * stop where pp->time_limit_s runs out (out->time_capped).
 * Returns 0 (out filled; out->met says whether the target was reached), or
 * -1 when out of memory. Free with plan_fini.
 */
int plan_make(const struct prof *p, const struct plan_params *pp, struct plan *out);

/* The lowest peak the planner reaches with no restore late (target 0, no
 * stalls allowed). Returns 0 when out of memory. */
uint64_t plan_bound(const struct prof *p, const struct plan_params *pp);

/* A plan with recompute: the gaps recomputed, the profile with them, and
 * the move plan of that profile. */
struct plan_rc {
	struct plan pl;		/* the move plan, of derived's buffers */
	struct prof derived;	/* the profile with the picks (rc_derive) */
	uint32_t *orig;		/* derived's buffer -> the profile's */
	struct rc_pick *pick;	/* by buffer, then gap */
	uint32_t npick;
	double recompute_s;	/* device seconds of replays an iteration (the picks'
				 * cost_s) */
	uint64_t bytes_recomputed;	/* the picks' sizes, summed */
	uint32_t hoisted;	/* of the picks, those replayed before their window's
				 * end, for a replay that reads them */
	struct rc_skipped skipped;	/* rc_choose's, for the picks */
};

/*
 * Plan p with recompute: levels of recompute, each the gaps rc_choose picks
 * for a recompute-only target (usable and stream as rc_choose's), then
 * plan_make on the profile with them (rc_derive) for the rest by moves.
 * First the levels f of 1, 0.75, 0.5 and 0.25, whose targets are
 * peak - f * (peak - pp->target) (peak: p's with nothing moved); then two
 * rounds around the best level so far, each at most four levels: halfway
 * and a quarter of the way to the planned levels on either side (the first
 * round also at pp->target plus the reach of the moves of a level that
 * missed: what those moves took off its peak). The levels of a round run
 * side by side, a thread each (one after the other where no thread can be
 * made), each plan_make under what is left of pp->time_limit_s, which the
 * rounds share (no round starts past it); a level whose picks were
 * planned already (the greedy choice stops where its target is met, so
 * fewer picks are the first of more) is not planned again. The best plan is
 * kept: one that meets pp->target before one that does not, then the least
 * predicted step_s (the derived profile's durations hold the replays, its
 * host side their launches); of two that miss, the lower peak. moves_only,
 * p's plan without recompute (plan_make's), is the level with no
 * recompute: it is compared, not copied or freed. Returns 1 when out holds
 * a plan with recompute that is better than moves_only (free it with
 * plan_rc_fini), 0 when moves_only stays the best (out empty), or -1 when
 * out of memory (out empty).
 */
int plan_make_recompute(const struct prof *p, const struct replay_set *rs, const uint8_t *usable,
    const uint32_t *stream, const struct plan_params *pp, const struct plan *moves_only,
    struct plan_rc *out);

/* Whether plan a is better than plan b: a meets the target and b does not;
 * both meet it and a is faster; both miss and a's peak is lower (then, at
 * the same peak, faster). */
int plan_better(const struct plan *a, const struct plan *b);

/* Free what a plan with recompute holds, and empty it. */
void plan_rc_fini(struct plan_rc *r);

#endif
