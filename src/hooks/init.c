/*
 * init.c: starting and stopping ebb inside the job's process.
 */
#include "config.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conf.h"
#include "ebb.h"
#include "engine.h"
#include "interpose.h"
#include "log.h"
#include "trace.h"

extern char **environ;

struct ebb_conf ebb_conf;
atomic_int ebb_ready;
atomic_int ebb_enabled;
_Thread_local int ebb_inside;

static pthread_once_t conf_once = PTHREAD_ONCE_INIT;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static int conf_bad;

static const char *
env_lookup(const char *name, void *ctx)
{
	(void)ctx;
	return getenv(name);
}

static void
load_conf(void)
{
	/* EBB_VERBOSE first, so the other variables' messages honour it. */
	const char *v = getenv("EBB_VERBOSE");
	uint64_t level;
	if (v != NULL && ebb_conf_parse_uint(v, &level) == 0 && level <= 3)
		ebb_log_set_level((int)level);
	ebb_now_ns();	/* the trace's time zero */
	conf_bad = ebb_conf_load(&ebb_conf, env_lookup, NULL);
	conf_bad += ebb_conf_check_unknown(environ);
	ebb_log_set_level((int)ebb_conf.verbose);
	if (conf_bad > 0 && ebb_conf.strict) {
		ebb_log(EBB_LOG_ERROR, "EBB_STRICT=1 and %d EBB_ variable%s above %s wrong: stopping",
		    conf_bad, conf_bad == 1 ? "" : "s", conf_bad == 1 ? "is" : "are");
		_exit(2);
	}
}

void
ebb_init_conf(void)
{
	pthread_once(&conf_once, load_conf);
}

static void atfork_prepare(void) { ebb_engine_atfork_prepare(); }
static void atfork_parent(void) { ebb_engine_atfork_parent(); }

/* A forked child keeps no CUDA context of its parent: ebb steps aside. */
static void
atfork_child(void)
{
	ebb_engine_atfork_child();
	atomic_store(&ebb_enabled, 0);
}

static void
init_all(void)
{
	ebb_inside = 1;
	ebb_init_conf();
	if (ebb_conf.mode != EBB_MODE_OFF && ebb_interpose_resolve() == 0 &&
	    ebb_engine_init(&ebb_conf) == 0) {
		pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
		atomic_store(&ebb_enabled, 1);
		ebb_log(EBB_LOG_INFO, "ebb %s in %s mode", PACKAGE_VERSION,
		    ebb_conf_mode_name(ebb_conf.mode));
	} else if (ebb_conf.mode == EBB_MODE_OFF) {
		ebb_interpose_resolve();
	}
	ebb_inside = 0;
	atomic_store_explicit(&ebb_ready, 1, memory_order_release);
}

void
ebb_init_slow(void)
{
	/* A call from inside initialisation (libcuda's constructors, CUPTI)
	 * finds the once in progress: it must not wait for itself. */
	if (ebb_inside)
		return;
	pthread_once(&init_once, init_all);
}

__attribute__((constructor)) static void
ebb_constructor(void)
{
	ebb_init_conf();
}

__attribute__((destructor)) static void
ebb_destructor(void)
{
	if (atomic_load(&ebb_ready) && atomic_load(&ebb_enabled))
		ebb_engine_shutdown();
}
