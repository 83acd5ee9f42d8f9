/*
 * real.h: the CUDA driver's own functions, as ebb calls them for itself,
 * generated from syms.def; hooks/interpose.c finds the driver and fills
 * the table.
 */
#ifndef EBB_REAL_H
#define EBB_REAL_H

#include "cuda_compat.h"

/* The driver's own functions: every interposed entry point and every one ebb
 * calls for itself. NULL where the driver does not have it. ebb's own calls
 * always go through this table, never through its wrappers. */
struct ebb_real_table {
#define EBB_HAND(elf, base, version, variant, params, args) CUresult (*elf) params;
#define EBB_GEN(elf, base, version, variant, params, args, op) CUresult (*elf) params;
#define EBB_DRV(elf, base, version, params) CUresult (*elf) params;
#include "syms.def"
	CUresult (*cuGetProcAddress)(const char *, void **, int, cuuint64_t);
	CUresult (*cuGetProcAddress_v2)(const char *, void **, int, cuuint64_t,
	    CUdriverProcAddressQueryResult *);
};

extern struct ebb_real_table ebb_real;

#endif
