/*
 * interpose.h: the lookups behind dlsym() and cuGetProcAddress(), generated
 * from syms.def (core/real.h has the real-function table they fill).
 */
#ifndef EBB_INTERPOSE_H
#define EBB_INTERPOSE_H

#include "cuda_compat.h"
#include "real.h"
#include "realdl.h"

#define EBB_EXPORT __attribute__((visibility("default")))
#define EBB_HIDDEN __attribute__((visibility("hidden")))

enum ebb_sym_id {
#define EBB_HAND(elf, base, version, variant, params, args) EBB_ID_##elf,
#define EBB_GEN(elf, base, version, variant, params, args, op) EBB_ID_##elf,
#include "syms.def"
	EBB_SYM_COUNT
};

/* One interposed entry point. */
struct ebb_sym {
	const char *elf;	/* exported ELF name */
	const char *base;	/* name given to cuGetProcAddress */
	int version;		/* CUDA version of this variant */
	char variant;		/* 'N', 'L' or 'P' (see syms.def) */
	void *wrapper;		/* ebb's function */
};

extern const struct ebb_sym ebb_syms[EBB_SYM_COUNT];

/*
 * Find libcuda and fill ebb_real. Called once, from ebb's initialisation.
 * Returns 0, or -1 when no CUDA driver can be loaded (then every wrapper
 * that is reached returns CUDA_ERROR_NOT_FOUND, and the cuGetProcAddress
 * wrappers CUDA_ERROR_NOT_INITIALIZED).
 */
int ebb_interpose_resolve(void);


/* ebb's wrapper for an ELF name (cu* in syms.def, nccl* in nccl.c), or NULL. */
void *ebb_interpose_by_elf(const char *name);

/*
 * Given what the real cuGetProcAddress returned for symbol, return what
 * the caller should get: ebb's wrapper of that exact variant, or the
 * driver's pointer unchanged when ebb does not wrap it.
 */
void *ebb_interpose_wrap(const char *symbol, void *real, int version, cuuint64_t flags);

/* NCCL: the wrapper for a name, or NULL. */
void *ebb_nccl_by_name(const char *name);

/* NCCL: the real function of a wrapped name in the libnccl.so.2 the job
 * loaded, or NULL (none loaded, or not a wrapped name). Says nothing. */
void *ebb_nccl_real_by_name(const char *name);

#endif
