/*
 * report.h: `ebb report TRACE`.
 */
#ifndef EBB_REPORT_H
#define EBB_REPORT_H

#include <stdio.h>

/*
 * Check every record of the trace at path against ebb-trace(5) and print a
 * summary as "key: value" lines on out. Returns 0 for a well-formed trace,
 * 1 when a record is malformed (the first bad line is named on err), 2 when
 * the file cannot be read.
 */
int ebb_report(const char *path, FILE *out, FILE *err);

#endif
