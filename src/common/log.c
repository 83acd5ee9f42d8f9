/*
 * log.c: the single non-allocating write(2) path for ebb's messages.
 */
#include "config.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

static atomic_int log_level = EBB_LOG_WARN;

void
ebb_log_set_level(int level)
{
	atomic_store_explicit(&log_level, level, memory_order_relaxed);
}

int
ebb_log_level(void)
{
	return atomic_load_explicit(&log_level, memory_order_relaxed);
}

/* Format and write one line; errno is preserved for the caller. */
static void
log_write(const char *fmt, va_list ap)
{
	char buf[1024];
	int saved = errno;
	int n = snprintf(buf, sizeof buf, "ebb[%d]: ", (int)getpid());

	if (n < 0)
		n = 0;
	int m = vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
	if (m < 0)
		m = 0;
	size_t len = (size_t)n + (size_t)m;
	if (len > sizeof buf - 2)
		len = sizeof buf - 2;
	buf[len++] = '\n';
	const char *p = buf;
	while (len > 0) {
		ssize_t w = write(STDERR_FILENO, p, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break;
		p += w;
		len -= (size_t)w;
	}
	errno = saved;
}

void
ebb_log(int level, const char *fmt, ...)
{
	if (level > ebb_log_level())
		return;
	va_list ap;
	va_start(ap, fmt);
	log_write(fmt, ap);
	va_end(ap);
}

void
ebb_log_once(int *once, int level, const char *fmt, ...)
{
	if (level > ebb_log_level())
		return;
	if (__atomic_exchange_n(once, 1, __ATOMIC_RELAXED))
		return;
	va_list ap;
	va_start(ap, fmt);
	log_write(fmt, ap);
	va_end(ap);
}
