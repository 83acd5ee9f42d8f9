/*
 * ebb.h: process-wide state of the preloaded library and its initialisation.
 *
 * Initialisation is split in two, both idempotent behind pthread_once:
 *   - ebb_init_conf(): parse the EBB_ variables and set up logging. Runs from
 *     the library constructor, so it costs a process that never touches CUDA
 *     nothing more.
 *   - ebb_ensure_init(): everything else (find libcuda, the engine, the
 *     trace). Runs on the first interposed call.
 */
#ifndef EBB_EBB_H
#define EBB_EBB_H

#include <stdatomic.h>

#include "conf.h"

extern struct ebb_conf ebb_conf;

/* Set once ebb_ensure_init() has finished (successfully or not). */
extern atomic_int ebb_ready;

/* Nonzero when ebb records and acts (mode other than off, driver found,
 * not a child that was forked from a process that had ebb running). */
extern atomic_int ebb_enabled;

/* Nonzero on a thread while ebb's own code runs on it: driver calls that
 * reach a wrapper then go straight to the driver. */
extern _Thread_local int ebb_inside;

void ebb_init_conf(void);
void ebb_init_slow(void);

/* Make sure ebb is initialised; cheap after the first call. */
static inline void
ebb_ensure_init(void)
{
	if (__builtin_expect(!atomic_load_explicit(&ebb_ready, memory_order_acquire), 0))
		ebb_init_slow();
}

/* Whether a wrapper should record this call. */
static inline int
ebb_hooks_on(void)
{
	ebb_ensure_init();
	return atomic_load_explicit(&ebb_enabled, memory_order_relaxed) && !ebb_inside;
}

#endif
