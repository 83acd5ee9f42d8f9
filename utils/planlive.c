/*
 * planlive.c: the buffers alive at a point of the trace, for `ebb plan`:
 * an open-addressing map from buffer id to size and a tag of the caller's
 * (plancmd_int.h).
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "plancmd_int.h"

/* The home slot of id in l (cap a power of two, not 0). */
static size_t
live_slot(const struct planlive *l, uint64_t id)
{
	return (size_t)((id * 0x9e3779b97f4a7c15ULL) >> 32) & (l->cap - 1);
}

/* Double l's slots (1,024 at first), rehashing its entries. Returns 0, or
 * -1 when out of memory (l unchanged). */
static int
live_grow(struct planlive *l)
{
	struct planlive n = { 0 };

	n.cap = l->cap ? l->cap * 2 : 1024;
	n.id = malloc(n.cap * sizeof *n.id);
	n.size = malloc(n.cap * sizeof *n.size);
	n.used = calloc(n.cap, 1);
	n.tag = malloc(n.cap);
	if (n.id == NULL || n.size == NULL || n.used == NULL || n.tag == NULL) {
		free(n.id);
		free(n.size);
		free(n.used);
		free(n.tag);
		return -1;
	}
	for (size_t i = 0; i < l->cap; i++) {
		if (!l->used[i])
			continue;
		size_t j = live_slot(&n, l->id[i]);
		while (n.used[j])
			j = (j + 1) & (n.cap - 1);
		n.used[j] = 1;
		n.id[j] = l->id[i];
		n.size[j] = l->size[i];
		n.tag[j] = l->tag[i];
	}
	n.n = l->n;
	free(l->id);
	free(l->size);
	free(l->used);
	free(l->tag);
	*l = n;
	return 0;
}

/* Set id's size and tag in l, adding it if new. Returns 0, or -1 when out of
 * memory. */
int
planlive_put(struct planlive *l, uint64_t id, uint64_t size, uint8_t tag)
{
	if (2 * (l->n + 1) > l->cap && live_grow(l) < 0)
		return -1;
	size_t i = live_slot(l, id);
	while (l->used[i] && l->id[i] != id)
		i = (i + 1) & (l->cap - 1);
	l->n += !l->used[i];
	l->used[i] = 1;
	l->id[i] = id;
	l->size[i] = size;
	l->tag[i] = tag;
	return 0;
}

/* id's slot in l, or SIZE_MAX when it is not there. */
size_t
planlive_find(const struct planlive *l, uint64_t id)
{
	if (l->cap == 0)
		return SIZE_MAX;
	size_t i = live_slot(l, id);
	while (l->used[i] && l->id[i] != id)
		i = (i + 1) & (l->cap - 1);
	return l->used[i] ? i : SIZE_MAX;
}

/* Remove id, shifting back the entries after it that may take its slot. */
void
planlive_del(struct planlive *l, uint64_t id)
{
	size_t i = planlive_find(l, id);

	if (i == SIZE_MAX)
		return;
	size_t m = l->cap - 1;
	for (size_t j = (i + 1) & m; l->used[j]; j = (j + 1) & m) {
		size_t home = live_slot(l, l->id[j]);
		if (((j - home) & m) >= ((j - i) & m)) {
			l->id[i] = l->id[j];
			l->size[i] = l->size[j];
			l->tag[i] = l->tag[j];
			i = j;
		}
	}
	l->used[i] = 0;
	l->n--;
}

/* Free l's slots and leave it empty. */
void
planlive_free(struct planlive *l)
{
	free(l->id);
	free(l->size);
	free(l->used);
	free(l->tag);
	memset(l, 0, sizeof *l);
}

/* Field i of r as a number into *v; -1 when it is not one. */
static int
held_field(const struct ebb_trace_rec *r, size_t i, uint64_t *v)
{
	return i < r->nfields ? ebb_trace_u64(r, i, v) : -1;
}

/* planheld_record (plancmd_int.h) */
int
planheld_record(struct planheld *h, const struct ebb_trace_rec *r)
{
	uint64_t bid, size;

	if (strchr("AFOUB", r->type) == NULL || r->type == '\0')
		return 0;
	if (held_field(r, r->type == 'A' || r->type == 'F' ? 1 : 2, &bid) < 0)
		return -1;
	if (r->type == 'A') {
		if (held_field(r, 3, &size) < 0 || planlive_put(&h->buf, bid, size, PLANHELD_DEVICE) < 0)
			return -1;
		h->device += size;
		return 1;
	}
	if (r->type == 'O')
		return strcmp(r->field[4], "drop") == 0 && planlive_put(&h->drop, bid, 0, 1) < 0 ?
		    -1 : 0;
	size_t at = planlive_find(&h->buf, bid);
	if (at == SIZE_MAX)
		return 0;
	uint8_t *tag = &h->buf.tag[at];
	size = h->buf.size[at];
	if (r->type == 'F') {
		if (*tag == PLANHELD_DEVICE)
			h->device -= size;
		else if (*tag == PLANHELD_HOST)
			h->host -= size;
		planlive_del(&h->buf, bid);
		planlive_del(&h->drop, bid);
		return 1;
	}
	if (r->type == 'U' && *tag == PLANHELD_DEVICE) {
		int dropped = planlive_find(&h->drop, bid) != SIZE_MAX;
		planlive_del(&h->drop, bid);
		h->device -= size;
		*tag = dropped ? PLANHELD_DROPPED : PLANHELD_HOST;
		if (!dropped)
			h->host += size;
		return 1;
	}
	if (r->type == 'B' && strcmp(r->field[4], "cancel") != 0 && *tag != PLANHELD_DEVICE) {
		if (*tag == PLANHELD_HOST)
			h->host -= size;
		*tag = PLANHELD_DEVICE;
		h->device += size;
		return 1;
	}
	return 0;
}

/* planheld_free (plancmd_int.h) */
void
planheld_free(struct planheld *h)
{
	planlive_free(&h->buf);
	planlive_free(&h->drop);
	memset(h, 0, sizeof *h);
}
