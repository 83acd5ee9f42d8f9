/*
 * mover_cost.c: what a move costs the host, for the planner's model: from
 * the moves of the whole process (mover_move_costs), or from those since a
 * mark (mover_move_costs_since), every call of the driver's virtual memory
 * charged to them.
 */
#include "config.h"

#include "mover_int.h"
#include "vmm.h"

/* ns over n, in seconds (0 when n is 0). */
static double
mean_s(uint64_t ns, uint64_t n)
{
	return n ? (double)ns / (double)n / 1e9 : 0;
}

/* What a move has cost the host so far (mover.h). */
void
mover_move_costs(struct mover_costs *out)
{
	const struct mover_stats *c = &mover.stats;
	struct vmm_stats vs;

	vmm_stats(&vs);
	double unmap = mean_s(c->unmap_ns, c->unmaps_timed);
	double issue = mean_s(c->offload_host_ns, c->offloads_timed);
	out->offload_s = issue + unmap;
	out->restore_s = mean_s(c->restore_host_ns, c->restores_timed);
	out->drop_s = (c->drops_timed ? mean_s(c->drop_host_ns, c->drops_timed) : issue) + unmap;
	out->remake_s = vs.calls[VMM_MAP] ? mean_s(vs.ns[VMM_MAP], vs.calls[VMM_MAP]) :
	    out->restore_s;
}

/* Where the moves stand (mover.h). */
void
mover_cost_mark(struct mover_cost_mark *m)
{
	const struct mover_stats *c = &mover.stats;
	struct vmm_stats vs;

	vmm_stats(&vs);
	*m = (struct mover_cost_mark){
		.moves = c->offloads + c->drops,
		.vmm_ns = vs.ns[VMM_CREATE] + vs.ns[VMM_RELEASE] + vs.ns[VMM_MAP] +
		    vs.ns[VMM_UNMAP],
		.map_ns = vs.ns[VMM_MAP], .maps = vs.calls[VMM_MAP],
		.offload_host_ns = c->offload_host_ns, .offloads_timed = c->offloads_timed,
		.restore_host_ns = c->restore_host_ns, .restores_timed = c->restores_timed,
		.drop_host_ns = c->drop_host_ns, .drops_timed = c->drops_timed,
	};
}

/* What a move has cost since a mark (mover.h). */
int
mover_move_costs_since(const struct mover_cost_mark *m, uint64_t min, struct mover_costs *out)
{
	struct mover_cost_mark now;

	mover_cost_mark(&now);
	uint64_t moves = now.moves - m->moves;
	if (moves < min || moves == 0)
		return 0;
	double half = mean_s(now.vmm_ns - m->vmm_ns, moves) / 2;
	double map = mean_s(now.map_ns - m->map_ns, now.maps - m->maps);
	/* a restore's own time has its mapping in it: counted in half */
	double restore = mean_s(now.restore_host_ns - m->restore_host_ns,
	    now.restores_timed - m->restores_timed);
	double offload = mean_s(now.offload_host_ns - m->offload_host_ns,
	    now.offloads_timed - m->offloads_timed);
	out->offload_s = offload + half;
	out->restore_s = (restore > map ? restore - map : 0) + half;
	out->drop_s = (now.drops_timed > m->drops_timed ? mean_s(now.drop_host_ns -
	    m->drop_host_ns, now.drops_timed - m->drops_timed) : offload) + half;
	out->remake_s = half;
	return 1;
}
