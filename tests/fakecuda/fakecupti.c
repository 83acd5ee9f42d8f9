/*
 * fakecupti.c: a CUPTI (libcupti.so.13) for make check that delivers no
 * activity at all, so that libebb.so's CUPTI lifecycle (attach, pause,
 * record again, finalise) runs on the fake driver as on a GPU: every call
 * ebb makes succeeds, buffers are asked for and handed back empty on each
 * flush, and GetNextRecord finds no record. Plans made with it are timed by
 * the host, as without CUPTI.
 *
 * What ebb did with it is said on standard error at exit, one line:
 *
 *   fakecupti: attached A, finalised F, enabled E, pushes P, pops Q, flushes L
 *
 * (A: ActivityRegisterCallbacks calls; E: kinds enabled at exit; P and Q:
 * external correlation ids pushed and popped; L: flushes). It also counts
 * the pushes made while no kind is enabled, as "pushes idle N": a paused
 * CUPTI that ebb still pushes ids to. FAKECUPTI_REFUSE=1 makes
 * ActivityEnable fail (CUPTI_ERROR_NOT_INITIALIZED), as when another
 * profiler holds CUPTI.
 */
#include "config.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <cupti.h>

#define EXPORT __attribute__((visibility("default")))

static struct {
	CUpti_BuffersCallbackRequestFunc request;
	CUpti_BuffersCallbackCompleteFunc complete;
	atomic_ullong enabled;		/* a bit per CUpti_ActivityKind below 64 */
	atomic_ulong attached, finalised, pushes, pushes_idle, pops, flushes;
	atomic_int said;
} fc;

static void
said_at_exit(void)
{
	fprintf(stderr, "fakecupti: attached %lu, finalised %lu, enabled %d, pushes %lu, pops %lu, "
	    "flushes %lu, pushes idle %lu\n", atomic_load(&fc.attached),
	    atomic_load(&fc.finalised), __builtin_popcountll(atomic_load(&fc.enabled)),
	    atomic_load(&fc.pushes), atomic_load(&fc.pops), atomic_load(&fc.flushes),
	    atomic_load(&fc.pushes_idle));
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
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult
cuptiActivityDisable(CUpti_ActivityKind kind)
{
	if ((unsigned)kind >= 64)
		return CUPTI_ERROR_INVALID_KIND;
	atomic_fetch_and(&fc.enabled, ~(1ull << kind));
	return CUPTI_SUCCESS;
}

/* A buffer asked for and handed back with nothing in it, as CUPTI does
 * with a buffer no activity filled. */
EXPORT CUptiResult
cuptiActivityFlushAll(uint32_t flag)
{
	uint8_t *buf = NULL;
	size_t size = 0, max = 0;

	(void)flag;
	atomic_fetch_add(&fc.flushes, 1);
	if (fc.request == NULL)
		return CUPTI_SUCCESS;
	fc.request(&buf, &size, &max);
	if (buf != NULL)
		fc.complete(NULL, 0, buf, size, 0);
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult
cuptiActivityGetNextRecord(uint8_t *buffer, size_t validBufferSizeBytes, CUpti_Activity **record)
{
	(void)buffer;
	(void)validBufferSizeBytes;
	(void)record;
	return CUPTI_ERROR_MAX_LIMIT_REACHED;
}

EXPORT CUptiResult
cuptiActivityPushExternalCorrelationId(CUpti_ExternalCorrelationKind kind, uint64_t id)
{
	(void)kind;
	(void)id;
	atomic_fetch_add(&fc.pushes, 1);
	if (atomic_load(&fc.enabled) == 0)
		atomic_fetch_add(&fc.pushes_idle, 1);
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult
cuptiActivityPopExternalCorrelationId(CUpti_ExternalCorrelationKind kind, uint64_t *lastId)
{
	(void)kind;
	if (lastId != NULL)
		*lastId = 0;
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
