/*
 * fk_stream.c: stream operations and the worker thread of each stream, the legacy and
 * per-thread default streams, events, host functions, the fault reporter and fork support.
 *
 * Ordering: each stream's worker runs its queue in order. The legacy stream is ordered
 * against the blocking streams with FK_OP_WAIT operations inserted at submission time: an
 * op for the legacy stream first waits for the last op of every blocking stream, and an op
 * for a blocking stream first waits for the last op of the legacy stream. Each wait names an
 * op submitted earlier, so waits never form a cycle.
 */
#include "fk.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

pthread_mutex_t fk_lock = PTHREAD_MUTEX_INITIALIZER;

/* Broadcast (with fk_lock) whenever an op completes. */
static pthread_cond_t done_cv = PTHREAD_COND_INITIALIZER;

static struct fk_stream *all_streams; /* under fk_lock */
static struct fk_stream *legacy;      /* set once by cuInit */

static pthread_key_t ptds_key;
static _Thread_local struct fk_stream *tls_ptds;

/* What the calling worker runs, for the fault reporter (static TLS: signal safe). */
static _Thread_local const struct fk_op *tls_op __attribute__((tls_model("initial-exec")));
static _Thread_local const struct fk_stream *tls_stream __attribute__((tls_model("initial-exec")));

static struct sigaction old_segv, old_bus;
static atomic_int respawn_needed;

/* An event: the marker op of its latest record. */
struct CUevent_st {
    uint32_t tag;
    unsigned flags;
    struct fk_op *rec;              /* reference, under fk_lock */
    struct fk_stream *cap_src;      /* recorded in a capture: by this stream, else NULL */
    struct fk_graph *cap_graph;     /* into this graph */
    uint64_t cap_ops;               /* cap_src's capture_ops at the record */
    struct CUevent_st *prev, *next; /* in all_events, under fk_lock */
};

/*
 * Every live event: the context owns them, so an event the program never destroys lives
 * until the process ends, as on the driver (and is no leak of the program's).
 */
static struct CUevent_st *all_events; /* under fk_lock */

/* Payload of a host function op (cuLaunchHostFunc, fakecuda_enqueue). */
struct host_fn {
    void (*fn)(void *);
    void *arg;
};

/* Payload of a cuStreamAddCallback op. */
struct callback {
    CUstreamCallback fn;
    CUstream stream;
    void *arg;
};

/* ---- ops ---- */

/* Allocates an op (fk.h). */
struct fk_op *fk_op_new(enum fk_op_kind kind, const char *what, void (*run)(struct fk_op *),
                        size_t payload_size)
{
    struct fk_op *op = fk_xcalloc(1, sizeof *op + payload_size);

    op->kind = kind;
    op->refs = 1;
    op->what = what;
    op->run = run;
    op->payload_size = payload_size;
    return op;
}

/* Copies a work op for a graph launch (fk.h). */
struct fk_op *fk_op_clone(const struct fk_op *op)
{
    struct fk_op *copy = fk_xcalloc(1, sizeof *op + op->payload_size);

    memcpy(copy, op, sizeof *op + op->payload_size);
    copy->next = NULL;
    copy->refs = 1;
    copy->done = 0;
    copy->t_ns = 0;
    copy->act_corr = 0; /* a graph's replay: no activity record */
    return copy;
}

/* Drops a reference (fk.h). */
void fk_op_unref_locked(struct fk_op *op)
{
    while (op && --op->refs == 0) {
        struct fk_op *target = op->target;

        free(op);
        op = target;
    }
}

/* Marks op done at the current time and wakes every waiter, under fk_lock. */
static void op_complete_locked(struct fk_op *op)
{
    op->t_ns = fk_now_ns();
    op->done = 1;
    pthread_cond_broadcast(&done_cv);
}

/* Waits under fk_lock until op is done. */
static void op_wait_locked(struct fk_op *op)
{
    while (!op->done)
        pthread_cond_wait(&done_cv, &fk_lock);
}

/* ---- workers ---- */

/* Unlinks a finished stream and frees it, under fk_lock. */
static void stream_free_locked(struct fk_stream *s)
{
    for (struct fk_stream **p = &all_streams; *p; p = &(*p)->next)
        if (*p == s) {
            *p = s->next;
            break;
        }
    if (s->last)
        fk_op_unref_locked(s->last);
    if (s->capture && !s->capture_origin)
        fk_graph_free_locked(s->capture);
    pthread_cond_destroy(&s->cv);
    free(s);
}

/* The worker of one stream: runs its ops in order until FK_OP_QUIT, then frees the stream. */
static void *worker_main(void *arg)
{
    struct fk_stream *s = arg;

    tls_stream = s;
    pthread_mutex_lock(&fk_lock);
    for (;;) {
        struct fk_op *op;

        while (!s->head)
            pthread_cond_wait(&s->cv, &fk_lock);
        op = s->head;
        s->head = op->next;
        if (!s->head)
            s->tail = NULL;
        if (op->kind == FK_OP_QUIT) {
            fk_op_unref_locked(op);
            break;
        }
        s->current = op;
        if (op->kind == FK_OP_WAIT) {
            op_wait_locked(op->target);
        } else if (op->kind == FK_OP_WORK) {
            pthread_mutex_unlock(&fk_lock);
            tls_op = op;
            if (op->delay_us)
                fk_sleep_us(op->delay_us);
            uint64_t t0 = op->act_corr ? fk_now_ns() : 0;
            op->run(op);
            if (op->act_corr)
                fk_activity_kernel(op->act_corr, t0, fk_now_ns(),
                                   (uint32_t)(uintptr_t)s->handle);
            tls_op = NULL;
            pthread_mutex_lock(&fk_lock);
        }
        s->current = NULL;
        op_complete_locked(op);
        fk_op_unref_locked(op);
    }
    stream_free_locked(s);
    pthread_mutex_unlock(&fk_lock);
    return NULL;
}

/*
 * Starts s's worker thread (detached), with every asynchronous signal blocked so that the
 * program's signals go to its own threads; returns 0 or -1.
 */
static int worker_start(struct fk_stream *s)
{
    pthread_attr_t attr;
    sigset_t all, old;
    pthread_t tid;
    int rc;

    sigfillset(&all);
    sigdelset(&all, SIGSEGV);
    sigdelset(&all, SIGBUS);
    sigdelset(&all, SIGFPE);
    sigdelset(&all, SIGILL);
    sigdelset(&all, SIGABRT);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    rc = pthread_create(&tid, &attr, worker_main, s);
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    s->worker_alive = rc == 0;
    return rc == 0 ? 0 : -1;
}

/* Makes a stream with a running worker under fk_lock; NULL when no thread can be made. */
static struct fk_stream *stream_new_locked(unsigned flags, int implicit)
{
    struct fk_stream *s = fk_xcalloc(1, sizeof *s);

    s->flags = flags;
    s->implicit = implicit;
    s->ctx = fk_ctx_current() ? fk_ctx_current() : fk_ctx_primary();
    s->handle = (CUstream)s;
    pthread_cond_init(&s->cv, NULL);
    if (worker_start(s) != 0) {
        pthread_cond_destroy(&s->cv);
        free(s);
        return NULL;
    }
    s->next = all_streams;
    all_streams = s;
    return s;
}

/* Appends op to s's queue and wakes the worker, under fk_lock. */
static void push_locked(struct fk_stream *s, struct fk_op *op)
{
    op->next = NULL;
    if (s->tail)
        s->tail->next = op;
    else
        s->head = op;
    s->tail = op;
    pthread_cond_signal(&s->cv);
}

/* Asks s's worker to finish its queue and free the stream, under fk_lock. */
static void stream_quit_locked(struct fk_stream *s)
{
    s->quitting = 1;
    push_locked(s, fk_op_new(FK_OP_QUIT, "quit", NULL, 0));
}

/* Queues a wait for `target` (if it has not run) on s, under fk_lock. */
static void push_wait_locked(struct fk_stream *s, struct fk_op *target, const char *what)
{
    struct fk_op *w;

    if (!target || target->done)
        return;
    w = fk_op_new(FK_OP_WAIT, what, NULL, 0);
    w->target = target;
    target->refs++;
    push_locked(s, w);
}

/* Queues op with the legacy-stream rules and makes it s->last, under fk_lock. */
static void enqueue_locked(struct fk_stream *s, struct fk_op *op)
{
    if (!(s->flags & CU_STREAM_NON_BLOCKING)) {
        if (s == legacy) {
            for (struct fk_stream *t = all_streams; t; t = t->next)
                if (t != s && !(t->flags & CU_STREAM_NON_BLOCKING))
                    push_wait_locked(s, t->last, "legacy stream waits for blocking streams");
        } else {
            push_wait_locked(s, legacy->last, "blocking stream waits for the legacy stream");
        }
    }
    push_locked(s, op);
    op->refs++;
    if (s->last)
        fk_op_unref_locked(s->last);
    s->last = op;
}

/*
 * Work on the legacy stream would wait for every blocking stream, which a capturing stream
 * cannot do: invalidates the captures of blocking streams, under fk_lock; 1 if there was one.
 */
static int legacy_conflict_locked(void)
{
    int found = 0;

    for (struct fk_stream *t = all_streams; t; t = t->next)
        if (t->capture && !(t->flags & CU_STREAM_NON_BLOCKING)) {
            fk_capture_invalidate_locked(t);
            found = 1;
        }
    return found;
}

/* Refuses an op on a capturing stream (fk.h). */
CUresult fk_capture_refuse_locked(struct fk_stream *s, int capturable)
{
    if (capturable && s->capture_invalid)
        return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    fk_capture_invalidate_locked(s);
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

/* Every stream, newest first (fk.h). */
struct fk_stream *fk_all_streams_locked(void)
{
    return all_streams;
}

/* Invalidates s's capture on every stream in it (fk.h). */
void fk_capture_invalidate_locked(struct fk_stream *s)
{
    struct fk_graph *g = s->capture;

    for (struct fk_stream *t = all_streams; t; t = t->next)
        if (t->capture == g)
            t->capture_invalid = 1;
}

/* The calling thread's capture interaction mode (cuThreadExchangeStreamCaptureMode). */
static __thread CUstreamCaptureMode thread_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

/*
 * Swaps the calling thread's capture interaction mode with *mode. Returns
 * CUDA_ERROR_INVALID_VALUE for a NULL pointer or an unknown mode.
 */
CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode)
{
    FK_ENTER(FK_NEED_INIT);
    if (!mode || (*mode != CU_STREAM_CAPTURE_MODE_GLOBAL &&
                  *mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
                  *mode != CU_STREAM_CAPTURE_MODE_RELAXED))
        return CUDA_ERROR_INVALID_VALUE;
    CUstreamCaptureMode old = thread_mode;
    thread_mode = *mode;
    *mode = old;
    return CUDA_SUCCESS;
}

/*
 * The check of a potentially unsafe call, fk_lock held (fk.h): a thread in
 * relaxed mode may make any; one in thread-local mode not while a capture it
 * began (not relaxed) runs; one in global mode (the default) neither, nor while
 * any thread's global capture runs.
 */
CUresult fk_capture_unsafe_locked(void)
{
    pthread_t self = pthread_self();
    CUresult rc = CUDA_SUCCESS;

    if (thread_mode == CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_SUCCESS;
    for (struct fk_stream *t = all_streams; t; t = t->next) {
        if (!t->capture || t->capture_mode == CU_STREAM_CAPTURE_MODE_RELAXED)
            continue;
        int own = pthread_equal(t->capture_thread, self);
        if (own || (thread_mode == CU_STREAM_CAPTURE_MODE_GLOBAL &&
                    t->capture_mode == CU_STREAM_CAPTURE_MODE_GLOBAL)) {
            fk_capture_invalidate_locked(t);
            rc = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        }
    }
    return rc;
}

/* The check of a potentially unsafe call (fk.h). */
CUresult fk_capture_unsafe(void)
{
    CUresult rc;

    pthread_mutex_lock(&fk_lock);
    rc = fk_capture_unsafe_locked();
    pthread_mutex_unlock(&fk_lock);
    return rc;
}

/* cuCtxSynchronize against running captures (fk.h). */
CUresult fk_capture_ctx_sync(void)
{
    CUresult rc = CUDA_SUCCESS;

    pthread_mutex_lock(&fk_lock);
    for (struct fk_stream *t = all_streams; t; t = t->next)
        if (t->capture) {
            fk_capture_invalidate_locked(t);
            rc = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        }
    pthread_mutex_unlock(&fk_lock);
    return rc;
}

/* Submits op to s (fk.h). */
CUresult fk_submit_locked(struct fk_stream *s, struct fk_op *op)
{
    if (s->capture) {
        if (s->capture_invalid) {
            fk_op_unref_locked(op);
            return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
        }
        if (op->kind == FK_OP_WORK) {
            fk_graph_append_locked(s->capture, op);
            s->capture_ops++;
        }
        else
            fk_op_unref_locked(op);
        return CUDA_SUCCESS;
    }
    if (s == legacy && legacy_conflict_locked()) {
        fk_op_unref_locked(op);
        return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    }
    enqueue_locked(s, op);
    return CUDA_SUCCESS;
}

/* Ends the calling thread's per-thread default stream when the thread exits. */
static void ptds_destructor(void *arg)
{
    struct fk_stream *s = arg;

    pthread_mutex_lock(&fk_lock);
    stream_quit_locked(s);
    pthread_mutex_unlock(&fk_lock);
}

/* Resolves a stream handle (fk.h). */
CUresult fk_stream_find_locked(CUstream h, int ptds, struct fk_stream **out)
{
    if (!h)
        h = ptds ? CU_STREAM_PER_THREAD : CU_STREAM_LEGACY;
    if (h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD) {
        if (!fk_ctx_current())
            return CUDA_ERROR_INVALID_CONTEXT;
        if (h == CU_STREAM_LEGACY) {
            *out = legacy;
            return CUDA_SUCCESS;
        }
        if (!tls_ptds) {
            tls_ptds = stream_new_locked(0, 1);
            if (!tls_ptds)
                return CUDA_ERROR_OUT_OF_MEMORY;
            tls_ptds->handle = CU_STREAM_PER_THREAD;
            pthread_setspecific(ptds_key, tls_ptds);
        }
        *out = tls_ptds;
        return CUDA_SUCCESS;
    }
    for (struct fk_stream *s = all_streams; s; s = s->next)
        if ((CUstream)s == h && !s->implicit && !s->quitting) {
            *out = s;
            return CUDA_SUCCESS;
        }
    return CUDA_ERROR_INVALID_HANDLE;
}

/* Resolves and submits (fk.h). */
CUresult fk_submit(CUstream h, int ptds, struct fk_op *op, unsigned flags)
{
    struct fk_stream *s;
    CUresult rc;

    pthread_mutex_lock(&fk_lock);
    rc = fk_stream_find_locked(h, ptds, &s);
    if (rc == CUDA_SUCCESS && s->capture && (flags & (FK_SUB_NOCAPTURE | FK_SUB_SYNC)))
        rc = fk_capture_refuse_locked(s, 0);
    if (rc != CUDA_SUCCESS) {
        fk_op_unref_locked(op);
    } else if (flags & FK_SUB_SYNC) {
        op->refs++;
        rc = fk_submit_locked(s, op);
        if (rc == CUDA_SUCCESS)
            op_wait_locked(op);
        fk_op_unref_locked(op);
    } else {
        rc = fk_submit_locked(s, op);
    }
    pthread_mutex_unlock(&fk_lock);
    return rc;
}

/* Waits for the last op of every stream queued so far (fk.h). */
void fk_drain_device(void)
{
    struct fk_op **ops;
    size_t n = 0, k = 0;

    pthread_mutex_lock(&fk_lock);
    for (struct fk_stream *s = all_streams; s; s = s->next)
        n++;
    ops = fk_xcalloc(n, sizeof *ops);
    for (struct fk_stream *s = all_streams; s; s = s->next)
        if (s->last && !s->last->done) {
            ops[k++] = s->last;
            s->last->refs++;
        }
    for (size_t i = 0; i < k; i++) {
        op_wait_locked(ops[i]);
        fk_op_unref_locked(ops[i]);
    }
    pthread_mutex_unlock(&fk_lock);
    free(ops);
}

/* Starts the legacy stream (fk.h). */
CUresult fk_streams_init(void)
{
    CUresult rc = CUDA_SUCCESS;

    pthread_mutex_lock(&fk_lock);
    legacy = stream_new_locked(0, 1);
    if (legacy)
        legacy->handle = CU_STREAM_LEGACY;
    else
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_unlock(&fk_lock);
    return rc;
}

/* ---- fault reports and fork ---- */

/* Appends s to buf at *len (async-signal-safe). */
static void put_str(char *buf, size_t *len, size_t cap, const char *s)
{
    while (*s && *len + 1 < cap)
        buf[(*len)++] = *s++;
}

/* Appends v in hexadecimal with a 0x prefix (async-signal-safe). */
static void put_hex(char *buf, size_t *len, size_t cap, uintptr_t v)
{
    char tmp[2 + 2 * sizeof v + 1];
    int i = (int)sizeof tmp - 1;

    tmp[i] = '\0';
    do {
        tmp[--i] = "0123456789abcdef"[v & 15];
        v >>= 4;
    } while (v);
    tmp[--i] = 'x';
    tmp[--i] = '0';
    put_str(buf, len, cap, tmp + i);
}

/*
 * SIGSEGV/SIGBUS handler: a fault while a worker runs an op is reported with the op and
 * the stream, then the process aborts. A fault anywhere else goes to the handler that was
 * installed before the fake's (the faulting instruction runs again under it).
 */
static void fault_handler(int sig, siginfo_t *si, void *uctx)
{
    const struct fk_op *op = tls_op;
    const struct fk_stream *s = tls_stream;
    char msg[512];
    size_t len = 0;

    (void)uctx;
    if (!op || !s) {
        sigaction(sig, sig == SIGBUS ? &old_bus : &old_segv, NULL);
        return;
    }
    put_str(msg, &len, sizeof msg, "fakecuda: fault at ");
    put_hex(msg, &len, sizeof msg, (uintptr_t)si->si_addr);
    put_str(msg, &len, sizeof msg, " while running ");
    put_str(msg, &len, sizeof msg, op->what);
    if (op->detail) {
        put_str(msg, &len, sizeof msg, " ");
        put_str(msg, &len, sizeof msg, op->detail);
    }
    put_str(msg, &len, sizeof msg, " on stream ");
    if (s->handle == CU_STREAM_LEGACY)
        put_str(msg, &len, sizeof msg, "legacy");
    else if (s->handle == CU_STREAM_PER_THREAD)
        put_str(msg, &len, sizeof msg, "per-thread");
    else
        put_hex(msg, &len, sizeof msg, (uintptr_t)s->handle);
    put_str(msg, &len, sizeof msg, sig == SIGBUS ? " (SIGBUS)\n" : "\n");
    if (write(STDERR_FILENO, msg, len) < 0)
        len = 0;
    fk_vmm_unmap_history((uintptr_t)si->si_addr, STDERR_FILENO);
    abort();
}

/* fork(): hold fk_lock across it so the child sees consistent state. */
static void fork_prepare(void)
{
    pthread_mutex_lock(&fk_lock);
}

/* fork() in the parent: release fk_lock. */
static void fork_parent(void)
{
    pthread_mutex_unlock(&fk_lock);
}

/*
 * fork() in the child: no worker survives. Condition variables are made afresh, a wait op
 * that a worker had taken goes back to the head of its queue, and a work op that a worker was
 * running counts as done. Workers start again at the child's next driver call.
 */
static void fork_child(void)
{
    pthread_cond_init(&done_cv, NULL);
    for (struct fk_stream *s = all_streams; s; s = s->next) {
        pthread_cond_init(&s->cv, NULL);
        s->worker_alive = 0;
        if (s->current && s->current->kind == FK_OP_WAIT) {
            s->current->next = s->head;
            s->head = s->current;
            if (!s->tail)
                s->tail = s->current;
        } else if (s->current) {
            op_complete_locked(s->current);
            fk_op_unref_locked(s->current);
        }
        s->current = NULL;
    }
    atomic_store(&respawn_needed, 1);
    pthread_mutex_unlock(&fk_lock);
}

/* Installs the fault reporter and the fork handlers (fk.h). */
void fk_streams_setup(void)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = fault_handler;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &old_segv);
    sigaction(SIGBUS, &sa, &old_bus);
    pthread_atfork(fork_prepare, fork_parent, fork_child);
    if (pthread_key_create(&ptds_key, ptds_destructor) != 0)
        fk_die("pthread_key_create failed");
}

/* Starts the workers again in a forked child (fk.h). */
void fk_streams_after_fork(void)
{
    if (!atomic_load(&respawn_needed))
        return;
    pthread_mutex_lock(&fk_lock);
    if (atomic_exchange(&respawn_needed, 0))
        for (struct fk_stream *s = all_streams; s; s = s->next)
            if (!s->worker_alive && worker_start(s) != 0)
                fk_die("cannot start a stream worker after fork");
    pthread_mutex_unlock(&fk_lock);
}

/* ---- streams API ---- */

/* Makes a stream with its own worker; flags 0 or CU_STREAM_NON_BLOCKING. */
static CUresult stream_create(CUstream *phStream, unsigned int flags)
{
    struct fk_stream *s;

    if (!phStream || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING))
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&fk_lock);
    s = stream_new_locked(flags, 0);
    pthread_mutex_unlock(&fk_lock);
    if (!s)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *phStream = (CUstream)s;
    return CUDA_SUCCESS;
}

/* Creates a stream (see stream_create). */
CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
    FK_ENTER(FK_NEED_CTX);
    return stream_create(phStream, Flags);
}

/* Creates a stream; the priority is accepted and has no effect. */
CUresult cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags, int priority)
{
    FK_ENTER(FK_NEED_CTX);
    (void)priority;
    return stream_create(phStream, flags);
}

/* Destroys a stream: its handle dies now, queued work still runs, then the worker ends. */
static CUresult stream_destroy(CUstream hStream)
{
    struct fk_stream *s;
    CUresult rc;

    if (!hStream || hStream == CU_STREAM_LEGACY || hStream == CU_STREAM_PER_THREAD)
        return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&fk_lock);
    rc = fk_stream_find_locked(hStream, 0, &s);
    if (rc == CUDA_SUCCESS)
        stream_quit_locked(s);
    pthread_mutex_unlock(&fk_lock);
    return rc;
}

/* cuStreamDestroy (CUDA 2.0 ABI): see stream_destroy. */
CUresult cuStreamDestroy(CUstream hStream)
{
    FK_ENTER(FK_NEED_INIT);
    return stream_destroy(hStream);
}

/* cuStreamDestroy_v2 (CUDA 4.0 ABI): see stream_destroy. */
CUresult cuStreamDestroy_v2(CUstream hStream)
{
    FK_ENTER(FK_NEED_INIT);
    return stream_destroy(hStream);
}

/* A host function op's body. */
static void host_fn_run(struct fk_op *op)
{
    struct host_fn *h = (struct host_fn *)op->payload;

    h->fn(h->arg);
}

/*
 * Waits for the stream's work. The legacy stream is a barrier: a marker queued on it waits
 * for every blocking stream too. A capturing stream cannot be synchronised, and this is a
 * potentially unsafe call while captures run (fk_capture_unsafe_locked).
 */
static CUresult stream_sync(CUstream hStream, int ptds)
{
    struct fk_stream *s;
    CUresult rc;

    pthread_mutex_lock(&fk_lock);
    rc = fk_stream_find_locked(hStream, ptds, &s);
    if (rc == CUDA_SUCCESS)
        rc = s->capture ? fk_capture_refuse_locked(s, 0) : fk_capture_unsafe_locked();
    if (rc == CUDA_SUCCESS && s == legacy && legacy_conflict_locked())
        rc = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    if (rc == CUDA_SUCCESS) {
        struct fk_op *op = s->last;

        if (s == legacy) {
            op = fk_op_new(FK_OP_MARKER, "cuStreamSynchronize", NULL, 0);
            op->refs++;
            enqueue_locked(s, op);
        } else if (op) {
            op->refs++;
        }
        if (op) {
            op_wait_locked(op);
            fk_op_unref_locked(op);
        }
    }
    pthread_mutex_unlock(&fk_lock);
    return rc;
}

/* Waits for a stream's work (legacy semantics for 0). */
CUresult cuStreamSynchronize(CUstream hStream)
{
    FK_ENTER(FK_NEED_INIT);
    return stream_sync(hStream, 0);
}

/* Waits for a stream's work (0 is the per-thread default stream). */
CUresult cuStreamSynchronize_ptsz(CUstream hStream)
{
    FK_ENTER(FK_NEED_INIT);
    return stream_sync(hStream, 1);
}

/*
 * CUDA_SUCCESS when all the stream's work ran, CUDA_ERROR_NOT_READY otherwise; a capturing
 * stream cannot be queried.
 */
static CUresult stream_query(CUstream hStream, int ptds)
{
    struct fk_stream *s;
    CUresult rc;

    pthread_mutex_lock(&fk_lock);
    rc = fk_stream_find_locked(hStream, ptds, &s);
    if (rc == CUDA_SUCCESS && s->capture)
        rc = fk_capture_refuse_locked(s, 0);
    if (rc == CUDA_SUCCESS && s->last && !s->last->done)
        rc = CUDA_ERROR_NOT_READY;
    if (rc == CUDA_SUCCESS && s == legacy)
        for (struct fk_stream *t = all_streams; t; t = t->next)
            if (!(t->flags & CU_STREAM_NON_BLOCKING) && t->last && !t->last->done)
                rc = CUDA_ERROR_NOT_READY;
    pthread_mutex_unlock(&fk_lock);
    return rc;
}

/* Queries a stream (legacy semantics for 0). */
CUresult cuStreamQuery(CUstream hStream)
{
    FK_ENTER(FK_NEED_INIT);
    return stream_query(hStream, 0);
}

/* Queries a stream (0 is the per-thread default stream). */
CUresult cuStreamQuery_ptsz(CUstream hStream)
{
    FK_ENTER(FK_NEED_INIT);
    return stream_query(hStream, 1);
}

/* 1 if e is a live event handle. */
static int event_valid(CUevent e)
{
    return e && e->tag == FK_TAG_EVENT;
}

/*
 * Makes the stream wait for the event's record current now (no-op if it ran, was never
 * recorded, or the stream is capturing: a captured graph runs in order on one stream).
 * CUDA_ERROR_STREAM_CAPTURE_INVALIDATED / _IMPLICIT as for any submission; a capturing
 * stream that would wait for uncaptured work not done yet (without CU_EVENT_WAIT_EXTERNAL)
 * gets CUDA_ERROR_STREAM_CAPTURE_ISOLATION, its capture invalidated.
 */
static CUresult stream_wait_event(CUstream hStream, CUevent hEvent, unsigned int flags, int ptds)
{
    struct fk_stream *s;
    CUresult rc;

    if (!event_valid(hEvent))
        return CUDA_ERROR_INVALID_HANDLE;
    if (flags & ~(unsigned)CU_EVENT_WAIT_EXTERNAL)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&fk_lock);
    rc = fk_stream_find_locked(hStream, ptds, &s);
    struct fk_stream *src = hEvent->cap_src;
    if (rc == CUDA_SUCCESS && src && src->capture && src->capture == hEvent->cap_graph) {
        /* an event recorded in a live capture: the waiter joins it, or, in it, has
         * waited for the recorder's work so far (the graph runs in issue order) */
        if (!s->capture) {
            struct fk_stream *o = src->capture_origin ? src->capture_origin : src;
            s->capture = src->capture;
            s->capture_origin = o;
            s->capture_id = o->capture_id;
            s->capture_mode = o->capture_mode;
            s->capture_thread = o->capture_thread;
            s->capture_invalid = o->capture_invalid;
            s->capture_ops = s->capture_joined = 0;
        } else if (s->capture != src->capture) {
            rc = CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
        }
        if (rc == CUDA_SUCCESS && hEvent->cap_ops > src->capture_joined)
            src->capture_joined = hEvent->cap_ops;
    } else if (rc == CUDA_SUCCESS && s->capture && hEvent->rec && !hEvent->rec->done &&
               !(flags & CU_EVENT_WAIT_EXTERNAL)) {
        /* a capture's dependency on uncaptured work still queued: the driver refuses it */
        fk_capture_invalidate_locked(s);
        rc = CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
    } else if (rc == CUDA_SUCCESS && hEvent->rec && !hEvent->rec->done) {
        struct fk_op *w = fk_op_new(FK_OP_WAIT, "cuStreamWaitEvent", NULL, 0);

        w->target = hEvent->rec;
        hEvent->rec->refs++;
        rc = fk_submit_locked(s, w);
    } else if (rc == CUDA_SUCCESS && s->capture && s->capture_invalid) {
        rc = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    }
    pthread_mutex_unlock(&fk_lock);
    return rc;
}

/* See stream_wait_event (legacy semantics for 0). */
CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
    FK_ENTER(FK_NEED_INIT);
    return stream_wait_event(hStream, hEvent, Flags, 0);
}

/* See stream_wait_event (0 is the per-thread default stream). */
CUresult cuStreamWaitEvent_ptsz(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
    FK_ENTER(FK_NEED_INIT);
    return stream_wait_event(hStream, hEvent, Flags, 1);
}

/* A stream callback op's body: the callback gets the stream and CUDA_SUCCESS. */
static void callback_run(struct fk_op *op)
{
    struct callback *c = (struct callback *)op->payload;

    c->fn(c->stream, CUDA_SUCCESS, c->arg);
}

/* Queues a stream callback (flags must be 0; not allowed while capturing). */
static CUresult add_callback(CUstream hStream, CUstreamCallback callback, void *userData,
                             unsigned int flags, int ptds)
{
    struct fk_op *op;
    struct callback *c;

    if (!callback || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    op = fk_op_new(FK_OP_WORK, "cuStreamAddCallback", callback_run, sizeof *c);
    c = (struct callback *)op->payload;
    c->fn = callback;
    c->stream = hStream;
    c->arg = userData;
    return fk_submit(hStream, ptds, op, FK_SUB_NOCAPTURE);
}

/* See add_callback (legacy semantics for 0). */
CUresult cuStreamAddCallback(CUstream hStream, CUstreamCallback callback, void *userData,
                             unsigned int flags)
{
    FK_ENTER(FK_NEED_INIT);
    return add_callback(hStream, callback, userData, flags, 0);
}

/* See add_callback (0 is the per-thread default stream). */
CUresult cuStreamAddCallback_ptsz(CUstream hStream, CUstreamCallback callback, void *userData,
                                  unsigned int flags)
{
    FK_ENTER(FK_NEED_INIT);
    return add_callback(hStream, callback, userData, flags, 1);
}

/* Queues fn(arg) on the stream's worker (captured while capturing). */
static CUresult launch_host_func(const char *what, CUstream hStream, void (*fn)(void *),
                                 void *arg, int ptds, unsigned flags)
{
    struct fk_op *op;
    struct host_fn *h;

    if (!fn)
        return CUDA_ERROR_INVALID_VALUE;
    op = fk_op_new(FK_OP_WORK, what, host_fn_run, sizeof *h);
    h = (struct host_fn *)op->payload;
    h->fn = fn;
    h->arg = arg;
    return fk_submit(hStream, ptds, op, flags);
}

/* See launch_host_func (legacy semantics for 0). */
CUresult cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void *userData)
{
    FK_ENTER(FK_NEED_INIT);
    return launch_host_func("cuLaunchHostFunc", hStream, fn, userData, 0, 0);
}

/* See launch_host_func (0 is the per-thread default stream). */
CUresult cuLaunchHostFunc_ptsz(CUstream hStream, CUhostFn fn, void *userData)
{
    FK_ENTER(FK_NEED_INIT);
    return launch_host_func("cuLaunchHostFunc_ptsz", hStream, fn, userData, 1, 0);
}

/* Runs fn(arg) on the stream's worker (fakecuda.h); not a driver entry point. */
CUresult fakecuda_enqueue(CUstream stream, void (*fn)(void *), void *arg)
{
    CUresult rc = fk_enter("fakecuda_enqueue", FK_NEED_INIT);

    if (rc != CUDA_SUCCESS)
        return rc;
    return launch_host_func("fakecuda_enqueue", stream, fn, arg, 0, FK_SUB_NOCAPTURE);
}

/* Gives the stream's creation flags (0 for the default streams). */
static CUresult stream_get_flags(CUstream hStream, unsigned int *flags, int ptds)
{
    struct fk_stream *s;
    CUresult rc;

    if (!flags)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&fk_lock);
    rc = fk_stream_find_locked(hStream, ptds, &s);
    if (rc == CUDA_SUCCESS)
        *flags = s->flags;
    pthread_mutex_unlock(&fk_lock);
    return rc;
}

/* See stream_get_flags (legacy semantics for 0). */
CUresult cuStreamGetFlags(CUstream hStream, unsigned int *flags)
{
    FK_ENTER(FK_NEED_INIT);
    return stream_get_flags(hStream, flags, 0);
}

/* See stream_get_flags (0 is the per-thread default stream). */
CUresult cuStreamGetFlags_ptsz(CUstream hStream, unsigned int *flags)
{
    FK_ENTER(FK_NEED_INIT);
    return stream_get_flags(hStream, flags, 1);
}

/* Gives the context the stream was made in (default streams: the current context). */
static CUresult stream_get_ctx(CUstream hStream, CUcontext *pctx, int ptds)
{
    struct fk_stream *s;
    CUresult rc;

    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&fk_lock);
    rc = fk_stream_find_locked(hStream, ptds, &s);
    if (rc == CUDA_SUCCESS)
        *pctx = s->implicit ? fk_ctx_current() : s->ctx;
    pthread_mutex_unlock(&fk_lock);
    return rc;
}

/* See stream_get_ctx (legacy semantics for 0). */
CUresult cuStreamGetCtx(CUstream hStream, CUcontext *pctx)
{
    FK_ENTER(FK_NEED_INIT);
    return stream_get_ctx(hStream, pctx, 0);
}

/* See stream_get_ctx (0 is the per-thread default stream). */
CUresult cuStreamGetCtx_ptsz(CUstream hStream, CUcontext *pctx)
{
    FK_ENTER(FK_NEED_INIT);
    return stream_get_ctx(hStream, pctx, 1);
}

/* See stream_get_ctx; there are no green contexts, *pGreenCtx is NULL. */
CUresult cuStreamGetCtx_v2(CUstream hStream, CUcontext *pCtx, CUgreenCtx *pGreenCtx)
{
    FK_ENTER(FK_NEED_INIT);
    if (pGreenCtx)
        *pGreenCtx = NULL;
    return stream_get_ctx(hStream, pCtx, 0);
}

/* See cuStreamGetCtx_v2 (0 is the per-thread default stream). */
CUresult cuStreamGetCtx_v2_ptsz(CUstream hStream, CUcontext *pCtx, CUgreenCtx *pGreenCtx)
{
    FK_ENTER(FK_NEED_INIT);
    if (pGreenCtx)
        *pGreenCtx = NULL;
    return stream_get_ctx(hStream, pCtx, 1);
}

/* ---- events ---- */

/* Creates an event (flags: CU_EVENT_BLOCKING_SYNC, DISABLE_TIMING, INTERPROCESS). */
CUresult cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
    struct CUevent_st *e;

    FK_ENTER(FK_NEED_CTX);
    if (!phEvent || (Flags & ~(unsigned)(CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING |
                                         CU_EVENT_INTERPROCESS)))
        return CUDA_ERROR_INVALID_VALUE;
    e = fk_xcalloc(1, sizeof *e);
    e->tag = FK_TAG_EVENT;
    e->flags = Flags;
    pthread_mutex_lock(&fk_lock);
    e->next = all_events;
    if (all_events)
        all_events->prev = e;
    all_events = e;
    pthread_mutex_unlock(&fk_lock);
    *phEvent = e;
    return CUDA_SUCCESS;
}

/* Destroys an event (a pending record still runs). */
static CUresult event_destroy(CUevent hEvent)
{
    if (!event_valid(hEvent))
        return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&fk_lock);
    if (hEvent->rec)
        fk_op_unref_locked(hEvent->rec);
    hEvent->tag = FK_TAG_DEAD;
    if (hEvent->prev)
        hEvent->prev->next = hEvent->next;
    else
        all_events = hEvent->next;
    if (hEvent->next)
        hEvent->next->prev = hEvent->prev;
    pthread_mutex_unlock(&fk_lock);
    free(hEvent);
    return CUDA_SUCCESS;
}

/* cuEventDestroy (CUDA 2.0 ABI): see event_destroy. */
CUresult cuEventDestroy(CUevent hEvent)
{
    FK_ENTER(FK_NEED_INIT);
    return event_destroy(hEvent);
}

/* cuEventDestroy_v2 (CUDA 4.0 ABI): see event_destroy. */
CUresult cuEventDestroy_v2(CUevent hEvent)
{
    FK_ENTER(FK_NEED_INIT);
    return event_destroy(hEvent);
}

/*
 * Queues a marker on the stream and makes it the event's record (accepted and ignored while
 * capturing). CUDA_ERROR_STREAM_CAPTURE_INVALIDATED / _IMPLICIT as for any submission.
 */
static CUresult event_record(CUevent hEvent, CUstream hStream, unsigned flags, int ptds)
{
    struct fk_stream *s;
    CUresult rc;

    if (!event_valid(hEvent))
        return CUDA_ERROR_INVALID_HANDLE;
    if (flags & ~(unsigned)CU_EVENT_RECORD_EXTERNAL)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&fk_lock);
    fk_stats.event_record_calls++;
    rc = fk_stream_find_locked(hStream, ptds, &s);
    if (rc == CUDA_SUCCESS) {
        struct fk_op *op = fk_op_new(FK_OP_MARKER, "cuEventRecord", NULL, 0);

        op->refs++;
        rc = fk_submit_locked(s, op);
        if (rc == CUDA_SUCCESS && !s->capture) {
            if (hEvent->rec)
                fk_op_unref_locked(hEvent->rec);
            hEvent->rec = op;
            hEvent->cap_src = NULL;
        } else {
            fk_op_unref_locked(op);
            if (rc == CUDA_SUCCESS) {
                hEvent->cap_src = s;
                hEvent->cap_graph = s->capture;
                hEvent->cap_ops = s->capture_ops;
            }
        }
    }
    pthread_mutex_unlock(&fk_lock);
    return rc;
}

/* See event_record (legacy semantics for 0). */
CUresult cuEventRecord(CUevent hEvent, CUstream hStream)
{
    FK_ENTER(FK_NEED_INIT);
    return event_record(hEvent, hStream, 0, 0);
}

/* See event_record (0 is the per-thread default stream). */
CUresult cuEventRecord_ptsz(CUevent hEvent, CUstream hStream)
{
    FK_ENTER(FK_NEED_INIT);
    return event_record(hEvent, hStream, 0, 1);
}

/* See event_record (legacy semantics for 0). */
CUresult cuEventRecordWithFlags(CUevent hEvent, CUstream hStream, unsigned int flags)
{
    FK_ENTER(FK_NEED_INIT);
    return event_record(hEvent, hStream, flags, 0);
}

/* See event_record (0 is the per-thread default stream). */
CUresult cuEventRecordWithFlags_ptsz(CUevent hEvent, CUstream hStream, unsigned int flags)
{
    FK_ENTER(FK_NEED_INIT);
    return event_record(hEvent, hStream, flags, 1);
}

/*
 * Waits until the event's latest record ran (at once if never recorded); a potentially
 * unsafe call while captures run.
 */
CUresult cuEventSynchronize(CUevent hEvent)
{
    struct fk_op *op;
    CUresult rc;

    FK_ENTER(FK_NEED_INIT);
    if (!event_valid(hEvent))
        return CUDA_ERROR_INVALID_HANDLE;
    rc = fk_capture_unsafe();
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&fk_lock);
    op = hEvent->rec;
    if (op) {
        op->refs++;
        op_wait_locked(op);
        fk_op_unref_locked(op);
    }
    pthread_mutex_unlock(&fk_lock);
    return CUDA_SUCCESS;
}

/*
 * CUDA_SUCCESS when the latest record ran (or none was made), else CUDA_ERROR_NOT_READY; a
 * potentially unsafe call while captures run.
 */
CUresult cuEventQuery(CUevent hEvent)
{
    CUresult rc;

    FK_ENTER(FK_NEED_INIT);
    if (!event_valid(hEvent))
        return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&fk_lock);
    fk_stats.event_query_calls++;
    rc = fk_capture_unsafe_locked();
    if (rc == CUDA_SUCCESS)
        rc = hEvent->rec && !hEvent->rec->done ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS;
    pthread_mutex_unlock(&fk_lock);
    return rc;
}

/*
 * Milliseconds between the runs of two records. CUDA_ERROR_INVALID_HANDLE for events never
 * recorded or made with CU_EVENT_DISABLE_TIMING, CUDA_ERROR_NOT_READY if one has not run.
 */
static CUresult event_elapsed(float *ms, CUevent start, CUevent end)
{
    CUresult rc = CUDA_SUCCESS;

    if (!ms)
        return CUDA_ERROR_INVALID_VALUE;
    if (!event_valid(start) || !event_valid(end) ||
        ((start->flags | end->flags) & CU_EVENT_DISABLE_TIMING))
        return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&fk_lock);
    if (!start->rec || !end->rec)
        rc = CUDA_ERROR_INVALID_HANDLE;
    else if (!start->rec->done || !end->rec->done)
        rc = CUDA_ERROR_NOT_READY;
    else
        *ms = (float)(((double)end->rec->t_ns - (double)start->rec->t_ns) / 1e6);
    pthread_mutex_unlock(&fk_lock);
    return rc;
}

/* cuEventElapsedTime (CUDA 2.0 ABI): see event_elapsed. */
CUresult cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
    FK_ENTER(FK_NEED_INIT);
    return event_elapsed(pMilliseconds, hStart, hEnd);
}

/* cuEventElapsedTime_v2 (CUDA 12.8 ABI): see event_elapsed. */
CUresult cuEventElapsedTime_v2(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
    FK_ENTER(FK_NEED_INIT);
    return event_elapsed(pMilliseconds, hStart, hEnd);
}
