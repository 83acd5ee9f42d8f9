/*
 * fk.h: internals shared by the source files of the fake libcuda.so.1 (not installed, not
 * for tests: tests use fakecuda.h). Everything declared here is hidden: the library is built
 * with -fvisibility=hidden, and only what <cuda.h> and fakecuda.h declare is exported.
 *
 * Locking: one mutex, fk_lock, guards all shared state (streams and their queues, op
 * reference counts and completion, events, graphs, the memory tables, the statistics).
 * No other lock is taken while it is held. Work (kernels, copies, host functions, the fake
 * libnccl's batches) always runs with fk_lock released.
 */
#ifndef EBB_FK_H
#define EBB_FK_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#define __CUDA_API_VERSION_INTERNAL 1

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#pragma GCC visibility push(default)
#include <cuda.h>
#include <cudaTypedefs.h>
#include "fakecuda.h"
#pragma GCC visibility pop

/* ---- fk_core.c: configuration, entry checks, contexts, statistics ---- */

/* The FAKECUDA_* environment, read once at the first driver call. */
struct fk_config {
    uint64_t mem_bytes;       /* FAKECUDA_MEM_BYTES */
    unsigned kernel_delay_us; /* FAKECUDA_KERNEL_DELAY_US */
    unsigned copy_delay_us;   /* FAKECUDA_COPY_DELAY_US, or fakecuda_set_copy_delay_us's */
    unsigned launch_queue_delay_us; /* FAKECUDA_LAUNCH_QUEUE_DELAY_US */
    unsigned vmm_delay_us;    /* FAKECUDA_VMM_DELAY_US */
    unsigned query_delay_us;  /* FAKECUDA_QUERY_DELAY_US */
    int no_vmm;               /* FAKECUDA_NO_VMM */
    int verbose;              /* FAKECUDA_VERBOSE */
    uint64_t lazy_load_bytes; /* FAKECUDA_LAZY_LOAD_BYTES */
    uint64_t graph_pool_bytes; /* FAKECUDA_GRAPH_POOL_BYTES */
};
extern struct fk_config fk_cfg;

/* Statistics reported by fakecuda_stats(), under fk_lock. */
extern struct fakecuda_stats fk_stats;

/* The activity hooks (fakecuda_set_activity), both set or both NULL; read
 * with fk_activity_api() and fk_activity_kernel(). */
uint32_t fk_activity_api(void);
void fk_activity_kernel(uint32_t corr, uint64_t start, uint64_t end, uint32_t stream);

/* What an entry point needs before it may run (fk_enter). */
enum fk_need {
    FK_NEED_NONE = 0, /* nothing: cuInit, cuDriverGetVersion, cuGetErrorName, ... */
    FK_NEED_INIT = 1, /* cuInit must have succeeded */
    FK_NEED_CTX = 3   /* and the calling thread must have a current context */
};

/*
 * Common prologue of every exported driver entry point: reads the configuration once,
 * prints the call when FAKECUDA_VERBOSE is set, applies FAKECUDA_FAIL, and checks `need`.
 * func is the entry point's ELF name (__func__). Returns CUDA_SUCCESS when the call may go on,
 * else the code the entry point must return without doing anything.
 */
CUresult fk_enter(const char *func, enum fk_need need);

/* Runs fk_enter for the enclosing entry point and returns its code when it is not success. */
#define FK_ENTER(need)                                      \
    do {                                                    \
        CUresult fk_enter_rc_ = fk_enter(__func__, (need)); \
        if (fk_enter_rc_ != CUDA_SUCCESS)                   \
            return fk_enter_rc_;                            \
    } while (0)

/* The calling thread's current context, or NULL. */
CUcontext fk_ctx_current(void);

/* The primary context of device 0 (the context of the implicit streams). */
CUcontext fk_ctx_primary(void);

/* Prints "fakecuda: <message>" on stderr and aborts: misuse of the fake itself. */
_Noreturn void fk_die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* calloc that aborts on exhaustion (the fake has no recovery path for it). */
void *fk_xcalloc(size_t n, size_t size);

/* Sleeps us microseconds. */
void fk_sleep_us(unsigned us);

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t fk_now_ns(void);

/* ---- fk_procaddr.c ---- */

/* 1 if base is the base name of an entry point in the cuGetProcAddress table. */
int fk_proc_known(const char *base);

/* ---- fk_stream.c: operations, streams, workers, events ---- */

extern pthread_mutex_t fk_lock;

/* What a queued operation is. */
enum fk_op_kind {
    FK_OP_WORK,   /* runs op->run(op) on the worker, fk_lock released */
    FK_OP_MARKER, /* an event record: only stamps its completion time */
    FK_OP_WAIT,   /* blocks the stream until op->target is done */
    FK_OP_QUIT    /* ends the worker and frees the stream */
};

/*
 * One unit of stream work. Reference counted under fk_lock: the queue holds one reference,
 * a stream's `last`, events, wait operations and synchronous callers hold others. The payload
 * (payload_size bytes) is owned by the op, so a copy of the op (graphs) is a memcpy.
 */
struct fk_op {
    struct fk_op *next;          /* queue or graph link */
    enum fk_op_kind kind;
    int refs;                    /* under fk_lock */
    int done;                    /* under fk_lock; set when it ran */
    uint64_t t_ns;               /* CLOCK_MONOTONIC when it ran */
    const char *what;            /* entry point that queued it (fault reports) */
    const char *detail;          /* kernel name or NULL (fault reports) */
    unsigned delay_us;           /* sleep before run (FAKECUDA_*_DELAY_US) */
    uint32_t act_corr;           /* the activity hooks' correlation id (0: none) */
    void (*run)(struct fk_op *); /* FK_OP_WORK */
    struct fk_op *target;        /* FK_OP_WAIT: a reference */
    size_t payload_size;
    max_align_t payload[];
};

/* Allocates an op with refs 1 and a zeroed payload of payload_size bytes. */
struct fk_op *fk_op_new(enum fk_op_kind kind, const char *what, void (*run)(struct fk_op *),
                        size_t payload_size);

/* A fresh copy of a FK_OP_WORK op (refs 1, not done, unlinked). */
struct fk_op *fk_op_clone(const struct fk_op *op);

/* Drops a reference under fk_lock; frees the op at zero. */
void fk_op_unref_locked(struct fk_op *op);

/* A stream and its worker thread. */
struct fk_stream {
    struct fk_stream *next;  /* all streams whose worker runs */
    unsigned flags;          /* CU_STREAM_NON_BLOCKING or 0 */
    int implicit;            /* the legacy or a per-thread default stream (no user handle) */
    int quitting;            /* destroyed: handle no longer valid, worker finishing */
    int worker_alive;        /* 0 in a forked child until the worker is started again */
    CUcontext ctx;
    CUstream handle;         /* what callbacks and fault reports name */
    pthread_cond_t cv;       /* work queued, with fk_lock */
    struct fk_op *head, *tail;
    struct fk_op *last;      /* reference to the last op queued (event/stream queries) */
    struct fk_op *current;   /* op taken off the queue by the worker, not yet done */
    struct fk_graph *capture; /* graph being captured, or NULL */
    uint64_t capture_id;
    CUstreamCaptureMode capture_mode;
    pthread_t capture_thread;   /* the thread that began the capture */
    int capture_invalid;        /* an illegal call invalidated the capture */
    struct fk_stream *capture_origin; /* joined another stream's capture: that stream */
    uint64_t capture_ops;       /* ops this stream added to its capture */
    uint64_t capture_joined;    /* of those, how many the capture has waited for since */
};

/* fk_submit() flags. */
enum {
    FK_SUB_SYNC = 1,     /* wait until the op ran */
    FK_SUB_NOCAPTURE = 2 /* not allowed while capturing (the capture is invalidated) */
};

/*
 * Resolves a stream handle under fk_lock: NULL is the legacy stream (ptds 0) or the calling
 * thread's per-thread default stream (ptds 1); CU_STREAM_LEGACY and CU_STREAM_PER_THREAD name
 * those directly. Returns CUDA_ERROR_INVALID_CONTEXT for a default stream without a current
 * context and CUDA_ERROR_INVALID_HANDLE for anything that is not a live stream.
 */
CUresult fk_stream_find_locked(CUstream h, int ptds, struct fk_stream **out);

/*
 * Queues op on s under fk_lock with the legacy-stream ordering rules, or appends a
 * FK_OP_WORK op to the graph s captures (other kinds are dropped while capturing). Takes over
 * the caller's reference (freeing the op on error). Returns CUDA_SUCCESS,
 * CUDA_ERROR_STREAM_CAPTURE_INVALIDATED for a capture already invalidated, or
 * CUDA_ERROR_STREAM_CAPTURE_IMPLICIT for the legacy stream while a blocking stream captures
 * (that capture is invalidated), as the driver answers.
 */
CUresult fk_submit_locked(struct fk_stream *s, struct fk_op *op);

/*
 * Resolves h and submits op (taking over its reference, freeing it on error). Returns
 * the resolution error, fk_submit_locked's, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED for a
 * synchronous or FK_SUB_NOCAPTURE op on a capturing stream (invalidating the capture, see
 * fk_capture_refuse_locked), or CUDA_SUCCESS once queued (FK_SUB_SYNC: once it ran).
 */
CUresult fk_submit(CUstream h, int ptds, struct fk_op *op, unsigned flags);

/*
 * Refuses an operation that a capturing stream cannot take under fk_lock: invalidates the
 * capture and returns CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED. An operation the driver would
 * capture (capturable: stream-ordered allocation, which the fake does not capture) gets
 * CUDA_ERROR_STREAM_CAPTURE_INVALIDATED instead once the capture is invalid, as any captured
 * work does.
 */
CUresult fk_capture_refuse_locked(struct fk_stream *s, int capturable);

/*
 * The check of a "potentially unsafe" call (measured on the driver: cuMemAlloc, cuMemFree,
 * pinned host allocation and registration, stream-ordered allocation on other streams,
 * cuStreamSynchronize and cuEventQuery/Synchronize), by the calling thread's interaction mode
 * (cuThreadExchangeStreamCaptureMode): in global mode (the default), while a capture begun in
 * global mode is under way in any thread (even one already invalidated), or a global or
 * thread-local one was begun by the calling thread; in thread-local mode, only the latter; in
 * relaxed mode, never. Then it returns CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates
 * those captures; else CUDA_SUCCESS. Takes fk_lock (the _locked variant expects it held).
 */
CUresult fk_capture_unsafe(void);
CUresult fk_capture_unsafe_locked(void);

/* The list of every stream (linked by next), fk_lock held. */
struct fk_stream *fk_all_streams_locked(void);

/* Invalidates the capture s takes part in, on every stream that joined it. fk_lock held. */
void fk_capture_invalidate_locked(struct fk_stream *s);

/*
 * cuCtxSynchronize while any capture runs: invalidates every capture and returns
 * CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; else CUDA_SUCCESS. Takes fk_lock.
 */
CUresult fk_capture_ctx_sync(void);

/* Starts the legacy stream (cuInit). Returns CUDA_SUCCESS or CUDA_ERROR_OUT_OF_MEMORY. */
CUresult fk_streams_init(void);

/* Waits until every op queued so far on every stream ran (cuMemFree, cuCtxSynchronize). */
void fk_drain_device(void);

/* Installs the SIGSEGV/SIGBUS reporter and the fork handlers (once, from fk_core.c). */
void fk_streams_setup(void);

/* Starts workers again in a forked child (from fk_enter; cheap when nothing to do). */
void fk_streams_after_fork(void);

/* ---- fk_graph.c ---- */

struct fk_graph;

/* Appends a captured op to g under fk_lock (takes over the reference). */
void fk_graph_append_locked(struct fk_graph *g, struct fk_op *op);

/* Frees a graph and its ops under fk_lock. */
void fk_graph_free_locked(struct fk_graph *g);

/* ---- fk_mem.c ---- */

/* Takes n bytes of the device budget under fk_lock; returns 0, or -1 past the budget. */
int fk_budget_take_locked(uint64_t n);

/* Gives n bytes back to the device budget under fk_lock. */
void fk_budget_give_locked(uint64_t n);

/* ---- fk_vmm.c ---- */

/* Finds the VMM mapping holding p under fk_lock: 0 and its range, or -1. */
int fk_vmm_lookup_locked(uintptr_t p, uintptr_t *base, size_t *size);
/* The remembered cuMemUnmap calls over addr, with their callers' stacks, to fd. */
void fk_vmm_unmap_history(uintptr_t addr, int fd);

/* Rounds n up to a multiple of the power of two a. */
#define FK_ROUND_UP(n, a) (((n) + (a) - 1) & ~((uint64_t)(a) - 1))

/* Type tags of the handles the fake gives out (first member of each handle struct). */
enum {
    FK_TAG_CTX = 0x66637478,
    FK_TAG_EVENT = 0x66657674,
    FK_TAG_GRAPH = 0x66677270,
    FK_TAG_EXEC = 0x66657865,
    FK_TAG_MODULE = 0x666d6f64,
    FK_TAG_LIBRARY = 0x666c6962,
    FK_TAG_FUNC = 0x6666756e,
    FK_TAG_KERNEL = 0x666b726e,
    FK_TAG_POOL = 0x66706f6f,
    FK_TAG_DEAD = 0x64656164
};

#endif /* EBB_FK_H */
