## policy/: pure planning logic (no CUDA headers, no I/O, no globals).
noinst_LTLIBRARIES += policy/libpolicy.la
policy_libpolicy_la_SOURCES = policy/iter.c policy/iter.h policy/plan.c policy/plan.h policy/record.c policy/record.h policy/idmap.c policy/idmap.h
policy_libpolicy_la_CFLAGS = $(AM_CFLAGS) -fvisibility=hidden
policy_libpolicy_la_LIBADD = $(PTHREAD_LIBS)
