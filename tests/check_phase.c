/*
 * check_phase.c: the pipeline phases of an iteration (policy/phase.c), on
 * profiles of one stage of a pipeline made by the schedules themselves:
 * GPipe, 1F1B, and 1F1B interleaved over 2 virtual stages, on the first,
 * a middle and the last of 4 stages.
 *
 * A forward of micro-batch m on virtual stage c receives from the previous
 * stage (not the first stage's first virtual stage), makes 3 activations
 * of 8 MiB in 3 operations, and sends to the next (not the last stage's
 * last virtual stage). Its backward receives a gradient of 4 MiB from the
 * next (not on the last stage's last virtual stage), uses the activations
 * in reverse and frees each, and sends to the previous. Weights live
 * throughout; an optimizer step ends the iteration.
 *
 * Every forward and backward must come out a phase of its own, of its
 * kind, and each backward's forward must be the forward of its micro-batch
 * and virtual stage: learned from the buffers, whatever the schedule's
 * order.
 */
#include "config.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "phase.h"
#include "plan.h"
#include "testutil.h"

#define P 4		/* stages */
#define M 8		/* micro-batches */
#define ACT (8u << 20)
#define GRAD (4u << 20)

struct step {
	char kind;	/* 'F' or 'B' */
	int mb, chunk;
};

/* A schedule of one stage: its steps in order. */
struct sched {
	struct step s[2 * M * 2];
	int n;
	int rank, chunks;
};

/* The operations and buffers of one stage's iteration, as they are made. */
struct gen {
	struct prof *p;		/* NULL: count the operations only */
	uint32_t op;
	int64_t weights;
	int64_t act[M][2][3];
	int64_t grad;
	struct phase_cut cut;
	uint32_t start[1024];
	uint32_t nstart;
	uint32_t step_first[2 * M * 2];	/* each step's first operation */
};

/* One operation: a marker (send or not) or a computation. */
static uint32_t
op(struct gen *g, int marker, int send)
{
	ck_assert_uint_lt(g->nstart, 1024);
	phase_cut_record(g->start, &g->nstart, 1024, g->op, phase_cut_next(&g->cut, marker, send));
	if (g->p != NULL)
		ck_assert_int_eq(prof_use(g->p, (uint32_t)g->weights, g->op), 0);
	return g->op++;
}

static int64_t
add(struct gen *g, uint64_t size, uint32_t at)
{
	int64_t b = prof_add(g->p, size, 0, at, 1);

	ck_assert_int_ge(b, 0);
	ck_assert_int_eq(prof_use(g->p, (uint32_t)b, at), 0);
	return b;
}

static void
use(struct gen *g, int64_t b, uint32_t at)
{
	ck_assert_int_eq(prof_use(g->p, (uint32_t)b, at), 0);
}

/* The operations of one step. */
static void
step(struct gen *g, const struct sched *sc, const struct step *st, int k)
{
	int first = sc->rank == 0 && st->chunk == 0;
	int last = sc->rank == P - 1 && st->chunk == sc->chunks - 1;

	g->step_first[k] = g->op;
	if (st->kind == 'F') {
		if (!first)
			op(g, 1, 0);
		for (int j = 0; j < 3; j++) {
			uint32_t o = op(g, 0, 0);
			if (g->p != NULL)
				g->act[st->mb][st->chunk][j] = add(g, ACT, o);
		}
		if (!last) {
			uint32_t o = op(g, 1, 1);
			if (g->p != NULL)
				use(g, g->act[st->mb][st->chunk][2], o);
		}
		return;
	}
	uint32_t o = last ? op(g, 0, 0) : op(g, 1, 0);
	if (g->p != NULL)
		g->grad = add(g, GRAD, o);
	for (int j = 2; j >= 0; j--) {
		o = op(g, 0, 0);
		if (g->p != NULL) {
			use(g, g->act[st->mb][st->chunk][j], o);
			prof_free(g->p, (uint32_t)g->act[st->mb][st->chunk][j], o);
			use(g, g->grad, o);
			if (j == 0)
				prof_free(g->p, (uint32_t)g->grad, o);
		}
	}
	if (!first)
		op(g, 1, 1);
}

/* The profile of sc's iteration into p, with its marker cuts in g. */
static void
build(const struct sched *sc, struct prof *p, struct gen *g)
{
	memset(g, 0, sizeof *g);
	for (int k = 0; k < sc->n; k++)		/* count */
		step(g, sc, &sc->s[k], k);
	uint32_t nops = g->op + 1;
	memset(g, 0, sizeof *g);
	ck_assert_int_eq(prof_init(p, nops), 0);
	g->p = p;
	g->weights = prof_add(p, 64u << 20, 0, PROF_NONE, 0);
	for (int k = 0; k < sc->n; k++)
		step(g, sc, &sc->s[k], k);
	op(g, 0, 0);	/* the optimizer step */
	ck_assert_uint_eq(g->op, nops);
}

static void
push(struct sched *sc, char kind, int mb, int chunk)
{
	sc->s[sc->n++] = (struct step){ kind, mb, chunk };
}

/* GPipe: every forward, then every backward, the last micro-batch's first. */
static void
gpipe(struct sched *sc)
{
	for (int m = 0; m < M; m++)
		push(sc, 'F', m, 0);
	for (int m = M - 1; m >= 0; m--)
		push(sc, 'B', m, 0);
}

/*
 * 1F1B over chunks virtual stages: the forwards and the backwards in their
 * orders (groups of P micro-batches, each virtual stage in turn; the
 * backwards from the last virtual stage), warm-up forwards first, then one
 * of each in turn, then the rest of the backwards.
 */
static void
one_f_one_b(struct sched *sc)
{
	struct step f[M * 2], b[M * 2];
	int nf = 0, nb = 0, v = sc->chunks;

	for (int g0 = 0; g0 < M; g0 += P)
		for (int c = 0; c < v; c++)
			for (int m = g0; m < g0 + P && m < M; m++)
				f[nf++] = (struct step){ 'F', m, c };
	for (int g0 = 0; g0 < M; g0 += P)
		for (int c = v - 1; c >= 0; c--)
			for (int m = g0; m < g0 + P && m < M; m++)
				b[nb++] = (struct step){ 'B', m, c };
	int warm = v == 1 ? P - sc->rank - 1 : (P - sc->rank - 1) * 2 + (v - 1) * P;
	warm = warm > nf ? nf : warm;
	int i = 0, j = 0;
	while (i < warm)
		sc->s[sc->n++] = f[i++];
	while (i < nf) {
		sc->s[sc->n++] = f[i++];
		sc->s[sc->n++] = b[j++];
	}
	while (j < nb)
		sc->s[sc->n++] = b[j++];
}

/* Check the phases of sc's stage against its steps. */
static void
check_schedule(struct sched *sc)
{
	struct prof p;
	struct gen g;
	struct phase_set ps;

	build(sc, &p, &g);
	ck_assert_int_eq(phase_split(&p, g.start, g.nstart, &ps), 0);
	int steps = sc->n;
	ck_assert_uint_eq(ps.nforward, (uint32_t)steps / 2);
	ck_assert_uint_eq(ps.nbackward, (uint32_t)steps / 2);
	/* each step is a phase that starts at its first operation, or at the
	 * marker that ends the one before it */
	int phase_of_step[2 * M * 2];
	for (int k = 0; k < steps; k++) {
		phase_of_step[k] = -1;
		for (uint32_t i = 0; i < ps.n; i++)
			if (ps.ph[i].kind != PHASE_OTHER && ps.ph[i].first <= g.step_first[k] + 1 &&
			    ps.ph[i].last >= g.step_first[k] + 1)
				phase_of_step[k] = (int)i;
		ck_assert_msg(phase_of_step[k] >= 0, "rank %d: step %d (%c%d.%d) in no phase",
		    sc->rank, k, sc->s[k].kind, sc->s[k].mb, sc->s[k].chunk);
		const struct phase *ph = &ps.ph[phase_of_step[k]];
		ck_assert_int_eq(ph->kind, sc->s[k].kind == 'F' ? PHASE_FORWARD : PHASE_BACKWARD);
		for (int k2 = 0; k2 < k; k2++)
			ck_assert_int_ne(phase_of_step[k2], phase_of_step[k]);
	}
	for (int k = 0; k < steps; k++) {
		if (sc->s[k].kind != 'B')
			continue;
		int fk = -1;
		for (int k2 = 0; k2 < steps; k2++)
			if (sc->s[k2].kind == 'F' && sc->s[k2].mb == sc->s[k].mb &&
			    sc->s[k2].chunk == sc->s[k].chunk)
				fk = k2;
		ck_assert_int_ge(fk, 0);
		ck_assert_msg(ps.ph[phase_of_step[k]].forward == phase_of_step[fk],
		    "rank %d: B%d.%d paired with phase %d, not %d", sc->rank, sc->s[k].mb,
		    sc->s[k].chunk, ps.ph[phase_of_step[k]].forward, phase_of_step[fk]);
		ck_assert_msg(ps.ph[phase_of_step[k]].paired >= 3ull * ACT, "rank %d: B%d.%d uses %llu "
		    "bytes of its forward's", sc->rank, sc->s[k].mb, sc->s[k].chunk,
		    (unsigned long long)ps.ph[phase_of_step[k]].paired);
	}
	phase_fini(&ps);
	prof_fini(&p);
}

START_TEST(gpipe_phases)
{
	for (int r = 0; r < P; r++) {
		struct sched sc = { .rank = r, .chunks = 1 };
		gpipe(&sc);
		check_schedule(&sc);
	}
}
END_TEST

/* The links of sc's stage's buffers (phase_siblings), each checked: the
 * buffer linked to is alike, the distance later. Returns how many link
 * activations (a backward's gradient, alike in every backward, aside). */
static int64_t
siblings(const struct sched *sc)
{
	struct prof p;
	struct gen g;
	struct phase_set ps;
	uint32_t next[256], prev[256], shift[256];

	build(sc, &p, &g);
	ck_assert_uint_le(p.nbufs, 256);
	ck_assert_int_eq(phase_split(&p, g.start, g.nstart, &ps), 0);
	int64_t links = 0;
	ck_assert_int_ge(phase_siblings(&p, &ps, next, prev, shift), 0);
	for (uint32_t b = 0; b < p.nbufs; b++) {
		if (next[b] == PROF_NONE)
			continue;
		links += p.buf[b].size == ACT;
		const struct prof_buf *x = &p.buf[b], *y = &p.buf[next[b]];
		ck_assert_uint_eq(prev[next[b]], b);
		ck_assert_uint_eq(y->size, x->size);
		ck_assert_uint_eq(y->alloc, x->alloc + shift[b]);
		ck_assert_uint_eq(y->free, x->free + shift[b]);
		ck_assert_uint_eq(y->nuse, x->nuse);
		for (uint32_t u = 0; u < x->nuse; u++)
			ck_assert_uint_eq(y->use[u], x->use[u] + shift[b]);
	}
	phase_fini(&ps);
	prof_fini(&p);
	return links;
}

/* GPipe's activations are not alike (their backwards come in the reverse
 * order, at other distances); 1F1B's steady state's are, on every stage. */
START_TEST(siblings_by_schedule)
{
	for (int r = 0; r < P; r++) {
		struct sched gp = { .rank = r, .chunks = 1 }, fb = { .rank = r, .chunks = 1 };
		gpipe(&gp);
		one_f_one_b(&fb);
		ck_assert_int_eq(siblings(&gp), 0);
		ck_assert_int_gt(siblings(&fb), 0);
	}
}
END_TEST

START_TEST(one_f_one_b_phases)
{
	for (int r = 0; r < P; r++) {
		struct sched sc = { .rank = r, .chunks = 1 };
		one_f_one_b(&sc);
		check_schedule(&sc);
	}
}
END_TEST

START_TEST(interleaved_phases)
{
	for (int r = 0; r < P; r++) {
		struct sched sc = { .rank = r, .chunks = 2 };
		one_f_one_b(&sc);
		check_schedule(&sc);
	}
}
END_TEST

/* The cuts: a run with a receive starts a phase at its first operation
 * (said at the receive, after sends: 2, one operation back); a run of
 * sends alone, after it. */
START_TEST(cuts)
{
	/* ops: compute, send, compute, send+recv, compute, recv, compute, send, send, compute */
	static const int marker[] = { 0, 1, 0, 1, 1, 0, 1, 0, 1, 1, 0 };
	static const int send[] = { 0, 1, 0, 1, 0, 0, 0, 0, 1, 1, 0 };
	static const int want[] = { 1, 0, 1, 0, 2, 0, 1, 0, 0, 0, 1 };
	struct phase_cut c = { 0 };

	for (size_t i = 0; i < sizeof marker / sizeof *marker; i++)
		ck_assert_msg(phase_cut_next(&c, marker[i], send[i]) == want[i], "operation %zu", i);
	ck_assert(phase_marker(1, 4, 0));
	ck_assert(phase_marker(1, 4, 2));
	ck_assert(!phase_marker(1, 4, 3));
	ck_assert(phase_marker(3, 4, 0));	/* interleaved: the last stage's next is the first */
	ck_assert(!phase_marker(-1, 4, 0));
	ck_assert(phase_marker(0, 1, 0));	/* one stage: to itself */
	ck_assert(!phase_marker(1, 4, 1));
	ck_assert(!phase_marker(0, 1, 1));
}
END_TEST

/*
 * Gradient accumulation on one rank: no markers. Each of 4 micro-batches'
 * forwards makes 6 activations of 8 MiB, with a temporary of 4 MiB freed
 * by the next operation; its backward makes a temporary of 6 MiB (the
 * loss's gradient), then uses the activations in reverse, freeing each,
 * with a temporary of 4 MiB each operation. The first backward makes the
 * gradients (16 MiB), which the optimizer step frees at the end. Every
 * forward and backward must be a phase of its own, each backward paired
 * with its micro-batch's forward: the temporaries' turns (at most 10 MiB
 * of a 70 MiB swing) cut nothing. With a loss's gradient of loss_bytes.
 */
static void
accumulation(uint64_t loss_bytes, uint64_t logits)
{
	enum { MB = 4, L = 6 };
	struct prof p;
	struct phase_set ps;
	int64_t act[MB][L], grads = -1, tmp;
	uint32_t o = 0, fw_first[MB], bw_first[MB];
	static const uint32_t first_op[] = { 0 };

	ck_assert_int_eq(prof_init(&p, MB * (2 * L + 1 + 2 * (logits > 0)) + 1), 0);
	int64_t w = prof_add(&p, 64u << 20, 0, PROF_NONE, 0);
	for (int m = 0; m < MB; m++) {
		fw_first[m] = o;
		for (int l = 0; l < L; l++, o++) {
			act[m][l] = prof_add(&p, 8u << 20, 0, o, 1);
			tmp = prof_add(&p, 4u << 20, 0, o, 1);
			ck_assert_int_eq(prof_use(&p, (uint32_t)w, o), 0);
			ck_assert_int_eq(prof_use(&p, (uint32_t)act[m][l], o), 0);
			ck_assert_int_eq(prof_use(&p, (uint32_t)tmp, o), 0);
			ck_assert_int_eq(prof_use(&p, (uint32_t)tmp, o + 1), 0);
			prof_free(&p, (uint32_t)tmp, o + 1);
		}
		bw_first[m] = o;
		int64_t lg = prof_add(&p, loss_bytes, 0, o, 1);
		ck_assert_int_eq(prof_use(&p, (uint32_t)lg, o), 0);
		if (logits > 0) {
			/* the logits, made by the forward's last operation, freed
			 * by the loss's backward, which makes their gradient; the
			 * next operation's temporary as large */
			int64_t lo = prof_add(&p, logits, 0, o - 1, 1), dl, t;
			ck_assert_int_eq(prof_use(&p, (uint32_t)lo, o - 1), 0);
			ck_assert_int_eq(prof_use(&p, (uint32_t)act[m][L - 1], o), 0);
			ck_assert_int_eq(prof_use(&p, (uint32_t)lo, o), 0);
			prof_free(&p, (uint32_t)lo, o);
			dl = prof_add(&p, logits, 0, o, 1);
			ck_assert_int_eq(prof_use(&p, (uint32_t)dl, o), 0);
			o++;
			t = prof_add(&p, logits, 0, o, 1);
			ck_assert_int_eq(prof_use(&p, (uint32_t)t, o), 0);
			ck_assert_int_eq(prof_use(&p, (uint32_t)dl, o), 0);
			o++;
			ck_assert_int_eq(prof_use(&p, (uint32_t)t, o), 0);
			ck_assert_int_eq(prof_use(&p, (uint32_t)act[m][L - 1], o), 0);
			prof_free(&p, (uint32_t)t, o);
			prof_free(&p, (uint32_t)dl, o);
		}
		if (m == 0) {
			grads = prof_add(&p, 16u << 20, 0, o, 1);
			ck_assert_int_eq(prof_use(&p, (uint32_t)grads, o), 0);
		}
		o++;
		ck_assert_int_eq(prof_use(&p, (uint32_t)lg, o), 0);
		prof_free(&p, (uint32_t)lg, o);
		for (int l = L - 1; l >= 0; l--, o++) {
			tmp = prof_add(&p, 4u << 20, 0, o, 1);
			ck_assert_int_eq(prof_use(&p, (uint32_t)tmp, o), 0);
			prof_free(&p, (uint32_t)tmp, o);
			ck_assert_int_eq(prof_use(&p, (uint32_t)act[m][l], o), 0);
			prof_free(&p, (uint32_t)act[m][l], o);
			ck_assert_int_eq(prof_use(&p, (uint32_t)grads, o), 0);
		}
	}
	ck_assert_int_eq(prof_use(&p, (uint32_t)grads, o), 0);	/* the optimizer step */
	prof_free(&p, (uint32_t)grads, o);
	ck_assert_uint_eq(o + 1, p.nops);
	ck_assert_int_eq(phase_split(&p, first_op, 1, &ps), 0);
	ck_assert_uint_eq(ps.n, 2 * MB);
	ck_assert_uint_eq(ps.nforward, MB);
	ck_assert_uint_eq(ps.nbackward, MB);
	for (int m = 0; m < MB; m++) {
		const struct phase *f = &ps.ph[2 * m], *b = &ps.ph[2 * m + 1];
		ck_assert_int_eq(f->kind, PHASE_FORWARD);
		ck_assert_int_eq(b->kind, PHASE_BACKWARD);
		ck_assert_int_eq(b->forward, 2 * m);
		ck_assert_uint_ge(b->paired, (uint64_t)L * (8u << 20));
		/* the forward ends at the highest operation (the backward's first,
		 * which makes the loss's gradient), the backward at the lowest,
		 * before the next forward's first allocation */
		ck_assert_uint_eq(f->first, fw_first[m]);
		ck_assert_uint_eq(f->last, bw_first[m]);
		ck_assert_uint_eq(b->last, m + 1 < MB ? fw_first[m + 1] - 1 : p.nops - 1);
	}
	/* siblings: each micro-batch's activations and temporaries are linked
	 * to the next's, a micro-batch's operations later; the last
	 * micro-batch's to none, and the gradients (the first backward makes
	 * them) are no sibling of anything */
	uint32_t next[512], prev[512], shift[512];
	ck_assert_uint_le(p.nbufs, 512);
	ck_assert_int_gt(phase_siblings(&p, &ps, next, prev, shift), 0);
	for (int m = 0; m < MB; m++)
		for (int l = 0; l < L; l++) {
			uint32_t a = (uint32_t)act[m][l];
			if (m + 1 < MB) {
				ck_assert_uint_eq(next[a], (uint32_t)act[m + 1][l]);
				ck_assert_uint_eq(shift[a], fw_first[m + 1] - fw_first[m]);
				ck_assert_uint_eq(prev[next[a]], a);
			} else {
				ck_assert_uint_eq(next[a], PROF_NONE);
			}
			ck_assert_uint_eq(prev[a], m > 0 ? (uint32_t)act[m - 1][l] : PROF_NONE);
		}
	ck_assert_uint_eq(next[grads], PROF_NONE);
	ck_assert_uint_eq(prev[grads], PROF_NONE);
	for (int m = 0; m + 1 < MB; m++)
		ck_assert_int_eq(ps.ph[2 * m].alike, 2 * m + 2);
	ck_assert_int_eq(ps.ph[2 * MB - 2].alike, -1);
	phase_fini(&ps);
	prof_fini(&p);
}

START_TEST(accumulation_phases)
{
	accumulation(6u << 20, 0);
}
END_TEST

/* Logits nearly as large as a forward's activations (a language model's
 * over a large vocabulary: 40 MiB against 48), their gradient and a
 * temporary as large, with the first backward's gradients, turn the memory
 * within the first backward by more than PHASE_TURN_SHARE: the backward cut
 * there is still one phase, its micro-batch's (seen on the H100 with
 * bench/train.py --model tiny --accum 4: 4 forward and 8 backward phases;
 * here 4 and 5 before backwards of one forward were merged). */
START_TEST(accumulation_with_large_logits)
{
	accumulation(6u << 20, 40u << 20);
}
END_TEST

/*
 * A stage's own communication buffers are no turn (tests/gpu/pipeline.cu,
 * GPipe on one rank, its sends and receives to itself): each boundary is
 * one group, the send of what the phase before made and the receive that
 * opens the next, whose buffer is allocated just before the group; the
 * sent buffer is freed just after it. A forward then makes L activations,
 * one an operation; a backward makes a gradient an operation and frees the
 * one before and that layer's activation. The fall of the one buffer freed
 * after the group and the rise of the receive's (a seventh of a forward's
 * rise here) must cut nothing: one forward and one backward phase a
 * micro-batch, each backward paired with its micro-batch's forward.
 */
START_TEST(boundary_buffers_are_no_turn)
{
	enum { MB = 4, L = 6, SZ = 64u << 20 };
	struct prof p;
	struct phase_set ps;
	struct phase_cut c = { 0 };
	uint32_t start[4 * MB], nstart = 0, o = 0;
	uint32_t fw_group[MB], bw_group[MB];
	int64_t act[MB][L + 1];
	uint32_t nops = 1 + MB * (2 + L) + MB * (2 + L) + 2 + L;

	ck_assert_int_eq(prof_init(&p, nops), 0);
	int64_t w = prof_add(&p, (uint64_t)L * SZ, 0, PROF_NONE, 0);
#define OP(marker, snd) do {						\
		phase_cut_record(start, &nstart, 4 * MB, o, phase_cut_next(&c, (marker), (snd))); \
		ck_assert_int_eq(prof_use(&p, (uint32_t)w, o), 0);	\
	} while (0)
	/* the input, made by a kernel */
	OP(0, 0);
	int64_t sent = prof_add(&p, SZ, 0, o, 1);
	o++;
	/* a group: send sent, receive into a buffer allocated at the send;
	 * sent freed after the receive (a free counts at the operation before it) */
#define GROUP(into) do {						\
		OP(1, 1);						\
		(into) = prof_add(&p, SZ, 0, o, 1);			\
		ck_assert_int_eq(prof_use(&p, (uint32_t)sent, o), 0);	\
		o++;							\
		OP(1, 0);						\
		ck_assert_int_eq(prof_use(&p, (uint32_t)(into), o), 0); \
		prof_free(&p, (uint32_t)sent, o);			\
		o++;							\
	} while (0)
	for (int m = 0; m < MB; m++) {
		fw_group[m] = o;
		GROUP(act[m][0]);
		for (int l = 0; l < L; l++, o++) {
			OP(0, 0);
			act[m][l + 1] = prof_add(&p, SZ, 0, o, 1);
			ck_assert_int_eq(prof_use(&p, (uint32_t)act[m][l], o), 0);
		}
		sent = act[m][L];
	}
	for (int m = MB - 1; m >= 0; m--) {
		int64_t gin;
		bw_group[m] = o;
		GROUP(gin);
		for (int l = L - 1; l >= 0; l--, o++) {
			OP(0, 0);
			int64_t gx = prof_add(&p, SZ, 0, o, 1);
			ck_assert_int_eq(prof_use(&p, (uint32_t)gin, o), 0);
			ck_assert_int_eq(prof_use(&p, (uint32_t)act[m][l], o), 0);
			prof_free(&p, (uint32_t)gin, o);
			prof_free(&p, (uint32_t)act[m][l], o);
			gin = gx;
		}
		sent = gin;
	}
	int64_t sink;
	GROUP(sink);
	prof_free(&p, (uint32_t)sink, o - 1);
	for (int l = 0; l < L; l++, o++)	/* the optimizer step */
		OP(0, 0);
#undef GROUP
#undef OP
	ck_assert_uint_eq(o, nops);
	ck_assert_int_eq(phase_split(&p, start, nstart, &ps), 0);
	ck_assert_msg(ps.nforward == MB && ps.nbackward == MB, "%u forward, %u backward phases of %u",
	    ps.nforward, ps.nbackward, ps.n);
	for (int m = 0; m < MB; m++) {
		int f = -1, b = -1;
		for (uint32_t i = 0; i < ps.n; i++) {
			if (ps.ph[i].first <= fw_group[m] && ps.ph[i].last >= fw_group[m])
				f = (int)i;
			if (ps.ph[i].first <= bw_group[m] && ps.ph[i].last >= bw_group[m])
				b = (int)i;
		}
		ck_assert_int_ge(f, 0);
		ck_assert_int_ge(b, 0);
		ck_assert_int_eq(ps.ph[f].kind, PHASE_FORWARD);
		ck_assert_uint_eq(ps.ph[f].first, fw_group[m]);
		ck_assert_uint_eq(ps.ph[f].last, fw_group[m] + 1 + L);
		ck_assert_int_eq(ps.ph[b].kind, PHASE_BACKWARD);
		ck_assert_int_eq(ps.ph[b].forward, f);
	}
	phase_fini(&ps);
	prof_fini(&p);
}
END_TEST

/* Starts that are not increasing from 0 are refused. */
START_TEST(bad_starts)
{
	struct prof p;
	struct phase_set ps;
	static const uint32_t late[] = { 1, 2 }, back[] = { 0, 3, 2 }, past[] = { 0, 10 };

	ck_assert_int_eq(prof_init(&p, 10), 0);
	ck_assert_int_eq(phase_split(&p, late, 2, &ps), -1);
	ck_assert_int_eq(phase_split(&p, back, 3, &ps), -1);
	ck_assert_int_eq(phase_split(&p, past, 2, &ps), -1);
	ck_assert_ptr_null(ps.ph);
	prof_fini(&p);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("phase");
	TCase *tc = tcase_create("phases");

	add_test(tc, gpipe_phases);
	add_test(tc, siblings_by_schedule);
	add_test(tc, one_f_one_b_phases);
	add_test(tc, interleaved_phases);
	add_test(tc, cuts);
	add_test(tc, accumulation_phases);
	add_test(tc, accumulation_with_large_logits);
	add_test(tc, boundary_buffers_are_no_turn);
	add_test(tc, bad_starts);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
