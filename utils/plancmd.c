/*
 * plancmd.c: `ebb plan`: the planner (policy/plan.h) run on one iteration
 * of an observe-mode trace, so that a user can choose EBB_LIMIT before a
 * run. The trace is read twice: G records come late (when CUPTI is
 * detached) and I records name operations already written, so the first
 * pass collects them and chooses the iteration, and the second builds its
 * profile with policy/record.h as the engine would. planprint.c prints
 * what is learned and planned; planreplay.c, with --replay, reads the trace
 * a third time (plancmd_launches) for the write sets.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "conf.h"
#include "plan.h"
#include "planrun.h"
#include "plancmd.h"
#include "plancmd_int.h"
#include "record.h"
#include "trace_format.h"
#include "trace_read.h"

#define GRANULE ((uint64_t)2 << 20)	/* VMM granularity: what a moved buffer takes */

/* The numbers of one record that ebb plan uses, checked. */
struct ev {
	char type;
	unsigned xfer;		/* C: PROF_XFER_* of its dir, or 0 */
	int sync;		/* the host waited for the device there: Y, a synchronous C or M */
	uint64_t t, seq, id, size;
	uint64_t a, b, c;	/* G: seq start end; I: iter seq period */
	size_t list;		/* field of the list count; 0: no list */
	uint64_t nlist;		/* buffer ids after it */
};

static void bad(struct plancmd_src *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Report a problem at the current line of the trace. */
static void
bad(struct plancmd_src *s, const char *fmt, ...)
{
	va_list ap;

	fprintf(s->err, "ebb plan: %s:%llu: ", s->path, (unsigned long long)s->rd.line);
	va_start(ap, fmt);
	vfprintf(s->err, fmt, ap);
	va_end(ap);
	fputc('\n', s->err);
}

/* Say that memory ran out while reading s. Returns -1. */
static int
oom(struct plancmd_src *s)
{
	fprintf(s->err, "ebb plan: %s: out of memory\n", s->path);
	return -1;
}

/* v with room for element n (cap updated), or NULL when out of memory. */
static void *
grow(void *v, size_t *cap, size_t n, size_t size)
{
	if (n < *cap)
		return v;
	size_t c = *cap ? *cap * 2 : 256;
	void *nv = realloc(v, c * size);
	if (nv != NULL)
		*cap = c;
	return nv;
}

/*
 * Read the next record into s->rd.rec with the shared reader, which checks
 * the header on line 1. Returns 1, 0 at the end of the file, or -1 (said
 * on s->err).
 */
static int
next_record(struct plancmd_src *s)
{
	char why[EBB_TRACE_ERRLEN];
	int rc = ebb_trace_next(&s->rd, why, sizeof why);

	if (rc < 0)
		fprintf(s->err, "ebb plan: %s\n", why);
	return rc;
}

/* The name of field i of a record type, from its spec ("bids" for a list). */
static void
field_name(char type, size_t i, char *out, size_t len)
{
	const char *p = ebb_trace_spec(type);

	snprintf(out, len, "field %zu", i + 1);
	for (size_t k = 0; p != NULL && *p; k++) {
		size_t n = strcspn(p, " ");
		int list = n > 3 && strncmp(p + n - 3, "...", 3) == 0;
		if (k == i || list) {
			snprintf(out, len, "%.*s", (int)(list ? n - 3 : n), p);
			return;
		}
		p += n;
		p += *p == ' ';
	}
}

/* Field i as a number into *v; -1 (said) when it is not one. */
static int
num(struct plancmd_src *s, size_t i, uint64_t *v)
{
	char name[64];

	if (ebb_trace_u64(&s->rd.rec, i, v) == 0)
		return 0;
	field_name(s->rd.rec.type, i, name, sizeof name);
	bad(s, "%s record's %s '%s' is not a number", ebb_trace_name(s->rd.rec.type), name,
	    i < s->rd.rec.nfields ? s->rd.rec.field[i] : "");
	return -1;
}

/* Whether records of this type are operations (they take a seq). */
static int
is_op(char type)
{
	return type != '\0' && strchr("LCMNRY", type) != NULL;
}

/* The field of a type's list count, or 0 when it has no list. */
static size_t
list_field(char type)
{
	const char *p = ebb_trace_spec(type);

	for (size_t k = 0; p != NULL && *p; k++) {
		size_t n = strcspn(p, " ");
		if (n > 3 && strncmp(p + n - 3, "...", 3) == 0)
			return k;
		p += n;
		p += *p == ' ';
	}
	return 0;
}

/* Check and take a V record's seq and accesses (its list: each 1, read, or
 * 2, written, with EBB_TRACE_ACC_POINTERS added for a table of pointers, or
 * 0, not measured). Returns 0 or -1 (said). */
static int
decode_access(struct plancmd_src *s, struct ev *e)
{
	const struct ebb_trace_rec *r = &s->rd.rec;

	if (num(s, 0, &e->t) < 0 || num(s, 1, &e->seq) < 0)
		return -1;
	e->list = list_field(r->type);
	if (strcmp(r->field[e->list], "?") == 0) {
		bad(s, "access record's accs is '?': a V record gives each of its accesses");
		return -1;
	}
	e->nlist = r->nfields - e->list - 1;
	for (size_t k = e->list + 1; k < r->nfields; k++) {
		uint64_t acc;
		if (num(s, k, &acc) < 0)
			return -1;
		uint64_t a = acc & ~(uint64_t)EBB_TRACE_ACC_POINTERS;
		if (acc > (PROF_ACC_WRITE | EBB_TRACE_ACC_POINTERS) || (a != PROF_ACC_READ &&
		    a != PROF_ACC_WRITE && acc != PROF_ACC_UNKNOWN)) {
			bad(s, "access record's access '%s' is not 0 (not measured), 1 (read) or 2 "
			    "(written), with 4 added or not (a table of pointers)", r->field[k]);
			return -1;
		}
	}
	return 0;
}

/* Check and take the numbers ebb plan uses from s->rd.rec. Returns 0 or -1 (said). */
static int
decode(struct plancmd_src *s, struct ev *e)
{
	const struct ebb_trace_rec *r = &s->rd.rec;

	memset(e, 0, sizeof *e);
	e->type = r->type;
	if (is_op(r->type)) {
		if (num(s, 0, &e->t) < 0 || num(s, 1, &e->seq) < 0)
			return -1;
		e->sync = r->type == 'Y';
		if (r->type == 'C' || r->type == 'M') {
			uint64_t v;
			if (num(s, 4, &v) < 0)
				return -1;
			e->sync = v != 0;
		}
		if (r->type == 'C') {
			const char *dir = r->field[5];
			if (strcmp(dir, "d2h") == 0)
				e->xfer = PROF_XFER_D2H;
			else if (strcmp(dir, "h2d") == 0)
				e->xfer = PROF_XFER_H2D;
			else if (strcmp(dir, "other") != 0) {
				bad(s, "copy direction '%s': d2h, h2d or other", dir);
				return -1;
			}
		}
		e->list = list_field(r->type);
		if (e->list == 0 || strcmp(r->field[e->list], "?") == 0)
			return 0;
		e->nlist = r->nfields - e->list - 1;
		for (size_t k = e->list + 1; k < r->nfields; k++) {
			uint64_t id;
			if (num(s, k, &id) < 0)
				return -1;
		}
		return 0;
	}
	switch (r->type) {
	case 'A':
		return num(s, 0, &e->t) < 0 || num(s, 1, &e->id) < 0 || num(s, 3, &e->size) < 0 ? -1 : 0;
	case 'F':
		return num(s, 0, &e->t) < 0 || num(s, 1, &e->id) < 0 ? -1 : 0;
	case 'G':
		return num(s, 0, &e->a) < 0 || num(s, 1, &e->b) < 0 || num(s, 2, &e->c) < 0 ? -1 : 0;
	case 'I':
		return num(s, 1, &e->a) < 0 || num(s, 2, &e->b) < 0 || num(s, 3, &e->c) < 0 ? -1 : 0;
	case 'D':
		return num(s, 1, &e->seq);
	case 'V':
		return decode_access(s, e);
	default:
		return 0;
	}
}

/* Keep the V record just decoded as e: its seq and accesses. Returns 0, or
 * -1 when out of memory (said). */
static int
scan_access(struct plancmd_src *s, struct plancmd_scan *sc, const struct ev *e)
{
	struct plancmd_access *v = grow(sc->v, &sc->cv, sc->nv, sizeof *v);

	if (v == NULL)
		return oom(s);
	sc->v = v;
	if (sc->nacc + e->nlist > sc->cacc) {
		size_t c = sc->cacc ? sc->cacc : 256;
		while (c < sc->nacc + e->nlist)
			c *= 2;
		uint8_t *a = realloc(sc->acc, c);
		if (a == NULL)
			return oom(s);
		sc->acc = a;
		sc->cacc = c;
	}
	sc->v[sc->nv++] = (struct plancmd_access){ e->seq, sc->nacc, (size_t)e->nlist };
	for (size_t k = 0; k < e->nlist; k++) {
		uint64_t acc;
		ebb_trace_u64(&s->rd.rec, e->list + 1 + k, &acc);
		sc->acc[sc->nacc++] = (uint8_t)acc;
	}
	return 0;
}

/* Append the operation number the note being read names to *v (n of
 * cap). Returns 0, or -1 (said) when it is no number or out of memory. */
static int
note_seq(struct plancmd_src *s, uint64_t **v, size_t *n, size_t *cap)
{
	uint64_t seq, *w;

	if (ebb_trace_u64(&s->rd.rec, 2, &seq) < 0) {
		bad(s, "note %s: '%s' is not an operation's number", s->rd.rec.field[1],
		    s->rd.rec.field[2]);
		return -1;
	}
	if ((w = grow(*v, cap, *n, sizeof *w)) == NULL)
		return oom(s);
	*v = w;
	w[(*n)++] = seq;
	return 0;
}

/* First pass: operations in order, and the G, I, D, Q and V records. */
static int
scan_trace(struct plancmd_src *s, struct plancmd_scan *sc)
{
	struct ev e;
	int rc;

	while ((rc = next_record(s)) > 0) {
		if (decode(s, &e) < 0)
			return -1;
		if (is_op(e.type)) {
			if (e.seq <= sc->last_seq) {
				bad(s, "operation %llu after operation %llu: sequence numbers must increase",
				    (unsigned long long)e.seq, (unsigned long long)sc->last_seq);
				return -1;
			}
			sc->last_seq = e.seq;
			if (e.type != 'L')
				continue;
			uint64_t *v = grow(sc->launch, &sc->claunch, sc->nlaunch, sizeof *v);
			if (v == NULL)
				return oom(s);
			sc->launch = v;
			sc->launch[sc->nlaunch++] = e.seq;
			continue;
		}
		switch (e.type) {
		case 'G': {
			struct plancmd_gtime *v = grow(sc->g, &sc->cg, sc->ng, sizeof *v);
			if (v == NULL)
				return oom(s);
			sc->g = v;
			sc->g[sc->ng++] = (struct plancmd_gtime){ e.a, e.b, e.c };
			break;
		}
		case 'I': {
			struct plancmd_mark *v = grow(sc->mark, &sc->cmark, sc->nmark, sizeof *v);
			if (v == NULL)
				return oom(s);
			sc->mark = v;
			sc->mark[sc->nmark++] = (struct plancmd_mark){ e.a, e.b, e.c, s->rd.line };
			break;
		}
		case 'D': {
			uint64_t *v = grow(sc->dep, &sc->cdep, sc->ndep, sizeof *v);
			if (v == NULL)
				return oom(s);
			sc->dep = v;
			sc->dep[sc->ndep++] = e.seq;
			break;
		}
		case 'V':
			if (scan_access(s, sc, &e) < 0)
				return -1;
			break;
		case 'E': {
			struct plancmd_pace pe, *v;
			uint64_t sync;
			if (num(s, 0, &pe.seq) < 0 || num(s, 1, &pe.issue) < 0 || num(s, 2, &pe.ebb) < 0 ||
			    num(s, 3, &pe.call) < 0 || num(s, 4, &sync) < 0)
				return -1;
			if ((v = grow(sc->pace, &sc->cpace, sc->npace, sizeof *v)) == NULL)
				return oom(s);
			pe.sync = sync != 0;
			sc->pace = v;
			sc->pace[sc->npace++] = pe;
			break;
		}
		case 'O':
		case 'B':
			sc->offload = 1;
			break;
		case 'Q': {
			int rec = strcmp(s->rd.rec.field[1], "plan-recording") == 0;
			if (rec || strcmp(s->rd.rec.field[1], "plan-pace-from") == 0) {
				if ((rec ? note_seq(s, &sc->recorded, &sc->nrecorded, &sc->crecorded) :
				    note_seq(s, &sc->pace_from, &sc->npace_from, &sc->cpace_from)) < 0)
					return -1;
				break;
			}
			static const char *const cost_notes[4] = { "plan-host-offload-ns",
				"plan-host-restore-ns", "plan-host-drop-ns", "plan-host-remake-ns" };
			int c = -1;
			for (int k = 0; k < 4; k++)
				if (strcmp(s->rd.rec.field[1], cost_notes[k]) == 0)
					c = k;
			if (c >= 0) {
				uint64_t ns;
				if (ebb_trace_u64(&s->rd.rec, 2, &ns) < 0) {
					bad(s, "note %s: '%s' is not a number of nanoseconds",
					    s->rd.rec.field[1], s->rd.rec.field[2]);
					return -1;
				}
				sc->move_ns[c] = (double)ns;
				break;
			}
			int k = strcmp(s->rd.rec.field[1], "d2h-gbps") == 0 ? 0 :
			    strcmp(s->rd.rec.field[1], "h2d-gbps") == 0 ? 1 : -1;
			double v;
			if (k < 0)
				break;
			if (ebb_conf_parse_real(s->rd.rec.field[2], &v) < 0) {
				bad(s, "note %s: '%s' is not a bandwidth in GB/s", s->rd.rec.field[1],
				    s->rd.rec.field[2]);
				return -1;
			}
			if (v > 0)	/* 0: not measured */
				sc->gbps[k] = v;
			break;
		}
		default:
			break;
		}
	}
	return rc;
}

/* qsort order of I records: by the seq they name, then by line. */
static int
cmp_mark(const void *a, const void *b)
{
	const struct plancmd_mark *x = a, *y = b;

	if (x->seq != y->seq)
		return x->seq < y->seq ? -1 : 1;
	return x->line < y->line ? -1 : x->line > y->line;
}

/* qsort order of G records: by seq. */
static int
cmp_gtime(const void *a, const void *b)
{
	const struct plancmd_gtime *x = a, *y = b;

	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* qsort order of seqs and ids: increasing. */
static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* qsort(base, n, size, cmp), where base may be NULL when n is 0 (qsort's may
 * not be, even for no elements). */
static void
sort_array(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *))
{
	if (n > 1)
		qsort(base, n, size, cmp);
}

/* The first index of increasing v[0..n) whose value is >= x. */
static size_t
lower_u64(const uint64_t *v, size_t n, uint64_t x)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (v[mid] < x)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The first G record (sorted) whose seq is >= x. */
static size_t
lower_g(const struct plancmd_gtime *g, size_t n, uint64_t x)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (g[mid].seq < x)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/*
 * Choose the iteration: want (its I record's number; PLAN_ITER_RECORDED: the
 * one that starts at the plan-recording note's operation) when not 0, else the
 * last one wholly in the trace, without a departure, that has GPU times for
 * at least half its launches; else the last whole one, on host times.
 * Returns 0, or -1 when there is none.
 */
static int
choose(struct plancmd_scan *sc, uint64_t want, struct plancmd_choice *ch)
{
	int found = 0;

	sort_array(sc->mark, sc->nmark, sizeof *sc->mark, cmp_mark);
	sort_array(sc->g, sc->ng, sizeof *sc->g, cmp_gtime);
	sort_array(sc->dep, sc->ndep, sizeof *sc->dep, cmp_u64);
	memset(ch, 0, sizeof *ch);
	for (size_t i = sc->nmark; i-- > 0;) {
		const struct plancmd_mark *m = &sc->mark[i];
		if (want == PLAN_ITER_RECORDED ? sc->nrecorded == 0 || m->seq != sc->recorded[0] :
		    want != 0 && m->iter != want)
			continue;
		if (m->period == 0 || m->period > UINT32_MAX || m->seq == 0 ||
		    m->seq > sc->last_seq || m->period > sc->last_seq - m->seq + 1)
			continue;
		uint64_t end = m->seq + m->period;
		size_t d = lower_u64(sc->dep, sc->ndep, m->seq);
		if (d < sc->ndep && sc->dep[d] < end)
			continue;	/* the job left the learned iteration in it */
		size_t lo = lower_u64(sc->launch, sc->nlaunch, m->seq);
		size_t hi = lower_u64(sc->launch, sc->nlaunch, end);
		uint64_t timed = 0;
		for (size_t k = lo; k < hi; k++) {
			size_t j = lower_g(sc->g, sc->ng, sc->launch[k]);
			timed += j < sc->ng && sc->g[j].seq == sc->launch[k];
		}
		size_t g0 = lower_g(sc->g, sc->ng, m->seq);
		int any = g0 < sc->ng && sc->g[g0].seq < end;
		int cupti = hi > lo ? timed > 0 && 2 * timed >= hi - lo : any;
		if (!found) {
			*ch = (struct plancmd_choice){ m, m, 0, hi - lo, timed };
			found = 1;
		}
		if (cupti || want != 0) {
			*ch = (struct plancmd_choice){ m, ch->last, cupti, hi - lo, timed };
			break;
		}
	}
	return found ? 0 : -1;
}

/* What a buffer takes in the profile: movable ones a whole number of granules. */
static uint64_t
counted(const struct plancmd_build *b, uint64_t size, int *movable)
{
	*movable = size >= b->min_bytes;
	if (!*movable || size > UINT64_MAX - GRANULE)
		return size;
	return (size + GRANULE - 1) / GRANULE * GRANULE;
}

/* Remember the buffer id of the profile's buffer nbufs_before, if one was added. */
static int
note_bid(struct plancmd_build *b, uint32_t nbufs_before, uint64_t id)
{
	if (b->r.p.nbufs == nbufs_before)
		return 0;
	uint64_t *v = grow(b->bid, &b->cbid, nbufs_before, sizeof *v);
	if (v == NULL)
		return -1;
	b->bid = v;
	b->bid[nbufs_before] = id;
	return 0;
}

/* The buffers alive at the start, in the order of their ids (allocation order). */
static int
record_live(struct plancmd_build *b, struct planlive *l)
{
	uint64_t *ids = malloc((l->n ? l->n : 1) * sizeof *ids);
	size_t n = 0;

	if (ids == NULL)
		return -1;
	for (size_t i = 0; i < l->cap; i++)
		if (l->used[i])
			ids[n++] = l->id[i];
	qsort(ids, n, sizeof *ids, cmp_u64);
	for (size_t k = 0; k < n; k++) {
		size_t i = planlive_find(l, ids[k]);
		int mov;
		uint64_t size = counted(b, l->size[i], &mov);
		uint32_t nb = b->r.p.nbufs;
		rec_live(&b->r, ids[k], size, mov);
		if (note_bid(b, nb, ids[k]) < 0)
			b->r.oom = 1;
	}
	free(ids);
	planlive_free(l);
	return 0;
}

/* Nanosecond times from and to as the seconds between them; 0 when to is
 * not later. */
static double
seconds(uint64_t from, uint64_t to)
{
	return to > from ? (double)(to - from) / 1e9 : 0;
}

/*
 * Second pass: follow the live buffers up to the iteration's start, then
 * record its allocations, frees and uses, and its times. Returns 0 or -1.
 */
static int
build_profile(struct plancmd_src *s, const struct plancmd_scan *sc, const struct plancmd_choice *ch,
    struct plancmd_build *b)
{
	uint64_t s0 = ch->m->seq, end = s0 + ch->m->period;
	uint64_t last = 0, prev_seq = 0, prev_t = 0;
	int started = 0, have_prev = 0, rc;
	struct planlive live = { 0 };
	struct ev e;

	if (ebb_trace_rewind(&s->rd) < 0) {
		fprintf(s->err, "ebb plan: %s: cannot read it twice: %s\n", s->path,
		    strerror(errno));
		return -1;
	}
	while ((rc = next_record(s)) > 0) {
		if (decode(s, &e) < 0) {
			rc = -1;
			break;
		}
		int op = is_op(e.type);
		if (!started && (last + 1 >= s0 || (op && e.seq >= s0))) {
			if (rec_begin(&b->r, s0, (uint32_t)ch->m->period) < 0) {
				rc = oom(s);
				break;
			}
			started = 1;
			if (record_live(b, &live) < 0) {
				rc = oom(s);
				break;
			}
		}
		if (op && e.seq >= end) {
			if (b->host && have_prev)
				rec_time(&b->r, prev_seq, seconds(prev_t, e.t));
			if (started && e.seq == end)
				b->issue[end - s0] = e.t;
			have_prev = 0;
			break;
		}
		switch (e.type) {
		case 'A':
			if (started) {
				int mov;
				uint64_t size = counted(b, e.size, &mov);
				uint32_t nb = b->r.p.nbufs;
				rec_alloc(&b->r, e.id, size, mov, last + 1);
				if (note_bid(b, nb, e.id) < 0)
					b->r.oom = 1;
			} else if (planlive_put(&live, e.id, e.size, 0) < 0) {
				b->r.oom = 1;
			}
			break;
		case 'F':
			if (started)
				rec_free(&b->r, e.id, last);
			else
				planlive_del(&live, e.id);
			break;
		default:
			break;
		}
		if (!op)
			continue;
		if (started) {
			/* a copy between host and device shares a copy engine with ebb's */
			rec_xfer(&b->r, e.seq, e.xfer);
			for (uint64_t k = 0; k < e.nlist; k++) {
				uint64_t id;
				if (ebb_trace_u64(&s->rd.rec, e.list + 1 + k, &id) == 0)
					rec_use(&b->r, e.seq, id);
			}
			if (b->host && have_prev)
				rec_time(&b->r, prev_seq, seconds(prev_t, e.t));
			if (e.seq >= s0) {
				b->issue[e.seq - s0] = e.t;
				b->sync[e.seq - s0] = (uint8_t)e.sync;
			}
			prev_seq = e.seq;
			prev_t = e.t;
			have_prev = 1;
		}
		last = e.seq;
	}
	planlive_free(&live);
	if (rc < 0)
		return -1;
	if (!started) {
		fprintf(s->err, "ebb plan: %s changed while it was read\n", s->path);
		return -1;
	}
	if (!b->host)
		for (size_t j = lower_g(sc->g, sc->ng, s0); j < sc->ng && sc->g[j].seq < end; j++)
			rec_time(&b->r, sc->g[j].seq, seconds(sc->g[j].start, sc->g[j].end));
	rec_end(&b->r);
	if (b->r.oom)
		return oom(s);
	return planpace_profile(s, sc, b, s0, (uint32_t)ch->m->period);
}

/* Whether an allocation of this A record kind is ebb's to serve in offload
 * mode: of more than EBB_SLAB_MAX_BYTES, a range of its own, else a slab's. */
static int
own_range_kind(const char *kind)
{
	return strcmp(kind, "sync") == 0 || strcmp(kind, "async") == 0 ||
	    strcmp(kind, "pool") == 0;
}

/* The buffers launch record e lists, from s->rd.rec, into *ref (grown, *cap
 * updated) with what l knows of each. Returns 0, or -1 when out of memory. */
static int
launch_refs(struct plancmd_src *s, const struct ev *e, const struct planlive *l,
    struct plancmd_ref **ref, size_t *cap)
{
	if (e->nlist > *cap) {
		struct plancmd_ref *v = realloc(*ref, e->nlist * sizeof *v);
		if (v == NULL)
			return -1;
		*ref = v;
		*cap = e->nlist;
	}
	for (size_t k = 0; k < e->nlist; k++) {
		uint64_t id = 0;
		ebb_trace_u64(&s->rd.rec, e->list + 1 + k, &id);
		size_t i = planlive_find(l, id);
		(*ref)[k] = (struct plancmd_ref){ .bid = id };
		if (i != SIZE_MAX) {
			(*ref)[k].size = l->size[i];
			(*ref)[k].known = 1;
			(*ref)[k].own = l->tag[i];
		}
	}
	return 0;
}

/* plancmd_launches (plancmd_int.h): each launch from lo up to hi that lists
 * its buffers, to fn, and the operations' streams into stream. Returns 0, or
 * -1 (said, or fn's). */
int
plancmd_launches(struct plancmd_src *s, uint64_t lo, uint64_t hi, plancmd_launch_fn *fn,
    void *arg, uint64_t *stream)
{
	struct planlive live = { 0 };
	struct plancmd_ref *ref = NULL;
	size_t cref = 0;
	struct ev e;
	int rc;

	if (ebb_trace_rewind(&s->rd) < 0) {
		fprintf(s->err, "ebb plan: %s: cannot read it again: %s\n", s->path, strerror(errno));
		return -1;
	}
	while ((rc = next_record(s)) > 0) {
		if (decode(s, &e) < 0) {
			rc = -1;
			break;
		}
		if (e.type == 'A') {
			int own = own_range_kind(s->rd.rec.field[5]);
			if (planlive_put(&live, e.id, e.size, (uint8_t)own) < 0) {
				rc = oom(s);
				break;
			}
		} else if (e.type == 'F') {
			planlive_del(&live, e.id);
		}
		if (!is_op(e.type) || e.seq < lo)
			continue;
		if (e.seq >= hi)
			break;
		if (stream != NULL && e.type != 'Y')
			ebb_trace_u64(&s->rd.rec, 2, &stream[e.seq - lo]);
		if (e.type != 'L' || strcmp(s->rd.rec.field[e.list], "?") == 0)
			continue;
		if (launch_refs(s, &e, &live, &ref, &cref) < 0) {
			rc = oom(s);
			break;
		}
		if (fn(arg, e.seq, ref, (size_t)e.nlist) < 0) {
			rc = -1;
			break;
		}
	}
	free(ref);
	planlive_free(&live);
	return rc < 0 ? -1 : 0;
}

/*
 * Read the trace twice: choose the iteration, then build its profile.
 * Returns 0, or -1 when the trace is malformed, holds no usable iteration
 * or memory runs out (said on s.err).
 */
static int
learn(struct plancmd *g, const struct ebb_plan_opts *o)
{
	struct plancmd_src *s = &g->s;

	if (scan_trace(s, &g->sc) < 0)
		return -1;
	if (choose(&g->sc, o->iteration, &g->ch) < 0) {
		if (o->iteration == PLAN_ITER_RECORDED)
			fprintf(s->err, "ebb plan: %s: --iteration recorded: %s\n", s->path,
			    g->sc.nrecorded == 0 ? "the trace has no plan-recording note (the library "
			    "made no plan in it)" : "the iteration the plan-recording note names does not "
			    "lie wholly in the trace without a departure (D record)");
		else if (o->iteration != 0)
			fprintf(s->err, "ebb plan: %s: --iteration %llu: no such iteration (I record) "
			    "lies wholly in the trace without a departure (D record)\n", s->path,
			    (unsigned long long)o->iteration);
		else if (g->sc.nmark == 0)
			fprintf(s->err, "ebb plan: %s: the trace has no I records: ebb found no "
			    "training iteration in it. Trace the job with EBB_MODE=observe and EBB_TRACE "
			    "set for a few iterations (ebb run --mode observe --trace FILE -- CMD), then "
			    "plan on that trace\n", s->path);
		else
			fprintf(s->err, "ebb plan: %s: none of its %zu iterations (I records) lies "
			    "wholly in the trace without a departure (D record). Trace the job with "
			    "EBB_MODE=observe and EBB_TRACE set for a few more iterations\n", s->path,
			    g->sc.nmark);
		return -1;
	}
	g->b.min_bytes = o->min_bytes;
	g->b.host = !g->ch.cupti;
	g->b.issue = calloc(g->ch.m->period + 1, sizeof *g->b.issue);
	g->b.sync = calloc(g->ch.m->period + 1, 1);
	if (g->b.issue == NULL || g->b.sync == NULL)
		return oom(s);
	if (build_profile(s, &g->sc, &g->ch, &g->b) < 0)
		return -1;
	g->s0 = g->ch.m->seq;
	g->peak = prof_peak(&g->b.r.p, NULL);
	return 0;
}

/* The host's seconds for move kind k (0 offload, 1 restore, 2 drop, 3 a
 * remake's mapping): given with --move-cost, else the trace's note; a trace
 * without the drop or remake note (made before they were noted) costs them
 * as an offload and a restore; else 0. */
static double
move_cost(const struct plancmd *g, const struct ebb_plan_opts *o, int k)
{
	if (o->move_given)
		return o->move_us[k] * 1e-6;
	if (g->sc.move_ns[k] < 0 && k >= 2)
		k -= 2;
	return g->sc.move_ns[k] >= 0 ? g->sc.move_ns[k] / 1e9 : 0;
}

/*
 * The planner's parameters, but for the target: each bandwidth given, else
 * the trace's, else assumed; what a move costs the host given, else the
 * trace's notes, else 0.
 */
static void
set_params(struct plancmd *g, const struct ebb_plan_opts *o)
{
	const double given[2] = { o->d2h_gbps, o->h2d_gbps };

	for (int k = 0; k < 2; k++) {
		if (given[k] > 0) {
			g->gbps[k] = given[k];
			g->from[k] = "given";
		} else if (g->sc.gbps[k] > 0) {
			g->gbps[k] = g->sc.gbps[k];
			g->from[k] = "from the trace";
		} else {
			g->gbps[k] = PLANCMD_ASSUMED_GBPS;
			g->from[k] = "assumed";
			g->assumed |= 1 << k;
		}
	}
	g->pp = (struct plan_params){
		.d2h_bps = g->gbps[0] * 1e9, .h2d_bps = g->gbps[1] * 1e9,
		.copy_latency_s = PLAN_COPY_LATENCY_S, .min_bytes = o->min_bytes,
		.allow_stall = o->allow_stall, .no_waits = o->no_waits,
		.time_limit_s = o->time_limit_s, .phases = o->phases,
		.host_offload_s = move_cost(g, o, 0),
		.host_restore_s = move_cost(g, o, 1),
		.host_drop_s = move_cost(g, o, 2),
		.host_remake_s = move_cost(g, o, 3),
	};
}

/* The plan's bound into g->bound. Returns 0, or -1 when out of memory (said). */
static int
find_bound(struct plancmd *g)
{
	const struct prof *p = &g->b.r.p;

	g->bound = plan_bound(p, &g->pp);
	if (g->bound == 0 && g->peak > 0) {
		/* 0 is also plan_bound's answer when out of memory: ask again */
		struct plan_params q = g->pp;
		q.allow_stall = 0;
		if (plan_make(p, &q, &g->pl) < 0)
			return oom(&g->s);
		plan_fini(&g->pl);
	}
	return 0;
}

/* Free what one run of ebb plan holds, and close its trace. */
static void
planning_fini(struct plancmd *g)
{
	plan_fini(&g->pl);
	if (g->rc != NULL)
		plan_rc_fini(g->rc);
	free(g->rc);
	free(g->rows);
	plan_floor_free(g->fl);
	rec_fini(&g->b.r);
	free(g->b.bid);
	free(g->b.issue);
	free(g->b.sync);
	free(g->sc.mark);
	free(g->sc.g);
	free(g->sc.launch);
	free(g->sc.dep);
	free(g->sc.v);
	free(g->sc.acc);
	free(g->sc.pace);
	free(g->sc.pace_from);
	free(g->sc.recorded);
	ebb_trace_reader_close(&g->s.rd);
}

/* ebb plan (plancmd.h): learn the iteration, print it, plan at each target,
 * then, with o->replay, what a replay could bridge. */
int
ebb_plan(const char *path, const struct ebb_plan_opts *o, FILE *out, FILE *err)
{
	struct plancmd g = {
		.s = { .path = path, .err = err },
		.sc = { .move_ns = { -1, -1, -1, -1 } },
	};
	uint64_t target = 0;
	int rc = 1;

	if (ebb_trace_reader_open(&g.s.rd, path) < 0) {
		fprintf(err, "ebb plan: cannot open %s: %s\n", path, strerror(errno));
		return 2;
	}
	if (learn(&g, o) < 0)
		goto out;
	set_params(&g, o);
	if (planphase_cuts(&g) < 0 || find_bound(&g) < 0)
		goto out;
	planprint_learned(&g, o, out);
	if (planphase_print(&g, o->phases, out) < 0)
		goto out;
	if (planprint_floor(&g, out) < 0 || planprint_targets(&g, o, out, &target) < 0) {
		oom(&g.s);
		goto out;
	}
	if (o->moves)
		planprint_moves(out, &g.b, &g.pl, g.s0, target);
	if (o->replay && planreplay(&g, o, target, out) < 0)
		goto out;
	if (o->svg != NULL && plansvg_targets(&g, o) < 0)
		goto out;
	if (o->memory_svg != NULL && plansvg_memory(&g, o, target) < 0)
		goto out;
	rc = 0;
out:
	planning_fini(&g);
	return rc;
}
