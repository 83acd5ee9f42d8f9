/*
 * replay.c: the gaps a kernel replay can bridge (replay.h).
 *
 * One pass over every buffer's uses gives each operation what a chain needs
 * of it: how many buffers it writes, how many it uses unmeasured, and the
 * latest replay point its inputs allow (by their next write, by their free).
 * A second pass walks each candidate buffer's uses once, growing its chain
 * gap by gap. Both are linear in the profile's uses, and a buffer's chain
 * is stored once for all its gaps.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "replay.h"

/* Why a gap is refused, in the order of the tests (and of struct
 * replay_refused's fields); R_OK last, so that the least of the states of a
 * chain's operations is the chain's. */
enum refusal {
	R_UNKNOWN,
	R_WILD,
	R_NO_WRITER,
	R_FIRST_READ,
	R_TOO_LONG,
	R_NOT_REPLAYABLE,
	R_UNKNOWN_OTHER,
	R_WRITES_OTHER,
	R_OVERWRITTEN,
	R_FREED,
	R_OK
};

/* What a chain needs of one operation. */
struct op_info {
	uint32_t nwrite;	/* buffers it writes */
	uint64_t wbytes;	/* their bytes */
	uint32_t nread;		/* buffers it reads */
	uint32_t nunk;		/* buffers whose use there is not measured */
	uint32_t wbound;	/* a replay of it goes before this operation at the
				 * latest: its inputs' first write after it
				 * (UINT32_MAX: none) */
	uint32_t fbound;	/* the same by its inputs' lifetimes: free + 1, 0 for an
				 * input that does not exist there yet */
};

/* One buffer's walk over its uses (walk_buffer). */
struct walk {
	uint32_t nchain;	/* its writes so far */
	uint32_t run;		/* where its chain starts in the set's ops */
	uint32_t used;		/* of them, those a candidate names */
	uint8_t unknown;	/* a use so far is not measured */
	uint32_t wild0;		/* wild operations before its first use, and at it */
	uint8_t first_read;	/* its first use reads it */
	uint8_t state;		/* enum refusal: the least of its chain's operations' */
	uint32_t wbound, fbound;	/* the least of its chain's operations' */
	double cost_s;		/* its chain's durations, up to max_chain */
	uint64_t scratch;	/* the other buffers its chain writes, their bytes */
	uint64_t max_scratch;	/* at most that (0: no other buffer) */
};

/* Use i of buffer b as PROF_ACC_*: what is neither a measured read nor a
 * measured write is PROF_ACC_UNKNOWN. */
static unsigned
acc_at(const struct prof_buf *b, uint32_t i)
{
	unsigned a = b->acc != NULL ? b->acc[i] : PROF_ACC_UNKNOWN;

	return a == PROF_ACC_READ || a == PROF_ACC_WRITE ? a : PROF_ACC_UNKNOWN;
}

/* Whether operation c can be launched again: replayable, and not a copy of
 * the job's (whose host memory the profile does not hold). */
static int
relaunchable(const struct prof *p, uint32_t c)
{
	return c < p->nops && p->replay != NULL && p->replay[c] &&
	    (p->xfer == NULL || p->xfer[c] == 0) && (p->wild == NULL || p->wild[c] == 0);
}

/* Buffer b's part in the operations' infos: walked from its last use back,
 * each read learns the buffer's next write after it. */
static void
op_infos_buf(const struct prof *p, const struct prof_buf *b, struct op_info *oi)
{
	uint32_t next = UINT32_MAX;
	uint32_t fb = b->free == PROF_NONE ? UINT32_MAX : b->free + 1;

	for (uint32_t i = b->nuse; i-- > 0;) {
		uint32_t c = b->use[i];
		unsigned a = acc_at(b, i);
		if (relaunchable(p, c)) {
			struct op_info *o = &oi[c];
			uint32_t f = b->alloc != PROF_NONE && b->alloc > c ? 0 : fb;
			if (a == PROF_ACC_WRITE) {
				o->nwrite++;
				o->wbytes += prof_span(b);
			}
			else if (a == PROF_ACC_UNKNOWN)
				o->nunk++;
			else {
				o->nread++;
				o->wbound = next < o->wbound ? next : o->wbound;
				o->fbound = f < o->fbound ? f : o->fbound;
			}
		}
		if (a != PROF_ACC_READ)
			next = c;
	}
}

/* Each operation's info (struct op_info). Returns them (p->nops), or NULL
 * when out of memory. */
static struct op_info *
op_infos(const struct prof *p)
{
	struct op_info *oi = malloc((p->nops ? p->nops : 1) * sizeof *oi);

	if (oi == NULL)
		return NULL;
	for (uint32_t c = 0; c < p->nops; c++) {
		oi[c].nwrite = oi[c].nunk = oi[c].nread = 0;
		oi[c].wbytes = 0;
		oi[c].wbound = oi[c].fbound = UINT32_MAX;
	}
	for (uint32_t bi = 0; bi < p->nbufs; bi++)
		op_infos_buf(p, &p->buf[bi], oi);
	/* an operation that may write anything bounds the replay of one that reads */
	uint32_t wild = UINT32_MAX;
	for (uint32_t c = p->nops; p->wild != NULL && c-- > 0;) {
		if (oi[c].nread > 0 && wild < oi[c].wbound)
			oi[c].wbound = wild;
		if (p->wild[c])
			wild = c;
	}
	return oi;
}

/* Operation c's state as a chain operation of buffer b, which it writes;
 * the other buffers it writes go into w's scratch. */
static enum refusal
op_state(const struct prof *p, const struct op_info *oi, uint32_t c, const struct prof_buf *b,
    struct walk *w)
{
	if (oi == NULL || !relaunchable(p, c))
		return R_NOT_REPLAYABLE;
	if (oi[c].nunk > 0)
		return R_UNKNOWN_OTHER;
	if (oi[c].nwrite > 1) {
		uint64_t other = oi[c].wbytes - b->size;
		if (other > w->max_scratch - w->scratch)
			return R_WRITES_OTHER;
		w->scratch += other;
	}
	return R_OK;
}

/* Count one refused gap. */
static void
refuse(struct replay_refused *r, enum refusal why)
{
	uint64_t *ctr[] = {
		[R_UNKNOWN] = &r->unknown, [R_WILD] = &r->wild, [R_NO_WRITER] = &r->no_writer,
		[R_FIRST_READ] = &r->first_read, [R_TOO_LONG] = &r->too_long,
		[R_NOT_REPLAYABLE] = &r->not_replayable, [R_UNKNOWN_OTHER] = &r->unknown_other,
		[R_WRITES_OTHER] = &r->writes_other, [R_OVERWRITTEN] = &r->overwritten,
		[R_FREED] = &r->freed,
	};
	(*ctr[why])++;
}

/* Append operation c to the set's ops. Returns 0, or -1 when out of memory. */
static int
push_op(struct replay_set *s, uint32_t c)
{
	if (s->nops_used == s->ops_cap) {
		uint32_t cap = s->ops_cap ? s->ops_cap * 2 : 64;
		uint32_t *v = realloc(s->ops, cap * sizeof *v);
		if (v == NULL)
			return -1;
		s->ops = v;
		s->ops_cap = cap;
	}
	s->ops[s->nops_used++] = c;
	return 0;
}

/* Append a candidate to the set. Returns 0, or -1 when out of memory. */
static int
push_cand(struct replay_set *s, const struct replay_cand *c)
{
	if (s->n == s->cap) {
		uint32_t cap = s->cap ? s->cap * 2 : 64;
		struct replay_cand *v = realloc(s->c, cap * sizeof *v);
		if (v == NULL)
			return -1;
		s->c = v;
		s->cap = cap;
	}
	s->c[s->n++] = *c;
	return 0;
}

/* Use i of buffer b, as part of the walk w: a write joins the chain (stored
 * in the set up to max chain operations). Returns 0, or -1 when out of
 * memory. */
static int
walk_use(const struct prof *p, const struct op_info *oi, uint32_t max, const struct prof_buf *b,
    uint32_t i, struct walk *w, struct replay_set *out)
{
	unsigned a = acc_at(b, i);
	uint32_t c = b->use[i];

	if (a == PROF_ACC_UNKNOWN)
		w->unknown = 1;
	if (i == 0 && a == PROF_ACC_READ)
		w->first_read = 1;
	if (a != PROF_ACC_WRITE || ++w->nchain > max)
		return 0;
	enum refusal st = op_state(p, oi, c, b, w);
	w->state = st < w->state ? (uint8_t)st : w->state;
	if (oi != NULL && c < p->nops) {
		w->wbound = oi[c].wbound < w->wbound ? oi[c].wbound : w->wbound;
		w->fbound = oi[c].fbound < w->fbound ? oi[c].fbound : w->fbound;
		w->cost_s += p->dur[c];
	}
	return push_op(out, c);
}

/* Why the walk w refuses gap k of buffer b, or R_OK (wilds: wild operations
 * before each position, NULL when none is). */
static enum refusal
gap_refusal(const struct prof_buf *b, uint32_t k, uint32_t max, const struct walk *w,
    const uint32_t *wilds)
{
	if (w->unknown)
		return R_UNKNOWN;
	if (wilds != NULL && wilds[b->use[k] + 1] > w->wild0)
		return R_WILD;
	if (w->nchain == 0)
		return R_NO_WRITER;
	if (w->first_read)
		return R_FIRST_READ;
	if (w->nchain > max)
		return R_TOO_LONG;
	if (w->state != R_OK)
		return (enum refusal)w->state;
	if (w->wbound <= b->use[k])
		return R_OVERWRITTEN;
	if (w->fbound <= b->use[k])
		return R_FREED;
	return R_OK;
}

/* The index of operation c among buffer b's uses, or b->nuse when it has none there. */
static uint32_t
use_at(const struct prof_buf *b, uint32_t c)
{
	int64_t u = prof_use_index(b, c);

	return u < 0 ? b->nuse : (uint32_t)u;
}

/* A chain widened by its freed inputs' producers (extend). */
struct ext {
	uint32_t ops[REPLAY_MAX_EXTENDED];	/* increasing */
	uint32_t n;
	uint32_t done[REPLAY_MAX_EXTENDED];	/* buffers written into scratch (and X) */
	uint32_t ndone;
};

static int
ext_written(const struct ext *e, uint32_t b)
{
	for (uint32_t i = 0; i < e->ndone; i++)
		if (e->done[i] == b)
			return 1;
	return 0;
}

/* Add operation c to e, in order. Returns 0, or -1 when e is full. */
static int
ext_add(struct ext *e, uint32_t c)
{
	uint32_t i = 0;

	while (i < e->n && e->ops[i] < c)
		i++;
	if (i < e->n && e->ops[i] == c)
		return 0;
	if (e->n == REPLAY_MAX_EXTENDED)
		return -1;
	memmove(e->ops + i + 1, e->ops + i, (e->n - i) * sizeof *e->ops);
	e->ops[i] = c;
	e->n++;
	return 0;
}

/* Note every buffer operation c writes as written by e's chain. Returns 0,
 * or -1 when e is full. */
static int
ext_writes(const struct prof *p, const struct prof_opindex *ob, uint32_t c, struct ext *e)
{
	for (uint32_t k = ob->start[c]; k < ob->start[c + 1]; k++) {
		uint32_t bi = ob->buf[k];
		if (prof_access_of(p, bi, c) != PROF_ACC_WRITE || ext_written(e, bi))
			continue;
		if (e->ndone == REPLAY_MAX_EXTENDED)
			return -1;
		e->done[e->ndone++] = bi;
	}
	return 0;
}

/*
 * Gap k of buffer x, whose chain (ops, n) reads an input freed before the
 * gap ends: the chain widened by the producers of each such input (its
 * writes before the chain's read, replayed into scratch), again for theirs,
 * while the chain stays within REPLAY_MAX_EXTENDED operations and scratch
 * of max_scratch bytes. Fills *c (but its chain_first) and the ops into e.
 * Returns 1 when the widened chain's window goes further than r_hi, else 0.
 */
static int
extend(const struct prof *p, const struct op_info *oi, const uint32_t *wilds,
    const struct prof_opindex *ob, uint64_t max_scratch, uint32_t x, uint32_t k, const uint32_t *ops,
    uint32_t n, uint32_t r_hi, struct replay_cand *c, struct ext *e)
{
	const struct prof_buf *b = &p->buf[x];
	uint32_t next = b->use[k + 1];

	e->n = e->ndone = 0;
	if (n > REPLAY_MAX_EXTENDED)
		return 0;
	for (uint32_t i = 0; i < n; i++)
		if (ext_add(e, ops[i]) < 0 || ext_writes(p, ob, ops[i], e) < 0)
			return 0;
	/* widen while an input is freed before the gap ends */
	for (int grew = 1; grew;) {
		grew = 0;
		for (uint32_t i = 0; i < e->n && !grew; i++) {
			uint32_t c0 = e->ops[i];
			for (uint32_t q = ob->start[c0]; q < ob->start[c0 + 1] && !grew; q++) {
				uint32_t y = ob->buf[q];
				const struct prof_buf *yb = &p->buf[y];
				if (ext_written(e, y) || prof_access_of(p, y, c0) != PROF_ACC_READ)
					continue;
				if (yb->free == PROF_NONE || yb->free + 1 >= next)
					continue;	/* it lasts: an input */
				/* y, made in the iteration, every use measured up to c0 and
				 * its first a write, nothing wild after it: its writers join */
				uint32_t at = use_at(yb, c0);
				if (yb->alloc == PROF_NONE || at == yb->nuse ||
				    acc_at(yb, 0) != PROF_ACC_WRITE ||
				    (wilds != NULL && wilds[c0 + 1] > wilds[yb->use[0] + 1]))
					return 0;
				for (uint32_t u = 0; u < at; u++) {
					unsigned a = acc_at(yb, u);
					if (a == PROF_ACC_UNKNOWN)
						return 0;
					uint32_t wop = yb->use[u];
					if (a != PROF_ACC_WRITE)
						continue;
					if (!relaunchable(p, wop) || oi[wop].nunk > 0 ||
					    ext_add(e, wop) < 0 || ext_writes(p, ob, wop, e) < 0)
						return 0;
				}
				grew = 1;
			}
		}
	}
	/* the window: every input unchanged and alive up to the replay, nothing
	 * that may write what it does not reference after a read */
	uint32_t hi = next;
	uint64_t scratch = 0;
	double cost = 0;
	for (uint32_t i = 0; i < e->ndone; i++)
		if (e->done[i] != x)
			scratch += prof_span(&p->buf[e->done[i]]);
	if (scratch > max_scratch)
		return 0;
	for (uint32_t i = 0; i < e->n; i++) {
		uint32_t c0 = e->ops[i];
		cost += p->dur[c0];
		int reads = 0;
		for (uint32_t q = ob->start[c0]; q < ob->start[c0 + 1]; q++) {
			uint32_t y = ob->buf[q];
			const struct prof_buf *yb = &p->buf[y];
			if (ext_written(e, y))
				continue;
			reads = 1;
			if (yb->alloc != PROF_NONE && yb->alloc > c0)
				return 0;
			if (yb->free != PROF_NONE && yb->free + 1 < hi)
				hi = yb->free + 1;
			for (uint32_t u = use_at(yb, c0) + 1; u < yb->nuse; u++)
				if (acc_at(yb, u) != PROF_ACC_READ) {
					hi = yb->use[u] < hi ? yb->use[u] : hi;
					break;
				}
		}
		for (uint32_t j = c0 + 1; reads && p->wild != NULL && j < hi; j++)
			if (p->wild[j]) {
				hi = j;
				break;
			}
	}
	if (hi <= b->use[k] || hi <= r_hi)
		return 0;
	*c = (struct replay_cand){ .buf = x, .gap = k, .r_lo = b->use[k] + 1, .r_hi = hi,
		.nchain = e->n, .cost_s = cost, .bytes = b->size, .scratch = scratch };
	return 1;
}

/* Every gap of buffer bi, a candidate or a refusal each; the chain's
 * operations no candidate names are taken off the set's ops again. Returns
 * 0, or -1 when out of memory. */
static int
walk_buffer(const struct prof *p, const struct op_info *oi, const uint32_t *wilds, uint32_t max,
    uint64_t max_scratch, const struct prof_opindex *ob, uint32_t bi, struct replay_set *out)
{
	const struct prof_buf *b = &p->buf[bi];
	struct walk w = { .run = out->nops_used, .state = R_OK, .wbound = UINT32_MAX,
		.fbound = UINT32_MAX, .max_scratch = max_scratch };
	/* its candidates, in gap order: a widened one's chain is stored after the
	 * walk's (wide[i] set, its ops in ext[i]) */
	struct replay_cand *cs = b->nuse > 1 ? malloc((b->nuse - 1) * sizeof *cs) : NULL;
	struct ext *ext = NULL;
	uint8_t *wide = b->nuse > 1 && ob != NULL ? calloc(b->nuse - 1, 1) : NULL;
	uint32_t ncs = 0;
	int rc = -1;

	if (b->nuse > 1 && (cs == NULL || (ob != NULL && wide == NULL)))
		goto out;
	if (wilds != NULL && b->nuse > 0)
		w.wild0 = wilds[b->use[0] + 1];

	for (uint32_t k = 0; k + 1 < b->nuse; k++) {
		if (walk_use(p, oi, max, b, k, &w, out) < 0)
			goto out;
		out->considered++;
		enum refusal why = gap_refusal(b, k, max, &w, wilds);
		uint32_t hi = b->use[k + 1];
		hi = w.wbound < hi ? w.wbound : hi;
		hi = w.fbound < hi ? w.fbound : hi;
		/* an input freed before the gap ends: its producers may join */
		int freed = why == R_FREED || (why == R_OK && w.fbound < b->use[k + 1] && hi == w.fbound);
		if (freed && ob != NULL && w.nchain <= max) {
			struct ext *e2 = realloc(ext, (ncs + 1) * sizeof *ext);
			if (e2 == NULL)
				goto out;
			ext = e2;
			if (extend(p, oi, wilds, ob, max_scratch, bi, k, out->ops + w.run, w.nchain,
			    why == R_OK ? hi : b->use[k], &cs[ncs], &ext[ncs])) {
				wide[ncs++] = 1;
				out->extended++;
				continue;
			}
		}
		if (why != R_OK) {
			refuse(&out->refused, why);
			continue;
		}
		cs[ncs++] = (struct replay_cand){ .buf = bi, .gap = k, .r_lo = b->use[k] + 1,
			.r_hi = hi, .nchain = w.nchain, .chain_first = w.run, .cost_s = w.cost_s,
			.bytes = b->size, .scratch = w.scratch };
		w.used = w.nchain;
	}
	out->nops_used = w.run + w.used;
	for (uint32_t i = 0; i < ncs; i++) {
		if (wide != NULL && wide[i]) {
			cs[i].chain_first = out->nops_used;
			for (uint32_t j = 0; j < ext[i].n; j++)
				if (push_op(out, ext[i].ops[j]) < 0)
					goto out;
		}
		if (push_cand(out, &cs[i]) < 0)
			goto out;
	}
	rc = 0;
out:
	free(cs);
	free(ext);
	free(wide);
	return rc;
}

/* Whether buffer b is a candidate at all (replay.h). */
static int
candidate(const struct prof_buf *b, uint64_t min_bytes)
{
	return b->alloc != PROF_NONE && b->movable && b->size >= min_bytes;
}

/* Every gap a replay can bridge (replay.h). Returns 0, or -1 when out of
 * memory (out empty). */
int
replay_find(const struct prof *p, const struct replay_params *rp, struct replay_set *out)
{
	uint32_t max = rp->max_chain ? rp->max_chain : REPLAY_MAX_CHAIN;
	uint64_t max_scratch = rp->no_scratch ? 0 : rp->max_scratch ? rp->max_scratch :
	    REPLAY_MAX_SCRATCH;
	struct op_info *oi = NULL;
	uint32_t *wilds = NULL;

	memset(out, 0, sizeof *out);
	if (p->replay != NULL && (oi = op_infos(p)) == NULL)
		return -1;
	/* wilds[i]: the wild operations before position i */
	if (p->wild != NULL && (wilds = malloc(((size_t)p->nops + 1) * sizeof *wilds)) == NULL) {
		free(oi);
		return -1;
	}
	for (uint32_t i = 0; wilds != NULL && i <= p->nops; i++)
		wilds[i] = i == 0 ? 0 : wilds[i - 1] + (p->wild[i - 1] != 0);
	struct prof_opindex ob = { NULL, NULL };
	int wide = oi != NULL && !rp->no_extend;
	if (wide && prof_opindex_build(p, &ob) < 0) {
		free(oi);
		free(wilds);
		return -1;
	}
	int r = 0;
	for (uint32_t bi = 0; bi < p->nbufs && r == 0; bi++)
		if (candidate(&p->buf[bi], rp->min_bytes))
			r = walk_buffer(p, oi, wilds, max, max_scratch, wide ? &ob : NULL, bi, out);
	prof_opindex_free(&ob);
	free(oi);
	free(wilds);
	if (r < 0)
		replay_set_fini(out);
	return r;
}

uint32_t
replay_scratch(const struct prof *p, const struct replay_set *rs, const struct replay_cand *c,
    uint32_t *out, uint64_t *off, uint32_t max, uint64_t *bytes)
{
	const uint32_t *ops = replay_chain(rs, c);
	uint32_t n = 0;

	*bytes = 0;
	for (uint32_t bi = 0; bi < p->nbufs; bi++) {
		if (bi == c->buf)
			continue;
		int writes = 0;
		for (uint32_t j = 0; j < c->nchain && !writes; j++)
			writes = ops[j] < p->nops && prof_access_of(p, bi, ops[j]) == PROF_ACC_WRITE;
		if (!writes)
			continue;
		if (n < max) {
			out[n] = bi;
			if (off != NULL)
				off[n] = *bytes;
			*bytes += (prof_span(&p->buf[bi]) + REPLAY_SCRATCH_ALIGN - 1) /
			    REPLAY_SCRATCH_ALIGN * REPLAY_SCRATCH_ALIGN;
		}
		n++;
	}
	return n;
}

/* Free what a set holds, and empty it. */
void
replay_set_fini(struct replay_set *s)
{
	free(s->c);
	free(s->ops);
	memset(s, 0, sizeof *s);
}

/* The buffers with a candidate, and their bytes (replay.h): the set is by
 * buffer, then gap, so a buffer's candidates are next to one another. */
void
replay_totals(const struct replay_set *s, uint64_t *buffers, uint64_t *bytes)
{
	*buffers = 0;
	*bytes = 0;
	for (uint32_t i = 0; i < s->n; i++) {
		if (i > 0 && s->c[i].buf == s->c[i - 1].buf)
			continue;
		(*buffers)++;
		*bytes += s->c[i].bytes;
	}
}

/* Whether small's sizes are a subsequence of big's in one way only: at[k],
 * big's index of small's k. */
static int
subsequence(const uint64_t *big, size_t nbig, const uint64_t *small, size_t nsmall, uint32_t *at)
{
	if (nsmall > nbig)
		return 0;
	size_t j = 0;
	for (size_t k = 0; k < nsmall; k++, j++) {
		while (j < nbig && big[j] != small[k])
			j++;
		if (j == nbig)
			return 0;
		at[k] = (uint32_t)j;
	}
	/* from the right: the same places, or the match is not one */
	size_t r = nbig;
	for (size_t k = nsmall; k-- > 0;) {
		while (r > 0 && big[r - 1] != small[k])
			r--;
		if (r == 0 || r - 1 != at[k])
			return 0;
		r--;
	}
	return 1;
}

int
replay_match_launch(const uint64_t *rec, size_t m, const uint64_t *got, size_t n, uint32_t *at)
{
	uint32_t sub[REPLAY_MATCH_MAX];
	int matched = 0;

	if (m > REPLAY_MATCH_MAX || n > REPLAY_MATCH_MAX)
		return -1;
	if (n == m) {
		for (size_t j = 0; j < m; j++) {
			at[j] = rec[j] == got[j] ? (uint32_t)j : REPLAY_UNMATCHED;
			matched += rec[j] == got[j];
		}
		return matched;
	}
	if (n > m)
		return subsequence(got, n, rec, m, at) ? (int)m : -1;
	if (!subsequence(rec, m, got, n, sub))
		return -1;
	for (size_t j = 0; j < m; j++)
		at[j] = REPLAY_UNMATCHED;
	for (size_t k = 0; k < n; k++)
		at[sub[k]] = (uint32_t)k;
	return (int)n;
}
