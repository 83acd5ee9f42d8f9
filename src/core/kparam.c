/*
 * kparam.c: kernel parameter layouts, cached per handle, and the scan of a
 * launch's arguments.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "real.h"
#include "kparam.h"

/* Parameters beyond this many are not expected of any real kernel. */
#define KPARAM_MAX 4096

void
kparam_init(struct kparam_cache *c)
{
	c->slots = NULL;
	c->cap = 0;
	c->count = 0;
}

static size_t
slot_of(uintptr_t h, size_t cap)
{
	uint64_t x = (uint64_t)h;
	x ^= x >> 31;
	x *= 0x7fb5d329728ea185ULL;
	x ^= x >> 27;
	return (size_t)x & (cap - 1);
}

struct ebb_kinfo *
kparam_get(const struct kparam_cache *c, uintptr_t handle)
{
	if (c->cap == 0)
		return NULL;
	for (size_t i = slot_of(handle, c->cap);; i = (i + 1) & (c->cap - 1)) {
		struct ebb_kinfo *k = c->slots[i];
		if (k == NULL)
			return NULL;
		if (k->handle == handle)
			return k;
	}
}

static int
grow(struct kparam_cache *c)
{
	size_t cap = c->cap ? c->cap * 2 : 256;
	struct ebb_kinfo **s = calloc(cap, sizeof *s);

	if (s == NULL)
		return -1;
	for (size_t i = 0; i < c->cap; i++) {
		struct ebb_kinfo *k = c->slots[i];
		if (k == NULL)
			continue;
		size_t j = slot_of(k->handle, cap);
		while (s[j] != NULL)
			j = (j + 1) & (cap - 1);
		s[j] = k;
	}
	free(c->slots);
	c->slots = s;
	c->cap = cap;
	return 0;
}

/*
 * Read the layout through get (cuKernelGetParamInfo or cuFuncGetParamInfo).
 * Returns the number of parameters, or -1 when the driver did not accept
 * the handle (an error other than CUDA_ERROR_INVALID_VALUE, which is what it
 * answers past the last parameter) or memory ran out.
 */
static int
read_layout(struct ebb_kinfo *k, CUresult (*get)(uintptr_t, size_t, size_t *, size_t *))
{
	uint32_t cap = 0, n = 0;
	size_t off, sz;
	CUresult r = CUDA_SUCCESS;

	while (n < KPARAM_MAX) {
		r = get(k->handle, n, &off, &sz);
		if (r != CUDA_SUCCESS)
			break;
		if (n == cap) {
			cap = cap ? cap * 2 : 16;
			uint32_t *o = realloc(k->offset, cap * sizeof *o);
			if (o == NULL)
				return -1;
			k->offset = o;
			uint32_t *s = realloc(k->size, cap * sizeof *s);
			if (s == NULL)
				return -1;
			k->size = s;
		}
		k->offset[n] = (uint32_t)off;
		k->size[n] = (uint32_t)sz;
		n++;
	}
	if (n == 0 && r != CUDA_ERROR_INVALID_VALUE)
		return -1;
	return (int)n;
}

/* cuKernelGetParamInfo and cuFuncGetParamInfo behind one signature. */
static CUresult
get_kernel_param(uintptr_t h, size_t i, size_t *off, size_t *sz)
{
	if (ebb_real.cuKernelGetParamInfo == NULL)
		return CUDA_ERROR_NOT_SUPPORTED;
	return ebb_real.cuKernelGetParamInfo((CUkernel)h, i, off, sz);
}

static CUresult
get_func_param(uintptr_t h, size_t i, size_t *off, size_t *sz)
{
	if (ebb_real.cuFuncGetParamInfo == NULL)
		return CUDA_ERROR_NOT_SUPPORTED;
	return ebb_real.cuFuncGetParamInfo((CUfunction)h, i, off, sz);
}

/*
 * Ask the driver for the layout of handle, as a CUkernel, then as a
 * CUfunction. A handle accepted with zero parameters has none.
 */
static void
query_layout(struct ebb_kinfo *k)
{
	CUresult (*gets[2])(uintptr_t, size_t, size_t *, size_t *) = {
		get_kernel_param, get_func_param
	};
	int zero = 0;

	for (int i = 0; i < 2; i++) {
		int n = read_layout(k, gets[i]);
		if (n > 0) {
			k->nparams = (uint32_t)n;
			k->layout_known = 1;
			return;
		}
		if (n == 0)
			zero = 1;
	}
	if (zero) {
		k->nparams = 0;
		k->layout_known = 1;
	}
}

static void
query_name(struct ebb_kinfo *k)
{
	const char *name = NULL;

	if (ebb_real.cuKernelGetName == NULL ||
	    ebb_real.cuKernelGetName(&name, (CUkernel)k->handle) != CUDA_SUCCESS)
		name = NULL;
	if (name == NULL && (ebb_real.cuFuncGetName == NULL ||
	    ebb_real.cuFuncGetName(&name, (CUfunction)k->handle) != CUDA_SUCCESS))
		name = NULL;
	k->name = strdup(name ? name : "?");
}

void
kparam_fini(struct kparam_cache *c)
{
	for (size_t i = 0; i < c->cap; i++) {
		struct ebb_kinfo *k = c->slots[i];
		if (k == NULL)
			continue;
		free(k->offset);
		free(k->size);
		free(k->name);
		free(k);
	}
	free(c->slots);
	kparam_init(c);
}

struct ebb_kinfo *
kparam_add(struct kparam_cache *c, uintptr_t handle)
{
	if ((c->count + 1) * 2 > c->cap && grow(c) < 0)
		return NULL;
	struct ebb_kinfo *k = calloc(1, sizeof *k);
	if (k == NULL)
		return NULL;
	k->handle = handle;
	k->id = (uint32_t)(c->count + 1);
	query_layout(k);
	query_name(k);
	if (k->name == NULL) {
		free(k->offset);
		free(k->size);
		free(k);
		return NULL;
	}
	size_t i = slot_of(handle, c->cap);
	while (c->slots[i] != NULL)
		i = (i + 1) & (c->cap - 1);
	c->slots[i] = k;
	c->count++;
	return k;
}

int
kparam_extra(void **extra, const unsigned char **buf, size_t *size)
{
	*buf = NULL;
	*size = 0;
	for (size_t i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
		if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
			*buf = extra[i + 1];
		else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE && extra[i + 1] != NULL)
			*size = *(size_t *)extra[i + 1];
		else if (i > 64)
			return -1;	/* not a well-formed list */
	}
	return *buf != NULL ? 0 : -1;
}

/*
 * Call fn for each 8-byte word of the size bytes at p that lies in
 * [lo, lo + span). One subtraction and one comparison a word: the many
 * words of a parameter struct that hold sizes, strides or zeros fall
 * outside, and cost no call.
 */
static void
scan_words(const unsigned char *p, size_t size, uint64_t lo, uint64_t span,
    void (*fn)(uint64_t word, void *ctx), void *ctx)
{
	uint64_t w;

	for (size_t o = 0; o + 8 <= size; o += 8) {
		memcpy(&w, p + o, 8);
		if (w - lo < span)
			fn(w, ctx);
	}
}

int
kparam_scan(const struct ebb_kinfo *k, void **params, void **extra, uint64_t lo, uint64_t hi,
    void (*fn)(uint64_t word, void *ctx), void *ctx)
{
	uint64_t span = hi > lo ? hi - lo : 0;

	if (params != NULL) {
		if (!k->layout_known)
			return -1;
		for (uint32_t i = 0; i < k->nparams; i++)
			if (params[i] != NULL)
				scan_words(params[i], k->size[i], lo, span, fn, ctx);
		return 0;
	}
	if (extra != NULL) {
		const unsigned char *buf;
		size_t size;
		if (kparam_extra(extra, &buf, &size) < 0)
			return -1;
		scan_words(buf, size, lo, span, fn, ctx);
		return 0;
	}
	/* No arguments at all: nothing to resolve. */
	return 0;
}
