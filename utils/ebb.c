/*
 * ebb.c: the ebb command.
 *
 *   ebb run [options] -- CMD [ARGS...]   run a job with libebb.so preloaded
 *   ebb report TRACE                     check a trace and summarise it
 *   ebb --version | --help
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conf.h"
#include "log.h"
#include "report.h"

extern char **environ;

static const char *progname = "ebb";

static void
usage(FILE *f)
{
	fprintf(f,
	    "usage: ebb run [--mode MODE] [--limit SIZE] [--trace FILE] [--verbose N] [--lib PATH] -- CMD [ARGS...]\n"
	    "       ebb report TRACE\n"
	    "       ebb --version | --help\n"
	    "\n"
	    "run      run CMD with libebb.so preloaded (see ebb(1); variables in ebb(7))\n"
	    "  -m, --mode MODE     off, observe or offload (sets EBB_MODE)\n"
	    "  -l, --limit SIZE    device memory the job may hold, e.g. 64G (sets EBB_LIMIT;\n"
	    "                      and EBB_MODE=offload unless --mode is given)\n"
	    "  -t, --trace FILE    write the trace to FILE, %%p = process id (sets EBB_TRACE)\n"
	    "  -v, --verbose N     messages on stderr, 0 to 3 (sets EBB_VERBOSE)\n"
	    "      --lib PATH      the libebb.so to preload (default: the one beside ebb)\n"
	    "report   check every record of a trace (ebb-trace(5)) and print a summary\n");
}

/* Whether path names a readable file. */
static int
readable(const char *path)
{
	return access(path, R_OK) == 0;
}

/*
 * Find libebb.so: beside an installed ebb (bin/../lib), in the build tree
 * (utils/../src/.libs, also from libtool's utils/.libs/lt-ebb wrapper), or
 * in the configured libdir. Returns 0 and the path in out, or -1.
 */
static int
find_library(char *out, size_t len)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);

	if (n > 0) {
		exe[n] = '\0';
		char *slash = strrchr(exe, '/');
		if (slash != NULL) {
			*slash = '\0';
			static const char *const rel[] = {
				"/../lib/libebb.so", "/../src/.libs/libebb.so",
				"/../../src/.libs/libebb.so", NULL
			};
			for (int i = 0; rel[i]; i++) {
				snprintf(out, len, "%s%s", exe, rel[i]);
				if (readable(out)) {
					char real[PATH_MAX];
					if (realpath(out, real) != NULL)
						snprintf(out, len, "%s", real);
					return 0;
				}
			}
		}
	}
	snprintf(out, len, "%s/libebb.so", EBB_LIBDIR);
	return readable(out) ? 0 : -1;
}

/* Prepend lib to LD_PRELOAD (unless it is there already). */
static int
set_preload(const char *lib)
{
	const char *old = getenv("LD_PRELOAD");

	if (old != NULL && strstr(old, lib) != NULL)
		return 0;
	if (old == NULL || old[0] == '\0')
		return setenv("LD_PRELOAD", lib, 1);
	size_t len = strlen(lib) + strlen(old) + 2;
	char *v = malloc(len);
	if (v == NULL)
		return -1;
	snprintf(v, len, "%s:%s", lib, old);
	int r = setenv("LD_PRELOAD", v, 1);
	free(v);
	return r;
}

/*
 * PyTorch: make every tensor its own driver allocation
 * (backend:cudaMallocAsync), unless the user chose a backend.
 */
static int
set_pytorch_alloc(int verbose)
{
	const char *old = getenv("PYTORCH_CUDA_ALLOC_CONF");

	if (old != NULL && strstr(old, "backend:") != NULL) {
		if (verbose >= 1)
			fprintf(stderr, "%s: PYTORCH_CUDA_ALLOC_CONF=%s chooses a backend; leaving it\n",
			    progname, old);
		return 0;
	}
	char v[1024];
	if (old != NULL && old[0] != '\0')
		snprintf(v, sizeof v, "%s,backend:cudaMallocAsync", old);
	else
		snprintf(v, sizeof v, "backend:cudaMallocAsync");
	if (verbose >= 1)
		fprintf(stderr, "%s: PYTORCH_CUDA_ALLOC_CONF=%s (each tensor one driver allocation, "
		    "which ebb can see)\n", progname, v);
	return setenv("PYTORCH_CUDA_ALLOC_CONF", v, 1);
}

static const char *
env_lookup(const char *name, void *ctx)
{
	(void)ctx;
	return getenv(name);
}

static int
cmd_run(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "mode", required_argument, NULL, 'm' },
		{ "limit", required_argument, NULL, 'l' },
		{ "trace", required_argument, NULL, 't' },
		{ "verbose", required_argument, NULL, 'v' },
		{ "lib", required_argument, NULL, 'L' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	const char *lib = NULL;
	int c, mode_given = 0, limit_given = 0;

	optind = 1;
	while ((c = getopt_long(argc, argv, "+m:l:t:v:h", opts, NULL)) != -1) {
		switch (c) {
		case 'm':
			setenv("EBB_MODE", optarg, 1);
			mode_given = 1;
			break;
		case 'l': {
			uint64_t v;
			if (ebb_conf_parse_size(optarg, &v) < 0) {
				fprintf(stderr, "%s run: --limit '%s' is not a size (a number of bytes with "
				    "an optional K, M, G or T suffix)\n", progname, optarg);
				return 2;
			}
			setenv("EBB_LIMIT", optarg, 1);
			limit_given = 1;
			break;
		}
		case 't':
			setenv("EBB_TRACE", optarg, 1);
			break;
		case 'v':
			setenv("EBB_VERBOSE", optarg, 1);
			break;
		case 'L':
			lib = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "%s run: no command given (ebb run [options] -- CMD [ARGS...])\n",
		    progname);
		return 2;
	}
	if (limit_given && !mode_given)
		setenv("EBB_MODE", "offload", 1);
	/*
	 * Check the configuration with the library's own parser before the job
	 * starts. The library says what is wrong in the job itself; here it is
	 * said only when the job will not be started.
	 */
	struct ebb_conf conf;
	ebb_log_set_level(EBB_LOG_ERROR - 1);
	int bad = ebb_conf_load(&conf, env_lookup, NULL) + ebb_conf_check_unknown(environ);
	ebb_log_set_level(EBB_LOG_WARN);
	if (bad > 0 && conf.strict) {
		ebb_conf_load(&conf, env_lookup, NULL);
		ebb_conf_check_unknown(environ);
		fprintf(stderr, "%s run: EBB_STRICT=1 and the configuration above is wrong; not "
		    "running %s\n", progname, argv[optind]);
		return 2;
	}
	char path[PATH_MAX];
	if (lib != NULL) {
		if (!readable(lib)) {
			fprintf(stderr, "%s run: --lib %s: %s\n", progname, lib, strerror(errno));
			return 2;
		}
		snprintf(path, sizeof path, "%s", lib);
	} else if (find_library(path, sizeof path) < 0) {
		fprintf(stderr, "%s run: libebb.so not found beside %s or in %s; pass --lib PATH\n",
		    progname, progname, EBB_LIBDIR);
		return 2;
	}
	if (set_preload(path) < 0 || set_pytorch_alloc((int)conf.verbose) < 0) {
		fprintf(stderr, "%s run: cannot set the environment: %s\n", progname, strerror(errno));
		return 2;
	}
	if (conf.verbose >= 1)
		fprintf(stderr, "%s: LD_PRELOAD=%s, EBB_MODE=%s\n", progname, getenv("LD_PRELOAD"),
		    ebb_conf_mode_name(conf.mode));
	execvp(argv[optind], argv + optind);
	int e = errno;
	fprintf(stderr, "%s run: cannot run %s: %s\n", progname, argv[optind], strerror(e));
	return e == ENOENT ? 127 : 126;
}

int
main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0) {
		printf("ebb %s\n", PACKAGE_VERSION);
		return 0;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		usage(stdout);
		return 0;
	}
	if (strcmp(argv[1], "run") == 0)
		return cmd_run(argc - 1, argv + 1);
	if (strcmp(argv[1], "report") == 0) {
		if (argc != 3) {
			fprintf(stderr, "usage: ebb report TRACE\n");
			return 2;
		}
		return ebb_report(argv[2], stdout, stderr);
	}
	fprintf(stderr, "%s: unknown command or option '%s' (try ebb --help)\n", progname, argv[1]);
	return 2;
}
