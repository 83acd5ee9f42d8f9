## utils/: the ebb command.
bin_PROGRAMS += utils/ebb
utils_ebb_SOURCES = utils/ebb.c utils/report.c utils/report.h \
	utils/plancmd.c utils/plancmd.h utils/plancmd_int.h utils/planprint.c \
	utils/planlive.c utils/planreplay.c utils/plansvg.c utils/planphase.c \
	utils/planpace.c \
	utils/svg.c utils/svg.h utils/timeline.c utils/timeline.h
utils_ebb_CPPFLAGS = $(AM_CPPFLAGS) -DEBB_LIBDIR='"$(libdir)"'
utils_ebb_LDADD = src/libebbcommon.la policy/libpolicy.la -lm
