/*
 * recompute.c: the gaps to recompute, and the profile with them
 * (recompute.h).
 *
 * Both need each candidate's inputs: the buffers its chain's operations
 * use, found through one index of the buffers each operation uses. The
 * choice keeps the memory at every operation in a segment tree (a range
 * add for each pick, the maximum and where it is at the root), so a round
 * costs one pass over the candidates in score order at most and a pick
 * the logarithm of the operations.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "plan_internal.h"
#include "rctree.h"
#include "recompute.h"

/* A pick, with what rc_derive sorts and looks up by. */
struct dpick {
	uint32_t buf, gap, r, cand;
};

/* An input's use at a replay: derived buffer d, operation op. */
struct extra {
	uint32_t d, op;
};


/* qsort order of buffer indices. */
static int
cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* How many buffer uses candidate c's chain operations have in all: room
 * for its inputs. */
static size_t
chain_uses(const struct prof *p, const struct prof_opindex *ix, const struct replay_set *rs,
    const struct replay_cand *c)
{
	const uint32_t *ops = replay_chain(rs, c);
	size_t n = 0;

	for (uint32_t j = 0; j < c->nchain; j++)
		if (ops[j] < p->nops)
			n += ix->start[ops[j] + 1] - ix->start[ops[j]];
	return n;
}

/* Whether candidate c's chain writes buffer b (into scratch, when b is not
 * c's own). */
static int
chain_writes(const struct prof *p, const struct replay_set *rs, const struct replay_cand *c,
    uint32_t b)
{
	const uint32_t *ops = replay_chain(rs, c);

	for (uint32_t j = 0; c->scratch > 0 && j < c->nchain; j++)
		if (ops[j] < p->nops && prof_access_of(p, b, ops[j]) == PROF_ACC_WRITE)
			return 1;
	return 0;
}

/* Candidate c's inputs into dst (room for chain_uses), increasing, each
 * once: the other buffers its chain uses, but for those it writes (which a
 * replay writes into scratch). Returns how many. */
static uint32_t
inputs_into(const struct prof *p, const struct prof_opindex *ix, const struct replay_set *rs,
    const struct replay_cand *c, uint32_t *dst)
{
	const uint32_t *ops = replay_chain(rs, c);
	uint32_t n = 0;

	for (uint32_t j = 0; j < c->nchain; j++) {
		if (ops[j] >= p->nops)
			continue;
		for (uint32_t k = ix->start[ops[j]]; k < ix->start[ops[j] + 1]; k++)
			if (ix->buf[k] != c->buf && !chain_writes(p, rs, c, ix->buf[k]))
				dst[n++] = ix->buf[k];
	}
	if (c->nchain > 1 && n > 1)
		qsort(dst, n, sizeof *dst, cmp_u32);
	uint32_t m = 0;
	for (uint32_t k = 0; k < n; k++)
		if (m == 0 || dst[m - 1] != dst[k])
			dst[m++] = dst[k];
	return m;
}

/* Where a replay of c planned before r goes (recompute.h). */
uint32_t
rc_replay_at(const struct prof *p, const struct prof_opindex *ix, const struct replay_set *rs,
    const struct replay_cand *c, uint32_t r)
{
	const uint32_t *ops = replay_chain(rs, c);
	uint32_t drop_at = p->buf[c->buf].use[c->gap];

	for (uint32_t j = 0; j < c->nchain; j++) {
		if (ops[j] >= p->nops)
			continue;
		for (uint32_t k = ix->start[ops[j]]; k < ix->start[ops[j] + 1]; k++) {
			uint32_t b = ix->buf[k], f = p->buf[b].free;
			if (b != c->buf && f != PROF_NONE && f > drop_at && f < r &&
			    !chain_writes(p, rs, c, b))
				r = f;
		}
	}
	return r;
}

/* The inputs of candidate c (recompute.h). Returns 0, or -1 when out of
 * memory. */
int
rc_inputs(const struct prof *p, const struct prof_opindex *pix, const struct replay_set *rs,
    const struct replay_cand *c, uint32_t **out, uint32_t *n)
{
	struct prof_opindex own;
	const struct prof_opindex *ix = pix;

	*out = NULL;
	*n = 0;
	if (ix == NULL) {
		if (prof_opindex_build(p, &own) < 0)
			return -1;
		ix = &own;
	}
	size_t room = chain_uses(p, ix, rs, c);
	uint32_t *v = room ? malloc(room * sizeof *v) : NULL;
	if (room > 0 && v != NULL)
		*n = inputs_into(p, ix, rs, c, v);
	if (pix == NULL)
		prof_opindex_free(&own);
	if (room > 0 && v == NULL)
		return -1;
	if (*n == 0) {
		free(v);
		v = NULL;
	}
	*out = v;
	return 0;
}

/* ---- rc_derive ---- */

/* qsort order of picks: by buffer, then gap. */
static int
cmp_dpick(const void *a, const void *b)
{
	const struct dpick *x = a, *y = b;

	if (x->buf != y->buf)
		return x->buf < y->buf ? -1 : 1;
	return x->gap < y->gap ? -1 : x->gap > y->gap;
}

/* qsort order of extra uses: by derived buffer, then operation. */
static int
cmp_extra(const void *a, const void *b)
{
	const struct extra *x = a, *y = b;

	if (x->d != y->d)
		return x->d < y->d ? -1 : 1;
	return x->op < y->op ? -1 : x->op > y->op;
}

/* The picks pk as struct dpick, by buffer then gap, into *out. Returns 0,
 * or -1 when out of memory or a pick is not one of a distinct gap of rs with
 * r in its window. */
static int
sorted_picks(const struct replay_set *rs, const struct rc_pick *pk, uint32_t n,
    struct dpick **out)
{
	struct dpick *sp = malloc((n ? n : 1) * sizeof *sp);

	if ((*out = sp) == NULL)
		return -1;
	for (uint32_t j = 0; j < n; j++) {
		if (pk[j].cand >= rs->n)
			return -1;
		const struct replay_cand *c = &rs->c[pk[j].cand];
		if (pk[j].r < c->r_lo || pk[j].r > c->r_hi)
			return -1;
		sp[j] = (struct dpick){ c->buf, c->gap, pk[j].r, pk[j].cand };
	}
	if (n > 1)
		qsort(sp, n, sizeof *sp, cmp_dpick);
	for (uint32_t j = 1; j < n; j++)
		if (sp[j].buf == sp[j - 1].buf && sp[j].gap == sp[j - 1].gap)
			return -1;
	return 0;
}

/*
 * What derived buffer d (of p's nbufs, then a segment for each sorted pick
 * sp; bstart[b]: the first of buffer b's picks) holds of its source: uses
 * [*u0, *u1) of the source's, alloc and free.
 */
static void
segment(const struct prof *p, const struct dpick *sp, uint32_t n, const uint32_t *bstart,
    uint32_t d, uint32_t *u0, uint32_t *u1, uint32_t *alloc, uint32_t *free_op)
{
	uint32_t b = d < p->nbufs ? d : sp[d - p->nbufs].buf;
	const struct prof_buf *s = &p->buf[b];
	uint32_t next;		/* the sorted pick that ends the segment; n: none */

	if (d < p->nbufs) {
		*u0 = 0;
		*alloc = s->alloc;
		next = bstart[b] < bstart[b + 1] ? bstart[b] : n;
	} else {
		uint32_t j = d - p->nbufs;
		*u0 = sp[j].gap + 1;
		*alloc = sp[j].r;
		next = j + 1 < bstart[b + 1] ? j + 1 : n;
	}
	*u1 = next < n ? sp[next].gap + 1 : s->nuse;
	*free_op = next < n ? s->use[sp[next].gap] : s->free;
}

/*
 * The uses the picks give their inputs, into *out (sorted by derived
 * buffer, then operation, each once) and *nx: for each pick, each input at
 * the replay's operation r, in the input's segment that exists there, or at
 * that segment's free where it is freed right before the replay (an input
 * may be freed after operation r - 1, replay.h's window). Returns 0, or -1
 * when out of memory.
 */
static int
extra_uses(const struct prof *p, const struct replay_set *rs, const struct dpick *sp,
    uint32_t n, const uint32_t *bstart, struct extra **out, size_t *nx)
{
	struct prof_opindex ix;
	size_t room = 0, cap = 0;
	uint32_t *in = NULL;
	struct extra *ex = NULL;
	int rc = -1;

	*out = NULL;
	*nx = 0;
	if (prof_opindex_build(p, &ix) < 0)
		return -1;
	for (uint32_t j = 0; j < n; j++) {
		size_t k = chain_uses(p, &ix, rs, &rs->c[sp[j].cand]);
		room = k > room ? k : room;
		cap += k;
	}
	in = malloc((room ? room : 1) * sizeof *in);
	ex = malloc((cap ? cap : 1) * sizeof *ex);
	if (in == NULL || ex == NULL)
		goto out;
	for (uint32_t j = 0; j < n; j++) {
		uint32_t r = sp[j].r, ni = inputs_into(p, &ix, rs, &rs->c[sp[j].cand], in);
		for (uint32_t k = 0; k < ni; k++) {
			uint32_t b = in[k], d = b, u0, u1, alloc, fr;
			for (uint32_t q = bstart[b]; q < bstart[b + 1] && sp[q].r <= r; q++)
				d = p->nbufs + q;
			segment(p, sp, n, bstart, d, &u0, &u1, &alloc, &fr);
			ex[(*nx)++] = (struct extra){ d, fr != PROF_NONE && fr < r ? fr : r };
		}
	}
	if (*nx > 1)
		qsort(ex, *nx, sizeof *ex, cmp_extra);
	size_t m = 0;
	for (size_t k = 0; k < *nx; k++)
		if (m == 0 || ex[m - 1].d != ex[k].d || ex[m - 1].op != ex[k].op)
			ex[m++] = ex[k];
	*nx = m;
	*out = ex;
	ex = NULL;
	rc = 0;
out:
	free(in);
	free(ex);
	prof_opindex_free(&ix);
	return rc;
}

/* Fill derived buffer db from source s: uses [u0, u1) merged with the extra
 * uses ex[0 .. nx) (increasing; PROF_ACC_READ; none where s has a use
 * there already). Returns 0, or -1 when out of memory. */
static int
fill_uses(struct prof_buf *db, const struct prof_buf *s, uint32_t u0, uint32_t u1,
    const struct extra *ex, size_t nx)
{
	uint32_t cap = u1 - u0 + (uint32_t)nx, n = 0;
	size_t x = 0;

	db->use = malloc((cap ? cap : 1) * sizeof *db->use);
	if (db->use == NULL)
		return -1;
	if ((s->acc != NULL || nx > 0) && (db->acc = malloc(cap ? cap : 1)) == NULL)
		return -1;
	db->cap = cap;
	for (uint32_t u = u0; u <= u1; u++) {
		uint32_t op = u < u1 ? s->use[u] : UINT32_MAX;
		for (; x < nx && ex[x].op <= op; x++) {
			if (ex[x].op == op)
				continue;
			if (db->acc != NULL)
				db->acc[n] = PROF_ACC_READ;
			db->use[n++] = ex[x].op;
		}
		if (u == u1)
			break;
		if (db->acc != NULL)
			db->acc[n] = s->acc != NULL ? s->acc[u] : PROF_ACC_UNKNOWN;
		db->use[n++] = op;
	}
	db->nuse = n;
	return 0;
}

/* p's operations into out (prof_init'd with p->nops): durations, copies,
 * the host's side where p has it, the fixed bytes, replay and wild marks.
 * Returns 0, or -1 when out of memory. */
static int
copy_ops(const struct prof *p, struct prof *out)
{
	size_t n = p->nops ? p->nops : 1;

	memcpy(out->dur, p->dur, p->nops * sizeof *p->dur);
	memcpy(out->xfer, p->xfer, p->nops);
	out->fixed = p->fixed;
	if (p->host != NULL && p->barrier != NULL) {
		if (prof_host(out) < 0)
			return -1;
		memcpy(out->host, p->host, p->nops * sizeof *p->host);
		memcpy(out->barrier, p->barrier, p->nops);
	}
	if (p->replay != NULL) {
		if ((out->replay = malloc(n)) == NULL)
			return -1;
		memcpy(out->replay, p->replay, p->nops);
	}
	if (p->wild != NULL) {
		if ((out->wild = malloc(n)) == NULL)
			return -1;
		memcpy(out->wild, p->wild, p->nops);
	}
	return 0;
}

/* The buffers of the profile with the sorted picks sp into out, and
 * orig. Returns 0, or -1 when out of memory. */
static int
derive_bufs(const struct prof *p, const struct replay_set *rs, const struct dpick *sp,
    uint32_t n, const uint32_t *bstart, struct prof *out, uint32_t *orig)
{
	struct extra *ex;
	size_t nx, x = 0;
	uint32_t nb = p->nbufs + n;

	if (extra_uses(p, rs, sp, n, bstart, &ex, &nx) < 0)
		return -1;
	out->buf = calloc(nb ? nb : 1, sizeof *out->buf);
	if (out->buf == NULL) {
		free(ex);
		return -1;
	}
	out->cap = nb ? nb : 1;
	for (uint32_t d = 0; d < nb; d++) {
		uint32_t b = d < p->nbufs ? d : sp[d - p->nbufs].buf, u0, u1;
		const struct prof_buf *s = &p->buf[b];
		struct prof_buf *db = &out->buf[d];
		size_t x0 = x;
		orig[d] = b;
		*db = (struct prof_buf){ .size = s->size, .span = s->span, .key = s->key,
			.movable = s->movable };
		segment(p, sp, n, bstart, d, &u0, &u1, &db->alloc, &db->free);
		while (x < nx && ex[x].d == d)
			x++;
		out->nbufs = d + 1;
		if (fill_uses(db, s, u0, u1, ex + x0, x - x0) < 0) {
			free(ex);
			return -1;
		}
	}
	free(ex);
	return 0;
}

/* The profile with the picks (recompute.h). Returns 0, or -1 when out of
 * memory or a pick is not one of a distinct gap of rs with r in its window
 * (out and *orig empty). */
int
rc_derive(const struct prof *p, const struct replay_set *rs, const struct rc_pick *pk,
    uint32_t n, const struct rc_params *rp, struct prof *out, uint32_t **orig)
{
	double launch_s = rp != NULL && rp->host_launch_s > 0 ? rp->host_launch_s : RC_HOST_LAUNCH_S;
	double drop_s = rp != NULL ? rp->host_drop_s : 0, remake_s = rp != NULL ? rp->host_remake_s : 0;
	struct dpick *sp = NULL;
	uint32_t *bstart = NULL;

	*orig = NULL;
	if (prof_init(out, p->nops) < 0)
		return -1;
	if (sorted_picks(rs, pk, n, &sp) < 0 ||
	    (bstart = calloc((size_t)p->nbufs + 1, sizeof *bstart)) == NULL ||
	    (*orig = malloc(((size_t)p->nbufs + n + 1) * sizeof **orig)) == NULL)
		goto fail;
	/* bstart[b]: the first of b's picks in sp (they are by buffer) */
	for (uint32_t j = 0; j < n; j++)
		bstart[sp[j].buf + 1]++;
	for (uint32_t b = 0; b < p->nbufs; b++)
		bstart[b + 1] += bstart[b];
	if (copy_ops(p, out) < 0 || derive_bufs(p, rs, sp, n, bstart, out, *orig) < 0)
		goto fail;
	for (uint32_t j = 0; j < n; j++) {
		const struct replay_cand *c = &rs->c[sp[j].cand];
		uint32_t r = sp[j].r;
		if (r >= p->nops)
			continue;
		out->dur[r] += c->cost_s;
		if (out->host != NULL) {
			out->host[r > 0 ? r - 1 : r] += c->nchain * launch_s + remake_s;
			out->host[p->buf[c->buf].use[c->gap]] += drop_s;
		}
	}
	free(sp);
	free(bstart);
	return 0;
fail:
	free(sp);
	free(bstart);
	free(*orig);
	*orig = NULL;
	prof_fini(out);
	return -1;
}

/* ---- rc_choose ---- */

/* The state of one choice: the candidates' inputs, order and states, the
 * picks made so far by buffer, and the memory. */
struct chooser {
	const struct prof *p;
	const struct replay_set *rs;
	uint32_t *istart, *inp;	/* candidate i's inputs: inp[istart[i] .. istart[i + 1]) */
	uint32_t *order;	/* the candidates, best score first */
	uint8_t *state;		/* 0 open, 1 picked, 2 passed over */
	uint32_t *pick_head;	/* per buffer: its latest pick (UINT32_MAX: none) */
	uint32_t *pick_next;	/* per candidate: the pick of its buffer before it */
	uint32_t *in_head;	/* per buffer: its latest use as a pick's input (a node) */
	uint32_t *in_next, *in_r;	/* per node: the one before, and the pick's r */
	uint32_t nnodes;
	uint32_t *pr;		/* per candidate picked: its replay's operation */
	uint32_t *node0;	/* per candidate picked: its inputs' first node */
	double *before;		/* the device's time before each operation */
	uint32_t h[RC_MAX_HOISTS];	/* the picks a candidate's replay hoists to its
					 * own (evaluate), each once */
	uint32_t nh;
	uint32_t *blocked;	/* the operations no candidate lowers, set aside */
	uint32_t nblocked;
	struct rc_tree tree;
};

/* Free what a chooser holds. */
static void
chooser_free(struct chooser *ch)
{
	free(ch->istart);
	free(ch->inp);
	free(ch->order);
	free(ch->state);
	free(ch->pick_head);
	free(ch->pick_next);
	free(ch->in_head);
	free(ch->in_next);
	free(ch->in_r);
	free(ch->pr);
	free(ch->node0);
	free(ch->before);
	free(ch->blocked);
	rc_tree_free(&ch->tree);
}

/* Every candidate's inputs into ch (istart, inp). Returns 0, or -1 when out
 * of memory. */
static int
chooser_inputs(struct chooser *ch)
{
	const struct replay_set *rs = ch->rs;
	struct prof_opindex ix;
	size_t total = 0;

	if (prof_opindex_build(ch->p, &ix) < 0)
		return -1;
	for (uint32_t i = 0; i < rs->n; i++)
		total += chain_uses(ch->p, &ix, rs, &rs->c[i]);
	ch->istart = malloc(((size_t)rs->n + 1) * sizeof *ch->istart);
	ch->inp = malloc((total ? total : 1) * sizeof *ch->inp);
	if (ch->istart == NULL || ch->inp == NULL) {
		prof_opindex_free(&ix);
		return -1;
	}
	ch->istart[0] = 0;
	for (uint32_t i = 0; i < rs->n; i++)
		ch->istart[i + 1] = ch->istart[i] +
		    inputs_into(ch->p, &ix, rs, &rs->c[i], ch->inp + ch->istart[i]);
	prof_opindex_free(&ix);
	return 0;
}

/* What a candidate is ranked by (cmp_order). */
struct order_key {
	double score;
	uint32_t len;		/* the away operations */
	uint32_t i;
};

/* qsort order of candidates: the most bytes a second first, then the
 * longer away, then the set's order. */
static int
cmp_order(const void *a, const void *b)
{
	const struct order_key *x = a, *y = b;

	if (x->score != y->score)
		return x->score > y->score ? -1 : 1;
	if (x->len != y->len)
		return x->len > y->len ? -1 : 1;
	return x->i < y->i ? -1 : x->i > y->i;
}

/* The candidates in score order into ch->order. Returns 0, or -1 when out
 * of memory. */
static int
chooser_order(struct chooser *ch)
{
	uint32_t n = ch->rs->n;
	struct order_key *k = malloc((n ? n : 1) * sizeof *k);

	ch->order = malloc((n ? n : 1) * sizeof *ch->order);
	if (k == NULL || ch->order == NULL) {
		free(k);
		return -1;
	}
	for (uint32_t i = 0; i < n; i++) {
		const struct replay_cand *c = &ch->rs->c[i];
		double cost = c->cost_s > 1e-7 ? c->cost_s : 1e-7;
		k[i] = (struct order_key){ (double)c->bytes / cost,
			c->r_hi > c->r_lo ? c->r_hi - c->r_lo : 0, i };
	}
	if (n > 1)
		qsort(k, n, sizeof *k, cmp_order);
	for (uint32_t i = 0; i < n; i++)
		ch->order[i] = k[i].i;
	free(k);
	return 0;
}

/* Per buffer of p, the stream of all its uses into bstr, and whether they
 * are on more than one into mixed. */
static void
buffer_streams(const struct prof *p, const uint32_t *stream, uint32_t *bstr, uint8_t *mixed)
{
	for (uint32_t b = 0; b < p->nbufs; b++) {
		const struct prof_buf *s = &p->buf[b];
		mixed[b] = 0;
		bstr[b] = s->nuse > 0 && s->use[0] < p->nops ? stream[s->use[0]] : 0;
		for (uint32_t u = 1; u < s->nuse && !mixed[b]; u++)
			mixed[b] = s->use[u] < p->nops && stream[s->use[u]] != bstr[b];
	}
}

/* Whether buffer b's uses are all on stream s (or it has none). */
static int
on_stream(const struct prof *p, const uint32_t *bstr, const uint8_t *mixed, uint32_t b,
    uint32_t s)
{
	return p->buf[b].nuse == 0 || (!mixed[b] && bstr[b] == s);
}

/* The first operation candidate c frees its buffer at (use[k] + 1). */
static uint32_t
away_from(const struct prof *p, const struct replay_cand *c)
{
	return p->buf[c->buf].use[c->gap] + 1;
}

/* Whether a buffer away over the operations a .. r - 1 is away for less
 * than RC_MIN_AWAY_S of the device's time. */
static int
brief(const struct chooser *ch, uint32_t a, uint32_t r)
{
	r = r < ch->p->nops ? r : ch->p->nops;
	return a >= r || ch->before[r] - ch->before[a] < RC_MIN_AWAY_S;
}

/* Pass over the candidates that are never picked: not usable, away too
 * briefly, or used on another stream (counted in sk). Returns 0, or -1 when
 * out of memory. */
static int
chooser_static(struct chooser *ch, const uint8_t *usable, const uint32_t *stream,
    struct rc_skipped *sk)
{
	const struct prof *p = ch->p;
	uint32_t *bstr = NULL;
	uint8_t *mixed = NULL;

	if (stream != NULL) {
		bstr = malloc((p->nbufs ? p->nbufs : 1) * sizeof *bstr);
		mixed = malloc(p->nbufs ? p->nbufs : 1);
		if (bstr == NULL || mixed == NULL) {
			free(bstr);
			free(mixed);
			return -1;
		}
		buffer_streams(p, stream, bstr, mixed);
	}
	for (uint32_t i = 0; i < ch->rs->n; i++) {
		const struct replay_cand *c = &ch->rs->c[i];
		if (usable != NULL && !usable[i]) {
			ch->state[i] = 2;
			sk->unusable++;
			continue;
		}
		if (brief(ch, away_from(p, c), c->r_hi)) {
			ch->state[i] = 2;
			sk->brief++;
			continue;
		}
		if (stream == NULL || c->nchain == 0 || replay_chain(ch->rs, c)[0] >= p->nops)
			continue;
		uint32_t s = stream[replay_chain(ch->rs, c)[0]];
		int ok = on_stream(p, bstr, mixed, c->buf, s);
		for (uint32_t k = ch->istart[i]; ok && k < ch->istart[i + 1]; k++)
			ok = on_stream(p, bstr, mixed, ch->inp[k], s);
		if (!ok) {
			ch->state[i] = 2;
			sk->streams++;
		}
	}
	free(bstr);
	free(mixed);
	return 0;
}

/* Whether pick j is among the hoists found so far (ch->h). */
static int
hoisted(const struct chooser *ch, uint32_t j)
{
	for (uint32_t k = 0; k < ch->nh; k++)
		if (ch->h[k] == j)
			return 1;
	return 0;
}

/*
 * Have every input of candidate i on the device at operation r: a pick of
 * an input's that has it away there (a <= r < its replay) is hoisted to r,
 * into ch->h, and so on for that pick's inputs (all to the same r). Returns 0, or -1 when a
 * hoisted pick would be away too briefly or the hoists would be more than
 * RC_MAX_HOISTS.
 */
static int
need_inputs(struct chooser *ch, uint32_t i, uint32_t r)
{
	for (uint32_t k = ch->istart[i]; k < ch->istart[i + 1]; k++)
		for (uint32_t j = ch->pick_head[ch->inp[k]]; j != UINT32_MAX; j = ch->pick_next[j]) {
			uint32_t aj = away_from(ch->p, &ch->rs->c[j]);
			if (r < aj || r >= ch->pr[j] || hoisted(ch, j))
				continue;
			if (brief(ch, aj, r) || ch->nh == RC_MAX_HOISTS)
				return -1;
			ch->h[ch->nh++] = j;
			if (need_inputs(ch, j, r) < 0)
				return -1;
		}
	return 0;
}

/*
 * Whether candidate i can be picked now to lower operation at: its replay
 * goes before the earliest replay of a pick that reads its buffer while it
 * would be away, else at its r_hi (into *rp); the picks of its inputs that
 * have them away there are hoisted (ch->h: need_inputs); and the memory at
 * at falls, while nowhere a hoisted pick is back does the memory rise over
 * the peak. Returns 1 when so, 0 when not now, -1 when
 * never: it or a hoisted pick would be away too briefly (the picks' replays
 * only move earlier as the choice goes on).
 */
static int
evaluate(struct chooser *ch, uint32_t i, uint32_t at, uint32_t *rp)
{
	const struct replay_cand *c = &ch->rs->c[i];
	uint32_t a = away_from(ch->p, c), r = c->r_hi;

	ch->nh = 0;
	for (uint32_t q = ch->in_head[c->buf]; q != UINT32_MAX; q = ch->in_next[q])
		if (a <= ch->in_r[q] && ch->in_r[q] < r)
			r = ch->in_r[q];
	if (brief(ch, a, r))
		return -1;
	if (at < a || at >= r)
		return 0;
	if (need_inputs(ch, i, r) < 0)
		return -1;
	/* the memory at at falls, and where the hoisted picks are back it
	 * stays at the peak or under (their bytes all counted everywhere; an
	 * operation set aside is at the peak already) */
	int64_t gain = (int64_t)c->bytes, back = 0, top = ch->tree.mx[1];
	for (uint32_t k = 0; k < ch->nh; k++)
		back += (int64_t)ch->rs->c[ch->h[k]].bytes;
	for (uint32_t k = 0; k < ch->nh; k++) {
		uint32_t j = ch->h[k];
		if (r <= at && at < ch->pr[j])
			gain -= (int64_t)ch->rs->c[j].bytes;
		if (rc_tree_max(&ch->tree, r, ch->pr[j] - 1) + back > top)
			return 0;
		for (uint32_t q = 0; q < ch->nblocked; q++)
			if (r <= ch->blocked[q] && ch->blocked[q] < ch->pr[j])
				return 0;
	}
	*rp = r;
	return gain > 0;
}

/* Pick candidate i with its replay at r, after hoisting the picks ch->h
 * that evaluate found to r: note it for the others, and take its buffer's bytes off
 * the memory where it is away (a hoisted pick's back where it no longer
 * is). */
static void
pick(struct chooser *ch, uint32_t i, uint32_t r)
{
	const struct replay_cand *c = &ch->rs->c[i];
	uint32_t a = away_from(ch->p, c);

	for (uint32_t k = 0; k < ch->nh; k++) {
		uint32_t j = ch->h[k];
		rc_tree_add(&ch->tree, r, ch->pr[j] - 1, (int64_t)ch->rs->c[j].bytes);
		ch->pr[j] = r;
		for (uint32_t q = 0; q < ch->istart[j + 1] - ch->istart[j]; q++)
			ch->in_r[ch->node0[j] + q] = r;
	}
	ch->nh = 0;
	ch->state[i] = 1;
	ch->pr[i] = r;
	ch->node0[i] = ch->nnodes;
	ch->pick_next[i] = ch->pick_head[c->buf];
	ch->pick_head[c->buf] = i;
	for (uint32_t k = ch->istart[i]; k < ch->istart[i + 1]; k++) {
		uint32_t b = ch->inp[k], q = ch->nnodes++;
		ch->in_r[q] = r;
		ch->in_next[q] = ch->in_head[b];
		ch->in_head[b] = q;
	}
	if (a < r)
		rc_tree_add(&ch->tree, a, r - 1, -(int64_t)c->bytes);
}

/* Make the chooser's state for p and rs. Returns 0, or -1 when out of
 * memory. */
static int
chooser_init(struct chooser *ch, const struct prof *p, const struct replay_set *rs)
{
	uint32_t n = rs->n ? rs->n : 1, nb = p->nbufs ? p->nbufs : 1;

	memset(ch, 0, sizeof *ch);
	ch->p = p;
	ch->rs = rs;
	if (chooser_inputs(ch) < 0 || chooser_order(ch) < 0 || rc_tree_build(p, &ch->tree) < 0)
		return -1;
	size_t nodes = ch->istart[rs->n] ? ch->istart[rs->n] : 1;
	ch->state = calloc(n, 1);
	ch->pick_head = malloc(nb * sizeof *ch->pick_head);
	ch->pick_next = malloc(n * sizeof *ch->pick_next);
	ch->in_head = malloc(nb * sizeof *ch->in_head);
	ch->in_next = malloc(nodes * sizeof *ch->in_next);
	ch->in_r = malloc(nodes * sizeof *ch->in_r);
	ch->pr = malloc(n * sizeof *ch->pr);
	ch->node0 = malloc(n * sizeof *ch->node0);
	ch->before = malloc(((size_t)p->nops + 1) * sizeof *ch->before);
	ch->blocked = malloc((p->nops ? p->nops : 1) * sizeof *ch->blocked);
	if (ch->state == NULL || ch->pick_head == NULL || ch->pick_next == NULL ||
	    ch->in_head == NULL || ch->in_next == NULL || ch->in_r == NULL || ch->pr == NULL ||
	    ch->node0 == NULL || ch->before == NULL || ch->blocked == NULL)
		return -1;
	ch->before[0] = 0;
	for (uint32_t j = 0; j < p->nops; j++)
		ch->before[j + 1] = ch->before[j] + p->dur[j];
	memset(ch->pick_head, 0xff, nb * sizeof *ch->pick_head);
	memset(ch->in_head, 0xff, nb * sizeof *ch->in_head);
	return 0;
}

/* qsort order of pointers to candidates: by buffer, then gap. */
static int
cmp_pick_cand(const void *a, const void *b)
{
	const struct replay_cand *x = *(const struct replay_cand *const *)a;
	const struct replay_cand *y = *(const struct replay_cand *const *)b;

	if (x->buf != y->buf)
		return x->buf < y->buf ? -1 : 1;
	return x->gap < y->gap ? -1 : x->gap > y->gap;
}

/* The picked candidates of ch into *out (by buffer, then gap) and *n.
 * Returns 0, or -1 when out of memory. */
static int
collect_picks(const struct chooser *ch, struct rc_pick **out, uint32_t *n)
{
	const struct replay_set *rs = ch->rs;
	uint32_t m = 0;

	for (uint32_t i = 0; i < rs->n; i++)
		m += ch->state[i] == 1;
	if (m == 0)
		return 0;
	const struct replay_cand **v = malloc(m * sizeof *v);
	if (v == NULL || (*out = malloc(m * sizeof **out)) == NULL) {
		free(v);
		return -1;
	}
	m = 0;
	for (uint32_t i = 0; i < rs->n; i++)
		if (ch->state[i] == 1)
			v[m++] = &rs->c[i];
	qsort(v, m, sizeof *v, cmp_pick_cand);
	for (uint32_t j = 0; j < m; j++)
		(*out)[j] = (struct rc_pick){ (uint32_t)(v[j] - rs->c), ch->pr[v[j] - rs->c] };
	*n = m;
	free(v);
	return 0;
}

/* Choose the gaps to recompute (recompute.h). Returns 0, or -1 when out of
 * memory. */
int
rc_choose(const struct prof *p, const struct replay_set *rs, const uint8_t *usable,
    const uint32_t *stream, uint64_t target, struct rc_pick **out, uint32_t *n,
    struct rc_skipped *sk, uint64_t *peak)
{
	struct rc_skipped none;
	struct chooser ch;
	int rc = -1;

	*out = NULL;
	*n = 0;
	if (sk == NULL)
		sk = &none;
	memset(sk, 0, sizeof *sk);
	if (p->nops == 0) {
		if (peak != NULL)
			*peak = p->fixed;
		return 0;
	}
	/* operations no candidate covers, set aside (lowered by BLOCKED) */
	const int64_t BLOCKED = INT64_MAX / 8;
	memset(&ch, 0, sizeof ch);
	if (chooser_init(&ch, p, rs) < 0 || chooser_static(&ch, usable, stream, sk) < 0)
		goto out;
	for (;;) {
		uint32_t at = rc_tree_argmax(&ch.tree);
		int64_t top = ch.tree.mx[1] > 0 ? ch.tree.mx[1] : 0;
		if (p->fixed + (uint64_t)top <= target || ch.nblocked == p->nops)
			break;
		uint32_t best = UINT32_MAX, best_r = 0;
		for (uint32_t k = 0; k < rs->n && best == UINT32_MAX; k++) {
			uint32_t i = ch.order[k];
			const struct replay_cand *c = &rs->c[i];
			if (ch.state[i] != 0 || at < away_from(p, c) || at >= c->r_hi)
				continue;
			int e = evaluate(&ch, i, at, &best_r);
			if (e < 0) {
				ch.state[i] = 2;
				sk->conflict++;
			}
			if (e > 0)
				best = i;
		}
		if (best == UINT32_MAX) {
			/* nothing lowers this operation: the others over the target
			 * still may be (moves can lower this one) */
			rc_tree_add(&ch.tree, at, at, -BLOCKED);
			ch.blocked[ch.nblocked++] = at;
			continue;
		}
		pick(&ch, best, best_r);
	}
	for (uint32_t k = 0; k < ch.nblocked; k++)
		rc_tree_add(&ch.tree, ch.blocked[k], ch.blocked[k], BLOCKED);
	if (peak != NULL)
		*peak = p->fixed + (uint64_t)(ch.tree.mx[1] > 0 ? ch.tree.mx[1] : 0);
	rc = collect_picks(&ch, out, n);
out:
	chooser_free(&ch);
	return rc;
}
