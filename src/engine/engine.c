/*
 * engine.c: turns the hooks' events into the buffer table, the trace, the
 * iteration finder's input and CUPTI's correlation ids.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buftab.h"
#include "callsite.h"
#include "conf.h"
#include "ebb.h"
#include "engine.h"
#include "exec.h"
#include "real.h"
#include "iter.h"
#include "kparam.h"
#include "log.h"
#include "mover.h"
#include "plan.h"
#include "streams.h"
#include "trace.h"
#include "trace_format.h"
#include "tracer.h"
#include "vmm.h"

/* Tokens for the iteration finder: kind in the top bits, detail below. */
#define TOK_LAUNCH (1u << 28)
#define TOK_COPY (2u << 28)
#define TOK_SET (3u << 28)
#define TOK_NCCL (4u << 28)
#define TOK_GRAPH (5u << 28)
#define TOK_SYNC (6u << 28)

enum learn_state {
	LEARN_SEARCH,	/* looking for the iteration, CUPTI attached */
	LEARN_FOUND,	/* iteration known, timing the first ones */
	LEARN_DONE,	/* learned; following the iteration */
	LEARN_GAVE_UP	/* no iteration found */
};

/*
 * Everything below is guarded by engine_lock, except the atomics.
 * Lock order: engine_lock, then the trace writer's lock.
 */
static pthread_mutex_t engine_lock = PTHREAD_MUTEX_INITIALIZER;
static const struct ebb_conf *conf;
static struct buftab tab;
static struct kparam_cache kcache;
static struct iter_finder finder;
static int finder_ok;
static enum learn_state learn;
static uint64_t seq_counter;
static uint64_t alloc_counter;
static uint64_t iter_count;		/* I records written */
static uint64_t last_iter_seq;		/* seq of the last I record */
static uint64_t iters_timed;		/* whole iterations seen since the period was found */
static uint64_t mark_period_start;	/* EBB_ITER_KERNEL: seq of the last mark */
static int capturing;			/* streams in capture now */
static struct ebb_engine_stats stats;
static struct ebb_buf *free_bufs;	/* recycled ebb_buf structs, through free_next */
static int cupti_wanted;		/* EBB_CUPTI and not given up */
/* What learning wants of CUPTI (cupti_wanted: whether it is attached at
 * all), decided under engine_lock; cupti_act makes CUPTI so under
 * cupti_lock, so that decisions taken by several threads in a row end in
 * the last one's whatever order their calls run in. */
enum { CUPTI_GOAL_RECORD, CUPTI_GOAL_PAUSED, CUPTI_GOAL_OFF };
static atomic_int cupti_goal;
static pthread_mutex_t cupti_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t cupti_hold_until;	/* CUPTI paused since learning ended: finalised at
					 * this operation if no departure comes first */
static uint64_t created_at_learned;	/* handles the mover had created when learning ended */
static int shut_down;

/* Per-thread list of the distinct buffers of the operation being resolved. */
struct bufset {
	struct ebb_buf **v;
	size_t n, cap;
	uint64_t seq;
	uint64_t words;
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

static struct ebb_buf *
buf_new(void)
{
	struct ebb_buf *b = free_bufs;

	if (b != NULL) {
		free_bufs = b->free_next;
		memset(b, 0, sizeof *b);
		return b;
	}
	return calloc(1, sizeof *b);
}

static void buf_put(struct ebb_buf *b);

static void
buf_put(struct ebb_buf *b)
{
	b->free_next = free_bufs;
	free_bufs = b;
}

/* ---- CUPTI ---- */

/* GPU times from CUPTI: straight into the trace. */
static void
gpu_times(uint64_t seq, uint64_t start, uint64_t end, void *ctx)
{
	struct ebb_line l;

	(void)ctx;
	exec_gpu_time(seq, start, end);
	if (!ebb_trace_on())
		return;
	ebb_line_begin(&l, 'G');
	ebb_line_u64(&l, seq);
	ebb_line_u64(&l, start);
	ebb_line_u64(&l, end);
	ebb_line_end(&l);
}

/* Attach CUPTI; called without engine_lock (CUPTI may call back). */
static void
cupti_start(void)
{
	ebb_inside = 1;
	int r = ebb_cupti_attach(conf->cupti_lib, gpu_times, NULL);
	ebb_inside = 0;
	if (r < 0) {
		pthread_mutex_lock(&engine_lock);
		cupti_wanted = 0;
		pthread_mutex_unlock(&engine_lock);
		return;
	}
	ebb_trace_note("cupti", ebb_cupti_path());
	ebb_trace_note_u64("cupti-clock", ebb_cupti_timestamp());
}

/* Detach CUPTI; called without engine_lock (the flush calls gpu_times). */
static void
cupti_stop(const char *why)
{
	ebb_inside = 1;
	uint64_t n = ebb_cupti_detach();
	ebb_inside = 0;
	uint64_t direct, nested, stamped, others;
	ebb_cupti_match_stats(&direct, &nested, &stamped, &others);
	ebb_trace_note("cupti-detached", why);
	ebb_trace_note_u64("cupti-timed", n);
	ebb_trace_note_u64("cupti-timed-direct", direct);
	ebb_trace_note_u64("cupti-timed-nested", nested);
	ebb_trace_note_u64("cupti-timed-stamped", stamped);
	ebb_trace_note_u64("cupti-activities-of-others", others);
}

/* Pause CUPTI when learning ends; called without engine_lock. */
static void
cupti_pause(void)
{
	ebb_inside = 1;
	uint64_t n = ebb_cupti_pause();
	ebb_inside = 0;
	ebb_trace_note("cupti-paused", "learned");
	ebb_trace_note_u64("cupti-timed", n);
}

/* Record again at a departure after learning; called without engine_lock. */
static void
cupti_resume(void)
{
	ebb_inside = 1;
	int r = ebb_cupti_resume();
	ebb_inside = 0;
	if (r == 0)
		ebb_trace_note("cupti-resumed", "departure");
}

/* ---- initialisation ---- */

/*
 * The summary, the trace's end and the mover's workers are finished by an
 * exit handler registered at the job's first operation, after CUPTI is
 * attached: exit handlers run last registered first, so it runs before
 * CUPTI's and libcudart's own (registered when they started), while the
 * context exists. The library destructor, which runs after all of them,
 * only finishes a process that made no operation. CUPTI called from there
 * crashed at the exit of every job that had it attached.
 */
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;

static void
register_exit(void)
{
	atexit(ebb_engine_shutdown);
}

int
ebb_engine_init(const struct ebb_conf *c)
{
	conf = c;
	buftab_init(&tab);
	kparam_init(&kcache);
	learn = LEARN_SEARCH;
	if (c->iter_kernel[0] == '\0') {
		finder_ok = iter_init(&finder, (size_t)c->learn_launches, 2) == 0;
		if (!finder_ok)
			ebb_log(EBB_LOG_WARN, "no memory for the iteration finder (EBB_LEARN_LAUNCHES=%llu); "
			    "iterations are not detected", (unsigned long long)c->learn_launches);
	}
	cupti_wanted = c->cupti;
	exec_init(c, &tab);
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
 * them (FREE_UNMAP). Caller holds engine_lock. */
static void
drop_range(CUdeviceptr p, size_t size, uint64_t now, int kind)
{
	struct ebb_buf *old;
	struct ebb_line l;

	while ((old = buftab_overlap(&tab, p, size ? size : 1)) != NULL) {
		buftab_remove(&tab, old->addr);
		if (kind == FREE_LOST)
			stats.frees_untracked++;
		else
			stats.frees++;
		if (ebb_trace_on()) {
			ebb_line_begin(&l, 'F');
			ebb_line_u64(&l, now);
			ebb_line_u64(&l, old->id);
			ebb_line_hex(&l, stream_hex((struct ebb_stream *)old->stream));
			ebb_line_str(&l, free_kind_names[kind]);
			ebb_line_end(&l);
		}
		exec_free(old, seq_counter);
		if (old->mv.managed == EBB_UNMANAGED && conf->mode == EBB_MODE_OFFLOAD)
			mover_note_unmanaged(-(int64_t)old->size);
		buf_put(old);
	}
}

/* The pool ebb serves (ebb_engine_pool_served), found once, at the first
 * question (every allocation from a pool asks). */
static pthread_once_t pool_once = PTHREAD_ONCE_INIT;
static struct {
	CUmemoryPool pool;	/* the device's default pool, NULL if none */
	CUdevice dev;
	atomic_int shared;	/* another device was given access: not served */
} served_pool;

static void
find_served_pool(void)
{
	CUdevice d;
	CUmemoryPool p;

	if (ebb_real.cuCtxGetDevice != NULL && ebb_real.cuDeviceGetDefaultMemPool != NULL &&
	    ebb_real.cuCtxGetDevice(&d) == CUDA_SUCCESS &&
	    ebb_real.cuDeviceGetDefaultMemPool(&p, d) == CUDA_SUCCESS) {
		served_pool.pool = p;
		served_pool.dev = d;
	}
}

int
ebb_engine_pool_served(CUmemoryPool pool)
{
	if (conf->mode != EBB_MODE_OFFLOAD || pool == NULL)
		return 0;
	pthread_once(&pool_once, find_served_pool);
	return pool == served_pool.pool && !atomic_load_explicit(&served_pool.shared,
	    memory_order_relaxed);
}

void
ebb_engine_on_pool_access(CUmemoryPool pool, const CUmemAccessDesc *map, size_t count)
{
	if (conf->mode != EBB_MODE_OFFLOAD || map == NULL || !ebb_engine_pool_served(pool))
		return;
	for (size_t i = 0; i < count; i++) {
		if (map[i].location.type == CU_MEM_LOCATION_TYPE_DEVICE &&
		    map[i].location.id == (int)served_pool.dev)
			continue;
		if (map[i].flags == CU_MEM_ACCESS_FLAGS_PROT_NONE)
			continue;
		atomic_store(&served_pool.shared, 1);
		/* ebb's memory is mapped for its own device alone */
		ebb_log(EBB_LOG_WARN, "the job gives another location (type %d, id %d) access to the "
		    "default memory pool of device %d: ebb leaves allocations from it to the driver "
		    "from now on, and they do not move", (int)map[i].location.type,
		    map[i].location.id, (int)served_pool.dev);
		return;
	}
}

void
ebb_engine_on_unmap(CUdeviceptr p, size_t size)
{
	uint64_t now = ebb_now_ns();

	pthread_mutex_lock(&engine_lock);
	drop_range(p, size, now, FREE_UNMAP);
	pthread_mutex_unlock(&engine_lock);
}

/* Fill in and table a new buffer; caller holds engine_lock. */
static void
record_alloc(struct ebb_buf *b, CUdeviceptr p, size_t size, struct ebb_stream *s,
    enum ebb_alloc_kind kind, uint64_t site, uint64_t now)
{
	struct ebb_line l;

	b->addr = p;
	b->size = size;
	b->id = ++alloc_counter;
	b->site = site;
	b->stream = (uintptr_t)s;
	b->alloc_ns = now;
	b->alloc_seq = seq_counter;
	b->kind = (uint8_t)kind;
	if (capturing)
		b->pinned |= EBB_PIN_CAPTURE;
	/* Work queued on its stream before the allocation may still use the
	 * memory (stream-ordered reuse): count that as a use, so nothing moves
	 * or releases it before that work is done. */
	if (s != NULL && (kind == EBB_ALLOC_ASYNC || kind == EBB_ALLOC_POOL) && streams_last(s) > 0) {
		b->last[0].stream = (uintptr_t)s;
		b->last[0].seq = streams_last(s);
		b->nstreams = 1;
	}
	buftab_insert(&tab, b);
	stats.allocs++;
	if (tab.bytes > stats.bytes_peak)
		stats.bytes_peak = tab.bytes;
	if (ebb_trace_on()) {
		ebb_line_begin(&l, 'A');
		ebb_line_u64(&l, now);
		ebb_line_u64(&l, b->id);
		ebb_line_hex(&l, p);
		ebb_line_u64(&l, size);
		ebb_line_hex(&l, stream_hex(s));
		ebb_line_str(&l, alloc_kind_names[kind]);
		ebb_line_hex(&l, site);
		ebb_line_end(&l);
	}
}

/* The call-site fingerprint serves learning; unwinding costs about 2 us an
 * allocation in a Python job, so it is taken only while learning. */
static uint64_t
site_now(void)
{
	enum learn_state state = __atomic_load_n(&learn, __ATOMIC_RELAXED);

	return state == LEARN_SEARCH || state == LEARN_FOUND ?
	    ebb_callsite((unsigned)conf->site_depth) : 0;
}

/* Give a buffer struct back (the mover calls it for those it kept). */
static void
recycle_buf(struct ebb_buf *b)
{
	buf_put(b);
}

/*
 * Clear the stack below the caller's frame, where ebb's moves have just run.
 * A launch's parameters are read as 8-byte words (kparam.c), and a parameter
 * struct with room it does not fill carries whatever the job's stack held
 * there: torch's cat passes 64 input slots and sets a few, and a cuBLAS GEMM
 * that does not read C (beta zero) passes a C pointer all the same. After a
 * move, that was the moved buffer's address (the driver's frames under the
 * copy and the mapping hold it), and the next such launch read as a use of
 * it: on W2 four cat launches an iteration each waited 13 to 14 ms for a copy
 * back that the plan had issued for a later operation. Every hook that moved
 * a buffer (the plan's moves, a restore on use, an eviction for room) clears
 * 16 KiB, the driver's frames included, on its way out: about 0.5 us.
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
 * Take the engine's mutex; while a capture runs (or is about to begin), the
 * calling thread is also made relaxed for ebb's own driver calls. Returns
 * the mode engine_leave gives back.
 */
static int
engine_enter(void)
{
	pthread_mutex_lock(&engine_lock);
	return capturing > 0 ? streams_relax() : -1;
}

/* Undo engine_enter. */
static void
engine_leave(int mode)
{
	streams_unrelax(mode);
	pthread_mutex_unlock(&engine_lock);
}

CUresult
ebb_engine_alloc(CUdeviceptr *dptr, size_t size, CUstream stream, int per_thread,
    enum ebb_alloc_kind kind)
{
	if (conf->mode != EBB_MODE_OFFLOAD || dptr == NULL)
		return EBB_NOT_SERVED;
	uint64_t site = site_now();
	uint64_t now = ebb_now_ns();

	int mode = engine_enter();
	if (mover_init(conf, &engine_lock, recycle_buf) < 0 || !mover_on()) {
		engine_leave(mode);
		return EBB_NOT_SERVED;
	}
	struct ebb_stream *s = kind == EBB_ALLOC_ASYNC || kind == EBB_ALLOC_POOL ?
	    stream_of(stream, per_thread) : NULL;
	/* stream-ordered on a capturing stream: the graph's own memory node */
	if (capturing > 0 && s != NULL && streams_capturing(s)) {
		engine_leave(mode);
		return EBB_NOT_SERVED;
	}
	struct ebb_buf *b = buf_new();
	if (b == NULL) {
		engine_leave(mode);
		return EBB_NOT_SERVED;
	}
	CUresult r = mover_alloc(b, size, s, dptr);
	if (r != CUDA_SUCCESS) {
		buf_put(b);
		engine_leave(mode);
		scrub_if_moved(0);
		return r == MOVER_DECLINE ? EBB_NOT_SERVED : r;
	}
	drop_range(*dptr, size, now, FREE_LOST);
	record_alloc(b, *dptr, size, s ? s : stream_of(NULL, 0), kind, site, now);
	exec_alloc(b, seq_counter + 1);
	engine_leave(mode);
	scrub_if_moved(0);
	return CUDA_SUCCESS;
}

void
ebb_engine_on_pointer_query(CUdeviceptr p)
{
	if (conf->mode != EBB_MODE_OFFLOAD || p == 0)
		return;
	int mode = engine_enter();
	struct ebb_buf *b = buftab_find(&tab, p);
	if (b != NULL)
		mover_map(b, seq_counter);
	engine_leave(mode);
	scrub_if_moved(0);
}

void
ebb_engine_on_alloc(CUdeviceptr p, size_t size, CUstream stream, int per_thread,
    enum ebb_alloc_kind kind)
{
	uint64_t site = site_now();
	uint64_t now = ebb_now_ns();

	pthread_mutex_lock(&engine_lock);
	drop_range(p, size, now, FREE_LOST);
	struct ebb_buf *b = buf_new();
	if (b == NULL) {
		pthread_mutex_unlock(&engine_lock);
		ebb_log(EBB_LOG_WARN, "out of memory tracking a %zu-byte allocation; it is not tracked",
		    size);
		return;
	}
	record_alloc(b, p, size, stream_of(stream, per_thread), kind, site, now);
	if (conf->mode == EBB_MODE_OFFLOAD)
		mover_note_unmanaged((int64_t)size);
	pthread_mutex_unlock(&engine_lock);
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
		t->seq[0] = seq_counter;
		return;
	}
	for (uint8_t i = 0; i < b->nstreams; i++) {
		t->s[i] = (struct ebb_stream *)b->last[i].stream;
		t->seq[i] = b->last[i].seq;
	}
	t->n = b->nstreams;
}

int
ebb_engine_on_free(CUdeviceptr p, CUstream stream, int per_thread, int async)
{
	struct ebb_line l;

	if (p == 0)
		return 0;
	int mode = engine_enter();
	struct ebb_buf *b = buftab_remove(&tab, p);
	if (b == NULL) {
		stats.frees_untracked++;
		engine_leave(mode);
		return 0;
	}
	struct ebb_stream *s = stream_of(stream, per_thread);
	stats.frees++;
	if (ebb_trace_on()) {
		ebb_line_begin(&l, 'F');
		ebb_line_u64(&l, ebb_now_ns());
		ebb_line_u64(&l, b->id);
		ebb_line_hex(&l, stream_hex(s));
		ebb_line_str(&l, free_kind_names[async ? FREE_ASYNC : FREE_SYNC]);
		ebb_line_end(&l);
	}
	int served = b->mv.managed != EBB_UNMANAGED;
	int kept = 0;
	exec_free(b, seq_counter);
	if (served) {
		struct ebb_tag t;
		free_tag(b, s, async, &t);
		kept = mover_free(b, &t);
	} else if (conf->mode == EBB_MODE_OFFLOAD) {
		mover_note_unmanaged(-(int64_t)b->size);
	}
	if (!kept)
		buf_put(b);
	engine_leave(mode);
	return served;
}

/* ---- resolving an operation's buffers ---- */

/* Add the buffer holding word to the set s, once per operation. Returns
 * whether a buffer holds it. */
static int
resolve_addr(uint64_t word, struct bufset *s)
{
	struct ebb_buf *b = word != 0 ? buftab_find(&tab, word) : NULL;

	if (b == NULL)
		return 0;
	s->words++;
	if (b->last_seq == s->seq)
		return 1;	/* already in this operation's set */
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 64;
		struct ebb_buf **v = realloc(s->v, cap * sizeof *v);
		if (v == NULL)
			return 1;	/* the buffer stays out of the record; nothing else depends on it yet */
		s->v = v;
		s->cap = cap;
		pthread_once(&tl_set_once, tl_set_key_create);
		pthread_setspecific(tl_set_key, v);
	}
	s->v[s->n++] = b;
	b->last_seq = s->seq;
	return 1;
}

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
		r = kparam_scan(k, op->params, op->extra, resolve_word, s);
	if (op->kind == EBB_OP_COPY) {
		int dst = resolve_addr(op->copy_dst, s), src = resolve_addr(op->copy_src, s);
		if (op->copy_sides)
			*xfer = src && !dst ? PROF_XFER_D2H : dst && !src ? PROF_XFER_H2D : 0;
	}
	for (unsigned i = 0; i < op->nptr; i++)
		resolve_word(op->ptr[i], s);
	for (int j = 0; j < 2; j++)
		for (size_t i = 0; op->spill[j] != NULL && i < op->nspill; i++)
			resolve_word(op->spill[j][i], s);
	return r;
}

/* Write the K record of a kernel the first time it is launched. */
static void
trace_kernel(struct ebb_kinfo *k)
{
	struct ebb_line l;

	k->traced = 1;
	ebb_line_begin(&l, 'K');
	ebb_line_u64(&l, k->id);
	ebb_line_u64(&l, k->nparams);
	ebb_line_str(&l, k->layout_known ? "ok" : "unknown");
	ebb_line_str(&l, k->name);
	ebb_line_end(&l);
}

static void
trace_iteration(uint64_t seq, uint64_t period)
{
	struct ebb_line l;

	iter_count++;
	last_iter_seq = seq;
	stats.iterations = iter_count;
	if (conf->mode == EBB_MODE_OFFLOAD)
		mover_sample_device();
	if (!ebb_trace_on())
		return;
	ebb_line_begin(&l, 'I');
	ebb_line_u64(&l, ebb_now_ns());
	ebb_line_u64(&l, iter_count);
	ebb_line_u64(&l, seq);
	ebb_line_u64(&l, period);
	ebb_line_end(&l);
}

/* What CUPTI should do after an operation (learn_step, cupti_act); below
 * zero, no more timing now. */
enum {
	CUPTI_KEEP = 0,
	CUPTI_RESUME = 1,	/* departed after learning: record again */
	CUPTI_PAUSE = -1,	/* learned: stop recording, held for a departure */
	CUPTI_DETACH = -2	/* gave up, learned in observe mode, or held EBB_LEARN_LAUNCHES
				 * operations in vain */
};

/* Learning just ended: remember how many handles the mover had made, so the
 * summary can tell the steady state's own, and say what CUPTI does now
 * (CUPTI_*, below): in offload mode it is paused, to record again at a
 * departure (the iteration is planned again, with GPU times); in observe
 * mode nothing more is timed, and it is finalised, since even paused it
 * slows every launch (a launch-bound CNN by a tenth). Caller holds
 * engine_lock. */
static int
learned(uint64_t seq)
{
	struct mover_stats ms;

	mover_stats(&ms);
	created_at_learned = ms.handles_created;
	ebb_trace_note_u64("learned", seq);
	if (conf->mode != EBB_MODE_OFFLOAD) {
		atomic_store(&cupti_goal, CUPTI_GOAL_OFF);
		return CUPTI_DETACH;
	}
	cupti_hold_until = seq + conf->learn_launches;
	atomic_store(&cupti_goal, CUPTI_GOAL_PAUSED);
	return CUPTI_PAUSE;
}

/*
 * Whether the period found is the iteration, as far as CUPTI is concerned.
 * One without an explicit synchronisation, where the job synchronises at
 * all, is a part of the iteration (a micro-batch, found before the first
 * optimizer step), and the job will depart from it: CUPTI stays for the
 * whole iteration's plan, unless EBB_LEARN_LAUNCHES operations pass
 * without a departure (a job that never synchronises), or the finder took
 * it for the iteration after ITER_NOSYNC_REPS repetitions (JAX).
 */
static int
period_confirmed(void)
{
	return finder.synced || finder.nosync_accepted ||
	    finder.total - finder.found_total >= conf->learn_launches;
}


/*
 * Feed the finder with the operation seq's token. Returns what CUPTI
 * should do now (CUPTI_*: it is attached once, at the first operation;
 * paused when learning ends; recording again at a departure, so that the
 * iteration learned again, say the whole one after a micro-batch taken for
 * it, is planned with GPU times; finalised once EBB_LEARN_LAUNCHES
 * operations have passed after learning without one). Caller holds
 * engine_lock.
 */
static int
learn_step(uint64_t seq, uint32_t token, int sync, const struct ebb_kinfo *k)
{
	int cupti_action = CUPTI_KEEP;

	if (cupti_hold_until != 0 && seq >= cupti_hold_until && learn == LEARN_DONE) {
		cupti_hold_until = 0;
		atomic_store(&cupti_goal, CUPTI_GOAL_OFF);
		return CUPTI_DETACH;
	}
	if (conf->iter_kernel[0] != '\0') {
		if (k == NULL || !k->iter_mark)
			return 0;
		uint64_t period = mark_period_start ? seq - mark_period_start : 0;
		mark_period_start = seq;
		stats.period = period;
		trace_iteration(seq, period);
		if (period > 0) {
			exec_found(period);
			exec_boundary(seq + 1, period);
		}
		if (learn != LEARN_DONE && iter_count > conf->learn_iters && exec_learned()) {
			learn = LEARN_DONE;
			cupti_action = learned(seq);
		}
		return cupti_action;
	}
	if (!finder_ok || learn == LEARN_GAVE_UP)
		return 0;
	enum iter_event e = iter_push(&finder, token, sync, tab.bytes);
	switch (e) {
	case ITER_NONE:
		break;
	case ITER_FOUND: {
		uint64_t p = iter_period(&finder);
		stats.period = p;
		/* Token i (from 0) is operation i + 1. */
		for (uint64_t i = 0; i <= finder.found_complete; i++) {
			uint64_t s = finder.found_first + 1 + i * p;
			if (s <= seq && s > last_iter_seq)
				trace_iteration(s, p);
		}
		iters_timed = finder.found_complete;
		learn = LEARN_FOUND;
		exec_found(p);
		ebb_log(EBB_LOG_INFO, "iteration found: %llu operations", (unsigned long long)p);
		break;
	}
	case ITER_START:
		trace_iteration(seq, iter_period(&finder));
		iters_timed++;
		break;
	case ITER_DEPARTED: {
		struct ebb_line l;
		if (ebb_trace_on()) {
			ebb_line_begin(&l, 'D');
			ebb_line_u64(&l, ebb_now_ns());
			ebb_line_u64(&l, seq);
			ebb_line_u64(&l, stats.period);
			ebb_line_hex(&l, token);
			ebb_line_end(&l);
		}
		ebb_log(EBB_LOG_INFO, "operation %llu departs from the learned iteration; learning again",
		    (unsigned long long)seq);
		stats.period = 0;
		learn = LEARN_SEARCH;
		exec_departed(seq, "another operation than the learned iteration's");
		if (atomic_load(&cupti_goal) == CUPTI_GOAL_PAUSED) {
			atomic_store(&cupti_goal, CUPTI_GOAL_RECORD);
			cupti_action = CUPTI_RESUME;
		}
		break;
	}
	case ITER_GAVE_UP:
		ebb_log(EBB_LOG_WARN, "no repeating iteration found in %llu operations "
		    "(EBB_LEARN_LAUNCHES); set EBB_ITER_KERNEL to the name of the kernel that starts "
		    "an iteration", (unsigned long long)conf->learn_launches);
		learn = LEARN_GAVE_UP;
		atomic_store(&cupti_goal, CUPTI_GOAL_OFF);
		cupti_action = CUPTI_DETACH;
		break;
	}
	/* the next token starts an iteration */
	if (finder.period != 0 && finder.pos == 0)
		exec_boundary(seq + 1, finder.period);
	if (learn == LEARN_FOUND && iters_timed >= conf->learn_iters && period_confirmed() &&
	    exec_learned()) {
		learn = LEARN_DONE;
		cupti_action = learned(seq);
	}
	return cupti_action;
}

/* After a learn_step that changed cupti_goal, with engine_lock released:
 * make CUPTI what the goal now is (paused, recording or finalised), and put
 * the learning iterations' records on disk. */
static void
cupti_act(int action)
{
	if (action == CUPTI_KEEP)
		return;
	pthread_mutex_lock(&cupti_lock);
	switch (atomic_load(&cupti_goal)) {
	case CUPTI_GOAL_PAUSED:
		if (ebb_cupti_attached())
			cupti_pause();
		break;
	case CUPTI_GOAL_RECORD:
		if (ebb_cupti_paused())
			cupti_resume();
		break;
	default:
		if (ebb_cupti_attached() || ebb_cupti_paused())
			cupti_stop(learn == LEARN_GAVE_UP ? "gave-up" : "learned");
		break;
	}
	pthread_mutex_unlock(&cupti_lock);
	if (action != CUPTI_RESUME)
		ebb_trace_flush();
}

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

static const char op_letter[EBB_OP_KINDS] = { 'L', 'C', 'M', 'R', 'N' };

/* The thread a plan is made on (plan_now). */
static void *
planner_main(void *arg)
{
	(void)arg;
	ebb_inside = 1;		/* nothing this thread calls is the job's */
	exec_plan_now(&engine_lock);
	return NULL;
}

/* Plan the recorded iteration, with CUPTI's times for it (CUPTI stays
 * attached until the plan has run two whole iterations: a plan that departs
 * at once, say of a micro-batch taken for the iteration, is learned again
 * with GPU times). Called without engine_lock. */
static void
plan_now(void)
{
	if (ebb_cupti_attached()) {
		/* every activity of the recorded iteration has finished (once a plan) */
		ebb_inside = 1;
		ebb_real.cuCtxSynchronize();
		ebb_cupti_flush();
		ebb_inside = 0;
	}
	/*
	 * The plan is made on a thread of its own: planning a large iteration
	 * takes seconds of CPU (tens of them for W1 under its bound), which
	 * the job's thread would otherwise wait out. The job goes on under the mover
	 * meanwhile; the plan starts at the first iteration start after it is
	 * made. Signals stay with the job's threads.
	 */
	pthread_attr_t a;
	pthread_t t;
	sigset_t all, old;
	int r = pthread_attr_init(&a);
	if (r == 0) {
		pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		r = pthread_create(&t, &a, planner_main, NULL);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		pthread_attr_destroy(&a);
	}
	if (r != 0)
		exec_plan_now(&engine_lock);	/* no thread: plan here */
}

CUresult
ebb_engine_op_begin(struct ebb_op *op)
{
	static int first_op = 1;
	struct ebb_kinfo *k = NULL;
	struct ebb_line l;
	int attach = 0;
	CUresult err = CUDA_SUCCESS;

	int first = 0;
	int mode = engine_enter();
	if (first_op) {
		first_op = 0;
		first = 1;
		attach = cupti_wanted;
	}
	op->seq = ++seq_counter;
	struct ebb_stream *st = stream_of(op->stream, op->per_thread);
	op->tracker = st;
	uintptr_t stream = stream_hex(st);
	int offload = conf->mode == EBB_MODE_OFFLOAD;
	/* captured into a graph: what it uses must stay where it is */
	int captured = capturing && st != NULL && streams_capturing(st);
	if (op->kind == EBB_OP_LAUNCH) {
		k = kparam_get(&kcache, (uintptr_t)op->func);
		if (k == NULL) {
			ebb_inside = 1;
			k = kparam_add(&kcache, (uintptr_t)op->func);
			ebb_inside = 0;
			if (k != NULL && conf->iter_kernel[0] != '\0' && strstr(k->name, conf->iter_kernel))
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
	/* invariant 1: whatever the operation uses is on the device, ordered before it */
	if (offload && s->n > 0 && st != NULL)
		err = mover_ensure(s->v, s->n, st, op->seq);
	stats.pointer_words += s->words;
	switch (op->kind) {
	case EBB_OP_LAUNCH:
		stats.launches++;
		if (unresolved)
			stats.launches_unresolved++;
		else if (s->n == 0)
			stats.launches_nobuf++;
		break;
	case EBB_OP_COPY: stats.copies++; break;
	case EBB_OP_SET: stats.memsets++; break;
	case EBB_OP_NCCL: stats.nccl_calls++; break;
	case EBB_OP_GRAPH: stats.graph_launches++; break;
	default: break;
	}
	if (ebb_trace_on()) {
		if (k != NULL && !k->traced)
			trace_kernel(k);
		ebb_line_begin(&l, op_letter[op->kind]);
		ebb_line_u64(&l, ebb_now_ns());
		ebb_line_u64(&l, op->seq);
		ebb_line_hex(&l, stream);
		switch (op->kind) {
		case EBB_OP_LAUNCH:
			ebb_line_u64(&l, k ? k->id : 0);
			break;
		case EBB_OP_COPY:
			ebb_line_u64(&l, op->bytes);
			ebb_line_u64(&l, op->sync);
			ebb_line_str(&l, xfer == PROF_XFER_D2H ? "d2h" : xfer == PROF_XFER_H2D ? "h2d" :
			    "other");
			break;
		case EBB_OP_SET:
			ebb_line_u64(&l, op->bytes);
			ebb_line_u64(&l, op->sync);
			break;
		case EBB_OP_NCCL:
			ebb_line_str(&l, ebb_nccl_op_name(op->nccl_op));
			ebb_line_i64(&l, op->nccl_peer);
			ebb_line_u64(&l, op->bytes);
			break;
		case EBB_OP_GRAPH:
			ebb_line_hex(&l, (uintptr_t)op->graph);
			break;
		default:
			break;
		}
		if (op->kind != EBB_OP_GRAPH) {
			if (unresolved)
				ebb_line_str(&l, "?");
			else
				ebb_line_u64(&l, s->n);
			for (size_t i = 0; i < s->n; i++)
				ebb_line_u64(&l, s->v[i]->id);
		}
		ebb_line_end(&l);
	}
	uint32_t token = op_token(op, k);
	exec_op(op->seq, token, s->v, s->n, xfer, op->sync);
	int action = learn_step(op->seq, token, op->sync ? ITER_SYNC_OP : ITER_NOSYNC, k);
	int timed = (learn == LEARN_SEARCH || learn == LEARN_FOUND) && action >= 0;
	int plan_due = exec_plan_due();
	engine_leave(mode);
	if (attach)
		cupti_start();
	if (first)
		pthread_once(&exit_once, register_exit);
	cupti_act(action);
	if (plan_due)
		plan_now();
	if (offload)
		scrub_if_moved(0);
	if (err == CUDA_SUCCESS && timed && op->kind != EBB_OP_NCCL && ebb_cupti_attached()) {
		ebb_cupti_push(op->seq);
		op->timed = 1;
	}
	return err;
}

void
ebb_engine_op_end(struct ebb_op *op, int error)
{
	struct ebb_line l;
	int moved = 0;

	if (op->timed)
		ebb_cupti_pop();
	/* stream progress matters to the mover only: observe mode takes no second lock */
	if (conf->mode == EBB_MODE_OFFLOAD && op->tracker != NULL) {
		int mode = engine_enter();
		streams_after(op->tracker, op->seq, 1);
		if (error == 0)
			moved = exec_after_op(op->seq, op->tracker);
		engine_leave(mode);
	}
	if (conf->mode == EBB_MODE_OFFLOAD)
		scrub_if_moved(moved);
	if (error != 0 && ebb_trace_on()) {
		ebb_line_begin(&l, 'X');
		ebb_line_u64(&l, op->seq);
		ebb_line_i64(&l, error);
		ebb_line_end(&l);
	}
}

void
ebb_engine_on_sync(enum ebb_sync_kind kind, const void *handle, int per_thread)
{
	struct ebb_line l;

	int mode = engine_enter();
	uint64_t seq = ++seq_counter;
	stats.syncs++;
	uintptr_t h = kind == EBB_SYNC_STREAM ? stream_hex(stream_of((CUstream)handle, per_thread))
	    : (uintptr_t)handle;
	if (ebb_trace_on()) {
		ebb_line_begin(&l, 'Y');
		ebb_line_u64(&l, ebb_now_ns());
		ebb_line_u64(&l, seq);
		ebb_line_str(&l, sync_kind_names[kind]);
		ebb_line_hex(&l, h);
		ebb_line_end(&l);
	}
	exec_op(seq, TOK_SYNC | (uint32_t)kind, NULL, 0, 0, 1);
	int action = learn_step(seq, TOK_SYNC | (uint32_t)kind, ITER_SYNC, NULL);
	int moved = exec_after_op(seq, NULL);
	int plan_due = exec_plan_due();
	engine_leave(mode);
	if (conf->mode == EBB_MODE_OFFLOAD)
		scrub_if_moved(moved);
	cupti_act(action);
	if (plan_due)
		plan_now();
}

void
ebb_engine_on_capture(CUstream stream, int per_thread, enum ebb_capture_phase phase,
    CUresult result)
{
	struct ebb_line l;
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

	pthread_mutex_lock(&engine_lock);
	struct ebb_stream *st = stream_of(stream, per_thread);
	int offload = conf->mode == EBB_MODE_OFFLOAD;
	switch (phase) {
	case EBB_CAPTURE_BEGIN:
		/*
		 * Counted before the driver's call, so that from now on every
		 * thread inside ebb is relaxed; a marker after the stream's work
		 * so far orders moves after it once nothing more can be
		 * recorded on the stream.
		 */
		capturing++;
		if (offload && st != NULL)
			streams_mark_now(st);
		break;
	case EBB_CAPTURE_BEGAN:
		if (result != CUDA_SUCCESS && capturing > 0)
			capturing--;
		else if (st != NULL)
			streams_set_stream_capturing(st, 1);
		break;
	case EBB_CAPTURE_ENDED:
		if (capturing > 0)
			capturing--;
		if (st != NULL)
			streams_set_stream_capturing(st, 0);
		int mode = capturing > 0 ? streams_relax() : -1;
		streams_capture_ended(capturing > 0);
		streams_unrelax(mode);
		break;
	}
	if (offload)
		mover_capture(capturing > 0);
	if (phase != EBB_CAPTURE_BEGIN && (phase == EBB_CAPTURE_ENDED || result == CUDA_SUCCESS) &&
	    ebb_trace_on()) {
		ebb_line_begin(&l, 'P');
		ebb_line_u64(&l, ebb_now_ns());
		ebb_line_hex(&l, stream_hex(st));
		ebb_line_str(&l, phase == EBB_CAPTURE_BEGAN ? "begin" : "end");
		ebb_line_end(&l);
	}
	pthread_mutex_unlock(&engine_lock);
}

void
ebb_engine_on_nccl_register(const void *buf, size_t size, int reg)
{
	int action = 0;

	pthread_mutex_lock(&engine_lock);
	struct ebb_buf *b = buftab_find(&tab, (uint64_t)(uintptr_t)buf);
	if (b != NULL && reg) {
		/* NCCL keeps the address for its own transfers: it must stay mapped */
		if (conf->mode == EBB_MODE_OFFLOAD && b->mv.managed == EBB_MANAGED_BIG &&
		    b->mv.state != EBB_RESIDENT) {
			struct ebb_stream *legacy = stream_of(NULL, 0);
			uint64_t seq = ++seq_counter;
			/* an operation of ebb's own: the finder still sees one token for it */
			action = learn_step(seq, TOK_NCCL | 0xfff, 0, NULL);
			b->last_seq = seq;
			if (legacy != NULL && mover_ensure(&b, 1, legacy, seq) == CUDA_SUCCESS) {
				streams_after(legacy, seq, 1);
				streams_sync(legacy, seq);
			}
		}
		b->pinned |= EBB_PIN_NCCL;
		if (conf->mode == EBB_MODE_OFFLOAD)
			mover_pin(b);
	} else if (b != NULL) {
		b->pinned &= (uint8_t)~EBB_PIN_NCCL;
	}
	pthread_mutex_unlock(&engine_lock);
	cupti_act(action);
	(void)size;
}

void
ebb_engine_stats(struct ebb_engine_stats *out)
{
	pthread_mutex_lock(&engine_lock);
	*out = stats;
	out->buffers_live = tab.count;
	out->bytes_live = tab.bytes;
	pthread_mutex_unlock(&engine_lock);
}

/* Human-readable bytes for the summary. */
static const char *
human(uint64_t b, char *buf, size_t len)
{
	if (b >= (1ULL << 30))
		snprintf(buf, len, "%.1f GiB", (double)b / (double)(1ULL << 30));
	else if (b >= (1ULL << 20))
		snprintf(buf, len, "%.1f MiB", (double)b / (double)(1ULL << 20));
	else
		snprintf(buf, len, "%llu bytes", (unsigned long long)b);
	return buf;
}

static void
summary_record(const char *key, uint64_t v)
{
	struct ebb_line l;

	ebb_line_begin(&l, 'Z');
	ebb_line_u64(&l, ebb_now_ns());
	ebb_line_str(&l, key);
	ebb_line_u64(&l, v);
	ebb_line_end(&l);
}

/*
 * Tell ebb run (EBB_STATUS_DIR) that EBB_LIMIT was not held here: one file
 * named by the process id, holding the reason; ebb run then exits with a
 * status of its own where the job's was 0.
 */
static void
report_unheld(const char *why)
{
	char path[EBB_CONF_PATH_MAX + 32];

	if (conf->status_dir[0] == '\0')
		return;
	snprintf(path, sizeof path, "%s/%d", conf->status_dir, (int)getpid());
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		ebb_log(EBB_LOG_WARN, "cannot write %s (EBB_STATUS_DIR): %s", path, strerror(errno));
		return;
	}
	size_t n = strlen(why);
	if (write(fd, why, n) != (ssize_t)n || write(fd, "\n", 1) != 1)
		ebb_log(EBB_LOG_WARN, "cannot write %s (EBB_STATUS_DIR): %s", path, strerror(errno));
	close(fd);
}

void
ebb_engine_shutdown(void)
{
	struct ebb_engine_stats st;
	char peak[32];

	pthread_mutex_lock(&engine_lock);
	if (shut_down || conf == NULL) {
		pthread_mutex_unlock(&engine_lock);
		return;
	}
	shut_down = 1;
	pthread_mutex_unlock(&engine_lock);
	pthread_mutex_lock(&cupti_lock);
	if (ebb_cupti_attached() || ebb_cupti_paused())
		cupti_stop("exit");
	pthread_mutex_unlock(&cupti_lock);
	ebb_engine_stats(&st);
	struct mover_stats ms;
	struct exec_stats xs;
	char unheld[512];
	pthread_mutex_lock(&engine_lock);
	mover_shutdown();
	mover_stats(&ms);
	int limit_unheld = conf->mode == EBB_MODE_OFFLOAD && mover_unheld(unheld, sizeof unheld);
	exec_stats(&xs);
	struct vmm_stats vs;
	vmm_stats(&vs);
	pthread_mutex_unlock(&engine_lock);
	if (ebb_trace_on()) {
		summary_record("launches", st.launches);
		summary_record("launches-unresolved", st.launches_unresolved);
		summary_record("launches-without-buffer", st.launches_nobuf);
		summary_record("copies", st.copies);
		summary_record("memsets", st.memsets);
		summary_record("nccl-calls", st.nccl_calls);
		summary_record("graph-launches", st.graph_launches);
		summary_record("allocations", st.allocs);
		summary_record("frees", st.frees);
		summary_record("frees-untracked", st.frees_untracked);
		summary_record("peak-bytes", st.bytes_peak);
		summary_record("iterations", st.iterations);
		summary_record("period", st.period);
		if (conf->mode == EBB_MODE_OFFLOAD) {
			summary_record("offloads", ms.offloads);
			summary_record("restores", ms.restores);
			summary_record("restores-cancelled", ms.cancels);
			summary_record("bytes-to-host", ms.bytes_d2h);
			summary_record("bytes-to-device", ms.bytes_h2d);
			summary_record("stall-ns", ms.stall_ns);
			summary_record("refusals", ms.refusals);
			summary_record("copies-abandoned", ms.copies_abandoned);
			summary_record("unmaps-failed", ms.unmaps_failed);
			summary_record("over-limit-allocations", ms.over_limit);
			summary_record("held-peak-bytes", ms.held_peak);
			summary_record("device-beyond-held-bytes", ms.beyond_held);
			summary_record("host-pinned-bytes", ms.host_pinned);
			summary_record("handles-created", ms.handles_created);
			summary_record("handles-created-after-learning",
			    learn == LEARN_DONE ? ms.handles_created - created_at_learned : 0);
			summary_record("plans", xs.plans);
			summary_record("plan-iterations", xs.iterations_run);
			summary_record("plan-departures", xs.departures);
			summary_record("plan-actions-missed", xs.actions_missed);
			summary_record("planned-offloads", ms.planned_offloads);
			summary_record("prefetches", ms.prefetches);
			summary_record("prefetches-skipped", ms.prefetches_skipped);
			summary_record("prefetches-early", ms.prefetches_early);
			summary_record("host-wait-room-ns", ms.wait_room_ns);
			summary_record("host-wait-gate-ns", ms.wait_gate_ns);
			summary_record("host-wait-landing-ns", ms.wait_landing_ns);
			static const char *const vmm_names[VMM_NCALLS] = {
				[VMM_CREATE] = "create", [VMM_RELEASE] = "release",
				[VMM_RESERVE] = "reserve", [VMM_MAP] = "map", [VMM_UNMAP] = "unmap",
			};
			for (int c = 0; c < VMM_NCALLS; c++) {
				char key[32];
				snprintf(key, sizeof key, "vmm-%s-calls", vmm_names[c]);
				summary_record(key, vs.calls[c]);
				snprintf(key, sizeof key, "vmm-%s-ns", vmm_names[c]);
				summary_record(key, vs.ns[c]);
			}
		}
	}
	ebb_trace_close();
	if (limit_unheld) {
		ebb_log(EBB_LOG_ERROR, "EBB_LIMIT was not held in this process: %s", unheld);
		report_unheld(unheld);
	}
	ebb_log(EBB_LOG_NOTE, "%llu launches (%llu unresolved, %llu without a tracked buffer), "
	    "%llu copies, %llu memsets, %llu NCCL calls; %llu buffers allocated, %llu live, "
	    "peak %s tracked; %llu iterations of %llu operations",
	    (unsigned long long)st.launches, (unsigned long long)st.launches_unresolved,
	    (unsigned long long)st.launches_nobuf, (unsigned long long)st.copies,
	    (unsigned long long)st.memsets, (unsigned long long)st.nccl_calls,
	    (unsigned long long)st.allocs, (unsigned long long)st.buffers_live,
	    human(st.bytes_peak, peak, sizeof peak), (unsigned long long)st.iterations,
	    (unsigned long long)st.period);
	if (conf->mode == EBB_MODE_OFFLOAD) {
		char d2h_s[32], h2d_s[32], held_s[32], host_s[32];
		ebb_log(EBB_LOG_NOTE, "offload: %llu buffers to the host (%s), %llu back (%s; %llu "
		    "cancelled), stalls %.3f s over %llu restores, %llu refusals; peak held %s, %s "
		    "pinned on the host (in %.3f s); %llu handles created, %llu of them after learning",
		    (unsigned long long)ms.offloads,
		    human(ms.bytes_d2h, d2h_s, sizeof d2h_s), (unsigned long long)ms.restores,
		    human(ms.bytes_h2d, h2d_s, sizeof h2d_s), (unsigned long long)ms.cancels,
		    (double)ms.stall_ns / 1e9, (unsigned long long)ms.stalls_measured,
		    (unsigned long long)ms.refusals, human(ms.held_peak, held_s, sizeof held_s),
		    human(ms.host_pinned, host_s, sizeof host_s), (double)ms.host_pin_ns / 1e9,
		    (unsigned long long)ms.handles_created, (unsigned long long)(learn == LEARN_DONE ?
		    ms.handles_created - created_at_learned : 0));
		if (exec_enabled() || xs.plans > 0)
			ebb_log(EBB_LOG_NOTE, "plan: %llu made, %llu iterations run by it, %llu departures; "
			    "%llu offloads and %llu restores ahead of use by the plan (%llu restores skipped "
			    "for want of room), %llu restores on use; predicted peak %s, %.3f s an iteration; "
			    "the host waited %.3f s for room, %.3f s for the device to near a restore, %.3f s "
			    "for offloads to land",
			    (unsigned long long)xs.plans, (unsigned long long)xs.iterations_run,
			    (unsigned long long)xs.departures, (unsigned long long)ms.planned_offloads,
			    (unsigned long long)ms.prefetches, (unsigned long long)ms.prefetches_skipped,
			    (unsigned long long)(ms.restores - ms.prefetches),
			    human(xs.planned_peak, held_s, sizeof held_s), (double)xs.predicted_step_ns / 1e9,
			    (double)ms.wait_room_ns / 1e9, (double)ms.wait_gate_ns / 1e9,
			    (double)ms.wait_landing_ns / 1e9);
	}
}

void
ebb_engine_atfork_prepare(void)
{
	pthread_mutex_lock(&cupti_lock);	/* (never taken with engine_lock held) */
	pthread_mutex_lock(&engine_lock);
	ebb_trace_atfork_prepare();
}

void
ebb_engine_atfork_parent(void)
{
	ebb_trace_atfork_parent();
	pthread_mutex_unlock(&engine_lock);
	pthread_mutex_unlock(&cupti_lock);
}

void
ebb_engine_atfork_child(void)
{
	/* The child has no CUDA context, none of ebb's threads (the mover's
	 * workers, the planner, CUPTI's) and no trace of its own: ebb does
	 * nothing more in it, and nothing at its exit either (the atexit
	 * handler the parent registered runs in a child that calls exit). */
	shut_down = 1;
	ebb_trace_atfork_child();
	exec_atfork_child();
	pthread_mutex_unlock(&engine_lock);
	pthread_mutex_unlock(&cupti_lock);
}
