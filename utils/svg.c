/*
 * svg.c: plots as SVG (svg.h).
 */
#include "config.h"

#include <math.h>
#include <stdio.h>

#include "svg.h"

/* The page and the plot's area in it, in SVG user units (pixels). */
#define SVG_W 1000
#define SVG_X0 80
#define SVG_X1 640
#define SVG_Y0 50
#define SVG_Y1 400
#define SVG_LEGEND_X 660
#define SVG_NOTE_DY 16

/* An axis: its range, rounded out to whole ticks. */
struct axis {
	double lo, hi, step;
};

/* A tick step of 1, 2 or 5 times a power of ten, about a fifth of range. */
static double
nice_step(double range)
{
	double raw = range / 5.0;
	double mag = pow(10.0, floor(log10(raw)));
	double f = raw / mag;

	return (f < 1.5 ? 1.0 : f < 3.5 ? 2.0 : f < 7.5 ? 5.0 : 10.0) * mag;
}

/* The axis over [lo, hi], from 0 where from_zero and lo >= 0. */
static struct axis
axis_of(double lo, double hi, int from_zero)
{
	struct axis a;

	if (from_zero && lo > 0)
		lo = 0;
	if (!(hi > lo)) {	/* one value, or none */
		double d = fabs(lo) > 0 ? fabs(lo) * 0.1 : 1.0;
		lo -= d;
		hi += d;
		if (from_zero && lo < 0 && hi - d >= 0)
			lo = 0;
	}
	a.step = nice_step(hi - lo);
	a.lo = floor(lo / a.step) * a.step;
	a.hi = ceil(hi / a.step) * a.step;
	return a;
}

static double
px(const struct axis *a, double v)
{
	return SVG_X0 + (v - a->lo) / (a->hi - a->lo) * (SVG_X1 - SVG_X0);
}

static double
py(const struct axis *a, double v)
{
	return SVG_Y1 - (v - a->lo) / (a->hi - a->lo) * (SVG_Y1 - SVG_Y0);
}

/* svg_text (svg.h) */
void
svg_text(FILE *f, const char *s)
{
	for (; *s != '\0'; s++)
		switch (*s) {
		case '&': fputs("&amp;", f); break;
		case '<': fputs("&lt;", f); break;
		case '>': fputs("&gt;", f); break;
		case '"': fputs("&quot;", f); break;
		case '\'': fputs("&apos;", f); break;
		default: fputc(*s, f);
		}
}

/* The ticks and grid of both axes, and their labels. */
static void
axes(FILE *f, const struct svg_plot *p, const struct axis *ax, const struct axis *ay)
{
	fprintf(f, "<g id=\"axes\" stroke=\"black\">\n"
	    "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\"/>\n"
	    "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\"/>\n</g>\n",
	    SVG_X0, SVG_Y1, SVG_X1, SVG_Y1, SVG_X0, SVG_Y0, SVG_X0, SVG_Y1);
	fputs("<g id=\"ticks\" font-size=\"11\">\n", f);
	for (int i = 0; ; i++) {
		double v = ax->lo + i * ax->step;
		if (v > ax->hi + ax->step * 1e-6)
			break;
		fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#ddd\"/>"
		    "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%g</text>\n",
		    px(ax, v), SVG_Y0, px(ax, v), SVG_Y1, px(ax, v), SVG_Y1 + 16,
		    fabs(v) < ax->step * 1e-6 ? 0.0 : v);
	}
	for (int i = 0; ; i++) {
		double v = ay->lo + i * ay->step;
		if (v > ay->hi + ay->step * 1e-6)
			break;
		fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ddd\"/>"
		    "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n",
		    SVG_X0, py(ay, v), SVG_X1, py(ay, v), SVG_X0 - 6, py(ay, v) + 4,
		    fabs(v) < ay->step * 1e-6 ? 0.0 : v);
	}
	fputs("</g>\n", f);
	fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">", (SVG_X0 + SVG_X1) / 2,
	    SVG_Y1 + 38);
	svg_text(f, p->xlabel);
	fprintf(f, "</text>\n<text x=\"20\" y=\"%d\" text-anchor=\"middle\" "
	    "transform=\"rotate(-90 20 %d)\">", (SVG_Y0 + SVG_Y1) / 2, (SVG_Y0 + SVG_Y1) / 2);
	svg_text(f, p->ylabel);
	fputs("</text>\n", f);
}

/* One series: a polyline, or a group of markers with their tags. */
static void
series(FILE *f, const struct svg_series *s, const struct axis *ax, const struct axis *ay)
{
	if (!s->points) {
		fprintf(f, "<polyline id=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" "
		    "points=\"", s->id, s->color);
		/* in steps, a point only where the value changes (to a tenth of a
		 * pixel), and the last */
		double last_y = 0;
		for (size_t i = 0; i < s->n; i++) {
			double y = round(py(ay, s->y[i]) * 10) / 10;
			if (s->step && i > 0 && i + 1 < s->n && y == last_y)
				continue;
			if (s->step && i > 0)
				fprintf(f, "%.2f,%.1f ", px(ax, s->x[i]), last_y);
			fprintf(f, "%.2f,%.1f ", px(ax, s->x[i]), y);
			last_y = y;
		}
		fputs("\"><title>", f);
		svg_text(f, s->label);
		fputs("</title></polyline>\n", f);
		return;
	}
	fprintf(f, "<g id=\"%s\" fill=\"%s\">\n", s->id, s->color);
	for (size_t i = 0; i < s->n; i++) {
		fprintf(f, "<circle cx=\"%.2f\" cy=\"%.2f\" r=\"4\"><title>", px(ax, s->x[i]),
		    py(ay, s->y[i]));
		if (s->tag != NULL && s->tag[i] != NULL)
			svg_text(f, s->tag[i]);
		fprintf(f, " (%g, %g)</title></circle>\n", s->x[i], s->y[i]);
		if (s->tag != NULL && s->tag[i] != NULL) {
			fprintf(f, "<text x=\"%.2f\" y=\"%.2f\" font-size=\"10\">", px(ax, s->x[i]) + 6,
			    py(ay, s->y[i]) - 6);
			svg_text(f, s->tag[i]);
			fputs("</text>\n", f);
		}
	}
	fputs("</g>\n", f);
}

/* svg_write (svg.h) */
int
svg_write(FILE *f, const struct svg_plot *p)
{
	double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;

	for (size_t k = 0; k < p->ns; k++)
		for (size_t i = 0; i < p->s[k].n; i++) {
			xlo = fmin(xlo, p->s[k].x[i]);
			xhi = fmax(xhi, p->s[k].x[i]);
			ylo = fmin(ylo, p->s[k].y[i]);
			yhi = fmax(yhi, p->s[k].y[i]);
		}
	if (xlo > xhi)
		xlo = xhi = ylo = yhi = 0;
	struct axis ax = axis_of(xlo, xhi, 0), ay = axis_of(ylo, yhi, p->y_from_zero);
	int h = SVG_Y1 + 60 + (int)p->nnote * SVG_NOTE_DY;

	fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
	    "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
	    "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">\n"
	    "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
	    "<text x=\"%d\" y=\"28\" text-anchor=\"middle\" font-size=\"15\">", SVG_W, h, SVG_W, h,
	    (SVG_X0 + SVG_X1) / 2);
	svg_text(f, p->title);
	fputs("</text>\n", f);
	axes(f, p, &ax, &ay);
	for (size_t k = 0; k < p->ns; k++)
		series(f, &p->s[k], &ax, &ay);
	fputs("<g id=\"legend\">\n", f);
	for (size_t k = 0; k < p->ns; k++) {
		int y = SVG_Y0 + 10 + (int)k * 20;
		if (p->s[k].points)
			fprintf(f, "<circle cx=\"%d\" cy=\"%d\" r=\"4\" fill=\"%s\"/>", SVG_LEGEND_X + 10,
			    y - 4, p->s[k].color);
		else
			fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" "
			    "stroke-width=\"2\"/>", SVG_LEGEND_X, y - 4, SVG_LEGEND_X + 20, y - 4,
			    p->s[k].color);
		fprintf(f, "<text x=\"%d\" y=\"%d\">", SVG_LEGEND_X + 26, y);
		svg_text(f, p->s[k].label);
		fputs("</text>\n", f);
	}
	fputs("</g>\n<g id=\"notes\" font-size=\"11\">\n", f);
	for (size_t i = 0; i < p->nnote; i++) {
		fprintf(f, "<text x=\"%d\" y=\"%d\">", 10, SVG_Y1 + 62 + (int)i * SVG_NOTE_DY);
		svg_text(f, p->note[i]);
		fputs("</text>\n", f);
	}
	fputs("</g>\n</svg>\n", f);
	return ferror(f) ? -1 : 0;
}
