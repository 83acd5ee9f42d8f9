/*
 * trace_read.c: splitting and checking trace records, and reading a trace
 * file record by record.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace_format.h"
#include "trace_read.h"

/* One record type of the trace format. */
struct record {
	char type;
	const char *name;
	const char *spec;
};

static const struct record records[] = {
#define X(letter, name, ...) { letter, #name, EBB_TRACE_FIELDS(__VA_ARGS__) },
	EBB_TRACE_RECORDS(X)
#undef X
};

/* The table's entry for record type, or NULL. */
static const struct record *
record_of(char type)
{
	for (size_t i = 0; i < sizeof records / sizeof records[0]; i++)
		if (records[i].type == type)
			return &records[i];
	return NULL;
}

const char *
ebb_trace_spec(char type)
{
	const struct record *r = record_of(type);

	return r != NULL ? r->spec : NULL;
}

const char *
ebb_trace_name(char type)
{
	const struct record *r = record_of(type);

	return r != NULL ? r->name : NULL;
}

int
ebb_trace_header(const char *line)
{
	size_t m = strlen(EBB_TRACE_MAGIC);

	if (strncmp(line, EBB_TRACE_MAGIC, m) != 0 || line[m] != ' ')
		return -1;
	char *end;
	errno = 0;
	long v = strtol(line + m + 1, &end, 10);
	if (errno != 0 || end == line + m + 1 || v <= 0 || (*end != ' ' && *end != '\n' && *end))
		return -1;
	return (int)v;
}

void
ebb_trace_rec_free(struct ebb_trace_rec *r)
{
	free(r->field);
	r->field = NULL;
	r->cap = 0;
	r->nfields = 0;
}

int
ebb_trace_u64(const struct ebb_trace_rec *r, size_t i, uint64_t *out)
{
	if (i >= r->nfields)
		return -1;
	const char *s = r->field[i];
	int base = 10;
	if (s[0] == '0' && s[1] == 'x') {
		s += 2;
		base = 16;
	}
	if (*s == '\0' || *s == '-' || *s == '+')
		return -1;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, base);
	if (errno != 0 || *end != '\0')
		return -1;
	*out = v;
	return 0;
}

/* Number of fields a spec names before any list, and whether it ends in a list. */
static void
spec_shape(const char *spec, size_t *fixed, int *list)
{
	*fixed = 0;
	*list = 0;
	for (const char *p = spec; *p;) {
		const char *e = strchr(p, ' ');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		if (len > 3 && strncmp(p + len - 3, "...", 3) == 0)
			*list = 1;
		else
			(*fixed)++;
		p += len;
		while (*p == ' ')
			p++;
	}
}

int
ebb_trace_split(char *line, struct ebb_trace_rec *r, char *err, size_t errlen)
{
	size_t len = strlen(line);

	if (len > 0 && line[len - 1] == '\n')
		line[--len] = '\0';
	r->nfields = 0;
	r->type = line[0];
	const char *spec = ebb_trace_spec(r->type);
	if (spec == NULL || (line[1] != ' ' && line[1] != '\0')) {
		snprintf(err, errlen, "unknown record type '%c'", line[0]);
		return -1;
	}
	char *p = line + 1;
	while (*p != '\0') {
		if (*p != ' ') {
			snprintf(err, errlen, "field separators must be single spaces");
			return -1;
		}
		*p++ = '\0';
		if (*p == '\0' || *p == ' ') {
			snprintf(err, errlen, "empty field");
			return -1;
		}
		if (r->nfields == r->cap) {
			size_t cap = r->cap ? r->cap * 2 : 16;
			if (cap > EBB_TRACE_MAX_FIELDS) {
				snprintf(err, errlen, "more than %d fields", EBB_TRACE_MAX_FIELDS);
				return -1;
			}
			char **f = realloc(r->field, cap * sizeof *f);
			if (f == NULL) {
				snprintf(err, errlen, "out of memory");
				return -1;
			}
			r->field = f;
			r->cap = cap;
		}
		r->field[r->nfields++] = p;
		while (*p != '\0' && *p != ' ')
			p++;
	}
	size_t fixed;
	int list;
	spec_shape(spec, &fixed, &list);
	if (!list) {
		if (r->nfields != fixed) {
			snprintf(err, errlen, "%s record has %zu fields, expected %zu (%s)",
			    ebb_trace_name(r->type), r->nfields, fixed, spec);
			return -1;
		}
		return 0;
	}
	if (r->nfields < fixed + 1) {
		snprintf(err, errlen, "%s record has %zu fields, expected at least %zu (%s)",
		    ebb_trace_name(r->type), r->nfields, fixed + 1, spec);
		return -1;
	}
	/* The list count may be "?" (launch whose arguments could not be read). */
	if (strcmp(r->field[fixed], "?") == 0) {
		if (r->nfields != fixed + 1) {
			snprintf(err, errlen, "unresolved %s record lists buffers", ebb_trace_name(r->type));
			return -1;
		}
		return 0;
	}
	uint64_t n;
	if (ebb_trace_u64(r, fixed, &n) < 0 || n != r->nfields - fixed - 1) {
		snprintf(err, errlen, "%s record's list count does not match its length",
		    ebb_trace_name(r->type));
		return -1;
	}
	return 0;
}

int
ebb_trace_reader_open(struct ebb_trace_reader *rd, const char *path)
{
	memset(rd, 0, sizeof *rd);
	rd->path = path;
	rd->f = fopen(path, "r");
	return rd->f != NULL ? 0 : -1;
}

int
ebb_trace_next(struct ebb_trace_reader *rd, char *err, size_t errlen)
{
	char why[256];

	for (;;) {
		errno = 0;
		ssize_t len = getline(&rd->buf, &rd->cap, rd->f);
		if (len < 0) {
			/* getline's -1 is the end of the file only when no error is
			 * flagged; reading a directory fails with EISDIR, and running
			 * out of memory sets errno without flagging the stream. */
			int e = errno;
			if (ferror(rd->f) || (e != 0 && !feof(rd->f))) {
				snprintf(err, errlen, "%s: %s", rd->path, strerror(e != 0 ? e : EIO));
				return -1;
			}
			if (rd->line == 0) {
				snprintf(err, errlen, "%s is empty", rd->path);
				return -1;
			}
			return 0;
		}
		rd->line++;
		if (rd->line == 1) {
			int v = ebb_trace_header(rd->buf);
			if (v < 0) {
				snprintf(err, errlen, "%s:1: not an ebb trace (no '%s' header)", rd->path,
				    EBB_TRACE_MAGIC);
				return -1;
			}
			if (v < EBB_TRACE_VERSION_MIN || v > EBB_TRACE_VERSION) {
				snprintf(err, errlen, "%s:1: trace format version %d; this ebb reads "
				    "versions %d to %d", rd->path, v, EBB_TRACE_VERSION_MIN,
				    EBB_TRACE_VERSION);
				return -1;
			}
			rd->version = v;
			continue;
		}
		if (ebb_trace_split(rd->buf, &rd->rec, why, sizeof why) < 0) {
			snprintf(err, errlen, "%s:%llu: %s", rd->path, (unsigned long long)rd->line, why);
			return -1;
		}
		return 1;
	}
}

int
ebb_trace_rewind(struct ebb_trace_reader *rd)
{
	if (fseek(rd->f, 0, SEEK_SET) != 0)
		return -1;
	rd->line = 0;
	rd->version = 0;
	return 0;
}

void
ebb_trace_reader_close(struct ebb_trace_reader *rd)
{
	if (rd->f != NULL)
		fclose(rd->f);
	rd->f = NULL;
	ebb_trace_rec_free(&rd->rec);
	free(rd->buf);
	rd->buf = NULL;
	rd->cap = 0;
}
