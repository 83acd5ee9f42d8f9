## tests/fakecuda: a CUDA driver (libcuda.so.1) and NCCL (libnccl.so.2) that run on the CPU,
## built for `make check` only (see tests/fakecuda/README.md), and their self-test.
## Fragment of the top-level Makefile.am: paths are relative to the top.

check_LTLIBRARIES += tests/fakecuda/libcuda.la tests/fakecuda/libnccl.la \
	tests/fakecuda/libcupti.la

# -Bsymbolic-functions: like the real libraries, the fakes bind their own functions
# internally, so cuGetProcAddress hands out the fake's functions even when a preloaded
# library (libebb.so) exports the same names.

tests_fakecuda_libcuda_la_SOURCES = \
	tests/fakecuda/fakecuda.h \
	tests/fakecuda/fk.h \
	tests/fakecuda/fk_core.c \
	tests/fakecuda/fk_stream.c \
	tests/fakecuda/fk_graph.c \
	tests/fakecuda/fk_mem.c \
	tests/fakecuda/fk_vmm.c \
	tests/fakecuda/fk_copy.c \
	tests/fakecuda/fk_kernel.c \
	tests/fakecuda/fk_procaddr.c
tests_fakecuda_libcuda_la_CPPFLAGS = $(CUDA_CPPFLAGS)
tests_fakecuda_libcuda_la_CFLAGS = $(AM_CFLAGS) -fvisibility=hidden
tests_fakecuda_libcuda_la_LDFLAGS = -shared -rpath $(abs_builddir)/tests/fakecuda/.libs \
	-version-info 1:0:0 -no-undefined -Wl,-Bsymbolic-functions
tests_fakecuda_libcuda_la_LIBADD = $(PTHREAD_LIBS)

tests_fakecuda_libnccl_la_SOURCES = tests/fakecuda/fakenccl.c tests/fakecuda/fakecuda.h \
	tests/fakecuda/fakenccl_shm.c tests/fakecuda/fakenccl_shm.h
tests_fakecuda_libnccl_la_CPPFLAGS = $(CUDA_CPPFLAGS)
tests_fakecuda_libnccl_la_CFLAGS = $(AM_CFLAGS) -fvisibility=hidden
tests_fakecuda_libnccl_la_LDFLAGS = -shared -rpath $(abs_builddir)/tests/fakecuda/.libs \
	-version-info 2:0:0 -no-undefined -Wl,-Bsymbolic-functions
tests_fakecuda_libnccl_la_LIBADD = tests/fakecuda/libcuda.la $(PTHREAD_LIBS)

# A CUPTI of no activities (libcupti.so.13), which ebb loads through EBB_CUPTI_LIB.
tests_fakecuda_libcupti_la_SOURCES = tests/fakecuda/fakecupti.c
tests_fakecuda_libcupti_la_CPPFLAGS = $(CUDA_CPPFLAGS)
tests_fakecuda_libcupti_la_CFLAGS = $(AM_CFLAGS) -fvisibility=hidden
tests_fakecuda_libcupti_la_LDFLAGS = -shared -rpath $(abs_builddir)/tests/fakecuda/.libs \
	-version-info 13:0:0 -no-undefined

# The self-test loads the libraries with dlopen (from $EBB_TEST_FAKECUDA), never links them.
# -export-dynamic: it exports a decoy driver function, as an interposer would.
check_PROGRAMS += tests/fakecuda/selftest
tests_fakecuda_selftest_SOURCES = tests/fakecuda/selftest.c tests/fakecuda/fakecuda.h
tests_fakecuda_selftest_CPPFLAGS = $(CUDA_CPPFLAGS)
tests_fakecuda_selftest_LDFLAGS = -export-dynamic
tests_fakecuda_selftest_LDADD = $(PTHREAD_LIBS)
TESTS += tests/fakecuda/selftest

EXTRA_DIST += \
	tests/fakecuda/README.md \
	tests/fakecuda/fk_entries.def \
	tests/fakecuda/fk_errors.def
