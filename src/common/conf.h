/*
 * conf.h: every EBB_ environment variable, as one table of data.
 *
 * ebb_conf_vars[] lists each variable with its type, range, default and one
 * line of documentation; man/ebb.7 documents the same list (a test checks it).
 * ebb_conf_load() parses them strictly through a lookup callback, so tests can
 * feed values without touching the environment. The library and utils/ebb use
 * this one parser.
 */
#ifndef EBB_CONF_H
#define EBB_CONF_H

#include <stddef.h>
#include <stdint.h>

enum ebb_mode {
	EBB_MODE_OFF = 0,	/* pass every call through, record nothing */
	EBB_MODE_OBSERVE,	/* record and trace; nothing moves */
	EBB_MODE_OFFLOAD,	/* serve allocations, move buffers to keep under EBB_LIMIT */
};

enum ebb_conf_type {
	EBB_CONF_BOOL,
	EBB_CONF_UINT,		/* unsigned integer in [min, max] */
	EBB_CONF_SIZE,		/* bytes, with K/M/G/T suffixes (powers of 1024) */
	EBB_CONF_STRING,
	EBB_CONF_ENUM,		/* one of a list of names; stored as its index */
	EBB_CONF_REAL		/* decimal number in [rmin, rmax]; stored as a double */
};

#define EBB_CONF_PATH_MAX 1024

/* The parsed configuration. Field names follow the variable names. */
struct ebb_conf {
	int mode;			/* EBB_MODE (enum ebb_mode) */
	char trace[EBB_CONF_PATH_MAX];	/* EBB_TRACE: "" = no trace */
	char status_dir[EBB_CONF_PATH_MAX];	/* EBB_STATUS_DIR: "" = none */
	uint64_t verbose;		/* EBB_VERBOSE */
	int strict;			/* EBB_STRICT */
	uint64_t learn_iters;		/* EBB_LEARN_ITERS */
	uint64_t learn_launches;	/* EBB_LEARN_LAUNCHES */
	uint64_t cupti_hold;		/* EBB_CUPTI_HOLD */
	char iter_kernel[256];		/* EBB_ITER_KERNEL: "" = find the period */
	int cupti;			/* EBB_CUPTI */
	char cupti_lib[EBB_CONF_PATH_MAX];	/* EBB_CUPTI_LIB */
	uint64_t site_depth;		/* EBB_SITE_DEPTH */
	int self_time;			/* EBB_SELF_TIME */
	uint64_t trace_buffer;		/* EBB_TRACE_BUFFER */
	uint64_t limit;			/* EBB_LIMIT: 0 = what the device has */
	uint64_t min_offload_bytes;	/* EBB_MIN_OFFLOAD_BYTES */
	uint64_t host_limit;		/* EBB_HOST_LIMIT: 0 = no cap */
	int plan;			/* EBB_PLAN */
	int plan_waits;			/* EBB_PLAN_WAITS */
	int plan_phases;		/* EBB_PLAN_PHASES */
	double plan_seconds;		/* EBB_PLAN_SECONDS */
	double target;			/* EBB_TARGET: 0 = EBB_LIMIT alone */
	double plan_margin;		/* EBB_PLAN_MARGIN: fraction of EBB_LIMIT */
	double d2h_gbps, h2d_gbps;	/* EBB_D2H_GBPS, EBB_H2D_GBPS: 0 = measure */
	uint64_t launch_record_bytes;	/* EBB_LAUNCH_RECORD_BYTES */
	int recompute;			/* EBB_RECOMPUTE */
	int arena;			/* EBB_ARENA */
	double reuse_slack;		/* EBB_REUSE_SLACK: share of an allocation a freed
					 * block may be larger by and serve it */
	int capture_join;		/* EBB_CAPTURE_JOIN */
};

struct ebb_conf_var {
	const char *name;
	enum ebb_conf_type type;
	size_t offset;			/* of the field in struct ebb_conf */
	size_t size;			/* of that field (strings) */
	uint64_t min, max;		/* UINT and SIZE */
	const char *const *choices;	/* ENUM: NULL-terminated names */
	const char *def;		/* default, as the user would write it */
	const char *doc;		/* one line */
	double rmin, rmax;		/* REAL */
};

/* The table, terminated by an entry whose name is NULL. */
extern const struct ebb_conf_var ebb_conf_vars[];

/* Returns the value of a variable, or NULL when it is not set. */
typedef const char *(*ebb_conf_lookup_fn)(const char *name, void *ctx);

/*
 * Fill *conf with the defaults, then with every variable lookup() knows.
 * A value that does not parse is reported once on stderr, naming the
 * variable, the value and what was expected, and the default is kept.
 * Returns the number of bad values (0 when all parsed).
 */
int ebb_conf_load(struct ebb_conf *conf, ebb_conf_lookup_fn lookup, void *ctx);

/*
 * Report every EBB_ variable in env (a NULL-terminated environ-style array)
 * that is not in the table, since a typo would otherwise go unnoticed.
 * Returns how many were reported.
 */
int ebb_conf_check_unknown(char *const *env);

/* The entry for name, or NULL. */
const struct ebb_conf_var *ebb_conf_find(const char *name);

/*
 * Check text as a value of the variable name, parsed as ebb_conf_load
 * parses it, without storing it: for utils/ebb's options that set a
 * variable. Returns 0, or -1 with what is accepted in want ("expected
 * one of: ..."), also when name is not in the table.
 */
int ebb_conf_check_value(const char *name, const char *text, char *want, size_t wantlen);

/*
 * Parse helpers, exposed for tests and utils/. Each returns 0 on success
 * and -1 when the text is not a complete, in-range value.
 */
int ebb_conf_parse_size(const char *text, uint64_t *out);
int ebb_conf_parse_uint(const char *text, uint64_t *out);
int ebb_conf_parse_bool(const char *text, int *out);
int ebb_conf_parse_real(const char *text, double *out);

/* Name of a mode, e.g. "observe". */
const char *ebb_conf_mode_name(int mode);

#endif
