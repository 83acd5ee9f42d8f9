/*
 * tracer.c: CUPTI activity tracing, loaded at run time.
 */
#include "config.h"

#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cupti.h>

#include "log.h"
#include "match.h"
#include "realdl.h"
#include "tracer.h"

#define STR2(x) #x
#define STR(x) STR2(x)
/* libcupti's soname follows the CUDA major version of the headers. */
#define CUPTI_SONAME "libcupti.so." STR(CUPTI_MAJOR)
#if CUDA_VERSION >= 13000 && CUDA_VERSION < 14000
#define CUPTI_MAJOR 13
#else
#error "set CUPTI_MAJOR for this CUDA version"
#endif

#define CUPTI_BUFFER_BYTES (8u << 20)

/* The CUPTI functions ebb uses, resolved from the loaded library. */
static struct {
	CUptiResult (*ActivityRegisterCallbacks)(CUpti_BuffersCallbackRequestFunc,
	    CUpti_BuffersCallbackCompleteFunc);
	CUptiResult (*ActivityEnable)(CUpti_ActivityKind);
	CUptiResult (*ActivityDisable)(CUpti_ActivityKind);
	CUptiResult (*ActivityFlushAll)(uint32_t);
	CUptiResult (*ActivityGetNextRecord)(uint8_t *, size_t, CUpti_Activity **);
	CUptiResult (*ActivityPushExternalCorrelationId)(CUpti_ExternalCorrelationKind, uint64_t);
	CUptiResult (*ActivityPopExternalCorrelationId)(CUpti_ExternalCorrelationKind, uint64_t *);
	CUptiResult (*GetTimestamp)(uint64_t *);
	CUptiResult (*GetResultString)(CUptiResult, const char **);
	CUptiResult (*Finalize)(void);
	CUptiResult (*GetStreamIdEx)(CUcontext, CUstream, uint8_t, uint32_t *);	/* optional */
} cupti;

/* One of ebb's own streams: their copies are not the job's operations. */
#define MAX_IGNORED 8
struct ignored_stream {
	CUcontext ctx;
	CUstream stream;
	uint32_t id;
	int known;
};

/*
 * The records of one attachment, kept until ebb detaches and matches them
 * (match.h). Guarded by rec_lock; CUPTI's buffer thread appends.
 */
struct records {
	struct cm_ext *ext;
	struct cm_api *api;
	struct cm_act *act;
	struct cm_op *ops;
	size_t next, napi, nact, nops;
	size_t cext, capi, cact, cops;
	uint64_t dropped;	/* records not kept: the cap was reached or memory ran out */
};

/* The tracer's state. */
static struct tracer {
	struct ignored_stream ignored[MAX_IGNORED];	/* ebb's own streams (rec_lock) */
	int nignored;
	void *cupti_lib;		/* libcupti, dlopened */
	char cupti_path[PATH_MAX];	/* where it was found */
	atomic_int attached;		/* CUPTI records the job's activities */
	atomic_int paused;		/* attached before, its activities disabled (ebb_cupti_pause) */
	ebb_cupti_sink sink_fn;		/* where matched times go (ebb_cupti_attach) */
	void *sink_ctx;
	atomic_uint_fast64_t delivered;	/* times handed to sink_fn */
	pthread_mutex_t rec_lock;	/* guards ignored and recs */
	struct records recs;		/* the records of this attachment */
	struct cm_stats last_stats;	/* what the last match found */
} tracer = { .rec_lock = PTHREAD_MUTEX_INITIALIZER };

/* External correlation records come with API records, and the runtime's
 * records tie the activities of libcudart's calls to the driver calls in
 * them (match.h), so both kinds of API record are enabled too. */
static const CUpti_ActivityKind kinds[] = {
	CUPTI_ACTIVITY_KIND_DRIVER,
	CUPTI_ACTIVITY_KIND_RUNTIME,
	CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
	CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
	CUPTI_ACTIVITY_KIND_MEMCPY,
	CUPTI_ACTIVITY_KIND_MEMSET,
};
#define NKINDS (sizeof kinds / sizeof kinds[0])

/* Records kept per attachment at most (about 32 bytes each). */
#define RECORDS_MAX (16u << 20)

/* Make room for one more element in *v (count n, capacity *cap). */
static int
room(void **v, size_t n, size_t *cap, size_t size)
{
	if (n < *cap)
		return 0;
	if (n >= RECORDS_MAX)
		return -1;
	size_t c = *cap ? *cap * 2 : 4096;
	void *p = realloc(*v, c * size);
	if (p == NULL)
		return -1;
	*v = p;
	*cap = c;
	return 0;
}

static void
records_clear(void)
{
	free(tracer.recs.ext);
	free(tracer.recs.api);
	free(tracer.recs.act);
	free(tracer.recs.ops);
	memset(&tracer.recs, 0, sizeof tracer.recs);
}

/* CUPTI's ids of the streams to ignore, where not known yet. Caller holds rec_lock. */
static void
resolve_ignored(void)
{
	for (int i = 0; i < tracer.nignored; i++)
		if (!tracer.ignored[i].known && cupti.GetStreamIdEx != NULL &&
		    cupti.GetStreamIdEx(tracer.ignored[i].ctx, tracer.ignored[i].stream, 0, &tracer.ignored[i].id) ==
		    CUPTI_SUCCESS)
			tracer.ignored[i].known = 1;
}

static int
is_ignored(uint32_t stream)
{
	for (int i = 0; i < tracer.nignored; i++)
		if (tracer.ignored[i].known && tracer.ignored[i].id == stream)
			return 1;
	return 0;
}

void
ebb_cupti_ignore_stream(CUcontext ctx, CUstream stream)
{
	pthread_mutex_lock(&tracer.rec_lock);
	if (tracer.nignored < MAX_IGNORED) {
		tracer.ignored[tracer.nignored].ctx = ctx;
		tracer.ignored[tracer.nignored].stream = stream;
		tracer.ignored[tracer.nignored].known = 0;
		tracer.nignored++;
		if (atomic_load(&tracer.attached))
			resolve_ignored();
	}
	pthread_mutex_unlock(&tracer.rec_lock);
}

/* Keep a kernel, memcpy or memset record. Caller holds rec_lock. */
static void
keep_act(uint32_t corr, uint64_t start, uint64_t end)
{
	if (room((void **)&tracer.recs.act, tracer.recs.nact, &tracer.recs.cact, sizeof *tracer.recs.act) < 0) {
		tracer.recs.dropped++;
		return;
	}
	tracer.recs.act[tracer.recs.nact++] = (struct cm_act){ corr, start, end };
}

/* Keep what one activity record says. Caller holds rec_lock. */
static void
take_record(const CUpti_Activity *rec)
{
	switch (rec->kind) {
	case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
		const CUpti_ActivityExternalCorrelation *e = (const void *)rec;
		if (e->externalKind != CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0)
			return;
		if (room((void **)&tracer.recs.ext, tracer.recs.next, &tracer.recs.cext, sizeof *tracer.recs.ext) < 0) {
			tracer.recs.dropped++;
			return;
		}
		tracer.recs.ext[tracer.recs.next++] = (struct cm_ext){ e->correlationId, e->externalId };
		return;
	}
	case CUPTI_ACTIVITY_KIND_DRIVER:
	case CUPTI_ACTIVITY_KIND_RUNTIME: {
		const CUpti_ActivityAPI *a = (const void *)rec;
		if (room((void **)&tracer.recs.api, tracer.recs.napi, &tracer.recs.capi, sizeof *tracer.recs.api) < 0) {
			tracer.recs.dropped++;
			return;
		}
		tracer.recs.api[tracer.recs.napi++] = (struct cm_api){ a->correlationId, a->threadId,
			rec->kind == CUPTI_ACTIVITY_KIND_RUNTIME, a->start, a->end };
		return;
	}
	case CUPTI_ACTIVITY_KIND_KERNEL:
	case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
		const CUpti_ActivityKernel10 *k = (const void *)rec;
		if (!is_ignored(k->streamId))
			keep_act(k->correlationId, k->start, k->end);
		return;
	}
	case CUPTI_ACTIVITY_KIND_MEMCPY: {
		const CUpti_ActivityMemcpy6 *m = (const void *)rec;
		if (!is_ignored(m->streamId))
			keep_act(m->correlationId, m->start, m->end);
		return;
	}
	case CUPTI_ACTIVITY_KIND_MEMSET: {
		const CUpti_ActivityMemset4 *m = (const void *)rec;
		if (!is_ignored(m->streamId))
			keep_act(m->correlationId, m->start, m->end);
		return;
	}
	default:
		return;
	}
}

/* Hand one matched operation to the sink. */
static void
deliver(uint64_t seq, uint64_t start, uint64_t end, void *ctx)
{
	(void)ctx;
	atomic_fetch_add(&tracer.delivered, 1);
	if (tracer.sink_fn != NULL)
		tracer.sink_fn(seq, start, end, tracer.sink_ctx);
}

static void CUPTIAPI
buffer_requested(uint8_t **buffer, size_t *size, size_t *maxNumRecords)
{
	*buffer = aligned_alloc(8, CUPTI_BUFFER_BYTES);
	*size = *buffer ? CUPTI_BUFFER_BYTES : 0;
	*maxNumRecords = 0;
}

static void CUPTIAPI
buffer_completed(CUcontext ctx, uint32_t streamId, uint8_t *buffer, size_t size, size_t validSize)
{
	CUpti_Activity *rec = NULL;

	(void)ctx;
	(void)streamId;
	(void)size;
	pthread_mutex_lock(&tracer.rec_lock);
	while (cupti.ActivityGetNextRecord(buffer, validSize, &rec) == CUPTI_SUCCESS)
		take_record(rec);
	pthread_mutex_unlock(&tracer.rec_lock);
	free(buffer);
}

static const char *
result_string(CUptiResult r)
{
	const char *s = NULL;

	if (cupti.GetResultString == NULL || cupti.GetResultString(r, &s) != CUPTI_SUCCESS || !s)
		return "unknown CUPTI error";
	return s;
}

/* dl_iterate_phdr callback: the directory of the loaded libcudart, if any. */
static int
find_cudart(struct dl_phdr_info *info, size_t n, void *data)
{
	(void)n;
	const char *slash = info->dlpi_name ? strrchr(info->dlpi_name, '/') : NULL;
	if (slash == NULL || strncmp(slash + 1, "libcudart.so", 12) != 0)
		return 0;
	size_t len = (size_t)(slash - info->dlpi_name);
	if (len >= PATH_MAX)
		return 0;
	memcpy(data, info->dlpi_name, len);
	((char *)data)[len] = '\0';
	return 1;
}

/* Remember the path of the library in use (truncated if absurdly long). */
static void
set_path(const char *p)
{
	size_t n = strnlen(p, sizeof tracer.cupti_path - 1);

	memcpy(tracer.cupti_path, p, n);
	tracer.cupti_path[n] = '\0';
}

/* Try one candidate; returns the handle or NULL. */
static void *
try_open(const char *path, int flags)
{
	void *h = dlopen(path, flags);

	if (h == NULL)
		return NULL;
	struct link_map *lm = NULL;
	if ((flags & RTLD_NOLOAD) && dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name)
		set_path(lm->l_name);
	else
		set_path(path);
	return h;
}

/* Load libcupti as the header explains; NULL after saying why. */
static void *
load_cupti(const char *lib_path)
{
	char path[PATH_MAX + 64];
	void *h;

	if (lib_path != NULL && lib_path[0] != '\0') {
		h = try_open(lib_path, RTLD_NOW | RTLD_LOCAL);
		if (h == NULL)
			ebb_log(EBB_LOG_WARN, "cannot load EBB_CUPTI_LIB=%s (%s); running without GPU times",
			    lib_path, dlerror());
		return h;
	}
	if ((h = try_open(CUPTI_SONAME, RTLD_NOW | RTLD_NOLOAD)) != NULL)
		return h;
	const char *home = getenv("CUDA_HOME");
	const char *dirs[] = { home, "/usr/local/cuda", NULL };
	for (int i = 0; i < 2; i++) {
		if (dirs[i] == NULL || dirs[i][0] == '\0')
			continue;
		snprintf(path, sizeof path, "%s/lib64/%s", dirs[i], CUPTI_SONAME);
		if ((h = try_open(path, RTLD_NOW | RTLD_LOCAL)) != NULL)
			return h;
		snprintf(path, sizeof path, "%s/extras/CUPTI/lib64/%s", dirs[i], CUPTI_SONAME);
		if ((h = try_open(path, RTLD_NOW | RTLD_LOCAL)) != NULL)
			return h;
	}
	char dir[PATH_MAX];
	if (dl_iterate_phdr(find_cudart, dir)) {
		snprintf(path, sizeof path, "%s/%s", dir, CUPTI_SONAME);
		if ((h = try_open(path, RTLD_NOW | RTLD_LOCAL)) != NULL)
			return h;
	}
	ebb_log(EBB_LOG_WARN, "%s not found (not loaded, not in $CUDA_HOME or /usr/local/cuda, "
	    "not beside libcudart); running without GPU times (set EBB_CUPTI_LIB, or EBB_CUPTI=0 "
	    "to silence this)", CUPTI_SONAME);
	return NULL;
}

static int
resolve(void *h)
{
#define GET(name) (*(void **)&cupti.name = ebb_real_dlsym(h, "cupti" #name)) == NULL
	if (GET(ActivityRegisterCallbacks) || GET(ActivityEnable) || GET(ActivityDisable) ||
	    GET(ActivityFlushAll) || GET(ActivityGetNextRecord) ||
	    GET(ActivityPushExternalCorrelationId) || GET(ActivityPopExternalCorrelationId) ||
	    GET(GetTimestamp) || GET(GetResultString) || GET(Finalize))
		return -1;
#undef GET
	*(void **)&cupti.GetStreamIdEx = ebb_real_dlsym(h, "cuptiGetStreamIdEx");
	return 0;
}

int
ebb_cupti_attach(const char *lib_path, ebb_cupti_sink sink, void *ctx)
{
	static int said, done;

	if (atomic_load(&tracer.attached))
		return 0;
	if (done)
		return -1;	/* once per process: a profiler may hold CUPTI by now */
	done = 1;
	if (tracer.cupti_lib == NULL) {
		if (said)
			return -1;
		tracer.cupti_lib = load_cupti(lib_path);
		if (tracer.cupti_lib == NULL) {
			said = 1;
			return -1;
		}
		if (resolve(tracer.cupti_lib) < 0) {
			ebb_log(EBB_LOG_WARN, "%s lacks the CUPTI activity API ebb needs; running without "
			    "GPU times", tracer.cupti_path);
			said = 1;
			tracer.cupti_lib = NULL;
			return -1;
		}
	}
	tracer.sink_fn = sink;
	tracer.sink_ctx = ctx;
	CUptiResult r = cupti.ActivityRegisterCallbacks(buffer_requested, buffer_completed);
	size_t enabled = 0;
	if (r == CUPTI_SUCCESS) {
		for (; enabled < NKINDS; enabled++) {
			r = cupti.ActivityEnable(kinds[enabled]);
			if (r != CUPTI_SUCCESS)
				break;
		}
	}
	if (r != CUPTI_SUCCESS) {
		while (enabled > 0)
			cupti.ActivityDisable(kinds[--enabled]);
		if (!said)
			ebb_log(EBB_LOG_WARN, "CUPTI (%s) is not available to ebb: %s (another profiler "
			    "may hold it); running without GPU times", tracer.cupti_path, result_string(r));
		said = 1;
		return -1;
	}
	pthread_mutex_lock(&tracer.rec_lock);
	records_clear();
	resolve_ignored();
	pthread_mutex_unlock(&tracer.rec_lock);
	atomic_store(&tracer.attached, 1);
	ebb_log(EBB_LOG_INFO, "CUPTI attached (%s)", tracer.cupti_path);
	return 0;
}

int
ebb_cupti_attached(void)
{
	return atomic_load_explicit(&tracer.attached, memory_order_relaxed);
}

void
ebb_cupti_push(uint64_t seq)
{
	uint64_t ts;

	if (!ebb_cupti_attached())
		return;
	if (cupti.GetTimestamp(&ts) == CUPTI_SUCCESS) {
		pthread_mutex_lock(&tracer.rec_lock);
		if (room((void **)&tracer.recs.ops, tracer.recs.nops, &tracer.recs.cops, sizeof *tracer.recs.ops) == 0)
			tracer.recs.ops[tracer.recs.nops++] = (struct cm_op){ ts, seq };
		else
			tracer.recs.dropped++;
		pthread_mutex_unlock(&tracer.rec_lock);
	}
	cupti.ActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, seq);
}

void
ebb_cupti_pop(void)
{
	uint64_t last;

	/* (paused meanwhile by another thread: the id pushed is popped all the
	 * same, or later activities of this thread would carry it) */
	if (ebb_cupti_attached() || ebb_cupti_paused())
		cupti.ActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &last);
}

/* Match the records kept so far and deliver their times; the records go. */
static void
match_kept(void)
{
	pthread_mutex_lock(&tracer.rec_lock);
	struct records mine = tracer.recs;
	memset(&tracer.recs, 0, sizeof tracer.recs);
	pthread_mutex_unlock(&tracer.rec_lock);
	struct cm_stats now;
	if (cupti_match(mine.ext, mine.next, mine.api, mine.napi, mine.act, mine.nact, mine.ops,
	    mine.nops, deliver, NULL, &now) < 0)
		ebb_log(EBB_LOG_WARN, "out of memory matching %zu CUPTI records; no GPU times",
		    mine.nact);
	if (mine.dropped > 0)
		ebb_log(EBB_LOG_WARN, "%llu CUPTI records were not kept (memory or the %u-record cap)",
		    (unsigned long long)mine.dropped, RECORDS_MAX);
	else {
		/* over every flush and the detach */
		tracer.last_stats.direct += now.direct;
		tracer.last_stats.nested += now.nested;
		tracer.last_stats.timed += now.timed;
		tracer.last_stats.unmatched += now.unmatched;
	}
	free(mine.ext);
	free(mine.api);
	free(mine.act);
	free(mine.ops);
}

uint64_t
ebb_cupti_flush(void)
{
	if (!atomic_load(&tracer.attached))
		return atomic_load(&tracer.delivered);
	cupti.ActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	match_kept();
	return atomic_load(&tracer.delivered);
}

/* Stop recording: every record flushed, the activities disabled. */
static void
stop_recording(void)
{
	cupti.ActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	for (size_t i = 0; i < NKINDS; i++)
		cupti.ActivityDisable(kinds[i]);
	cupti.ActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
}

uint64_t
ebb_cupti_pause(void)
{
	if (!atomic_exchange(&tracer.attached, 0))
		return atomic_load(&tracer.delivered);
	stop_recording();
	match_kept();
	atomic_store(&tracer.paused, 1);
	ebb_log(EBB_LOG_INFO, "CUPTI paused: %llu operations timed so far",
	    (unsigned long long)atomic_load(&tracer.delivered));
	return atomic_load(&tracer.delivered);
}

int
ebb_cupti_resume(void)
{
	if (!atomic_load(&tracer.paused))
		return -1;
	pthread_mutex_lock(&tracer.rec_lock);
	records_clear();
	pthread_mutex_unlock(&tracer.rec_lock);
	size_t enabled = 0;
	CUptiResult r = CUPTI_SUCCESS;
	for (; enabled < NKINDS; enabled++)
		if ((r = cupti.ActivityEnable(kinds[enabled])) != CUPTI_SUCCESS)
			break;
	if (r != CUPTI_SUCCESS) {
		while (enabled > 0)
			cupti.ActivityDisable(kinds[--enabled]);
		ebb_log(EBB_LOG_WARN, "CUPTI could not record again: %s; the iteration is learned "
		    "again without GPU times", result_string(r));
		return -1;
	}
	atomic_store(&tracer.paused, 0);
	atomic_store(&tracer.attached, 1);
	ebb_log(EBB_LOG_INFO, "CUPTI recording again");
	return 0;
}

int
ebb_cupti_paused(void)
{
	return atomic_load_explicit(&tracer.paused, memory_order_relaxed);
}

uint64_t
ebb_cupti_detach(void)
{
	/* (paused: nothing recorded since the pause, which matched the rest) */
	if (!atomic_exchange(&tracer.paused, 0)) {
		if (!atomic_exchange(&tracer.attached, 0))
			return atomic_load(&tracer.delivered);
		stop_recording();
	}
	CUptiResult r = cupti.Finalize();
	if (r != CUPTI_SUCCESS)
		ebb_log(EBB_LOG_INFO, "cuptiFinalize: %s", result_string(r));
	match_kept();
	ebb_log(EBB_LOG_INFO, "CUPTI detached: %llu operations timed (%llu directly, %llu and %llu "
	    "through libcudart's calls), %llu activities of others",
	    (unsigned long long)atomic_load(&tracer.delivered), (unsigned long long)tracer.last_stats.direct,
	    (unsigned long long)tracer.last_stats.nested, (unsigned long long)tracer.last_stats.timed,
	    (unsigned long long)tracer.last_stats.unmatched);
	return atomic_load(&tracer.delivered);
}

uint64_t
ebb_cupti_timestamp(void)
{
	uint64_t t = 0;

	if (ebb_cupti_attached() && cupti.GetTimestamp(&t) != CUPTI_SUCCESS)
		t = 0;
	return t;
}

const char *
ebb_cupti_path(void)
{
	return tracer.cupti_path;
}

void
ebb_cupti_match_stats(uint64_t *direct, uint64_t *nested, uint64_t *stamped, uint64_t *unmatched)
{
	*direct = tracer.last_stats.direct;
	*nested = tracer.last_stats.nested;
	*stamped = tracer.last_stats.timed;
	*unmatched = tracer.last_stats.unmatched;
}
