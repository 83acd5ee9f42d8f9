/*
 * verify.c: each recompute candidate replayed once into a scratch buffer and
 * compared with the buffer the job holds (see verify.h).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "buftab.h"
#include "ebb.h"
#include "exec_int.h"
#include "log.h"
#include "lrec.h"
#include "mover.h"
#include "plan.h"
#include "probe.h"
#include "real.h"
#include "recompute.h"
#include "replay.h"
#include "streams.h"
#include "verify.h"

/* The byte the scratch for the buffer is filled with before each replay;
 * the part for the other buffers its chain writes is zeroed, as a remake
 * zeroes it (remake.c). */
#define POISON 0x5a

/* Bytes of digests a candidate takes: the scratch's and the buffer's, four
 * words each (probe_hash's). */
#define SLOT_BYTES 64

/* The most buffers one job makes resident (its own and its chain's inputs). */
#define JOB_BUFS 64

/* The parameter bytes of a launch are remade on the stack up to this size. */
#define PARAMS_MAX 4096

/* The most other buffers a chain writes into scratch (replay_scratch). */
#define SCRATCH_BUFS 8

/* One candidate: replay its chain before the operation at position at. */
struct job {
	uint32_t at;		/* where it is replayed: the candidate's r_hi, or before
				 * an input freed right before it (rc_replay_at) */
	uint32_t cand;		/* its index in the candidates */
	uint32_t x;		/* the buffer's index in the profile */
	uint64_t size;		/* its bytes */
	uint32_t first, n;	/* its chain: v.chain[first .. first + n) */
	uint32_t sc[SCRATCH_BUFS];	/* the other buffers its chain writes, by profile
					 * index: into the scratch after its own */
	uint64_t sc_off[SCRATCH_BUFS];	/* where, from the scratch's start */
	uint32_t nsc;
	uint64_t own;		/* the scratch it takes for its buffer (aligned), */
	uint64_t span;		/* and for that and the others' */
	uint8_t state;		/* J_* */
};

enum { J_WAITING, J_TRIED, J_SKIPPED };

/* Where a verification is (struct verify's state). */
enum {
	V_OFF,		/* nothing to verify */
	V_PREPARED,	/* candidates taken; the next iteration start begins */
	V_ACTIVE,	/* this iteration replays */
	V_READING	/* replays issued: the digests are read once done */
};

/* The verification: one at a time. Guarded by ebb_state_lock. */
static struct verify {
	int state;			/* V_* */
	const struct lrec_set *ls;	/* the recording's launch records (the caller's) */
	uint8_t *ok;			/* each candidate's result: remade bit for bit */
	uint32_t ncand;
	int finished;			/* the results in ok are complete */
	struct xbuf *bufs;		/* each profile buffer's name, by index */
	uint32_t nbufs;
	struct job *job;		/* by at */
	uint32_t njobs, next;		/* next: the first job not yet reached */
	const struct lrec **chain;	/* the jobs' chains */
	uint32_t *chain_pos;		/* the position of each */
	struct lrec_argset args;	/* this iteration's arguments of every chain launch */
	struct ebb_buf *scratch_buf;	/* the scratch (mover_own_alloc); NULL: none yet */
	struct ebb_buf *dig_buf;	/* the digests (the same) */
	CUdeviceptr scratch, dig;	/* their addresses */
	uint64_t scratch_bytes;		/* what the scratch is to hold */
	struct ebb_stream *last_st;	/* the stream of the last replay */
	uint64_t last_seq;		/* the operation it went before */
	uint64_t *host;			/* the digests read back */
	CUevent done;			/* recorded after each replay */
	struct verify_stats st;
} v;

/* Free what a verification holds on the host. */
static void
free_host(void)
{
	v.ls = NULL;
	free(v.bufs);
	free(v.job);
	free(v.chain);
	free(v.chain_pos);
	lrec_argset_fini(&v.args);
	free(v.host);
	v.bufs = NULL;
	v.job = NULL;
	v.chain = NULL;
	v.chain_pos = NULL;
	v.host = NULL;
	v.njobs = v.next = 0;
}

/* Order jobs by their point. */
static int
by_at(const void *a, const void *b)
{
	const struct job *x = a, *y = b;

	return x->at < y->at ? -1 : x->at > y->at;
}

/* Whether the records of a chain can be replayed where verification needs:
 * all relocated, on one stream that is not a thread's own. */
static int
one_stream(const struct lrec *const *c, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		if (c[i] == NULL || c[i]->state != LREC_REPLAYABLE || !c[i]->relocated ||
		    c[i]->per_thread || c[i]->tracker == NULL || c[i]->tracker != c[0]->tracker ||
		    c[i]->nbytes > PARAMS_MAX)
			return 0;
	return 1;
}

int
verify_prepare(const struct prof *p, const struct replay_set *rs, const struct lrec_set *ls,
    const struct xbuf *bufs)
{
	verify_drop();
	free(v.ok);
	v.ok = calloc(rs->n ? rs->n : 1, 1);
	v.ncand = rs->n;
	v.finished = 0;
	v.job = calloc(rs->n ? rs->n : 1, sizeof *v.job);
	v.chain = calloc(rs->nops_used ? rs->nops_used : 1, sizeof *v.chain);
	v.chain_pos = malloc((rs->nops_used ? rs->nops_used : 1) * sizeof *v.chain_pos);
	v.bufs = malloc((p->nbufs ? p->nbufs : 1) * sizeof *v.bufs);
	v.ls = ls;
	if (v.ok == NULL || v.job == NULL || v.chain == NULL || v.chain_pos == NULL || v.bufs == NULL ||
	    lrec_argset_init(&v.args, ls, rs->ops, rs->nops_used) < 0) {
		free_host();
		return -1;
	}
	memcpy(v.bufs, bufs, p->nbufs * sizeof *v.bufs);
	v.nbufs = p->nbufs;
	for (uint32_t i = 0; i < rs->nops_used; i++) {
		v.chain[i] = lrec_at(v.ls, rs->ops[i]);
		v.chain_pos[i] = rs->ops[i];
	}
	uint32_t nj = 0;
	uint64_t unfit = 0;	/* writing too many other buffers: never tried */
	struct prof_opindex ix;
	if (prof_opindex_build(p, &ix) < 0) {
		free_host();
		return -1;
	}
	for (uint32_t i = 0; i < rs->n; i++) {
		const struct replay_cand *c = &rs->c[i];
		struct job *j = &v.job[nj];
		/* where the plan would replay it: its inputs all exist there */
		*j = (struct job){ .at = rc_replay_at(p, &ix, rs, c, c->r_hi), .cand = i,
			.x = c->buf, .size = c->bytes, .first = c->chain_first, .n = c->nchain };
		/* its own first, then the others' */
		uint64_t own = (c->bytes + REPLAY_SCRATCH_ALIGN - 1) / REPLAY_SCRATCH_ALIGN *
		    REPLAY_SCRATCH_ALIGN, others = 0;
		if (c->scratch > 0) {
			j->nsc = replay_scratch(p, rs, c, j->sc, j->sc_off, SCRATCH_BUFS, &others);
			if (j->nsc > SCRATCH_BUFS) {
				unfit++;
				continue;
			}
			for (uint32_t k = 0; k < j->nsc; k++)
				j->sc_off[k] += own;
		}
		j->own = own;
		j->span = own + others;
		nj++;
	}
	prof_opindex_free(&ix);
	v.njobs = nj;
	qsort(v.job, v.njobs, sizeof *v.job, by_at);
	memset(&v.st, 0, sizeof v.st);	/* the counts are the last plan's */
	v.st.candidates = rs->n;
	v.st.skipped = v.st.skipped_unfit = unfit;
	v.state = v.njobs > 0 ? V_PREPARED : V_OFF;
	return 0;
}

/* Take the host's side and the event for the replays; the device memory
 * comes at the first replay (take_scratch). Returns 0, or -1 (said). */
static int
setup_memory(void)
{
	uint64_t most = 0;

	for (uint32_t i = 0; i < v.njobs; i++)
		most = v.job[i].span > most ? v.job[i].span : most;
	v.scratch_bytes = most;
	v.host = malloc((size_t)v.njobs * SLOT_BYTES);
	if (v.host == NULL)
		return -1;
	CUresult r = CUDA_SUCCESS;
	ebb_inside = 1;
	if (v.done == NULL &&
	    (r = ebb_real.cuEventCreate(&v.done, CU_EVENT_DISABLE_TIMING)) != CUDA_SUCCESS)
		v.done = NULL;
	ebb_inside = 0;
	if (r != CUDA_SUCCESS) {
		ebb_log(EBB_LOG_WARN, "cannot set up the replay of recompute candidates (error %d): "
		    "none is verified, and nothing is recomputed", (int)r);
		return -1;
	}
	return 0;
}

/*
 * The scratch, as large as the largest candidate, and the digests, from the
 * mover: within EBB_LIMIT (it makes room as for an allocation of the job's,
 * which is why this waits for the first replay, where an operation's
 * buffers are made resident anyway) and never moved. Returns 0, or -1 when
 * there is no room (said once; no candidate is tried).
 */
static int
take_scratch(void)
{
	static int said;

	if (v.scratch_buf != NULL)
		return 0;
	if (v.scratch_bytes == 0)
		return -1;
	CUresult r = mover_own_alloc(v.scratch_bytes, &v.scratch_buf);
	if (r == CUDA_SUCCESS)
		r = mover_own_alloc((size_t)v.njobs * SLOT_BYTES, &v.dig_buf);
	if (r != CUDA_SUCCESS) {
		mover_own_free(v.scratch_buf, NULL, 0);
		v.scratch_buf = NULL;
		v.scratch_bytes = 0;	/* not again this time */
		ebb_log_once(&said, EBB_LOG_WARN, "no room within EBB_LIMIT for the scratch that "
		    "replaying recompute candidates once takes (error %d): none is verified, and "
		    "nothing is recomputed", (int)r);
		return -1;
	}
	v.scratch = v.scratch_buf->addr;
	v.dig = v.dig_buf->addr;
	return 0;
}

/* Give the scratch and the digests back to the mover once the last replay's
 * stream has passed them. */
static void
free_device(void)
{
	mover_own_free(v.scratch_buf, v.last_st, v.last_seq);
	mover_own_free(v.dig_buf, v.last_st, v.last_seq);
	v.scratch_buf = v.dig_buf = NULL;
	v.scratch = v.dig = 0;
	v.last_st = NULL;
}

/* The digests are in: each job tried is verified or failed. */
static void
compare(void)
{
	for (uint32_t i = 0; i < v.njobs; i++) {
		const struct job *j = &v.job[i];
		if (j->state != J_TRIED)
			continue;
		const uint64_t *d = v.host + (size_t)i * (SLOT_BYTES / 8);
		if (d[0] == d[4] && d[1] == d[5]) {
			v.st.verified++;
			v.ok[j->cand] = 1;
		} else {
			v.st.failed++;
			const struct lrec *r = v.chain[j->first];
			ebb_log(EBB_LOG_DEBUG, "recompute candidate %u (buffer %u, %llu bytes, replayed "
			    "before %u; %u launches from position %u, function %#llx%s) not remade bit "
			    "for bit", j->cand, j->x, (unsigned long long)j->size, j->at, j->n,
			    v.chain_pos[j->first], (unsigned long long)(r != NULL ? r->func : 0),
			    j->nsc > 0 ? ", writing others into scratch" : "");
		}
	}
}

/* The replays issued: read the digests once the device has done them.
 * Returns 1 when they were read (or cannot be), else 0. */
static int
read_back(void)
{
	ebb_inside = 1;
	CUresult q = ebb_real.cuEventQuery(v.done);
	ebb_inside = 0;
	if (q == CUDA_ERROR_NOT_READY)
		return 0;
	/* the replays are done; the copy, on the legacy stream, also waits for what
	 * the job queued there meanwhile (once) */
	ebb_inside = 1;
	CUresult r = q == CUDA_SUCCESS ?
	    ebb_real.cuMemcpyDtoH_v2(v.host, v.dig, (size_t)v.njobs * SLOT_BYTES) : q;
	ebb_inside = 0;
	if (r == CUDA_SUCCESS)
		compare();
	else
		ebb_log(EBB_LOG_WARN, "cannot read the recompute candidates' digests back (error "
		    "%d): none is verified", (int)r);
	free_device();
	return 1;
}

void
verify_boundary(void)
{
	switch (v.state) {
	case V_PREPARED:
		if (setup_memory() < 0) {
			v.st.skipped += v.njobs;
			v.st.skipped_memory += v.njobs;
			free_host();
			v.state = V_OFF;
			return;
		}
		v.next = 0;
		v.state = V_ACTIVE;
		return;
	case V_ACTIVE:
		for (uint32_t i = v.next; i < v.njobs; i++) {
			v.st.skipped++;	/* its point was not reached */
			v.st.skipped_passed++;
		}
		v.next = v.njobs;
		v.state = V_READING;
		/* fall through */
	case V_READING:
		if (v.st.tried == 0 || read_back()) {
			if (v.st.tried == 0)
				free_device();
			free_host();
			v.state = V_OFF;
			v.finished = 1;
		}
		return;
	default:
		return;
	}
}

/* lrec_params's address of buffer buf: the scratch for the job's own
 * (ctx) and for the other buffers its chain writes, every other word as
 * this iteration passed it. */
/* The index of buf among the buffers job j's chain writes into scratch, or
 * j->nsc when it is none of them. */
static uint32_t
scratch_of(const struct job *j, uint32_t buf)
{
	uint32_t k = 0;

	while (k < j->nsc && j->sc[k] != buf)
		k++;
	return k;
}

static uint64_t
into_scratch(uint32_t buf, void *ctx)
{
	const struct job *j = ctx;
	uint32_t k = scratch_of(j, buf);

	if (buf == j->x)
		return v.scratch;
	return k < j->nsc ? v.scratch + j->sc_off[k] : LREC_KEEP;
}

/*
 * The arguments of chain launch r (at position q) as this iteration passed
 * them, with every word that pointed into job j's buffer pointing into the
 * scratch instead, into out. Returns 0, or -1 when this iteration's launch
 * there was not taken (another launch, or none).
 */
static int
this_iteration(const struct lrec *r, uint32_t q, const struct job *j, unsigned char *out)
{
	const unsigned char *a = lrec_argset_get(&v.args, q);

	if (a == NULL)
		return -1;
	return lrec_params(r, a, out, into_scratch, (void *)j);
}

/*
 * The buffers job j's replay uses, resolved into out (its own first), at
 * most JOB_BUFS. Returns how many, or 0 when one is not found (its profile
 * index into *missing; UINT32_MAX: too many).
 */
static size_t
job_buffers(const struct job *j, verify_resolve_fn resolve, void *ctx, struct ebb_buf **out,
    uint32_t *missing)
{
	size_t n = 0;

	*missing = j->x;
	out[n] = resolve(&v.bufs[j->x], ctx);
	if (out[n++] == NULL)
		return 0;
	for (uint32_t c = 0; c < j->n; c++) {
		const struct lrec *r = v.chain[j->first + c];
		for (uint32_t k = 0; k < r->nrelocs; k++) {
			uint32_t bi = r->relocs[k].buf;
			*missing = bi;
			if (bi >= v.nbufs)
				return 0;
			if (scratch_of(j, bi) < j->nsc)
				continue;	/* written into the scratch instead */
			struct ebb_buf *b = resolve(&v.bufs[bi], ctx);
			if (b == NULL || n == JOB_BUFS) {
				*missing = b == NULL ? bi : UINT32_MAX;
				return 0;
			}
			size_t q = 0;
			while (q < n && out[q] != b)
				q++;
			if (q == n)
				out[n++] = b;
		}
	}
	return n;
}

/* Replay job i into the scratch and hash both, on stream st. Returns 0, or
 * where it could not be (skipped), the counter of why. */
static uint64_t *
run_job(uint32_t i, uint64_t seq, struct ebb_stream *st, verify_resolve_fn resolve, void *ctx)
{
	struct job *j = &v.job[i];
	struct ebb_buf *bufs[JOB_BUFS];
	unsigned char params[PARAMS_MAX];

	if (!one_stream(v.chain + j->first, j->n) || v.chain[j->first]->tracker != st)
		return &v.st.skipped_stream;
	if (take_scratch() < 0)
		return &v.st.skipped_memory;
	uint32_t missing;
	size_t n = job_buffers(j, resolve, ctx, bufs, &missing);
	/* the profile's bytes are the buffer's range; the job's are its size */
	if (n == 0 || bufs[0]->mv.isize != j->size) {
		ebb_log(EBB_LOG_DEBUG, "recompute candidate %u (buffer %u, replayed before %u) not "
		    "tried: %s %u", j->cand, j->x, j->at, n > 0 ? "its buffer has another size" :
		    missing == UINT32_MAX ? "more than 64 buffers" : missing == j->x ?
		    "its buffer not found" : "not found: buffer", missing);
		return &v.st.skipped_buffers;
	}
	uint64_t bytes = bufs[0]->size;
	/* used by this operation: nothing moves them while the replay runs */
	for (size_t k = 0; k < n; k++) {
		buftab_note_use(bufs[k], (uintptr_t)st, seq);
		mover_touch(bufs[k]);
	}
	if (mover_ensure(bufs, n, st, seq) != CUDA_SUCCESS)
		return &v.st.skipped_resident;
	CUstream h = streams_handle(st);
	CUdeviceptr slot = v.dig + (CUdeviceptr)i * SLOT_BYTES;
	ebb_inside = 1;
	/* the others' scratch zeroed, as a remake has it: what the chain makes of
	 * the buffer may depend on what they hold (a GEMM's workspace holds the
	 * flags its cooperating blocks count on at zero) only as it does on
	 * zeros, which the comparison proves */
	int ok = ebb_real.cuMemsetD8Async(v.scratch, POISON, bytes, h) == CUDA_SUCCESS &&
	    (j->nsc == 0 || ebb_real.cuMemsetD8Async(v.scratch + j->own, 0, j->span - j->own, h) ==
	    CUDA_SUCCESS) && ebb_real.cuMemsetD8Async(slot, 0, SLOT_BYTES, h) == CUDA_SUCCESS;
	for (uint32_t c = 0; ok && c < j->n; c++) {
		const struct lrec *r = v.chain[j->first + c];
		ok = this_iteration(r, v.chain_pos[j->first + c], j, params) == 0 &&
		    lrec_launch(r, params) == CUDA_SUCCESS;
	}
	ok = ok && probe_hash(v.scratch, bytes, slot, h) == 0 &&
	    probe_hash(bufs[0]->addr, bytes, slot + SLOT_BYTES / 2, h) == 0 &&
	    ebb_real.cuEventRecord(v.done, h) == CUDA_SUCCESS;
	ebb_inside = 0;
	/* whatever was issued runs on st before seq: the scratch is free after it */
	v.last_st = st;
	v.last_seq = seq;
	return ok ? NULL : &v.st.skipped_launch;
}

void
verify_before(uint32_t pos, uint64_t seq, struct ebb_stream *st, const struct ebb_launch *l,
    verify_resolve_fn resolve, void *ctx)
{
	if (v.state != V_ACTIVE || st == NULL || streams_capturing(st))
		return;
	/* a chain's launch: its arguments as this iteration passes them */
	lrec_argset_take(&v.args, v.ls, pos, l);
	while (v.next < v.njobs && v.job[v.next].at < pos) {
		v.job[v.next++].state = J_SKIPPED;	/* its point passed unseen */
		v.st.skipped++;
		v.st.skipped_passed++;
	}
	for (; v.next < v.njobs && v.job[v.next].at == pos; v.next++) {
		uint64_t *why = run_job(v.next, seq, st, resolve, ctx);
		v.job[v.next].state = why == NULL ? J_TRIED : J_SKIPPED;
		if (why == NULL) {
			v.st.tried++;
		} else {
			v.st.skipped++;
			(*why)++;
		}
	}
}

void
verify_drop(void)
{
	/* the scratch is free once the last replay's stream has passed it */
	free_device();
	if (v.state != V_OFF)
		free_host();
	v.state = V_OFF;
}

const uint8_t *
verify_results(uint32_t *n)
{
	*n = v.finished ? v.ncand : 0;
	return v.finished ? v.ok : NULL;
}

void
verify_forget(void)
{
	verify_drop();
	free(v.ok);
	v.ok = NULL;
	v.ncand = 0;
	v.finished = 0;
}

void
verify_stats(struct verify_stats *out)
{
	*out = v.st;
}
