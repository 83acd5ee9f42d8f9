/*
 * kparam.h: what ebb knows about each kernel: its parameter layout and name.
 *
 * Looked up once per kernel handle from the driver (cuKernelGetParamInfo for
 * CUkernel handles, which PyTorch passes, else cuFuncGetParamInfo) and cached
 * in a hash table. Not thread-safe: the engine holds its mutex.
 */
#ifndef EBB_KPARAM_H
#define EBB_KPARAM_H

#include <stddef.h>
#include <stdint.h>

struct ebb_kinfo {
	uintptr_t handle;	/* CUfunction or CUkernel as the launch passed it */
	uint32_t id;		/* dense id from 1, as in the trace */
	int layout_known;	/* offsets and sizes are valid */
	uint32_t nparams;
	uint32_t *offset;	/* of each parameter in the argument buffer */
	uint32_t *size;		/* of each parameter */
	char *name;		/* kernel name, or "?" */
	uint8_t iter_mark;	/* name contains EBB_ITER_KERNEL */
	uint8_t traced;		/* its K record has been written */
};

struct kparam_cache {
	struct ebb_kinfo **slots;
	size_t cap;		/* power of two */
	size_t count;
};

void kparam_init(struct kparam_cache *c);

/* Free every entry of c and its table; c is then empty, as from kparam_init. */
void kparam_fini(struct kparam_cache *c);

/* The cached entry for handle, or NULL when it has not been seen. */
struct ebb_kinfo *kparam_get(const struct kparam_cache *c, uintptr_t handle);

/*
 * Query the driver for handle's layout and name and cache the result.
 * Returns the new entry, or NULL when out of memory.
 */
struct ebb_kinfo *kparam_add(struct kparam_cache *c, uintptr_t handle);

/*
 * Call fn(word, ctx) for every 8-byte word of a launch's arguments that lies
 * in [lo, hi): of each parameter at least 8 bytes long (a pointer, or a
 * struct passed by value with pointers inside), or of the whole packed
 * `extra` argument buffer. The caller passes the bounds of the addresses it
 * looks words up among (the buffer table's), so that the words that cannot
 * be one of them cost no call; lo >= hi skips every word. Returns 0, or -1
 * when the arguments cannot be read (layout unknown).
 */
int kparam_scan(const struct ebb_kinfo *k, void **params, void **extra, uint64_t lo, uint64_t hi,
    void (*fn)(uint64_t word, void *ctx), void *ctx);

/*
 * The packed argument buffer of a launch's `extra` list: *buf from
 * CU_LAUNCH_PARAM_BUFFER_POINTER and *size from CU_LAUNCH_PARAM_BUFFER_SIZE
 * (0 when the list gives none). Returns 0, or -1 when the list has no
 * buffer or is not well formed.
 */
int kparam_extra(void **extra, const unsigned char **buf, size_t *size);

#endif
