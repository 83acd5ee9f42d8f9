/*
 * match.h: tie CUPTI's activity records to ebb's operations.
 *
 * ebb pushes its sequence number as an external correlation id around the
 * driver call it forwards. CUPTI pairs that id with the correlation id of the
 * driver API call (an external correlation record). A kernel, copy or memset
 * record carries the correlation id of the API call that issued it: that
 * driver call when the job called the driver directly, but the enclosing
 * runtime API call when the job went through libcudart (cudaLaunchKernel
 * around cuLaunchKernel). So an activity is matched directly through the
 * external correlation, or else through the runtime call whose correlation
 * id it carries: the driver call nested in it (same thread, inside its start
 * and end) that carries an external id, or, where CUPTI does not report
 * driver calls made inside runtime calls, the one operation ebb forwarded
 * (stamped with CUPTI's clock as it went to the driver) inside the runtime
 * call's start and end.
 *
 * Pure C, no CUPTI headers: unit-tested on made-up records.
 */
#ifndef EBB_CUPTI_MATCH_H
#define EBB_CUPTI_MATCH_H

#include <stddef.h>
#include <stdint.h>

struct cm_ext {		/* external correlation record */
	uint32_t corr;
	uint64_t seq;
};

struct cm_api {		/* driver or runtime API record */
	uint32_t corr;
	uint32_t thread;
	uint8_t runtime;	/* 1: runtime API, 0: driver API */
	uint64_t start, end;
};

struct cm_act {		/* kernel, memcpy or memset record */
	uint32_t corr;
	uint64_t start, end;
};

struct cm_op {		/* an operation ebb forwarded, stamped with CUPTI's clock */
	uint64_t ts;
	uint64_t seq;
};

struct cm_stats {
	uint64_t direct;	/* matched through the external correlation */
	uint64_t nested;	/* matched through the driver call in the runtime call */
	uint64_t timed;		/* matched through the stamp inside the runtime call */
	uint64_t unmatched;	/* not issued by an operation ebb forwarded */
};

typedef void (*cm_out)(uint64_t seq, uint64_t start, uint64_t end, void *ctx);

/*
 * Match every activity and call out(seq, start, end, ctx) for each one
 * matched. ops is sorted by stamp here. Returns 0, or -1 when out of memory
 * (nothing is delivered then).
 */
int cupti_match(const struct cm_ext *ext, size_t next, const struct cm_api *api, size_t napi,
    const struct cm_act *act, size_t nact, struct cm_op *ops, size_t nops, cm_out out, void *ctx,
    struct cm_stats *stats);

#endif
