/*
 * trace_read.h: reading trace files (ebb-trace(5)), for utils/ebb and tests.
 */
#ifndef EBB_TRACE_READ_H
#define EBB_TRACE_READ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define EBB_TRACE_MAX_FIELDS 65536

/* One record, split in place: field[i] points into the line. */
struct ebb_trace_rec {
	char type;
	size_t nfields;		/* fields after the type letter */
	char **field;
	size_t cap;
};

/* Parse the header line; returns the format version, or -1 if it is not a trace. */
int ebb_trace_header(const char *line);

/*
 * Split line (modified: blanks become NULs; the newline is dropped) into
 * r. Returns 0, or -1 with a reason in err when the line is not a record of
 * a known type with the fields ebb-trace(5) gives it.
 */
int ebb_trace_split(char *line, struct ebb_trace_rec *r, char *err, size_t errlen);

/* Free what ebb_trace_split allocated in r. */
void ebb_trace_rec_free(struct ebb_trace_rec *r);

/* Field i as a number (decimal, or hexadecimal with 0x); returns 0 or -1. */
int ebb_trace_u64(const struct ebb_trace_rec *r, size_t i, uint64_t *out);

/* The field specification of a record type ("t bid addr ..."), or NULL. */
const char *ebb_trace_spec(char type);

/* The record's name ("alloc", "launch", ...), or NULL. */
const char *ebb_trace_name(char type);

#endif
