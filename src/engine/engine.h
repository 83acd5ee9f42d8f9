/*
 * engine.h: what the hooks tell ebb, as events.
 *
 * The hooks are thin: they describe a call (an allocation, a free, or an
 * operation that touches device memory) and forward it to the driver. The
 * engine keeps the buffer table, resolves which buffers each operation
 * references, writes the trace and feeds the iteration finder and CUPTI.
 *
 * Locking: ebb_state_lock (locks.h, with every lock and thread in their
 * order) guards the buffer table, the kernel cache and the lifecycle. The
 * engine never calls the driver while holding it, except for ebb's own
 * non-blocking queries (cuKernelGetParamInfo and the like).
 */
#ifndef EBB_ENGINE_H
#define EBB_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "cuda_compat.h"
#include "launch.h"
#include "streams.h"

enum ebb_alloc_kind {
	EBB_ALLOC_SYNC = 0,	/* cuMemAlloc */
	EBB_ALLOC_PITCH,	/* cuMemAllocPitch */
	EBB_ALLOC_ASYNC,	/* cuMemAllocAsync */
	EBB_ALLOC_POOL,		/* cuMemAllocFromPoolAsync */
	EBB_ALLOC_MAP,		/* cuMemMap of the job's own physical memory */
	EBB_ALLOC_KINDS
};

enum ebb_op_kind {
	EBB_OP_LAUNCH = 0,
	EBB_OP_COPY,
	EBB_OP_SET,
	EBB_OP_GRAPH,
	EBB_OP_NCCL,
	EBB_OP_KINDS
};

enum ebb_sync_kind {
	EBB_SYNC_CTX = 0,
	EBB_SYNC_STREAM,
	EBB_SYNC_EVENT,
	EBB_SYNC_KINDS
};

/* The NCCL calls ebb sees (N records name them). */
enum ebb_nccl_op {
	EBB_NCCL_SEND = 0,
	EBB_NCCL_RECV,
	EBB_NCCL_ALLREDUCE,
	EBB_NCCL_BROADCAST,
	EBB_NCCL_REDUCE,
	EBB_NCCL_ALLGATHER,
	EBB_NCCL_REDUCESCATTER,
	EBB_NCCL_OPS
};

/* "send", "recv", "allreduce", ... */
const char *ebb_nccl_op_name(unsigned op);

/* Most addresses a copy or memset names before it uses the spill list. */
#define EBB_OP_INLINE_PTRS 4

/* One operation that touches device memory, described by its hook. */
struct ebb_op {
	enum ebb_op_kind kind;
	CUstream stream;	/* as the caller passed it */
	uint8_t per_thread;	/* reached through a _ptsz/_ptds entry */
	uint8_t sync;		/* the host waits for it (synchronous copy) */
	uint16_t nccl_op;	/* EBB_OP_NCCL: enum ebb_nccl_op */
	int nccl_peer;		/* EBB_OP_NCCL: peer or root, -1 for none */
	int nccl_rank;		/* EBB_OP_NCCL: the caller's rank in the communicator, -1
				 * where NCCL does not say */
	int nccl_nranks;	/* EBB_OP_NCCL: the communicator's ranks, 0 where unknown */
	size_t bytes;		/* copy, memset and NCCL sizes */
	/* EBB_OP_COPY: the address of each side, 0 where it is known to be
	 * host memory or an array (resolved before ptr[]); copy_sides: both
	 * are known, for the copy's direction (not for arrays or batched copies) */
	CUdeviceptr copy_dst, copy_src;
	uint8_t copy_sides;
	/* addresses to resolve: inline, then the spill arrays */
	CUdeviceptr ptr[EBB_OP_INLINE_PTRS];
	unsigned nptr;
	const CUdeviceptr *spill[2];
	size_t nspill;
	/* EBB_OP_LAUNCH: the launch, as launch.h describes it */
	struct ebb_launch launch;
	/* EBB_OP_GRAPH */
	CUgraphExec graph;
	/* filled by ebb_engine_op_begin */
	uint64_t seq;
	struct ebb_stream *tracker;	/* streams.h */
	struct streams_begun begun;	/* offload mode: on tracker's list until op_end */
	uint8_t timed;		/* a CUPTI correlation id was pushed */
	uint8_t probed;		/* its buffers were hashed before it (probe.h): again after it */
	uint64_t issued_ns;	/* while an iteration is recorded: when ebb_engine_op_begin
				 * returned (the driver's call takes from there to
				 * ebb_engine_op_end); else 0 */
};

/* Add an address the operation touches (0 is ignored). */
static inline void
ebb_op_addr(struct ebb_op *op, CUdeviceptr p)
{
	if (p != 0 && op->nptr < EBB_OP_INLINE_PTRS)
		op->ptr[op->nptr++] = p;
}

/* Set up the engine for this configuration; returns 0 or -1 (ebb is off). */
struct ebb_conf;
int ebb_engine_init(const struct ebb_conf *conf);

/* ebb_engine_alloc's answer when the driver must allocate. */
#define EBB_NOT_SERVED ((CUresult)-1)

/*
 * Serve an allocation (offload mode). Returns CUDA_SUCCESS with *dptr,
 * CUDA_ERROR_OUT_OF_MEMORY, or EBB_NOT_SERVED: then the hook calls the
 * driver and reports a success with ebb_engine_on_alloc.
 */
CUresult ebb_engine_alloc(CUdeviceptr *dptr, size_t size, CUstream stream, int per_thread,
    enum ebb_alloc_kind kind);

/* The driver allocated size bytes at p. */
void ebb_engine_on_alloc(CUdeviceptr p, size_t size, CUstream stream, int per_thread,
    enum ebb_alloc_kind kind);

/* The job asks the driver about address p (cuPointerGetAttribute and the
 * like): in offload mode, the buffer holding it is mapped again if it is on
 * the host. */
void ebb_engine_on_pointer_query(CUdeviceptr p);

/* The job unmapped [p, p + size) (cuMemUnmap): the mappings there are gone. */
void ebb_engine_on_unmap(CUdeviceptr p, size_t size);

/* Whether ebb serves allocations from pool (cuMemAllocFromPoolAsync), in
 * offload mode: the default pool of the device of the first context, while
 * no other device has been given access to it. */
int ebb_engine_pool_served(CUmemoryPool pool);

/* The job set access to pool for the locations of map[0 .. count). */
void ebb_engine_on_pool_access(CUmemoryPool pool, const CUmemAccessDesc *map, size_t count);

/*
 * A free, before the driver sees it (async: cuMemFreeAsync on stream).
 * Returns 1 when ebb served the buffer and has freed it (the driver must
 * not see it), 0 when the driver must free it.
 */
int ebb_engine_on_free(CUdeviceptr p, CUstream stream, int per_thread, int async);

/*
 * An operation is about to reach the driver. In offload mode the buffers it
 * uses are restored first; when that fails the operation must not reach
 * the driver: the hook returns the error (after ebb_engine_op_end).
 */
CUresult ebb_engine_op_begin(struct ebb_op *op);

/* The operation returned error (0: success; a CUresult, or an ncclResult_t). */
void ebb_engine_op_end(struct ebb_op *op, int error);

/* The host synchronised with a context, a stream or an event, in a call
 * made at called (ebb_now_ns) that has returned now. */
void ebb_engine_on_sync(enum ebb_sync_kind kind, const void *handle, int per_thread,
    uint64_t called);

/* The steps of a stream capture: before the driver's begin call, after it
 * (result: the driver's), before the end call, and after it (result: the
 * driver's). */
enum ebb_capture_phase { EBB_CAPTURE_BEGIN, EBB_CAPTURE_BEGAN, EBB_CAPTURE_END, EBB_CAPTURE_ENDED };
void ebb_engine_on_capture(CUstream stream, int per_thread, enum ebb_capture_phase phase,
    CUresult result);

/* NCCL registered (reg=1) or deregistered a buffer. */
void ebb_engine_on_nccl_register(const void *buf, size_t size, int reg);

/* Counters for the exit summary and the tests. */
struct ebb_engine_stats {
	uint64_t launches;
	uint64_t launches_unresolved;	/* parameter layout unknown */
	uint64_t launches_nobuf;	/* referenced no tracked buffer */
	uint64_t copies, memsets, nccl_calls, graph_launches, syncs;
	uint64_t capture_joins;	/* side streams joined at a capture's end (EBB_CAPTURE_JOIN) */
	int stage_rank, stage_nranks;	/* of the last send or receive to a rank
					 * beside the caller's (a pipeline stage
					 * marker); stage_nranks 0: none */
	uint64_t allocs, frees, frees_untracked;
	uint64_t buffers_live;
	uint64_t bytes_live, bytes_peak;
	uint64_t pointer_words;		/* parameter words that hit a buffer */
	uint64_t iterations;		/* iteration starts seen */
	uint64_t period;		/* learned period in operations, 0 if none */
	uint64_t period_last;		/* the last period learned, kept through a
					 * departure (the job's last steps, say) */
};

void ebb_engine_stats(struct ebb_engine_stats *out);

/* Flush the trace and print the summary (EBB_VERBOSE>=1). Idempotent. */
void ebb_engine_shutdown(void);

/* Fork handlers. */
void ebb_engine_atfork_prepare(void);
void ebb_engine_atfork_parent(void);
void ebb_engine_atfork_child(void);

#endif
