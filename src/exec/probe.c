/*
 * probe.c: hashing every buffer a launch references before and after it,
 * on the launch's stream, through one iteration (see probe.h).
 */
#include "config.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "buftab.h"
#include "ebb.h"
#include "hash_ptx.h"
#include "hashreg.h"
#include "log.h"
#include "lrec.h"
#include "plan.h"
#include "probe.h"
#include "real.h"
#include "record.h"
#include "replay.h"
#include "streams.h"
#include "trace.h"
#include "trace_format.h"

/* Threads a hash block runs, and the most blocks a hash launches. */
#define HASH_THREADS 256
#define HASH_MAX_BLOCKS 1024

/* Dropped probes' digests kept until a synchronisation shows their hashes
 * done; past that many drops, no probe starts until then. */
#define STALE_MAX 8

/* Bytes of digests a reference takes: before and after, four words each
 * (the digest's two, the pointer-like words, padding). */
#define SLOT_BYTES 64

/* What has been hashed around a position's launch (probe.state). */
enum {
	P_BEFORE = 1,	/* every reference hashed before it */
	P_AFTER = 2,	/* and after it */
	P_LOOSE = 4,	/* its buffers are not the recording's there, or it changed
			 * one the recording's launch did not have: every one hashed
			 * for pointers only, its accesses unknown */
	P_XPTR = 8	/* one of its extra buffers held pointers */
};


/* The probe: one at a time. Guarded by ebb_state_lock, except what
 * probe_read touches (lock). */
static struct probe {
	pthread_mutex_t lock;	/* probe_read against probe_access and probe_drop;
				 * taken after ebb_state_lock, never before it */
	CUcontext ctx;		/* where the kernel is loaded */
	CUfunction fn;		/* ebb_hash there; NULL: not loaded */
	int refused;		/* the kernel could not be loaded: said, never again */
	int on;			/* hashing the launches of the probed iteration */
	int pending;		/* ended; its digests wait for probe_read */
	int read;		/* probe_read has the digests in host */
	uint64_t s0;		/* the probed iteration's first operation */
	uint32_t nops;		/* its positions (the shape's) */
	uint8_t *state;		/* P_* of each position */
	uint32_t *xat;		/* the first extra slot of each position (its launch's
				 * buffers that the recorded launch does not reference) */
	uint16_t *xn;		/* how many it has */
	uint32_t nrefs;		/* the shape's references: slots 0 .. nrefs-1; extra
				 * slots follow them */
	uint32_t xnext, xmax;	/* extra slots taken, and room */
	CUdeviceptr dig;	/* SLOT_BYTES a reference, on the device */
	size_t dig_bytes;	/* bytes at dig */
	CUdeviceptr stale[STALE_MAX];	/* digests of dropped probes, freed once the device
					 * has passed their hashes (at the next probe_read) */
	unsigned nstale;
	uint64_t *host;		/* the digests read back: 8 words a reference */
	struct hashreg reg;	/* the regions every tracked buffer lies in: words
				 * there may be pointers */
	struct probe_stats st;
} probe = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* A buffer a recorded launch references. */
struct shape_ref {
	uint64_t id;		/* the recording's buffer */
	uint64_t size;
};

/* The recorded iteration's references, by position: what a probed launch
 * must match. Guarded by ebb_state_lock. */
static struct shape {
	uint32_t *first;	/* references of position i: ref[first[i] .. first[i+1]) */
	uint8_t *launch;	/* position i is a launch */
	uint32_t nops;		/* positions */
	uint32_t last;		/* first[0 .. last] are set */
	struct shape_ref *ref;
	size_t nrefs, cap;
} shape;

/* Load the hash kernel into the current context. Returns 0, or -1 (said). */
static int
load_kernel(void)
{
	CUcontext ctx = NULL;
	CUmodule mod;
	CUfunction fn;

	if (probe.refused)
		return -1;
	if (ebb_real.cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || ctx == NULL)
		return -1;
	if (probe.fn != NULL && probe.ctx == ctx)
		return 0;
	const char *call = "cuModuleLoadData";
	CUresult r = ebb_real.cuModuleLoadData == NULL ? CUDA_ERROR_NOT_SUPPORTED
	    : ebb_real.cuModuleLoadData(&mod, ebb_hash_ptx);
	if (r == CUDA_SUCCESS) {
		call = "cuModuleGetFunction";
		r = ebb_real.cuModuleGetFunction(&fn, mod, "ebb_hash");
	}
	if (r != CUDA_SUCCESS) {
		ebb_log(EBB_LOG_WARN, "cannot load ebb's hash kernel (%s: error %d; the driver "
		    "JIT-compiles its PTX); EBB_RECOMPUTE learns no write sets, and nothing is "
		    "recomputed", call, (int)r);
		probe.refused = 1;
		return -1;
	}
	probe.ctx = ctx;
	probe.fn = fn;
	return 0;
}

/* Free the per-position arrays of the probe. */
static void
free_positions(void)
{
	free(probe.state);
	free(probe.xat);
	free(probe.xn);
	free(probe.host);
	probe.state = NULL;
	probe.xat = NULL;
	probe.xn = NULL;
	probe.host = NULL;
}

/* Device memory for bytes of digests (kept from probe to probe). Returns 0
 * or -1. */
static int
digests(size_t bytes)
{
	if (probe.dig != 0 && probe.dig_bytes >= bytes)
		return 0;
	if (probe.dig != 0)
		ebb_real.cuMemFree_v2(probe.dig);	/* only after probe_read's synchronisation */
	probe.dig = 0;
	probe.dig_bytes = 0;
	if (ebb_real.cuMemAlloc_v2(&probe.dig, bytes) != CUDA_SUCCESS) {
		probe.dig = 0;
		return -1;
	}
	probe.dig_bytes = bytes;
	return 0;
}

int
probe_shape_begin(uint32_t nops)
{
	probe_shape_drop();
	shape.first = calloc((size_t)nops + 1, sizeof *shape.first);
	shape.launch = calloc(nops ? nops : 1, 1);
	if (shape.first == NULL || shape.launch == NULL) {
		probe_shape_drop();
		return -1;
	}
	shape.nops = nops;
	shape.last = 0;
	shape.nrefs = 0;
	return 0;
}

/* Room for n more references in the shape. Returns 0 or -1. */
static int
shape_room(size_t n)
{
	if (shape.nrefs + n <= shape.cap)
		return 0;
	size_t cap = shape.cap ? shape.cap * 2 : 4096;
	while (cap < shape.nrefs + n)
		cap *= 2;
	if (cap > UINT32_MAX)
		return -1;
	struct shape_ref *v = realloc(shape.ref, cap * sizeof *v);
	if (v == NULL)
		return -1;
	shape.ref = v;
	shape.cap = cap;
	return 0;
}

void
probe_shape_op(uint32_t pos, struct ebb_buf *const *bufs, size_t n)
{
	if (shape.first == NULL || pos >= shape.nops || pos < shape.last)
		return;
	if (shape_room(n) < 0) {
		probe_shape_drop();	/* no memory: nothing is probed */
		return;
	}
	for (uint32_t q = shape.last + 1; q <= pos; q++)
		shape.first[q] = (uint32_t)shape.nrefs;
	for (size_t j = 0; j < n; j++)
		shape.ref[shape.nrefs++] = (struct shape_ref){ bufs[j]->id, bufs[j]->size };
	shape.first[pos + 1] = (uint32_t)shape.nrefs;
	shape.last = pos + 1;
}

void
probe_shape_drop(void)
{
	pthread_mutex_lock(&probe.lock);	/* probe_read may be reading it */
	free(shape.first);
	free(shape.launch);
	free(shape.ref);
	memset(&shape, 0, sizeof shape);
	pthread_mutex_unlock(&probe.lock);
}

void
probe_shape_launch(uint32_t pos)
{
	if (shape.launch != NULL && pos < shape.nops)
		shape.launch[pos] = 1;
}

int
probe_ref(uint32_t pos, uint32_t j, uint64_t *id)
{
	if (shape.first == NULL || pos >= shape.last || j >= shape.first[pos + 1] - shape.first[pos])
		return -1;
	*id = shape.ref[shape.first[pos] + j].id;
	return 0;
}

/* Close the shape: positions past the last operation seen reference nothing. */
static void
shape_close(void)
{
	for (uint32_t q = shape.last + 1; q <= shape.nops; q++)
		shape.first[q] = (uint32_t)shape.nrefs;
	shape.last = shape.nops;
}

void
probe_span(const struct ebb_buf *b)
{
	hashreg_add(&probe.reg, b->addr, b->size);
}

/* probe_span as buftab_walk's callback. */
static int
span(struct ebb_buf *b, void *ctx)
{
	(void)ctx;
	probe_span(b);
	return 0;
}

int
probe_begin(uint64_t s0, struct buftab *tab)
{
	if (probe.on || probe.pending || shape.first == NULL)
		return -1;
	shape_close();
	uint32_t nops = shape.nops;
	size_t nrefs = shape.nrefs;
	if (nrefs == 0)
		return -1;
	size_t xmax = nrefs / 8 + 256, slots = nrefs + xmax;
	ebb_inside = 1;
	int r = load_kernel();
	if (r == 0 && probe.nstale == STALE_MAX)
		r = -1;		/* dropped probes' hashes may still run, in all that memory */
	if (r == 0 && digests(slots * SLOT_BYTES) < 0) {
		ebb_log(EBB_LOG_WARN, "no device memory for the write sets' digests (%llu bytes); "
		    "EBB_RECOMPUTE learns none this time", (unsigned long long)(slots * SLOT_BYTES));
		r = -1;
	}
	ebb_inside = 0;
	if (r < 0)
		return -1;
	probe.state = calloc(nops ? nops : 1, 1);
	probe.xat = malloc((nops ? nops : 1) * sizeof *probe.xat);
	probe.xn = calloc(nops ? nops : 1, sizeof *probe.xn);
	probe.host = malloc(slots * SLOT_BYTES);
	if (probe.state == NULL || probe.xat == NULL || probe.xn == NULL || probe.host == NULL) {
		free_positions();
		return -1;
	}
	probe.nrefs = (uint32_t)nrefs;
	probe.xnext = 0;
	probe.xmax = (uint32_t)xmax;
	memset(&probe.reg, 0, sizeof probe.reg);
	buftab_walk(tab, span, NULL);
	probe.s0 = s0;
	probe.nops = nops;
	probe.on = 1;
	probe.read = 0;
	memset(&probe.st, 0, sizeof probe.st);
	probe.st.probes = 1;
	return 0;
}

int
probe_on(void)
{
	return probe.on;
}

/* Launch the hash of n bytes at p into out on stream h, counting the words
 * inside reg's regions as pointer-like. Returns the driver's result. */
static CUresult
launch_hash(CUdeviceptr p, uint64_t n, CUdeviceptr out, CUstream h, const struct hashreg *reg)
{
	unsigned long long size = n;
	struct hashreg r = *reg;
	void *args[] = { &p, &size, &out, &r };
	uint64_t blocks = ((n + 7) / 8 + HASH_THREADS - 1) / HASH_THREADS;

	if (blocks > HASH_MAX_BLOCKS)
		blocks = HASH_MAX_BLOCKS;
	if (blocks == 0)
		blocks = 1;
	return ebb_real.cuLaunchKernel(probe.fn, (unsigned)blocks, 1, 1, HASH_THREADS, 1, 1, 0, h,
	    args, NULL);
}

/* The probe's hash of buffer b into out on stream h, counted. Returns 0 or
 * -1. */
static int
hash(const struct ebb_buf *b, CUdeviceptr out, CUstream h)
{
	if (launch_hash(b->addr, b->size, out, h, &probe.reg) != CUDA_SUCCESS)
		return -1;
	probe.st.hashes++;
	probe.st.bytes += b->size;
	return 0;
}

int
probe_hash(CUdeviceptr p, uint64_t n, CUdeviceptr out, CUstream h)
{
	static const struct hashreg none;	/* no pointers */

	if (probe.fn == NULL)
		return -1;
	return launch_hash(p, n, out, h, &none) == CUDA_SUCCESS ? 0 : -1;
}

/* The byte an unmeasured reference's digests are filled with: its padding
 * words, which a hash leaves, then read all ones. */
#define UNMEASURED 0xff

/* Whether the launch at pos was hashed before and after it. */
static int
hashed(uint32_t pos)
{
	return (probe.state[pos] & (P_BEFORE | P_AFTER)) == (P_BEFORE | P_AFTER);
}

/*
 * The slots of the launch at pos: which of its n buffers each of the
 * recording's references there is (at[j], or REPLAY_UNMATCHED: not
 * measured), as replay_match_launch matches them, and *extra, how many of
 * its buffers are none of them (hashed into extra slots, to be found left
 * unchanged). Where the buffers do not match the recording's, every one is
 * extra (*loose): hashed for pointers only. Returns 0, or -1 when either
 * side has more than REPLAY_MATCH_MAX buffers.
 */
static int
slots_of(uint32_t pos, struct ebb_buf *const *bufs, size_t n, uint32_t *at, uint32_t *extra,
    int *loose)
{
	uint32_t f = shape.first[pos], m = shape.first[pos + 1] - f;
	uint64_t rec[REPLAY_MATCH_MAX], got[REPLAY_MATCH_MAX];

	if (n > REPLAY_MATCH_MAX || m > REPLAY_MATCH_MAX)
		return -1;
	for (uint32_t j = 0; j < m; j++)
		rec[j] = shape.ref[f + j].size;
	for (size_t k = 0; k < n; k++)
		got[k] = bufs[k]->size;
	int matched = replay_match_launch(rec, m, got, n, at);
	*loose = matched < 0;
	if (*loose) {
		for (uint32_t j = 0; j < m; j++)
			at[j] = REPLAY_UNMATCHED;
		matched = 0;
	}
	*extra = (uint32_t)(n - (size_t)matched);
	return 0;
}

/* The device address of slot i (the shape's, then the extra ones). */
static CUdeviceptr
slot(uint32_t i)
{
	return probe.dig + (CUdeviceptr)i * SLOT_BYTES;
}

/*
 * Hash bufs[0..n) of the launch at pos into their slots, before it (half 0)
 * or after it (half 1), at as slots_of gave it: the recording's
 * references into theirs, the launch's others into its extra slots, in
 * order. Returns 0 or -1.
 */
static int
hash_all(uint32_t pos, struct ebb_buf *const *bufs, size_t n, const uint32_t *at, int half,
    CUstream handle)
{
	uint32_t f = shape.first[pos], m = shape.first[pos + 1] - f;
	CUdeviceptr off = half ? SLOT_BYTES / 2 : 0;
	uint8_t recorded[REPLAY_MATCH_MAX] = { 0 };

	for (uint32_t j = 0; j < m; j++) {
		if (at[j] == REPLAY_UNMATCHED)
			continue;
		recorded[at[j]] = 1;
		if (hash(bufs[at[j]], slot(f + j) + off, handle) < 0)
			return -1;
	}
	uint32_t x = probe.nrefs + probe.xat[pos];
	for (size_t k = 0; k < n; k++)
		if (!recorded[k] && hash(bufs[k], slot(x++) + off, handle) < 0)
			return -1;
	return 0;
}

int
probe_before(uint64_t seq, struct ebb_stream *st, CUstream handle, struct ebb_buf *const *bufs,
    size_t n)
{
	if (!probe.on || seq < probe.s0 || seq - probe.s0 >= probe.nops)
		return 0;
	uint32_t pos = (uint32_t)(seq - probe.s0);
	CUcontext ctx = NULL;
	uint32_t at[REPLAY_MATCH_MAX], extra;
	uint32_t m = shape.first[pos + 1] - shape.first[pos];
	int loose;
	if (st == NULL || streams_capturing(st) || slots_of(pos, bufs, n, at, &extra, &loose) < 0)
		return 0;
	if (extra > probe.xmax - probe.xnext)
		return 0;	/* no extra slots left */
	ebb_inside = 1;
	int ok = ebb_real.cuCtxGetCurrent(&ctx) == CUDA_SUCCESS && ctx == probe.ctx;
	CUdeviceptr base = slot(shape.first[pos]);
	/* the recording's references this launch does not have: not measured */
	int partial = n - extra < m;
	if (ok && partial)
		ok = ebb_real.cuMemsetD8Async(base, UNMEASURED, m * SLOT_BYTES, handle) ==
		    CUDA_SUCCESS;
	for (uint32_t j = 0; ok && j < m; j++)
		if (at[j] != REPLAY_UNMATCHED)
			ok = ebb_real.cuMemsetD8Async(base + j * SLOT_BYTES, 0, SLOT_BYTES, handle) ==
			    CUDA_SUCCESS;
	probe.xat[pos] = probe.xnext;
	probe.xn[pos] = (uint16_t)extra;
	probe.xnext += extra;
	if (ok && extra > 0)
		ok = ebb_real.cuMemsetD8Async(slot(probe.nrefs + probe.xat[pos]), 0,
		    extra * SLOT_BYTES, handle) == CUDA_SUCCESS;
	ok = ok && hash_all(pos, bufs, n, at, 0, handle) == 0;
	ebb_inside = 0;
	if (!ok)
		return 0;
	probe.state[pos] = P_BEFORE | (loose ? P_LOOSE : 0);
	return 1;
}

void
probe_after(uint64_t seq, CUstream handle, struct ebb_buf *const *bufs, size_t n)
{
	if (!probe.on || seq < probe.s0 || seq - probe.s0 >= probe.nops)
		return;
	uint32_t pos = (uint32_t)(seq - probe.s0);
	if ((probe.state[pos] & (P_BEFORE | P_AFTER)) != P_BEFORE)
		return;
	uint32_t at[REPLAY_MATCH_MAX], extra;
	int loose;	/* as before it */
	int ok = slots_of(pos, bufs, n, at, &extra, &loose) == 0 && extra == probe.xn[pos] &&
	    loose == ((probe.state[pos] & P_LOOSE) != 0);
	ebb_inside = 1;
	ok = ok && hash_all(pos, bufs, n, at, 1, handle) == 0;
	ebb_inside = 0;
	if (ok)
		probe.state[pos] |= P_AFTER;
}

void
probe_end(void)
{
	if (!probe.on)
		return;
	probe.on = 0;
	probe.pending = 1;
}

void
probe_drop(void)
{
	pthread_mutex_lock(&probe.lock);
	if (probe.on || (probe.pending && !probe.read)) {
		/* its hashes may still run: the memory stays until a synchronisation */
		if (probe.dig != 0)
			probe.stale[probe.nstale++] = probe.dig;
		probe.dig = 0;
		probe.dig_bytes = 0;
	}
	probe.on = 0;
	probe.pending = 0;
	probe.read = 0;
	free_positions();
	pthread_mutex_unlock(&probe.lock);
}

int
probe_pending(void)
{
	return probe.pending && !__atomic_load_n(&probe.read, __ATOMIC_ACQUIRE);
}

/* A launch's extra buffers (none of the recording's there): where one
 * held pointers, the launch may write what it does not reference (P_XPTR);
 * where it changed one, it wrote a buffer the recorded launch did not
 * reference, and its accesses count as unknown (P_LOOSE); else they count
 * as chance references. */
static void
extras(void)
{
	for (uint32_t pos = 0; pos < probe.nops; pos++) {
		if (probe.xn[pos] == 0 || !hashed(pos))
			continue;
		int same = 1, ptrs = 0;
		for (uint32_t e = 0; e < probe.xn[pos]; e++) {
			const uint64_t *d = probe.host + ((size_t)probe.nrefs + probe.xat[pos] + e) * 8;
			same &= d[0] == d[4] && d[1] == d[5];
			ptrs |= d[2] != 0 || d[6] != 0;
		}
		if (ptrs)
			probe.state[pos] |= P_XPTR;
		if (!same)
			probe.state[pos] |= P_LOOSE;
		if (!(probe.state[pos] & (P_LOOSE | P_XPTR)))
			probe.st.chance += probe.xn[pos];
		if (probe.state[pos] & P_LOOSE)
			probe.st.loose++;
	}
}

/* Count what the read probe measured. */
static void
count(void)
{
	for (uint32_t pos = 0; pos < probe.nops; pos++) {
		uint32_t n = shape.first[pos + 1] - shape.first[pos];
		if (n == 0 || !shape.launch[pos])
			continue;
		if (!hashed(pos) || (probe.state[pos] & P_LOOSE)) {
			probe.st.unmeasured++;
			continue;
		}
		probe.st.launches++;
		for (uint32_t j = 0; j < n; j++) {
			unsigned a = probe_access(pos, j);
			probe.st.refs += a != PROF_ACC_UNKNOWN;
			probe.st.written += a == PROF_ACC_WRITE;
			probe.st.pointers += probe_pointers(pos, j) != 0;
		}
	}
}

/* A V record for each measured launch of the read probe. */
static void
trace_accesses(void)
{
	struct ebb_line l;

	if (!ebb_trace_on())
		return;
	uint64_t t = ebb_now_ns();
	for (uint32_t pos = 0; pos < probe.nops; pos++) {
		uint32_t n = shape.first[pos + 1] - shape.first[pos];
		if (n == 0 || !hashed(pos))
			continue;
		if (!ebb_trace_begin_access(t, probe.s0 + pos, &l))
			return;
		ebb_line_u64(&l, n);
		for (uint32_t j = 0; j < n; j++)
			ebb_line_u64(&l, probe_access(pos, j) +
			    (probe_pointers(pos, j) ? EBB_TRACE_ACC_POINTERS : 0));
		ebb_line_end(&l);
	}
}

int
probe_read(void)
{
	int r = 0;

	pthread_mutex_lock(&probe.lock);
	if (!probe.pending || probe.read || shape.first == NULL) {
		pthread_mutex_unlock(&probe.lock);
		return 0;
	}
	ebb_inside = 1;
	while (probe.nstale > 0)
		ebb_real.cuMemFree_v2(probe.stale[--probe.nstale]);
	size_t bytes = ((size_t)probe.nrefs + probe.xnext) * SLOT_BYTES;
	CUresult e = ebb_real.cuMemcpyDtoH_v2(probe.host, probe.dig, bytes);
	ebb_inside = 0;
	if (e != CUDA_SUCCESS) {
		ebb_log(EBB_LOG_WARN, "cannot read the write sets' digests back (cuMemcpyDtoH: error "
		    "%d); EBB_RECOMPUTE learns none this time", (int)e);
		r = -1;
	} else {
		extras();
		__atomic_store_n(&probe.read, 1, __ATOMIC_RELEASE);
		count();
		trace_accesses();
	}
	pthread_mutex_unlock(&probe.lock);
	return r;
}

unsigned
probe_access(uint32_t pos, uint32_t j)
{
	if (!__atomic_load_n(&probe.read, __ATOMIC_ACQUIRE) || pos >= probe.nops || !hashed(pos) ||
	    (probe.state[pos] & P_LOOSE) || j >= shape.first[pos + 1] - shape.first[pos])
		return PROF_ACC_UNKNOWN;
	const uint64_t *d = probe.host + (size_t)(shape.first[pos] + j) * 8;
	if (d[3] == UINT64_MAX && d[7] == UINT64_MAX)
		return PROF_ACC_UNKNOWN;	/* not among the launch's buffers */
	return d[0] == d[4] && d[1] == d[5] ? PROF_ACC_READ : PROF_ACC_WRITE;
}

int
probe_pointers(uint32_t pos, uint32_t j)
{
	if (!__atomic_load_n(&probe.read, __ATOMIC_ACQUIRE) || pos >= probe.nops || !hashed(pos) ||
	    j >= shape.first[pos + 1] - shape.first[pos])
		return 0;
	if (probe.state[pos] & P_XPTR)
		return 1;	/* one of its others held pointers: every one says so */
	const uint64_t *d = probe.host + (size_t)(shape.first[pos] + j) * 8;
	if (d[3] == UINT64_MAX && d[7] == UINT64_MAX)
		return 0;	/* not measured */
	return d[2] != 0 || d[6] != 0;
}

void
probe_stats(struct probe_stats *out)
{
	*out = probe.st;
}

uint64_t
probe_apply(struct rec *r, const struct lrec_set *ls, struct probe_stats *st, uint64_t *wild)
{
	struct prof *p = &r->p;
	uint64_t replayable = 0;

	*st = probe.st;
	*wild = 0;
	if (!__atomic_load_n(&probe.read, __ATOMIC_ACQUIRE))
		return 0;
	for (uint32_t pos = 0; pos < p->nops && pos < shape.nops; pos++) {
		uint64_t id;
		uint32_t j;
		int all = 1, pointers = 0;
		for (j = 0; probe_ref(pos, j, &id) == 0; j++) {
			pointers |= probe_pointers(pos, j);
			if (rec_access(r, r->s0 + pos, id, probe_access(pos, j)) != 0)
				all = 0;
		}
		int measured = hashed(pos);
		if (shape.launch[pos] && (!measured || pointers)) {
			*wild += prof_wild(p, pos) == 0;
			continue;
		}
		const struct lrec *lr = lrec_at(ls, pos);
		if (all && j > 0 && lr != NULL && lr->state == LREC_REPLAYABLE && lr->relocated &&
		    prof_replayable(p, pos) == 0)
			replayable++;
	}
	return replayable;
}
