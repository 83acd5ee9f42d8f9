/*
 * realdl.h: the C library's dlsym, for ebb's own look-ups (it overrides
 * dlsym for everyone else). Free of CUDA headers so cupti/ can use it.
 */
#ifndef EBB_REALDL_H
#define EBB_REALDL_H

/* dlsym as glibc implements it, never ebb's override. */
void *ebb_real_dlsym(void *handle, const char *name);

#endif
