/*
 * record.c: the access profile from events (see record.h).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "record.h"

static uint32_t
slot_of(const struct rec *r, uint64_t id)
{
	uint64_t h = id * 0x9e3779b97f4a7c15ULL;
	return (uint32_t)(h >> 32) & (r->hcap - 1);
}

static int
map_grow(struct rec *r)
{
	uint32_t cap = r->hcap ? r->hcap * 2 : 1024;
	uint64_t *hk = malloc(cap * sizeof *hk);
	uint32_t *hv = malloc(cap * sizeof *hv);
	if (hk == NULL || hv == NULL) {
		free(hk);
		free(hv);
		return -1;
	}
	memset(hv, 0xff, cap * sizeof *hv);
	uint64_t *ok = r->hk;
	uint32_t *ov = r->hv, ocap = r->hcap;
	r->hk = hk;
	r->hv = hv;
	r->hcap = cap;
	for (uint32_t i = 0; i < ocap; i++) {
		if (ov[i] == UINT32_MAX)
			continue;
		uint32_t s = slot_of(r, ok[i]);
		while (hv[s] != UINT32_MAX)
			s = (s + 1) & (cap - 1);
		hk[s] = ok[i];
		hv[s] = ov[i];
	}
	free(ok);
	free(ov);
	return 0;
}

static uint32_t
map_get(const struct rec *r, uint64_t id)
{
	if (r->hcap == 0)
		return UINT32_MAX;
	for (uint32_t s = slot_of(r, id);; s = (s + 1) & (r->hcap - 1)) {
		if (r->hv[s] == UINT32_MAX)
			return UINT32_MAX;
		if (r->hk[s] == id)
			return r->hv[s];
	}
}

static int
map_put(struct rec *r, uint64_t id, uint32_t v)
{
	if (2 * (r->hn + 1) > r->hcap && map_grow(r) < 0)
		return -1;
	uint32_t s = slot_of(r, id);
	while (r->hv[s] != UINT32_MAX && r->hk[s] != id)
		s = (s + 1) & (r->hcap - 1);
	if (r->hv[s] == UINT32_MAX)
		r->hn++;
	r->hk[s] = id;
	r->hv[s] = v;
	return 0;
}

int
rec_begin(struct rec *r, uint64_t s0, uint32_t nops)
{
	memset(r, 0, sizeof *r);
	r->s0 = s0;
	if (prof_init(&r->p, nops) < 0)
		return -1;
	return 0;
}

void
rec_fini(struct rec *r)
{
	prof_fini(&r->p);
	free(r->hk);
	free(r->hv);
	memset(r, 0, sizeof *r);
}

static void
add(struct rec *r, uint64_t id, uint64_t size, uint64_t key, uint32_t alloc, int movable)
{
	int64_t k = prof_add(&r->p, size, key, alloc, movable);
	if (k < 0 || map_put(r, id, (uint32_t)k) < 0)
		r->oom = 1;
}

void
rec_live(struct rec *r, uint64_t id, uint64_t size, int movable)
{
	add(r, id, size, id & ~REC_KEY_ORDINAL, PROF_NONE, movable);
}

void
rec_alloc(struct rec *r, uint64_t id, uint64_t size, int movable, uint64_t next_seq)
{
	if (next_seq < r->s0 || next_seq - r->s0 >= r->p.nops)
		return;
	add(r, id, size, REC_KEY_ORDINAL | r->nalloc++, (uint32_t)(next_seq - r->s0), movable);
}

void
rec_free(struct rec *r, uint64_t id, uint64_t last_seq)
{
	uint32_t k = map_get(r, id);

	if (k == UINT32_MAX || r->p.buf[k].free != PROF_NONE)
		return;
	if (last_seq < r->s0) {
		/* freed before the first operation: it held nothing during the iteration */
		r->p.buf[k].free = 0;
		r->p.buf[k].size = 0;
		return;
	}
	if (last_seq - r->s0 >= r->p.nops)
		return;
	prof_free(&r->p, k, (uint32_t)(last_seq - r->s0));
}

void
rec_use(struct rec *r, uint64_t seq, uint64_t id)
{
	uint32_t k = map_get(r, id);

	if (k == UINT32_MAX || seq < r->s0 || seq - r->s0 >= r->p.nops)
		return;
	if (prof_use(&r->p, k, (uint32_t)(seq - r->s0)) < 0)
		r->oom = 1;
}

void
rec_time(struct rec *r, uint64_t seq, double seconds)
{
	if (seq < r->s0 || seq - r->s0 >= r->p.nops || seconds < 0)
		return;
	if (r->p.dur[seq - r->s0] == 0)
		r->timed++;
	r->p.dur[seq - r->s0] += seconds;
}

void
rec_end(struct rec *r)
{
	for (uint32_t k = 0; k < r->p.nbufs; k++) {
		struct prof_buf *b = &r->p.buf[k];
		if ((b->alloc == PROF_NONE) != (b->free == PROF_NONE))
			b->movable = 0;
	}
}
