/*
 * segvtrace.c: a diagnostic library for the GPU machine, which has no gdb:
 * preloaded (after libebb.so), it prints the native stack of a thread that
 * takes SIGSEGV, SIGBUS, SIGILL, SIGFPE or SIGABRT, each frame as
 * "object+offset" for addr2line, then lets the signal take its course.
 *
 *   cc -shared -fPIC -O1 -o segvtrace.so tests/gpu/segvtrace.c -ldl
 *   LD_PRELOAD="libebb.so segvtrace.so" python3 job.py
 *
 * Python's faulthandler (PYTHONFAULTHANDLER=1) shows the Python side.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static struct sigaction previous[32];

static void
say(const char *s)
{
	ssize_t r = write(2, s, strlen(s));
	(void)r;
}

static void
on_fatal(int sig, siginfo_t *si, void *uc)
{
	void *pcs[64];
	char line[512];
	int n = backtrace(pcs, 64);

	snprintf(line, sizeof line, "segvtrace: signal %d (addr %p) in thread %d; %d frames:\n",
	    sig, si ? si->si_addr : NULL, (int)gettid(), n);
	say(line);
	for (int i = 0; i < n; i++) {
		Dl_info info;
		if (dladdr(pcs[i], &info) != 0 && info.dli_fname != NULL)
			snprintf(line, sizeof line, "  #%d %s+0x%lx (%s)\n", i, info.dli_fname,
			    (unsigned long)((char *)pcs[i] - (char *)info.dli_fbase),
			    info.dli_sname ? info.dli_sname : "?");
		else
			snprintf(line, sizeof line, "  #%d %p\n", i, pcs[i]);
		say(line);
	}
	/* hand the signal on: to the handler before this one, else the default */
	struct sigaction *prev = &previous[sig];
	if ((prev->sa_flags & SA_SIGINFO) && prev->sa_sigaction != NULL) {
		prev->sa_sigaction(sig, si, uc);
		return;
	}
	if (prev->sa_handler != SIG_DFL && prev->sa_handler != SIG_IGN && prev->sa_handler != NULL) {
		prev->sa_handler(sig);
		return;
	}
	signal(sig, SIG_DFL);
	raise(sig);
}

__attribute__((constructor)) static void
install(void)
{
	static const int sigs[] = { SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT };
	struct sigaction sa;

	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_fatal;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND;
	sigemptyset(&sa.sa_mask);
	void *warm[1];
	backtrace(warm, 1);	/* loads libgcc_s now, not in the handler */
	for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
		sigaction(sigs[i], &sa, &previous[sigs[i]]);
}
