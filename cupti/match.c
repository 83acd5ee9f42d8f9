/*
 * match.c: matching CUPTI activity records to ebb's operations.
 */
#include <stdlib.h>
#include <string.h>

#include "match.h"

/* Open-addressing map from correlation id to an index. */
struct cmap {
	uint32_t *key;	/* 0 = empty (CUPTI never uses correlation id 0) */
	size_t *val;
	size_t cap;
};

static int
cmap_init(struct cmap *m, size_t n)
{
	m->cap = 16;
	while (m->cap < 2 * n + 2)
		m->cap *= 2;
	m->key = calloc(m->cap, sizeof *m->key);
	m->val = malloc(m->cap * sizeof *m->val);
	if (m->key == NULL || m->val == NULL) {
		free(m->key);
		free(m->val);
		return -1;
	}
	return 0;
}

static void
cmap_free(struct cmap *m)
{
	free(m->key);
	free(m->val);
}

static size_t
slot(uint32_t k, size_t cap)
{
	return ((size_t)k * 2654435761u) & (cap - 1);
}

/* Insert k -> v unless k is there already. */
static void
cmap_put(struct cmap *m, uint32_t k, size_t v)
{
	size_t i = slot(k, m->cap);
	while (m->key[i] != 0) {
		if (m->key[i] == k)
			return;
		i = (i + 1) & (m->cap - 1);
	}
	m->key[i] = k;
	m->val[i] = v;
}

static int
cmap_get(const struct cmap *m, uint32_t k, size_t *v)
{
	if (k == 0)
		return 0;
	for (size_t i = slot(k, m->cap); m->key[i] != 0; i = (i + 1) & (m->cap - 1))
		if (m->key[i] == k) {
			*v = m->val[i];
			return 1;
		}
	return 0;
}

/* Driver calls that carry an external id, by thread then start. */
struct tagged {
	uint32_t thread;
	uint64_t start, end, seq;
};

static int
cmp_tagged(const void *a, const void *b)
{
	const struct tagged *x = a, *y = b;
	if (x->thread != y->thread)
		return x->thread < y->thread ? -1 : 1;
	return (x->start > y->start) - (x->start < y->start);
}

static int
cmp_op(const void *a, const void *b)
{
	const struct cm_op *x = a, *y = b;
	return (x->ts > y->ts) - (x->ts < y->ts);
}

/* The one operation stamped inside [start, end], or -1 if none or several. */
static int64_t
op_inside(const struct cm_op *ops, size_t nops, uint64_t start, uint64_t end)
{
	size_t lo = 0, hi = nops;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (ops[mid].ts < start)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo >= nops || ops[lo].ts > end)
		return -1;
	if (lo + 1 < nops && ops[lo + 1].ts <= end)
		return -1;
	return (int64_t)lo;
}

int
cupti_match(const struct cm_ext *ext, size_t next, const struct cm_api *api, size_t napi,
    const struct cm_act *act, size_t nact, struct cm_op *ops, size_t nops, cm_out out, void *ctx,
    struct cm_stats *stats)
{
	struct cmap by_ext, by_api;
	struct tagged *tag = NULL;
	size_t ntag = 0;
	int rc = -1;

	memset(stats, 0, sizeof *stats);
	if (cmap_init(&by_ext, next) < 0)
		return -1;
	if (cmap_init(&by_api, napi) < 0) {
		cmap_free(&by_ext);
		return -1;
	}
	for (size_t i = 0; i < next; i++)
		if (ext[i].corr != 0)
			cmap_put(&by_ext, ext[i].corr, i);
	for (size_t i = 0; i < napi; i++)
		if (api[i].corr != 0)
			cmap_put(&by_api, api[i].corr, i);
	tag = malloc((next ? next : 1) * sizeof *tag);
	if (tag == NULL)
		goto done;
	for (size_t i = 0; i < next; i++) {
		size_t a;
		if (cmap_get(&by_api, ext[i].corr, &a) && !api[a].runtime) {
			tag[ntag].thread = api[a].thread;
			tag[ntag].start = api[a].start;
			tag[ntag].end = api[a].end;
			tag[ntag].seq = ext[i].seq;
			ntag++;
		}
	}
	qsort(tag, ntag, sizeof *tag, cmp_tagged);
	if (nops > 0)
		qsort(ops, nops, sizeof *ops, cmp_op);
	for (size_t i = 0; i < nact; i++) {
		size_t e, a;
		if (cmap_get(&by_ext, act[i].corr, &e)) {
			out(ext[e].seq, act[i].start, act[i].end, ctx);
			stats->direct++;
			continue;
		}
		if (!cmap_get(&by_api, act[i].corr, &a) || !api[a].runtime) {
			stats->unmatched++;
			continue;
		}
		/* the first tagged driver call on that thread starting inside the runtime call */
		const struct cm_api *r = &api[a];
		size_t lo = 0, hi = ntag;
		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;
			if (tag[mid].thread < r->thread ||
			    (tag[mid].thread == r->thread && tag[mid].start < r->start))
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo < ntag && tag[lo].thread == r->thread && tag[lo].start <= r->end &&
		    tag[lo].end <= r->end) {
			out(tag[lo].seq, act[i].start, act[i].end, ctx);
			stats->nested++;
			continue;
		}
		int64_t o = op_inside(ops, nops, r->start, r->end);
		if (o >= 0) {
			out(ops[o].seq, act[i].start, act[i].end, ctx);
			stats->timed++;
		} else {
			stats->unmatched++;
		}
	}
	rc = 0;
done:
	free(tag);
	cmap_free(&by_ext);
	cmap_free(&by_api);
	return rc;
}
