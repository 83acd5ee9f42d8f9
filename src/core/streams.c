/*
 * streams.c: per-stream progress through marker events.
 */
#include "config.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "real.h"
#include "log.h"
#include "streams.h"
#include "trace.h"

/* A marker is recorded after this many operations of a stream at most. */
#define MARK_EVERY 32

struct marker {
	uint64_t seq;
	CUevent ev;
};

struct ebb_stream {
	CUstream handle;	/* as given to the driver; EBB_STREAM_* for defaults */
	int per_thread;		/* the calling thread's per-thread default stream */
	uint64_t last;		/* last operation that reached the driver */
	struct streams_begun *begun;	/* operations on their way to the driver */
	uint64_t done;		/* every operation up to this one has completed */
	uint64_t marked;	/* seq covered by the newest marker */
	unsigned since;		/* operations since the newest marker */
	int capturing;		/* in stream capture */
	int origin;		/* a capture began on it and has not ended */
	struct marker *ring;	/* pending markers, oldest first, circular */
	size_t head, count, cap;
	struct ebb_stream *next;
};

/* The stream trackers' state (ebb_state_lock). */
static struct streams {
	struct ebb_stream *all;		/* every tracker, newest first */
	CUevent *pool[2];		/* events kept for reuse: [1] timing ones, [0] the others */
	size_t npool[2], cappool[2];	/* events in each, and room for */
} streams;
static _Thread_local struct ebb_stream *mine;	/* this thread's per-thread stream */

int
streams_relax(void)
{
	CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;

	if (ebb_real.cuThreadExchangeStreamCaptureMode == NULL ||
	    ebb_real.cuThreadExchangeStreamCaptureMode(&m) != CUDA_SUCCESS)
		return -1;
	return (int)m;
}

void
streams_unrelax(int old)
{
	CUstreamCaptureMode m = (CUstreamCaptureMode)old;

	if (old >= 0 && old != CU_STREAM_CAPTURE_MODE_RELAXED)
		ebb_real.cuThreadExchangeStreamCaptureMode(&m);
}

CUevent
streams_event_get(int timing)
{
	CUevent ev = NULL;

	timing = timing != 0;
	if (streams.npool[timing] > 0)
		return streams.pool[timing][--streams.npool[timing]];
	if (ebb_real.cuEventCreate == NULL ||
	    ebb_real.cuEventCreate(&ev, timing ? CU_EVENT_DEFAULT : CU_EVENT_DISABLE_TIMING) !=
	    CUDA_SUCCESS)
		return NULL;
	return ev;
}

void
streams_event_put(CUevent ev, int timing)
{
	timing = timing != 0;
	if (ev == NULL)
		return;
	if (streams.npool[timing] == streams.cappool[timing]) {
		size_t cap = streams.cappool[timing] ? streams.cappool[timing] * 2 : 64;
		CUevent *p = realloc(streams.pool[timing], cap * sizeof *p);
		if (p == NULL) {
			ebb_real.cuEventDestroy_v2(ev);
			return;
		}
		streams.pool[timing] = p;
		streams.cappool[timing] = cap;
	}
	streams.pool[timing][streams.npool[timing]++] = ev;
}

struct ebb_stream *
streams_get(CUstream handle, int per_thread)
{
	if (handle == NULL || handle == EBB_STREAM_PER_THREAD) {
		if (per_thread || handle == EBB_STREAM_PER_THREAD) {
			if (mine != NULL)
				return mine;
		} else {
			handle = EBB_STREAM_LEGACY;
		}
	}
	int pt = handle == NULL || handle == EBB_STREAM_PER_THREAD;
	static struct ebb_stream *recent;	/* every operation asks: most ask for the last one */
	if (!pt && recent != NULL && recent->handle == handle)
		return recent;
	if (!pt)
		for (struct ebb_stream *s = streams.all; s != NULL; s = s->next)
			if (s->handle == handle && !s->per_thread)
				return recent = s;
	struct ebb_stream *s = calloc(1, sizeof *s);
	if (s == NULL)
		return NULL;
	s->handle = pt ? EBB_STREAM_PER_THREAD : handle;
	s->per_thread = pt;
	s->next = streams.all;
	streams.all = s;
	if (pt)
		mine = s;
	else
		recent = s;
	return s;
}

CUstream
streams_handle(const struct ebb_stream *s)
{
	return s->handle;
}

uint64_t
streams_last(const struct ebb_stream *s)
{
	return s->last;
}

uint64_t
streams_submitted(const struct ebb_stream *s)
{
	uint64_t upto = s->last;

	for (const struct streams_begun *b = s->begun; b != NULL; b = b->next)
		if (b->seq <= upto)
			upto = b->seq - 1;
	return upto;
}

uint64_t
streams_first_begun(const struct ebb_stream *s)
{
	uint64_t first = UINT64_MAX;

	for (const struct streams_begun *b = s->begun; b != NULL; b = b->next)
		if (b->seq < first)
			first = b->seq;
	return first;
}

void
streams_begin(struct ebb_stream *s, struct streams_begun *b, uint64_t seq)
{
	b->seq = seq;
	b->next = s->begun;
	s->begun = b;
}

/* Retire the completed markers at the head of the ring. */
static void
poll(struct ebb_stream *s)
{
	while (s->count > 0) {
		struct marker *m = &s->ring[s->head];
		if (ebb_real.cuEventQuery(m->ev) != CUDA_SUCCESS)
			break;
		s->done = m->seq;
		streams_event_put(m->ev, 0);
		s->head = (s->head + 1) % s->cap;
		s->count--;
	}
}

/* Record a marker covering the operations of s that have reached the driver
 * (streams_submitted). Returns 0 or a CUresult. */
static CUresult
mark(struct ebb_stream *s)
{
	if (s->capturing)
		return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;	/* it would land in the graph */
	if (s->per_thread && s != mine)
		return CUDA_ERROR_INVALID_HANDLE;	/* only its thread can name it */
	if (s->count == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 16;
		struct marker *r = malloc(cap * sizeof *r);
		if (r == NULL)
			return CUDA_ERROR_OUT_OF_MEMORY;
		for (size_t i = 0; i < s->count; i++)
			r[i] = s->ring[(s->head + i) % s->cap];
		free(s->ring);
		s->ring = r;
		s->head = 0;
		s->cap = cap;
	}
	CUevent ev = streams_event_get(0);
	if (ev == NULL)
		return CUDA_ERROR_OUT_OF_MEMORY;
	CUresult r = ebb_real.cuEventRecord(ev, s->handle);
	if (r != CUDA_SUCCESS) {
		streams_event_put(ev, 0);
		return r;
	}
	uint64_t upto = streams_submitted(s);
	s->ring[(s->head + s->count) % s->cap] = (struct marker){ upto, ev };
	s->count++;
	s->marked = upto;
	s->since = 0;
	return CUDA_SUCCESS;
}

void
streams_after(struct ebb_stream *s, uint64_t seq, int markers)
{
	for (struct streams_begun **b = &s->begun; *b != NULL; b = &(*b)->next)
		if ((*b)->seq == seq) {
			*b = (*b)->next;
			break;
		}
	if (seq > s->last)
		s->last = seq;
	if (markers && (s->per_thread || ++s->since >= MARK_EVERY)) {
		/* no event to reuse: retire the completed markers first, so that
		 * their events serve again in place of new ones, and the ring of
		 * a stream that nothing waits for does not grow without end (not
		 * while the stream captures, where mark records nothing) */
		if (streams.npool[0] == 0 && !s->capturing)
			poll(s);
		mark(s);
	}
}

int
streams_done(struct ebb_stream *s, uint64_t seq)
{
	if (s->done >= seq)
		return 1;
	poll(s);
	return s->done >= seq;
}

/* The oldest pending marker that covers seq, or NULL. */
static struct marker *
pending(struct ebb_stream *s, uint64_t seq)
{
	for (size_t i = 0; i < s->count; i++) {
		struct marker *m = &s->ring[(s->head + i) % s->cap];
		if (m->seq >= seq)
			return m;
	}
	return NULL;
}

/* The pending marker covering seq, recording one if none does yet; NULL if none can be. */
static struct marker *
covering(struct ebb_stream *s, uint64_t seq)
{
	if (s->marked < seq && mark(s) != CUDA_SUCCESS)
		return NULL;
	return pending(s, seq);
}

void
streams_cover(struct ebb_stream *s, uint64_t seq)
{
	if (s->marked < seq)
		mark(s);	/* where it cannot (capture, another thread's stream), a wait marks later */
}

CUresult
streams_wait(struct ebb_stream *s, uint64_t seq, CUstream waiter)
{
	if (streams_done(s, seq))
		return CUDA_SUCCESS;
	if (s->handle == waiter && !s->per_thread)
		return CUDA_SUCCESS;	/* stream order does it */
	struct marker *m = covering(s, seq);
	if (m == NULL)
		return CUDA_ERROR_NOT_READY;
	return ebb_real.cuStreamWaitEvent(waiter, m->ev, 0);
}

int
streams_orderable(struct ebb_stream *s, uint64_t seq)
{
	if (streams_done(s, seq) || pending(s, seq) != NULL)
		return 1;
	return seq <= streams_submitted(s) && !s->capturing && (!s->per_thread || s == mine);
}

void
streams_mark_now(struct ebb_stream *s)
{
	if (s->marked < streams_submitted(s))
		mark(s);
}

CUevent
streams_marker(struct ebb_stream *s, uint64_t seq)
{
	struct marker *m = streams_done(s, seq) ? NULL : pending(s, seq);
	return m ? m->ev : NULL;
}

CUresult
streams_sync(struct ebb_stream *s, uint64_t seq)
{
	if (streams_done(s, seq))
		return CUDA_SUCCESS;
	struct marker *m = covering(s, seq);
	if (m == NULL)
		return CUDA_ERROR_NOT_READY;
	CUresult r = streams_event_wait(m->ev);
	if (r == CUDA_SUCCESS)
		poll(s);
	return r;
}

CUresult
streams_event_wait(CUevent ev)
{
	CUresult r = ebb_real.cuEventSynchronize(ev);

	if (r == CUDA_SUCCESS)
		return r;
	/* polled, from 20 us between queries up to 1 ms */
	long ns = 20000;
	for (;;) {
		r = ebb_real.cuEventQuery(ev);
		if (r != CUDA_ERROR_NOT_READY)
			return r;
		struct timespec ts = { 0, ns };
		nanosleep(&ts, NULL);
		if (ns < 1000000)
			ns *= 2;
	}
}

void
streams_each(void (*fn)(struct ebb_stream *, void *), void *ctx)
{
	for (struct ebb_stream *s = streams.all; s != NULL; s = s->next)
		fn(s, ctx);
}

void
streams_set_stream_capturing(struct ebb_stream *s, int on)
{
	s->capturing = on;
	s->origin = on;
}

CUresult
streams_after_event(struct ebb_stream *s, CUevent ev, int capturing)
{
	if (capturing && streams_capturing(s))
		return streams_event_wait(ev);
	return ebb_real.cuStreamWaitEvent(s->handle, ev, 0);
}

int
streams_capturing(struct ebb_stream *s)
{
	CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;

	if (s->capturing || ebb_real.cuStreamIsCapturing == NULL)
		return s->capturing;
	if (s->handle == EBB_STREAM_LEGACY || (s->per_thread && s != mine))
		return 0;	/* the legacy stream never captures; another thread's is asked there */
	if (ebb_real.cuStreamIsCapturing(s->handle, &cs) == CUDA_SUCCESS &&
	    cs != CU_STREAM_CAPTURE_STATUS_NONE)
		s->capturing = 1;
	return s->capturing;
}

int
streams_join_capture(struct ebb_stream *s)
{
	CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
	cuuint64_t id = 0, other = 0;
	int n = 0;

	/* only the stream a capture began on ends it; another's end fails */
	if (!s->origin || ebb_real.cuStreamGetCaptureInfo == NULL ||
	    ebb_real.cuStreamGetCaptureInfo(s->handle, &cs, &id) != CUDA_SUCCESS ||
	    cs != CU_STREAM_CAPTURE_STATUS_ACTIVE)
		return 0;
	int mode = streams_relax();
	for (struct ebb_stream *t = streams.all; t != NULL; t = t->next) {
		/* the legacy stream never captures; another thread's is not ours to ask */
		if (t == s || t->handle == EBB_STREAM_LEGACY || (t->per_thread && t != mine))
			continue;
		if (ebb_real.cuStreamGetCaptureInfo(t->handle, &cs, &other) != CUDA_SUCCESS ||
		    cs != CU_STREAM_CAPTURE_STATUS_ACTIVE || other != id)
			continue;
		CUevent ev = streams_event_get(0);
		if (ev == NULL)
			continue;
		if (ebb_real.cuEventRecord(ev, t->handle) == CUDA_SUCCESS &&
		    ebb_real.cuStreamWaitEvent(s->handle, ev, 0) == CUDA_SUCCESS)
			n++;
		streams_event_put(ev, 0);
	}
	streams_unrelax(mode);
	if (n > 0) {
		ebb_trace_note_u64("capture-joined", (uint64_t)n);
		ebb_log(EBB_LOG_INFO, "capture: %d side stream%s joined at its end "
		    "(EBB_CAPTURE_JOIN)", n, n == 1 ? "" : "s");
	}
	return n;
}

void
streams_capture_ended(struct ebb_stream *ended, int others)
{
	if (ended != NULL)
		ended->origin = 0;
	for (struct ebb_stream *s = streams.all; s != NULL; s = s->next) {
		if (!s->capturing)
			continue;
		s->capturing = 0;
		if (others)
			streams_capturing(s);
	}
}
