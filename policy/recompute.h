/*
 * recompute.h: which gaps to bridge by recompute (a replay of the chain
 * that made the buffer, replay.h), and the profile as it is with them, for
 * the move planner (plan.h) to plan the rest.
 *
 * A pick frees buffer X after its use[k] and launches X's chain again right
 * before operation r (the candidate's r_hi: X is away for as long as the
 * window allows), which remakes X from its inputs: every other buffer the
 * chain's operations use, each of which they read. X is then away over the
 * operations use[k] + 1 .. r - 1, the replay costs the device the chain's
 * durations right before r, and the host the chain's launches.
 *
 * The profile with the picks (rc_derive) keeps X's entry for its uses up to
 * use[k] and adds a buffer for each later segment, which exists from the
 * replay on; each input gets a use at the replay, so that the move planner
 * has it on the device there. Its peak is the peak with the recomputes.
 * With the host's side, the host issues the drop after use[k] and the remake
 * (mapping the memory, the chain's launches) before r (struct rc_params).
 *
 * The choice (rc_choose) is greedy: while the peak is over the target, the
 * candidate whose away operations cover the operation at the peak with the
 * most bytes freed per second of replay; an operation no candidate left
 * covers is set aside, and the choice goes on at the highest of the others.
 *
 * Recompute from a recomputed input: every input must be on the device at
 * a replay. Where a pick has an input away there, that pick's replay is
 * hoisted to the same operation (its chain goes first: the executor remakes
 * a dropped input when the replay that reads it makes it resident), and so
 * on for the inputs of the hoisted one; where X is an input of a pick whose
 * replay falls while X would be away, X's replay goes right before that
 * one. A hoisted buffer is away for less, so a candidate is taken only
 * where the memory at the peak still falls, and passed over (a conflict)
 * where it, or a pick hoisted for it, would be away for less than
 * RC_MIN_AWAY_S of the device's time, or where it needs more than
 * RC_MAX_HOISTS hoists. A candidate is passed over also where its buffer or
 * an input is used on a stream other than the chain's: the replay runs on
 * the chain's stream and nothing orders it against another; and where its
 * buffer would be away for less than RC_MIN_AWAY_S at its r_hi.
 *
 * Pure C: no CUDA, no I/O, no globals, no threads, no clocks.
 */
#ifndef EBB_RECOMPUTE_H
#define EBB_RECOMPUTE_H

#include <stdint.h>

#include "plan.h"
#include "replay.h"

/* The host's seconds to issue one replayed launch, when rc_params gives 0. */
#define RC_HOST_LAUNCH_S 5e-6

/*
 * The least device time a picked buffer is away (its operations use[k] + 1
 * .. r - 1). The executor remakes a buffer only once its drop has released
 * the memory, which happens as the device passes use[k]: a host that is
 * ahead waits for that, and the device then has only the away operations
 * queued while the host issues the replay and what follows. Shorter gaps
 * would leave the device idle, or (remade without the wait) keep the memory
 * the plan counts as free. As the executor's lead for a restore.
 */
#define RC_MIN_AWAY_S 1e-3

/* The most picks one candidate may hoist (recompute from a recomputed
 * input, above): a layer's chain of elementwise producers is a few deep. */
#define RC_MAX_HOISTS 64

/* One gap bridged by recompute. */
struct rc_pick {
	uint32_t cand;		/* index in the replay_set's c[] */
	uint32_t r;		/* the chain is launched right before operation r: the
				 * candidate's r_hi, or earlier where a pick that reads
				 * its buffer has its replay there (hoisted) */
};

struct rc_params {
	double host_launch_s;	/* host seconds to issue one replayed launch
				 * (0: RC_HOST_LAUNCH_S) */
	/* host seconds of a drop (its memory's release, as an offload's) and of
	 * a remake (mapping the memory again, as a restore, launches aside);
	 * 0: none counted */
	double host_drop_s, host_remake_s;
};

/* Why rc_choose passed candidates over (each counted once). */
struct rc_skipped {
	uint64_t unusable;	/* not verified (usable[i] == 0) */
	uint64_t streams;	/* X or an input is used on another stream than the
				 * chain's first operation */
	uint64_t conflict;	/* picks' hoists (recompute from a recomputed input)
				 * would leave it or one of them away too briefly */
	uint64_t brief;		/* away for less than RC_MIN_AWAY_S */
};

/*
 * The inputs of candidate c of rs: every buffer other than c->buf that has
 * a use at one of c's chain operations, each once, increasing, into *out
 * (malloc'd; NULL when none) and *n. ix: prof_opindex_build's index of p
 * (NULL: one is built here). Returns 0, or -1 when out of memory.
 */
int rc_inputs(const struct prof *p, const struct prof_opindex *ix, const struct replay_set *rs,
    const struct replay_cand *c, uint32_t **out, uint32_t *n);

/*
 * Where a replay of candidate c of rs planned right before operation r goes:
 * r, or, where an input is freed after an operation after c's use before
 * the gap and before r (replay.h's window lets an input be freed after
 * r - 1), right before the first such operation, where the input still
 * exists. ix: prof_opindex_build's index of p.
 */
uint32_t rc_replay_at(const struct prof *p, const struct prof_opindex *ix,
    const struct replay_set *rs, const struct replay_cand *c, uint32_t r);

/*
 * The profile p with the n picks pk applied (recompute.h above), into out
 * (prof_init'd here, its own memory: free with prof_fini), and *orig
 * (malloc'd): the buffer of p each of out's buffers comes from. Buffers 0 ..
 * p->nbufs - 1 keep their indices; a picked buffer's later segments follow,
 * by buffer, then gap. The picks are of distinct gaps of rs with r in the
 * candidate's window, each input on the device at each replay (away at none:
 * a pick of the input's is remade there or before; rc_choose's picks are),
 * in any order. rp may be NULL (defaults). Returns 0, or -1 when
 * out of memory or a pick is not such (out and *orig then empty).
 */
int rc_derive(const struct prof *p, const struct replay_set *rs, const struct rc_pick *pk,
    uint32_t n, const struct rc_params *rp, struct prof *out, uint32_t **orig);

/*
 * Choose gaps of rs to recompute, greedily (recompute.h above), until the
 * memory with them is at or under target at every operation some candidate
 * left covers: an operation at the peak that none covers is set aside, and
 * the next highest taken (the moves may lower it). usable: per candidate, whether it may be picked
 * (NULL: all); stream: per operation of p, a stream id (NULL: all one).
 * The picks go into *out (malloc'd, by buffer, then gap; NULL when none) and
 * *n, the reasons candidates were passed over into *sk (may be NULL), and
 * the peak with the picks, which is prof_peak of rc_derive's profile, into
 * *peak (may be NULL). Returns 0, or -1 when out of memory (*out NULL).
 */
int rc_choose(const struct prof *p, const struct replay_set *rs, const uint8_t *usable,
    const uint32_t *stream, uint64_t target, struct rc_pick **out, uint32_t *n,
    struct rc_skipped *sk, uint64_t *peak);

#endif
