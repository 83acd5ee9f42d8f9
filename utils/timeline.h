/*
 * timeline.h: `ebb timeline TRACE -o FILE`: a trace as Chrome trace-event
 * JSON, which Perfetto's UI and chrome://tracing open.
 */
#ifndef EBB_TIMELINE_H
#define EBB_TIMELINE_H

#include <stdint.h>
#include <stdio.h>

struct ebb_timeline_opts {
	const char *out;	/* the JSON file to write */
	uint64_t iteration;	/* only this iteration (its I record's number); 0: all */
	int window;		/* only [from_ns, to_ns) of the trace's clock */
	uint64_t from_ns, to_ns;
};

/*
 * Read the trace at path and write its timeline to o->out. Returns 0; 1
 * when the trace is malformed or has no such iteration (said on err,
 * naming the file and line where there is one); 2 when a file cannot be
 * read or written.
 */
int ebb_timeline(const char *path, const struct ebb_timeline_opts *o, FILE *err);

#endif
