/*
 * cuda_compat.h: the one place where ebb meets cuda.h.
 *
 * __CUDA_API_VERSION_INTERNAL makes cuda.h declare every versioned name
 * (cuMemAlloc_v2 and the old cuMemAlloc, cuLaunchKernel and
 * cuLaunchKernel_ptsz, ...) instead of #defining the plain names to the
 * newest variant, so ebb can define wrappers under their real ELF names.
 * configure requires the CUDA 13.0 headers; a build with them runs against
 * older drivers too, since every entry point is resolved at run time and one
 * that the driver lacks simply stays unresolved.
 */
#ifndef EBB_CUDA_COMPAT_H
#define EBB_CUDA_COMPAT_H

#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#if CUDA_VERSION < 13000
#error "ebb is built against the CUDA 13.0 or later headers (see configure --with-cuda)"
#endif

/* The CUDA version ebb's symbol list describes: requests for newer variants
 * of a wrapped function are handed the driver's own pointer, unwrapped. */
#define EBB_CUDA_HEADER_VERSION CUDA_VERSION

/* Default-stream handles as the driver defines them (cuda.h). */
#define EBB_STREAM_LEGACY ((CUstream)0x1)
#define EBB_STREAM_PER_THREAD ((CUstream)0x2)

#endif
