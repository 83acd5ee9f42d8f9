/*
 * pool.c: the memory pool whose allocations ebb serves in offload mode
 * (cuMemAllocFromPoolAsync): the default pool of the current context's
 * device at the first question, while no other location has been given
 * access to it.
 */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

#include "conf.h"
#include "cuda_compat.h"
#include "engine.h"
#include "engine_int.h"
#include "log.h"
#include "real.h"

/* The pool ebb serves (ebb_engine_pool_served), found once, at the first
 * question (every allocation from a pool asks). */
static pthread_once_t pool_once = PTHREAD_ONCE_INIT;
static struct {
	CUmemoryPool pool;	/* the device's default pool, NULL if none */
	CUdevice dev;		/* that pool's device */
	atomic_int shared;	/* another device was given access: not served */
} served_pool;

/* Find the pool ebb serves: the default pool of the current context's
 * device; none when the driver cannot say. */
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

/* Whether ebb serves allocations from pool (engine.h). */
int
ebb_engine_pool_served(CUmemoryPool pool)
{
	if (engine.conf->mode != EBB_MODE_OFFLOAD || pool == NULL)
		return 0;
	pthread_once(&pool_once, find_served_pool);
	return pool == served_pool.pool && !atomic_load_explicit(&served_pool.shared,
	    memory_order_relaxed);
}

/* The job set access to pool: the served pool shared with another location
 * is served no more. */
void
ebb_engine_on_pool_access(CUmemoryPool pool, const CUmemAccessDesc *map, size_t count)
{
	if (engine.conf->mode != EBB_MODE_OFFLOAD || map == NULL || !ebb_engine_pool_served(pool))
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
