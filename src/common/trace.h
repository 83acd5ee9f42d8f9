/*
 * trace.h: the trace writer (EBB_TRACE).
 *
 * Records are formatted into a memory buffer (EBB_TRACE_BUFFER bytes) and
 * written to the file with write(2) when it fills, at exit, and when asked.
 * Thread-safe: one mutex, taken after the engine's.
 */
#ifndef EBB_TRACE_H
#define EBB_TRACE_H

#include <stddef.h>
#include <stdint.h>

/* A line under construction; fields are appended in order. */
struct ebb_line {
	char buf[512];
	size_t len;
	int overflow;	/* fields that did not fit in buf were passed to the writer */
};

/*
 * Open the trace at path ("%p" becomes the process id) and write the
 * header. Returns 0, or -1 (reported once on stderr; tracing is off).
 */
int ebb_trace_open(const char *path, size_t bufsize, const char *mode_name);

/* Whether a trace is being written. */
int ebb_trace_on(void);

/* Begin a record of type letter. */
void ebb_line_begin(struct ebb_line *l, char type);
/* Append " <decimal>" / " 0x<hex>" / " <text>" (text must hold no blanks). */
void ebb_line_u64(struct ebb_line *l, uint64_t v);
void ebb_line_i64(struct ebb_line *l, int64_t v);
void ebb_line_hex(struct ebb_line *l, uint64_t v);
void ebb_line_str(struct ebb_line *l, const char *s);
/* End the record and hand it to the writer. */
void ebb_line_end(struct ebb_line *l);

/* A note record: Q t key value (an empty value is written as "-"). */
void ebb_trace_note(const char *key, const char *value);
void ebb_trace_note_u64(const char *key, uint64_t value);

/* Write what is buffered to the file. */
void ebb_trace_flush(void);

/* Flush and close (at exit). */
void ebb_trace_close(void);

/* In a forked child: forget the parent's buffer and file, write nothing. */
void ebb_trace_atfork_child(void);
void ebb_trace_atfork_prepare(void);
void ebb_trace_atfork_parent(void);

/* Nanoseconds since ebb started (CLOCK_MONOTONIC). */
uint64_t ebb_now_ns(void);

#endif
