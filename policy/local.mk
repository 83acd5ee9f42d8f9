## policy/: pure planning logic (no CUDA headers, no I/O, no globals).
noinst_LTLIBRARIES += policy/libpolicy.la
policy_libpolicy_la_SOURCES = policy/iter.c policy/iter.h policy/record.c policy/record.h \
	policy/idmap.c policy/idmap.h \
	policy/plan.h policy/plan_internal.h \
	policy/prof.c policy/sim.c policy/search.c policy/floor.c policy/waits.c \
	policy/replay.c policy/replay.h policy/recompute.c policy/recompute.h \
	policy/rctree.c policy/rctree.h policy/phase.c policy/phase.h
policy_libpolicy_la_CFLAGS = $(AM_CFLAGS) -fvisibility=hidden
