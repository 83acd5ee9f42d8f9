/*
 * buftab.c: a treap of buffers keyed by start address; the buffer structs'
 * free list; the state lock (locks.h).
 */
#include "config.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "buftab.h"
#include "locks.h"

/* The state lock: locks.h says what it guards and where it is in the
 * lock order. */
pthread_mutex_t ebb_state_lock = PTHREAD_MUTEX_INITIALIZER;

/* Buffer structs given back, through free_next (ebb_state_lock). */
static struct ebb_buf *free_bufs;

struct ebb_buf *
ebb_buf_new(void)
{
	struct ebb_buf *b = free_bufs;

	if (b != NULL) {
		free_bufs = b->free_next;
		memset(b, 0, sizeof *b);
		return b;
	}
	return calloc(1, sizeof *b);
}

void
ebb_buf_put(struct ebb_buf *b)
{
	b->free_next = free_bufs;
	free_bufs = b;
}

/* The hint set of addr's 64 KiB region. */
static size_t
hint_set(uint64_t addr)
{
	return (size_t)(((addr >> 16) * 0x9e3779b97f4a7c15ULL) >> 56) & (BUFTAB_HINT_SETS - 1);
}

/* Clear the hints of set i that name b. */
static void
set_drop(struct buftab *t, size_t i, struct ebb_buf *b)
{
	for (size_t w = 0; w < BUFTAB_HINT_WAYS; w++)
		if (t->hint[i][w] == b) {
			t->hint[i][w] = NULL;
			b->nhints--;
		}
}

/* Clear the hints that name b: those of the sets of the regions its range
 * covers, until none is left (b->nhints). */
static void
hints_drop(struct buftab *t, struct ebb_buf *b)
{
	uint64_t first = b->addr >> 16, last = (b->addr + (b->size ? b->size : 1) - 1) >> 16;

	if (last - first >= BUFTAB_HINT_SETS) {
		for (size_t i = 0; i < BUFTAB_HINT_SETS && b->nhints > 0; i++)
			set_drop(t, i, b);
		return;
	}
	for (uint64_t r = first; r <= last && b->nhints > 0; r++)
		set_drop(t, hint_set(r << 16), b);
}

void
buftab_init(struct buftab *t)
{
	memset(t->hint, 0, sizeof t->hint);
	t->root = NULL;
	t->count = 0;
	t->bytes = 0;
	t->lo = UINT64_MAX;
	t->hi = 0;
}

/* Priority from the address, so the shape does not depend on a random source. */
static uint32_t
prio_of(uint64_t addr)
{
	uint64_t x = addr * 0x9e3779b97f4a7c15ULL;
	x ^= x >> 29;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 32;
	return (uint32_t)x;
}

/* Split n into keys < addr (*l) and keys >= addr (*r). */
static void
split(struct ebb_buf *n, uint64_t addr, struct ebb_buf **l, struct ebb_buf **r)
{
	if (n == NULL) {
		*l = *r = NULL;
	} else if (n->addr < addr) {
		split(n->right, addr, &n->right, r);
		*l = n;
	} else {
		split(n->left, addr, l, &n->left);
		*r = n;
	}
}

/* Join l and r, every key of l below every key of r. */
static struct ebb_buf *
merge(struct ebb_buf *l, struct ebb_buf *r)
{
	if (l == NULL)
		return r;
	if (r == NULL)
		return l;
	if (l->prio > r->prio) {
		l->right = merge(l->right, r);
		return l;
	}
	r->left = merge(l, r->left);
	return r;
}

/* The node with the greatest start <= addr, or NULL. */
static struct ebb_buf *
floor_node(struct ebb_buf *n, uint64_t addr)
{
	struct ebb_buf *best = NULL;

	while (n != NULL) {
		if (n->addr <= addr) {
			best = n;
			n = n->right;
		} else {
			n = n->left;
		}
	}
	return best;
}

/* The node with the least start >= addr, or NULL. */
static struct ebb_buf *
ceil_node(struct ebb_buf *n, uint64_t addr)
{
	struct ebb_buf *best = NULL;

	while (n != NULL) {
		if (n->addr >= addr) {
			best = n;
			n = n->left;
		} else {
			n = n->right;
		}
	}
	return best;
}

struct ebb_buf *
buftab_overlap(const struct buftab *t, uint64_t addr, uint64_t size)
{
	struct ebb_buf *f = floor_node(t->root, addr);

	if (f != NULL && f->addr + f->size > addr)
		return f;
	struct ebb_buf *c = ceil_node(t->root, addr);
	if (c != NULL && c->addr < addr + size)
		return c;
	return NULL;
}

int
buftab_insert(struct buftab *t, struct ebb_buf *b)
{
	if (buftab_overlap(t, b->addr, b->size ? b->size : 1) != NULL)
		return -1;
	struct ebb_buf *l, *r;
	b->left = b->right = NULL;
	b->prio = prio_of(b->addr);
	split(t->root, b->addr, &l, &r);
	t->root = merge(merge(l, b), r);
	t->count++;
	t->bytes += b->size;
	if (b->addr < t->lo)
		t->lo = b->addr;
	if (b->addr + b->size > t->hi)
		t->hi = b->addr + b->size;
	return 0;
}

struct ebb_buf *
buftab_remove(struct buftab *t, uint64_t addr)
{
	struct ebb_buf **link = &t->root;

	while (*link != NULL && (*link)->addr != addr)
		link = addr < (*link)->addr ? &(*link)->left : &(*link)->right;
	struct ebb_buf *n = *link;
	if (n == NULL)
		return NULL;
	*link = merge(n->left, n->right);
	n->left = n->right = NULL;
	hints_drop(t, n);
	t->count--;
	t->bytes -= n->size;
	if (t->count == 0) {
		t->lo = UINT64_MAX;
		t->hi = 0;
	}
	return n;
}

struct ebb_buf *
buftab_find(struct buftab *t, uint64_t addr)
{
	if (addr < t->lo || addr >= t->hi)
		return NULL;
	struct ebb_buf **set = t->hint[hint_set(addr)];
	for (size_t w = 0; w < BUFTAB_HINT_WAYS; w++) {
		struct ebb_buf *h = set[w];
		if (h != NULL && addr - h->addr < h->size)
			return h;
	}
	struct ebb_buf *f = floor_node(t->root, addr);
	if (f != NULL && addr - f->addr < f->size) {
		/* the newest first; the oldest leaves the set */
		if (set[BUFTAB_HINT_WAYS - 1] != NULL)
			set[BUFTAB_HINT_WAYS - 1]->nhints--;
		for (size_t w = BUFTAB_HINT_WAYS - 1; w > 0; w--)
			set[w] = set[w - 1];
		set[0] = f;
		f->nhints++;
		return f;
	}
	return NULL;
}

static int
walk(struct ebb_buf *n, int (*fn)(struct ebb_buf *, void *), void *ctx)
{
	if (n == NULL)
		return 0;
	if (walk(n->left, fn, ctx))
		return 1;
	if (fn(n, ctx))
		return 1;
	return walk(n->right, fn, ctx);
}

void
buftab_walk(const struct buftab *t, int (*fn)(struct ebb_buf *, void *), void *ctx)
{
	walk(t->root, fn, ctx);
}

void
buftab_note_stream(struct ebb_buf *b, uintptr_t stream, uint64_t seq)
{
	for (unsigned i = 0; i < b->nstreams; i++)
		if (b->last[i].stream == stream) {
			b->last[i].seq = seq;
			return;
		}
	if (b->nstreams < EBB_BUF_STREAMS) {
		b->last[b->nstreams].stream = stream;
		b->last[b->nstreams].seq = seq;
		b->nstreams++;
		return;
	}
	b->streams_overflow = 1;
	/* Keep the most recent streams: replace the stalest entry. */
	unsigned old = 0;
	for (unsigned i = 1; i < EBB_BUF_STREAMS; i++)
		if (b->last[i].seq < b->last[old].seq)
			old = i;
	b->last[old].stream = stream;
	b->last[old].seq = seq;
}
