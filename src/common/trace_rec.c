/*
 * trace_rec.c: the writer of each record type, made from the format's list
 * (EBB_TRACE_RECORDS in trace_format.h; trace.h declares them).
 */
#include "config.h"

#include <stdint.h>

#include "trace.h"
#include "trace_format.h"

/* Append field f of the record being written to *l. */
#define EBB_TRACE_PUT(f) EBB_TRACE_PUT_##f
#define EBB_TRACE_PUT_u64(n) ebb_line_u64(l, n);
#define EBB_TRACE_PUT_i64(n) ebb_line_i64(l, n);
#define EBB_TRACE_PUT_hex(n) ebb_line_hex(l, n);
#define EBB_TRACE_PUT_word(n) ebb_line_str(l, n);
#define EBB_TRACE_PUT_list(n)

/* ebb_trace_write_NAME: write the whole record, when a trace is being written. */
#define EBB_TRACE_DEFINE_record(letter, name, ...)			\
void									\
ebb_trace_write_##name(EBB_TRACE_PARAMS(__VA_ARGS__))			\
{									\
	struct ebb_line line, *l = &line;				\
									\
	if (!ebb_trace_on())						\
		return;							\
	ebb_line_begin(l, letter);					\
	EBB_TRACE_MAP(EBB_TRACE_PUT, EBB_TRACE_SEP_NONE, __VA_ARGS__)	\
	ebb_line_end(l);						\
}

/* ebb_trace_begin_NAME: begin the record in *l with the fields before its
 * list and return 1 when a trace is being written, else return 0. */
#define EBB_TRACE_DEFINE_record_list(letter, name, ...)		\
int									\
ebb_trace_begin_##name(EBB_TRACE_PARAMS(__VA_ARGS__))			\
{									\
	if (!ebb_trace_on())						\
		return 0;						\
	ebb_line_begin(l, letter);					\
	EBB_TRACE_MAP(EBB_TRACE_PUT, EBB_TRACE_SEP_NONE, __VA_ARGS__)	\
	return 1;							\
}

#define EBB_TRACE_DEFINE(letter, name, ...)				\
	EBB_TRACE_CAT(EBB_TRACE_DEFINE_, EBB_TRACE_SHAPE(__VA_ARGS__))(letter, name, __VA_ARGS__)
EBB_TRACE_RECORDS(EBB_TRACE_DEFINE)
