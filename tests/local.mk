## tests/: Check unit tests and the integration tests on the fake driver.
if HAVE_CHECK
check_LTLIBRARIES += tests/libtestutil.la
tests_libtestutil_la_SOURCES = tests/testutil.c tests/testutil.h
tests_libtestutil_la_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_libtestutil_la_LDFLAGS = -rpath $(abs_builddir)/tests -static

TEST_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
TEST_LIBS = tests/libtestutil.la $(CHECK_LIBS)

UNIT_TESTS = tests/check_conf tests/check_buftab tests/check_iter tests/check_phase tests/check_trace \
	tests/check_cupti_match tests/check_kparam tests/check_exports tests/check_plan \
	tests/check_lrec tests/check_replay tests/check_recompute tests/check_hashreg
check_PROGRAMS += $(UNIT_TESTS)
TESTS += $(UNIT_TESTS)

tests_check_conf_SOURCES = tests/check_conf.c
tests_check_conf_CFLAGS = $(TEST_CFLAGS)
tests_check_conf_LDADD = src/libebbcommon.la $(TEST_LIBS)

tests_check_buftab_SOURCES = tests/check_buftab.c src/core/buftab.c
tests_check_buftab_CFLAGS = $(TEST_CFLAGS)
tests_check_buftab_LDADD = $(TEST_LIBS)

tests_check_trace_SOURCES = tests/check_trace.c
tests_check_trace_CFLAGS = $(TEST_CFLAGS)
tests_check_trace_LDADD = src/libebbcommon.la $(TEST_LIBS) $(PTHREAD_LIBS)

tests_check_cupti_match_SOURCES = tests/check_cupti_match.c cupti/match.c
tests_check_cupti_match_CFLAGS = $(TEST_CFLAGS)
tests_check_cupti_match_LDADD = $(TEST_LIBS)

tests_check_kparam_SOURCES = tests/check_kparam.c src/core/kparam.c
tests_check_kparam_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
tests_check_kparam_CFLAGS = $(TEST_CFLAGS)
tests_check_kparam_LDADD = $(TEST_LIBS)

# Launch records on the fake driver, linked directly: launched again from a record.
tests_check_lrec_SOURCES = tests/check_lrec.c src/exec/lrec.c src/core/kparam.c
tests_check_lrec_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests/fakecuda $(CUDA_CPPFLAGS)
tests_check_lrec_CFLAGS = $(TEST_CFLAGS)
tests_check_lrec_LDADD = tests/fakecuda/libcuda.la $(TEST_LIBS) $(PTHREAD_LIBS)

tests_check_hashreg_SOURCES = tests/check_hashreg.c src/exec/hashreg.c src/exec/hashreg.h
tests_check_hashreg_CFLAGS = $(TEST_CFLAGS)
tests_check_hashreg_LDADD = $(TEST_LIBS)

tests_check_exports_SOURCES = tests/check_exports.c
tests_check_exports_CFLAGS = $(TEST_CFLAGS)
tests_check_exports_LDADD = $(TEST_LIBS)
EXTRA_tests_check_exports_DEPENDENCIES = src/libebb.la

tests_check_plan_SOURCES = tests/check_plan.c
tests_check_plan_CFLAGS = $(TEST_CFLAGS)
tests_check_plan_LDADD = src/libebbcommon.la policy/libpolicy.la $(TEST_LIBS)

tests_check_replay_SOURCES = tests/check_replay.c
tests_check_replay_CFLAGS = $(TEST_CFLAGS)
tests_check_replay_LDADD = policy/libpolicy.la $(TEST_LIBS)

tests_check_recompute_SOURCES = tests/check_recompute.c
tests_check_recompute_CFLAGS = $(TEST_CFLAGS)
tests_check_recompute_LDADD = src/libebbcommon.la policy/libpolicy.la $(TEST_LIBS) $(PTHREAD_LIBS)

tests_check_phase_SOURCES = tests/check_phase.c
tests_check_phase_CFLAGS = $(TEST_CFLAGS)
tests_check_phase_LDADD = policy/libpolicy.la $(TEST_LIBS)

tests_check_iter_SOURCES = tests/check_iter.c
tests_check_iter_CFLAGS = $(TEST_CFLAGS)
tests_check_iter_LDADD = policy/libpolicy.la $(TEST_LIBS)

# `ebb plan` run on hand-written traces, and on one of the workload under
# libebb.so on the fake driver (--replay).
check_PROGRAMS += tests/check_ebb_plan
TESTS += tests/check_ebb_plan
tests_check_ebb_plan_SOURCES = tests/check_ebb_plan.c tests/integ.c tests/integ.h
tests_check_ebb_plan_CFLAGS = $(TEST_CFLAGS)
tests_check_ebb_plan_LDADD = src/libebbcommon.la $(TEST_LIBS)
EXTRA_tests_check_ebb_plan_DEPENDENCIES = utils/ebb src/libebb.la tests/progs/workload

# A trace path that is not a regular file, refused `ebb run` options, and
# traces `ebb report` and `ebb plan` cannot read.
check_PROGRAMS += tests/check_hardening
TESTS += tests/check_hardening
tests_check_hardening_SOURCES = tests/check_hardening.c tests/integ.c tests/integ.h
tests_check_hardening_CFLAGS = $(TEST_CFLAGS)
tests_check_hardening_LDADD = src/libebbcommon.la $(TEST_LIBS)
EXTRA_tests_check_hardening_DEPENDENCIES = utils/ebb src/libebb.la tests/progs/workload
endif

# Programs the integration tests run (not tests themselves).
check_PROGRAMS += tests/progs/workload tests/progs/workload-linked

tests_progs_workload_SOURCES = tests/progs/workload.c
tests_progs_workload_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests/fakecuda $(CUDA_CPPFLAGS)
tests_progs_workload_LDADD = $(PTHREAD_LIBS) $(LIBS)
tests_progs_workload_linked_SOURCES = tests/progs/workload.c
tests_progs_workload_linked_CPPFLAGS = $(tests_progs_workload_CPPFLAGS) -DWORKLOAD_LINKED
tests_progs_workload_linked_LDADD = tests/fakecuda/libcuda.la $(PTHREAD_LIBS) $(LIBS)

# The pictures: `ebb timeline` and `ebb plan --svg/--memory-svg`, read back
# with strict JSON and XML readers, on hand-written traces and on one of the
# workload under libebb.so on the fake driver.
check_PROGRAMS += tests/check_diag
TESTS += tests/check_diag
tests_check_diag_SOURCES = tests/check_diag.c tests/docparse.c tests/docparse.h tests/integ.c \
	tests/integ.h
tests_check_diag_CFLAGS = $(TEST_CFLAGS)
tests_check_diag_LDADD = src/libebbcommon.la $(TEST_LIBS) -lm
EXTRA_tests_check_diag_DEPENDENCIES = utils/ebb src/libebb.la tests/progs/workload

# Pipeline stage markers and phases: the workload's stage on one rank under
# libebb.so, read by ebb report and ebb plan.
check_PROGRAMS += tests/check_pipeline
TESTS += tests/check_pipeline
tests_check_pipeline_SOURCES = tests/check_pipeline.c tests/integ.c tests/integ.h
tests_check_pipeline_CFLAGS = $(TEST_CFLAGS)
tests_check_pipeline_LDADD = src/libebbcommon.la $(TEST_LIBS)
EXTRA_tests_check_pipeline_DEPENDENCIES = utils/ebb src/libebb.la tests/progs/workload

# A library preloaded beside libebb.so that wraps dlopen (check_integration).
check_LTLIBRARIES += tests/progs/libwrapdlopen.la
tests_progs_libwrapdlopen_la_SOURCES = tests/progs/wrapdlopen.c
tests_progs_libwrapdlopen_la_LDFLAGS = -module -avoid-version -shared -no-undefined \
	-rpath $(abs_builddir)/tests/progs/.libs
tests_progs_libwrapdlopen_la_LIBADD = $(LIBS)

if HAVE_CHECK
check_PROGRAMS += tests/check_integration
TESTS += tests/check_integration
tests_check_integration_SOURCES = tests/check_integration.c tests/integ.c tests/integ.h
tests_check_integration_CFLAGS = $(TEST_CFLAGS)
tests_check_integration_LDADD = src/libebbcommon.la $(TEST_LIBS)
EXTRA_tests_check_integration_DEPENDENCIES = src/libebb.la tests/progs/workload \
	tests/progs/workload-linked tests/progs/libwrapdlopen.la

# The mover under driver failures and memory pressure.
check_PROGRAMS += tests/check_faults
TESTS += tests/check_faults
tests_check_faults_SOURCES = tests/check_faults.c tests/integ.c tests/integ.h
tests_check_faults_CFLAGS = $(TEST_CFLAGS)
tests_check_faults_LDADD = src/libebbcommon.la $(TEST_LIBS)
EXTRA_tests_check_faults_DEPENDENCIES = src/libebb.la tests/progs/workload utils/ebb
endif

# The tree's shape: layers, file and function sizes.
TESTS += tests/check_layout.sh
dist_check_SCRIPTS += tests/check_layout.sh
