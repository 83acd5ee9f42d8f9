/*
 * hostpool.c: pinned slabs and a first-fit free list over them.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "hostpool.h"
#include "interpose.h"
#include "log.h"

#define HOST_ALIGN 4096

struct extent {
	char *p;
	size_t size;
	struct extent *next;	/* sorted by address */
};

static struct extent *free_list;
static uint64_t cap_bytes, slab_bytes, pinned, used;
static int refused;

void
hostpool_init(uint64_t limit, uint64_t slab)
{
	cap_bytes = limit;
	slab_bytes = slab;
}

static size_t
align_up(size_t n)
{
	return (n + HOST_ALIGN - 1) / HOST_ALIGN * HOST_ALIGN;
}

/* Insert [p, p + size) into the free list, merging with its neighbours. */
static void
insert_free(char *p, size_t size)
{
	struct extent **link = &free_list, *prev = NULL;

	while (*link != NULL && (*link)->p < p) {
		prev = *link;
		link = &(*link)->next;
	}
	struct extent *next = *link;
	if (prev != NULL && prev->p + prev->size == p) {
		prev->size += size;
		if (next != NULL && prev->p + prev->size == next->p) {
			prev->size += next->size;
			prev->next = next->next;
			free(next);
		}
		return;
	}
	if (next != NULL && p + size == next->p) {
		next->p = p;
		next->size += size;
		return;
	}
	struct extent *e = malloc(sizeof *e);
	if (e == NULL)
		return;	/* the extent is lost to the pool; nothing else breaks */
	e->p = p;
	e->size = size;
	e->next = next;
	*link = e;
}

/* Pin a new slab of at least size bytes. Returns 0 or -1. */
static int
grow(size_t size)
{
	size_t want = size > slab_bytes ? size : slab_bytes;

	if (refused)
		return -1;	/* the system said no once: do not ask on every offload */
	want = (want + (2u << 20) - 1) / (2u << 20) * (2u << 20);
	if (cap_bytes != 0 && pinned + want > cap_bytes) {
		if (pinned + size > cap_bytes)
			return -1;
		want = cap_bytes - pinned;
	}
	void *p = mmap(NULL, want, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return -1;
	CUresult r = ebb_real.cuMemHostRegister_v2(p, want, CU_MEMHOSTREGISTER_PORTABLE);
	if (r != CUDA_SUCCESS) {
		munmap(p, want);
		if (!refused)
			ebb_log(EBB_LOG_WARN, "pinning %zu more bytes of host memory failed (error %d, "
			    "%llu pinned); buffers that need more stay on the device", want, (int)r,
			    (unsigned long long)pinned);
		refused = 1;
		return -1;
	}
	pinned += want;
	insert_free(p, want);
	ebb_log(EBB_LOG_INFO, "pinned %zu bytes of host memory (%llu in all)", want,
	    (unsigned long long)pinned);
	return 0;
}

void *
hostpool_alloc(size_t size)
{
	size = align_up(size ? size : 1);
	for (int attempt = 0; attempt < 2; attempt++) {
		for (struct extent **link = &free_list; *link != NULL; link = &(*link)->next) {
			struct extent *e = *link;
			if (e->size < size)
				continue;
			char *p = e->p;
			e->p += size;
			e->size -= size;
			if (e->size == 0) {
				*link = e->next;
				free(e);
			}
			used += size;
			return p;
		}
		if (attempt == 0 && grow(size) < 0)
			break;
	}
	return NULL;
}

void
hostpool_free(void *p, size_t size)
{
	size = align_up(size ? size : 1);
	used -= size;
	insert_free(p, size);
}

uint64_t
hostpool_pinned(void)
{
	return pinned;
}

uint64_t
hostpool_used(void)
{
	return used;
}
