/*
 * mover_lru.c: the resident movable buffers, least recently used first, and
 * which of them may be offloaded now; room made by offloading them, and
 * new handles.
 */
#include "config.h"

#include "mover_int.h"
#include "vmm.h"

/* A new physical handle of rsize bytes, counted as held (mover_int.h). */
CUresult
mover_make_handle(size_t rsize, struct vmm_handle **h)
{
	CUresult r = vmm_create(rsize, h);

	if (r == CUDA_SUCCESS) {
		mover.stats.handles_created++;
		mover_note_held();
	}
	return r;
}

/* Victims looked at for one that no queued work uses, before taking the oldest. */
#define IDLE_SCAN 32
/* Least recent buffers looked through for a victim of a given size. */
#define SIZED_SCAN 256

/* The list, through each buffer's mv.lru_prev and mv.lru_next. */
struct mover_lru {
	struct ebb_buf *head;	/* the least recently used */
	struct ebb_buf *tail;	/* the most recently used */
};
static struct mover_lru lru;

/* Take b off the list; a buffer not on it is left alone. */
void
mover_lru_remove(struct ebb_buf *b)
{
	if (b->mv.lru_prev)
		b->mv.lru_prev->mv.lru_next = b->mv.lru_next;
	else if (lru.head == b)
		lru.head = b->mv.lru_next;
	else
		return;	/* not on the list */
	if (b->mv.lru_next)
		b->mv.lru_next->mv.lru_prev = b->mv.lru_prev;
	else
		lru.tail = b->mv.lru_prev;
	b->mv.lru_prev = b->mv.lru_next = NULL;
}

/* Put b (not on the list) at its end, as the most recently used. */
void
mover_lru_append(struct ebb_buf *b)
{
	b->mv.lru_prev = lru.tail;
	b->mv.lru_next = NULL;
	if (lru.tail)
		lru.tail->mv.lru_next = b;
	else
		lru.head = b;
	lru.tail = b;
}

/* b was used by an operation: a resident movable buffer becomes the most
 * recently used (others are not on the list). */
void
mover_touch(struct ebb_buf *b)
{
	if (b->mv.managed != EBB_MANAGED_BIG || b->mv.state != EBB_RESIDENT || b->pinned)
		return;
	if (lru.tail == b)
		return;
	mover_lru_remove(b);
	mover_lru_append(b);
}

/* b may never move again: it leaves the list, so nothing evicts it. */
void
mover_pin(struct ebb_buf *b)
{
	mover_lru_remove(b);
}

/* The bytes of the buffers on the list (what eviction could free at most). */
uint64_t
mover_lru_bytes(void)
{
	uint64_t movable = 0;

	for (struct ebb_buf *b = lru.head; b != NULL; b = b->mv.lru_next)
		movable += b->size;
	return movable;
}

/* streams_each's context and callback for mover_lru_in_flight: whether a
 * stream has an operation on its way to the driver at or before upto. */
struct in_flight {
	uint64_t upto;
	int any;
};

static void
stream_in_flight(struct ebb_stream *s, void *p)
{
	struct in_flight *f = p;

	if (streams_first_begun(s) <= f->upto)
		f->any = 1;
}

/*
 * Whether an operation using b may be on its way to the driver (its use
 * noted, it or an earlier operation of its stream not yet submitted): then
 * nothing may move b, as no marker can cover that use yet. For a buffer
 * used on more streams than it keeps, whose streams are not known: whether
 * any stream has an operation on its way up to b's last use (an operation
 * after it, such as the one being issued now, does not use b).
 */
int
mover_lru_in_flight(const struct ebb_buf *b)
{
	for (uint8_t i = 0; i < b->nstreams; i++)
		if (b->last[i].seq > streams_submitted((struct ebb_stream *)b->last[i].stream))
			return 1;
	struct in_flight f = { b->last_seq, 0 };
	if (b->streams_overflow)
		streams_each(stream_in_flight, &f);
	return f.any;
}

/* Whether every queued use of b has completed. */
static int
idle(const struct ebb_buf *b)
{
	for (uint8_t i = 0; i < b->nstreams; i++)
		if (!streams_done((struct ebb_stream *)b->last[i].stream, b->last[i].seq))
			return 0;
	return 1;
}

/* Whether an offload of b can be ordered after its uses now: while a
 * capture runs, no marker can be recorded on a capturing stream, so one
 * recorded before must cover the use. */
static int
uses_orderable(struct ebb_buf *b)
{
	if (b->streams_overflow)
		return 0;
	for (uint8_t i = 0; i < b->nstreams; i++)
		if (!streams_orderable((struct ebb_stream *)b->last[i].stream, b->last[i].seq))
			return 0;
	return 1;
}

/*
 * The least recently used movable buffer not used by operation seq (of
 * rsize bytes when not 0, among the SIZED_SCAN least recent), preferring,
 * among the first IDLE_SCAN that may move, one no queued work uses.
 * Returns NULL when none may move.
 */
struct ebb_buf *
mover_lru_victim(uint64_t seq, size_t rsize)
{
	struct ebb_buf *first = NULL, *pick = NULL;
	int looked = 0, seen = 0;

	for (struct ebb_buf *b = lru.head; b != NULL && looked < IDLE_SCAN && seen < SIZED_SCAN;
	    b = b->mv.lru_next) {
		seen++;
		/* not pinned, not in an operation being issued, no copy of it in flight */
		/* (a restore copy in flight is fine: the offload waits for it) */
		if (b->pinned || b->mv.cancelled || (seq != 0 && b->last_seq == seq) ||
		    mover_lru_in_flight(b) || (rsize != 0 && b->mv.rsize != rsize) ||
		    (mover.capturing && !uses_orderable(b)))
			continue;
		if (first == NULL)
			first = b;
		looked++;
		if (idle(b)) {
			pick = b;
			break;
		}
	}
	if (pick == NULL)
		pick = first;
	return pick;
}

/*
 * Make room within what ebb may hold for size bytes the driver is about to
 * serve itself (a stream capture's memory node), as for an allocation of
 * ebb's: a handle of that size is had (idle memory released, offloads waited
 * for, buffers evicted) and given back. The driver serves a graph's memory
 * from what graphs freed first (its graph memory pool), so that much of it
 * is counted once. Where nothing more can move, the driver's allocation
 * takes the job over, which mover_note_unmanaged counts.
 */
void
mover_room_for(size_t size)
{
	size_t rsize = vmm_round(size);
	uint64_t reuse = mover.graph_kept < rsize ? mover.graph_kept : rsize;
	CUresult err;

	if (reuse > 0) {
		mover.graph_kept -= reuse;
		mover_note_unmanaged(-(int64_t)reuse);
	}
	if (!mover.on || mover_held_total() + rsize <= mover.limit)
		return;
	struct vmm_handle *h = mover_get_handle(rsize, 0, MOVER_WITHIN, &err);
	if (h != NULL)
		vmm_release(h);
}

/* The driver's allocation of size bytes is freed; by a graph (in a capture):
 * the driver keeps its memory for graphs, and it stays counted. */
void
mover_note_driver_free(size_t size, int graph)
{
	if (graph)
		mover.graph_kept += size;
	else
		mover_note_unmanaged(-(int64_t)size);
}
