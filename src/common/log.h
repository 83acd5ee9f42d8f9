/*
 * log.h: ebb's one path to stderr.
 *
 * Every message goes through ebb_log(), which formats into a stack buffer and
 * hands it to write(2) in one call, so it allocates nothing, takes no lock and
 * is safe before initialisation, in a fork child and in signal context (as far
 * as vsnprintf is: ebb never logs floating point from a signal handler).
 */
#ifndef EBB_LOG_H
#define EBB_LOG_H

#include <stdarg.h>

enum ebb_log_level {
	EBB_LOG_ERROR = -1,	/* always printed: the job is affected */
	EBB_LOG_WARN = 0,	/* always printed: a feature is off or a value ignored */
	EBB_LOG_NOTE = 1,	/* EBB_VERBOSE>=1: summaries, choices made for the user */
	EBB_LOG_INFO = 2,	/* EBB_VERBOSE>=2: state changes */
	EBB_LOG_DEBUG = 3	/* EBB_VERBOSE>=3: per-event detail */
};

/* Set the level below which messages are dropped (EBB_VERBOSE). */
void ebb_log_set_level(int level);

/* The current level. */
int ebb_log_level(void);

/* Print "ebb[pid]: <message>\n" on stderr if level <= the current level. */
void ebb_log(int level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* As ebb_log, but only the first time *once is zero (it is then set). */
void ebb_log_once(int *once, int level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif
