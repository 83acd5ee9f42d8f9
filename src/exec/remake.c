/*
 * remake.c: the plan's drops and remakes (see remake.h).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buftab.h"
#include "ebb.h"
#include "exec_int.h"
#include "log.h"
#include "lrec.h"
#include "mover.h"
#include "real.h"
#include "remake.h"
#include "streams.h"

/* The most buffers one remake makes resident (its inputs). */
#define MAX_INPUTS 64

/* A chain launch's parameter bytes are remade on the stack up to this size
 * (a launch writing into scratch). */
#define PARAMS_MAX 4096

/* The state of the running plan's recomputes. Guarded by ebb_state_lock. */
static struct remake {
	const struct remake_plan *p;	/* the running plan's; NULL: none */
	remake_resolve_fn resolve;		/* names in the running iteration */
	struct ebb_buf **xb;		/* each gap's buffer while it is dropped, else NULL */
	struct ebb_buf **inb;		/* its inputs then (parallel to p->inputs) */
	uint32_t next_drop;		/* gaps by drop_at: the first not yet reached */
	uint32_t *by_r;			/* gaps remade by the plan before their next use, by r */
	uint32_t nby_r, next_r;
	uint32_t *active;		/* gaps dropped now, in no order */
	uint32_t nactive;
	struct lrec_argset args;	/* this iteration's arguments of every chain launch */
	/* the scratch the chains that write other buffers write them into: one,
	 * as large as the largest gap's, held while the plan runs (mover_own_alloc)
	 * and used by one remake at a time: each waits on the device for the
	 * last one's chain (done) */
	struct ebb_buf *scratch;
	CUevent scratch_done;
	struct ebb_stream *scratch_st;	/* the stream of its last user, */
	uint64_t scratch_seq;		/* and the operation that went after it */
	struct remake_stats st;
} rc;

void
remake_plan_free(struct remake_plan *p)
{
	if (p == NULL)
		return;
	if (p->ls != NULL)
		lrec_set_fini(p->ls);
	free(p->ls);
	free(p->bufs);
	free(p->gap);
	free(p->chain);
	free(p->inputs);
	free(p->scratch);
	free(p->scratch_off);
	free(p->reads);
	free(p->pos_st);
	free(p);
}

/* Forget the running plan's state (its buffers are remade already). */
static void
clear(void)
{
	mover_own_free(rc.scratch, rc.scratch_st, rc.scratch_seq);
	if (rc.scratch_done != NULL)
		streams_event_put(rc.scratch_done, 0);
	rc.scratch = NULL;
	rc.scratch_done = NULL;
	rc.scratch_st = NULL;
	rc.scratch_seq = 0;
	free(rc.xb);
	free(rc.inb);
	free(rc.by_r);
	free(rc.active);
	lrec_argset_fini(&rc.args);
	rc.xb = rc.inb = NULL;
	rc.by_r = rc.active = NULL;
	rc.p = NULL;
	rc.nby_r = rc.next_r = rc.nactive = rc.next_drop = 0;
}

/* Order gaps (indices) by their r; at one r, the one dropped last first
 * (gaps are by drop). Either order remakes them all: where one reads
 * another (an input hoisted to its reader's replay), the reader's remake
 * remakes the input inside it, as the input's own would. */
static const struct remake_plan *sort_plan;
static int
by_r(const void *a, const void *b)
{
	uint32_t i = *(const uint32_t *)a, j = *(const uint32_t *)b;
	uint32_t x = sort_plan->gap[i].r, y = sort_plan->gap[j].r;

	if (x != y)
		return x < y ? -1 : 1;
	return i > j ? -1 : i < j;
}

/* The mover's remake function (mover_remake_fn). */
static CUresult fill(struct ebb_buf *b, struct ebb_stream *consumer, uint64_t seq,
    CUevent *done);

void
remake_init(remake_resolve_fn resolve)
{
	rc.resolve = resolve;
	mover_set_remake(fill);
}

int
remake_start(const struct remake_plan *p)
{
	static int said;

	if (rc.p != NULL)
		remake_stop(0);
	if (p == NULL || p->ngap == 0)
		return 0;
	uint32_t nchain = 0;	/* chain's length: where the last gap's ends */
	for (uint32_t g = 0; g < p->ngap; g++)
		if (p->gap[g].chain_first + p->gap[g].nchain > nchain)
			nchain = p->gap[g].chain_first + p->gap[g].nchain;
	rc.xb = calloc(p->ngap, sizeof *rc.xb);
	rc.inb = calloc(p->ninputs + 1, sizeof *rc.inb);
	rc.by_r = malloc(p->ngap * sizeof *rc.by_r);
	rc.active = malloc(p->ngap * sizeof *rc.active);
	if (rc.xb == NULL || rc.inb == NULL || rc.by_r == NULL || rc.active == NULL ||
	    lrec_argset_init(&rc.args, p->ls, p->chain, nchain) < 0) {
		clear();
		ebb_log_once(&said, EBB_LOG_WARN, "no memory to run the plan's recomputes; its "
		    "buffers stay on the device");
		return -1;
	}
	for (uint32_t g = 0; g < p->ngap; g++)
		if (p->gap[g].r < p->gap[g].next_use)
			rc.by_r[rc.nby_r++] = g;
	sort_plan = p;
	qsort(rc.by_r, rc.nby_r, sizeof *rc.by_r, by_r);
	rc.p = p;
	/* the scratch, within EBB_LIMIT; without it the gaps that need it are
	 * never dropped */
	uint64_t most = 0;
	for (uint32_t g = 0; g < p->ngap; g++)
		most = p->gap[g].sc_bytes > most ? p->gap[g].sc_bytes : most;
	if (most > 0) {
		CUresult r = mover_own_alloc(most, &rc.scratch);
		if (r != CUDA_SUCCESS) {
			rc.scratch = NULL;
			ebb_log(EBB_LOG_WARN, "no room within EBB_LIMIT for the %llu bytes of scratch "
			    "that the plan's recomputes of producers writing other buffers take (error "
			    "%d): those buffers stay on the device", (unsigned long long)most, (int)r);
		}
	}
	return 0;
}

/* The stream gap g's chain runs on (its first launch's). */
static struct ebb_stream *
chain_stream(const struct remake_gap *g)
{
	const struct lrec *r = lrec_at(rc.p->ls, rc.p->chain[g->chain_first]);

	return r != NULL ? r->tracker : NULL;
}

/* Gap g is no longer dropped: its buffer and inputs forget it. */
static void
release(uint32_t g)
{
	const struct remake_gap *gp = &rc.p->gap[g];

	if (rc.xb[g] != NULL)
		rc.xb[g]->rc_gap = 0;
	rc.xb[g] = NULL;
	for (uint32_t k = 0; k < gp->nin; k++) {
		struct ebb_buf *in = rc.inb[gp->in_first + k];
		if (in != NULL && in->rc_inputs > 0)
			in->rc_inputs--;
		rc.inb[gp->in_first + k] = NULL;
	}
	for (uint32_t i = 0; i < rc.nactive; i++)
		if (rc.active[i] == g) {
			rc.active[i] = rc.active[--rc.nactive];
			break;
		}
}

/* Make gap g's buffer resident now, before operation seq: remade when its
 * contents are gone, kept when its drop has not released them yet (the
 * mover's cancel). early: before its point. Returns CUDA_SUCCESS or the
 * error of remaking it. */
static CUresult
remake_now(uint32_t g, uint64_t seq, int early)
{
	struct ebb_buf *b = rc.xb[g];
	struct ebb_stream *cs = chain_stream(&rc.p->gap[g]);

	if (b == NULL || cs == NULL)
		return CUDA_SUCCESS;
	if (early)
		rc.st.early++;
	buftab_note_use(b, (uintptr_t)cs, seq);
	mover_touch(b);
	CUresult r = mover_ensure(&b, 1, cs, seq);
	/* a cancel leaves the gap dropped in name only */
	if (rc.xb[g] == b && b->rc_gap == g + 1)
		release(g);
	return r;
}

/* The index of profile buffer buf among those gap gp's chain writes into
 * scratch, or gp->nsc when it is none of them. */
static uint32_t
scratch_of(const struct remake_gap *gp, uint32_t buf)
{
	uint32_t k = 0;

	while (k < gp->nsc && rc.p->scratch[gp->sc_first + k] != buf)
		k++;
	return k;
}

/* Whether the pointer words of this iteration's arguments of gap gp's chain
 * launch r (at position q) name the buffers the recording's did, as found
 * now (but those the chain writes into scratch: a remake does not use
 * them, and they may be gone). When not, *why says which word did not. */
static int
args_match(const struct remake_gap *gp, const struct lrec *r, uint32_t q, char *why, size_t nwhy)
{
	const unsigned char *a = lrec_argset_get(&rc.args, q);

	if (a == NULL || !r->relocated) {
		snprintf(why, nwhy, "launch at %u: %s", q, a == NULL ?
		    "no arguments taken this iteration" : "its words not all named");
		return 0;
	}
	for (uint32_t k = 0; k < r->nrelocs; k++) {
		const struct lrec_reloc *rl = &r->relocs[k];
		if (scratch_of(gp, rl->buf) < gp->nsc)
			continue;
		struct ebb_buf *b = rl->buf < rc.p->nbufs ? rc.resolve(&rc.p->bufs[rl->buf]) : NULL;
		uint64_t w;
		memcpy(&w, a + rl->off, sizeof w);
		if (b == NULL || w != b->addr + rl->delta) {
			snprintf(why, nwhy, "launch at %u: word at byte %u is %#llx, %s %#llx", q,
			    rl->off, (unsigned long long)w, b == NULL ? "its buffer not found, was" :
			    "the buffer's now", (unsigned long long)(b != NULL ? b->addr + rl->delta :
			    rl->delta));
			return 0;
		}
	}
	return 1;
}

/* Whether b is some gap's buffer dropped now. A drop a use came to before it
 * released the memory was undone by the mover (its contents never left):
 * that gap is released here. */
static int
dropped(struct ebb_buf *b)
{
	if (b->rc_gap == 0)
		return 0;
	uint32_t g = b->rc_gap - 1;
	if (b->mv.dropped && g < rc.p->ngap && rc.xb[g] == b)
		return 1;
	if (g < rc.p->ngap && rc.xb[g] == b) {
		const struct remake_gap *gp = &rc.p->gap[g];
		ebb_log(EBB_LOG_DEBUG, "recompute: gap %u (operations %u to %u, remade before %u) "
		    "undone: used again before its drop released the memory", g, gp->drop_at,
		    gp->next_use, gp->r);
		release(g);
	}
	b->rc_gap = 0;
	return 0;
}

/* Drop gap g's buffer after operation seq, if this iteration allows it. */
static void
try_drop(uint32_t g, uint64_t seq)
{
	const struct remake_gap *gp = &rc.p->gap[g];
	struct ebb_buf *x = rc.resolve(&rc.p->bufs[gp->x]);
	char detail[160] = "";
	enum mover_drop mr;

	/* (an input of a dropped buffer may be dropped too: the remake that
	 * reads it remakes it first, when it makes its inputs resident) */
	uint64_t *why = &rc.st.kept_busy;
	if (x == NULL || dropped(x) || x->mv.isize != gp->size || chain_stream(gp) == NULL ||
	    (gp->nsc > 0 && rc.scratch == NULL)) {
		if (x != NULL && x->mv.isize != gp->size)
			snprintf(detail, sizeof detail, "%llu bytes now",
			    (unsigned long long)x->mv.isize);
		else
			snprintf(detail, sizeof detail, "%s", x == NULL ? "not found" :
			    x->rc_gap != 0 ? "dropped already" : chain_stream(gp) == NULL ?
			    "its chain's stream not found" : "no scratch for its chain");
		goto kept;
	}
	why = &rc.st.kept_args;
	for (uint32_t c = 0; c < gp->nchain; c++) {
		uint32_t q = rc.p->chain[gp->chain_first + c];
		const struct lrec *r = lrec_at(rc.p->ls, q);
		if (r == NULL || q >= rc.p->nops) {
			snprintf(detail, sizeof detail, "launch at %u: no record", q);
			goto kept;
		}
		if (!args_match(gp, r, q, detail, sizeof detail))
			goto kept;
	}
	/* an input dropped itself is remade first by the remake that reads it */
	why = &rc.st.kept_inputs;
	for (uint32_t k = 0; k < gp->nin; k++) {
		struct ebb_buf *in = rc.resolve(&rc.p->bufs[rc.p->inputs[gp->in_first + k]]);
		if (in == NULL) {
			snprintf(detail, sizeof detail, "input %u not found", k);
			goto kept;
		}
		rc.inb[gp->in_first + k] = in;
	}
	why = &rc.st.kept_mover;
	if ((mr = mover_plan_drop(x, seq)) != MOVER_DROPPED) {
		snprintf(detail, sizeof detail, "the mover: %s", mover_drop_why(mr));
		goto kept;
	}
	rc.xb[g] = x;
	x->rc_gap = g + 1;
	for (uint32_t k = 0; k < gp->nin; k++) {
		struct ebb_buf *in = rc.inb[gp->in_first + k];
		in->rc_inputs++;
		in->rc_idx = rc.p->inputs[gp->in_first + k];
	}
	rc.active[rc.nactive++] = g;
	rc.st.drops++;
	return;
kept:
	memset(rc.inb + gp->in_first, 0, gp->nin * sizeof *rc.inb);
	rc.st.kept++;
	(*why)++;
	ebb_log(EBB_LOG_DEBUG, "recompute: gap %u (operations %u to %u, remade before %u, %llu "
	    "bytes) kept: %s", g, gp->drop_at, gp->next_use, gp->r, (unsigned long long)gp->size,
	    detail);
}

/* Whether the recorded iteration read profile buffer idx at position pos. */
static int
read_there(uint32_t pos, uint32_t idx)
{
	uint64_t key = (uint64_t)pos << 32 | idx;
	uint32_t lo = 0, hi = rc.p->nreads;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (rc.p->reads[mid] < key)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < rc.p->nreads && rc.p->reads[lo] == key;
}

/* Remake, before operation seq, every dropped buffer that reads b; then
 * stream st (NULL: none) waits for each remake on the device, or, with
 * host, the host does. Returns CUDA_SUCCESS or the first error. */
static CUresult
remake_readers(const struct ebb_buf *b, struct ebb_stream *st, int host, uint64_t seq)
{
	CUresult err = CUDA_SUCCESS;

	/* a remake releases its gap and may release others (its inputs dropped
	 * too, remade first), which reorders rc.active: the scan starts again
	 * after each */
	for (uint32_t i = 0; i < rc.nactive;) {
		uint32_t g = rc.active[i];
		const struct remake_gap *gp = &rc.p->gap[g];
		int reads = 0;
		for (uint32_t k = 0; k < gp->nin && !reads; k++)
			reads = rc.inb[gp->in_first + k] == b;
		if (!reads) {
			i++;
			continue;
		}
		struct ebb_buf *x = rc.xb[g];
		struct ebb_stream *cs = chain_stream(gp);
		CUresult r = remake_now(g, seq, 1);
		if (r == CUDA_SUCCESS && x->mv.arrive != NULL && host)
			r = streams_event_wait(x->mv.arrive);
		else if (r == CUDA_SUCCESS && x->mv.arrive != NULL && st != NULL && st != cs)
			r = ebb_real.cuStreamWaitEvent(streams_handle(st), x->mv.arrive, 0);
		if (err == CUDA_SUCCESS)
			err = r;
		if (rc.xb[g] == x)
			release(g);	/* not released (cannot happen): not again */
		i = 0;
	}
	return err;
}

CUresult
remake_before(uint32_t pos, uint64_t seq, struct ebb_stream *st, const struct ebb_launch *l,
    struct ebb_buf *const *bufs, size_t n)
{
	CUresult err = CUDA_SUCCESS;

	if (rc.p == NULL || pos >= rc.p->nops)
		return CUDA_SUCCESS;
	/* a chain's launch: its arguments as this iteration passes them */
	lrec_argset_take(&rc.args, rc.p->ls, pos, l);
	if (rc.nactive == 0)
		return CUDA_SUCCESS;
	for (size_t i = 0; i < n; i++) {
		const struct ebb_buf *b = bufs[i];
		if (b->rc_inputs == 0)
			continue;
		if (st == rc.p->pos_st[pos] && read_there(pos, b->rc_idx))
			continue;	/* it reads it, as recorded */
		CUresult r = remake_readers(b, st, 0, seq);
		if (err == CUDA_SUCCESS)
			err = r;
	}
	return err;
}

void
remake_after(uint32_t pos, uint64_t seq)
{
	if (rc.p == NULL)
		return;
	/* the plan's remakes before the next operation */
	while (rc.next_r < rc.nby_r && rc.p->gap[rc.by_r[rc.next_r]].r <= pos + 1) {
		uint32_t g = rc.by_r[rc.next_r++];
		if (rc.xb[g] != NULL && remake_now(g, seq + 1, rc.p->gap[g].r < pos + 1) !=
		    CUDA_SUCCESS)
			rc.st.failed++;
	}
	while (rc.next_drop < rc.p->ngap && rc.p->gap[rc.next_drop].drop_at < pos)
		rc.next_drop++;	/* its point passed unseen */
	for (; rc.next_drop < rc.p->ngap && rc.p->gap[rc.next_drop].drop_at == pos; rc.next_drop++)
		try_drop(rc.next_drop, seq);
}

/* Remake every dropped buffer before operation seq (early: before its
 * point). */
static void
remake_all(uint64_t seq, int early)
{
	while (rc.nactive > 0) {
		uint32_t g = rc.active[rc.nactive - 1];
		if (remake_now(g, seq, early) != CUDA_SUCCESS)
			rc.st.failed++;
		if (rc.nactive > 0 && rc.active[rc.nactive - 1] == g)
			release(g);	/* cannot happen: not left dropped in name */
	}
}

void
remake_boundary(uint64_t seq)
{
	if (rc.p == NULL)
		return;
	remake_all(seq, 1);
	rc.next_drop = rc.next_r = 0;
	lrec_argset_clear(&rc.args);
}

void
remake_stop(uint64_t seq)
{
	if (rc.p == NULL)
		return;
	remake_all(seq, 1);
	clear();
}

void
remake_free(struct ebb_buf *b, uint64_t seq)
{
	if (rc.p == NULL)
		return;
	/* an asynchronous free orders its memory's reuse after its own stream
	 * only: the host waits for the remakes that read it (a departure);
	 * dropped itself, b is remade for them first */
	if (b->rc_inputs != 0 && remake_readers(b, NULL, 1, seq) != CUDA_SUCCESS)
		rc.st.failed++;
	if (b->rc_gap != 0) {
		release(b->rc_gap - 1);	/* its contents go with it */
		b->rc_gap = 0;
	}
}

void
remake_capture(uint64_t seq)
{
	if (rc.p != NULL)
		remake_all(seq, 1);
}

/* lrec_params's context for a remake that writes into scratch. */
struct into {
	const struct remake_gap *g;
	CUdeviceptr scratch;
};

/* lrec_params's address of buffer buf: the scratch's part for the other
 * buffers the chain writes, every other word as this iteration passed it. */
static uint64_t
into_scratch(uint32_t buf, void *ctx)
{
	const struct into *in = ctx;
	uint32_t k = scratch_of(in->g, buf);

	return k < in->g->nsc ? in->scratch + rc.p->scratch_off[in->g->sc_first + k] : LREC_KEEP;
}

/*
 * Fill b, mapped again by the mover, by launching its gap's chain on the
 * chain's stream with this iteration's arguments, after its inputs are made
 * resident there (and counted as used by operation seq); done: an event
 * after the chain. Returns CUDA_SUCCESS, or the error that leaves b unfilled
 * (a buffer the mover dropped that is no gap's cannot be remade).
 */
static CUresult
fill(struct ebb_buf *b, struct ebb_stream *consumer, uint64_t seq, CUevent *done)
{
	(void)consumer;
	*done = NULL;
	if (rc.p == NULL || b->rc_gap == 0 || b->rc_gap > rc.p->ngap || rc.xb[b->rc_gap - 1] != b)
		return CUDA_ERROR_INVALID_HANDLE;
	uint32_t g = b->rc_gap - 1;
	const struct remake_gap *gp = &rc.p->gap[g];
	struct ebb_stream *cs = chain_stream(gp);
	struct ebb_buf *in[MAX_INPUTS];
	uint32_t nin = gp->nin < MAX_INPUTS ? gp->nin : MAX_INPUTS;

	for (uint32_t k = 0; k < nin; k++) {
		in[k] = rc.inb[gp->in_first + k];
		buftab_note_use(in[k], (uintptr_t)cs, seq);
		mover_touch(in[k]);
	}
	/* (an input dropped itself is remade here, inside this remake) */
	CUresult r = gp->nin > MAX_INPUTS ? CUDA_ERROR_INVALID_VALUE :
	    mover_ensure(in, nin, cs, seq);
	/* the other buffers the chain writes go into the scratch, once the last
	 * chain that used it is done */
	struct ebb_buf *sb = gp->nsc > 0 ? rc.scratch : NULL;
	if (r == CUDA_SUCCESS && gp->nsc > 0 && sb == NULL)
		r = CUDA_ERROR_OUT_OF_MEMORY;
	struct into ctx = { gp, sb != NULL ? sb->addr : 0 };
	CUevent ev = NULL;
	ebb_inside = 1;
	if (r == CUDA_SUCCESS && sb != NULL && rc.scratch_done != NULL)
		r = ebb_real.cuStreamWaitEvent(streams_handle(cs), rc.scratch_done, 0);
	/* zeroed, as the verification replayed it (verify.c) */
	if (r == CUDA_SUCCESS && sb != NULL)
		r = ebb_real.cuMemsetD8Async(sb->addr, 0, gp->sc_bytes, streams_handle(cs));
	for (uint32_t c = 0; r == CUDA_SUCCESS && c < gp->nchain; c++) {
		uint32_t q = rc.p->chain[gp->chain_first + c];
		const struct lrec *lr = lrec_at(rc.p->ls, q);
		/* this iteration's arguments, taken before the drop; never the
		 * recording's (NULL to lrec_launch), which name its buffers */
		const unsigned char *a = lrec_argset_get(&rc.args, q);
		unsigned char params[PARAMS_MAX];
		if (a != NULL && sb != NULL) {
			if (lr->nbytes > PARAMS_MAX || lrec_params(lr, a, params, into_scratch, &ctx) < 0)
				a = NULL;
			else
				a = params;
		}
		r = a == NULL ? CUDA_ERROR_INVALID_VALUE : lrec_launch(lr, a);
	}
	if (sb != NULL) {
		/* (the next user waits for this chain; the plan's end frees it after) */
		if (rc.scratch_done == NULL)
			rc.scratch_done = streams_event_get(0);
		CUresult er = rc.scratch_done != NULL ?
		    ebb_real.cuEventRecord(rc.scratch_done, streams_handle(cs)) :
		    CUDA_ERROR_OUT_OF_MEMORY;
		if (r == CUDA_SUCCESS)
			r = er;
		rc.scratch_st = cs;
		rc.scratch_seq = seq;
	}
	/* (the restore worker that retires it gives it back as a copy's) */
	if (r == CUDA_SUCCESS && (ev = streams_event_get(1)) == NULL)
		r = CUDA_ERROR_OUT_OF_MEMORY;
	if (r == CUDA_SUCCESS)
		r = ebb_real.cuEventRecord(ev, streams_handle(cs));
	ebb_inside = 0;
	if (r != CUDA_SUCCESS) {
		if (ev != NULL)
			streams_event_put(ev, 1);
		rc.st.failed++;
		release(g);
		return r;
	}
	*done = ev;
	rc.st.remakes++;
	release(g);
	return CUDA_SUCCESS;
}

void
remake_stats(struct remake_stats *out)
{
	*out = rc.st;
}
