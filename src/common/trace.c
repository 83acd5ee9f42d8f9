/*
 * trace.c: buffered, thread-safe writer of the trace file.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "trace.h"
#include "trace_format.h"

/* The writer's state. */
static struct trace {
	pthread_mutex_t lock;		/* guards the rest; taken after ebb_state_lock (locks.h) */
	int fd;				/* the trace file; -1: no trace */
	char *buf;			/* records not yet written */
	size_t cap, len;		/* its size, and the bytes in it */
	int write_failed;		/* a write failed (said once) */
} trace = { .lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1 };
static _Thread_local int holding;	/* this thread holds trace.lock mid-line */

uint64_t
ebb_now_ns(void)
{
	static uint64_t t0;
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	uint64_t now = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
	if (t0 == 0)
		__atomic_compare_exchange_n(&t0, &(uint64_t){ 0 }, now, 0, __ATOMIC_RELAXED,
		    __ATOMIC_RELAXED);
	return now - t0;
}

/* Write n bytes to the file; on failure say so once and stop tracing. */
static void
write_all(const char *p, size_t n)
{
	while (n > 0 && trace.fd >= 0) {
		ssize_t w = write(trace.fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			if (!trace.write_failed)
				ebb_log(EBB_LOG_WARN, "writing the trace failed (%s); the trace stops here",
				    strerror(errno));
			trace.write_failed = 1;
			close(trace.fd);
			trace.fd = -1;
			return;
		}
		p += w;
		n -= (size_t)w;
	}
}

/* Append to the buffer, writing it out when full. Caller holds trace.lock. */
static void
append(const char *p, size_t n)
{
	if (trace.fd < 0)
		return;
	if (trace.len + n > trace.cap) {
		write_all(trace.buf, trace.len);
		trace.len = 0;
		if (n > trace.cap) {
			write_all(p, n);
			return;
		}
	}
	memcpy(trace.buf + trace.len, p, n);
	trace.len += n;
}

/* Expand %p in path into out. Returns 0, or -1 if it does not fit. */
static int
expand_path(const char *path, char *out, size_t outlen)
{
	size_t o = 0;

	for (const char *s = path; *s; s++) {
		if (s[0] == '%' && s[1] == 'p') {
			int n = snprintf(out + o, outlen - o, "%d", (int)getpid());
			if (n < 0 || (size_t)n >= outlen - o)
				return -1;
			o += (size_t)n;
			s++;
			continue;
		}
		if (o + 1 >= outlen)
			return -1;
		out[o++] = *s;
	}
	out[o] = '\0';
	return 0;
}

/* What a file of this mode is, as the refusal of a trace path says it. */
static const char *
file_kind(mode_t mode)
{
	if (S_ISLNK(mode))
		return "a symbolic link, which ebb does not follow";
	if (S_ISFIFO(mode))
		return "a FIFO";
	if (S_ISCHR(mode))
		return "a character device";
	if (S_ISBLK(mode))
		return "a block device";
	if (S_ISSOCK(mode))
		return "a socket";
	if (S_ISDIR(mode))
		return "a directory";
	return "not a regular file";
}

/*
 * Open file for the trace. A symbolic link at file is not followed
 * (O_NOFOLLOW), so the trace never truncates what the link points to, and
 * the open does not wait for a FIFO's reader (O_NONBLOCK). Only a regular
 * file is kept: it is then truncated and made blocking again. Returns the
 * descriptor, or -1 after one warning naming EBB_TRACE and file.
 */
static int
open_regular(const char *file)
{
	struct stat st;
	int fd = open(file, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);

	if (fd < 0) {
		int e = errno;
		/* ELOOP: a link (or a loop of them); ENXIO: a FIFO without a
		 * reader, or a socket; EISDIR: a directory. lstat says which. */
		if ((e == ELOOP || e == ENXIO || e == EISDIR) && lstat(file, &st) == 0 &&
		    !S_ISREG(st.st_mode))
			ebb_log(EBB_LOG_WARN, "the trace file %s (EBB_TRACE) is %s; no trace is written",
			    file, file_kind(st.st_mode));
		else
			ebb_log(EBB_LOG_WARN, "cannot open the trace file %s (EBB_TRACE): %s; no trace "
			    "is written", file, strerror(e));
		return -1;
	}
	if (fstat(fd, &st) < 0) {
		ebb_log(EBB_LOG_WARN, "cannot stat the trace file %s (EBB_TRACE): %s; no trace is "
		    "written", file, strerror(errno));
		close(fd);
		return -1;
	}
	if (!S_ISREG(st.st_mode)) {
		ebb_log(EBB_LOG_WARN, "the trace file %s (EBB_TRACE) is %s; no trace is written", file,
		    file_kind(st.st_mode));
		close(fd);
		return -1;
	}
	int fl = fcntl(fd, F_GETFL);
	if (ftruncate(fd, 0) < 0 || fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0) {
		ebb_log(EBB_LOG_WARN, "cannot truncate the trace file %s (EBB_TRACE): %s; no trace "
		    "is written", file, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

int
ebb_trace_open(const char *path, size_t bufsize, const char *mode_name)
{
	char file[4096];

	if (path == NULL || path[0] == '\0')
		return -1;
	if (expand_path(path, file, sizeof file) < 0) {
		ebb_log(EBB_LOG_WARN, "EBB_TRACE='%s' is too long; no trace is written", path);
		return -1;
	}
	char *b = malloc(bufsize);
	if (b == NULL) {
		ebb_log(EBB_LOG_WARN, "no memory for a %zu-byte trace buffer; no trace is written",
		    bufsize);
		return -1;
	}
	int fd = open_regular(file);
	if (fd < 0) {
		free(b);
		return -1;
	}
	pthread_mutex_lock(&trace.lock);
	trace.buf = b;
	trace.cap = bufsize;
	trace.len = 0;
	trace.fd = fd;
	trace.write_failed = 0;
	char head[256];
	struct timespec rt;
	clock_gettime(CLOCK_REALTIME, &rt);
	int n = snprintf(head, sizeof head, "%s %d ebb=%s pid=%d mode=%s epoch=%lld.%09ld\n",
	    EBB_TRACE_MAGIC, EBB_TRACE_VERSION, PACKAGE_VERSION, (int)getpid(), mode_name,
	    (long long)rt.tv_sec, rt.tv_nsec);
	append(head, (size_t)n);
	pthread_mutex_unlock(&trace.lock);
	ebb_log(EBB_LOG_INFO, "writing the trace to %s", file);
	return 0;
}

int
ebb_trace_on(void)
{
	return __atomic_load_n(&trace.fd, __ATOMIC_RELAXED) >= 0;
}

void
ebb_line_begin(struct ebb_line *l, char type)
{
	l->buf[0] = type;
	l->len = 1;
	l->overflow = 0;
}

/* Make room for n more bytes, handing the line so far to the writer. */
static void
line_room(struct ebb_line *l, size_t n)
{
	if (l->len + n <= sizeof l->buf)
		return;
	if (!holding) {
		pthread_mutex_lock(&trace.lock);
		holding = 1;
	}
	append(l->buf, l->len);
	l->len = 0;
	l->overflow = 1;
}

void
ebb_line_u64(struct ebb_line *l, uint64_t v)
{
	char tmp[21];
	int n = 0;

	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v != 0);
	line_room(l, (size_t)n + 1);
	l->buf[l->len++] = ' ';
	while (n > 0)
		l->buf[l->len++] = tmp[--n];
}

void
ebb_line_i64(struct ebb_line *l, int64_t v)
{
	if (v >= 0) {
		ebb_line_u64(l, (uint64_t)v);
		return;
	}
	char tmp[24];
	int n = snprintf(tmp, sizeof tmp, " %lld", (long long)v);
	line_room(l, (size_t)n);
	memcpy(l->buf + l->len, tmp, (size_t)n);
	l->len += (size_t)n;
}

void
ebb_line_hex(struct ebb_line *l, uint64_t v)
{
	static const char digits[] = "0123456789abcdef";
	char tmp[16];
	int n = 0;

	do {
		tmp[n++] = digits[v & 15];
		v >>= 4;
	} while (v != 0);
	line_room(l, (size_t)n + 3);
	l->buf[l->len++] = ' ';
	l->buf[l->len++] = '0';
	l->buf[l->len++] = 'x';
	while (n > 0)
		l->buf[l->len++] = tmp[--n];
}

void
ebb_line_str(struct ebb_line *l, const char *s)
{
	size_t n = strlen(s);

	line_room(l, 1);
	l->buf[l->len++] = ' ';
	while (n > 0) {
		size_t room = sizeof l->buf - l->len;
		if (room == 0) {
			line_room(l, sizeof l->buf);
			continue;
		}
		size_t k = n < room ? n : room;
		for (size_t i = 0; i < k; i++)	/* blanks would split the field */
			l->buf[l->len + i] = (s[i] == ' ' || s[i] == '\n' || s[i] == '\t') ? '_' : s[i];
		l->len += k;
		s += k;
		n -= k;
	}
}

void
ebb_line_end(struct ebb_line *l)
{
	line_room(l, 1);
	l->buf[l->len++] = '\n';
	if (!holding)
		pthread_mutex_lock(&trace.lock);
	append(l->buf, l->len);
	holding = 0;
	pthread_mutex_unlock(&trace.lock);
	l->len = 0;
}

void
ebb_trace_flush(void)
{
	pthread_mutex_lock(&trace.lock);
	if (trace.fd >= 0 && trace.len > 0) {
		write_all(trace.buf, trace.len);
		trace.len = 0;
	}
	pthread_mutex_unlock(&trace.lock);
}

void
ebb_trace_close(void)
{
	pthread_mutex_lock(&trace.lock);
	if (trace.fd >= 0) {
		write_all(trace.buf, trace.len);
		trace.len = 0;
		if (trace.fd >= 0)
			close(trace.fd);
		trace.fd = -1;
	}
	pthread_mutex_unlock(&trace.lock);
}

void
ebb_trace_atfork_prepare(void)
{
	pthread_mutex_lock(&trace.lock);
}

void
ebb_trace_atfork_parent(void)
{
	pthread_mutex_unlock(&trace.lock);
}

void
ebb_trace_atfork_child(void)
{
	/* The parent writes what it buffered; the child writes nothing. */
	if (trace.fd >= 0)
		close(trace.fd);
	trace.fd = -1;
	trace.len = 0;
	pthread_mutex_unlock(&trace.lock);
}

void
ebb_trace_note(const char *key, const char *value)
{
	if (ebb_trace_on())
		ebb_trace_write_note(ebb_now_ns(), key, value[0] ? value : "-");
}

void
ebb_trace_note_u64(const char *key, uint64_t value)
{
	char buf[24];

	snprintf(buf, sizeof buf, "%llu", (unsigned long long)value);
	ebb_trace_note(key, buf);
}
