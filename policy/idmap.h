/*
 * idmap.h: a growing open-addressing map from 64-bit ids to 32-bit
 * indices (into the caller's own array). Pure C, no globals.
 */
#ifndef EBB_IDMAP_H
#define EBB_IDMAP_H

#include <stdint.h>

#define IDMAP_NONE UINT32_MAX

struct idmap {
	uint64_t *key;
	uint32_t *val;		/* IDMAP_NONE: an empty slot */
	uint32_t cap, n;
};

/* Map k to v (replacing what k had). Returns 0, or -1 when out of memory. */
int idmap_put(struct idmap *m, uint64_t k, uint32_t v);

/* What k maps to, or IDMAP_NONE. */
uint32_t idmap_get(const struct idmap *m, uint64_t k);

/* Free the map's memory (it is empty and usable again after). */
void idmap_free(struct idmap *m);

#endif
