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

/*
 * A trace file read record by record: the one reader of `ebb report` and
 * `ebb plan`, so that both refuse the same files for the same reasons.
 */
struct ebb_trace_reader {
	FILE *f;		/* the file, open for reading */
	const char *path;	/* its name, in messages */
	uint64_t line;		/* number of the line last read; 0 before the header */
	int version;		/* the header's format version; 0 before it is read */
	char *buf;		/* the line last read, split into rec */
	size_t cap;		/* bytes allocated at buf */
	struct ebb_trace_rec rec;	/* the record last read */
};

/* Room for a message of ebb_trace_next: a path of up to 4095 bytes and a reason. */
#define EBB_TRACE_ERRLEN (4096 + 512)

/* Open path for reading into rd. Returns 0, or -1 with errno set. */
int ebb_trace_reader_open(struct ebb_trace_reader *rd, const char *path);

/*
 * Read the next record into rd->rec, checking the header on line 1: it
 * must name a format version from EBB_TRACE_VERSION_MIN to
 * EBB_TRACE_VERSION. Returns 1 with a record, 0
 * at the end of the file, or -1 with a message in err, which names the
 * file: "PATH:LINE: reason" for a malformed line, "PATH: error" when
 * reading fails (a directory, an I/O error), "PATH is empty".
 */
int ebb_trace_next(struct ebb_trace_reader *rd, char *err, size_t errlen);

/* Go back to the header, to read the file again. Returns 0, or -1 with errno set. */
int ebb_trace_rewind(struct ebb_trace_reader *rd);

/* Close the file and free what rd holds. */
void ebb_trace_reader_close(struct ebb_trace_reader *rd);

#endif
