/*
 * plan.h: the access profile of one training iteration, and the planner.
 *
 * Profile: the iteration's operations in issue order, each with the time
 * it keeps the device busy, and every buffer the iteration holds: its size,
 * the operation from which it exists and the one after which it is freed,
 * and the operations that use it. A buffer that exists before the
 * iteration and after it (a weight, optimizer state) is persistent: the
 * gap from its last use to its first use in the next iteration wraps.
 *
 * Planner: chooses gaps between uses to bridge through host memory until
 * the device memory peak is at or under a target. A bridged gap is an
 * offload (a D2H copy issued right after the use before the gap; the
 * memory is released when the copy is done) and, unless the buffer is
 * freed first, a restore (an H2D copy issued after an operation chosen so
 * that it is done before the use after the gap). Both copy engines are
 * simulated: copies of one direction run one at a time, in issue order, at
 * that direction's bandwidth; restores are placed as late as the engine
 * allows (latest deadline first), so memory comes back as late as it can.
 *
 * Greedy: while the peak is over the target, take the gap that covers the
 * operation at the peak and frees its memory for longest (which is the
 * gap with the most byte-seconds saved per second of copy time), keep it
 * if the simulation says the peak there fell and, unless stalls are
 * allowed, every restore is still on time; otherwise never try it again.
 * With stalls allowed, when no gap covers the peak: a restore held until
 * after the peak, else the device waiting at the peak for an offload that
 * lands after it (the stall is the wait; the operations after it are not
 * moved later, which leaves the copies less time than they would have).
 *
 * Time is seconds from the iteration's start on a device that runs the
 * operations one after another.
 *
 * The job's own copies between host and device share the copy engines:
 * one queued behind ebb's copies of its direction waits for all of them
 * (bench/copyqueue.py measures it), and the job's stream with it. So an offload that would
 * still be copying when a copy of the job's to the host starts is issued
 * after that copy instead (not when stalls are allowed: there the job's
 * copy waits), also after the first copy of the next iteration for a gap
 * that wraps, and a restore is placed to end before a copy of the job's to
 * the device starts; what still waits is predicted as a stall.
 *
 * Pure C: no CUDA, no I/O, no globals, no threads, no clocks. plan_make
 * (src/common/planrun.h) runs the two searches, the one for waits on a thread of
 * its own, under a time limit.
 */
#ifndef EBB_PLAN_H
#define EBB_PLAN_H

#include <stddef.h>
#include <stdint.h>

#define PROF_NONE UINT32_MAX

struct prof_buf {
	uint64_t size;		/* device bytes it holds */
	uint64_t span;		/* its bytes where they are held elsewhere (a small
				 * buffer in a slab, counted in fixed: size 0), which a
				 * replay that writes it takes in scratch; 0: size */
	uint64_t key;		/* the caller's name for it */
	uint32_t alloc;		/* first operation it exists at; PROF_NONE: before the iteration */
	uint32_t free;		/* last operation it exists at; PROF_NONE: after the iteration */
	uint8_t movable;
	uint32_t nuse, cap;
	uint32_t *use;		/* operations that use it, increasing */
	uint8_t *acc;		/* PROF_ACC_* of each use (parallel to use); NULL: none
				 * measured */
};

/* How an operation accesses a buffer it uses (struct prof_buf's acc). Only a
 * measurement makes a use READ; what is not measured counts as written. */
#define PROF_ACC_UNKNOWN 0	/* not measured: it may have read and written it */
#define PROF_ACC_READ 1		/* measured: the buffer's bytes were the same after it */
#define PROF_ACC_WRITE 2	/* measured: it changed the buffer's bytes */

/* The copy engine an operation of the job's uses (struct prof's xfer). */
#define PROF_XFER_D2H 1		/* a copy from device to host memory */
#define PROF_XFER_H2D 2		/* a copy from host to device memory */

struct prof {
	uint32_t nops;
	double *dur;		/* seconds each operation keeps the device busy */
	uint8_t *xfer;		/* PROF_XFER_* of each operation, or 0 */
	/* the job's thread (prof_host; NULL: not known, the host keeps ahead) */
	double *host;		/* seconds from issuing each operation to issuing the
				 * next, without ebb's own work */
	uint8_t *barrier;	/* the host waits there until the device has done
				 * everything issued (a synchronisation) */
	struct prof_buf *buf;
	uint32_t nbufs, cap;
	uint64_t fixed;		/* bytes held throughout that never move */
	/* recompute (prof_replayable): each operation can be launched again as it
	 * was, its accesses measured; NULL: none can */
	uint8_t *replay;
	/* each operation may write buffers it does not reference (it reads a
	 * table of pointers, or its accesses were not measured) (prof_wild);
	 * NULL: none does */
	uint8_t *wild;
	/* the phases the job marked (NCCL sends and receives to a stage beside
	 * this rank, phase.h's cuts): their first operations, increasing, the
	 * first 0 (prof_cut); NULL: none, the phases are the memory's turns */
	uint32_t *cut;
	uint32_t ncut, cutcap;
};

/* Returns 0, or -1 when out of memory. Durations start at 0. */
int prof_init(struct prof *p, uint32_t nops);
void prof_fini(struct prof *p);

/* A buffer that exists from operation alloc (PROF_NONE: from before the
 * iteration). Returns its index, or -1 when out of memory. */
int64_t prof_add(struct prof *p, uint64_t size, uint64_t key, uint32_t alloc, int movable);

/* Operation op uses buffer b (ops must not decrease). Returns 0 or -1. */
int prof_use(struct prof *p, uint32_t b, uint32_t op);

/* Operation op accessed buffer b as acc (PROF_ACC_*, measured). A second
 * measurement of the same use keeps the larger (a write stays a write).
 * Returns 0, 1 when b has no use at op (nothing set), or -1 when out of
 * memory. */
int prof_access(struct prof *p, uint32_t b, uint32_t op, unsigned acc);

/* The buffers each operation uses: those of operation i are
 * buf[start[i] .. start[i + 1]), increasing. */
struct prof_opindex {
	uint32_t *start;	/* nops + 1 */
	uint32_t *buf;
};

/* Build ix for p. Returns 0, or -1 when out of memory (ix empty). */
int prof_opindex_build(const struct prof *p, struct prof_opindex *ix);

/* Free what ix holds, and empty it. */
void prof_opindex_free(struct prof_opindex *ix);

/* The index of buffer b's use at operation op, or -1 when it has none. */
int64_t prof_use_index(const struct prof_buf *b, uint32_t op);

/* How operation op accesses buffer b: PROF_ACC_*, PROF_ACC_UNKNOWN where
 * not measured or not used there. */
unsigned prof_access_of(const struct prof *p, uint32_t b, uint32_t op);

/* Operation op can be launched again as it was (a launch whose record is
 * complete and whose accesses were measured). Returns 0 or -1 when out of
 * memory. */
int prof_replayable(struct prof *p, uint32_t op);

/* Operation op may write buffers it does not reference. Returns 0 or -1 when
 * out of memory. */
int prof_wild(struct prof *p, uint32_t op);

/* A phase the job marked starts at operation op (struct prof's cut, which
 * starts with 0 however the first is given; an op not after the last one
 * given is ignored). Returns 0, or -1 when out of memory. */
int prof_cut(struct prof *p, uint32_t op);

/* Give the profile the host's side (host and barrier, zeros). Returns 0 or
 * -1 when out of memory. */
int prof_host(struct prof *p);

/*
 * The host's side from a recording of nops operations: issue[i], when the
 * host issued operation i (issue[nops]: the iteration's end; 0: an
 * operation ebb issued itself), ebb[i] the host time ebb had spent by then
 * in its part of the job's calls (NULL: none): its recording, its waits
 * for room, restores on use, evictions, what the plan replaces with its
 * own moves, call[i] the driver's time in operation i's call (0: not
 * timed; NULL: none), sync[i] whether the host waited there for the
 * device, all in ns. The job's own pace is the time from issuing one
 * operation to issuing the next less ebb's in between, and less what a
 * call waited in the driver for the device (the device behind, as it is
 * while ebb moves without a plan: a launch waits for room in the device's
 * queue, a copy to pageable memory for the work before it): a call that
 * took over PROF_QUEUED_X times the median call and PROF_QUEUED_NS more
 * counts at the median. A synchronisation is a barrier (the planner replays
 * the wait): issued when its call was made, its pace is what follows the
 * wait, its gap less its call (0 where the call is not timed); 0 around an
 * operation ebb issued itself.
 * *queued_s (when not NULL): the calls' time left out so. Returns 0 or -1
 * when out of memory.
 */
int prof_host_pace(struct prof *p, const uint64_t *issue, const uint64_t *ebb,
    const uint64_t *call, const uint8_t *sync, double *queued_s);
#define PROF_QUEUED_X 4
#define PROF_QUEUED_NS 20000

/* The seconds the device waits for the host over one iteration with nothing
 * moved (plan.h's host_idle_before_s); 0 without the host's side. */
double prof_host_idle(const struct prof *p);

/* Operation op is a copy of the job's between host and device (PROF_XFER_*). */
void prof_xfer(struct prof *p, uint32_t op, unsigned dir);

/* How many of the operations are copies of the job's in direction dir. */
uint32_t prof_xfers(const struct prof *p, unsigned dir);

/* Buffer b is freed after operation op. */
void prof_free(struct prof *p, uint32_t b, uint32_t op);

/* The bytes buffer b takes in a replay's scratch (struct prof_buf's span). */
static inline uint64_t
prof_span(const struct prof_buf *b)
{
	return b->span != 0 ? b->span : b->size;
}

/* Whether buffer b exists before and after the iteration. */
static inline int
prof_persistent(const struct prof_buf *b)
{
	return b->alloc == PROF_NONE && b->free == PROF_NONE;
}

/* The peak of the memory held (fixed included) with nothing moved, and at
 * which operation (*at, may be NULL). */
uint64_t prof_peak(const struct prof *p, uint32_t *at);

/* The sum of the durations: the iteration's time with nothing moved. */
double prof_time(const struct prof *p);

/* The fixed cost of one copy the planner counts by default: its launch, and
 * mapping or unmapping a handle (device-facts.md). */
#define PLAN_COPY_LATENCY_S 30e-6

struct plan_params {
	uint64_t target;	/* bytes, fixed included */
	double d2h_bps, h2d_bps;	/* bytes a second of each copy direction */
	double copy_latency_s;	/* fixed cost of one copy */
	uint64_t min_bytes;	/* smallest buffer worth moving */
	/* with the profile's host side: the host's seconds to issue one move */
	double host_offload_s;	/* an offload */
	double host_restore_s;
	double host_drop_s;	/* a recompute's drop */
	double host_remake_s;	/* a recompute's remake: mapping its memory again (its
				 * launches are counted apart, struct rc_params) */
	int allow_stall;	/* 0: only gaps whose restores are on time */
	int no_waits;		/* with allow_stall: the greedy search's stalls only, not
				 * also waits where the floor wants them (plan_make,
				 * plan_waits_wanted) */
	double time_limit_s;	/* plan_make's seconds at most (0: no limit): past them
				 * the search stops where it is (plan.time_capped) */
	int phases;		/* the greedy search takes one decision for a buffer and
				 * its siblings in the phases alike (phase.h's
				 * phase_siblings), checked together (search.c) */
};

struct plan_move {
	uint32_t buf;		/* index in the profile */
	uint32_t after;		/* the use before the gap; PROF_NONE: kept on the host */
	uint32_t issue;		/* offload after this operation: after, or a later copy of
				 * the job's to the host it must not delay, which for a
				 * gap that wraps may be in the next iteration (then
				 * issue < after) (PROF_NONE with after) */
	uint32_t at;		/* issue the restore after this operation; PROF_NONE: none */
	uint32_t use;		/* the use the restore is for; PROF_NONE: freed on the host */
	uint8_t wrap;		/* the restore is in the next iteration */
	/* simulated, in seconds from the start of the iteration of the offload */
	double d2h_start, d2h_end, h2d_start, h2d_end;
	double stall_s;		/* how late the restore is */
	double delay_s;		/* how long earlier late restores have delayed the
				 * device by its use (h2d_start and h2d_end are of the
				 * timeline with those delays) */
	int64_t saved_first, saved_last;	/* operations it frees the memory at, from the
						 * offload's iteration on (first > last: none) */
};

struct plan {
	struct plan_move *mv;
	uint32_t n;
	uint64_t peak_before;	/* bytes, nothing moved */
	uint64_t peak;		/* bytes, with the moves */
	uint32_t peak_op;
	double step_before_s;	/* sum of the durations */
	double step_s;		/* predicted: the durations, the stalls, and the
				 * device waiting for the host */
	double stall_s;
	/* with the profile's host side: the device waiting for the host to issue
	 * the next operation, over one iteration (else 0) */
	double host_idle_before_s;	/* nothing moved */
	double host_idle_s;		/* with the moves, whose issue takes host time */
	uint64_t bytes_d2h, bytes_h2d;	/* per iteration, steady state */
	int met;		/* peak <= target */
	int stall_capped;	/* stopped short of the target: the predicted stalls
				 * reached the iteration's own time (step_before_s and
				 * host_idle_before_s: the device waiting for the host) */
	int time_capped;	/* the search ran out of pp->time_limit_s: it stopped
				 * where it was (short of the target, or with a plan a
				 * longer search may better) */
	int waited;		/* under the bound: its stalls are waits of the device
				 * placed where the floor wants them (plan_make) */
	struct plan_wait {
		uint32_t op;	/* the device waits before this operation */
		double s;	/* this long, by the plan */
	} *waits;		/* of a waited plan, by operation */
	uint32_t nwaits;
	uint32_t simulations;	/* of both copy engines, that the search ran (its cost:
				 * each is linear in the operations) */
	uint32_t shared;	/* of the moves, those chosen with a sibling's
				 * (plan_params' phases) */
	uint64_t bound;		/* where the target is under it: the lowest peak
				 * without stalls, from which the plan went on with
				 * them (allow_stall) or stopped; 0: not reached */
};

/*
 * A caller's test of whether a search must stop where it is (its plan so
 * far stands, with time_capped set): fn(arg) returns nonzero to stop. The
 * searches call it once a round; they read no clock themselves (plan_make,
 * src/common/planrun.h, passes its deadline this way). NULL, or fn NULL: never.
 */
struct plan_stop {
	int (*fn)(void *arg);
	void *arg;
};

/*
 * The greedy search: moves without stalls first; when those run out short
 * of the target and pp->allow_stall, more with stalls from there (out->bound:
 * the peak where it went on). Until the target is met, nothing more helps,
 * or stop says so. Returns 0 (out filled; out->met says whether the target
 * was reached), or -1 when out of memory. Free with plan_fini.
 */
int plan_greedy(const struct prof *p, const struct plan_params *pp,
    const struct plan_stop *stop, struct plan *out);

/*
 * The search for waits: stalls as waits where plan_floor wants them, the
 * iteration so padded planned without stalls, for a lower peak each round
 * (up to 12), and short of the target, on from the last with the greedy
 * search's stalls. Returns 0 (out filled, out->waits: the waits); 1 when it
 * gains nothing (the greedy plan's stall, greedy_stall, is about what the
 * floor's waits cost already, or no wait helps; out is then empty); -1 when
 * out of memory. With greedy_stall NAN (not known yet: the greedy search
 * runs beside it) it goes on regardless, and *first_got is what the floor's
 * waits cost in its first round (NAN: none reached), for plan_waits_no_gain.
 */
int plan_waits(const struct prof *p, const struct plan_params *pp, double greedy_stall,
    const struct plan_stop *stop, double *first_got, struct plan *out);

/*
 * The rule between the two searches' plans. plan_waits_wanted: whether to
 * search for waits at all (pp->allow_stall, not pp->no_waits).
 * plan_waits_moot: whether the greedy plan (made: plan_greedy's return)
 * leaves them nothing to do (failed, not wanted, the target not under the
 * bound, no moves, or out of time). plan_waits_no_gain: whether a greedy
 * plan's stall is about what the waits cost in their first round already
 * (first_got NAN: not known, 0). plan_pick: the better of the greedy plan
 * and the waits' (met, then faster; of two that miss, the lower peak with no
 * more stall) into greedy (waited set when it is the waits'); the other is
 * freed.
 */
int plan_waits_wanted(const struct plan_params *pp);
int plan_waits_moot(const struct plan_params *pp, int made, const struct plan *greedy);
int plan_waits_no_gain(double greedy_stall, double first_got);
void plan_pick(struct plan *greedy, struct plan *waited);

/* Free what a plan holds (plan_greedy, plan_waits, plan_make), and empty it. */
void plan_fini(struct plan *pl);

/*
 * A floor under every plan, not only this planner's: no way of moving whole
 * buffers between their uses through host memory, at pp's bandwidths, with
 * the device waiting stall_s in all at most, holds the iteration's peak
 * under it (op: where, may be NULL). At an operation, a buffer alive there
 * is away only if its copy to the host, after its last use, has landed, and
 * its copy back lands by its next use; one copy engine a direction. So for
 * any windows of a seconds before and b after, of the buffers used in
 * either window at most d2h * a + h2d * b bytes are away, and the stall,
 * which lengthens the windows it falls in, adds at most the faster
 * engine's bandwidth times stall_s: the rest, and what cannot move, is on
 * the device. Buffers allocated
 * in the iteration and not yet used need no copy (nothing to keep), and the
 * job's own copies are left out, so the floor is low, never high. Stalls
 * lengthen only the windows they fall in: operations whose windows do not
 * meet need theirs apart. Evaluated at up to about 1100 operations. Returns
 * 0 when out of memory.
 */
uint64_t plan_floor(const struct prof *p, const struct plan_params *pp, double stall_s,
    uint32_t *op);

/*
 * The same, for several questions of one profile: plan_floor_new looks at
 * the operations once (NULL when out of memory; pp must outlive it);
 * plan_floor_peak answers plan_floor's question; plan_floor_stall the other
 * way round: the least stall, in seconds, with which any plan holds the peak
 * at or under peak (INFINITY: none does; *op: the operation that needs the
 * most). The stall is a floor too: operations whose windows do not meet
 * need their stalls apart, and those are added up.
 */
struct plan_floor *plan_floor_new(const struct prof *p, const struct plan_params *pp);
uint64_t plan_floor_peak(struct plan_floor *fl, double stall_s, uint32_t *op);
double plan_floor_stall(struct plan_floor *fl, uint64_t peak, uint32_t *op);
void plan_floor_free(struct plan_floor *fl);

/*
 * A tighter floor on the stall, at more cost: the least stall, in seconds,
 * with which any plan holds the peak at or under peak. Every operation over
 * it needs, in each window before it, after it, and across it, the stall
 * that lets the engines copy what the window holds beyond peak (bytes over
 * peak by the bandwidth that the stall lends: the copy engine's of the
 * window's direction, the faster one across); each such need is a bound of
 * every plan, and these are summed over the windows that do not share the
 * stall, where plan_floor_stall takes one window an operation. The least
 * total that meets them all is found by the interval greedy, exact on a
 * line: the iteration is cut at 16 points in turn, the needs whose windows
 * hold the cut left out, and the most of the 16 answers is returned.
 * INFINITY: no plan does (what cannot move is over peak); -1: out of
 * memory. Takes about as long as one floor refined at peak (a W2 profile:
 * a few tenths of a second).
 */
double plan_floor_least(const struct prof *p, const struct plan_params *pp, uint64_t peak);

/* What holds the memory at one operation under a plan, in bytes. */
struct plan_explain {
	uint64_t held;		/* every buffer alive there, fixed included */
	uint64_t moved;		/* of them, on the host by a move */
	uint64_t used;		/* used by the operation itself */
	uint64_t unmovable;	/* not movable, or under min_bytes, and fixed */
	uint64_t kept;		/* movable, idle there, but no gap of theirs is bridged */
};

/* Whether move mv keeps its buffer off the device at operation op of an
 * iteration of nops operations, in the steady state (its saved span, which
 * may reach into the next iteration, folded onto one). */
int plan_move_holds(const struct plan_move *mv, uint32_t op, uint32_t nops);

/* Explain the memory at operation op (the plan's peak_op, say). */
void plan_explain(const struct prof *p, const struct plan_params *pp, const struct plan *pl,
    uint32_t op, struct plan_explain *out);

#endif
