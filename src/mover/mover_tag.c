/*
 * mover_tag.c: when memory the job freed may be used again (struct ebb_tag,
 * mover.h), for small buffers' slots and big buffers' blocks alike.
 */
#include "config.h"

#include "mover_int.h"

/* The three things asked of a (stream, seq) of a tag. */
enum tag_how { TAG_DONE, TAG_WAIT, TAG_SYNC };

/* Ask how of operation seq of stream s (waiter: the stream that waits, for
 * TAG_WAIT). Returns CUDA_SUCCESS, CUDA_ERROR_NOT_READY (TAG_DONE: not yet
 * done) or the driver's error. */
static CUresult
tag_one(struct ebb_stream *s, uint64_t seq, enum tag_how how, CUstream waiter)
{
	switch (how) {
	case TAG_DONE: return streams_done(s, seq) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
	case TAG_WAIT: return streams_wait(s, seq, waiter);
	default: return streams_sync(s, seq);
	}
}

/*
 * A tag with `all` stands for every stream as far as it had got when the
 * memory was freed (t->seq[0], the operation count then).
 */
struct tag_walk {
	const struct ebb_tag *t;
	CUstream waiter;
	enum tag_how how;
	CUresult r;
};

/* tag_apply's step for one stream of a tag with `all`: stops at the first
 * error, which stays in the walk's r. */
static void
tag_walk_one(struct ebb_stream *s, void *p)
{
	struct tag_walk *w = p;
	uint64_t upto = streams_last(s) < w->t->seq[0] ? streams_last(s) : w->t->seq[0];

	if (w->r == CUDA_SUCCESS && upto != 0)
		w->r = tag_one(s, upto, w->how, w->waiter);
}

/* Apply one of the three to every (stream, seq) of t. Returns the first
 * result that is not CUDA_SUCCESS, or CUDA_SUCCESS. */
static CUresult
tag_apply(const struct ebb_tag *t, enum tag_how how, CUstream waiter)
{
	if (t->all) {
		struct tag_walk w = { t, waiter, how, CUDA_SUCCESS };
		streams_each(tag_walk_one, &w);
		return w.r;
	}
	for (uint8_t i = 0; i < t->n; i++) {
		CUresult r = tag_one(t->s[i], t->seq[i], how, waiter);
		if (r != CUDA_SUCCESS)
			return r;
	}
	return CUDA_SUCCESS;
}

/* Whether memory freed under tag may be used again by any stream now. */
int
mover_tag_done(const struct ebb_tag *t)
{
	return tag_apply(t, TAG_DONE, NULL) == CUDA_SUCCESS;
}

/* Make stream waiter wait for t. Returns 0 or a CUresult. */
CUresult
mover_tag_wait(const struct ebb_tag *t, CUstream waiter)
{
	return tag_apply(t, TAG_WAIT, waiter);
}

/* Whether t names stream s alone (mover_int.h). */
int
mover_tag_only(const struct ebb_tag *t, const struct ebb_stream *s)
{
	return s != NULL && t->n == 1 && !t->all && t->s[0] == s;
}

/*
 * Record a marker where each stream of t now is, unless one covers t there
 * already (streams.c marks every 32 operations): a wait for t then ends
 * when the device passes that point, near the freed memory's last use, and
 * not at a marker recorded only when the wait begins, where the host then
 * is (the device then runs dry while the host maps the memory).
 */
void
mover_tag_mark(const struct ebb_tag *t)
{
	if (t->all)
		return;
	for (uint8_t i = 0; i < t->n; i++)
		streams_cover(t->s[i], t->seq[i]);
}

/* Block until t is done. Returns 0 or a CUresult. */
CUresult
mover_tag_sync(const struct ebb_tag *t)
{
	return tag_apply(t, TAG_SYNC, NULL);
}
