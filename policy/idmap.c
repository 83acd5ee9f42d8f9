/*
 * idmap.c: the id -> index map (see idmap.h).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "idmap.h"

static uint32_t
slot_of(uint64_t k, uint32_t cap)
{
	return (uint32_t)((k * 0x9e3779b97f4a7c15ULL) >> 32) & (cap - 1);
}

static int
grow(struct idmap *m)
{
	uint32_t cap = m->cap ? m->cap * 2 : 1024;
	uint64_t *key = malloc(cap * sizeof *key);
	uint32_t *val = malloc(cap * sizeof *val);

	if (key == NULL || val == NULL) {
		free(key);
		free(val);
		return -1;
	}
	memset(val, 0xff, cap * sizeof *val);
	for (uint32_t i = 0; i < m->cap; i++) {
		if (m->val[i] == IDMAP_NONE)
			continue;
		uint32_t s = slot_of(m->key[i], cap);
		while (val[s] != IDMAP_NONE)
			s = (s + 1) & (cap - 1);
		key[s] = m->key[i];
		val[s] = m->val[i];
	}
	free(m->key);
	free(m->val);
	m->key = key;
	m->val = val;
	m->cap = cap;
	return 0;
}

int
idmap_put(struct idmap *m, uint64_t k, uint32_t v)
{
	if (2 * (m->n + 1) > m->cap && grow(m) < 0)
		return -1;
	uint32_t s = slot_of(k, m->cap);
	while (m->val[s] != IDMAP_NONE && m->key[s] != k)
		s = (s + 1) & (m->cap - 1);
	if (m->val[s] == IDMAP_NONE)
		m->n++;
	m->key[s] = k;
	m->val[s] = v;
	return 0;
}

uint32_t
idmap_get(const struct idmap *m, uint64_t k)
{
	if (m->cap == 0)
		return IDMAP_NONE;
	for (uint32_t s = slot_of(k, m->cap);; s = (s + 1) & (m->cap - 1)) {
		if (m->val[s] == IDMAP_NONE)
			return IDMAP_NONE;
		if (m->key[s] == k)
			return m->val[s];
	}
}

void
idmap_free(struct idmap *m)
{
	free(m->key);
	free(m->val);
	memset(m, 0, sizeof *m);
}
