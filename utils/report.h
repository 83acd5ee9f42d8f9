/*
 * report.h: `ebb report TRACE`.
 */
#ifndef EBB_REPORT_H
#define EBB_REPORT_H

#include <stdio.h>

/*
 * Check every record of the trace at path against ebb-trace(5) and print a
 * summary as "key: value" lines on out. Returns 0 for a well-formed trace;
 * 1 when the header is missing or names another format version, a record
 * is malformed, the file is empty or reading it fails (said on err, with
 * the file and the first bad line); 2 when the file cannot be opened.
 */
int ebb_report(const char *path, FILE *out, FILE *err);

#endif
