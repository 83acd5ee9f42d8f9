/*
 * launch.h: a kernel launch as its hook saw it, with what it takes to
 * launch it again: the function, the arguments, the grid, the block, the
 * dynamic shared memory and cuLaunchKernelEx's attributes.
 *
 * The hooks fill it from the call's own arguments (pointers into the
 * caller's memory, valid during the call); nothing is copied there. The
 * executor copies what a launch record keeps (src/exec/lrec.h), and only
 * while it records an iteration.
 */
#ifndef EBB_LAUNCH_H
#define EBB_LAUNCH_H

#include <stdint.h>

#include "cuda_compat.h"

/* The entry point a launch came through. */
enum ebb_launch_entry {
	EBB_LAUNCH_PLAIN = 0,	/* cuLaunchKernel(_ptsz) */
	EBB_LAUNCH_EX,		/* cuLaunchKernelEx(_ptsz): a CUlaunchConfig */
	EBB_LAUNCH_COOP		/* cuLaunchCooperativeKernel(_ptsz) */
};

struct ebb_launch {
	CUfunction func;	/* CUfunction or CUkernel, as the call passed it */
	void **params;		/* kernelParams: one pointer to each parameter's value */
	void **extra;		/* the `extra` list (CU_LAUNCH_PARAM_BUFFER_POINTER ...) */
	const CUlaunchAttribute *attrs;	/* EBB_LAUNCH_EX: the config's attributes */
	uint32_t nattrs;	/* how many attrs holds */
	uint32_t grid[3];	/* grid dimensions, x y z */
	uint32_t block[3];	/* block dimensions, x y z */
	uint32_t shmem;		/* dynamic shared memory bytes */
	uint8_t entry;		/* enum ebb_launch_entry */
};

#endif
