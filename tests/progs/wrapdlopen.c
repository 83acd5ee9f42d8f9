/*
 * wrapdlopen.c: a library preloaded beside libebb.so that wraps dlopen, as
 * sanitizers and profilers do. Its dlopen finds the next one with
 * dlsym(RTLD_NEXT, "dlopen") at its first call; it counts its calls and
 * prints the count at exit, so a test can tell that it was in the path.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void *(*next_dlopen)(const char *, int);
static int calls;

void *dlopen(const char *file, int mode);

void *
dlopen(const char *file, int mode)
{
	if (next_dlopen == NULL) {
		next_dlopen = (void *(*)(const char *, int))dlsym(RTLD_NEXT, "dlopen");
		if (next_dlopen == NULL || next_dlopen == dlopen) {
			static const char msg[] = "wrapdlopen: dlsym(RTLD_NEXT, \"dlopen\") found no next dlopen\n";
			write(2, msg, sizeof msg - 1);
			_exit(3);
		}
	}
	__atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED);
	return next_dlopen(file, mode);
}

__attribute__((destructor)) static void
report(void)
{
	fprintf(stderr, "wrapdlopen: %d calls\n", calls);
}
