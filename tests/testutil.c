/*
 * testutil.c: process, file and stderr helpers for the Check tests.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

/* Read everything from fd into a growing buffer. */
static char *
slurp_fd(int fd)
{
	size_t cap = 4096, len = 0;
	char *buf = malloc(cap);
	ssize_t n;

	ck_assert_ptr_nonnull(buf);
	while ((n = read(fd, buf + len, cap - len - 1)) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		len += (size_t)n;
		if (cap - len < 2) {
			cap *= 2;
			buf = realloc(buf, cap);
			ck_assert_ptr_nonnull(buf);
		}
	}
	buf[len] = '\0';
	return buf;
}

void
run_prog(char *const argv[], char *const env[], struct run_result *r)
{
	int out[2], err[2];

	ck_assert_int_eq(pipe(out), 0);
	ck_assert_int_eq(pipe(err), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		dup2(out[1], 1);
		dup2(err[1], 2);
		close(out[0]);
		close(err[0]);
		for (int i = 0; env && env[i]; i++) {
			char *eq = strchr(env[i], '=');
			if (eq == NULL)
				continue;
			char name[256];
			size_t n = (size_t)(eq - env[i]);
			if (n >= sizeof name)
				_exit(120);
			memcpy(name, env[i], n);
			name[n] = '\0';
			if (eq[1] == '\0')
				unsetenv(name);
			else
				setenv(name, eq + 1, 1);
		}
		execv(argv[0], argv);
		fprintf(stderr, "cannot run %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(out[1]);
	close(err[1]);
	/* Read both pipes without deadlock: stderr is small, drain stdout first
	 * in a child-free way by polling both. */
	size_t cap[2] = { 4096, 4096 }, len[2] = { 0, 0 };
	char *buf[2] = { malloc(cap[0]), malloc(cap[1]) };
	struct pollfd pf[2] = { { out[0], POLLIN, 0 }, { err[0], POLLIN, 0 } };
	int open_fds = 2;
	while (open_fds > 0) {
		if (poll(pf, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		for (int i = 0; i < 2; i++) {
			if (pf[i].fd < 0 || !(pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			if (cap[i] - len[i] < 4096) {
				cap[i] *= 2;
				buf[i] = realloc(buf[i], cap[i]);
			}
			ssize_t n = read(pf[i].fd, buf[i] + len[i], cap[i] - len[i] - 1);
			if (n <= 0) {
				close(pf[i].fd);
				pf[i].fd = -1;
				open_fds--;
			} else {
				len[i] += (size_t)n;
			}
		}
	}
	buf[0][len[0]] = '\0';
	buf[1][len[1]] = '\0';
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	r->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	r->out = buf[0];
	r->err = buf[1];
}

void
run_free(struct run_result *r)
{
	free(r->out);
	free(r->err);
	r->out = r->err = NULL;
}

static const char *
tree_path(const char *var, const char *rel)
{
	static char paths[16][4096];
	static int next;
	const char *top = getenv(var);

	ck_assert_msg(top != NULL, "%s is not set (run the tests through make check)", var);
	char *p = paths[next++ % 16];
	snprintf(p, sizeof paths[0], "%s/%s", top, rel);
	return p;
}

const char *
build_path(const char *rel)
{
	return tree_path("EBBTEST_TOP_BUILDDIR", rel);
}

const char *
src_path(const char *rel)
{
	return tree_path("EBBTEST_TOP_SRCDIR", rel);
}

const char *
tmp_file(const char *tag)
{
	static char paths[16][256];
	static int next;
	const char *dir = getenv("TMPDIR");
	char *p = paths[next++ % 16];

	snprintf(p, sizeof paths[0], "%s/ebbtest-%s-XXXXXX", dir ? dir : "/tmp", tag);
	int fd = mkstemp(p);
	ck_assert_int_ge(fd, 0);
	close(fd);
	return p;
}

char *
read_file(const char *path)
{
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return NULL;
	char *s = slurp_fd(fd);
	close(fd);
	return s;
}

int
count_substr(const char *hay, const char *needle)
{
	int n = 0;
	size_t len = strlen(needle);

	for (const char *p = hay; (p = strstr(p, needle)) != NULL; p += len)
		n++;
	return n;
}

char *
capture_stderr(void (*f)(void *), void *arg)
{
	int p[2];

	ck_assert_int_eq(pipe(p), 0);
	int saved = dup(2);
	dup2(p[1], 2);
	close(p[1]);
	f(arg);
	dup2(saved, 2);
	close(saved);
	char *s = slurp_fd(p[0]);
	close(p[0]);
	return s;
}

int
test_selected(const char *name)
{
	const char *only = getenv("EBBTEST_ONLY");
	size_t n = strlen(name);

	if (only == NULL || *only == '\0')
		return 1;
	for (const char *p = only; *p != '\0';) {
		size_t len = strcspn(p, ",");
		if (len == n && strncmp(p, name, n) == 0)
			return 1;
		p += len + (p[len] == ',');
	}
	return 0;
}

int
run_suite(Suite *s)
{
	SRunner *sr = srunner_create(s);

	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
