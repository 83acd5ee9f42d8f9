/*
 * callsite.h: a fingerprint of where an allocation came from.
 *
 * The return addresses of the first few frames above ebb (libunwind's
 * unw_backtrace), hashed. Two allocations made by the same code path get
 * the same fingerprint within one process; the planner uses it to check
 * buffer identities across iterations.
 */
#ifndef EBB_CALLSITE_H
#define EBB_CALLSITE_H

#include <stdint.h>

/* Hash up to depth frames of the caller's stack above libebb; 0 if depth is 0. */
uint64_t ebb_callsite(unsigned depth);

#endif
