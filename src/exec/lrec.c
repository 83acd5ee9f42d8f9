/*
 * lrec.c: launch records (see lrec.h): the arena of one recording, the
 * copy of each launch's arguments, and the launch again from a record.
 */
#include "config.h"

#include <stdalign.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "kparam.h"
#include "lrec.h"
#include "real.h"

/* The first chunk's bytes, and the most a chunk grows to (each new one
 * doubles the last), within the set's bound. */
#define CHUNK_MIN (64u << 10)
#define CHUNK_MAX (16u << 20)

/* lrec_launch's kernelParams array for this many parameters is on the
 * stack; more take the heap. */
#define ARGS_ON_STACK 64

/* Records are placed at this alignment. */
#define ALIGN alignof(max_align_t)

/* Memory for records; data[] holds size bytes, used of them taken. */
struct lrec_chunk {
	struct lrec_chunk *next;	/* the chunk before it */
	size_t size, used;
	alignas(max_align_t) unsigned char data[];
};

/* What every launch past the bound points to. */
static const struct lrec unrecorded = { .state = LREC_UNRECORDED };

static size_t
align_up(size_t n)
{
	return (n + ALIGN - 1) & ~(size_t)(ALIGN - 1);
}

int
lrec_set_init(struct lrec_set *s, uint32_t n, uint64_t bound)
{
	memset(s, 0, sizeof *s);
	s->bound = bound;
	size_t index = (size_t)n * sizeof *s->at;
	if (n == 0 || index > bound)
		return -1;
	s->at = calloc(n, sizeof *s->at);
	if (s->at == NULL)
		return -2;
	s->n = n;
	s->st.bytes = index;
	return 0;
}

/* bytes (aligned) from the newest chunk, or from a new one when it has not
 * that much left and the bound allows one. Returns NULL past the bound or
 * out of memory. */
static void *
take(struct lrec_set *s, size_t bytes)
{
	struct lrec_chunk *c = s->chunks;

	bytes = align_up(bytes);
	if (c != NULL && c->size - c->used >= bytes) {
		void *p = c->data + c->used;
		c->used += bytes;
		return p;
	}
	size_t want = c != NULL ? (c->size < CHUNK_MAX ? 2 * c->size : CHUNK_MAX) : CHUNK_MIN;
	if (want < bytes)
		want = bytes;
	uint64_t room = s->bound > s->st.bytes ? s->bound - s->st.bytes : 0;
	if (room < sizeof *c + bytes)
		return NULL;
	if (want > room - sizeof *c)
		want = (size_t)(room - sizeof *c) & ~(size_t)(ALIGN - 1);
	c = malloc(sizeof *c + want);
	if (c == NULL)
		return NULL;
	c->next = s->chunks;
	c->size = want;
	c->used = bytes;
	s->chunks = c;
	s->st.bytes += sizeof *c + want;
	return c->data;
}

/* The size of k's argument buffer: the end of its last-placed parameter. */
static uint32_t
args_size(const struct ebb_kinfo *k)
{
	uint32_t end = 0;

	for (uint32_t i = 0; i < k->nparams; i++)
		if (k->offset[i] + k->size[i] > end)
			end = k->offset[i] + k->size[i];
	return end;
}

/*
 * Where the arguments of l come from and how many bytes they are: the
 * packed buffer of `extra` (*packed set), or the parameters of kernelParams
 * placed by k's layout. Returns 0, or -1 when they cannot be copied in full.
 */
static int
args_of(const struct ebb_launch *l, const struct ebb_kinfo *k, const unsigned char **packed,
    size_t *nbytes)
{
	*packed = NULL;
	*nbytes = 0;
	if (l->params != NULL) {
		if (k == NULL || !k->layout_known)
			return -1;
		for (uint32_t i = 0; i < k->nparams; i++)
			if (l->params[i] == NULL)
				return -1;
		*nbytes = args_size(k);
		return 0;
	}
	if (l->extra != NULL) {
		size_t size;
		if (kparam_extra(l->extra, packed, &size) < 0 || size == 0 || size > UINT32_MAX)
			return -1;
		*nbytes = size;
		return 0;
	}
	/* no arguments: complete only for a kernel known to take none */
	return k != NULL && k->layout_known && k->nparams == 0 ? 0 : -1;
}

int
lrec_add(struct lrec_set *s, uint32_t pos, const struct ebb_launch *l,
    const struct ebb_kinfo *k, CUstream stream, int per_thread, struct ebb_stream *tracker,
    int captured)
{
	const unsigned char *packed;
	size_t nbytes;

	if (s->at == NULL || pos >= s->n) {
		s->st.unrecorded++;
		return LREC_UNRECORDED;
	}
	int complete = args_of(l, k, &packed, &nbytes) == 0;
	if (!complete)
		nbytes = 0;
	size_t attrs = (size_t)l->nattrs * sizeof *l->attrs;
	size_t head = align_up(sizeof(struct lrec)), at_params = head + align_up(attrs);
	unsigned char *p = take(s, at_params + nbytes);
	if (p == NULL) {
		s->at[pos] = &unrecorded;
		s->st.unrecorded++;
		return LREC_UNRECORDED;
	}
	struct lrec *r = (struct lrec *)(void *)p;
	*r = (struct lrec){
		.func = (uintptr_t)l->func, .stream = stream, .tracker = tracker,
		.k = k != NULL && k->layout_known ? k : NULL,
		.nattrs = l->nattrs, .nbytes = (uint32_t)nbytes, .shmem = l->shmem,
		.entry = l->entry, .per_thread = per_thread != 0, .packed = l->params == NULL &&
		    l->extra != NULL,
		.state = complete && !captured ? LREC_REPLAYABLE : LREC_UNREPLAYABLE,
	};
	memcpy(r->grid, l->grid, sizeof r->grid);
	memcpy(r->block, l->block, sizeof r->block);
	if (attrs > 0) {
		memcpy(p + head, l->attrs, attrs);
		r->attrs = (const CUlaunchAttribute *)(const void *)(p + head);
	}
	unsigned char *args = p + at_params;
	if (nbytes > 0) {
		if (packed != NULL) {
			memcpy(args, packed, nbytes);
		} else {
			/* the gaps between parameters hold zeros, as nothing reads them */
			memset(args, 0, nbytes);
			for (uint32_t i = 0; i < k->nparams; i++)
				memcpy(args + k->offset[i], l->params[i], k->size[i]);
		}
		r->params = args;
	}
	s->at[pos] = r;
	s->st.records++;
	s->st.unreplayable += r->state != LREC_REPLAYABLE;
	s->st.param_bytes += nbytes;
	return r->state;
}

/* The offsets of r's parameter words that may be pointers, as kparam_scan
 * reads them, each given to fn; stops early when fn returns nonzero.
 * Returns how many were given. */
static uint32_t
each_word(const struct lrec *r, int (*fn)(uint32_t off, void *ctx), void *ctx)
{
	uint32_t n = 0;

	if (r->packed || r->k == NULL) {
		for (uint32_t o = 0; o + 8 <= r->nbytes; o += 8, n++)
			if (fn(o, ctx))
				return n + 1;
		return n;
	}
	for (uint32_t i = 0; i < r->k->nparams; i++)
		for (uint32_t o = 0; o + 8 <= r->k->size[i]; o += 8, n++)
			if (fn(r->k->offset[i] + o, ctx))
				return n + 1;
	return n;
}

/* lrec_relocate's pass over one record: counting (out NULL) or filling. */
struct reloc_pass {
	const struct lrec *r;
	uint32_t (*name)(uint64_t word, uint64_t *delta, void *ctx);
	void *ctx;
	struct lrec_reloc *out;	/* filling: room for cap */
	uint32_t n, cap;
	int unnamed;		/* a word lies in a buffer without a name */
};

/* One word of lrec_relocate's pass: named, it is counted or kept. */
static int
reloc_word(uint32_t off, void *ctx)
{
	struct reloc_pass *p = ctx;
	uint64_t w, delta = 0;

	memcpy(&w, p->r->params + off, 8);
	uint32_t b = w != 0 ? p->name(w, &delta, p->ctx) : LREC_NO_BUF;
	if (b == LREC_UNNAMED)
		p->unnamed = 1;
	if (b == LREC_NO_BUF || b == LREC_UNNAMED)
		return p->unnamed;
	if (p->out != NULL) {
		if (p->n == p->cap)
			return 1;
		p->out[p->n] = (struct lrec_reloc){ off, b, delta };
	}
	p->n++;
	return 0;
}

int
lrec_relocate(struct lrec_set *s, uint32_t pos,
    uint32_t (*name)(uint64_t word, uint64_t *delta, void *ctx), void *ctx)
{
	struct lrec *r = s->at != NULL && pos < s->n ? (struct lrec *)s->at[pos] : NULL;

	if (r == NULL || r->state != LREC_REPLAYABLE)
		return -1;
	struct reloc_pass p = { .r = r, .name = name, .ctx = ctx };
	each_word(r, reloc_word, &p);
	if (p.unnamed)
		return -1;
	if (p.n > 0) {
		size_t bytes = (size_t)p.n * sizeof *p.out;
		if ((p.out = take(s, bytes)) == NULL)
			return -1;
		p.cap = p.n;
		p.n = 0;
		each_word(r, reloc_word, &p);
	}
	r->relocs = p.out;
	r->nrelocs = p.n;
	r->relocated = 1;
	return 0;
}

int
lrec_params(const struct lrec *r, const unsigned char *from, unsigned char *out,
    uint64_t (*addr)(uint32_t buf, void *ctx), void *ctx)
{
	if (!r->relocated)
		return -1;
	if (r->nbytes > 0)
		memcpy(out, from != NULL ? from : r->params, r->nbytes);
	for (uint32_t i = 0; i < r->nrelocs; i++) {
		uint64_t a = addr(r->relocs[i].buf, ctx);
		if (a == LREC_KEEP)
			continue;
		if (a == 0)
			return -1;
		a += r->relocs[i].delta;
		memcpy(out + r->relocs[i].off, &a, 8);
	}
	return 0;
}

int
lrec_args(const struct lrec *r, const struct ebb_launch *l, unsigned char *out)
{
	const unsigned char *packed;
	size_t nbytes;

	if (r->state != LREC_REPLAYABLE || r->func != (uintptr_t)l->func ||
	    memcmp(r->grid, l->grid, sizeof r->grid) != 0 ||
	    memcmp(r->block, l->block, sizeof r->block) != 0 || r->shmem != l->shmem ||
	    r->nattrs != l->nattrs || r->entry != l->entry ||
	    r->packed != (l->params == NULL && l->extra != NULL) ||
	    args_of(l, r->k, &packed, &nbytes) < 0 || nbytes != r->nbytes)
		return -1;
	if (nbytes == 0)
		return 0;
	if (packed != NULL) {
		memcpy(out, packed, nbytes);
		return 0;
	}
	memset(out, 0, nbytes);
	for (uint32_t i = 0; i < r->k->nparams; i++)
		memcpy(out + r->k->offset[i], l->params[i], r->k->size[i]);
	return 0;
}

const struct lrec *
lrec_at(const struct lrec_set *s, uint32_t pos)
{
	return s->at != NULL && pos < s->n ? s->at[pos] : NULL;
}

void
lrec_set_fini(struct lrec_set *s)
{
	struct lrec_chunk *c = s->chunks;

	while (c != NULL) {
		struct lrec_chunk *next = c->next;
		free(c);
		c = next;
	}
	free(s->at);
	memset(s, 0, sizeof *s);
}

/* The launch of r with kernelParams args or the packed extra list, through
 * its own entry point. */
static CUresult
launch_through(const struct lrec *r, void **args, void **extra)
{
	CUfunction f = (CUfunction)r->func;
	const uint32_t *g = r->grid, *b = r->block;

	switch (r->entry) {
	case EBB_LAUNCH_EX: {
		CUlaunchConfig c = {
			.gridDimX = g[0], .gridDimY = g[1], .gridDimZ = g[2],
			.blockDimX = b[0], .blockDimY = b[1], .blockDimZ = b[2],
			.sharedMemBytes = r->shmem, .hStream = r->stream,
			.attrs = (CUlaunchAttribute *)(uintptr_t)r->attrs, .numAttrs = r->nattrs,
		};
		CUresult (*fn)(const CUlaunchConfig *, CUfunction, void **, void **) =
		    r->per_thread ? ebb_real.cuLaunchKernelEx_ptsz : ebb_real.cuLaunchKernelEx;
		return fn != NULL ? fn(&c, f, args, extra) : CUDA_ERROR_NOT_SUPPORTED;
	}
	case EBB_LAUNCH_COOP: {
		CUresult (*fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
		    unsigned, unsigned, CUstream, void **) = r->per_thread ?
		    ebb_real.cuLaunchCooperativeKernel_ptsz : ebb_real.cuLaunchCooperativeKernel;
		if (extra != NULL)
			return CUDA_ERROR_INVALID_VALUE;	/* not recorded so */
		return fn != NULL ? fn(f, g[0], g[1], g[2], b[0], b[1], b[2], r->shmem, r->stream,
		    args) : CUDA_ERROR_NOT_SUPPORTED;
	}
	default: {
		CUresult (*fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
		    unsigned, unsigned, CUstream, void **, void **) = r->per_thread ?
		    ebb_real.cuLaunchKernel_ptsz : ebb_real.cuLaunchKernel;
		return fn != NULL ? fn(f, g[0], g[1], g[2], b[0], b[1], b[2], r->shmem, r->stream,
		    args, extra) : CUDA_ERROR_NOT_SUPPORTED;
	}
	}
}

CUresult
lrec_launch(const struct lrec *r, const unsigned char *params)
{
	if (r == NULL || r->state != LREC_REPLAYABLE)
		return CUDA_ERROR_INVALID_VALUE;
	if (params == NULL)
		params = r->params;
	if (r->packed) {
		size_t size = r->nbytes;
		void *extra[] = { CU_LAUNCH_PARAM_BUFFER_POINTER, (void *)(uintptr_t)params,
			CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END };
		return launch_through(r, NULL, extra);
	}
	uint32_t n = r->k != NULL ? r->k->nparams : 0;
	if (n == 0)
		return launch_through(r, NULL, NULL);
	void *stack[ARGS_ON_STACK];
	void **args = n <= ARGS_ON_STACK ? stack : malloc(n * sizeof *args);
	if (args == NULL)
		return CUDA_ERROR_OUT_OF_MEMORY;
	for (uint32_t i = 0; i < n; i++)
		args[i] = (void *)(uintptr_t)(params + r->k->offset[i]);
	CUresult res = launch_through(r, args, NULL);
	if (args != stack)
		free(args);
	return res;
}

/* ---- arguments of this iteration ---- */

#define NOT_TAKEN UINT32_MAX

int
lrec_argset_init(struct lrec_argset *a, const struct lrec_set *s, const uint32_t *pos, size_t n)
{
	memset(a, 0, sizeof *a);
	a->idx = malloc((s->n ? s->n : 1) * sizeof *a->idx);
	if (a->idx == NULL)
		return -1;
	a->npos = s->n;
	memset(a->idx, 0xff, s->n * sizeof *a->idx);
	for (size_t i = 0; i < n; i++)
		if (pos[i] < a->npos && a->idx[pos[i]] == NOT_TAKEN)
			a->idx[pos[i]] = a->m++;
	a->off = malloc((a->m ? a->m : 1) * sizeof *a->off);
	a->got = calloc(a->m ? a->m : 1, 1);
	size_t total = 0;
	for (uint32_t q = 0; a->off != NULL && q < a->npos; q++)
		if (a->idx[q] != NOT_TAKEN) {
			const struct lrec *r = lrec_at(s, q);
			a->off[a->idx[q]] = total;
			total += r != NULL ? r->nbytes : 0;
		}
	a->buf = malloc(total ? total : 1);
	if (a->off == NULL || a->got == NULL || a->buf == NULL) {
		lrec_argset_fini(a);
		return -1;
	}
	return 0;
}

int
lrec_argset_take(struct lrec_argset *a, const struct lrec_set *s, uint32_t pos,
    const struct ebb_launch *l)
{
	if (a->idx == NULL || pos >= a->npos || a->idx[pos] == NOT_TAKEN)
		return 0;
	uint32_t i = a->idx[pos];
	const struct lrec *r = lrec_at(s, pos);
	a->got[i] = l != NULL && r != NULL && lrec_args(r, l, a->buf + a->off[i]) == 0;
	return a->got[i] ? 1 : -1;
}

const unsigned char *
lrec_argset_get(const struct lrec_argset *a, uint32_t pos)
{
	if (a->idx == NULL || pos >= a->npos || a->idx[pos] == NOT_TAKEN || !a->got[a->idx[pos]])
		return NULL;
	return a->buf + a->off[a->idx[pos]];
}

void
lrec_argset_clear(struct lrec_argset *a)
{
	if (a->got != NULL)
		memset(a->got, 0, a->m ? a->m : 1);
}

void
lrec_argset_fini(struct lrec_argset *a)
{
	free(a->idx);
	free(a->off);
	free(a->got);
	free(a->buf);
	memset(a, 0, sizeof *a);
}
