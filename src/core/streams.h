/*
 * streams.h: how far each stream has got, with few events.
 *
 * Every operation ebb forwards has a sequence number. For each stream the
 * tracker keeps marker events recorded after some of its operations; a
 * marker that has completed proves every earlier operation on that stream
 * done. Markers are recorded every few operations and whenever ebb needs
 * one (before an offload copy, at a free), so a question "has stream s
 * passed operation q?" costs an event query, and "make stream t wait until
 * s has passed q" a cuStreamWaitEvent, never a host wait.
 *
 * The per-thread default stream is one stream per thread that only its
 * thread can name: its operations get a marker each (recorded by the thread
 * that issued them), and other threads wait on those events.
 *
 * Not thread-safe: the engine holds its mutex.
 */
#ifndef EBB_STREAMS_H
#define EBB_STREAMS_H

#include <stdint.h>

#include "cuda_compat.h"

/* The stream an operation ran on: the handle the caller gave, with the
 * default streams made explicit and the per-thread one tied to its thread. */
struct ebb_stream;

/*
 * The tracker of handle (0 = the default stream: legacy, or the calling
 * thread's per-thread stream when per_thread). Created on first use; NULL
 * when out of memory.
 */
struct ebb_stream *streams_get(CUstream handle, int per_thread);

/* The handle to pass to the driver for s (from the thread that owns it). */
CUstream streams_handle(const struct ebb_stream *s);

/*
 * An operation between its start and its driver call, on its stream's list
 * from streams_begin to streams_after; the caller keeps it until then.
 */
struct streams_begun {
	uint64_t seq;
	struct streams_begun *next;
};

/*
 * Operation seq on s has started and is on its way to the driver (b is its
 * entry on s's list). While it is, no marker covers it nor any later
 * operation of s: threads that share a stream reach the driver in any order,
 * so a marker recorded after a later operation may precede this one.
 */
void streams_begin(struct ebb_stream *s, struct streams_begun *b, uint64_t seq);

/*
 * Operation seq on s has reached the driver (it leaves s's list of those on
 * their way, if streams_begin put it there): from now on a marker may cover
 * it (one recorded between an operation's start and its driver call would
 * claim it done before it ran). Records a marker when one is due and
 * markers are wanted (offload mode), first retiring the completed ones
 * (cuEventQuery, as streams_done does) when no event is left for reuse.
 */
void streams_after(struct ebb_stream *s, uint64_t seq, int markers);

/* Whether every operation on s up to seq has completed (polls markers). */
int streams_done(struct ebb_stream *s, uint64_t seq);

/*
 * Make stream `waiter` (a driver handle) wait until s has passed seq.
 * Returns 0, or a CUresult from the driver.
 */
CUresult streams_wait(struct ebb_stream *s, uint64_t seq, CUstream waiter);

/* Whether streams_wait(s, seq, ...) can order a wait now: seq is done or a
 * marker covers it, or one can be recorded that covers it (every operation
 * of s up to seq has reached the driver, s is not capturing, and is not
 * another thread's per-thread stream). */
int streams_orderable(struct ebb_stream *s, uint64_t seq);

/* Record a marker after the operations of s that have reached the driver,
 * unless the newest marker covers them already. */
void streams_mark_now(struct ebb_stream *s);

/* Record a marker now unless one already covers seq (a marker covers the
 * operations up to where s was when it was recorded): no event is queried. */
void streams_cover(struct ebb_stream *s, uint64_t seq);

/* The event of the pending marker that covers seq on s, recording none;
 * NULL when seq is done or no marker covers it yet. */
CUevent streams_marker(struct ebb_stream *s, uint64_t seq);

/* Block the calling thread until s has passed seq. Returns 0 or a CUresult
 * (from streams_event_wait: then whether s has passed seq is unknown). */
CUresult streams_sync(struct ebb_stream *s, uint64_t seq);

/*
 * Block the calling thread until ev has completed: cuEventSynchronize, and
 * where that fails, cuEventQuery until the event is done (the failure may
 * have been the call's alone). Returns CUDA_SUCCESS once it is known done,
 * or the error that leaves that unknown (a query failed too: the context is
 * broken): memory the work behind ev uses must then never be released.
 */
CUresult streams_event_wait(CUevent ev);

/*
 * Order s's later work after ev, which ebb recorded on a stream of its own:
 * s waits for it, or, where s captures, the host does (streams_event_wait),
 * so that the graph takes no dependency on ebb's uncaptured work, which the
 * driver refuses (CUDA_ERROR_STREAM_CAPTURE_ISOLATION) and which would not
 * be there at the graph's launches. capturing: whether any capture runs
 * (where none does, s is not asked about, which may take a driver call).
 */
CUresult streams_after_event(struct ebb_stream *s, CUevent ev, int capturing);

/*
 * The calling thread's capture interaction mode made relaxed, so that ebb's
 * own driver calls (event queries and waits, VMM calls) neither fail nor
 * invalidate a capture of the job's; returns the mode to give back to
 * streams_unrelax (-1 where the driver has no such call). ebb's own threads
 * stay relaxed; the job's threads are relaxed only inside ebb while a
 * capture runs.
 */
int streams_relax(void);
void streams_unrelax(int old);

/*
 * Whether s is being captured into a graph: set at its begin and end
 * capture; a stream that joined another's capture (it waited on an event
 * recorded in it) is found by asking the driver, once a capture runs, and
 * stays marked until that capture ends. No marker is recorded on a
 * capturing stream (it would land in the graph). Set at its begin, s is
 * also where that capture began, until streams_capture_ended(s, ...).
 */
void streams_set_stream_capturing(struct ebb_stream *s, int on);
int streams_capturing(struct ebb_stream *s);

/* A capture on ended (NULL: not known) ended: every stream is unmarked,
 * and where others still run (others), those still capturing are asked for
 * again. */
void streams_capture_ended(struct ebb_stream *ended, int others);

/* A capture begun on s is about to end (EBB_CAPTURE_JOIN, which ebb run
 * sets where it chooses PyTorch's cudaMallocAsync backend, as that leaves
 * side streams unjoined): every other stream seen that is in the same capture
 * (its id, from the driver) is joined to s, in relaxed mode: an event
 * recorded on it, which s waits for. That adds edges to the graph, no node,
 * and none a launch of it does not already wait for (it completes when all
 * its nodes have). Noted, and said at EBB_VERBOSE=2; returns how many. */
int streams_join_capture(struct ebb_stream *s);

/* Every stream seen, for conservative waits (callback gets each one). */
void streams_each(void (*fn)(struct ebb_stream *, void *), void *ctx);

/* The last operation on s that has reached the driver. */
uint64_t streams_last(const struct ebb_stream *s);

/* The last operation on s up to which every operation of s has reached the
 * driver (streams_last, less those still on their way): what a marker
 * recorded now covers. */
uint64_t streams_submitted(const struct ebb_stream *s);

/* The oldest operation of s on its way to the driver (streams_begin, not
 * yet streams_after), or UINT64_MAX when none is. */
uint64_t streams_first_begun(const struct ebb_stream *s);

/* An event from ebb's pool (timing disabled unless timing), and back. */
CUevent streams_event_get(int timing);
void streams_event_put(CUevent ev, int timing);

#endif
