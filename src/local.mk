## src/: libebb.so and the internal libraries it is made of.

# Configuration, logging, the trace format and the planner run against the
# clock: linked by libebb.so and by the ebb command, so there is one parser
# of each and one planner. planrun.c needs policy/libpolicy.la, which the
# programs that call plan_make link after this one.
noinst_LTLIBRARIES += src/libebbcommon.la
src_libebbcommon_la_SOURCES = \
	src/conf.c src/conf.h \
	src/log.c src/log.h \
	src/trace.c src/trace.h \
	src/trace_read.c src/trace_read.h \
	src/trace_format.h \
	src/planrun.c src/planrun.h
src_libebbcommon_la_CFLAGS = $(AM_CFLAGS) -fvisibility=hidden
src_libebbcommon_la_LIBADD = $(PTHREAD_LIBS)

# Everything of libebb.so, as a convenience library the unit tests link too.
noinst_LTLIBRARIES += src/libebbcore.la
src_libebbcore_la_SOURCES = \
	src/ebb.h src/cuda_compat.h src/syms.def \
	src/init.c \
	src/interpose.c src/interpose.h src/realdl.h \
	src/hooks.c \
	src/nccl.c \
	src/engine.c src/engine.h \
	src/buftab.c src/buftab.h \
	src/kparam.c src/kparam.h \
	src/callsite.c src/callsite.h \
	src/streams.c src/streams.h \
	src/vmm.c src/vmm.h \
	src/hostpool.c src/hostpool.h \
	src/mover.c src/mover.h src/mover_int.h \
	src/mover_slab.c src/mover_tag.c src/mover_lru.c \
	src/mover_copy.c src/mover_rate.c \
	src/exec.c src/exec.h
src_libebbcore_la_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
src_libebbcore_la_CFLAGS = $(AM_CFLAGS) -fvisibility=hidden $(UNWIND_CFLAGS)
src_libebbcore_la_LIBADD = src/libebbcommon.la cupti/libtracer.la policy/libpolicy.la \
	$(UNWIND_LIBS) $(PTHREAD_LIBS) $(LIBS)

lib_LTLIBRARIES += src/libebb.la
src_libebb_la_SOURCES =
src_libebb_la_LIBADD = src/libebbcore.la
src_libebb_la_LDFLAGS = -module -avoid-version -shared -no-undefined \
	-Wl,--version-script=$(srcdir)/src/libebb.map -Wl,-z,nodelete
src_libebb_la_DEPENDENCIES = src/libebbcore.la $(srcdir)/src/libebb.map
EXTRA_DIST += src/libebb.map
