/*
 * mover_limit.c: whether EBB_LIMIT held in this process, and if not, why:
 * the mover could not start, the driver's allocations or its own memory for
 * the process took it over, and whether anything ebb could move would have
 * brought it under (mover_sample_device counts the samples over it).
 */
#include "config.h"

#include <stdio.h>

#include "mover_int.h"

/* Whether the process went over EBB_LIMIT only where what ebb could move
 * was less than the excess (mover.h). */
int
mover_limit_unholdable(void)
{
	return mover.stats.over_samples > 0 && mover.stats.over_movable == 0;
}

/* Whether EBB_LIMIT went unheld, with the reason in why (mover.h). */
int
mover_unheld(char *why, size_t len)
{
	if (mover_failed_why() != NULL) {
		snprintf(why, len, "%s", mover_failed_why());
		return 1;
	}
	if (mover.stats.arena_over > 0) {
		snprintf(why, len, "nothing more could move where %llu buffers the job needed found no "
		    "room, the arena's chunks pinned by the buffers the plan keeps in them: ebb held "
		    "them up to %llu bytes over EBB_LIMIT=%llu (EBB_ARENA=0 keeps every buffer "
		    "movable)", (unsigned long long)mover.stats.arena_over,
		    (unsigned long long)mover.stats.arena_over_bytes,
		    (unsigned long long)mover.limit_conf);
		return 1;
	}
	if (mover.stats.over_limit > 0 && mover.stats.driver_served_peak >= mover.limit_conf) {
		/* no plan could have held it: those bytes never move */
		snprintf(why, len, "EBB_LIMIT=%llu is below what the driver's own allocations for "
		    "the job (made during stream captures, or not served by ebb) held at once, %llu "
		    "bytes, which ebb cannot move; the job held up to %llu",
		    (unsigned long long)mover.limit_conf,
		    (unsigned long long)mover.stats.driver_served_peak,
		    (unsigned long long)mover.stats.held_peak);
		return 1;
	}
	if (mover.stats.over_limit == 0 && mover.stats.process_peak > mover.limit_conf) {
		int n = snprintf(why, len, "the device memory the process used reached %llu bytes, "
		    "over EBB_LIMIT=%llu: ebb held up to %llu (%llu of them the driver's allocations), "
		    "and the driver's own memory for the process grew to %llu beyond it",
		    (unsigned long long)mover.stats.process_peak, (unsigned long long)mover.limit_conf,
		    (unsigned long long)mover.stats.held_peak,
		    (unsigned long long)mover.stats.driver_served_peak,
		    (unsigned long long)mover.stats.beyond_held);
		if (mover_limit_unholdable() && n > 0 && (size_t)n < len)
			snprintf(why + n, len - (size_t)n, "; at each of the %llu samples over it, what "
			    "ebb could move was less than the excess (the rest stays: buffers captured "
			    "graphs use, buffers in use, the driver's allocations and its own memory), "
			    "so no mover holds this limit", (unsigned long long)mover.stats.over_samples);
		return 1;
	}
	if (mover.stats.over_limit > 0) {
		snprintf(why, len, "allocations the driver served (up to %llu bytes at once) took "
		    "the job to %llu bytes, and the driver's own memory for the process to %llu, over "
		    "EBB_LIMIT=%llu", (unsigned long long)mover.stats.driver_served_peak,
		    (unsigned long long)mover.stats.held_peak,
		    (unsigned long long)mover.stats.beyond_held, (unsigned long long)mover.limit_conf);
		return 1;
	}
	return 0;
}
