/*
 * callsite.c: call-site fingerprints with libunwind.
 */
#include "config.h"

#include <link.h>
#include <stddef.h>
#include <stdint.h>

#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include "callsite.h"

#define CALLSITE_MAX_FRAMES 64

/* libebb's loaded segments, [lo, hi): found once with dl_iterate_phdr, so
 * that telling ebb's frames apart is two compares (dladdr takes the loader's
 * lock and searches the object's symbols, thousands of instructions a frame,
 * more in a process with many libraries). */
struct span {
	uintptr_t lo, hi;
};

static int
find_self(struct dl_phdr_info *info, size_t size, void *ctx)
{
	struct span *sp = ctx;
	uintptr_t pc = (uintptr_t)find_self, lo = UINTPTR_MAX, hi = 0;

	(void)size;
	for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD)
			continue;
		uintptr_t a = info->dlpi_addr + ph->p_vaddr;
		if (a < lo)
			lo = a;
		if (a + ph->p_memsz > hi)
			hi = a + ph->p_memsz;
	}
	if (pc < lo || pc >= hi)
		return 0;
	sp->lo = lo;
	sp->hi = hi;
	return 1;
}

/* Whether pc lies in libebb itself (its frames are the same for every call). */
static int
in_self(const void *pc)
{
	static uintptr_t self_lo, self_hi;	/* racing threads store the same values */
	uintptr_t hi = __atomic_load_n(&self_hi, __ATOMIC_ACQUIRE);

	if (hi == 0) {
		struct span sp = { 0, 0 };
		if (dl_iterate_phdr(find_self, &sp) == 0)
			return 0;
		__atomic_store_n(&self_lo, sp.lo, __ATOMIC_RELAXED);
		__atomic_store_n(&self_hi, sp.hi, __ATOMIC_RELEASE);
		hi = sp.hi;
	}
	uintptr_t a = (uintptr_t)pc;
	return a >= __atomic_load_n(&self_lo, __ATOMIC_RELAXED) && a < hi;
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
