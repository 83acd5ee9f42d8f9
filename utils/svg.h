/*
 * svg.h: plots as SVG files a browser opens (ebb plan --svg, --memory-svg).
 *
 * One plot: axes with ticks at round values, any number of series (a line
 * or points), a legend, and lines of notes under the plot. Each series is
 * one element whose id the caller names, so that a reader (or a test)
 * finds it in the file.
 */
#ifndef EBB_SVG_H
#define EBB_SVG_H

#include <stddef.h>
#include <stdio.h>

struct svg_series {
	const char *id;		/* the element's id: letters, digits and '-' */
	const char *label;	/* in the legend */
	const char *color;	/* an SVG colour, e.g. "#1f77b4" */
	const double *x, *y;
	size_t n;
	int points;		/* 1: a marker at each point; 0: a line through them */
	int step;		/* with a line: steps (the value holds until the next x) */
	const char *const *tag;	/* with points: a label beside each, or NULL */
};

struct svg_plot {
	const char *title;
	const char *xlabel, *ylabel;
	const struct svg_series *s;
	size_t ns;
	const char *const *note;	/* lines under the plot */
	size_t nnote;
	int y_from_zero;	/* the y axis starts at 0 */
};

/* Write p to f as one SVG document. Returns 0, or -1 when writing fails. */
int svg_write(FILE *f, const struct svg_plot *p);

/* Write s to f with XML's special characters escaped. */
void svg_text(FILE *f, const char *s);

#endif
