/*
 * timeline.c: a trace (ebb-trace(5)) as Chrome trace-event JSON
 * (timeline.h), in three processes of the viewer:
 *
 *   device  a track per stream: the kernels, copies and memsets CUPTI
 *           timed (G records, on the trace's clock through the cupti-clock
 *           note), named by their kernels;
 *   host    the job's calls as ebb recorded them (instants; a
 *           synchronisation as a slice to the next call), and the job's
 *           thread's waits in ebb (H records);
 *   ebb     its copies to the host (O to U: from queueing behind the job's
 *           use to the release of the device memory), its restores, drops
 *           and remakes, the stalls (W), refusals (J), notes (Q), and the
 *           counters of device memory held and of host memory holding
 *           offloaded buffers, by the records.
 *
 * Iteration starts (I) and departures (D) are marks across all tracks, at
 * the time of the operation they name; an NCCL call that marks a pipeline
 * stage's boundary says so in its name. Times are microseconds of the
 * trace's clock (ts 0: libebb.so loaded).
 *
 * Two passes: the first keeps the kernel names, the operations' times, the
 * GPU times and the iteration starts; the second writes the events.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "plancmd_int.h"
#include "timeline.h"
#include "trace_read.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

/* Streams with a track of their own; later ones share the last. */
#define TL_STREAMS 64

/* The processes and the tracks of the host and of ebb (pid, tid). */
enum { PID_DEVICE = 1, PID_HOST = 2, PID_EBB = 3 };
enum { TID_CALLS = 1, TID_WAITS = 2 };
enum { TID_D2H = 1, TID_H2D = 2, TID_RECOMPUTE = 3, TID_STALLS = 4, TID_REFUSALS = 5,
	TID_NOTES = 6 };

struct tl_gtime {
	uint64_t seq, start, end;
};

/* What the first pass keeps of an operation. */
struct tl_op {
	uint64_t t;		/* its record's time; 0: not in the trace */
	uint64_t stream;	/* its stream handle */
	uint64_t kid;		/* a launch's kernel, else 0 */
};

struct tl_mark {
	uint64_t iter, seq, period;
};

struct tl {
	const char *path;
	FILE *err, *out;
	struct ebb_trace_reader rd;
	char **kname;		/* by kernel id */
	size_t nk;
	struct tl_gtime *g;	/* G records, by seq */
	size_t ng, cg;
	struct tl_op *op;	/* by seq */
	size_t nop;
	struct tl_mark *mark;	/* I records */
	size_t nmark, cmark;
	int have_clock;		/* the cupti-clock note: G time g is g - clock + clock_t */
	uint64_t clock, clock_t;
	uint64_t stream[TL_STREAMS];	/* the handle of each stream's track */
	size_t nstream;
	uint64_t t0, t1;	/* the window: [t0, t1) */
	uint64_t seq0, seq1;	/* with --iteration, its operations: [seq0, seq1) (the
				 * device's slices are theirs, wherever they fall) */
	uint64_t nev;		/* events written */
	struct planheld held;	/* the bytes on the device and offloaded on the host */
	struct planlive pend;	/* an offload's buffer -> its O record's t, tag: drop */
	int window;		/* --window was given */
	int counted;		/* the counters' sample at the window's start is written */
};

/* Say what is wrong, naming the file (and the line). Returns -1. */
static int
bad(struct tl *t, const char *fmt, ...)
{
	va_list ap;

	fprintf(t->err, "ebb timeline: %s:%llu: ", t->path, (unsigned long long)t->rd.line);
	va_start(ap, fmt);
	vfprintf(t->err, fmt, ap);
	va_end(ap);
	fputc('\n', t->err);
	return -1;
}

static int
oom(struct tl *t)
{
	fprintf(t->err, "ebb timeline: %s: out of memory\n", t->path);
	return -1;
}

/* Field i of the record as a number (the reader checked its syntax only for
 * the type's fields; a value that is not a number is said). */
static int
field(struct tl *t, size_t i, uint64_t *v)
{
	if (ebb_trace_u64(&t->rd.rec, i, v) == 0)
		return 0;
	return bad(t, "%s record's field %zu '%s' is not a number", ebb_trace_name(t->rd.rec.type),
	    i + 1, i < t->rd.rec.nfields ? t->rd.rec.field[i] : "");
}

/* a with room for element n (cap updated), or NULL when out of memory. */
static void *
grow(void *a, size_t *cap, size_t n, size_t size)
{
	if (n < *cap)
		return a;
	size_t c = *cap ? *cap * 2 : 1024;
	while (c <= n)
		c *= 2;
	void *na = realloc(a, c * size);
	if (na != NULL)
		*cap = c;
	return na;
}

/* ---- the first pass ---- */

static int stream_tid(struct tl *t, uint64_t h);

/* Keep what the first pass needs of the record read. Returns 0, or -1. */
static int
scan_record(struct tl *t)
{
	const struct ebb_trace_rec *r = &t->rd.rec;
	uint64_t a, b, c;

	switch (r->type) {
	case 'K': {
		if (field(t, 0, &a) < 0)
			return -1;
		size_t cap = t->nk;
		if (a >= t->nk) {
			char **k = grow(t->kname, &cap, a, sizeof *k);
			if (k == NULL)
				return oom(t);
			memset(k + t->nk, 0, (cap - t->nk) * sizeof *k);
			t->kname = k;
			t->nk = cap;
		}
		free(t->kname[a]);
		if ((t->kname[a] = strdup(r->field[3])) == NULL)
			return oom(t);
		return 0;
	}
	case 'G':
		if (field(t, 0, &a) < 0 || field(t, 1, &b) < 0 || field(t, 2, &c) < 0)
			return -1;
		struct tl_gtime *g = grow(t->g, &t->cg, t->ng, sizeof *g);
		if (g == NULL)
			return oom(t);
		t->g = g;
		t->g[t->ng++] = (struct tl_gtime){ a, b, c };
		return 0;
	case 'I':
		if (field(t, 1, &a) < 0 || field(t, 2, &b) < 0 || field(t, 3, &c) < 0)
			return -1;
		struct tl_mark *m = grow(t->mark, &t->cmark, t->nmark, sizeof *m);
		if (m == NULL)
			return oom(t);
		t->mark = m;
		t->mark[t->nmark++] = (struct tl_mark){ a, b, c };
		return 0;
	case 'Q':
		if (strcmp(r->field[1], "cupti-clock") == 0 && !t->have_clock) {
			if (field(t, 0, &t->clock_t) < 0 || field(t, 2, &t->clock) < 0)
				return -1;
			t->have_clock = 1;
		}
		return 0;
	case 'L': case 'C': case 'M': case 'N': case 'R': case 'Y': {
		if (field(t, 0, &a) < 0 || field(t, 1, &b) < 0)
			return -1;
		size_t cap = t->nop;
		if (b >= t->nop) {
			struct tl_op *o = grow(t->op, &cap, b, sizeof *o);
			if (o == NULL)
				return oom(t);
			memset(o + t->nop, 0, (cap - t->nop) * sizeof *o);
			t->op = o;
			t->nop = cap;
		}
		struct tl_op *op = &t->op[b];
		*op = (struct tl_op){ .t = a };
		if (r->type != 'Y' && field(t, 2, &op->stream) < 0)
			return -1;
		if (r->type == 'L' && field(t, 3, &op->kid) < 0)
			return -1;
		if (r->type != 'Y')
			stream_tid(t, op->stream);
		return 0;
	}
	default:
		return 0;
	}
}

static int
cmp_gtime(const void *a, const void *b)
{
	const struct tl_gtime *x = a, *y = b;

	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* The t of operation seq, or 0 when the trace has none. */
static uint64_t
op_time(const struct tl *t, uint64_t seq)
{
	return seq < t->nop ? t->op[seq].t : 0;
}

/* The window of o: the iteration's operations' times, or the range given,
 * or all. Returns 0, or -1 (said). */
static int
set_window(struct tl *t, const struct ebb_timeline_opts *o)
{
	t->t0 = 0;
	t->t1 = UINT64_MAX;
	t->window = o->window;
	if (o->window) {
		t->t0 = o->from_ns;
		t->t1 = o->to_ns;
	}
	if (o->iteration == 0)
		return 0;
	const struct tl_mark *m = NULL;
	for (size_t i = 0; i < t->nmark; i++)
		if (t->mark[i].iter == o->iteration)
			m = &t->mark[i];
	if (m == NULL) {
		fprintf(t->err, "ebb timeline: %s has no iteration %llu (its I records number %zu "
		    "iteration starts)\n", t->path, (unsigned long long)o->iteration, t->nmark);
		return -1;
	}
	uint64_t a = op_time(t, m->seq), b = 0;
	for (size_t i = 0; i < t->nmark; i++)	/* the next start, or the end of the period */
		if (t->mark[i].seq > m->seq && (b == 0 || op_time(t, t->mark[i].seq) < b))
			b = op_time(t, t->mark[i].seq);
	if (b == 0 && m->period > 0)
		b = op_time(t, m->seq + m->period);
	if (a == 0) {
		fprintf(t->err, "ebb timeline: %s: iteration %llu starts at operation %llu, which "
		    "the trace does not hold\n", t->path, (unsigned long long)o->iteration,
		    (unsigned long long)m->seq);
		return -1;
	}
	t->t0 = a > t->t0 ? a : t->t0;
	if (b != 0 && b < t->t1)
		t->t1 = b;
	t->seq0 = m->seq;
	t->seq1 = m->period > 0 ? m->seq + m->period : UINT64_MAX;
	return 0;
}

/* ---- writing ---- */

/* Write s as a JSON string's contents. */
static void
json_str(FILE *f, const char *s)
{
	for (; *s != '\0'; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
}

/* Begin an event: its phase, process, track, time (ns) and name; the caller
 * adds fields and closes it with fputs("}", ...). */
static void
ev_begin(struct tl *t, char ph, int pid, int tid, uint64_t ns, const char *name)
{
	fprintf(t->out, "%s\n{\"ph\":\"%c\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"name\":\"",
	    t->nev++ ? "," : "", ph, pid, tid, (double)ns / 1e3);
	json_str(t->out, name);
	fputc('"', t->out);
}

/* Whether [a, b] overlaps the window. */
static int
in_window(const struct tl *t, uint64_t a, uint64_t b)
{
	return b >= t->t0 && a < t->t1;
}

/* An instant event on a track, with one string argument. */
static void
instant(struct tl *t, int pid, int tid, uint64_t ns, const char *name, const char *arg)
{
	if (!in_window(t, ns, ns))
		return;
	ev_begin(t, 'i', pid, tid, ns, name);
	fputs(",\"s\":\"t\",\"args\":{\"detail\":\"", t->out);
	json_str(t->out, arg);
	fputs("\"}}", t->out);
}

/* A slice [a, b] on a track, with one string argument, in the window or
 * not. */
static void
slice_any(struct tl *t, int pid, int tid, uint64_t a, uint64_t b, const char *name,
    const char *arg)
{
	if (b < a)
		return;
	ev_begin(t, 'X', pid, tid, a, name);
	fprintf(t->out, ",\"dur\":%.3f,\"args\":{\"detail\":\"", (double)(b - a) / 1e3);
	json_str(t->out, arg);
	fputs("\"}}", t->out);
}

/* A slice [a, b] on a track, where it overlaps the window. */
static void
slice(struct tl *t, int pid, int tid, uint64_t a, uint64_t b, const char *name, const char *arg)
{
	if (in_window(t, a, b))
		slice_any(t, pid, tid, a, b, name, arg);
}

/* The track (tid) of stream handle h on the device. */
static int
stream_tid(struct tl *t, uint64_t h)
{
	for (size_t i = 0; i < t->nstream; i++)
		if (t->stream[i] == h)
			return 10 + (int)i;
	if (t->nstream < TL_STREAMS) {
		t->stream[t->nstream] = h;
		return 10 + (int)t->nstream++;
	}
	return 10 + TL_STREAMS - 1;
}

/*
 * A readable name of kernel kid: an Itanium-mangled name's nested names
 * joined by "::" (_ZN2at6native6kernelI... -> at::native::kernel), else
 * the name as the driver gave it.
 */
static void
kernel_name(const struct tl *t, uint64_t kid, char *out, size_t len)
{
	const char *m = kid < t->nk && t->kname[kid] != NULL ? t->kname[kid] : "?";
	size_t n = 0;

	snprintf(out, len, "%s", m);
	if (strncmp(m, "_Z", 2) != 0)
		return;
	const char *p = m + 2;
	int nested = *p == 'N';
	p += nested;
	while (*p == 'K' || *p == 'V')	/* cv-qualifiers of a nested name */
		p++;
	while (*p >= '1' && *p <= '9') {
		char *end;
		unsigned long k = strtoul(p, &end, 10);
		if (k == 0 || strnlen(end, k) < k || n + k + 3 >= len)
			break;
		n += (size_t)snprintf(out + n, len - n, "%s%.*s", n ? "::" : "", (int)k, end);
		p = end + k;
		if (!nested)
			break;
	}
	if (n == 0)
		snprintf(out, len, "%s", m);
}

/* The device's slices: one per G record, at the trace's clock, on its
 * operation's stream. */
static void
device_slices(struct tl *t)
{
	char name[256], arg[64];

	if (!t->have_clock)
		return;
	for (size_t i = 0; i < t->ng; i++) {
		const struct tl_gtime *g = &t->g[i];
		if (g->start < t->clock || g->seq >= t->nop)
			continue;
		uint64_t a = g->start - t->clock + t->clock_t, b = g->end - t->clock + t->clock_t;
		const struct tl_op *op = &t->op[g->seq];
		if (op->kid != 0)
			kernel_name(t, op->kid, name, sizeof name);
		else
			snprintf(name, sizeof name, "copy or memset");
		snprintf(arg, sizeof arg, "seq %llu", (unsigned long long)g->seq);
		if (t->seq1 > 0 && (g->seq < t->seq0 || g->seq >= t->seq1))
			continue;
		if (t->seq1 > 0 && !t->window)	/* the iteration's, wherever they fall */
			slice_any(t, PID_DEVICE, stream_tid(t, op->stream), a, b, name, arg);
		else
			slice(t, PID_DEVICE, stream_tid(t, op->stream), a, b, name, arg);
	}
}

/* The counters' samples at ns, where it is in the window. */
static void
counters(struct tl *t, uint64_t ns)
{
	if (ns < t->t0 || ns >= t->t1)
		return;
	ev_begin(t, 'C', PID_EBB, 0, ns, "device memory held (GiB)");
	fprintf(t->out, ",\"args\":{\"held\":%.4f}}", (double)t->held.device / GIB);
	ev_begin(t, 'C', PID_EBB, 0, ns, "host memory of offloaded buffers (GiB)");
	fprintf(t->out, ",\"args\":{\"offloaded\":%.4f}}", (double)t->held.host / GIB);
}

/* A record of a buffer's allocation, offload, release, restore or free:
 * the counters where they change, and an offload's (or drop's) slice from
 * its O record to its U record. Returns 0, or -1 (said). */
static int
memory_record(struct tl *t, uint64_t ns)
{
	const struct ebb_trace_rec *r = &t->rd.rec;
	uint64_t bid, size;
	size_t pend = SIZE_MAX, at;

	/* the fields planheld_record reads, said where one is not a number */
	if (field(t, r->type == 'A' || r->type == 'F' ? 1 : 2, &bid) < 0 ||
	    (r->type == 'A' && field(t, 3, &size) < 0))
		return -1;
	if (r->type != 'A')
		pend = planlive_find(&t->pend, bid);
	if (r->type == 'O') {
		if (planlive_put(&t->pend, bid, ns, strcmp(r->field[4], "drop") == 0) < 0)
			return oom(t);
	} else if (r->type == 'U' && pend != SIZE_MAX &&
	    (at = planlive_find(&t->held.buf, bid)) != SIZE_MAX &&
	    t->held.buf.tag[at] == PLANHELD_DEVICE) {
		int drop = t->pend.tag[pend];
		char name[96], arg[64];
		snprintf(name, sizeof name, "%s %llu", drop ? "drop" : "offload",
		    (unsigned long long)bid);
		snprintf(arg, sizeof arg, "%llu bytes", (unsigned long long)t->held.buf.size[at]);
		slice(t, PID_EBB, drop ? TID_RECOMPUTE : TID_D2H, t->pend.size[pend], ns, name, arg);
		planlive_del(&t->pend, bid);
	} else if (r->type == 'F') {
		planlive_del(&t->pend, bid);
	}
	int changed = planheld_record(&t->held, r);
	if (changed < 0)
		return oom(t);
	if (changed)
		counters(t, ns);
	return 0;
}

/* An operation's record: an instant on the host's calls, or a slice for a
 * synchronisation (to the next operation's record). */
static void
op_record(struct tl *t, uint64_t ns, uint64_t seq)
{
	const struct ebb_trace_rec *r = &t->rd.rec;
	char name[300], arg[96];

	snprintf(arg, sizeof arg, "seq %llu, %s %s", (unsigned long long)seq,
	    r->type == 'Y' ? r->field[2] : "stream", r->type == 'Y' ? r->field[3] : r->field[2]);
	switch (r->type) {
	case 'L':
		snprintf(name, sizeof name, "launch ");
		kernel_name(t, t->op[seq].kid, name + 7, sizeof name - 7);
		break;
	case 'C': snprintf(name, sizeof name, "copy %s %s bytes", r->field[5], r->field[3]); break;
	case 'M': snprintf(name, sizeof name, "memset %s bytes", r->field[3]); break;
	case 'N': {
		int send;
		snprintf(name, sizeof name, "nccl %s peer %s%s", r->field[3], r->field[4],
		    planphase_marker(r, &send) ? " (stage marker)" : "");
		break;
	}
	case 'R': snprintf(name, sizeof name, "graph launch %s", r->field[3]); break;
	default: {	/* Y: the wait, to the next operation */
		uint64_t end = op_time(t, seq + 1);
		snprintf(name, sizeof name, "sync %s", r->field[2]);
		slice(t, PID_HOST, TID_CALLS, ns, end > ns ? end : ns, name, arg);
		return;
	}
	}
	instant(t, PID_HOST, TID_CALLS, ns, name, arg);
}

/* A global mark at ns (an iteration start, a departure). */
static void
mark(struct tl *t, uint64_t ns, const char *name)
{
	if (!in_window(t, ns, ns))
		return;
	ev_begin(t, 'i', PID_HOST, TID_CALLS, ns, name);
	fputs(",\"s\":\"g\"}", t->out);
}

/* Write the events of the record read. Returns 0, or -1 (said). */
static int
emit_record(struct tl *t)
{
	const struct ebb_trace_rec *r = &t->rd.rec;
	uint64_t ns, seq, v;
	char name[128], arg[128];

	if (strchr("KGIZX", r->type) != NULL)
		return 0;
	if (field(t, 0, &ns) < 0)
		return -1;
	if (!t->counted && ns >= t->t0 && ns < t->t1) {
		/* what is held where the window starts */
		t->counted = 1;
		counters(t, t->t0 > 0 ? t->t0 : ns);
	}
	switch (r->type) {
	case 'A': case 'F': case 'U':
		return memory_record(t, ns);
	case 'B':
		if (memory_record(t, ns) < 0)
			return -1;
		snprintf(name, sizeof name, "%s %s", strcmp(r->field[4], "remake") == 0 ? "remake" :
		    "restore", r->field[2]);
		snprintf(arg, sizeof arg, "%s, seq %s, %s bytes", r->field[4], r->field[1],
		    r->field[3]);
		instant(t, PID_EBB, strcmp(r->field[4], "remake") == 0 ? TID_RECOMPUTE : TID_H2D, ns,
		    name, arg);
		return 0;
	case 'O':
		return memory_record(t, ns);
	case 'W': case 'H':
		if (field(t, r->type == 'W' ? 3 : 2, &v) < 0)
			return -1;
		snprintf(name, sizeof name, r->type == 'W' ? "stall for seq %s" : "wait: %s",
		    r->type == 'W' ? r->field[1] : r->field[3]);
		snprintf(arg, sizeof arg, "%llu ns", (unsigned long long)v);
		slice(t, r->type == 'W' ? PID_EBB : PID_HOST, r->type == 'W' ? TID_STALLS : TID_WAITS,
		    v < ns ? ns - v : 0, ns, name, arg);
		return 0;
	case 'J':
		instant(t, PID_EBB, TID_REFUSALS, ns, r->field[4], r->field[2]);
		return 0;
	case 'Q':
		snprintf(name, sizeof name, "%s", r->field[1]);
		instant(t, PID_EBB, TID_NOTES, ns, name, r->field[2]);
		return 0;
	case 'P':
		snprintf(name, sizeof name, "capture %s, stream %s", r->field[2], r->field[1]);
		instant(t, PID_HOST, TID_CALLS, ns, name, "");
		return 0;
	case 'D':
		if (field(t, 1, &seq) < 0)
			return -1;
		snprintf(name, sizeof name, "departure at seq %llu", (unsigned long long)seq);
		mark(t, ns, name);
		return 0;
	default:
		if (field(t, 1, &seq) < 0)
			return -1;
		op_record(t, ns, seq);
		return 0;
	}
}

/* A process's or a track's name (metadata events). */
static void
meta(struct tl *t, const char *what, int pid, int tid, const char *name)
{
	fprintf(t->out, "%s\n{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"name\":\"%s\",\"args\":{\"name\":\"",
	    t->nev++ ? "," : "", pid, tid, what);
	json_str(t->out, name);
	fputs("\"}}", t->out);
}

/* The names of the processes and of every track. */
static void
names(struct tl *t)
{
	static const char *const ebb_tracks[] = { NULL, "copies to the host (queued to released)",
		"restores", "drops and remakes (recompute)", "stalls", "refusals", "notes" };
	char name[64];

	meta(t, "process_name", PID_DEVICE, 0, t->have_clock ? "device (CUPTI times)" :
	    "device (no CUPTI times in the trace)");
	meta(t, "process_name", PID_HOST, 0, "host (the job's calls)");
	meta(t, "process_name", PID_EBB, 0, "ebb");
	meta(t, "thread_name", PID_HOST, TID_CALLS, "calls");
	meta(t, "thread_name", PID_HOST, TID_WAITS, "waits in ebb");
	for (int i = 1; i <= TID_NOTES; i++)
		meta(t, "thread_name", PID_EBB, i, ebb_tracks[i]);
	for (size_t i = 0; i < t->nstream; i++) {
		snprintf(name, sizeof name, "stream 0x%llx%s", (unsigned long long)t->stream[i],
		    i == TL_STREAMS - 1 ? " and later ones" : "");
		meta(t, "thread_name", PID_DEVICE, 10 + (int)i, name);
	}
}

/* Read every record with fn. Returns 0, or -1 (said). */
static int
each_record(struct tl *t, int (*fn)(struct tl *))
{
	char why[EBB_TRACE_ERRLEN];
	int rc;

	while ((rc = ebb_trace_next(&t->rd, why, sizeof why)) == 1)
		if (fn(t) < 0)
			return -1;
	if (rc < 0)
		fprintf(t->err, "ebb timeline: %s\n", why);
	return rc;
}

/* Both passes and the file's frame. Returns 0, or 1 or 2 (said). */
static int
timeline_write(struct tl *t, const struct ebb_timeline_opts *o)
{
	if (each_record(t, scan_record) < 0)
		return 1;
	if (t->ng > 1)	/* t->g is NULL without GPU times */
		qsort(t->g, t->ng, sizeof *t->g, cmp_gtime);
	if (set_window(t, o) < 0)
		return 1;
	if (ebb_trace_rewind(&t->rd) < 0) {
		fprintf(t->err, "ebb timeline: %s: %s\n", t->path, strerror(errno));
		return 2;
	}
	t->out = fopen(o->out, "w");
	if (t->out == NULL) {
		fprintf(t->err, "ebb timeline: cannot write %s: %s\n", o->out, strerror(errno));
		return 2;
	}
	fputs("{\"displayTimeUnit\":\"ms\",\"otherData\":{\"source\":\"", t->out);
	json_str(t->out, t->path);
	fputs("\"},\"traceEvents\":[", t->out);
	names(t);
	int rc = each_record(t, emit_record) < 0 ? 1 : 0;
	if (rc == 0) {
		device_slices(t);
		char name[64];
		for (size_t i = 0; i < t->nmark; i++) {
			snprintf(name, sizeof name, "iteration %llu",
			    (unsigned long long)t->mark[i].iter);
			uint64_t ns = op_time(t, t->mark[i].seq);
			if (ns != 0)
				mark(t, ns, name);
		}
	}
	fputs("\n]}\n", t->out);
	if (fclose(t->out) != 0 && rc == 0) {
		fprintf(t->err, "ebb timeline: writing %s failed: %s\n", o->out, strerror(errno));
		rc = 2;
	}
	return rc;
}

/* ebb_timeline (timeline.h) */
int
ebb_timeline(const char *path, const struct ebb_timeline_opts *o, FILE *err)
{
	struct tl t = { .path = path, .err = err };

	if (ebb_trace_reader_open(&t.rd, path) < 0) {
		fprintf(err, "ebb timeline: cannot open %s: %s\n", path, strerror(errno));
		return 2;
	}
	int rc = timeline_write(&t, o);
	if (rc == 0)
		fprintf(err, "ebb timeline: %llu events of %s in %s\n", (unsigned long long)t.nev,
		    path, o->out);
	for (size_t i = 0; i < t.nk; i++)
		free(t.kname[i]);
	free(t.kname);
	free(t.g);
	free(t.op);
	free(t.mark);
	planheld_free(&t.held);
	planlive_free(&t.pend);
	ebb_trace_reader_close(&t.rd);
	return rc;
}
