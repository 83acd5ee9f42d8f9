/*
 * ebb.c: the ebb command.
 *
 *   ebb run [options] -- CMD [ARGS...]   run a job with libebb.so preloaded
 *   ebb report TRACE                     check a trace and summarise it
 *   ebb plan TRACE [options]             what the planner would do at given targets
 *   ebb timeline TRACE -o FILE [options] the trace as Chrome trace-event JSON
 *   ebb --version | --help
 */
#include "config.h"

#include <ctype.h>
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "conf.h"
#include "log.h"
#include "plancmd.h"
#include "report.h"
#include "timeline.h"

extern char **environ;

static const char *progname = "ebb";

static void
usage(FILE *f)
{
	fprintf(f,
	    "usage: ebb run [--mode MODE] [--limit SIZE] [--trace FILE] [--verbose N] [--lib PATH]\n"
	    "               [--alloc auto|ebb|job] -- CMD [ARGS...]\n"
	    "       ebb report TRACE\n"
	    "       ebb plan TRACE [--target SIZE]... [--fraction F]... [--d2h GBPS] [--h2d GBPS]\n"
	    "                [--min-bytes SIZE] [--allow-stall [--no-waits]] [--no-phases]\n"
	    "                [--moves]\n"
	    "                [--move-cost US,US[,US,US]] [--time-limit S] [--replay] [--iteration N]\n"
	    "                [--svg FILE [--mark LABEL=SIZE,RATIO]...] [--memory-svg FILE]\n"
	    "       ebb timeline TRACE -o FILE [--iteration N] [--window FROM,TO]\n"
	    "       ebb --version | --help\n"
	    "\n"
	    "run      run CMD with libebb.so preloaded (see ebb(1); variables in ebb(7))\n"
	    "  -m, --mode MODE     off, observe or offload (sets EBB_MODE)\n"
	    "  -l, --limit SIZE    device memory the job may hold, e.g. 64G (sets EBB_LIMIT;\n"
	    "                      and EBB_MODE=offload unless --mode is given)\n"
	    "  -t, --trace FILE    write the trace to FILE, %%p = process id (sets EBB_TRACE)\n"
	    "  -v, --verbose N     messages on stderr, 0 to 3 (sets EBB_VERBOSE)\n"
	    "      --lib PATH      the libebb.so to preload (default: the one beside ebb); an\n"
	    "                      ELF shared object whose path holds no ':' or blank\n"
	    "                      (LD_PRELOAD splits at them)\n"
	    "      --alloc WHICH   ebb: PyTorch and JAX allocate each buffer from the driver\n"
	    "                      (PYTORCH_CUDA_ALLOC_CONF, XLA_PYTHON_CLIENT_ALLOCATOR), so ebb\n"
	    "                      sees and moves each; job: their allocators as the job has\n"
	    "                      them; auto (default): ebb in offload mode, job otherwise\n"
	    "  A value these options cannot use stops ebb run with status 2, before CMD runs.\n"
	    "report   check every record of a trace (ebb-trace(5)) and print a summary\n"
	    "plan     learn one iteration of an observe-mode trace and print what ebb's planner\n"
	    "         would do at each target: predicted peak, moves, step time\n"
	    "  -t, --target SIZE   a device memory target, e.g. 60G (repeatable)\n"
	    "  -f, --fraction F    a target as a fraction of the learned peak (repeatable;\n"
	    "                      default 0.9 0.8 0.7 0.6 0.5 0.4)\n"
	    "      --d2h GBPS      device-to-host bandwidth in GB/s (default: the trace's\n"
	    "                      d2h-gbps note, else 50)\n"
	    "      --h2d GBPS      host-to-device bandwidth in GB/s (likewise)\n"
	    "      --min-bytes SIZE  smallest buffer that moves (default 2M, as\n"
	    "                      EBB_MIN_OFFLOAD_BYTES)\n"
	    "      --allow-stall   let restores be late when that lowers the peak\n"
	    "      --no-waits      with --allow-stall: only the greedy search's stalls, not\n"
	    "                      also waits placed where the floor wants them\n"
	    "      --no-phases     decide each gap alone (as EBB_PLAN_PHASES=0); by default\n"
	    "                      a buffer and its siblings in the micro-batches alike\n"
	    "                      take one decision, as the library does\n"
	    "      --moves         list the moves of the last target (with --replay, also\n"
	    "                      the gaps its plan with recompute recomputes)\n"
	    "      --replay        from the trace's write sets (EBB_RECOMPUTE=1): the gaps\n"
	    "                      a recompute by replay could bridge, and the last\n"
	    "                      target's plan that recomputes some, beside the moves alone\n"
	    "      --move-cost OFF,RES[,DROP,REMAKE]  the host's microseconds to issue an\n"
	    "                      offload, a restore, a drop and a remake's mapping (two:\n"
	    "                      a drop as an offload, a remake as a restore; default:\n"
	    "                      the trace's plan-host-*-ns notes, else 0)\n"
	    "      --time-limit S  each target's search at most S seconds (default 60, as\n"
	    "                      EBB_PLAN_SECONDS; 0: no limit)\n"
	    "      --iteration N   plan iteration N (its I record's number) rather than the\n"
	    "                      last whole timed one; 'recorded': the one the library\n"
	    "                      recorded for its plan (the plan-recording note), which\n"
	    "                      with --replay gives the library's candidates\n"
	    "      --svg FILE      draw the predicted peak against the step time of each\n"
	    "                      target's plan (and with --replay, the plan with\n"
	    "                      recompute) as SVG\n"
	    "      --mark LABEL=SIZE,RATIO  with --svg: a point to compare, such as another\n"
	    "                      method's peak and step-time ratio (repeatable)\n"
	    "      --memory-svg FILE  draw the device memory over the iteration: with nothing\n"
	    "                      moved, under the last target's plan (and with recompute),\n"
	    "                      and as the trace's last whole iteration measured it\n"
	    "timeline write the trace as Chrome trace-event JSON (Perfetto, chrome://tracing):\n"
	    "         kernels per stream, the job's calls, ebb's copies, waits and stalls,\n"
	    "         iteration marks, and counters of device and host memory\n"
	    "  -o, --output FILE   the JSON file to write\n"
	    "      --iteration N   only iteration N (its I record's number)\n"
	    "      --window FROM,TO  only FROM to TO milliseconds of the trace's clock (from\n"
	    "                      the library's load)\n");
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
				if (readable(out))
					return 0;
			}
		}
	}
	snprintf(out, len, "%s/libebb.so", EBB_LIBDIR);
	return readable(out) ? 0 : -1;
}

/*
 * Read the ELF identification, type and machine of the file at path.
 * Returns 1 when it is an ELF file, 0 when it is not (too short, or no
 * ELF magic), -1 with errno set when it cannot be read.
 */
static int
read_elf_header(const char *path, unsigned char ident[EI_NIDENT], unsigned *type,
    unsigned *machine)
{
	unsigned char h[EI_NIDENT + 4];	/* e_ident, e_type, e_machine: the same in both classes */
	size_t got = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	while (got < sizeof h) {
		ssize_t n = read(fd, h + got, sizeof h - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;
			close(fd);
			errno = e;
			return -1;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	if (got < sizeof h || memcmp(h, ELFMAG, SELFMAG) != 0)
		return 0;
	memcpy(ident, h, EI_NIDENT);
	const unsigned char *t = h + EI_NIDENT, *m = t + 2;
	if (h[EI_DATA] == ELFDATA2MSB) {
		*type = (unsigned)t[0] << 8 | t[1];
		*machine = (unsigned)m[0] << 8 | m[1];
	} else {
		*type = (unsigned)t[1] << 8 | t[0];
		*machine = (unsigned)m[1] << 8 | m[0];
	}
	return 1;
}

/*
 * Check the library to preload, named by what (--lib, or libebb.so when it
 * was found), and store its absolute path, symbolic links resolved, in out
 * (PATH_MAX bytes).
 * LD_PRELOAD splits its value at colons and blanks, so a path holding one
 * would preload nothing and the job would run without ebb; a file that is
 * not an ELF shared object for ebb's own machine and word size would be
 * skipped by the dynamic linker the same way. Returns 0, or -1 after one
 * line on stderr.
 */
static int
check_library(const char *what, const char *lib, char *out)
{
	unsigned char id[EI_NIDENT], self[EI_NIDENT];
	unsigned type, machine, self_type, self_machine;

	if (realpath(lib, out) == NULL) {
		fprintf(stderr, "%s run: %s '%s': %s\n", progname, what, lib, strerror(errno));
		return -1;
	}
	for (const char *c = out; *c; c++)
		if (*c == ':' || isspace((unsigned char)*c)) {
			fprintf(stderr, "%s run: %s '%s': LD_PRELOAD cannot hold a path with ':' or "
			    "blanks (they separate its entries); install libebb.so under a path "
			    "without them\n", progname, what, out);
			return -1;
		}
	int elf = read_elf_header(out, id, &type, &machine);
	if (elf < 0) {
		fprintf(stderr, "%s run: %s '%s': %s\n", progname, what, out, strerror(errno));
		return -1;
	}
	if (elf == 0 || type != ET_DYN) {
		fprintf(stderr, "%s run: %s '%s' is not an ELF shared object (the path of "
		    "libebb.so is expected)\n", progname, what, out);
		return -1;
	}
	if (read_elf_header("/proc/self/exe", self, &self_type, &self_machine) == 1 &&
	    (id[EI_CLASS] != self[EI_CLASS] || id[EI_DATA] != self[EI_DATA] ||
	    machine != self_machine)) {
		fprintf(stderr, "%s run: %s '%s' is a shared object for another machine or word "
		    "size than ebb's\n", progname, what, out);
		return -1;
	}
	return 0;
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
 * (backend:cudaMallocAsync), unless the user chose a backend; where ebb
 * chooses it, EBB_CAPTURE_JOIN=1 too, unless the user set that.
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
	/* that backend leaves side streams unjoined at the end of some captures
	 * (a backward on two streams), which fails them: ebb joins them there */
	int join = getenv("EBB_CAPTURE_JOIN") == NULL;
	if (verbose >= 1)
		fprintf(stderr, "%s: PYTORCH_CUDA_ALLOC_CONF=%s (each tensor one driver allocation, "
		    "which ebb can see)%s\n", progname, v, join ? ", EBB_CAPTURE_JOIN=1" : "");
	if (join && setenv("EBB_CAPTURE_JOIN", "1", 1) < 0)
		return -1;
	return setenv("PYTORCH_CUDA_ALLOC_CONF", v, 1);
}

/* Set name to value unless the environment sets it; note which in said. */
static int
set_default(const char *name, const char *value, char *said, size_t len)
{
	const char *old = getenv(name);
	size_t n = strlen(said);

	snprintf(said + n, len - n, "%s%s=%s%s", n ? ", " : "", name, old ? old : value,
	    old ? " (set already)" : "");
	return old != NULL ? 0 : setenv(name, value, 1);
}

/*
 * JAX (XLA): every buffer its own stream-ordered allocation from the
 * device's default pool, which ebb sees and serves (its platform allocator
 * maps each buffer with cuMemMap: ebb sees those, and cannot move them),
 * allocated as needed rather than most of the device at start, and no
 * command buffers (CUDA graphs built by XLA, whose buffers ebb cannot see),
 * unless the user chose otherwise. One line at -v 1 says what holds.
 */
static int
set_jax_env(int verbose)
{
	char said[6144] = "";

	if (set_default("XLA_PYTHON_CLIENT_ALLOCATOR", "cuda_async", said, sizeof said) < 0 ||
	    set_default("XLA_PYTHON_CLIENT_PREALLOCATE", "false", said, sizeof said) < 0)
		return -1;
	const char *flags = getenv("XLA_FLAGS");
	size_t n = strlen(said);
	if (flags != NULL && strstr(flags, "xla_gpu_enable_command_buffer") != NULL) {
		snprintf(said + n, sizeof said - n, ", XLA_FLAGS=%s (set already)", flags);
	} else {
		char v[4096];
		int k = snprintf(v, sizeof v, "%s%s--xla_gpu_enable_command_buffer=",
		    flags ? flags : "", flags && flags[0] ? " " : "");
		if (k < 0 || (size_t)k >= sizeof v) {
			fprintf(stderr, "%s run: XLA_FLAGS is too long to add "
			    "--xla_gpu_enable_command_buffer= to it\n", progname);
			errno = E2BIG;
			return -1;
		}
		if (setenv("XLA_FLAGS", v, 1) < 0)
			return -1;
		snprintf(said + n, sizeof said - n, ", XLA_FLAGS=%s", v);
	}
	if (verbose >= 1)
		fprintf(stderr, "%s: for JAX: %s (each buffer one stream-ordered allocation, which ebb "
		    "can see and move; no command buffers, so that ebb sees every launch)\n", progname,
		    said);
	return 0;
}

static const char *
env_lookup(const char *name, void *ctx)
{
	(void)ctx;
	return getenv(name);
}

/* The job's process, for forward_signal. */
static volatile sig_atomic_t job_pid;

/* Signals sent to ebb run go to the job. */
static void
forward_signal(int sig)
{
	if (job_pid > 0)
		kill((pid_t)job_pid, sig);
}

/* Print each file of dir (EBB_STATUS_DIR: a process that did not hold
 * EBB_LIMIT), remove the files and dir; returns how many there were. */
static int
read_status(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	if (d == NULL)
		return 0;
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		char path[PATH_MAX], line[1024] = "";
		snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
		FILE *f = fopen(path, "r");
		if (f != NULL) {
			if (fgets(line, sizeof line, f) == NULL)
				line[0] = '\0';
			fclose(f);
		}
		line[strcspn(line, "\n")] = '\0';
		fprintf(stderr, "%s run: EBB_LIMIT was not held in process %s: %s\n", progname,
		    e->d_name, line[0] ? line : "(no reason given)");
		unlink(path);
		n++;
	}
	closedir(d);
	rmdir(dir);
	return n;
}

/*
 * Run the job as a child and wait for it: signals that ask ebb run to stop
 * go to the job (interrupts from the terminal reach it by themselves), and
 * ebb run exits as the job did: its status, or its signal, raised again.
 * In offload mode each of the job's processes that did not hold EBB_LIMIT
 * says why in a directory of ebb run's (EBB_STATUS_DIR); then a job that
 * exited 0 makes ebb run exit 3, since what was asked for was not done.
 */
static int
supervise(char **job, int offload)
{
	char dir[PATH_MAX] = "";

	if (offload) {
		const char *tmp = getenv("TMPDIR");
		snprintf(dir, sizeof dir, "%s/ebb-run.XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
		if (mkdtemp(dir) == NULL || setenv("EBB_STATUS_DIR", dir, 1) < 0) {
			fprintf(stderr, "%s run: cannot make a status directory (%s): %s\n", progname, dir,
			    strerror(errno));
			return 2;
		}
	}
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		fprintf(stderr, "%s run: cannot fork: %s\n", progname, strerror(errno));
		if (dir[0])
			rmdir(dir);
		return 2;
	}
	if (pid == 0) {
		execvp(job[0], job);
		int e = errno;
		fprintf(stderr, "%s run: cannot run %s: %s\n", progname, job[0], strerror(e));
		_exit(e == ENOENT ? 127 : 126);
	}
	job_pid = pid;
	struct sigaction fw, ign;
	memset(&fw, 0, sizeof fw);
	fw.sa_handler = forward_signal;
	sigemptyset(&fw.sa_mask);
	memset(&ign, 0, sizeof ign);
	ign.sa_handler = SIG_IGN;
	sigemptyset(&ign.sa_mask);
	/* the terminal's interrupts reach the job's whole process group */
	sigaction(SIGINT, &ign, NULL);
	sigaction(SIGQUIT, &ign, NULL);
	static const int forwarded[] = { SIGTERM, SIGHUP, SIGUSR1, SIGUSR2 };
	for (size_t i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++)
		sigaction(forwarded[i], &fw, NULL);
	int status;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR) {
			fprintf(stderr, "%s run: waiting for %s: %s\n", progname, job[0], strerror(errno));
			return 2;
		}
	int unheld = dir[0] ? read_status(dir) : 0;
	if (WIFSIGNALED(status)) {
		int sig = WTERMSIG(status);
		signal(sig, SIG_DFL);
		raise(sig);
		return 128 + sig;
	}
	int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
	return rc == 0 && unheld > 0 ? 3 : rc;
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
		{ "alloc", required_argument, NULL, 'A' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	const char *lib = NULL, *alloc = "auto";
	char want[256];
	int c, mode_given = 0, limit_given = 0;

	optind = 1;
	while ((c = getopt_long(argc, argv, "+m:l:t:v:h", opts, NULL)) != -1) {
		switch (c) {
		case 'm':
			if (ebb_conf_check_value("EBB_MODE", optarg, want, sizeof want) < 0) {
				fprintf(stderr, "%s run: --mode '%s' is not valid: %s\n", progname, optarg,
				    want);
				return 2;
			}
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
			if (ebb_conf_check_value("EBB_VERBOSE", optarg, want, sizeof want) < 0) {
				fprintf(stderr, "%s run: --verbose '%s' is not valid: %s\n", progname,
				    optarg, want);
				return 2;
			}
			setenv("EBB_VERBOSE", optarg, 1);
			break;
		case 'L':
			lib = optarg;
			break;
		case 'A':
			if (strcmp(optarg, "auto") != 0 && strcmp(optarg, "ebb") != 0 &&
			    strcmp(optarg, "job") != 0) {
				fprintf(stderr, "%s run: --alloc '%s' is not valid: expected one of: auto "
				    "ebb job\n", progname, optarg);
				return 2;
			}
			alloc = optarg;
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
	char found[PATH_MAX], path[PATH_MAX];
	if (lib == NULL && find_library(found, sizeof found) < 0) {
		fprintf(stderr, "%s run: libebb.so not found beside %s or in %s; pass --lib PATH\n",
		    progname, progname, EBB_LIBDIR);
		return 2;
	}
	if (check_library(lib != NULL ? "--lib" : "libebb.so", lib != NULL ? lib : found,
	    path) < 0)
		return 2;
	/* auto: the frameworks' allocators made to allocate each buffer from the
	 * driver in offload mode, which ebb then serves and moves; left as the
	 * job has them otherwise, so that observe mode changes nothing */
	int per_buffer = strcmp(alloc, "ebb") == 0 ||
	    (strcmp(alloc, "auto") == 0 && conf.mode == EBB_MODE_OFFLOAD);
	if (set_preload(path) < 0 || (per_buffer && (set_pytorch_alloc((int)conf.verbose) < 0 ||
	    set_jax_env((int)conf.verbose) < 0))) {
		fprintf(stderr, "%s run: cannot set the environment: %s\n", progname, strerror(errno));
		return 2;
	}
	if (!per_buffer && conf.verbose >= 1)
		fprintf(stderr, "%s: the job's allocators are left as they are (--alloc %s, %s mode): "
		    "with PyTorch's caching allocator ebb sees its segments, not each tensor\n",
		    progname, alloc, ebb_conf_mode_name(conf.mode));
	if (conf.verbose >= 1)
		fprintf(stderr, "%s: LD_PRELOAD=%s, EBB_MODE=%s\n", progname, getenv("LD_PRELOAD"),
		    ebb_conf_mode_name(conf.mode));
	return supervise(argv + optind, conf.mode == EBB_MODE_OFFLOAD);
}

/* --move-cost's OFF,RES or OFF,RES,DROP,REMAKE microseconds into us (with
 * two, a drop costs as an offload and a remake as a restore). Returns 0, or
 * -1 when arg is not two or four numbers of at least 0, comma-separated. */
static int
parse_move_cost(const char *arg, double us[4])
{
	int n = 0;
	const char *f = arg;

	for (;;) {
		char num[64];
		size_t len = strcspn(f, ",");
		if (n == 4 || len == 0 || len >= sizeof num)
			return -1;
		memcpy(num, f, len);
		num[len] = '\0';
		if (ebb_conf_parse_real(num, &us[n]) < 0 || us[n] < 0)
			return -1;
		n++;
		if (f[len] == '\0')
			break;
		f += len + 1;
	}
	if (n != 2 && n != 4)
		return -1;
	if (n == 2) {
		us[2] = us[0];
		us[3] = us[1];
	}
	return 0;
}

/*
 * A size that may have a fraction before its suffix ("29.1G"): bytes into
 * *out. Returns 0, or -1 when s is not one.
 */
static int
parse_decimal_size(const char *s, uint64_t *out)
{
	static const char suffix[] = "KMGT";
	char *end;

	if (ebb_conf_parse_size(s, out) == 0)
		return 0;
	errno = 0;
	double v = strtod(s, &end);
	if (errno != 0 || end == s || !(v >= 0) || v > 1e15 || s[0] == '-')
		return -1;
	const char *k = *end != '\0' ? strchr(suffix, *end) : NULL;
	if (k == NULL || end[1] != '\0')
		return -1;
	for (const char *p = suffix; p <= k; p++)
		v *= 1024.0;
	*out = (uint64_t)(v + 0.5);
	return 0;
}

/*
 * --mark LABEL=SIZE,RATIO: a point for ebb plan --svg. Returns 0, or -1
 * (said).
 */
static int
parse_mark(const char *arg, struct ebb_plan_mark *m)
{
	const char *eq = strchr(arg, '='), *comma = eq != NULL ? strchr(eq, ',') : NULL;
	char size[64];

	if (eq == NULL || comma == NULL || eq == arg || (size_t)(eq - arg) >= sizeof m->label ||
	    (size_t)(comma - eq - 1) >= sizeof size || strchr(comma + 1, ',') != NULL)
		goto bad;
	snprintf(m->label, sizeof m->label, "%.*s", (int)(eq - arg), arg);
	snprintf(size, sizeof size, "%.*s", (int)(comma - eq - 1), eq + 1);
	if (parse_decimal_size(size, &m->bytes) < 0 || m->bytes == 0 ||
	    ebb_conf_parse_real(comma + 1, &m->ratio) < 0 || m->ratio <= 0)
		goto bad;
	return 0;
bad:
	fprintf(stderr, "%s plan: --mark '%s' is not LABEL=SIZE,RATIO (a label of at most 63 "
	    "bytes, a peak such as 29.1G, and a step-time ratio above 0, e.g. ckpt=29.1G,1.27)\n",
	    progname, arg);
	return -1;
}

/* What ebb plan's options set, as they are parsed. */
struct plan_args {
	struct ebb_plan_opts o;
	struct ebb_plan_target *t;	/* room for one per argument */
	struct ebb_plan_mark *mark;	/* likewise */
	size_t nt, nmark;
};

/* Apply ebb plan's option c (getopt_long's) with its argument. Returns 0,
 * or -1 (said). */
static int
plan_option(int c, const char *arg, struct plan_args *a)
{
	struct ebb_plan_opts *o = &a->o;
	double v;

	switch (c) {
	case 't':
		if (ebb_conf_parse_size(arg, &a->t[a->nt].bytes) < 0 || a->t[a->nt].bytes == 0) {
			fprintf(stderr, "%s plan: --target '%s' is not a size (a number of bytes with an "
			    "optional K, M, G or T suffix)\n", progname, arg);
			return -1;
		}
		a->nt++;
		return 0;
	case 'f':
		if (ebb_conf_parse_real(arg, &v) < 0 || v <= 0 || v > 1) {
			fprintf(stderr, "%s plan: --fraction '%s' is not a number above 0 and at most 1\n",
			    progname, arg);
			return -1;
		}
		a->t[a->nt++].fraction = v;
		return 0;
	case 'D':
	case 'H':
		if (ebb_conf_parse_real(arg, &v) < 0 || v <= 0) {
			fprintf(stderr, "%s plan: --%s '%s' is not a bandwidth in GB/s above 0\n",
			    progname, c == 'D' ? "d2h" : "h2d", arg);
			return -1;
		}
		*(c == 'D' ? &o->d2h_gbps : &o->h2d_gbps) = v;
		return 0;
	case 'b':
		if (ebb_conf_parse_size(arg, &o->min_bytes) < 0 || o->min_bytes == 0) {
			fprintf(stderr, "%s plan: --min-bytes '%s' is not a size of at least 1 byte\n",
			    progname, arg);
			return -1;
		}
		return 0;
	case 's': o->allow_stall = 1; return 0;
	case 'W': o->no_waits = 1; return 0;
	case 'P': o->phases = 1; return 0;
	case 'p': o->phases = 0; return 0;
	case 'M': o->moves = 1; return 0;
	case 'R': o->replay = 1; return 0;
	case 'S': o->svg = arg; return 0;
	case 'Y': o->memory_svg = arg; return 0;
	case 'K':
		if (parse_mark(arg, &a->mark[a->nmark]) < 0)
			return -1;
		a->nmark++;
		return 0;
	case 'I': {
		char *end;
		if (strcmp(arg, "recorded") == 0) {
			o->iteration = PLAN_ITER_RECORDED;
			return 0;
		}
		errno = 0;
		unsigned long long n = strtoull(arg, &end, 10);
		if (errno != 0 || end == arg || *end != '\0' || n == 0 || arg[0] == '-') {
			fprintf(stderr, "%s plan: --iteration '%s' is not an iteration's number (1 or "
			    "more, as its I record has it) nor 'recorded'\n", progname, arg);
			return -1;
		}
		o->iteration = n;
		return 0;
	}
	case 'T':
		if (ebb_conf_parse_real(arg, &v) < 0 || v < 0 || v > 86400) {
			fprintf(stderr, "%s plan: --time-limit '%s' is not a number of seconds from 0 (no "
			    "limit) to 86400\n", progname, arg);
			return -1;
		}
		o->time_limit_s = v;
		return 0;
	case 'C':
		if (parse_move_cost(arg, o->move_us) < 0) {
			fprintf(stderr, "%s plan: --move-cost '%s' is not two or four numbers of "
			    "microseconds, at least 0, as OFF,RES or OFF,RES,DROP,REMAKE\n", progname, arg);
			return -1;
		}
		o->move_given = 1;
		return 0;
	default:
		usage(stderr);
		return -1;
	}
}

static int
cmd_plan(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "target", required_argument, NULL, 't' },
		{ "fraction", required_argument, NULL, 'f' },
		{ "d2h", required_argument, NULL, 'D' },
		{ "h2d", required_argument, NULL, 'H' },
		{ "min-bytes", required_argument, NULL, 'b' },
		{ "allow-stall", no_argument, NULL, 's' },
		{ "no-waits", no_argument, NULL, 'W' },
		{ "phases", no_argument, NULL, 'P' },
		{ "no-phases", no_argument, NULL, 'p' },
		{ "moves", no_argument, NULL, 'M' },
		{ "replay", no_argument, NULL, 'R' },
		{ "move-cost", required_argument, NULL, 'C' },
		{ "time-limit", required_argument, NULL, 'T' },
		{ "iteration", required_argument, NULL, 'I' },
		{ "svg", required_argument, NULL, 'S' },
		{ "memory-svg", required_argument, NULL, 'Y' },
		{ "mark", required_argument, NULL, 'K' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	struct plan_args a = {
		.o = { .min_bytes = (uint64_t)2 << 20, .time_limit_s = 60, .phases = 1 },
		.t = calloc((size_t)argc, sizeof *a.t),
		.mark = calloc((size_t)argc, sizeof *a.mark),
	};
	int c, rc = 2;

	if (a.t == NULL || a.mark == NULL) {
		fprintf(stderr, "%s plan: out of memory\n", progname);
		goto out;
	}
	optind = 1;
	while ((c = getopt_long(argc, argv, "t:f:h", opts, NULL)) != -1) {
		if (c == 'h') {
			usage(stdout);
			rc = 0;
			goto out;
		}
		if (plan_option(c, optarg, &a) < 0)
			goto out;
	}
	if (optind != argc - 1) {
		fprintf(stderr, "usage: ebb plan TRACE [options] (ebb --help lists them)\n");
		goto out;
	}
	if (a.o.no_waits && !a.o.allow_stall) {
		fprintf(stderr, "%s plan: --no-waits is about stalls: give it with --allow-stall\n",
		    progname);
		goto out;
	}
	if (a.nmark > 0 && a.o.svg == NULL) {
		fprintf(stderr, "%s plan: --mark puts a point in the --svg picture: give it with "
		    "--svg FILE\n", progname);
		goto out;
	}
	a.o.target = a.t;
	a.o.ntarget = a.nt;
	a.o.mark = a.mark;
	a.o.nmark = a.nmark;
	rc = ebb_plan(argv[optind], &a.o, stdout, stderr);
out:
	free(a.t);
	free(a.mark);
	return rc;
}

/* --window FROM,TO in milliseconds into o. Returns 0, or -1 (said). */
static int
parse_window(const char *arg, struct ebb_timeline_opts *o)
{
	const char *comma = strchr(arg, ',');
	char from[64];
	double a, b;

	if (comma == NULL || (size_t)(comma - arg) >= sizeof from)
		goto bad;
	snprintf(from, sizeof from, "%.*s", (int)(comma - arg), arg);
	if (ebb_conf_parse_real(from, &a) < 0 || ebb_conf_parse_real(comma + 1, &b) < 0 ||
	    a < 0 || b <= a || b > 1e12)
		goto bad;
	o->window = 1;
	o->from_ns = (uint64_t)(a * 1e6);
	o->to_ns = (uint64_t)(b * 1e6);
	return 0;
bad:
	fprintf(stderr, "%s timeline: --window '%s' is not FROM,TO: milliseconds of the trace's "
	    "clock, 0 <= FROM < TO\n", progname, arg);
	return -1;
}

static int
cmd_timeline(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "iteration", required_argument, NULL, 'I' },
		{ "window", required_argument, NULL, 'w' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	struct ebb_timeline_opts o = { 0 };
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
		switch (c) {
		case 'o':
			o.out = optarg;
			break;
		case 'I': {
			char *end;
			errno = 0;
			unsigned long long n = strtoull(optarg, &end, 10);
			if (errno != 0 || end == optarg || *end != '\0' || n == 0 || optarg[0] == '-') {
				fprintf(stderr, "%s timeline: --iteration '%s' is not an iteration's number "
				    "(1 or more, as its I record has it)\n", progname, optarg);
				return 2;
			}
			o.iteration = n;
			break;
		}
		case 'w':
			if (parse_window(optarg, &o) < 0)
				return 2;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc - 1 || o.out == NULL) {
		fprintf(stderr, "usage: ebb timeline TRACE -o FILE [--iteration N] [--window "
		    "FROM,TO]\n");
		return 2;
	}
	return ebb_timeline(argv[optind], &o, stderr);
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
	if (strcmp(argv[1], "plan") == 0)
		return cmd_plan(argc - 1, argv + 1);
	if (strcmp(argv[1], "timeline") == 0)
		return cmd_timeline(argc - 1, argv + 1);
	fprintf(stderr, "%s: unknown command or option '%s' (try ebb --help)\n", progname, argv[1]);
	return 2;
}
