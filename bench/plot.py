#!/usr/bin/env python3
"""Plot peak device memory against step time from bench/results records.

usage: plot.py --out FILE.svg [--title TEXT] [--commits C1,C2...] RESULTS.jsonl...

One point per record (runs without a step time are listed under the plot),
x = step time over the baseline of the same run (ratio), y = NVML peak in
GiB, labelled with the mode; ebb's runs are joined in order of peak, so the
curve of its limits shows beside the anchors. With --commits, only ebb's runs
at those commits, and of each other mode the latest record (by date), so
one version's curve shows beside the anchors. A record with plan_ran false (the
plan was not ready in time: its steps are the reactive mover's) is listed
under the plot, not drawn. Plain SVG, no dependencies.
"""
import argparse
import html
import json


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--title", default="")
    ap.add_argument("--commits", default="")
    ap.add_argument("results", nargs="+")
    a = ap.parse_args()
    recs = []
    for path in a.results:
        with open(path) as f:
            recs += [json.loads(line) for line in f if line.strip()]
    if a.commits:
        keep = set(a.commits.split(","))
        latest = {}
        for r in recs:
            if not r["mode"].startswith(("ebb", "reactive")) and r.get("ratio"):
                k = (r["workload"], r["accum"], r["mode"])
                if k not in latest or r["date"] >= latest[k]["date"]:
                    latest[k] = r
        recs = [r for r in recs if r["mode"].startswith(("ebb", "reactive")) and
                r.get("commit") in keep] + list(latest.values())
    for r in recs:
        if r.get("plan_ran") is False:	# its steps were the reactive mover's
            r["note"] = "the plan was not ready before the last step; not plotted"
    pts = [r for r in recs if r.get("ratio") and r.get("peak_gib") and r.get("plan_ran") is not False]
    missing = [r for r in recs if r not in pts]
    if not pts:
        raise SystemExit("plot.py: no record has both a ratio and a peak")
    W, H, L, R, T, B = 720, 460, 70, 30, 40, 60
    xs = [r["ratio"] for r in pts]
    ys = [r["peak_gib"] for r in pts]
    x0, x1 = min(0.9, min(xs)), max(xs) * 1.05
    y0, y1 = 0, max(ys) * 1.1
    X = lambda v: L + (v - x0) / (x1 - x0) * (W - L - R)
    Y = lambda v: H - B - (v - y0) / (y1 - y0) * (H - T - B)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H + 18 * len(missing)}" '
           'font-family="sans-serif" font-size="12">',
           f'<rect width="100%" height="100%" fill="white"/>',
           f'<text x="{W / 2}" y="22" text-anchor="middle" font-size="14">{html.escape(a.title)}</text>',
           f'<line x1="{L}" y1="{H - B}" x2="{W - R}" y2="{H - B}" stroke="black"/>',
           f'<line x1="{L}" y1="{T}" x2="{L}" y2="{H - B}" stroke="black"/>',
           f'<text x="{(L + W - R) / 2}" y="{H - 20}" text-anchor="middle">step time / step time '
           'without ebb</text>',
           f'<text x="18" y="{(T + H - B) / 2}" text-anchor="middle" transform="rotate(-90 18 '
           f'{(T + H - B) / 2})">NVML peak, GiB</text>']
    steps = 8
    for i in range(steps + 1):
        xv = x0 + (x1 - x0) * i / steps
        yv = y0 + (y1 - y0) * i / steps
        out.append(f'<text x="{X(xv)}" y="{H - B + 16}" text-anchor="middle">{xv:.2f}</text>')
        out.append(f'<text x="{L - 6}" y="{Y(yv) + 4}" text-anchor="end">{yv:.0f}</text>')
        out.append(f'<line x1="{L}" y1="{Y(yv)}" x2="{W - R}" y2="{Y(yv)}" stroke="#eee"/>')
    for wl in sorted({r["workload"] for r in pts}):
        curve = sorted((r for r in pts if r["workload"] == wl and r["mode"].startswith("ebb-limit")),
                       key=lambda r: r["peak_gib"])
        if len(curve) > 1:
            d = " ".join(f'{X(r["ratio"]):.1f},{Y(r["peak_gib"]):.1f}' for r in curve)
            out.append(f'<polyline points="{d}" fill="none" stroke="#1f77b4"/>')
    for r in pts:
        ebb = r["mode"].startswith("ebb")
        colour = "#1f77b4" if ebb else "#d62728" if r["mode"] == "baseline" else "#2ca02c"
        out.append(f'<circle cx="{X(r["ratio"]):.1f}" cy="{Y(r["peak_gib"]):.1f}" r="4" '
                   f'fill="{colour}"/>')
        label = f'{r["workload"]} a{r["accum"]} {r["mode"]} ({r["peak_gib"]:.1f} GiB, {r["ratio"]:.2f}x)'
        out.append(f'<text x="{X(r["ratio"]) + 7:.1f}" y="{Y(r["peak_gib"]) - 5:.1f}">'
                   f'{html.escape(label)}</text>')
    for i, r in enumerate(missing):
        out.append(f'<text x="{L}" y="{H + 4 + 18 * i}">{html.escape(r["workload"])} '
                   f'{html.escape(r["mode"])} at {html.escape(r.get("commit", "?"))}: '
                   f'{html.escape(r.get("note") or "no step time or peak")}</text>')
    out.append("</svg>")
    with open(a.out, "w") as f:
        f.write("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
