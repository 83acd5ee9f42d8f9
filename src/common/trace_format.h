/*
 * trace_format.h: the trace file format, shared by libebb (writer) and
 * utils/ebb (reader). ebb-trace(5) documents it; keep the two in step
 * (tests/check_trace.c checks the page's field list of each record type).
 *
 * A trace is text: a header line, then one record per line. A record is a
 * type letter and fields separated by single spaces, always in the order
 * below. Numbers are decimal except addresses, streams and handles, which
 * are hexadecimal with a 0x prefix. Times are nanoseconds since ebb started
 * in the process (CLOCK_MONOTONIC), except the GPU times of G records, which
 * are CUPTI timestamps (the Q cupti-clock record relates the two).
 */
#ifndef EBB_TRACE_FORMAT_H
#define EBB_TRACE_FORMAT_H

#include <stdint.h>

#define EBB_TRACE_MAGIC "#ebb-trace"
#define EBB_TRACE_VERSION 4
/* The oldest version the reader takes: version 4 only added the E record. */
#define EBB_TRACE_VERSION_MIN 3

/*
 * One entry per record type: its letter, its name, then its fields in
 * order, each a type applied to the field's name:
 *   u64(n)   an unsigned decimal number
 *   i64(n)   a signed decimal number
 *   hex(n)   a number in hexadecimal, 0x and lower case
 *   word(n)  text without blanks (the writer turns each blank into _)
 *   list(n)  a decimal count, then that many decimal values (or ? alone,
 *            where they are unknown); last only, and named "n..." in the
 *            record's field list
 * The reader's table (trace_read.c) and the writer of each record type
 * (trace.h, trace_rec.c) are made from this list alone. The type names
 * are pasted onto prefixes (EBB_TRACE_MAP's callers), so none of them may
 * be a macro where the list is expanded.
 */
/* Added to a V record's access (1 read, 2 written) when the buffer held a
 * word inside the span of the tracked buffers: a table of pointers. */
#define EBB_TRACE_ACC_POINTERS 4

#define EBB_TRACE_RECORDS(X)							\
	X('K', kernel,    u64(kid), u64(nparams), word(layout), word(name))	\
	X('A', alloc,     u64(t), u64(bid), hex(addr), u64(size), hex(stream),	\
	    word(kind), hex(site))						\
	X('F', free,      u64(t), u64(bid), hex(stream), word(kind))		\
	X('L', launch,    u64(t), u64(seq), hex(stream), u64(kid), list(bids))	\
	X('C', copy,      u64(t), u64(seq), hex(stream), u64(bytes), u64(sync),	\
	    word(dir), list(bids))						\
	X('M', memset,    u64(t), u64(seq), hex(stream), u64(bytes), u64(sync),	\
	    list(bids))								\
	X('N', nccl,      u64(t), u64(seq), hex(stream), word(op), i64(peer),	\
	    u64(bytes), i64(rank), u64(nranks), list(bids))			\
	X('R', graph,     u64(t), u64(seq), hex(stream), hex(graph))		\
	X('G', gputime,   u64(seq), u64(start), u64(end))			\
	X('Y', sync,      u64(t), u64(seq), word(kind), hex(handle))		\
	X('P', capture,   u64(t), hex(stream), word(state))			\
	X('I', iteration, u64(t), u64(iter), u64(seq), u64(period))		\
	X('D', departure, u64(t), u64(seq), u64(period), hex(token))		\
	X('X', failure,   u64(seq), i64(error))					\
	X('O', offload,   u64(t), u64(seq), u64(bid), u64(bytes), word(why))	\
	X('B', restore,   u64(t), u64(seq), u64(bid), u64(bytes), word(kind))	\
	X('U', release,   u64(t), u64(seq), u64(bid), u64(bytes), word(what))	\
	X('W', stall,     u64(t), u64(seq), u64(bytes), u64(stall))		\
	X('V', access,    u64(t), u64(seq), list(accs))				\
	X('J', refusal,   u64(t), u64(seq), u64(bid), u64(bytes), word(why))	\
	X('H', hostwait,  u64(t), u64(seq), u64(ns), word(what))		\
	X('E', pace,      u64(seq), u64(issue), u64(ebb), u64(call), u64(sync))	\
	X('Q', note,      u64(t), word(key), word(value))			\
	X('Z', summary,   u64(t), word(key), u64(value))

/*
 * EBB_TRACE_MAP(m, s, fields...): m(field) for each field of an entry, in
 * order, with s() between two (9 fields at most). m pastes a prefix of its
 * own onto the field, so that u64(t) becomes PREFIX_u64(t).
 */
#define EBB_TRACE_MAP(m, s, ...)					\
	EBB_TRACE_CAT(EBB_TRACE_MAP_, EBB_TRACE_COUNT(__VA_ARGS__))(m, s, __VA_ARGS__)
#define EBB_TRACE_MAP_1(m, s, a) m(a)
#define EBB_TRACE_MAP_2(m, s, a, ...) m(a) s() EBB_TRACE_MAP_1(m, s, __VA_ARGS__)
#define EBB_TRACE_MAP_3(m, s, a, ...) m(a) s() EBB_TRACE_MAP_2(m, s, __VA_ARGS__)
#define EBB_TRACE_MAP_4(m, s, a, ...) m(a) s() EBB_TRACE_MAP_3(m, s, __VA_ARGS__)
#define EBB_TRACE_MAP_5(m, s, a, ...) m(a) s() EBB_TRACE_MAP_4(m, s, __VA_ARGS__)
#define EBB_TRACE_MAP_6(m, s, a, ...) m(a) s() EBB_TRACE_MAP_5(m, s, __VA_ARGS__)
#define EBB_TRACE_MAP_7(m, s, a, ...) m(a) s() EBB_TRACE_MAP_6(m, s, __VA_ARGS__)
#define EBB_TRACE_MAP_8(m, s, a, ...) m(a) s() EBB_TRACE_MAP_7(m, s, __VA_ARGS__)
#define EBB_TRACE_MAP_9(m, s, a, ...) m(a) s() EBB_TRACE_MAP_8(m, s, __VA_ARGS__)
/* The number of its arguments, 1 to 9. */
#define EBB_TRACE_COUNT(...) EBB_TRACE_COUNT_(__VA_ARGS__, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0)
#define EBB_TRACE_COUNT_(a, b, c, d, e, f, g, h, i, n, ...) n
/* a and b pasted, after b is expanded. */
#define EBB_TRACE_CAT(a, b) EBB_TRACE_CAT_(a, b)
#define EBB_TRACE_CAT_(a, b) a##b
/* Separators for EBB_TRACE_MAP's s. */
#define EBB_TRACE_SEP_NONE()
#define EBB_TRACE_SEP_COMMA() ,
#define EBB_TRACE_SEP_SPACE() " "

/* The field list of an entry, as a string: "t bid addr size stream kind site". */
#define EBB_TRACE_FIELDS(...) EBB_TRACE_MAP(EBB_TRACE_NAME, EBB_TRACE_SEP_SPACE, __VA_ARGS__)
#define EBB_TRACE_NAME(f) EBB_TRACE_NAME_##f
#define EBB_TRACE_NAME_u64(n) #n
#define EBB_TRACE_NAME_i64(n) #n
#define EBB_TRACE_NAME_hex(n) #n
#define EBB_TRACE_NAME_word(n) #n
#define EBB_TRACE_NAME_list(n) #n "..."

/* Allocation kinds of A records, by enum ebb_alloc_kind. */
#define EBB_TRACE_ALLOC_KINDS { "sync", "pitch", "async", "pool", "map" }
/*
 * In offload mode, an allocation of kind sync, async or pool (A records)
 * of more than this many bytes gets a range of its own, and a recording
 * names it in its profile; one of at most this many comes from ebb's slabs
 * (ebb(7), Allocations and frees), never moves and is in no profile. A
 * reader of an offload trace tells the two apart by the A record's size.
 */
#define EBB_SLAB_MAX_BYTES ((uint64_t)1 << 20)
/* Free kinds of F records. */
#define EBB_TRACE_FREE_KINDS { "sync", "async", "lost", "unmap" }
/* Synchronisation kinds of Y records, by enum ebb_sync_kind. */
#define EBB_TRACE_SYNC_KINDS { "ctx", "stream", "event" }

#endif
