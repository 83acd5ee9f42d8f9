/*
 * hooks.c: the interposed CUDA driver entry points.
 *
 * Each wrapper makes sure ebb is initialised, describes the call to the
 * engine and forwards it to the driver through ebb_real, returning the
 * driver's result unchanged. The copy and memset wrappers are
 * generated from syms.def; the rest are written out below.
 */
#include "config.h"

#include <pthread.h>
#include <stdlib.h>

#include "ebb.h"
#include "engine.h"
#include "interpose.h"
#include "trace.h"

/*
 * Start of every wrapper: initialise, and go straight to the driver when
 * ebb is off or the call comes from ebb itself.
 */
#define HOOK_PROLOGUE(elf, args)					\
	int on_ = ebb_hooks_on();					\
	if (ebb_real.elf == NULL)					\
		return CUDA_ERROR_NOT_FOUND;				\
	if (!on_)							\
		return ebb_real.elf args

/* Thread-local scratch for the batched copies' operand addresses. */
static _Thread_local CUdeviceptr *batch_scratch;
static _Thread_local size_t batch_cap;

/* Address of one side of a 2D/3D copy, or 0 when that side is not device memory. */
static CUdeviceptr
copy_side(CUmemorytype type, CUdeviceptr dev, size_t x, size_t y, size_t z, size_t pitch,
    size_t height)
{
	if (type != CU_MEMORYTYPE_DEVICE && type != CU_MEMORYTYPE_UNIFIED)
		return 0;
	return dev + x + y * pitch + z * height * pitch;
}

/* Set both sides of a 2D or 3D copy (from copy_side); the engine resolves them. */
static void
op_sides(struct ebb_op *op, CUmemorytype dst_type, CUdeviceptr dst, CUmemorytype src_type,
    CUdeviceptr src)
{
	op->copy_dst = dst;
	op->copy_src = src;
	op->copy_sides = dst_type != CU_MEMORYTYPE_ARRAY && src_type != CU_MEMORYTYPE_ARRAY;
}

static void
op_copy2d(struct ebb_op *op, const CUDA_MEMCPY2D *p, CUstream s, int sync)
{
	op->kind = EBB_OP_COPY;
	op->stream = s;
	op->sync = (uint8_t)sync;
	if (p == NULL)
		return;
	op->bytes = p->WidthInBytes * p->Height;
	op_sides(op, p->dstMemoryType, copy_side(p->dstMemoryType, p->dstDevice, p->dstXInBytes,
	    p->dstY, 0, p->dstPitch, 0), p->srcMemoryType, copy_side(p->srcMemoryType,
	    p->srcDevice, p->srcXInBytes, p->srcY, 0, p->srcPitch, 0));
}

/* op_copy3d and op_copy3dpeer: a 3D copy's op from its descriptor (the two
 * descriptor types name the fields alike). */
#define OP_COPY3D_FN(name, type)						\
	static void							\
	name(struct ebb_op *op, const type *p, CUstream s, int sync)	\
	{								\
		op->kind = EBB_OP_COPY;					\
		op->stream = s;						\
		op->sync = (uint8_t)sync;				\
		if (p == NULL)						\
			return;						\
		op->bytes = p->WidthInBytes * p->Height * p->Depth;	\
		op_sides(op, p->dstMemoryType, copy_side(p->dstMemoryType, p->dstDevice, \
		    p->dstXInBytes, p->dstY, p->dstZ, p->dstPitch, p->dstHeight), \
		    p->srcMemoryType, copy_side(p->srcMemoryType, p->srcDevice, \
		    p->srcXInBytes, p->srcY, p->srcZ, p->srcPitch, p->srcHeight)); \
	}
OP_COPY3D_FN(op_copy3d, CUDA_MEMCPY3D)
OP_COPY3D_FN(op_copy3dpeer, CUDA_MEMCPY3D_PEER)

static void
op_copybatch(struct ebb_op *op, const CUdeviceptr *dsts, const CUdeviceptr *srcs,
    const size_t *sizes, size_t count, CUstream s)
{
	op->kind = EBB_OP_COPY;
	op->stream = s;
	op->spill[0] = dsts;
	op->spill[1] = srcs;
	op->nspill = dsts && srcs ? count : 0;
	for (size_t i = 0; sizes && i < count; i++)
		op->bytes += sizes[i];
}

static void
op_copy3dbatch(struct ebb_op *op, const CUDA_MEMCPY3D_BATCH_OP *ops, size_t n, CUstream s)
{
	op->kind = EBB_OP_COPY;
	op->stream = s;
	if (ops == NULL || n == 0)
		return;
	if (batch_cap < 2 * n) {
		CUdeviceptr *p = realloc(batch_scratch, 2 * n * sizeof *p);
		if (p == NULL)
			return;	/* the addresses stay unresolved; the call goes on */
		batch_scratch = p;
		batch_cap = 2 * n;
	}
	for (size_t i = 0; i < n; i++) {
		const CUDA_MEMCPY3D_BATCH_OP *o = &ops[i];
		batch_scratch[i] = o->dst.type == CU_MEMCPY_OPERAND_TYPE_POINTER ? o->dst.op.ptr.ptr : 0;
		batch_scratch[n + i] = o->src.type == CU_MEMCPY_OPERAND_TYPE_POINTER ? o->src.op.ptr.ptr : 0;
		op->bytes += o->extent.width * o->extent.height * o->extent.depth;
	}
	op->spill[0] = batch_scratch;
	op->spill[1] = batch_scratch + n;
	op->nspill = n;
}

#define OP_COPY(dst, src, n, s, issync)					\
	do {								\
		op_.kind = EBB_OP_COPY;					\
		op_.stream = (s);					\
		op_.sync = (issync);					\
		op_.bytes = (n);					\
		op_.copy_dst = (dst);					\
		op_.copy_src = (src);					\
		op_.copy_sides = 1;					\
	} while (0)
#define OP_SET(dst, n, s, issync)					\
	do {								\
		op_.kind = EBB_OP_SET;					\
		op_.stream = (s);					\
		op_.sync = (issync);					\
		op_.bytes = (n);					\
		ebb_op_addr(&op_, (dst));				\
	} while (0)
#define OP_COPY2D(p, s, issync) op_copy2d(&op_, (p), (s), (issync))
#define OP_COPY3D(p, s, issync) op_copy3d(&op_, (p), (s), (issync))
#define OP_COPY3DPEER(p, s, issync) op_copy3dpeer(&op_, (p), (s), (issync))
#define OP_COPYBATCH(d, sr, sz, n, s) op_copybatch(&op_, (d), (sr), (sz), (n), (s))
#define OP_COPY3DBATCH(o, n, s) op_copy3dbatch(&op_, (o), (n), (s))

/* The generated copy and memset wrappers. */
#define EBB_GEN(elf, base, version, variant, params, args, op)		\
	EBB_EXPORT CUresult						\
	elf params							\
	{								\
		HOOK_PROLOGUE(elf, args);				\
		struct ebb_op op_ = { .per_thread = #variant[0] == 'P' };	\
		op;							\
		CUresult r_ = ebb_engine_op_begin(&op_);		\
		if (r_ == CUDA_SUCCESS)					\
			r_ = ebb_real.elf args;				\
		ebb_engine_op_end(&op_, r_);				\
		return r_;						\
	}
#include "syms.def"

/* ---- allocation ---- */

EBB_EXPORT CUresult
cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
	HOOK_PROLOGUE(cuMemAlloc_v2, (dptr, bytesize));
	CUresult r = ebb_engine_alloc(dptr, bytesize, NULL, 0, EBB_ALLOC_SYNC);
	if (r != EBB_NOT_SERVED)
		return r;
	r = ebb_real.cuMemAlloc_v2(dptr, bytesize);
	if (r == CUDA_SUCCESS)
		ebb_engine_on_alloc(*dptr, bytesize, NULL, 0, EBB_ALLOC_SYNC);
	return r;
}

EBB_EXPORT CUresult
cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
    unsigned int ElementSizeBytes)
{
	HOOK_PROLOGUE(cuMemAllocPitch_v2, (dptr, pPitch, WidthInBytes, Height, ElementSizeBytes));
	CUresult r = ebb_real.cuMemAllocPitch_v2(dptr, pPitch, WidthInBytes, Height,
	    ElementSizeBytes);
	if (r == CUDA_SUCCESS)
		ebb_engine_on_alloc(*dptr, *pPitch * Height, NULL, 0, EBB_ALLOC_PITCH);
	return r;
}

EBB_EXPORT CUresult
cuMemFree_v2(CUdeviceptr dptr)
{
	HOOK_PROLOGUE(cuMemFree_v2, (dptr));
	if (ebb_engine_on_free(dptr, NULL, 0, 0))
		return CUDA_SUCCESS;
	return ebb_real.cuMemFree_v2(dptr);
}

#define ALLOC_ASYNC(elf, pt)						\
	EBB_EXPORT CUresult						\
	elf(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)	\
	{								\
		HOOK_PROLOGUE(elf, (dptr, bytesize, hStream));		\
		CUresult r = ebb_engine_alloc(dptr, bytesize, hStream, pt, EBB_ALLOC_ASYNC); \
		if (r != EBB_NOT_SERVED)				\
			return r;					\
		r = ebb_real.elf(dptr, bytesize, hStream);		\
		if (r == CUDA_SUCCESS)					\
			ebb_engine_on_alloc(*dptr, bytesize, hStream, pt, EBB_ALLOC_ASYNC); \
		return r;						\
	}
ALLOC_ASYNC(cuMemAllocAsync, 0)
ALLOC_ASYNC(cuMemAllocAsync_ptsz, 1)

#define ALLOC_POOL(elf, pt)						\
	EBB_EXPORT CUresult						\
	elf(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream) \
	{								\
		HOOK_PROLOGUE(elf, (dptr, bytesize, pool, hStream));	\
		CUresult r = EBB_NOT_SERVED;				\
		if (ebb_engine_pool_served(pool))			\
			r = ebb_engine_alloc(dptr, bytesize, hStream, pt, EBB_ALLOC_POOL); \
		if (r != EBB_NOT_SERVED)				\
			return r;					\
		r = ebb_real.elf(dptr, bytesize, pool, hStream);	\
		if (r == CUDA_SUCCESS)					\
			ebb_engine_on_alloc(*dptr, bytesize, hStream, pt, EBB_ALLOC_POOL); \
		return r;						\
	}
ALLOC_POOL(cuMemAllocFromPoolAsync, 0)
ALLOC_POOL(cuMemAllocFromPoolAsync_ptsz, 1)

#define FREE_ASYNC(elf, pt)						\
	EBB_EXPORT CUresult						\
	elf(CUdeviceptr dptr, CUstream hStream)				\
	{								\
		HOOK_PROLOGUE(elf, (dptr, hStream));			\
		if (ebb_engine_on_free(dptr, hStream, pt, 1))		\
			return CUDA_SUCCESS;				\
		return ebb_real.elf(dptr, hStream);			\
	}
FREE_ASYNC(cuMemFreeAsync, 0)
FREE_ASYNC(cuMemFreeAsync_ptsz, 1)

/* ---- the job's own virtual memory and pools ---- */

EBB_EXPORT CUresult
cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
    unsigned long long flags)
{
	HOOK_PROLOGUE(cuMemMap, (ptr, size, offset, handle, flags));
	CUresult r = ebb_real.cuMemMap(ptr, size, offset, handle, flags);
	if (r == CUDA_SUCCESS)
		ebb_engine_on_alloc(ptr, size, NULL, 0, EBB_ALLOC_MAP);
	return r;
}

EBB_EXPORT CUresult
cuMemUnmap(CUdeviceptr ptr, size_t size)
{
	HOOK_PROLOGUE(cuMemUnmap, (ptr, size));
	CUresult r = ebb_real.cuMemUnmap(ptr, size);
	if (r == CUDA_SUCCESS)
		ebb_engine_on_unmap(ptr, size);
	return r;
}

/*
 * The driver answers questions about an address only where memory is
 * mapped: before passing the question on, ebb keeps the buffer mapped as a
 * use would (an offload in flight cancelled, one on the host mapped again
 * with its copy back queued). Launchers ask before each
 * launch (Triton's and inductor's: CU_POINTER_ATTRIBUTE_DEVICE_POINTER of
 * every pointer argument), and a launch would bring it back anyway.
 */
EBB_EXPORT CUresult
cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
	HOOK_PROLOGUE(cuPointerGetAttribute, (data, attribute, ptr));
	ebb_engine_on_pointer_query(ptr);
	return ebb_real.cuPointerGetAttribute(data, attribute, ptr);
}

EBB_EXPORT CUresult
cuPointerGetAttributes(unsigned int numAttributes, CUpointer_attribute *attributes, void **data,
    CUdeviceptr ptr)
{
	HOOK_PROLOGUE(cuPointerGetAttributes, (numAttributes, attributes, data, ptr));
	ebb_engine_on_pointer_query(ptr);
	return ebb_real.cuPointerGetAttributes(numAttributes, attributes, data, ptr);
}

EBB_EXPORT CUresult
cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
	HOOK_PROLOGUE(cuMemGetAddressRange_v2, (pbase, psize, dptr));
	ebb_engine_on_pointer_query(dptr);
	return ebb_real.cuMemGetAddressRange_v2(pbase, psize, dptr);
}

EBB_EXPORT CUresult
cuMemPoolSetAccess(CUmemoryPool pool, const CUmemAccessDesc *map, size_t count)
{
	HOOK_PROLOGUE(cuMemPoolSetAccess, (pool, map, count));
	CUresult r = ebb_real.cuMemPoolSetAccess(pool, map, count);
	if (r == CUDA_SUCCESS)
		ebb_engine_on_pool_access(pool, map, count);
	return r;
}

/* ---- launches ---- */

#define LAUNCH(elf, pt)							\
	EBB_EXPORT CUresult						\
	elf(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,	\
	    unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY, \
	    unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream, \
	    void **kernelParams, void **extra)				\
	{								\
		HOOK_PROLOGUE(elf, (f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, \
		    blockDimZ, sharedMemBytes, hStream, kernelParams, extra)); \
		struct ebb_op op = { .kind = EBB_OP_LAUNCH, .stream = hStream, \
			.per_thread = pt, .launch = { .func = f, .params = kernelParams, \
			.extra = extra, .grid = { gridDimX, gridDimY, gridDimZ },	\
			.block = { blockDimX, blockDimY, blockDimZ },		\
			.shmem = sharedMemBytes, .entry = EBB_LAUNCH_PLAIN } }; \
		CUresult r = ebb_engine_op_begin(&op);			\
		if (r == CUDA_SUCCESS)					\
			r = ebb_real.elf(f, gridDimX, gridDimY, gridDimZ, blockDimX, \
			    blockDimY, blockDimZ, sharedMemBytes, hStream, kernelParams, extra); \
		ebb_engine_op_end(&op, r);				\
		return r;						\
	}
LAUNCH(cuLaunchKernel, 0)
LAUNCH(cuLaunchKernel_ptsz, 1)

/* A cuLaunchKernelEx launch's geometry, shared memory and attributes, from
 * its config (the attributes stay the caller's: copied only while an
 * iteration is recorded). */
static inline void
launch_config(struct ebb_launch *l, const CUlaunchConfig *c)
{
	l->grid[0] = c->gridDimX;
	l->grid[1] = c->gridDimY;
	l->grid[2] = c->gridDimZ;
	l->block[0] = c->blockDimX;
	l->block[1] = c->blockDimY;
	l->block[2] = c->blockDimZ;
	l->shmem = c->sharedMemBytes;
	l->attrs = c->attrs;
	l->nattrs = c->attrs != NULL ? c->numAttrs : 0;
}

#define LAUNCH_EX(elf, pt)						\
	EBB_EXPORT CUresult						\
	elf(const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra) \
	{								\
		HOOK_PROLOGUE(elf, (config, f, kernelParams, extra));	\
		struct ebb_op op = { .kind = EBB_OP_LAUNCH,		\
			.stream = config ? config->hStream : NULL, .per_thread = pt, \
			.launch = { .func = f, .params = kernelParams, .extra = extra, \
			.entry = EBB_LAUNCH_EX } };				\
		if (config != NULL)					\
			launch_config(&op.launch, config);		\
		CUresult r = ebb_engine_op_begin(&op);			\
		if (r == CUDA_SUCCESS)					\
			r = ebb_real.elf(config, f, kernelParams, extra); \
		ebb_engine_op_end(&op, r);				\
		return r;						\
	}
LAUNCH_EX(cuLaunchKernelEx, 0)
LAUNCH_EX(cuLaunchKernelEx_ptsz, 1)

#define LAUNCH_COOP(elf, pt)						\
	EBB_EXPORT CUresult						\
	elf(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,	\
	    unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY, \
	    unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream, \
	    void **kernelParams)					\
	{								\
		HOOK_PROLOGUE(elf, (f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, \
		    blockDimZ, sharedMemBytes, hStream, kernelParams));	\
		struct ebb_op op = { .kind = EBB_OP_LAUNCH, .stream = hStream, \
			.per_thread = pt, .launch = { .func = f, .params = kernelParams, \
			.grid = { gridDimX, gridDimY, gridDimZ },		\
			.block = { blockDimX, blockDimY, blockDimZ },		\
			.shmem = sharedMemBytes, .entry = EBB_LAUNCH_COOP } }; \
		CUresult r = ebb_engine_op_begin(&op);			\
		if (r == CUDA_SUCCESS)					\
			r = ebb_real.elf(f, gridDimX, gridDimY, gridDimZ, blockDimX, \
			    blockDimY, blockDimZ, sharedMemBytes, hStream, kernelParams); \
		ebb_engine_op_end(&op, r);				\
		return r;						\
	}
LAUNCH_COOP(cuLaunchCooperativeKernel, 0)
LAUNCH_COOP(cuLaunchCooperativeKernel_ptsz, 1)

/* ---- graphs and capture ---- */

#define GRAPH_OP(elf, pt)						\
	EBB_EXPORT CUresult						\
	elf(CUgraphExec hGraphExec, CUstream hStream)			\
	{								\
		HOOK_PROLOGUE(elf, (hGraphExec, hStream));		\
		struct ebb_op op = { .kind = EBB_OP_GRAPH, .stream = hStream, \
			.per_thread = pt, .graph = hGraphExec };	\
		CUresult r = ebb_engine_op_begin(&op);			\
		if (r == CUDA_SUCCESS)					\
			r = ebb_real.elf(hGraphExec, hStream);		\
		ebb_engine_op_end(&op, r);				\
		return r;						\
	}
GRAPH_OP(cuGraphLaunch, 0)
GRAPH_OP(cuGraphLaunch_ptsz, 1)

/* An upload touches no buffer contents: only note nothing and forward. */
EBB_EXPORT CUresult
cuGraphUpload(CUgraphExec hGraphExec, CUstream hStream)
{
	HOOK_PROLOGUE(cuGraphUpload, (hGraphExec, hStream));
	return ebb_real.cuGraphUpload(hGraphExec, hStream);
}

EBB_EXPORT CUresult
cuGraphUpload_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
	HOOK_PROLOGUE(cuGraphUpload_ptsz, (hGraphExec, hStream));
	return ebb_real.cuGraphUpload_ptsz(hGraphExec, hStream);
}

#define CAPTURE_BEGIN(elf, pt, params, args)				\
	EBB_EXPORT CUresult						\
	elf params							\
	{								\
		HOOK_PROLOGUE(elf, args);				\
		ebb_engine_on_capture(hStream, pt, EBB_CAPTURE_BEGIN, 0); \
		CUresult r = ebb_real.elf args;				\
		ebb_engine_on_capture(hStream, pt, EBB_CAPTURE_BEGAN, r); \
		return r;						\
	}
CAPTURE_BEGIN(cuStreamBeginCapture, 0, (CUstream hStream), (hStream))
CAPTURE_BEGIN(cuStreamBeginCapture_ptsz, 1, (CUstream hStream), (hStream))
CAPTURE_BEGIN(cuStreamBeginCapture_v2, 0, (CUstream hStream, CUstreamCaptureMode mode),
    (hStream, mode))
CAPTURE_BEGIN(cuStreamBeginCapture_v2_ptsz, 1, (CUstream hStream, CUstreamCaptureMode mode),
    (hStream, mode))
CAPTURE_BEGIN(cuStreamBeginCaptureToGraph, 0, (CUstream hStream, CUgraph hGraph,
    const CUgraphNode *dependencies, const CUgraphEdgeData *dependencyData,
    size_t numDependencies, CUstreamCaptureMode mode),
    (hStream, hGraph, dependencies, dependencyData, numDependencies, mode))
CAPTURE_BEGIN(cuStreamBeginCaptureToGraph_ptsz, 1, (CUstream hStream, CUgraph hGraph,
    const CUgraphNode *dependencies, const CUgraphEdgeData *dependencyData,
    size_t numDependencies, CUstreamCaptureMode mode),
    (hStream, hGraph, dependencies, dependencyData, numDependencies, mode))

#define CAPTURE_END(elf, pt)						\
	EBB_EXPORT CUresult						\
	elf(CUstream hStream, CUgraph *phGraph)				\
	{								\
		HOOK_PROLOGUE(elf, (hStream, phGraph));			\
		ebb_engine_on_capture(hStream, pt, EBB_CAPTURE_END, CUDA_SUCCESS); \
		CUresult r = ebb_real.elf(hStream, phGraph);		\
		ebb_engine_on_capture(hStream, pt, EBB_CAPTURE_ENDED, r); \
		return r;						\
	}
CAPTURE_END(cuStreamEndCapture, 0)
CAPTURE_END(cuStreamEndCapture_ptsz, 1)

/* ---- synchronisation ---- */

/* A sync wrapper: the driver's call, then the engine told of it (kind, the
 * handle waited for, whether 0 names the per-thread default stream, and
 * when the call was made: the host's wait for the device starts there). */
#define SYNC_HOOK(elf, params, args, kind, handle, pt)			\
	EBB_EXPORT CUresult						\
	elf params							\
	{								\
		HOOK_PROLOGUE(elf, args);				\
		uint64_t called = ebb_now_ns();				\
		CUresult r = ebb_real.elf args;				\
		ebb_engine_on_sync(kind, handle, pt, called);		\
		return r;						\
	}
SYNC_HOOK(cuCtxSynchronize, (void), (), EBB_SYNC_CTX, NULL, 0)
SYNC_HOOK(cuCtxSynchronize_v2, (CUcontext ctx), (ctx), EBB_SYNC_CTX, ctx, 0)
SYNC_HOOK(cuStreamSynchronize, (CUstream hStream), (hStream), EBB_SYNC_STREAM, hStream, 0)
SYNC_HOOK(cuStreamSynchronize_ptsz, (CUstream hStream), (hStream), EBB_SYNC_STREAM, hStream, 1)
SYNC_HOOK(cuEventSynchronize, (CUevent hEvent), (hEvent), EBB_SYNC_EVENT, hEvent, 0)
