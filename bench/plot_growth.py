#!/usr/bin/env python3
"""Draws the growth run of gpu-bench as an SVG: time and device memory against the size reached.

    bench/plot_growth.py gpu-bench.json bench/growth.svg

Reads the "growth_series" object gpu-bench writes with --json (one point per appended chunk, from its
probe runs) and needs nothing beyond the Python standard library, so it runs wherever the bench does.
"""
import json
import math
import sys
from xml.sax.saxutils import escape

WIDTH, HEIGHT = 980, 420
PANEL_W, PANEL_H = 380, 300
MARGIN_LEFT, MARGIN_TOP = 70, 60
GAP = 120
COLOURS = {"hipxx": "#1f77b4", "baseline": "#d62728"}
LABELS = {"hipxx": "hipxx GrowableArray (map a chunk)", "baseline": "cuMemAlloc doubling + DtoD copy"}


def nice_ceiling(value):
    """The smallest 1, 2 or 5 times a power of ten at or above `value`, for a tidy axis end."""
    if value <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    return next(step * power for step in (1, 2, 5, 10) if step * power >= value)


def panel(origin_x, title, x_values, series, y_label):
    """One chart: an axis box, five ticks per axis and a polyline per series."""
    x_max = nice_ceiling(max(x_values))
    y_max = nice_ceiling(max(max(values) for values in series.values() if values))
    parts = [f'<g transform="translate({origin_x},{MARGIN_TOP})">',
             f'<text x="{PANEL_W / 2}" y="-20" text-anchor="middle" font-weight="bold">{escape(title)}</text>',
             f'<rect x="0" y="0" width="{PANEL_W}" height="{PANEL_H}" fill="none" stroke="#444"/>']
    for tick in range(6):
        x = PANEL_W * tick / 5
        y = PANEL_H - PANEL_H * tick / 5
        parts.append(f'<line x1="{x}" y1="{PANEL_H}" x2="{x}" y2="{PANEL_H + 5}" stroke="#444"/>')
        parts.append(f'<text x="{x}" y="{PANEL_H + 20}" text-anchor="middle">{x_max * tick / 5:g}</text>')
        parts.append(f'<line x1="0" y1="{y}" x2="{PANEL_W}" y2="{y}" stroke="#ddd"/>')
        parts.append(f'<text x="-8" y="{y + 4}" text-anchor="end">{y_max * tick / 5:g}</text>')
    parts.append(f'<text x="{PANEL_W / 2}" y="{PANEL_H + 42}" text-anchor="middle">size reached (GiB)</text>')
    parts.append(f'<text transform="translate(-52,{PANEL_H / 2}) rotate(-90)" text-anchor="middle">'
                 f'{escape(y_label)}</text>')
    for name, values in series.items():
        if not values:
            continue
        points = " ".join(f"{PANEL_W * x / x_max:.1f},{PANEL_H - PANEL_H * y / y_max:.1f}"
                          for x, y in zip(x_values, values))
        parts.append(f'<polyline points="{points}" fill="none" stroke="{COLOURS[name]}" stroke-width="2"/>')
    parts.append("</g>")
    return parts


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: plot_growth.py GPU_BENCH_JSON OUTPUT_SVG")
    with open(sys.argv[1], encoding="utf-8") as source:
        report = json.load(source)
    growth = report.get("growth_series") or {}
    sizes = growth.get("size_gib") or []
    if not sizes:
        sys.exit(f"{sys.argv[1]} has no growth series (run gpu-bench with the grow benchmark)")
    times = {"hipxx": growth.get("hipxx_ms", []), "baseline": growth.get("baseline_ms", [])}
    memory = {"hipxx": growth.get("hipxx_used_gib", []), "baseline": growth.get("baseline_used_gib", [])}
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
           'font-family="sans-serif" font-size="12">',
           f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
           f'<text x="{WIDTH / 2}" y="18" text-anchor="middle" font-size="14">'
           f'{escape("Growth in 64 MiB appends on " + report.get("device", "?") + ", " + report.get("date", ""))}</text>']
    svg += panel(MARGIN_LEFT, "time since the start", sizes, times, "elapsed (ms)")
    svg += panel(MARGIN_LEFT + PANEL_W + GAP, "most device memory held in the step", sizes, memory, "GiB")
    legend_y = HEIGHT - 14
    for index, name in enumerate(("hipxx", "baseline")):
        x = MARGIN_LEFT + index * 380
        svg.append(f'<line x1="{x}" y1="{legend_y - 4}" x2="{x + 24}" y2="{legend_y - 4}" '
                   f'stroke="{COLOURS[name]}" stroke-width="3"/>')
        svg.append(f'<text x="{x + 30}" y="{legend_y}">{escape(LABELS[name])}</text>')
    svg.append("</svg>")
    with open(sys.argv[2], "w", encoding="utf-8") as target:
        target.write("\n".join(svg) + "\n")


if __name__ == "__main__":
    main()
