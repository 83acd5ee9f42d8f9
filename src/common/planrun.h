/*
 * planrun.h: the planner run against the clock. policy/ holds the two
 * searches (plan_greedy, plan_waits) and the rule between their plans;
 * here they run under pp->time_limit_s, the search for waits on a thread
 * of its own beside the greedy one.
 */
#ifndef EBB_PLANRUN_H
#define EBB_PLANRUN_H

#include <stdint.h>

#include "plan.h"

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

#endif
