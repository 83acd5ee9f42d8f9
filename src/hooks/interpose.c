/*
 * interpose.c: how calls reach ebb.
 *
 * Three paths lead a program to a driver function, and ebb stands on each:
 *   1. dlsym(handle, "cuX"): libebb overrides dlsym and hands back its
 *      wrapper (older libcudart, JAX, anything that dlopens libcuda).
 *   2. cuGetProcAddress / cuGetProcAddress_v2 (libcudart 11.3 and later):
 *      ebb forwards to the driver, then swaps the driver's pointer for the
 *      wrapper of that exact variant, so the version and per-thread-stream
 *      flag the caller asked for are honoured by the driver itself.
 *   3. Plain ELF binding (programs linked with -lcuda): libebb exports the
 *      wrappers under the driver's ELF names and, preloaded, comes first.
 */
#include "config.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "ebb.h"
#include "interpose.h"
#include "log.h"

struct ebb_real_table ebb_real;

/* Declarations of the wrappers (defined in hooks.c) come from cuda.h. */
const struct ebb_sym ebb_syms[EBB_SYM_COUNT] = {
#define EBB_HAND(elf, base, version, variant, params, args) \
	{ #elf, #base, version, #variant[0], (void *)elf },
#define EBB_GEN(elf, base, version, variant, params, args, op) \
	{ #elf, #base, version, #variant[0], (void *)elf },
#include "syms.def"
};

/* Slot in ebb_real of each interposed entry, by id. */
static void **const real_slot[EBB_SYM_COUNT] = {
#define EBB_HAND(elf, base, version, variant, params, args) (void **)&ebb_real.elf,
#define EBB_GEN(elf, base, version, variant, params, args, op) (void **)&ebb_real.elf,
#include "syms.def"
};

/* The functions ebb calls but does not interpose. */
static const struct {
	const char *elf, *base;
	int version;
	void **slot;
} drv_syms[] = {
#define EBB_DRV(elf, base, version, params) { #elf, #base, version, (void **)&ebb_real.elf },
#include "syms.def"
};

/* ---- the libc dlsym ---- */

typedef void *(*dlsym_fn)(void *, const char *);
static dlsym_fn libc_dlsym;

/* The same, where the dlsym override below jumps to it. */
EBB_HIDDEN __attribute__((used)) void *(*ebb_libc_dlsym_fn)(void *, const char *);

/*
 * The sanitizers' runtimes look up what they intercept through dlsym while
 * they start, before ASan's shadow memory or TSan's thread state exists:
 * the override's path to glibc's dlsym is not instrumented.
 */
#define EBB_NO_SANITIZE __attribute__((no_sanitize_address, no_sanitize_thread))

/* Find glibc's dlsym without going through our own override, once found.
 * No pthread_once: a sanitizer's runtime calls dlsym while it starts, and
 * its pthread_once interceptor cannot run then. Threads that race here
 * find the same function and store the same pointer. */
EBB_NO_SANITIZE static void
find_libc_dlsym(void)
{
	static const char *const versions[] = { "GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17", NULL };
	dlsym_fn f = NULL;

	if (__atomic_load_n(&libc_dlsym, __ATOMIC_ACQUIRE) != NULL)
		return;
	for (int i = 0; versions[i] && f == NULL; i++)
		f = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", versions[i]);
	__atomic_store_n(&ebb_libc_dlsym_fn, f, __ATOMIC_RELEASE);
	__atomic_store_n(&libc_dlsym, f, __ATOMIC_RELEASE);
	if (f == NULL)
		ebb_log(EBB_LOG_ERROR, "cannot find the C library's dlsym; ebb cannot forward dlsym calls");
}

void *
ebb_real_dlsym(void *handle, const char *name)
{
	find_libc_dlsym();
	dlsym_fn f = __atomic_load_n(&libc_dlsym, __ATOMIC_ACQUIRE);
	return f != NULL ? f(handle, name) : NULL;
}

/* ---- resolution of the driver ---- */

/* Identity map from the driver's pointer to our entry: open addressing. */
#define REAL_MAP_SIZE 512
static struct {
	void *real;
	int id;
} real_map[REAL_MAP_SIZE];

static unsigned
ptr_hash(const void *p)
{
	uint64_t x = (uint64_t)(uintptr_t)p;
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	return (unsigned)x & (REAL_MAP_SIZE - 1);
}

static void
real_map_put(void *real, int id)
{
	unsigned h = ptr_hash(real);
	while (real_map[h].real != NULL) {
		if (real_map[h].real == real)
			return;	/* two variants share one function: keep the first */
		h = (h + 1) & (REAL_MAP_SIZE - 1);
	}
	real_map[h].real = real;
	real_map[h].id = id;
}

static int
real_map_get(const void *real)
{
	unsigned h = ptr_hash(real);
	while (real_map[h].real != NULL) {
		if (real_map[h].real == real)
			return real_map[h].id;
		h = (h + 1) & (REAL_MAP_SIZE - 1);
	}
	return -1;
}

/* Whether p is one of ebb's own wrappers. */
static int
is_wrapper(const void *p)
{
	for (int i = 0; i < EBB_SYM_COUNT; i++)
		if (ebb_syms[i].wrapper == p)
			return 1;
	return p == (void *)cuGetProcAddress || p == (void *)cuGetProcAddress_v2;
}

/*
 * Resolve one entry the way a caller of cuGetProcAddress would get it. A
 * driver whose own function table binds through the global symbol scope
 * (a library linked without -Bsymbolic) hands back ebb's wrapper, since
 * libebb comes first in that scope: then ask the library handle itself,
 * which looks in the library before anything else.
 */
static void *
resolve_one(void *lib, const char *elf, const char *base, int version, char variant)
{
	void *p = NULL;

	if (ebb_real.cuGetProcAddress_v2) {
		CUdriverProcAddressQueryResult st;
		cuuint64_t flags = variant == 'P' ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
		    : CU_GET_PROC_ADDRESS_LEGACY_STREAM;
		if (ebb_real.cuGetProcAddress_v2(base, &p, version, flags, &st) != CUDA_SUCCESS)
			p = NULL;
	}
	if (p == NULL || is_wrapper(p))
		p = ebb_real_dlsym(lib, elf);
	return is_wrapper(p) ? NULL : p;
}

int
ebb_interpose_resolve(void)
{
	void *lib = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);

	if (lib == NULL)
		lib = dlopen("libcuda.so.1", RTLD_LAZY);
	if (lib == NULL) {
		ebb_log(EBB_LOG_WARN, "cannot load the CUDA driver (libcuda.so.1: %s); ebb is off", dlerror());
		return -1;
	}
	ebb_real.cuGetProcAddress = (CUresult (*)(const char *, void **, int, cuuint64_t))
	    ebb_real_dlsym(lib, "cuGetProcAddress");
	ebb_real.cuGetProcAddress_v2 = (CUresult (*)(const char *, void **, int, cuuint64_t,
	    CUdriverProcAddressQueryResult *))ebb_real_dlsym(lib, "cuGetProcAddress_v2");

	for (int i = 0; i < EBB_SYM_COUNT; i++) {
		const struct ebb_sym *s = &ebb_syms[i];
		void *p = resolve_one(lib, s->elf, s->base, s->version, s->variant);
		*real_slot[i] = p;
		if (p != NULL)
			real_map_put(p, i);
		else
			ebb_log(EBB_LOG_DEBUG, "driver has no %s", s->elf);
	}
	for (size_t i = 0; i < sizeof drv_syms / sizeof drv_syms[0]; i++)
		*drv_syms[i].slot = resolve_one(lib, drv_syms[i].elf, drv_syms[i].base,
		    drv_syms[i].version, 'L');
	/* lib stays open: the driver lives as long as the process. */
	return 0;
}

void *
ebb_interpose_by_elf(const char *name)
{
	if (name[0] == 'n')
		return ebb_nccl_by_name(name);
	if (strcmp(name, "cuGetProcAddress") == 0)
		return (void *)cuGetProcAddress;
	if (strcmp(name, "cuGetProcAddress_v2") == 0)
		return (void *)cuGetProcAddress_v2;
	for (int i = 0; i < EBB_SYM_COUNT; i++)
		if (strcmp(ebb_syms[i].elf, name) == 0)
			return ebb_syms[i].wrapper;
	return NULL;
}

/* Whether ebb wraps some variant of base. */
static int
base_is_wrapped(const char *base)
{
	for (int i = 0; i < EBB_SYM_COUNT; i++)
		if (strcmp(ebb_syms[i].base, base) == 0)
			return 1;
	return 0;
}

void *
ebb_interpose_wrap(const char *symbol, void *real, int version, cuuint64_t flags)
{
	static int warned;

	if (real == NULL || symbol == NULL)
		return real;
	if (strcmp(symbol, "cuGetProcAddress") == 0)
		return version >= 12000 ? (void *)cuGetProcAddress_v2 : (void *)cuGetProcAddress;
	int id = real_map_get(real);
	if (id >= 0 && *real_slot[id] == real)
		return ebb_syms[id].wrapper;
	if (is_wrapper(real))
		return real;	/* the driver's table bound to libebb already */
	if (base_is_wrapped(symbol))
		ebb_log_once(&warned, EBB_LOG_WARN,
		    "%s for CUDA version %d (flags %llu) is a variant ebb does not know; "
		    "calls through it are not seen (further such variants are not reported)",
		    symbol, version, (unsigned long long)flags);
	return real;
}

/* ---- the exported entry points of this file ---- */

/* cuGetProcAddress, CUDA 11.3 ABI (4 arguments). */
EBB_EXPORT CUresult
cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
	ebb_ensure_init();
	if (ebb_real.cuGetProcAddress == NULL)
		return CUDA_ERROR_NOT_INITIALIZED;
	CUresult r = ebb_real.cuGetProcAddress(symbol, pfn, cudaVersion, flags);
	if (r == CUDA_SUCCESS && pfn != NULL)
		*pfn = ebb_interpose_wrap(symbol, *pfn, cudaVersion, flags);
	return r;
}

/* cuGetProcAddress_v2, CUDA 12 ABI (5 arguments). */
EBB_EXPORT CUresult
cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
    CUdriverProcAddressQueryResult *symbolStatus)
{
	ebb_ensure_init();
	if (ebb_real.cuGetProcAddress_v2 == NULL)
		return CUDA_ERROR_NOT_INITIALIZED;
	CUresult r = ebb_real.cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, symbolStatus);
	if (r == CUDA_SUCCESS && pfn != NULL)
		*pfn = ebb_interpose_wrap(symbol, *pfn, cudaVersion, flags);
	return r;
}

/* Start address of libebb's text, to tell our own dlsym calls apart. */
static int
caller_is_exempt(const void *caller)
{
	Dl_info info;
	static void *self_base;

	if (caller == NULL || dladdr(caller, &info) == 0 || info.dli_fname == NULL)
		return 0;
	if (self_base == NULL) {
		Dl_info me;
		if (dladdr((void *)caller_is_exempt, &me) != 0)
			self_base = me.dli_fbase;
	}
	if (info.dli_fbase == self_base)
		return 1;
	/* CUPTI's own driver calls are not the job's. */
	return strstr(info.dli_fname, "libcupti") != NULL;
}

/*
 * What the dlsym override answers for (handle, name), asked from caller: a
 * wrapper of ebb's for a driver or NCCL name whose real function exists
 * (NULL where it does not), or DLSYM_FORWARD for everything else, which
 * glibc's dlsym then answers itself.
 */
#define DLSYM_FORWARD ((void *)1)

/* The real function a caller asking dlsym(RTLD_NEXT, name) for a wrapped
 * name is after: the driver's (ebb_real) or NCCL's. ebb's wrapper forwards
 * to exactly that, whatever the caller's place in the load order. */
static void *
real_for_next(const char *name)
{
	if (name[0] == 'n')
		return ebb_nccl_real_by_name(name);
	if (strcmp(name, "cuGetProcAddress") == 0)
		return (void *)ebb_real.cuGetProcAddress;
	if (strcmp(name, "cuGetProcAddress_v2") == 0)
		return (void *)ebb_real.cuGetProcAddress_v2;
	for (int i = 0; i < EBB_SYM_COUNT; i++)
		if (strcmp(ebb_syms[i].elf, name) == 0)
			return *real_slot[i];
	return NULL;
}

EBB_HIDDEN void *ebb_dlsym_pick(void *handle, const char *name, const void *caller);

EBB_HIDDEN EBB_NO_SANITIZE __attribute__((used)) void *
ebb_dlsym_pick(void *handle, const char *name, const void *caller)
{
	find_libc_dlsym();
	/* The names first: ebb_inside is reached through __tls_get_addr, which
	 * ASan intercepts and cannot forward before it has started. */
	if (name == NULL || !((name[0] == 'c' && name[1] == 'u') ||
	    (name[0] == 'n' && name[1] == 'c' && name[2] == 'c' && name[3] == 'l')) || ebb_inside)
		return DLSYM_FORWARD;
	void *w = ebb_interpose_by_elf(name);
	if (w == NULL || caller_is_exempt(caller))
		return DLSYM_FORWARD;
	ebb_ensure_init();
	/* Hand out a wrapper only where the real function exists. */
	void *real = handle == RTLD_NEXT ? real_for_next(name) : ebb_real_dlsym(handle, name);
	return real != NULL ? w : NULL;
}

/*
 * The dlsym override. glibc's dlsym resolves RTLD_NEXT against the object
 * its return address lies in, so everything ebb does not answer itself
 * reaches glibc by a tail jump, with the caller's return address still on
 * the stack: RTLD_NEXT then means what it means to the caller, and nothing
 * else runs (a lookup that loaded or opened objects itself would call into
 * whatever wraps dlopen, which ASan does, and which may call dlsym again).
 */
#if defined(__x86_64__)
__asm__(
    "	.text\n"
    "	.globl dlsym\n"
    "	.type dlsym, @function\n"
    "	.p2align 4\n"
    "dlsym:\n"
    "	.cfi_startproc\n"
#if defined(__CET__)
    "	endbr64\n"
#endif
    "	pushq %rdi\n"
    "	.cfi_adjust_cfa_offset 8\n"
    "	pushq %rsi\n"
    "	.cfi_adjust_cfa_offset 8\n"
    "	subq $8, %rsp\n"		/* the call below on a 16-byte boundary */
    "	.cfi_adjust_cfa_offset 8\n"
    "	movq 24(%rsp), %rdx\n"		/* the caller's return address */
    "	call ebb_dlsym_pick\n"
    "	addq $8, %rsp\n"
    "	.cfi_adjust_cfa_offset -8\n"
    "	popq %rsi\n"
    "	.cfi_adjust_cfa_offset -8\n"
    "	popq %rdi\n"
    "	.cfi_adjust_cfa_offset -8\n"
    "	cmpq $1, %rax\n"
    "	je 1f\n"
    "	ret\n"
    "1:	movq ebb_libc_dlsym_fn(%rip), %rax\n"
    "	testq %rax, %rax\n"
    "	je 2f\n"
    "	jmp *%rax\n"
    "2:	ret\n"				/* no glibc dlsym was found: NULL */
    "	.cfi_endproc\n"
    "	.size dlsym, .-dlsym\n");
#elif defined(__aarch64__)
__asm__(
    "	.text\n"
    "	.globl dlsym\n"
    "	.type dlsym, %function\n"
    "	.p2align 4\n"
    "dlsym:\n"
    "	.cfi_startproc\n"
#if defined(__ARM_FEATURE_BTI_DEFAULT)
    "	bti c\n"
#endif
    "	stp x29, x30, [sp, #-32]!\n"
    "	.cfi_def_cfa_offset 32\n"
    "	.cfi_offset 29, -32\n"
    "	.cfi_offset 30, -24\n"
    "	mov x29, sp\n"
    "	stp x0, x1, [sp, #16]\n"
    "	mov x2, x30\n"			/* the caller's return address */
    "	bl ebb_dlsym_pick\n"
    "	mov x9, x0\n"
    "	ldp x0, x1, [sp, #16]\n"
    "	ldp x29, x30, [sp], #32\n"
    "	.cfi_def_cfa_offset 0\n"
    "	.cfi_restore 29\n"
    "	.cfi_restore 30\n"
    "	cmp x9, #1\n"
    "	b.eq 1f\n"
    "	mov x0, x9\n"
    "	ret\n"
    "1:	adrp x10, ebb_libc_dlsym_fn\n"
    "	ldr x10, [x10, #:lo12:ebb_libc_dlsym_fn]\n"
    "	cbz x10, 2f\n"
    "	br x10\n"
    "2:	mov x0, #0\n"
    "	ret\n"
    "	.cfi_endproc\n"
    "	.size dlsym, .-dlsym\n");
#else
#error "ebb's dlsym override is written for x86-64 and aarch64 (interpose.c)"
#endif
