## src/: libebb.so, in layers, each a folder (tests/check_layout.sh checks
## that includes only go down):
##   hooks/   the interposed entry points, dlsym and cuGetProcAddress, start-up
##   engine/  the lifecycle: each operation, allocation and free as an event
##   exec/    the recorded iteration, and the plan run against it
##   mover/   buffers under EBB_LIMIT: physical memory, offloads, restores
##   core/    what the layers above share: the real driver table, the buffer
##            table, stream progress, kernel parameter layouts, call sites
##   common/  configuration, logging, the trace format, the planner run
##            against the clock: shared with the ebb command (utils/)
## policy/ (pure planning logic) and cupti/ (GPU times) are libraries of
## their own.

# Linked by libebb.so and by the ebb command, so there is one parser of each
# and one planner. planrun.c needs policy/libpolicy.la, which the programs
# that call plan_make link after this one.
noinst_LTLIBRARIES += src/libebbcommon.la
src_libebbcommon_la_SOURCES = \
	src/common/conf.c src/common/conf.h \
	src/common/log.c src/common/log.h \
	src/common/trace.c src/common/trace.h src/common/trace_rec.c \
	src/common/trace_read.c src/common/trace_read.h \
	src/common/trace_format.h src/common/cuda_compat.h src/common/realdl.h \
	src/common/planrun.c src/common/planrun.h
# Thread-locals in the initial-exec model: read at a fixed offset from the
# thread pointer, not through __tls_get_addr (five calls on every launch in
# the general-dynamic model a shared object gets by default). libebb.so is
# preloaded, so its thread-locals are in the static TLS block; a dlopen of
# it takes them from glibc's reserve for such libraries (a few dozen bytes).
EBB_TLS_CFLAGS = -ftls-model=initial-exec
src_libebbcommon_la_CFLAGS = $(AM_CFLAGS) -fvisibility=hidden $(EBB_TLS_CFLAGS)
src_libebbcommon_la_LIBADD = $(PTHREAD_LIBS)

# Everything of libebb.so, as a convenience library the unit tests link too.
noinst_LTLIBRARIES += src/libebbcore.la
src_libebbcore_la_SOURCES = \
	src/core/ebb.h src/core/real.h src/core/syms.def \
	src/core/buftab.c src/core/buftab.h src/core/locks.h \
	src/core/streams.c src/core/streams.h \
	src/core/kparam.c src/core/kparam.h src/core/launch.h \
	src/core/callsite.c src/core/callsite.h \
	src/mover/vmm.c src/mover/vmm.h \
	src/mover/hostpool.c src/mover/hostpool.h \
	src/mover/mover.c src/mover/mover.h src/mover/mover_int.h \
	src/mover/mover_arena.c src/mover/mover_slab.c src/mover/mover_tag.c src/mover/mover_lru.c \
	src/mover/mover_copy.c src/mover/mover_cost.c src/mover/mover_rate.c \
	src/mover/mover_limit.c \
	src/exec/exec.c src/exec/exec.h src/exec/exec_int.h src/exec/exec_plan.c \
	src/exec/lrec.c src/exec/lrec.h \
	src/exec/probe.c src/exec/probe.h src/exec/hash_ptx.h \
	src/exec/hashreg.c src/exec/hashreg.h \
	src/exec/verify.c src/exec/verify.h \
	src/exec/remake.c src/exec/remake.h \
	src/engine/engine.c src/engine/engine.h src/engine/engine_int.h \
	src/engine/life.c src/engine/pool.c src/engine/summary.c \
	src/hooks/init.c \
	src/hooks/interpose.c src/hooks/interpose.h \
	src/hooks/hooks.c \
	src/hooks/nccl.c
src_libebbcore_la_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
src_libebbcore_la_CFLAGS = $(AM_CFLAGS) -fvisibility=hidden $(EBB_TLS_CFLAGS) $(UNWIND_CFLAGS)
src_libebbcore_la_LIBADD = src/libebbcommon.la cupti/libtracer.la policy/libpolicy.la \
	$(UNWIND_LIBS) $(PTHREAD_LIBS) $(LIBS)

lib_LTLIBRARIES += src/libebb.la
src_libebb_la_SOURCES =
src_libebb_la_LIBADD = src/libebbcore.la
src_libebb_la_LDFLAGS = -module -avoid-version -shared -no-undefined \
	-Wl,--version-script=$(srcdir)/src/hooks/libebb.map -Wl,-z,nodelete
src_libebb_la_DEPENDENCIES = src/libebbcore.la $(srcdir)/src/hooks/libebb.map
EXTRA_DIST += src/hooks/libebb.map src/exec/hash.cu src/exec/gen_hash_ptx.sh
