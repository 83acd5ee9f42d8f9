/*
 * record.c: the access profile from events (see record.h).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "record.h"

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
	idmap_free(&r->ids);
	memset(r, 0, sizeof *r);
}

/* Buffer id into the profile; span: its bytes where size is 0 (a small one). */
static void
add(struct rec *r, uint64_t id, uint64_t size, uint64_t span, uint64_t key, uint32_t alloc,
    int movable)
{
	int64_t k = prof_add(&r->p, size, key, alloc, movable);
	if (k < 0 || idmap_put(&r->ids, id, (uint32_t)k) < 0)
		r->oom = 1;
	else
		r->p.buf[k].span = span;
}

void
rec_live(struct rec *r, uint64_t id, uint64_t size, int movable)
{
	add(r, id, size, 0, id & ~(REC_KEY_ORDINAL | REC_KEY_SMALL), PROF_NONE, movable);
}

void
rec_alloc(struct rec *r, uint64_t id, uint64_t size, int movable, uint64_t next_seq)
{
	if (next_seq < r->s0 || next_seq - r->s0 >= r->p.nops)
		return;
	add(r, id, size, 0, REC_KEY_ORDINAL | r->nalloc++, (uint32_t)(next_seq - r->s0), movable);
}

void
rec_live_small(struct rec *r, uint64_t id, uint64_t bytes)
{
	add(r, id, 0, bytes, id & ~(REC_KEY_ORDINAL | REC_KEY_SMALL), PROF_NONE, 0);
}

void
rec_alloc_small(struct rec *r, uint64_t id, uint64_t bytes, uint64_t next_seq)
{
	if (next_seq < r->s0 || next_seq - r->s0 >= r->p.nops)
		return;
	add(r, id, 0, bytes, REC_KEY_ORDINAL | REC_KEY_SMALL | r->nsmall++,
	    (uint32_t)(next_seq - r->s0), 0);
}

void
rec_free(struct rec *r, uint64_t id, uint64_t last_seq)
{
	uint32_t k = idmap_get(&r->ids, id);

	if (k == IDMAP_NONE || r->p.buf[k].free != PROF_NONE)
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
	uint32_t k = idmap_get(&r->ids, id);

	if (k == IDMAP_NONE || seq < r->s0 || seq - r->s0 >= r->p.nops)
		return;
	if (prof_use(&r->p, k, (uint32_t)(seq - r->s0)) < 0)
		r->oom = 1;
}

/* A launch's measured access to one of its buffers into the profile
 * (record.h). Returns 0, 1 when nothing is set, or -1 when out of memory. */
int
rec_access(struct rec *r, uint64_t seq, uint64_t id, unsigned acc)
{
	uint32_t k = idmap_get(&r->ids, id);

	if ((acc != PROF_ACC_READ && acc != PROF_ACC_WRITE) || k == IDMAP_NONE || seq < r->s0 ||
	    seq - r->s0 >= r->p.nops)
		return 1;
	return prof_access(&r->p, k, (uint32_t)(seq - r->s0), acc);
}

void
rec_xfer(struct rec *r, uint64_t seq, unsigned dir)
{
	if (seq >= r->s0 && seq - r->s0 < r->p.nops)
		prof_xfer(&r->p, (uint32_t)(seq - r->s0), dir);
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
