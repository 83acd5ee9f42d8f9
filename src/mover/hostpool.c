/*
 * hostpool.c: pinned slabs and a first-fit free list over them.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "hostpool.h"
#include "real.h"
#include "log.h"
#include "trace.h"

#define HOST_ALIGN 4096

struct extent {
	char *p;
	size_t size;
	char *slab;		/* start of the slab it lies in: extents of two slabs never merge */
	struct extent *next;	/* sorted by address */
};

/* A slab of pinned host memory, to find which one a pointer lies in. */
struct slab {
	char *p;
	size_t size;
};

/* The host pool's state (ebb_state_lock). */
static struct hostpool {
	struct extent *free_list;	/* free extents, by address */
	uint64_t cap_bytes;		/* the most that may be pinned (EBB_HOST_LIMIT; 0: no cap) */
	uint64_t slab_bytes;		/* how much is pinned at a time */
	uint64_t pinned, used;		/* bytes pinned, and handed out */
	uint64_t pin_ns;		/* time spent pinning */
	int refused;			/* the system refused to pin more: not asked again */
	struct slab *slabs;		/* the slabs pinned */
	size_t nslabs;
} hp;

void
hostpool_init(uint64_t limit, uint64_t slab)
{
	hp.cap_bytes = limit;
	hp.slab_bytes = slab;
}

static size_t
align_up(size_t n)
{
	return (n + HOST_ALIGN - 1) / HOST_ALIGN * HOST_ALIGN;
}

/*
 * Insert [p, p + size) of slab into the free list, merging with its
 * neighbours in the same slab. Slabs are registered one by one, and a copy
 * must lie within one registration: two slabs the kernel happened to place
 * side by side stay apart.
 */
static void
insert_free(char *p, size_t size, char *slab)
{
	struct extent **link = &hp.free_list, *prev = NULL;

	while (*link != NULL && (*link)->p < p) {
		prev = *link;
		link = &(*link)->next;
	}
	struct extent *next = *link;
	if (prev != NULL && prev->slab == slab && prev->p + prev->size == p) {
		prev->size += size;
		if (next != NULL && next->slab == slab && prev->p + prev->size == next->p) {
			prev->size += next->size;
			prev->next = next->next;
			free(next);
		}
		return;
	}
	if (next != NULL && next->slab == slab && p + size == next->p) {
		next->p = p;
		next->size += size;
		return;
	}
	struct extent *e = malloc(sizeof *e);
	if (e == NULL)
		return;	/* the extent is lost to the pool; nothing else breaks */
	e->p = p;
	e->size = size;
	e->slab = slab;
	e->next = next;
	*link = e;
}


static char *
slab_of(const char *p)
{
	for (size_t i = 0; i < hp.nslabs; i++)
		if (p >= hp.slabs[i].p && p < hp.slabs[i].p + hp.slabs[i].size)
			return hp.slabs[i].p;
	return NULL;
}

/* Pin a new slab of at least size bytes. Returns 0 or -1. */
static int
grow(size_t size)
{
	size_t want = size > hp.slab_bytes ? size : hp.slab_bytes;

	if (hp.refused)
		return -1;	/* the system said no once: do not ask on every offload */
	want = (want + (2u << 20) - 1) / (2u << 20) * (2u << 20);
	if (hp.cap_bytes != 0 && hp.pinned + want > hp.cap_bytes) {
		if (hp.pinned + size > hp.cap_bytes)
			return -1;
		want = hp.cap_bytes - hp.pinned;
	}
	struct slab *grown = realloc(hp.slabs, (hp.nslabs + 1) * sizeof *hp.slabs);
	if (grown == NULL)
		return -1;
	hp.slabs = grown;
	uint64_t t0 = ebb_now_ns();
	/* Map and register (fast); where the system will not map that much, let
	 * the driver allocate it pinned; then try just what is needed. */
	void *p = NULL;
	CUresult r = CUDA_ERROR_OUT_OF_MEMORY;
	int e = 0;
	for (int attempt = 0; attempt < 2 && p == NULL; attempt++) {
		if (attempt == 1) {
			want = (size + (2u << 20) - 1) / (2u << 20) * (2u << 20);
			if (hp.cap_bytes != 0 && hp.pinned + want > hp.cap_bytes)
				break;
		}
		void *m = mmap(NULL, want, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (m != MAP_FAILED) {
			r = ebb_real.cuMemHostRegister_v2(m, want, CU_MEMHOSTREGISTER_PORTABLE);
			if (r == CUDA_SUCCESS)
				p = m;
			else
				munmap(m, want);
		} else {
			e = errno;
		}
		if (p == NULL && ebb_real.cuMemHostAlloc != NULL &&
		    (r = ebb_real.cuMemHostAlloc(&p, want, CU_MEMHOSTALLOC_PORTABLE)) != CUDA_SUCCESS)
			p = NULL;
	}
	hp.pin_ns += ebb_now_ns() - t0;
	if (p == NULL) {
		if (!hp.refused)
			ebb_log(EBB_LOG_WARN, "pinning %zu more bytes of host memory failed (mmap: %s; "
			    "driver error %d; %llu bytes pinned so far); buffers that need more stay on "
			    "the device", want, e ? strerror(e) : "ok", (int)r,
			    (unsigned long long)hp.pinned);
		hp.refused = 1;
		return -1;
	}
	hp.slabs[hp.nslabs].p = p;
	hp.slabs[hp.nslabs].size = want;
	hp.nslabs++;
	hp.pinned += want;
	insert_free(p, want, p);
	ebb_log(EBB_LOG_INFO, "pinned %zu bytes of host memory (%llu in all)", want,
	    (unsigned long long)hp.pinned);
	return 0;
}

void *
hostpool_alloc(size_t size)
{
	size = align_up(size ? size : 1);
	for (int attempt = 0; attempt < 2; attempt++) {
		for (struct extent **link = &hp.free_list; *link != NULL; link = &(*link)->next) {
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
			hp.used += size;
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
	if (p == NULL)
		return;	/* a dropped buffer's: none */
	size = align_up(size ? size : 1);
	hp.used -= size;
	insert_free(p, size, slab_of(p));
}

uint64_t
hostpool_pinned(void)
{
	return hp.pinned;
}

uint64_t
hostpool_pin_ns(void)
{
	return hp.pin_ns;
}

uint64_t
hostpool_used(void)
{
	return hp.used;
}
