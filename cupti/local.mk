## cupti/: the CUPTI tracer, loaded at run time (never linked).
noinst_LTLIBRARIES += cupti/libtracer.la
cupti_libtracer_la_SOURCES = cupti/tracer.c cupti/tracer.h cupti/match.c cupti/match.h
cupti_libtracer_la_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
cupti_libtracer_la_CFLAGS = $(AM_CFLAGS) -fvisibility=hidden
