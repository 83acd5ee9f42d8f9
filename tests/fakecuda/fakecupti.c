/*
 * fakecupti.c: a CUPTI (libcupti.so.13) for make check, so that libebb.so's
 * CUPTI lifecycle (attach, pause, record again, finalise) and its matching
 * of activities to operations run on the fake driver as on a GPU. Every
 * call ebb makes succeeds. While CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL is
 * enabled, the fake driver's activity hooks (fakecuda_set_activity) give
 * each kernel launch a correlation id, with an external correlation record
 * where the launching thread has an external id pushed, and a kernel record
 * (start, end, stream) once it has run: so kernels are timed as CUPTI times
 * them, directly through the external correlation. Copies and memsets have
 * no record, nor do API calls. Records are handed to ebb's buffers on each
 * flush, and the next is read with GetNextRecord, as CUPTI's are.
 *
 * What ebb did with it is said on standard error at exit, one line:
 *
 *   fakecupti: attached A, finalised F, enabled E, pushes P, pops Q,
 *   flushes L, pushes idle I, kernels K
 *
 * (A: ActivityRegisterCallbacks calls; E: kinds enabled at exit; P and Q:
 * external correlation ids pushed and popped; L: flushes; I: pushes made
 * while no kind was enabled, to a paused CUPTI; K: kernel records made). FAKECUPTI_REFUSE=1 makes
 * ActivityEnable fail (CUPTI_ERROR_NOT_INITIALIZED), as when another
 * profiler holds CUPTI. FAKECUPTI_API_US=N spends N microseconds of the
 * host's time in each kernel launch while kernel records are enabled, as
 * CUPTI's records cost the driver's calls on a GPU.
 */
#include "config.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cupti.h>

#include "fakecuda.h"

#define EXPORT __attribute__((visibility("default")))

/* One record, as the buffers hold them: every record takes the same room. */
union record {
	CUpti_Activity any;
	CUpti_ActivityExternalCorrelation ext;
	CUpti_ActivityKernel10 kernel;
};
#define STRIDE sizeof(union record)

/* The records not yet flushed (lock). */
static struct {
	pthread_mutex_t lock;
	union record *r;
	size_t n, cap;
	uint64_t dropped;
} recs = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* The external ids this thread has pushed, innermost last. */
#define EXT_DEPTH 16
static _Thread_local uint64_t ext_stack[EXT_DEPTH];
static _Thread_local int ext_depth;

static struct {
	CUpti_BuffersCallbackRequestFunc request;
	CUpti_BuffersCallbackCompleteFunc complete;
	atomic_ullong enabled;		/* a bit per CUpti_ActivityKind below 64 */
	atomic_ulong attached, finalised, pushes, pushes_idle, pops, flushes, kernels;
	atomic_uint corr;		/* the last correlation id given */
	atomic_int said;
} fc;

static void
keep(const union record *r)
{
	pthread_mutex_lock(&recs.lock);
	if (recs.n == recs.cap) {
		size_t cap = recs.cap ? recs.cap * 2 : 1024;
		union record *p = realloc(recs.r, cap * STRIDE);
		if (p == NULL) {
			recs.dropped++;
			pthread_mutex_unlock(&recs.lock);
			return;
		}
		recs.r = p;
		recs.cap = cap;
	}
	recs.r[recs.n++] = *r;
	pthread_mutex_unlock(&recs.lock);
}

/* The fake driver's hooks: a launch's correlation id, with an external
 * correlation record where this thread has an id pushed ... */
static uint32_t
on_api(void)
{
	uint32_t corr = atomic_fetch_add(&fc.corr, 1) + 1;
	const char *cost = getenv("FAKECUPTI_API_US");

	if (cost != NULL && atoi(cost) > 0) {
		/* the host's time, spent as CUPTI spends it: inside the call */
		struct timespec t0, t;
		long us = atol(cost);
		clock_gettime(CLOCK_MONOTONIC, &t0);
		do
			clock_gettime(CLOCK_MONOTONIC, &t);
		while ((t.tv_sec - t0.tv_sec) * 1000000L + (t.tv_nsec - t0.tv_nsec) / 1000 < us);
	}

	if (ext_depth > 0 && ext_depth <= EXT_DEPTH) {
		union record r;
		memset(&r, 0, sizeof r);
		r.ext.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
		r.ext.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
		r.ext.externalId = ext_stack[ext_depth - 1];
		r.ext.correlationId = corr;
		keep(&r);
	}
	return corr;
}

/* ... and its kernel's record once it has run. */
static void
on_kernel(uint32_t corr, uint64_t start, uint64_t end, uint32_t stream)
{
	union record r;

	memset(&r, 0, sizeof r);
	r.kernel.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
	r.kernel.start = start;
	r.kernel.end = end;
	r.kernel.streamId = stream;
	r.kernel.correlationId = corr;
	keep(&r);
	atomic_fetch_add(&fc.kernels, 1);
}

/* Set the fake driver's hooks (on: kernel records wanted), or clear them. */
static void
hooks(int on)
{
	static const struct fakecuda_activity acts = { on_api, on_kernel };
	void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	void (*set)(const struct fakecuda_activity *) = cuda != NULL ?
	    (void (*)(const struct fakecuda_activity *))dlsym(cuda, "fakecuda_set_activity") : NULL;

	if (set != NULL)
		set(on ? &acts : NULL);
	if (cuda != NULL)
		dlclose(cuda);
}

static void
said_at_exit(void)
{
	fprintf(stderr, "fakecupti: attached %lu, finalised %lu, enabled %d, pushes %lu, pops %lu, "
	    "flushes %lu, pushes idle %lu, kernels %lu\n", atomic_load(&fc.attached),
	    atomic_load(&fc.finalised), __builtin_popcountll(atomic_load(&fc.enabled)),
	    atomic_load(&fc.pushes), atomic_load(&fc.pops), atomic_load(&fc.flushes),
	    atomic_load(&fc.pushes_idle), atomic_load(&fc.kernels));
}

EXPORT CUptiResult
cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc request,
    CUpti_BuffersCallbackCompleteFunc complete)
{
	if (request == NULL || complete == NULL)
		return CUPTI_ERROR_INVALID_PARAMETER;
	fc.request = request;
	fc.complete = complete;
	atomic_fetch_add(&fc.attached, 1);
	if (atomic_exchange(&fc.said, 1) == 0)
		atexit(said_at_exit);
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult
cuptiActivityEnable(CUpti_ActivityKind kind)
{
	const char *refuse = getenv("FAKECUPTI_REFUSE");

	if (refuse != NULL && atoi(refuse) != 0)
		return CUPTI_ERROR_NOT_INITIALIZED;
	if ((unsigned)kind >= 64)
		return CUPTI_ERROR_INVALID_KIND;
	atomic_fetch_or(&fc.enabled, 1ull << kind);
	if (kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
		hooks(1);
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult
cuptiActivityDisable(CUpti_ActivityKind kind)
{
	if ((unsigned)kind >= 64)
		return CUPTI_ERROR_INVALID_KIND;
	atomic_fetch_and(&fc.enabled, ~(1ull << kind));
	if (kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
		hooks(0);
	return CUPTI_SUCCESS;
}

/* The records kept so far, handed over in the buffers the client gives
 * (at least one, empty where there is none, as CUPTI hands back a buffer no
 * activity filled), without the records' lock: the client's callbacks take
 * locks of their own. */
EXPORT CUptiResult
cuptiActivityFlushAll(uint32_t flag)
{
	(void)flag;
	atomic_fetch_add(&fc.flushes, 1);
	if (fc.request == NULL)
		return CUPTI_SUCCESS;
	pthread_mutex_lock(&recs.lock);
	union record *all = recs.r;
	size_t total = recs.n, done = 0;
	recs.r = NULL;
	recs.n = recs.cap = 0;
	pthread_mutex_unlock(&recs.lock);
	do {
		uint8_t *buf = NULL;
		size_t size = 0, max = 0;
		fc.request(&buf, &size, &max);
		if (buf == NULL || size < STRIDE) {
			free(buf);
			break;
		}
		size_t n = total - done < size / STRIDE ? total - done : size / STRIDE;
		if (n > 0)
			memcpy(buf, all + done, n * STRIDE);
		done += n;
		fc.complete(NULL, 0, buf, size, n * STRIDE);
	} while (done < total);
	free(all);
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult
cuptiActivityGetNextRecord(uint8_t *buffer, size_t validBufferSizeBytes, CUpti_Activity **record)
{
	uint8_t *next = *record == NULL ? buffer : (uint8_t *)*record + STRIDE;

	if (buffer == NULL || next + STRIDE > buffer + validBufferSizeBytes)
		return CUPTI_ERROR_MAX_LIMIT_REACHED;
	*record = (CUpti_Activity *)next;
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult
cuptiActivityPushExternalCorrelationId(CUpti_ExternalCorrelationKind kind, uint64_t id)
{
	(void)kind;
	if (ext_depth < EXT_DEPTH)
		ext_stack[ext_depth] = id;
	ext_depth++;
	atomic_fetch_add(&fc.pushes, 1);
	if (atomic_load(&fc.enabled) == 0)
		atomic_fetch_add(&fc.pushes_idle, 1);
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult
cuptiActivityPopExternalCorrelationId(CUpti_ExternalCorrelationKind kind, uint64_t *lastId)
{
	(void)kind;
	if (ext_depth == 0)
		return CUPTI_ERROR_QUEUE_EMPTY;
	ext_depth--;
	if (lastId != NULL)
		*lastId = ext_depth < EXT_DEPTH ? ext_stack[ext_depth] : 0;
	atomic_fetch_add(&fc.pops, 1);
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult
cuptiGetTimestamp(uint64_t *timestamp)
{
	struct timespec ts;

	if (timestamp == NULL)
		return CUPTI_ERROR_INVALID_PARAMETER;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	*timestamp = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult
cuptiGetResultString(CUptiResult result, const char **str)
{
	if (str == NULL)
		return CUPTI_ERROR_INVALID_PARAMETER;
	*str = result == CUPTI_SUCCESS ? "CUPTI_SUCCESS" : "CUPTI_ERROR (fakecupti)";
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult
cuptiFinalize(void)
{
	atomic_store(&fc.enabled, 0);
	hooks(0);
	atomic_fetch_add(&fc.finalised, 1);
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult
cuptiGetStreamIdEx(CUcontext context, CUstream stream, uint8_t perThreadStream, uint32_t *streamId)
{
	(void)context;
	(void)perThreadStream;
	if (streamId == NULL)
		return CUPTI_ERROR_INVALID_PARAMETER;
	*streamId = (uint32_t)(uintptr_t)stream;
	return CUPTI_SUCCESS;
}
