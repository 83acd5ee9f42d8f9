/*
 * mover_slab.c: small buffers, carved from 2 MiB slabs in size classes.
 *
 * A small buffer never moves. A freed slot goes on its class's pending list
 * and is handed out again once its tag is done (or, for an allocation on
 * the one stream that freed it, at once: stream order covers it). Slabs are
 * never given back.
 */
#include "config.h"

#include <stdlib.h>

#include "real.h"
#include "log.h"
#include "mover_int.h"
#include "trace.h"
#include "trace_format.h"
#include "vmm.h"

/* Small allocations come from slabs of this size, in these classes. */
#define SLAB_BYTES ((size_t)2 << 20)
#define SMALL_MAX ((size_t)EBB_SLAB_MAX_BYTES)
#define NCLASSES 32	/* 256 B to 1 MiB in steps of 1.5 and 2 need 25 */

/* A freed small buffer, waiting for its tag or for reuse. */
struct slot {
	CUdeviceptr p;
	struct ebb_tag tag;
	struct slot *next;
};

/* One size class. */
struct slabclass {
	size_t size;
	struct slot *ready;			/* free and done */
	struct slot *pending, *pending_tail;	/* free, reusable once their tag is done */
	CUdeviceptr bump;			/* next uncarved byte of the current slab */
	size_t left;				/* bytes left in it */
};

struct mover_slabs {
	struct slabclass classes[NCLASSES];	/* by size, ascending */
	int nclasses;				/* entries of classes[] in use */
	uint64_t held;				/* device bytes of all slabs */
};
static struct mover_slabs slabs;

/* Set up the classes: 256 B to 1 MiB, powers of two and one and a half
 * times them. */
void
mover_slab_setup(void)
{
	slabs.nclasses = 0;
	for (size_t s = 256; s <= SMALL_MAX && slabs.nclasses < NCLASSES; s *= 2) {
		slabs.classes[slabs.nclasses++].size = s;
		if (s + s / 2 <= SMALL_MAX && slabs.nclasses < NCLASSES)
			slabs.classes[slabs.nclasses++].size = s + s / 2;
	}
}

/* The smallest class that holds size bytes, or NULL. */
static struct slabclass *
class_of(size_t size)
{
	for (int i = 0; i < slabs.nclasses; i++)
		if (slabs.classes[i].size >= size)
			return &slabs.classes[i];
	return NULL;
}

/* Whether an allocation of size bytes comes from a slab. */
int
mover_slab_serves(size_t size)
{
	return size <= SMALL_MAX && class_of(size) != NULL;
}

/* Device bytes of all slabs. */
uint64_t
mover_slab_held(void)
{
	return slabs.held;
}

/* A new slab within the limit (making room as for a handle of its size;
 * where that room was made past the driver's share of EBB_LIMIT, or over
 * EBB_LIMIT itself where the arena pins memory, the slab takes it there
 * too). Returns CUDA_SUCCESS, or the error of cuMemAlloc or of making
 * room. */
static CUresult
new_slab(CUdeviceptr *out)
{
	int past = 0;	/* the room was made past what the driver's memory leaves */
	int over = 0;	/* or over EBB_LIMIT (mover_get_handle, for the arena) */

	for (int tries = 0;; tries++) {
		if (over || mover_held_total() + SLAB_BYTES <= mover.limit ||
		    (past && mover_held_total() + SLAB_BYTES <= mover.limit_conf)) {
			CUresult r = ebb_real.cuMemAlloc_v2(out, SLAB_BYTES);
			if (r == CUDA_SUCCESS) {
				slabs.held += SLAB_BYTES;
				mover_note_held();
				return r;
			}
			if (r != CUDA_ERROR_OUT_OF_MEMORY || tries > 64)
				return r;
		}
		CUresult err;
		struct vmm_handle *h = mover_get_handle(vmm_round(SLAB_BYTES), 0, 0, &err);
		if (h == NULL)
			return err;
		past = mover_held_total() > mover.limit;
		over = mover_held_total() > mover.limit_conf;
		vmm_release(h);	/* its room is the slab's */
	}
}

/* A freed slot of c that may be used now (on stream s: NULL for
 * cuMemAlloc), off its list, or NULL. Over the limit, with no slab room
 * left in c, the host waits for the oldest pending slot. */
static struct slot *
reuse_slot(struct slabclass *c, struct ebb_stream *s)
{
	struct slot *x = c->ready;

	if (x != NULL) {
		c->ready = x->next;
	} else {
		/* the oldest pending slots whose tag is done, or on this stream */
		struct slot **p = &c->pending, *prev = NULL;
		int looked = 0;
		for (; *p != NULL && looked < 64; prev = *p, p = &(*p)->next, looked++) {
			struct slot *y = *p;
			if (mover_tag_only(&y->tag, s) || mover_tag_done(&y->tag)) {
				*p = y->next;
				if (c->pending_tail == y)
					c->pending_tail = prev;
				x = y;
				break;
			}
		}
	}
	/* None is done: a marker where the oldest one's streams now are, so
	 * that it is done once the device passes its free (streams.c marks
	 * only every few operations). Over the limit, it is waited for before
	 * a new slab makes room by moving buffers, or fails: the device passes
	 * its last use soon, as it passes the frees the job made. */
	if (x == NULL && c->pending != NULL)
		mover_tag_mark(&c->pending->tag);
	if (x == NULL && c->left < c->size && c->pending != NULL &&
	    mover_held_total() + SLAB_BYTES > mover.limit) {
		uint64_t t0 = ebb_now_ns();
		CUresult r = mover_tag_sync(&c->pending->tag);
		mover_host_waited(&mover.stats.wait_room_ns, t0, "frees", 0);
		if (r == CUDA_SUCCESS) {
			x = c->pending;
			c->pending = x->next;
			if (c->pending_tail == x)
				c->pending_tail = NULL;
		}
	}
	return x;
}

/* Serve b's size bytes from a freed slot or a slab of its class. Returns
 * CUDA_SUCCESS, CUDA_ERROR_OUT_OF_MEMORY (refused: no room for a new slab),
 * or MOVER_DECLINE (a new slab failed otherwise: the driver serves it). */
CUresult
mover_slab_alloc(struct ebb_buf *b, size_t size, struct ebb_stream *s, CUdeviceptr *dptr)
{
	struct slabclass *c = class_of(size);
	struct slot *x = reuse_slot(c, s);
	CUdeviceptr p;

	if (x != NULL) {
		p = x->p;
		free(x);
	} else {
		if (c->left < c->size) {
			CUresult r = new_slab(&c->bump);
			if (r == CUDA_ERROR_OUT_OF_MEMORY) {
				mover_refuse(size, "no room for a new slab of small buffers");
				return r;
			}
			if (r != CUDA_SUCCESS) {
				ebb_log(EBB_LOG_INFO, "a new slab failed (error %d); the driver serves this "
				    "allocation", (int)r);
				return MOVER_DECLINE;
			}
			c->left = SLAB_BYTES;
		}
		p = c->bump;
		c->bump += c->size;
		c->left -= c->size;
	}
	b->mv.managed = EBB_MANAGED_SMALL;
	b->mv.rsize = c->size;
	b->mv.isize = c->size;
	*dptr = p;
	return CUDA_SUCCESS;
}

/* The job freed small buffer b: its slot joins the pending list of its
 * class, reusable once tag is done. Without memory for the list entry the
 * slot is lost; nothing else breaks. */
void
mover_slab_free(struct ebb_buf *b, const struct ebb_tag *tag)
{
	struct slabclass *c = class_of(b->mv.rsize);
	struct slot *x = malloc(sizeof *x);

	if (x == NULL)
		return;	/* the slot is lost; nothing else breaks */
	x->p = b->addr;
	x->tag = *tag;
	x->next = NULL;
	if (c->pending_tail)
		c->pending_tail->next = x;
	else
		c->pending = x;
	c->pending_tail = x;
}
