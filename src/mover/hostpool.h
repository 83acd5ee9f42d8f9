/*
 * hostpool.h: pinned host memory for offloaded buffers.
 *
 * Pinning is slow (cuMemHostRegister of 4 GiB took 0.3 s on the H200
 * machine), so memory is pinned once, in large slabs, and reused: a
 * first-fit list of free extents over the slabs. EBB_HOST_LIMIT caps the
 * pinned total. Not thread-safe: the engine holds its mutex.
 */
#ifndef EBB_HOSTPOOL_H
#define EBB_HOSTPOOL_H

#include <stddef.h>
#include <stdint.h>

/* Cap on pinned bytes (0: none) and the size of one slab. */
void hostpool_init(uint64_t limit, uint64_t slab);

/*
 * size bytes of pinned memory, or NULL when the cap is reached or the
 * system refuses to pin more (said once on stderr).
 */
void *hostpool_alloc(size_t size);

/* Give back what hostpool_alloc(size) returned. */
void hostpool_free(void *p, size_t size);

/* Bytes pinned in all, and in use. */
uint64_t hostpool_pinned(void);
uint64_t hostpool_used(void);

/* Nanoseconds spent pinning slabs, refusals included (0.3 s a GiB and more
 * on the H200 machine: a cost of the first offloads, not of every one). */
uint64_t hostpool_pin_ns(void);

#endif
