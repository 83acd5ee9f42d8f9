/*
 * prof.c: the access profile of one iteration (plan.h), and what the
 * planner's files read off it: the memory each buffer's lifetime adds, the
 * timeline, and the device waiting for the host.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "plan_internal.h"

/* An empty profile of nops operations (plan.h). Returns 0, or -1 when out of
 * memory. */
int
prof_init(struct prof *p, uint32_t nops)
{
	memset(p, 0, sizeof *p);
	p->nops = nops;
	p->dur = calloc(nops ? nops : 1, sizeof *p->dur);
	p->xfer = calloc(nops ? nops : 1, 1);
	if (p->dur == NULL || p->xfer == NULL) {
		prof_fini(p);
		return -1;
	}
	return 0;
}

/* Free what the profile holds, and empty it. */
void
prof_fini(struct prof *p)
{
	for (uint32_t i = 0; i < p->nbufs; i++) {
		free(p->buf[i].use);
		free(p->buf[i].acc);
	}
	free(p->buf);
	free(p->replay);
	free(p->wild);
	free(p->dur);
	free(p->xfer);
	free(p->host);
	free(p->barrier);
	free(p->cut);
	memset(p, 0, sizeof *p);
}

/* prof_cut (plan.h) */
int
prof_cut(struct prof *p, uint32_t op)
{
	if (op >= p->nops || (p->ncut > 0 && op <= p->cut[p->ncut - 1]))
		return 0;
	if (p->ncut + 2 > p->cutcap) {
		uint32_t cap = p->cutcap ? 2 * p->cutcap : 16;
		uint32_t *c = realloc(p->cut, cap * sizeof *c);
		if (c == NULL)
			return -1;
		p->cut = c;
		p->cutcap = cap;
	}
	if (p->ncut == 0 && op != 0)
		p->cut[p->ncut++] = 0;	/* the first phase starts the iteration */
	p->cut[p->ncut++] = op;
	return 0;
}

/* Give the profile the host's side, zeros (plan.h). Returns 0, or -1 when
 * out of memory. */
int
prof_host(struct prof *p)
{
	if (p->host == NULL)
		p->host = calloc(p->nops ? p->nops : 1, sizeof *p->host);
	if (p->barrier == NULL)
		p->barrier = calloc(p->nops ? p->nops : 1, 1);
	return p->host != NULL && p->barrier != NULL ? 0 : -1;
}

/* qsort order of uint64_t. */
static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* The median of the nonzero of call[0 .. n) that are no synchronisation's
 * (sync), 0: none; or UINT64_MAX when out of memory. */
static uint64_t
median_call(const uint64_t *call, const uint8_t *sync, uint32_t n)
{
	uint32_t m = 0;

	for (uint32_t i = 0; i < n; i++)
		m += call[i] != 0 && !sync[i];
	if (m == 0)
		return 0;
	uint64_t *v = malloc(m * sizeof *v), med;
	if (v == NULL)
		return UINT64_MAX;
	m = 0;
	for (uint32_t i = 0; i < n; i++)
		if (call[i] != 0 && !sync[i])
			v[m++] = call[i];
	qsort(v, m, sizeof *v, cmp_u64);
	med = v[m / 2];
	free(v);
	return med;
}

/* The host's side from a recording's issue times (plan.h). Returns 0, or -1
 * when out of memory. */
int
prof_host_pace(struct prof *p, const uint64_t *issue, const uint64_t *ebb, const uint64_t *call,
    const uint8_t *sync, double *queued_s)
{
	uint64_t median = 0, queued = 0;

	if (prof_host(p) < 0)
		return -1;
	if (call != NULL && (median = median_call(call, sync, p->nops)) == UINT64_MAX)
		return -1;
	for (uint32_t i = 0; i < p->nops; i++) {
		p->barrier[i] = sync[i] != 0;
		p->host[i] = 0;
		/* a synchronisation's gap is its wait (its call), which the
		 * planner replays, then the host's own time: known only with
		 * the call's time */
		if ((sync[i] && (call == NULL || call[i] == 0)) || issue[i] == 0 ||
		    issue[i + 1] <= issue[i])
			continue;
		uint64_t gap = issue[i + 1] - issue[i], mine = ebb ? ebb[i + 1] - ebb[i] : 0;
		if (sync[i]) {
			mine += call[i];
		} else if (median > 0 && call[i] > PROF_QUEUED_X * median &&
		    call[i] - median > PROF_QUEUED_NS) {
			mine += call[i] - median;
			queued += call[i] - median;
		}
		p->host[i] = gap > mine ? (double)(gap - mine) / 1e9 : 0;
	}
	if (queued_s != NULL)
		*queued_s = (double)queued / 1e9;
	return 0;
}

/*
 * The device waiting for the host over one iteration. The host issues
 * operation i at h, and the device runs it from max(h, the end of the one
 * before) for its duration; the host then takes host[i], plus the moves it
 * issues after i (noff, nres: how many; NULL: none), before issuing the
 * next. At a barrier the host first waits for the device to finish. The
 * iteration starts with host and device together.
 */
double
prof_host_idle_moves(const struct prof *p, const struct plan_params *pp, const uint32_t *noff,
    const uint32_t *nres)
{
	if (p->host == NULL || p->barrier == NULL)
		return 0;
	double h = 0, d = 0, idle = 0;

	for (uint32_t i = 0; i < p->nops; i++) {
		if (h > d) {
			idle += h - d;
			d = h;
		}
		d += p->dur[i];
		if (p->barrier[i] && h < d)
			h = d;
		h += p->host[i];
		if (noff != NULL)
			h += noff[i] * pp->host_offload_s + nres[i] * pp->host_restore_s;
	}
	return idle;
}

/* The device waiting for the host with nothing moved (plan.h). */
double
prof_host_idle(const struct prof *p)
{
	return prof_host_idle_moves(p, NULL, NULL, NULL);
}

/* Mark operation op a copy of the job's in direction dir; others are ignored. */
void
prof_xfer(struct prof *p, uint32_t op, unsigned dir)
{
	if (op < p->nops && (dir == PROF_XFER_D2H || dir == PROF_XFER_H2D))
		p->xfer[op] = (uint8_t)dir;
}

/* How many operations are copies of the job's in direction dir. */
uint32_t
prof_xfers(const struct prof *p, unsigned dir)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < p->nops; i++)
		n += p->xfer[i] == dir;
	return n;
}

/* Add a buffer (plan.h). Returns its index, or -1 when out of memory. */
int64_t
prof_add(struct prof *p, uint64_t size, uint64_t key, uint32_t alloc, int movable)
{
	if (p->nbufs == p->cap) {
		uint32_t cap = p->cap ? p->cap * 2 : 256;
		struct prof_buf *v = realloc(p->buf, cap * sizeof *v);
		if (v == NULL)
			return -1;
		p->buf = v;
		p->cap = cap;
	}
	struct prof_buf *b = &p->buf[p->nbufs];
	memset(b, 0, sizeof *b);
	b->size = size;
	b->key = key;
	b->alloc = alloc;
	b->free = PROF_NONE;
	b->movable = (uint8_t)(movable != 0);
	return p->nbufs++;
}

/* Operation op uses buffer bi; a use not after the last is ignored. Returns
 * 0, or -1 when out of memory. */
int
prof_use(struct prof *p, uint32_t bi, uint32_t op)
{
	struct prof_buf *b = &p->buf[bi];

	if (b->nuse > 0 && b->use[b->nuse - 1] >= op)
		return 0;
	if (b->nuse == b->cap) {
		uint32_t cap = b->cap ? b->cap * 2 : 4;
		uint32_t *v = realloc(b->use, cap * sizeof *v);
		if (v == NULL)
			return -1;
		b->use = v;
		if (b->acc != NULL) {
			uint8_t *a = realloc(b->acc, cap);
			if (a == NULL)
				return -1;
			memset(a + b->cap, PROF_ACC_UNKNOWN, cap - b->cap);
			b->acc = a;
		}
		b->cap = cap;
	}
	if (b->acc != NULL)
		b->acc[b->nuse] = PROF_ACC_UNKNOWN;
	b->use[b->nuse++] = op;
	return 0;
}

/* The index of buffer b's use at operation op, or -1 when it has none (plan.h). */
int64_t
prof_use_index(const struct prof_buf *b, uint32_t op)
{
	uint32_t lo = 0, hi = b->nuse;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (b->use[mid] < op)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < b->nuse && b->use[lo] == op ? (int64_t)lo : -1;
}

/* Operation op accessed buffer bi as acc (plan.h). Returns 0, 1 when bi has
 * no use at op, or -1 when out of memory. */
int
prof_access(struct prof *p, uint32_t bi, uint32_t op, unsigned acc)
{
	struct prof_buf *b = &p->buf[bi];
	int64_t u = prof_use_index(b, op);

	if (u < 0)
		return 1;
	if (b->acc == NULL) {
		b->acc = calloc(b->cap ? b->cap : 1, 1);
		if (b->acc == NULL)
			return -1;
	}
	if (acc > b->acc[u])
		b->acc[u] = (uint8_t)acc;
	return 0;
}

/* How operation op accesses buffer bi (plan.h). */
unsigned
prof_access_of(const struct prof *p, uint32_t bi, uint32_t op)
{
	const struct prof_buf *b = &p->buf[bi];
	int64_t u = b->acc != NULL ? prof_use_index(b, op) : -1;

	return u < 0 ? PROF_ACC_UNKNOWN : b->acc[u];
}

/* Operation op may write buffers it does not reference (plan.h). Returns 0
 * or -1. */
int
prof_wild(struct prof *p, uint32_t op)
{
	if (op >= p->nops)
		return 0;
	if (p->wild == NULL) {
		p->wild = calloc(p->nops ? p->nops : 1, 1);
		if (p->wild == NULL)
			return -1;
	}
	p->wild[op] = 1;
	return 0;
}

/* Operation op can be launched again as it was (plan.h). Returns 0 or -1. */
int
prof_replayable(struct prof *p, uint32_t op)
{
	if (op >= p->nops)
		return 0;
	if (p->replay == NULL) {
		p->replay = calloc(p->nops ? p->nops : 1, 1);
		if (p->replay == NULL)
			return -1;
	}
	p->replay[op] = 1;
	return 0;
}

/* Buffer bi is freed after operation op. */
void
prof_free(struct prof *p, uint32_t bi, uint32_t op)
{
	p->buf[bi].free = op;
}

/* Add size over the operations [first, last] of one iteration (plan_internal.h). */
void
prof_span_add(int64_t *diff, uint32_t n, uint32_t first, uint32_t last, int64_t size)
{
	if (first > last || first >= n)
		return;
	diff[first] += size;
	if (last + 1 < n)
		diff[last + 1] -= size;
}

/* The memory each buffer's lifetime adds, as a difference array. */
void
prof_base_diff(const struct prof *p, int64_t *diff)
{
	uint32_t n = p->nops;

	memset(diff, 0, (n + 1) * sizeof *diff);
	for (uint32_t k = 0; k < p->nbufs; k++) {
		const struct prof_buf *b = &p->buf[k];
		uint32_t first = b->alloc == PROF_NONE ? 0 : b->alloc;
		uint32_t last = b->free == PROF_NONE ? n - 1 : b->free;
		prof_span_add(diff, n, first, last, (int64_t)b->size);
	}
}

/* The peak with nothing moved, and where (plan.h); the fixed bytes alone
 * when out of memory. */
uint64_t
prof_peak(const struct prof *p, uint32_t *at)
{
	uint32_t n = p->nops;
	int64_t *diff = malloc((n + 1) * sizeof *diff);
	int64_t run = 0, best = 0;
	uint32_t where = 0;

	if (diff == NULL || n == 0) {
		free(diff);
		if (at)
			*at = 0;
		return p->fixed;
	}
	prof_base_diff(p, diff);
	for (uint32_t i = 0; i < n; i++) {
		run += diff[i];
		if (run > best) {
			best = run;
			where = i;
		}
	}
	free(diff);
	if (at)
		*at = where;
	return p->fixed + (uint64_t)best;
}

/* The sum of the durations. */
double
prof_time(const struct prof *p)
{
	double s = 0;
	for (uint32_t i = 0; i < p->nops; i++)
		s += p->dur[i];
	return s;
}

/*
 * Each operation's start and end, with the device idle pad[i] seconds before
 * operation i (pad NULL: never); returns the iteration's time.
 */
double
prof_timeline(const struct prof *p, const double *pad, double *T, double *E)
{
	double t = 0;

	for (uint32_t i = 0; i < p->nops; i++) {
		t += pad != NULL ? pad[i] : 0;
		T[i] = t;
		t += p->dur[i] > 0 ? p->dur[i] : 0;
		E[i] = t;
	}
	return t;
}

/* Free what an index holds. */
void
prof_opindex_free(struct prof_opindex *ix)
{
	free(ix->start);
	free(ix->buf);
	memset(ix, 0, sizeof *ix);
}

/* The buffers each operation of p uses (plan.h). Returns 0, or -1 when out
 * of memory (ix empty). */
int
prof_opindex_build(const struct prof *p, struct prof_opindex *ix)
{
	size_t total = 0;

	memset(ix, 0, sizeof *ix);
	ix->start = calloc((size_t)p->nops + 1, sizeof *ix->start);
	for (uint32_t b = 0; ix->start != NULL && b < p->nbufs; b++)
		for (uint32_t u = 0; u < p->buf[b].nuse; u++)
			if (p->buf[b].use[u] < p->nops) {
				ix->start[p->buf[b].use[u] + 1]++;
				total++;
			}
	if (ix->start == NULL || (ix->buf = malloc((total ? total : 1) * sizeof *ix->buf)) == NULL) {
		prof_opindex_free(ix);
		return -1;
	}
	for (uint32_t i = 0; i < p->nops; i++)
		ix->start[i + 1] += ix->start[i];
	/* filled in buffer order, so each operation's list increases; start[i]
	 * ends as the end of i's list, which is where i + 1's begins */
	for (uint32_t b = 0; b < p->nbufs; b++)
		for (uint32_t u = 0; u < p->buf[b].nuse; u++)
			if (p->buf[b].use[u] < p->nops)
				ix->buf[ix->start[p->buf[b].use[u]]++] = b;
	for (uint32_t i = p->nops; i > 0; i--)
		ix->start[i] = ix->start[i - 1];
	ix->start[0] = 0;
	return 0;
}
