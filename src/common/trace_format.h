/*
 * trace_format.h: the trace file format, shared by libebb (writer) and
 * utils/ebb (reader). ebb-trace(5) documents it; keep the two in step.
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

#define EBB_TRACE_MAGIC "#ebb-trace"
#define EBB_TRACE_VERSION 2

/*
 * One entry per record type: letter, name, fields. A field ending in "..."
 * is a count followed by that many values.
 */
#define EBB_TRACE_RECORDS(X)						\
	X('K', kernel,    "kid nparams layout name")			\
	X('A', alloc,     "t bid addr size stream kind site")		\
	X('F', free,      "t bid stream kind")				\
	X('L', launch,    "t seq stream kid bids...")			\
	X('C', copy,      "t seq stream bytes sync dir bids...")		\
	X('M', memset,    "t seq stream bytes sync bids...")		\
	X('N', nccl,      "t seq stream op peer bytes bids...")		\
	X('R', graph,     "t seq stream graph")				\
	X('G', gputime,   "seq start end")				\
	X('Y', sync,      "t seq kind handle")				\
	X('P', capture,   "t stream state")				\
	X('I', iteration, "t iter seq period")				\
	X('D', departure, "t seq period token")				\
	X('X', failure,   "seq error")					\
	X('O', offload,   "t seq bid bytes why")			\
	X('B', restore,   "t seq bid bytes kind")			\
	X('U', release,   "t seq bid bytes what")			\
	X('W', stall,     "t seq bytes stall")				\
	X('J', refusal,   "t seq bid bytes why")			\
	X('H', hostwait,  "t seq ns what")				\
	X('Q', note,      "t key value")				\
	X('Z', summary,   "t key value")

/* Allocation kinds of A records, by enum ebb_alloc_kind. */
#define EBB_TRACE_ALLOC_KINDS { "sync", "pitch", "async", "pool", "map" }
/* Free kinds of F records. */
#define EBB_TRACE_FREE_KINDS { "sync", "async", "lost", "unmap" }
/* Synchronisation kinds of Y records, by enum ebb_sync_kind. */
#define EBB_TRACE_SYNC_KINDS { "ctx", "stream", "event" }

#endif
