/*
 * check_buftab.c: the buffer table against a brute-force model.
 */
#include "config.h"

#include <check.h>
#include <stdlib.h>

#include "buftab.h"
#include "testutil.h"

#define MODEL_MAX 2000

/* The model: an unsorted array of live [addr, addr+size). */
static struct ebb_buf *model[MODEL_MAX];
static int nmodel;

static struct ebb_buf *
model_find(uint64_t a)
{
	for (int i = 0; i < nmodel; i++)
		if (a >= model[i]->addr && a < model[i]->addr + model[i]->size)
			return model[i];
	return NULL;
}

static int
model_overlaps(uint64_t a, uint64_t s)
{
	for (int i = 0; i < nmodel; i++)
		if (a < model[i]->addr + model[i]->size && model[i]->addr < a + s)
			return 1;
	return 0;
}

static int
count_walk(struct ebb_buf *b, void *ctx)
{
	uint64_t *prev = ctx;
	ck_assert_uint_gt(b->addr + 1, prev[0]);	/* ascending */
	prev[0] = b->addr + 1;
	prev[1]++;
	return 0;
}

START_TEST(random_against_model)
{
	struct buftab t;
	unsigned seed = 12345;

	buftab_init(&t);
	nmodel = 0;
	for (int step = 0; step < 20000; step++) {
		int op = rand_r(&seed) % 3;
		if (op < 2 && nmodel < MODEL_MAX) {
			uint64_t a = 0x7f0000000000ULL + (uint64_t)(rand_r(&seed) % 100000) * 256;
			uint64_t s = 1 + (uint64_t)(rand_r(&seed) % 8192);
			struct ebb_buf *b = calloc(1, sizeof *b);
			b->addr = a;
			b->size = s;
			int r = buftab_insert(&t, b);
			if (model_overlaps(a, s)) {
				ck_assert_int_eq(r, -1);
				free(b);
			} else {
				ck_assert_int_eq(r, 0);
				model[nmodel++] = b;
			}
		} else if (nmodel > 0) {
			int i = rand_r(&seed) % nmodel;
			struct ebb_buf *b = buftab_remove(&t, model[i]->addr);
			ck_assert_ptr_eq(b, model[i]);
			/* no hint names it any more */
			ck_assert_uint_eq(b->nhints, 0);
			for (size_t j = 0; j < BUFTAB_HINT_SETS; j++)
				for (size_t w = 0; w < BUFTAB_HINT_WAYS; w++)
					ck_assert_ptr_ne(t.hint[j][w], b);
			model[i] = model[--nmodel];
			free(b);
		}
		/* probes: starts, interiors, ends, gaps */
		for (int k = 0; k < 4; k++) {
			uint64_t a = 0x7f0000000000ULL + (uint64_t)(rand_r(&seed) % 26000000);
			ck_assert_ptr_eq(buftab_find(&t, a), model_find(a));
			/* again, and near it: answered from the region's hint */
			ck_assert_ptr_eq(buftab_find(&t, a), model_find(a));
			uint64_t near = a + (uint64_t)(rand_r(&seed) % 16384) - 8192;
			ck_assert_ptr_eq(buftab_find(&t, near), model_find(near));
		}
		ck_assert_uint_eq(t.count, (uint64_t)nmodel);
	}
	uint64_t acc[2] = { 0, 0 };
	buftab_walk(&t, count_walk, acc);
	ck_assert_uint_eq(acc[1], (uint64_t)nmodel);
	for (int i = 0; i < nmodel; i++) {
		ck_assert_ptr_eq(buftab_find(&t, model[i]->addr + model[i]->size - 1), model[i]);
		ck_assert_ptr_ne(buftab_find(&t, model[i]->addr + model[i]->size), model[i]);
	}
	/* each buffer counts the hint ways that name it */
	for (int i = 0; i < nmodel; i++) {
		uint32_t named = 0;
		for (size_t j = 0; j < BUFTAB_HINT_SETS; j++)
			for (size_t w = 0; w < BUFTAB_HINT_WAYS; w++)
				named += t.hint[j][w] == model[i];
		ck_assert_uint_eq(named, model[i]->nhints);
	}
	ck_assert_ptr_null(buftab_remove(&t, 1));
}
END_TEST

START_TEST(stream_uses)
{
	struct ebb_buf b = { 0 };

	for (uintptr_t s = 1; s <= 4; s++)
		buftab_note_use(&b, s, 10 + s);
	ck_assert_uint_eq(b.nstreams, 4);
	ck_assert_int_eq(b.streams_overflow, 0);
	buftab_note_use(&b, 2, 20);
	ck_assert_uint_eq(b.nstreams, 4);
	buftab_note_use(&b, 9, 21);	/* fifth stream: the stalest (stream 1) goes */
	ck_assert_int_eq(b.streams_overflow, 1);
	int seen9 = 0, seen1 = 0;
	for (int i = 0; i < 4; i++) {
		seen9 |= b.last[i].stream == 9 && b.last[i].seq == 21;
		seen1 |= b.last[i].stream == 1;
	}
	ck_assert(seen9 && !seen1);
	ck_assert_uint_eq(b.uses, 6);
	ck_assert_uint_eq(b.last_seq, 21);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("buftab");
	TCase *tc = tcase_create("buftab");

	add_test(tc, random_against_model);
	add_test(tc, stream_uses);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
