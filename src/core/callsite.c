/*
 * callsite.c: call-site fingerprints with libunwind.
 */
#include "config.h"

#include <dlfcn.h>
#include <stddef.h>

#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include "callsite.h"

#define CALLSITE_MAX_FRAMES 64

/* Whether pc lies in libebb itself (its frames are the same for every call). */
static int
in_self(const void *pc)
{
	static void *self_base;	/* threads that race here store the same value */
	Dl_info info;
	void *base = __atomic_load_n(&self_base, __ATOMIC_RELAXED);

	if (base == NULL) {
		if (dladdr((void *)in_self, &info) == 0)
			return 0;
		base = info.dli_fbase;
		__atomic_store_n(&self_base, base, __ATOMIC_RELAXED);
	}
	return dladdr(pc, &info) != 0 && info.dli_fbase == base;
}

uint64_t
ebb_callsite(unsigned depth)
{
	void *pcs[CALLSITE_MAX_FRAMES];
	uint64_t h = 0xcbf29ce484222325ULL;

	if (depth == 0)
		return 0;
	int skip_max = 8;	/* at most this many frames of ebb on top */
	int want = (int)depth + skip_max;
	if (want > CALLSITE_MAX_FRAMES)
		want = CALLSITE_MAX_FRAMES;
	int n = unw_backtrace(pcs, want);
	int i = 0;
	while (i < n && i < skip_max && in_self(pcs[i]))
		i++;
	for (unsigned used = 0; i < n && used < depth; i++, used++) {
		uint64_t x = (uint64_t)(uintptr_t)pcs[i];
		h ^= x;
		h *= 0x100000001b3ULL;
		h ^= h >> 29;
	}
	return h;
}
