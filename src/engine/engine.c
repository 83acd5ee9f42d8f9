/*
 * engine.c: turns the hooks' events (operations, allocations, frees, syncs,
 * captures, NCCL registrations) into the buffer table, the trace, learning's
 * input, CUPTI's correlation ids and the mover's and the executor's calls.
 * The lifecycle (learn, record, plan, run, learn again) is in life.c, the
 * pool ebb serves in pool.c, the statistics and the exit summary in
 * summary.c.
 */
#include "config.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "buftab.h"
#include "callsite.h"
#include "conf.h"
#include "ebb.h"
#include "engine.h"
#include "engine_int.h"
#include "exec.h"
#include "iter.h"
#include "kparam.h"
#include "locks.h"
#include "log.h"
#include "mover.h"
#include "probe.h"
#include "plan.h"
#include "streams.h"
#include "trace.h"
#include "tracer.h"
#include "vmm.h"

/* The engine's state (engine_int.h). */
struct engine engine;

/* Tokens for the iteration finder: kind in the top bits, detail below. */
#define TOK_LAUNCH (1u << 28)
#define TOK_COPY (2u << 28)
#define TOK_SET (3u << 28)
#define TOK_NCCL (4u << 28)
#define TOK_GRAPH (5u << 28)
#define TOK_SYNC (6u << 28)

/* Per-thread list of the distinct buffers of the operation being resolved. */
struct bufset {
	struct ebb_buf **v;	/* the buffers, in the order first named */
	size_t n, cap;		/* buffers in v, and room for */
	uint64_t seq;		/* the operation's seq: the last_seq of each buffer in v */
	uint64_t words;		/* addresses that hit a buffer, repeats included */
};
static _Thread_local struct bufset tl_set;
static pthread_key_t tl_set_key;	/* a thread's tl_set.v: freed when the thread ends */
static pthread_once_t tl_set_once = PTHREAD_ONCE_INIT;

/* Destructor of tl_set_key: frees the ending thread's set, which starts
 * empty again should a later destructor of the thread call the driver. */
static void
tl_set_free(void *v)
{
	free(v);
	tl_set.v = NULL;
	tl_set.n = tl_set.cap = 0;
}

/* Create tl_set_key, once. */
static void
tl_set_key_create(void)
{
	pthread_key_create(&tl_set_key, tl_set_free);
}

static const char *const alloc_kind_names[] = EBB_TRACE_ALLOC_KINDS;
static const char *const free_kind_names[] = EBB_TRACE_FREE_KINDS;
/* Indices into free_kind_names, in EBB_TRACE_FREE_KINDS's order. */
enum { FREE_SYNC, FREE_ASYNC, FREE_LOST, FREE_UNMAP };
static const char *const sync_kind_names[] = EBB_TRACE_SYNC_KINDS;

/* ---- initialisation ---- */

/*
 * The summary, the trace's end and the mover's workers are finished by an
 * exit handler registered at the job's first operation, after CUPTI is
 * attached: exit handlers run last registered first, so it runs before
 * CUPTI's and libcudart's own (registered when they started), while the
 * context exists. The library destructor, which runs after all of them,
 * only finishes a process that made no operation: by then CUPTI's own
 * handlers have run, and calling CUPTI from there crashes the exit.
 */
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;

/* Register ebb_engine_shutdown as an exit handler (once, exit_once). */
static void
register_exit(void)
{
	atexit(ebb_engine_shutdown);
}

/* Set up the engine for configuration c (engine.h); returns 0. */
int
ebb_engine_init(const struct ebb_conf *c)
{
	engine.conf = c;
	engine.self.timing = c->self_time;
	buftab_init(&engine.tab);
	kparam_init(&engine.kcache);
	engine.life = LIFE_SEARCH;
	engine.plan_on = c->mode == EBB_MODE_OFFLOAD && c->plan;
	if (c->iter_kernel[0] == '\0') {
		engine.finder_ok = iter_init(&engine.finder, (size_t)c->learn_launches, 2) == 0;
		if (!engine.finder_ok)
			ebb_log(EBB_LOG_WARN, "no memory for the iteration finder (EBB_LEARN_LAUNCHES=%llu); "
			    "iterations are not detected", (unsigned long long)c->learn_launches);
	}
	engine.cupti_wanted = c->cupti;
	exec_init(c, &engine.tab);
	if (c->trace[0] != '\0')
		ebb_trace_open(c->trace, (size_t)c->trace_buffer, ebb_conf_mode_name(c->mode));
	return 0;
}

/* ---- allocation ---- */

/* The stream tracker of a call's stream, as a buffer records it. */
static struct ebb_stream *
stream_of(CUstream s, int per_thread)
{
	return streams_get(s, per_thread);
}

/* The handle to print for a tracker (0 when out of memory made it NULL). */
static uintptr_t
stream_hex(const struct ebb_stream *s)
{
	return s ? (uintptr_t)streams_handle(s) : 0;
}

/* Forget the buffers overlapping [p, p + size), writing an F record of
 * kind `kind` for each: their frees went by a path ebb does not see and the
 * driver just handed the range out again (FREE_LOST), or the job unmapped
 * them (FREE_UNMAP). Caller holds ebb_state_lock. */
static void
drop_range(CUdeviceptr p, size_t size, uint64_t now, int kind)
{
	struct ebb_buf *old;

	while ((old = buftab_overlap(&engine.tab, p, size ? size : 1)) != NULL) {
		buftab_remove(&engine.tab, old->addr);
		if (kind == FREE_LOST)
			engine.stats.frees_untracked++;
		else
			engine.stats.frees++;
		ebb_trace_write_free(now, old->id, stream_hex((struct ebb_stream *)old->stream),
		    free_kind_names[kind]);
		exec_free(old, engine.seq_counter);
		if (old->mv.managed == EBB_UNMANAGED && engine.conf->mode == EBB_MODE_OFFLOAD)
			mover_note_unmanaged(-(int64_t)old->size);
		ebb_buf_put(old);
	}
}

/* The job unmapped [p, p + size): forget the buffers there. */
void
ebb_engine_on_unmap(CUdeviceptr p, size_t size)
{
	uint64_t now = ebb_now_ns();

	pthread_mutex_lock(&ebb_state_lock);
	drop_range(p, size, now, FREE_UNMAP);
	pthread_mutex_unlock(&ebb_state_lock);
}

/* Fill in and table a new buffer; caller holds ebb_state_lock. */
static void
record_alloc(struct ebb_buf *b, CUdeviceptr p, size_t size, struct ebb_stream *s,
    enum ebb_alloc_kind kind, uint64_t site, uint64_t now)
{
	b->addr = p;
	b->size = size;
	b->id = ++engine.alloc_counter;
	b->site = site;
	b->stream = (uintptr_t)s;
	b->alloc_ns = now;
	b->alloc_seq = engine.seq_counter;
	b->kind = (uint8_t)kind;
	if (engine.capturing)
		b->pinned |= EBB_PIN_CAPTURE;
	/* Work queued on its stream before the allocation may still use the
	 * memory (stream-ordered reuse): count that as a use, so nothing moves
	 * or releases it before that work is done. */
	if (s != NULL && (kind == EBB_ALLOC_ASYNC || kind == EBB_ALLOC_POOL) && streams_last(s) > 0) {
		b->last[0].stream = (uintptr_t)s;
		b->last[0].seq = streams_last(s);
		b->nstreams = 1;
	}
	buftab_insert(&engine.tab, b);
	engine.stats.allocs++;
	if (engine.tab.bytes > engine.stats.bytes_peak)
		engine.stats.bytes_peak = engine.tab.bytes;
	ebb_trace_write_alloc(now, b->id, p, size, stream_hex(s), alloc_kind_names[kind], site);
}

/* The call-site fingerprint of an allocation, or 0. It serves learning
 * alone, and unwinding is dear for a job that allocates often, so it is
 * taken only while learning. */
static uint64_t
site_now(void)
{
	return life_timing() ? ebb_callsite((unsigned)engine.conf->site_depth) : 0;
}

/*
 * Clear the stack below the caller's frame, where ebb's moves have just run.
 * A launch's parameters are read as 8-byte words (kparam.c), and a parameter
 * struct with room it does not fill carries whatever the job's stack held
 * there: torch's cat passes 64 input slots and sets a few, and a cuBLAS GEMM
 * that does not read C (beta zero) passes a C pointer all the same. After a
 * move, that is the moved buffer's address (the driver's frames under the
 * copy and the mapping hold it), and the next such launch reads as a use of
 * it: the launch then waits for a copy back that the plan issued for a
 * later operation. Every hook that moved a buffer (the plan's moves, a
 * restore on use, an eviction for room) clears 16 KiB, the driver's frames
 * included, on its way out, which costs far less than such a wait.
 */
static __attribute__((noinline)) void
scrub_stack(void)
{
	unsigned char pad[16384];

	explicit_bzero(pad, sizeof pad);
}

/* On a hook's way out: clear the stack if this thread moved a buffer. */
static inline void
scrub_if_moved(int moved)
{
	if ((mover_moved_here() | moved) != 0)
		scrub_stack();
}

/*
 * Take ebb_state_lock; while a capture runs (or is about to begin), the
 * calling thread is also made relaxed for ebb's own driver calls. Returns
 * the mode engine_leave gives back.
 */
static int
engine_enter(void)
{
	if (pthread_mutex_trylock(&ebb_state_lock) != 0) {
		/* held by another thread (a worker retiring a copy, another of the
		 * job's): the wait is counted */
		uint64_t t0 = ebb_now_ns();
		pthread_mutex_lock(&ebb_state_lock);
		engine.lock_wait_ns += ebb_now_ns() - t0;
		engine.lock_waits++;
	}
	return engine.capturing > 0 ? streams_relax() : -1;
}

/* Undo engine_enter. */
static void
engine_leave(int mode)
{
	if (mode >= 0)
		streams_unrelax(mode);
	pthread_mutex_unlock(&ebb_state_lock);
}

/* Serve an allocation in offload mode (engine.h): CUDA_SUCCESS, the mover's
 * error, or EBB_NOT_SERVED for the driver to allocate. */
static CUresult
serve_alloc(CUdeviceptr *dptr, size_t size, CUstream stream, int per_thread,
    enum ebb_alloc_kind kind, uint64_t *setup_ns)
{
	if (engine.conf->mode != EBB_MODE_OFFLOAD || dptr == NULL)
		return EBB_NOT_SERVED;
	uint64_t site = site_now();
	uint64_t now = ebb_now_ns();

	int mode = engine_enter();
	/* EBB_SELF_TIME: the mover's setup is timed apart */
	uint64_t setup0 = mover_on() ? 0 : self_begin();
	int init = mover_init(engine.conf);
	if (setup0 != 0) {
		*setup_ns = self_clock() - setup0;
		__atomic_fetch_add(&engine.self.setup_ns, *setup_ns, __ATOMIC_RELAXED);
	}
	if (init < 0 || !mover_on()) {
		engine_leave(mode);
		return EBB_NOT_SERVED;
	}
	struct ebb_stream *s = kind == EBB_ALLOC_ASYNC || kind == EBB_ALLOC_POOL ?
	    stream_of(stream, per_thread) : NULL;
	/* on a capturing stream: a graph memory node, which the driver serves in room made here */
	if (engine.capturing > 0 && s != NULL && streams_capturing(s)) {
		mover_room_for(size);
		engine_leave(mode);
		return EBB_NOT_SERVED;
	}
	struct ebb_buf *b = ebb_buf_new();
	if (b == NULL) {
		engine_leave(mode);
		return EBB_NOT_SERVED;
	}
	CUresult r = mover_alloc(b, size, s, dptr);
	if (r != CUDA_SUCCESS) {
		ebb_buf_put(b);
		engine_leave(mode);
		scrub_if_moved(0);
		return r == MOVER_DECLINE ? EBB_NOT_SERVED : r;
	}
	drop_range(*dptr, size, now, FREE_LOST);
	record_alloc(b, *dptr, size, s ? s : stream_of(NULL, 0), kind, site, now);
	life_alloc(b, engine.seq_counter + 1);
	engine_leave(mode);
	scrub_if_moved(0);
	return CUDA_SUCCESS;
}

CUresult
ebb_engine_alloc(CUdeviceptr *dptr, size_t size, CUstream stream, int per_thread,
    enum ebb_alloc_kind kind)
{
	uint64_t t0 = self_begin(), setup = 0;
	CUresult r = serve_alloc(dptr, size, stream, per_thread, kind, &setup);
	/* not served: ebb_engine_on_alloc counts it */
	self_end_less(SELF_ALLOC, t0, r != EBB_NOT_SERVED, setup);
	return r;
}

/* The job asks the driver about p: map its buffer again if it is away. */
void
ebb_engine_on_pointer_query(CUdeviceptr p)
{
	if (engine.conf->mode != EBB_MODE_OFFLOAD || p == 0)
		return;
	uint64_t t0 = self_begin();
	int mode = engine_enter();
	struct ebb_buf *b = buftab_find(&engine.tab, p);
	if (b != NULL)
		mover_map(b, engine.seq_counter);
	engine_leave(mode);
	scrub_if_moved(0);
	self_end(SELF_QUERY, t0, 1);
}

/* Table an allocation the driver made; one ebb cannot track (out of
 * memory) is said and left out. */
static void
table_alloc(CUdeviceptr p, size_t size, CUstream stream, int per_thread,
    enum ebb_alloc_kind kind)
{
	uint64_t site = site_now();
	uint64_t now = ebb_now_ns();

	pthread_mutex_lock(&ebb_state_lock);
	drop_range(p, size, now, FREE_LOST);
	struct ebb_buf *b = ebb_buf_new();
	if (b == NULL) {
		pthread_mutex_unlock(&ebb_state_lock);
		ebb_log(EBB_LOG_WARN, "out of memory tracking a %zu-byte allocation; it is not tracked",
		    size);
		return;
	}
	record_alloc(b, p, size, stream_of(stream, per_thread), kind, site, now);
	if (engine.conf->mode == EBB_MODE_OFFLOAD)
		mover_note_unmanaged((int64_t)size);
	pthread_mutex_unlock(&ebb_state_lock);
}

void
ebb_engine_on_alloc(CUdeviceptr p, size_t size, CUstream stream, int per_thread,
    enum ebb_alloc_kind kind)
{
	uint64_t t0 = self_begin();
	table_alloc(p, size, stream, per_thread, kind);
	self_end(SELF_ALLOC, t0, 1);
}

/* When memory freed now may be used again: after the free's stream (async),
 * or after every stream that used the buffer (cuMemFree). */
static void
free_tag(const struct ebb_buf *b, struct ebb_stream *s, int async, struct ebb_tag *t)
{
	memset(t, 0, sizeof *t);
	if (async && s != NULL) {
		t->s[0] = s;
		t->seq[0] = streams_last(s);
		t->n = 1;
		return;
	}
	if (b->streams_overflow || (b->pinned & EBB_PIN_GRAPH)) {
		t->all = 1;	/* graphs may use it on any stream */
		t->seq[0] = engine.seq_counter;
		return;
	}
	for (uint8_t i = 0; i < b->nstreams; i++) {
		t->s[i] = (struct ebb_stream *)b->last[i].stream;
		t->seq[i] = b->last[i].seq;
	}
	t->n = b->nstreams;
}

/* A free, before the driver sees it: 1 when ebb served the buffer and freed it, else 0. */
static int
note_free(CUdeviceptr p, CUstream stream, int per_thread, int async)
{
	if (p == 0)
		return 0;
	int mode = engine_enter();
	struct ebb_buf *b = buftab_remove(&engine.tab, p);
	if (b == NULL) {
		engine.stats.frees_untracked++;
		engine_leave(mode);
		return 0;
	}
	struct ebb_stream *s = stream_of(stream, per_thread);
	engine.stats.frees++;
	if (ebb_trace_on())
		ebb_trace_write_free(ebb_now_ns(), b->id, stream_hex(s),
		    free_kind_names[async ? FREE_ASYNC : FREE_SYNC]);
	int served = b->mv.managed != EBB_UNMANAGED;
	int kept = 0;
	exec_free(b, engine.seq_counter);
	if (served) {
		struct ebb_tag t;
		free_tag(b, s, async, &t);
		kept = mover_free(b, &t);
	} else if (engine.conf->mode == EBB_MODE_OFFLOAD) {
		/* in a capture, a graph's free node: the driver keeps the memory */
		mover_note_driver_free(b->size, async && engine.capturing > 0 && streams_capturing(s));
	}
	if (!kept)
		ebb_buf_put(b);
	engine_leave(mode);
	return served;
}

int
ebb_engine_on_free(CUdeviceptr p, CUstream stream, int per_thread, int async)
{
	uint64_t t0 = self_begin();
	int served = note_free(p, stream, per_thread, async);
	self_end(SELF_FREE, t0, 1);
	return served;
}

/* ---- resolving an operation's buffers ---- */

/* Make room for more buffers in the full set s. Returns 0, or -1 when out
 * of memory (s is unchanged). */
static int
set_grow(struct bufset *s)
{
	size_t cap = s->cap ? s->cap * 2 : 64;
	struct ebb_buf **v = realloc(s->v, cap * sizeof *v);

	if (v == NULL)
		return -1;
	s->v = v;
	s->cap = cap;
	pthread_once(&tl_set_once, tl_set_key_create);
	pthread_setspecific(tl_set_key, v);
	return 0;
}

/* Add the buffer holding word to the set s, once per operation. Returns
 * whether a buffer holds it. */
static inline int
resolve_addr(uint64_t word, struct bufset *s)
{
	struct ebb_buf *b = word != 0 ? buftab_find(&engine.tab, word) : NULL;

	if (b == NULL)
		return 0;
	s->words++;
	if (b->last_seq == s->seq)
		return 1;	/* already in this operation's set */
	if (s->n == s->cap && set_grow(s) < 0)
		return 1;	/* the buffer stays out of the record; nothing else depends on it yet */
	s->v[s->n++] = b;
	b->last_seq = s->seq;
	return 1;
}

/* kparam_scan's callback: resolve_addr into the set ctx. */
static void
resolve_word(uint64_t word, void *ctx)
{
	resolve_addr(word, ctx);
}

/*
 * Fill tl_set with the operation's buffers, and *xfer with the copy engine a
 * copy of the job's uses: PROF_XFER_D2H when its source is in a buffer ebb
 * tracks and its destination is not, PROF_XFER_H2D the other way round, 0
 * otherwise (device to device, unknown, not a copy). Device memory ebb does
 * not track counts as host memory here. Returns -1 if the arguments could
 * not be read.
 */
static int
resolve_op(struct ebb_op *op, const struct ebb_kinfo *k, unsigned *xfer)
{
	struct bufset *s = &tl_set;
	int r = 0;

	s->n = 0;
	s->words = 0;
	s->seq = op->seq;
	*xfer = 0;
	if (op->kind == EBB_OP_LAUNCH)
		r = kparam_scan(k, op->launch.params, op->launch.extra, engine.tab.lo, engine.tab.hi,
		    resolve_word, s);
	if (op->kind == EBB_OP_COPY) {
		int dst = resolve_addr(op->copy_dst, s), src = resolve_addr(op->copy_src, s);
		if (op->copy_sides)
			*xfer = src && !dst ? PROF_XFER_D2H : dst && !src ? PROF_XFER_H2D : 0;
	}
	for (unsigned i = 0; i < op->nptr; i++)
		resolve_addr(op->ptr[i], s);
	for (int j = 0; op->nspill > 0 && j < 2; j++)
		for (size_t i = 0; op->spill[j] != NULL && i < op->nspill; i++)
			resolve_addr(op->spill[j][i], s);
	return r;
}

/* Write the K record of a kernel the first time it is launched. */
static void
trace_kernel(struct ebb_kinfo *k)
{
	k->traced = 1;
	ebb_trace_write_kernel(k->id, k->nparams, k->layout_known ? "ok" : "unknown", k->name);
}

/* Write the record of operation op (its kernel k, its buffers s, or "?"
 * where unresolved; xfer: its copy engine, as resolve_op says), and the
 * kernel's K record first where it is the kernel's first. The caller checks
 * that the trace is on. */
static void
trace_op(const struct ebb_op *op, struct ebb_kinfo *k, int unresolved, unsigned xfer,
    const struct bufset *s)
{
	struct ebb_line l;
	uintptr_t stream = stream_hex(op->tracker);

	if (k != NULL && !k->traced)
		trace_kernel(k);
	uint64_t now = ebb_now_ns();
	int list = 0;	/* a record begun in l, its buffer list to come */
	switch (op->kind) {
	case EBB_OP_LAUNCH:
		list = ebb_trace_begin_launch(now, op->seq, stream, k ? k->id : 0, &l);
		break;
	case EBB_OP_COPY:
		list = ebb_trace_begin_copy(now, op->seq, stream, op->bytes, op->sync,
		    xfer == PROF_XFER_D2H ? "d2h" : xfer == PROF_XFER_H2D ? "h2d" : "other", &l);
		break;
	case EBB_OP_SET:
		list = ebb_trace_begin_memset(now, op->seq, stream, op->bytes, op->sync, &l);
		break;
	case EBB_OP_NCCL:
		list = ebb_trace_begin_nccl(now, op->seq, stream, ebb_nccl_op_name(op->nccl_op),
		    op->nccl_peer, op->bytes, op->nccl_rank, (uint64_t)op->nccl_nranks, &l);
		break;
	case EBB_OP_GRAPH:
		ebb_trace_write_graph(now, op->seq, stream, (uintptr_t)op->graph);
		break;
	default:
		break;
	}
	if (list) {
		if (unresolved)
			ebb_line_str(&l, "?");
		else
			ebb_line_u64(&l, s->n);
		for (size_t i = 0; i < s->n; i++)
			ebb_line_u64(&l, s->v[i]->id);
		ebb_line_end(&l);
	}
}

/* The iteration finder's token for an operation (TOK_*); k: its kernel. */
static uint32_t
op_token(const struct ebb_op *op, const struct ebb_kinfo *k)
{
	switch (op->kind) {
	case EBB_OP_LAUNCH: return TOK_LAUNCH | (k ? k->id & 0xffffff : 0);
	case EBB_OP_COPY: return TOK_COPY | op->sync;
	case EBB_OP_SET: return TOK_SET | op->sync;
	case EBB_OP_NCCL: return TOK_NCCL | op->nccl_op;
	case EBB_OP_GRAPH: return TOK_GRAPH;
	default: return 0;
	}
}

/* When this thread's operation or synchronisation entered ebb (self_begin's
 * t0; 0: outside one, or untimed). */
static _Thread_local uint64_t tl_call_t0;

/* ebb's host time in the job's calls while recording, up to now
 * (engine_int.h). */
uint64_t
engine_recorded_so_far(void)
{
	uint64_t ns = __atomic_load_n(&engine.self.recorded_ns, __ATOMIC_RELAXED);

	return tl_call_t0 != 0 ? ns + (self_clock() - tl_call_t0) : ns;
}

/* An operation is about to reach the driver (engine.h). Returns
 * CUDA_SUCCESS, or the error that restoring its buffers ended in: then the
 * operation must not reach the driver. */
static CUresult
op_begin(struct ebb_op *op)
{
	static int first_op = 1;
	struct ebb_kinfo *k = NULL;
	int attach = 0;
	CUresult err = CUDA_SUCCESS;

	int first = 0;
	int mode = engine_enter();
	if (first_op) {
		first_op = 0;
		first = 1;
		attach = engine.cupti_wanted;
	}
	op->seq = ++engine.seq_counter;
	struct ebb_stream *st = stream_of(op->stream, op->per_thread);
	op->tracker = st;
	int offload = engine.conf->mode == EBB_MODE_OFFLOAD;
	/* on its way to the driver until op_end: no marker covers it before */
	if (offload && st != NULL)
		streams_begin(st, &op->begun, op->seq);
	/* captured into a graph: what it uses must stay where it is */
	int captured = engine.capturing && st != NULL && streams_capturing(st);
	if (op->kind == EBB_OP_LAUNCH) {
		k = kparam_get(&engine.kcache, (uintptr_t)op->launch.func);
		if (k == NULL) {
			ebb_inside = 1;
			k = kparam_add(&engine.kcache, (uintptr_t)op->launch.func);
			ebb_inside = 0;
			if (k != NULL && engine.conf->iter_kernel[0] != '\0' &&
			    strstr(k->name, engine.conf->iter_kernel))
				k->iter_mark = 1;
		}
	}
	unsigned xfer = 0;
	int unresolved = (op->kind == EBB_OP_LAUNCH && k == NULL) || resolve_op(op, k, &xfer) < 0;
	struct bufset *s = &tl_set;
	/*
	 * The uses are noted first: a use not yet submitted to the driver keeps
	 * its buffer from being moved (mover_lru.c), also while restoring another
	 * buffer of this operation lets other threads in.
	 */
	for (size_t i = 0; i < s->n; i++) {
		struct ebb_buf *b = s->v[i];
		if (b->producer_seq == 0) {
			b->producer_seq = op->seq;
			b->producer_kernel = k ? k->id : 0;
		}
		if (captured) {
			b->pinned |= EBB_PIN_GRAPH;
			if (offload)
				mover_pin(b);
		}
		buftab_note_use(b, (uintptr_t)st, op->seq);
		if (offload)
			mover_touch(b);
	}
	/* the plan's recomputes: a chain launch's arguments, and what must be
	 * remade before this operation changes it */
	if (engine.conf->recompute && engine.life == LIFE_RUNNING && offload && !captured &&
	    st != NULL)
		err = exec_check_op(op->seq, st, op->kind == EBB_OP_LAUNCH ? &op->launch : NULL,
		    s->v, s->n);
	/* whatever the operation uses is on the device, ordered before it */
	if (offload && s->n > 0 && st != NULL && err == CUDA_SUCCESS)
		err = mover_ensure(s->v, s->n, st, op->seq);
	/* the probed iteration: its buffers hashed before it, on its stream */
	if (op->kind == EBB_OP_LAUNCH && engine.life == LIFE_PROBING && err == CUDA_SUCCESS &&
	    !captured && !unresolved)
		op->probed = (uint8_t)probe_before(op->seq, st, st ? streams_handle(st) : NULL, s->v,
		    s->n);
	/* the plan's first iteration: recompute candidates replayed once before it */
	if (engine.conf->recompute && engine.life == LIFE_RUNNING && err == CUDA_SUCCESS &&
	    !captured && st != NULL)
		exec_before_op(op->seq, st, op->kind == EBB_OP_LAUNCH ? &op->launch : NULL);
	engine.stats.pointer_words += s->words;
	switch (op->kind) {
	case EBB_OP_LAUNCH:
		engine.stats.launches++;
		if (unresolved)
			engine.stats.launches_unresolved++;
		else if (s->n == 0)
			engine.stats.launches_nobuf++;
		break;
	case EBB_OP_COPY: engine.stats.copies++; break;
	case EBB_OP_SET: engine.stats.memsets++; break;
	case EBB_OP_NCCL: summary_nccl(op); break;
	case EBB_OP_GRAPH: engine.stats.graph_launches++; break;
	default: break;
	}
	if (ebb_trace_on())
		trace_op(op, k, unresolved, xfer, s);
	uint32_t token = op_token(op, k);
	exec_op(op->seq, token, s->v, s->n, xfer, op->sync, st, engine_recorded_so_far());
	/* its launch record, only while the iteration is recorded */
	if (op->kind == EBB_OP_LAUNCH && engine.life == LIFE_RECORDING)
		exec_launch(op->seq, &op->launch, k, op->stream, op->per_thread, st, captured);
	int action = life_step(op->seq, token, op->sync ? ITER_SYNC_OP : ITER_NOSYNC, k);
	int timed = life_timing() && action >= 0;
	int plan_due = life_plan_due() && engine.capturing == 0;	/* its sync would end a capture */
	engine_leave(mode);
	if (attach)
		life_cupti_start();
	if (first)
		pthread_once(&exit_once, register_exit);
	life_cupti_act(action);
	if (plan_due)
		life_plan_now();
	if (offload)
		scrub_if_moved(0);
	if (err == CUDA_SUCCESS && timed && op->kind != EBB_OP_NCCL && ebb_cupti_attached()) {
		ebb_cupti_push(op->seq);
		op->timed = 1;
	}
	return err;
}

CUresult
ebb_engine_op_begin(struct ebb_op *op)
{
	uint64_t t0 = self_begin();
	tl_call_t0 = t0;
	CUresult r = op_begin(op);
	tl_call_t0 = 0;
	self_end(SELF_OP, t0, 1);
	op->issued_ns = t0 != 0 && __atomic_load_n(&engine.self.recording, __ATOMIC_RELAXED) ?
	    self_clock() : 0;
	return r;
}

/* The operation returned error: stream progress, the plan's moves after it,
 * and an X record for an error; call_ns, the driver's call while an
 * iteration is recorded (else 0), goes to the recording. */
static void
op_end(struct ebb_op *op, int error, uint64_t call_ns)
{
	int moved = 0;

	if (op->timed)
		ebb_cupti_pop();
	/* the mover's alone: observe mode takes no second lock, nor records an iteration */
	if (engine.conf->mode == EBB_MODE_OFFLOAD && (op->tracker != NULL || call_ns != 0)) {
		int mode = engine_enter();
		if (call_ns != 0)	/* the driver's call, for the job's host pace */
			exec_op_called(op->seq, call_ns);
		if (op->kind == EBB_OP_GRAPH)	/* the driver commits a graph's pool as it launches it */
			mover_sample_device();
		if (op->tracker != NULL) {
			/* before streams_after: what covers this operation covers its hashes */
			if (op->probed && error == 0 && tl_set.seq == op->seq)
				probe_after(op->seq, streams_handle(op->tracker), tl_set.v, tl_set.n);
			streams_after(op->tracker, op->seq, 1);
			if (error == 0)
				moved = exec_after_op(op->seq, op->tracker);
		}
		engine_leave(mode);
	}
	if (engine.conf->mode == EBB_MODE_OFFLOAD)
		scrub_if_moved(moved);
	if (error != 0)
		ebb_trace_write_failure(op->seq, error);
}

void
ebb_engine_op_end(struct ebb_op *op, int error)
{
	uint64_t t0 = self_begin();
	op_end(op, error, op->issued_ns != 0 && t0 > op->issued_ns ? t0 - op->issued_ns : 0);
	self_end(SELF_OP, t0, 0);
}

/* The host synchronised with a context, a stream or an event in a call made
 * at called: a Y record of that time, and an operation issued then for
 * learning and the plan (its wait is its call's time). */
static void
note_sync(enum ebb_sync_kind kind, const void *handle, int per_thread, uint64_t called)
{
	int mode = engine_enter();
	uint64_t seq = ++engine.seq_counter;
	engine.stats.syncs++;
	uintptr_t h = kind == EBB_SYNC_STREAM ? stream_hex(stream_of((CUstream)handle, per_thread))
	    : (uintptr_t)handle;
	if (ebb_trace_on())
		ebb_trace_write_sync(called, seq, sync_kind_names[kind], h);
	exec_op(seq, TOK_SYNC | (uint32_t)kind, NULL, 0, 0, 1, NULL, engine_recorded_so_far());
	exec_sync_called(seq, called);
	int action = life_step(seq, TOK_SYNC | (uint32_t)kind, ITER_SYNC, NULL);
	int moved = exec_after_op(seq, NULL);
	int plan_due = life_plan_due() && engine.capturing == 0;	/* its sync would end a capture */
	engine_leave(mode);
	if (engine.conf->mode == EBB_MODE_OFFLOAD)
		scrub_if_moved(moved);
	life_cupti_act(action);
	if (plan_due)
		life_plan_now();
}

void
ebb_engine_on_sync(enum ebb_sync_kind kind, const void *handle, int per_thread, uint64_t called)
{
	uint64_t t0 = self_begin();
	tl_call_t0 = t0;
	note_sync(kind, handle, per_thread, called);
	tl_call_t0 = 0;
	self_end(SELF_SYNC, t0, 1);
}

/* A step of a stream capture (engine.h): count the capturing streams, tell
 * the streams and the mover, and write a P record. */
void
ebb_engine_on_capture(CUstream stream, int per_thread, enum ebb_capture_phase phase,
    CUresult result)
{
	static int said;

	/* PyTorch's cudaMallocAsync backend, which ebb run chooses in offload
	 * mode, fails captures whose backward runs on two streams: say what to do */
	const char *torch_alloc = phase == EBB_CAPTURE_ENDED &&
	    result == CUDA_ERROR_STREAM_CAPTURE_UNJOINED ? getenv("PYTORCH_CUDA_ALLOC_CONF") : NULL;
	if (torch_alloc != NULL && strstr(torch_alloc, "cudaMallocAsync") != NULL)
		ebb_log_once(&said, EBB_LOG_WARN, "a stream capture failed with unjoined work, under "
		    "PYTORCH_CUDA_ALLOC_CONF=%s: PyTorch's cudaMallocAsync backend fails such captures "
		    "(a backward on two streams, torch.cuda.make_graphed_callables); run the job with "
		    "ebb run --alloc job, or PYTORCH_CUDA_ALLOC_CONF=backend:native (ebb then sees and "
		    "moves PyTorch's segments)", torch_alloc);

	pthread_mutex_lock(&ebb_state_lock);
	struct ebb_stream *st = stream_of(stream, per_thread);
	int offload = engine.conf->mode == EBB_MODE_OFFLOAD;
	int traced = phase == EBB_CAPTURE_BEGAN && result == CUDA_SUCCESS;
	switch (phase) {
	case EBB_CAPTURE_BEGIN:
		/*
		 * Counted before the driver's call, so that from now on every
		 * thread inside ebb is relaxed; a marker after the stream's work
		 * so far orders moves after it once nothing more can be
		 * recorded on the stream.
		 */
		if (offload)
			exec_capture(engine.seq_counter + 1);	/* before anything is captured */
		engine.capturing++;
		if (offload && st != NULL)
			streams_mark_now(st);
		break;
	case EBB_CAPTURE_BEGAN:
		if (result != CUDA_SUCCESS && engine.capturing > 0)
			engine.capturing--;
		else if (st != NULL)
			streams_set_stream_capturing(st, 1);
		break;
	case EBB_CAPTURE_END:	/* EBB_CAPTURE_JOIN: streams_join_capture */
		if (offload && engine.conf->capture_join && st != NULL)
			engine.stats.capture_joins += (uint64_t)streams_join_capture(st);
		break;
	case EBB_CAPTURE_ENDED:
		/* no capture ends where the stream had none, or only joined one */
		if (result == CUDA_ERROR_ILLEGAL_STATE || result == CUDA_ERROR_STREAM_CAPTURE_UNMATCHED)
			break;
		traced = 1;
		if (engine.capturing > 0)
			engine.capturing--;
		int mode = engine.capturing > 0 ? streams_relax() : -1;
		streams_capture_ended(st, engine.capturing > 0);
		streams_unrelax(mode);
		break;
	}
	if (offload)
		mover_capture(engine.capturing > 0);
	if (traced && ebb_trace_on())
		ebb_trace_write_capture(ebb_now_ns(), stream_hex(st),
		    phase == EBB_CAPTURE_BEGAN ? "begin" : "end");
	pthread_mutex_unlock(&ebb_state_lock);
}

/* NCCL registered (reg=1) or deregistered buf: a registered buffer is
 * restored if it is away and pinned where it is. */
void
ebb_engine_on_nccl_register(const void *buf, size_t size, int reg)
{
	int action = 0;

	pthread_mutex_lock(&ebb_state_lock);
	struct ebb_buf *b = buftab_find(&engine.tab, (uint64_t)(uintptr_t)buf);
	if (b != NULL && reg) {
		/* NCCL keeps the address for its own transfers: it must stay mapped */
		if (engine.conf->mode == EBB_MODE_OFFLOAD && b->mv.managed == EBB_MANAGED_BIG &&
		    b->mv.state != EBB_RESIDENT) {
			struct ebb_stream *legacy = stream_of(NULL, 0);
			uint64_t seq = ++engine.seq_counter;
			/* an operation of ebb's own: the finder still sees one token for it */
			action = life_step(seq, TOK_NCCL | 0xfff, 0, NULL);
			b->last_seq = seq;
			if (legacy != NULL && mover_ensure(&b, 1, legacy, seq) == CUDA_SUCCESS) {
				streams_after(legacy, seq, 1);
				streams_sync(legacy, seq);
			}
		}
		b->pinned |= EBB_PIN_NCCL;
		if (engine.conf->mode == EBB_MODE_OFFLOAD)
			mover_pin(b);
	} else if (b != NULL) {
		b->pinned &= (uint8_t)~EBB_PIN_NCCL;
	}
	pthread_mutex_unlock(&ebb_state_lock);
	life_cupti_act(action);
	(void)size;
}

/*
 * Finish ebb at the job's exit (engine.h): CUPTI detached, the mover's
 * workers stopped, the summary written, the trace closed, and EBB_LIMIT
 * reported where it was not held. Idempotent; nothing before
 * ebb_engine_init.
 */
void
ebb_engine_shutdown(void)
{
	struct engine_totals t;
	char unheld[1024];

	pthread_mutex_lock(&ebb_state_lock);
	if (engine.shut_down || engine.conf == NULL) {
		pthread_mutex_unlock(&ebb_state_lock);
		return;
	}
	engine.shut_down = 1;
	pthread_mutex_unlock(&ebb_state_lock);
	pthread_mutex_lock(&cupti_lock);
	if (ebb_cupti_attached() || ebb_cupti_paused())
		life_cupti_stop("exit");
	pthread_mutex_unlock(&cupti_lock);
	ebb_engine_stats(&t.st);
	pthread_mutex_lock(&ebb_state_lock);
	mover_shutdown();
	mover_stats(&t.ms);
	int limit_unheld = engine.conf->mode == EBB_MODE_OFFLOAD &&
	    mover_unheld(unheld, sizeof unheld);
	exec_stats(&t.xs);
	t.dep = engine.dep;
	vmm_stats(&t.vs);
	pthread_mutex_unlock(&ebb_state_lock);
	if (ebb_trace_on())
		summary_records(&t);
	ebb_trace_close();
	if (limit_unheld)
		summary_unheld(unheld);
	summary_lines(&t);
}

/* Fork handlers (engine.h). Before the fork: take cupti_lock, ebb_state_lock
 * and the trace's lock, in the lock order, so the child finds none held
 * mid-change. */
void
ebb_engine_atfork_prepare(void)
{
	pthread_mutex_lock(&cupti_lock);	/* (never taken with ebb_state_lock held) */
	pthread_mutex_lock(&ebb_state_lock);
	ebb_trace_atfork_prepare();
}

/* After the fork, in the parent: release what ebb_engine_atfork_prepare
 * took. */
void
ebb_engine_atfork_parent(void)
{
	ebb_trace_atfork_parent();
	pthread_mutex_unlock(&ebb_state_lock);
	pthread_mutex_unlock(&cupti_lock);
}

/* After the fork, in the child: ebb is shut down there, and the locks
 * ebb_engine_atfork_prepare took are released. */
void
ebb_engine_atfork_child(void)
{
	/* The child has no CUDA context, none of ebb's threads (the mover's
	 * workers, the planner, CUPTI's) and no trace of its own: ebb does
	 * nothing more in it, and nothing at its exit either (the atexit
	 * handler the parent registered runs in a child that calls exit). */
	engine.shut_down = 1;
	ebb_trace_atfork_child();
	life_atfork_child();
	pthread_mutex_unlock(&ebb_state_lock);
	pthread_mutex_unlock(&cupti_lock);
}
