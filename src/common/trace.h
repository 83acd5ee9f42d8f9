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

#include "trace_format.h"

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

/*
 * The writers of the records, one per entry of EBB_TRACE_RECORDS, taking
 * its fields in order (u64 and hex fields as uint64_t, i64 as int64_t,
 * words as strings). Each writes nothing while no trace is being written.
 *
 *   void ebb_trace_write_NAME(fields...)
 *       writes the record, e.g. ebb_trace_write_alloc(t, bid, addr, size,
 *       stream, kind, site).
 *   int ebb_trace_begin_NAME(fields before the list..., struct ebb_line *l)
 *       for a record whose last field is a list, e.g.
 *       ebb_trace_begin_launch(t, seq, stream, kid, &l): begins the record
 *       in l with the fields before the list and returns 1; the caller then
 *       appends the count and the values with ebb_line_u64 (or "?" alone
 *       with ebb_line_str, where ebb-trace(5) allows it) and ends the line
 *       with ebb_line_end. Returns 0, leaving l as it is, without a trace.
 */
#define EBB_TRACE_PARAM(f) EBB_TRACE_PARAM_##f
#define EBB_TRACE_PARAM_u64(n) uint64_t n
#define EBB_TRACE_PARAM_i64(n) int64_t n
#define EBB_TRACE_PARAM_hex(n) uint64_t n
#define EBB_TRACE_PARAM_word(n) const char *n
#define EBB_TRACE_PARAM_list(n) struct ebb_line *l
/* The parameters of an entry's writer. */
#define EBB_TRACE_PARAMS(...) EBB_TRACE_MAP(EBB_TRACE_PARAM, EBB_TRACE_SEP_COMMA, __VA_ARGS__)
/* What writer an entry has: record, or record_list when it ends in a list. */
#define EBB_TRACE_SHAPE(...)						\
	EBB_TRACE_CAT(record, EBB_TRACE_MAP(EBB_TRACE_ENDS, EBB_TRACE_SEP_NONE, __VA_ARGS__))
#define EBB_TRACE_ENDS(f) EBB_TRACE_ENDS_##f
#define EBB_TRACE_ENDS_u64(n)
#define EBB_TRACE_ENDS_i64(n)
#define EBB_TRACE_ENDS_hex(n)
#define EBB_TRACE_ENDS_word(n)
#define EBB_TRACE_ENDS_list(n) _list

#define EBB_TRACE_DECLARE_record(letter, name, ...)			\
	void ebb_trace_write_##name(EBB_TRACE_PARAMS(__VA_ARGS__));
#define EBB_TRACE_DECLARE_record_list(letter, name, ...)		\
	int ebb_trace_begin_##name(EBB_TRACE_PARAMS(__VA_ARGS__));
#define EBB_TRACE_DECLARE(letter, name, ...)				\
	EBB_TRACE_CAT(EBB_TRACE_DECLARE_, EBB_TRACE_SHAPE(__VA_ARGS__))(letter, name, __VA_ARGS__)
EBB_TRACE_RECORDS(EBB_TRACE_DECLARE)
#undef EBB_TRACE_DECLARE

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
